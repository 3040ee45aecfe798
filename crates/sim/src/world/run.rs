//! The event loop: links, agent timers and arrivals, processed in heap order.

use super::events::Event;
use super::*;

#[allow(
    clippy::indexing_slicing,
    reason = "node, link, agent and flow ids are indices the world issued into its own vectors, \
              which only grow"
)]
impl World {
    /// Runs until virtual time `end`, calling `progress` about every simulated second.
    pub fn run_until(&mut self, end: Time, progress: &mut dyn FnMut(Time)) {
        self.compute_routes();
        if self.sample_times.is_empty() && self.heap.iter().all(|e| e.0.event != Event::Sample) {
            self.push(self.now + self.sample_period, Event::Sample);
        }
        let mut next_progress = self.now + Duration::from_secs(1);
        while let Some(&Reverse(next)) = self.heap.peek() {
            let (t, ev) = (next.time(), next.event);
            if t > end {
                break;
            }
            self.heap.pop();
            self.now = t;
            self.events += 1;
            match ev {
                Event::Link(l) => self.on_link(l),
                Event::Agent(a) => self.on_agent_timer(a),
                Event::Start(a) => {
                    self.prepare_agent(a);
                    self.agents[a as usize].agent.start(t);
                    self.mark_dirty(self.agents[a as usize].node);
                }
                Event::Stop(a) => {
                    self.prepare_agent(a);
                    self.agents[a as usize].agent.stop(t);
                    self.mark_dirty(self.agents[a as usize].node);
                }
                Event::Sample => {
                    self.sample();
                    self.push(t + self.sample_period, Event::Sample);
                }
            }
            self.settle();
            if t >= next_progress {
                progress(t);
                next_progress = t + Duration::from_secs(1);
            }
        }
        self.now = self.now.max(end);
        // Losses and captured departures up to the end that no later event would report.
        for l in 0..self.links.len() {
            self.links[l].link.handle_timeout(self.now);
            self.drain_link(adaptnet_core::convert::usize_u32_sat(l));
        }
        self.settle();
        progress(self.now);
    }

    fn on_link(&mut self, l: u32) {
        let slot = &mut self.links[l as usize];
        if slot.wake != Some(self.now) {
            return;
        }
        slot.wake = None;
        slot.link.handle_timeout(self.now);
        self.drain_link(l);
    }

    fn drain_link(&mut self, l: u32) {
        let slot = &mut self.links[l as usize];
        if let Some(c) = slot.capture {
            while let Some((at, p)) = slot.link.poll_departed() {
                self.captures[c].1.record(at, &p);
            }
        }
        while let Some((p, why)) = slot.link.poll_dropped() {
            Self::count_loss(&mut self.flows, &p);
            Self::log_drop(&mut self.drop_log, self.now, l, &p, why);
        }
        let to = slot.to;
        while let Some(p) = slot.link.poll_delivered(self.now) {
            self.arrivals.push_back((to, p));
        }
        self.schedule_link(l);
    }

    fn count_loss(flows: &mut [FlowSlot], p: &Packet) {
        if let Some(f) = p.meta.flow.and_then(|f| flows.get_mut(f as usize)) {
            if p.meta.reverse {
                f.reverse_lost += 1;
            } else {
                f.lost += 1;
            }
        }
    }

    fn log_drop(log: &mut Option<Vec<DropRecord>>, at: Time, l: u32, p: &Packet, why: DropReason) {
        if let Some(log) = log.as_mut() {
            log.push(DropRecord {
                at,
                link: LinkId(l),
                flow: p.meta.flow,
                reverse: p.meta.reverse,
                payload_len: p.payload_len,
                reason: why,
            });
        }
    }

    fn schedule_link(&mut self, l: u32) {
        let slot = &mut self.links[l as usize];
        if let Some(d) = slot.link.poll_timeout() {
            let d = d.max(self.now);
            if slot.wake.is_none_or(|w| d < w) {
                slot.wake = Some(d);
                self.push(d, Event::Link(l));
            }
        }
    }

    fn on_agent_timer(&mut self, a: u32) {
        let slot = &mut self.agents[a as usize];
        if slot.wake != Some(self.now) {
            return;
        }
        slot.wake = None;
        self.prepare_agent(a);
        let slot = &mut self.agents[a as usize];
        slot.agent.handle_timeout(self.now);
        let node = slot.node;
        self.mark_dirty(node);
    }

    /// A host's interface counters.
    pub fn interface_info(&self, node: NodeId) -> InterfaceInfo {
        let n = &self.nodes[node.0 as usize];
        let mut info = InterfaceInfo {
            rx_bytes: n.rx_bytes,
            ..InterfaceInfo::default()
        };
        for l in &n.egress {
            let link = &self.links[l.0 as usize].link;
            info.queue_packets += link.queue_packets(self.now);
            info.queue_bytes += link.queue_bytes(self.now);
            info.tx_bytes += link.transmitted_bytes(self.now);
        }
        info
    }

    /// Gives the agent its host's interface counters, if it wants them.
    fn prepare_agent(&mut self, a: u32) {
        if !self.agents[a as usize].agent.wants_interface_info() {
            return;
        }
        let info = self.interface_info(self.agents[a as usize].node);
        self.agents[a as usize].agent.on_interface(self.now, &info);
    }

    fn mark_dirty(&mut self, node: NodeId) {
        if !self.dirty.contains(&node) {
            self.dirty.push(node);
        }
    }

    /// Processes arrivals and re-polls dirty hosts until nothing more happens at `now`.
    fn settle(&mut self) {
        loop {
            if let Some((node, p)) = self.arrivals.pop_front() {
                self.arrive(node, p);
                continue;
            }
            let Some(node) = self.dirty.pop() else {
                break;
            };
            for i in 0..self.nodes[node.0 as usize].agents.len() {
                let a = self.nodes[node.0 as usize].agents[i];
                self.poll_agent(a.0);
            }
        }
    }

    fn poll_agent(&mut self, a: u32) {
        let now = self.now;
        loop {
            let slot = &mut self.agents[a as usize];
            let Some(mut p) = slot.agent.poll_transmit(now) else {
                break;
            };
            slot.sent += 1;
            if let Some((flow, reverse)) = slot.flow {
                p.meta.flow = Some(flow);
                p.meta.reverse = reverse;
            }
            let node = slot.node;
            self.forward(node, p);
        }
        let slot = &mut self.agents[a as usize];
        if let Some(d) = slot.agent.poll_timeout() {
            let d = d.max(now);
            if slot.wake.is_none_or(|w| d < w) {
                slot.wake = Some(d);
                self.push(d, Event::Agent(a));
            }
        }
    }

    /// Sends a packet from `node` towards its destination.
    fn forward(&mut self, node: NodeId, p: Packet) {
        let hop = self.nodes[node.0 as usize]
            .next_hop
            .get(p.dst.node.0 as usize)
            .copied()
            .flatten();
        let Some(l) = hop else {
            self.unroutable += 1;
            Self::count_loss(&mut self.flows, &p);
            return;
        };
        let now = self.now;
        let slot = &mut self.links[l.0 as usize];
        if let Err((p, why)) = slot.link.enqueue(now, p) {
            Self::count_loss(&mut self.flows, &p);
            Self::log_drop(&mut self.drop_log, now, l.0, &p, why);
        }
        self.drain_link(l.0);
    }

    fn arrive(&mut self, node: NodeId, p: Packet) {
        self.nodes[node.0 as usize].rx_bytes += u64::from(p.wire_len());
        if p.dst.node != node {
            self.forward(node, p);
            return;
        }
        let key = (p.proto, p.dst.port);
        let Some(&(_, a)) = self.nodes[node.0 as usize]
            .ports
            .iter()
            .find(|(k, _)| *k == key)
        else {
            self.unbound += 1;
            return;
        };
        self.prepare_agent(a.0);
        let slot = &mut self.agents[a.0 as usize];
        slot.received += 1;
        slot.agent.handle_packet(self.now, p);
        self.mark_dirty(node);
    }

    fn sample(&mut self) {
        let period_s = self.sample_period.as_secs_f64();
        for f in &mut self.flows {
            let slot = &mut self.agents[f.receiver.0 as usize];
            let delivered = slot.agent.delivered_bytes();
            let delta = delivered.saturating_sub(f.last_delivered);
            f.last_delivered = delivered;
            f.series_bps.push(delta as f64 * 8.0 / period_s);
            let sender = &mut self.agents[f.sender.0 as usize];
            f.rtt.extend(sender.agent.take_rtt_samples());
        }
        for slot in &mut self.links {
            slot.queue_series.push(slot.link.queue_packets(self.now));
        }
        self.sample_times.push(self.now);
    }
}
