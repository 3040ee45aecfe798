//! Collecting a run's measurements.

use super::*;

#[allow(
    clippy::indexing_slicing,
    reason = "node, link, agent and flow ids are indices the world issued into its own vectors, \
              which only grow"
)]
impl World {
    /// Packets sent to a node with no route, and packets for an unbound port.
    pub fn undeliverable(&self) -> (u64, u64) {
        (self.unroutable, self.unbound)
    }

    /// Collects the run's measurements.
    pub fn results(&mut self, scenario: &str) -> RunResults {
        // Pick up RTT samples recorded after the last sample tick.
        for f in &mut self.flows {
            let sender = &mut self.agents[f.sender.0 as usize];
            f.rtt.extend(sender.agent.take_rtt_samples());
        }
        let end = self.now;
        let duration_s = end.as_secs_f64();
        let flows: Vec<FlowResult> = self
            .flows
            .iter()
            .map(|f| {
                let sender = &self.agents[f.sender.0 as usize];
                let receiver = &self.agents[f.receiver.0 as usize];
                let bytes = receiver.agent.delivered_bytes();
                let stop = f.stop.min(end);
                let active_s = (stop.as_secs_f64() - f.start.as_secs_f64()).max(1e-9);
                let mut counters: BTreeMap<String, f64> = BTreeMap::new();
                for (k, v) in sender.agent.counters() {
                    counters.insert(k.to_string(), v);
                }
                for (k, v) in receiver.agent.counters() {
                    counters.insert(format!("receiver_{k}"), v);
                }
                FlowResult {
                    name: f.name.clone(),
                    kind: f.kind.clone(),
                    from: self.node_name(sender.node).to_string(),
                    to: self.node_name(receiver.node).to_string(),
                    start_s: f.start.as_secs_f64(),
                    stop_s: stop.as_secs_f64(),
                    bytes_delivered: bytes,
                    goodput_bps: bytes as f64 * 8.0 / active_s,
                    goodput_series_bps: f.series_bps.clone(),
                    packets_sent: sender.sent,
                    packets_received: receiver.received,
                    packets_lost: f.lost,
                    reverse_packets_lost: f.reverse_lost,
                    rtt: RttSummary::from_samples(
                        &f.rtt.iter().map(|&(_, d)| d).collect::<Vec<_>>(),
                    ),
                    rtt_samples: f
                        .rtt
                        .iter()
                        .map(|&(t, d)| (t.as_secs_f64(), d.as_secs_f64() * 1e3))
                        .collect(),
                    counters,
                }
            })
            .collect();
        let links = self
            .links
            .iter()
            .map(|l| {
                let mean_rate = mean_capacity(l.link.config(), end);
                let utilization = if mean_rate > 0.0 && duration_s > 0.0 {
                    l.link.stats().delivered_bytes as f64 / (mean_rate * duration_s)
                } else {
                    0.0
                };
                LinkResult {
                    name: l.name.clone(),
                    stats: *l.link.stats(),
                    utilization,
                    queue_series_packets: l.queue_series.clone(),
                }
            })
            .collect();
        let fair: Vec<f64> = flows
            .iter()
            .filter(|f| f.kind != "cbr")
            .map(|f| f.goodput_bps)
            .collect();
        RunResults {
            scenario: scenario.to_string(),
            seed: self.seed,
            duration_s,
            sample_period_s: self.sample_period.as_secs_f64(),
            sample_times_s: self.sample_times.iter().map(|t| t.as_secs_f64()).collect(),
            jain_index: jain_index(&fair),
            flows,
            links,
            events: self.events,
        }
    }
}

/// Mean capacity of a link over `[0, end]`, in bytes per second.
fn mean_capacity(cfg: &LinkConfig, end: Time) -> f64 {
    let end_s = end.as_secs_f64();
    if end_s <= 0.0 {
        return cfg.bandwidth.rate_at(Time::ZERO);
    }
    cfg.bandwidth.capacity_bytes(end) / end_s
}
