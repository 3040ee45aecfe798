//! Measurements a run produces: per-flow goodput series, packet counts, RTT summaries,
//! queue occupancy, and Jain's fairness index.

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Jain's fairness index of a set of allocations: (Σx)² / (n·Σx²); 1 is perfectly fair,
/// 1/n is maximally unfair. An empty or all-zero set counts as fair.
pub fn jain_index(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if sq <= 0.0 { 1.0 } else { sum * sum / (n * sq) }
}

/// Summary statistics of RTT samples, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RttSummary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min_ms: f64,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
}

impl RttSummary {
    /// Summarises samples (order irrelevant).
    pub fn from_samples(samples: &[Duration]) -> RttSummary {
        if samples.is_empty() {
            return RttSummary::default();
        }
        let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        let at = |i: usize| ms.get(i).copied().unwrap_or(0.0);
        let pct = |p: f64| {
            let i = adaptnet_core::convert::f64_u64_sat(((ms.len() - 1) as f64 * p).round());
            at(usize::try_from(i).unwrap_or(usize::MAX))
        };
        RttSummary {
            count: ms.len() as u64,
            min_ms: at(0),
            mean_ms: ms.iter().sum::<f64>() / ms.len() as f64,
            p50_ms: pct(0.5),
            p95_ms: pct(0.95),
            max_ms: at(ms.len() - 1),
        }
    }
}

/// What one flow did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowResult {
    /// Flow name (from the scenario).
    pub name: String,
    /// Flow type ("tcp", "cbr", …).
    pub kind: String,
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Start time, seconds.
    pub start_s: f64,
    /// Stop time, seconds (capped at the run's end).
    pub stop_s: f64,
    /// Application bytes delivered to the receiver.
    pub bytes_delivered: u64,
    /// Mean goodput over the flow's active period, bits per second.
    pub goodput_bps: f64,
    /// Goodput in each sampling interval, bits per second (aligned with
    /// [`RunResults::sample_times_s`]).
    pub goodput_series_bps: Vec<f64>,
    /// Packets the sending side transmitted.
    pub packets_sent: u64,
    /// Packets of the sending side that reached the receiving host.
    pub packets_received: u64,
    /// Packets of the sending side lost in the network (queue drops, random loss, outages).
    pub packets_lost: u64,
    /// Packets of the receiving side (ACKs, responses) lost in the network.
    pub reverse_packets_lost: u64,
    /// RTT statistics reported by the sending side.
    pub rtt: RttSummary,
    /// The RTT samples behind `rtt` as (time s, RTT ms), at most one per 10 ms; left out of
    /// the JSON (written to `rtt.csv` instead).
    #[serde(skip)]
    pub rtt_samples: Vec<(f64, f64)>,
    /// Protocol-specific counters (retransmissions, timeouts, …).
    pub counters: BTreeMap<String, f64>,
}

/// What one link direction did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkResult {
    /// Link name with direction, e.g. `bottleneck:left->right`.
    pub name: String,
    /// Counters.
    pub stats: crate::link::LinkStats,
    /// Delivered bytes over the run as a fraction of the mean capacity.
    pub utilization: f64,
    /// Packets waiting in the queue at each sample time.
    pub queue_series_packets: Vec<u64>,
}

/// Everything a run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResults {
    /// Scenario name.
    pub scenario: String,
    /// Seed used.
    pub seed: u64,
    /// Simulated duration, seconds.
    pub duration_s: f64,
    /// Sampling period of the series, seconds.
    pub sample_period_s: f64,
    /// End time of each sampling interval, seconds.
    pub sample_times_s: Vec<f64>,
    /// Per-flow results, in scenario order.
    pub flows: Vec<FlowResult>,
    /// Per-link-direction results.
    pub links: Vec<LinkResult>,
    /// Jain's index over the mean goodput of all flows except CBR cross traffic.
    pub jain_index: f64,
    /// Events processed.
    pub events: u64,
}

impl RunResults {
    /// The flow with this name.
    pub fn flow(&self, name: &str) -> Option<&FlowResult> {
        self.flows.iter().find(|f| f.name == name)
    }

    /// The link direction with this name.
    pub fn link(&self, name: &str) -> Option<&LinkResult> {
        self.links.iter().find(|l| l.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_bounds() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert_eq!(jain_index(&[]), 1.0);
        let j = jain_index(&[1.0, 2.0]);
        assert!((j - 0.9).abs() < 1e-12, "{j}");
    }

    #[test]
    fn rtt_summary_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = RttSummary::from_samples(&samples);
        assert_eq!(s.count, 100);
        assert_eq!(s.min_ms, 1.0);
        assert_eq!(s.max_ms, 100.0);
        assert!((s.mean_ms - 50.5).abs() < 1e-9);
        assert_eq!(s.p95_ms, 95.0);
    }
}
