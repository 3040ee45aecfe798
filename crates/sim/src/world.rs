//! The simulated world: nodes, links, agents, flows, and the event loop.
//!
//! One binary heap of `(time, sequence, event)` orders everything; the sequence number makes
//! ties deterministic. Links and agents each keep at most one "live" wake-up: a new heap entry
//! is pushed only when a component's deadline moves *earlier*; an entry whose time no longer
//! matches the component's recorded wake-up is stale and skipped, and a component woken
//! before its deadline simply has nothing to do (every `handle_timeout` tolerates that).

use crate::agent::{Agent, InterfaceInfo};
use crate::link::{DropReason, Link, LinkConfig, WireSize};
use crate::metrics::{FlowResult, LinkResult, RttSummary, RunResults, jain_index};
use crate::packet::{NodeId, Packet, Proto};
use crate::pcap::PcapWriter;
use adaptnet_core::Time;
use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Duration;
use thiserror::Error;

/// Index of a link direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);

/// Index of an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AgentId(pub u32);

/// Index of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub u32);

/// Errors building a world.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WorldError {
    /// Two nodes with one name.
    #[error("node {0:?} is defined twice")]
    DuplicateNode(String),
    /// Two links with one name.
    #[error("link {0:?} is defined twice")]
    DuplicateLink(String),
    /// A port is already bound on a node.
    #[error("port {port} ({proto:?}) is already in use on node {node}")]
    PortInUse {
        /// Node name.
        node: String,
        /// Protocol.
        proto: Proto,
        /// Port.
        port: u16,
    },
    /// No such link name.
    #[error("no link named {0:?}")]
    UnknownLink(String),
    /// No path between two nodes.
    #[error("no route from {from} to {to}")]
    NoRoute {
        /// Source node name.
        from: String,
        /// Destination node name.
        to: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    Link(u32),
    Agent(u32),
    Start(u32),
    Stop(u32),
    Sample,
}

#[derive(Debug)]
struct Node {
    name: String,
    agents: Vec<AgentId>,
    /// Bound ports; hosts have few agents, so a linear scan beats hashing.
    ports: Vec<((Proto, u16), AgentId)>,
    egress: Vec<LinkId>,
    /// First link on the path to each node (index = destination node).
    next_hop: Vec<Option<LinkId>>,
    /// Bytes delivered to this node (as destination or router).
    rx_bytes: u64,
}

struct LinkSlot {
    link: Link<Packet>,
    duplex: String,
    name: String,
    to: NodeId,
    wake: Option<Time>,
    capture: Option<usize>,
    queue_series: Vec<u64>,
}

struct AgentSlot {
    agent: Box<dyn Agent>,
    node: NodeId,
    wake: Option<Time>,
    flow: Option<(u32, bool)>,
    sent: u64,
    received: u64,
}

struct FlowSlot {
    name: String,
    kind: String,
    sender: AgentId,
    receiver: AgentId,
    start: Time,
    stop: Time,
    lost: u64,
    reverse_lost: u64,
    last_delivered: u64,
    series_bps: Vec<f64>,
    rtt: Vec<(Time, Duration)>,
}

/// A heap entry: ordered by time, then by insertion sequence (both packed in one integer, so
/// the heap compares a single `u128`); the event rides along.
#[derive(Clone, Copy, Debug)]
struct Scheduled {
    key: u128,
    event: Event,
}

impl Scheduled {
    fn time(&self) -> Time {
        Time::from_nanos((self.key >> 64) as u64)
    }
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

/// How a flow is registered with the world.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    /// Name for reports.
    pub name: String,
    /// Type for reports ("tcp", "cbr", …); "cbr" flows are left out of the fairness index.
    pub kind: String,
    /// The sending agent.
    pub sender: AgentId,
    /// The receiving agent.
    pub receiver: AgentId,
    /// When both agents start.
    pub start: Time,
    /// When the sender stops.
    pub stop: Time,
}

/// The simulator. Build it (nodes, links, agents, flows), then [`World::run_until`].
pub struct World {
    now: Time,
    seed: u64,
    heap: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    events: u64,
    nodes: Vec<Node>,
    links: Vec<LinkSlot>,
    agents: Vec<AgentSlot>,
    flows: Vec<FlowSlot>,
    captures: Vec<(String, PcapWriter)>,
    routes_ready: bool,
    sample_period: Duration,
    sample_times: Vec<Time>,
    unroutable: u64,
    unbound: u64,
    /// Nodes whose agents need re-polling after the current event.
    dirty: Vec<NodeId>,
    /// Packets that arrived and await handling, to avoid recursion.
    arrivals: VecDeque<(NodeId, Packet)>,
}

/// splitmix64: derives independent seeds for links and agents from the world seed.
pub fn mix_seed(seed: u64, tag: u64) -> u64 {
    let mut z = seed ^ tag.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl World {
    /// An empty world.
    pub fn new(seed: u64) -> World {
        World {
            now: Time::ZERO,
            seed,
            heap: BinaryHeap::new(),
            seq: 0,
            events: 0,
            nodes: Vec::new(),
            links: Vec::new(),
            agents: Vec::new(),
            flows: Vec::new(),
            captures: Vec::new(),
            routes_ready: false,
            sample_period: Duration::from_secs(1),
            sample_times: Vec::new(),
            unroutable: 0,
            unbound: 0,
            dirty: Vec::new(),
            arrivals: VecDeque::new(),
        }
    }

    /// Current virtual time.
    pub fn now(&self) -> Time {
        self.now
    }

    /// The world's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A seed for a component, derived from the world seed and a tag.
    pub fn derive_seed(&self, tag: u64) -> u64 {
        mix_seed(self.seed, tag)
    }

    /// Events processed so far.
    pub fn events_processed(&self) -> u64 {
        self.events
    }

    /// Sets the sampling period of goodput and queue series (default 1 s).
    pub fn set_sample_period(&mut self, period: Duration) {
        self.sample_period = period.max(Duration::from_micros(1));
    }

    /// Adds a host or router.
    pub fn add_node(&mut self, name: &str) -> Result<NodeId, WorldError> {
        if self.node_by_name(name).is_some() {
            return Err(WorldError::DuplicateNode(name.to_string()));
        }
        self.nodes.push(Node {
            name: name.to_string(),
            agents: Vec::new(),
            ports: Vec::new(),
            egress: Vec::new(),
            next_hop: Vec::new(),
            rx_bytes: 0,
        });
        self.routes_ready = false;
        Ok(NodeId(self.nodes.len() as u32 - 1))
    }

    /// The node with this name.
    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(i as u32))
    }

    /// A node's name.
    pub fn node_name(&self, id: NodeId) -> &str {
        self.nodes
            .get(id.0 as usize)
            .map_or("?", |n| n.name.as_str())
    }

    /// Adds a duplex link `name` between `a` and `b` with a configuration per direction.
    /// The directions are named `name:a->b` and `name:b->a`.
    pub fn add_link(
        &mut self,
        name: &str,
        a: NodeId,
        b: NodeId,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> Result<(LinkId, LinkId), WorldError> {
        if self.links.iter().any(|l| l.duplex == name) {
            return Err(WorldError::DuplicateLink(name.to_string()));
        }
        let ab = self.add_direction(name, a, b, a_to_b);
        let ba = self.add_direction(name, b, a, b_to_a);
        self.routes_ready = false;
        Ok((ab, ba))
    }

    fn add_direction(&mut self, duplex: &str, from: NodeId, to: NodeId, cfg: LinkConfig) -> LinkId {
        let id = LinkId(self.links.len() as u32);
        let seed = self.derive_seed(0x4c49_4e4b_0000_0000 | u64::from(id.0));
        let name = format!("{duplex}:{}->{}", self.node_name(from), self.node_name(to));
        self.links.push(LinkSlot {
            link: Link::new(cfg, seed),
            duplex: duplex.to_string(),
            name,
            to,
            wake: None,
            capture: None,
            queue_series: Vec::new(),
        });
        self.nodes[from.0 as usize].egress.push(id);
        id
    }

    /// The link direction with this full name (`name:a->b`).
    pub fn link_by_name(&self, name: &str) -> Option<LinkId> {
        self.links
            .iter()
            .position(|l| l.name == name)
            .map(|i| LinkId(i as u32))
    }

    /// A link direction.
    pub fn link(&self, id: LinkId) -> &Link<Packet> {
        &self.links[id.0 as usize].link
    }

    /// Captures both directions of duplex link `name` into one pcap.
    pub fn capture(&mut self, name: &str) -> Result<(), WorldError> {
        let idx = self.captures.len();
        let mut found = false;
        for slot in self.links.iter_mut().filter(|l| l.duplex == name) {
            slot.link.enable_capture();
            slot.capture = Some(idx);
            found = true;
        }
        if !found {
            return Err(WorldError::UnknownLink(name.to_string()));
        }
        self.captures.push((name.to_string(), PcapWriter::new()));
        Ok(())
    }

    /// The captures: (duplex link name, pcap).
    pub fn captures(&self) -> &[(String, PcapWriter)] {
        &self.captures
    }

    /// Binds an agent to `(proto, port)` on `node`.
    pub fn add_agent(
        &mut self,
        node: NodeId,
        proto: Proto,
        port: u16,
        agent: Box<dyn Agent>,
    ) -> Result<AgentId, WorldError> {
        let id = AgentId(self.agents.len() as u32);
        let n = &mut self.nodes[node.0 as usize];
        if n.ports.iter().any(|(k, _)| *k == (proto, port)) {
            return Err(WorldError::PortInUse {
                node: n.name.clone(),
                proto,
                port,
            });
        }
        n.ports.push(((proto, port), id));
        n.agents.push(id);
        self.agents.push(AgentSlot {
            agent,
            node,
            wake: None,
            flow: None,
            sent: 0,
            received: 0,
        });
        Ok(id)
    }

    /// Binds one more `(proto, port)` on the agent's node to an existing agent, for agents
    /// that own several connections (each with its own port). The agent tells its
    /// connections apart by the packets' destination port.
    pub fn add_port(&mut self, agent: AgentId, proto: Proto, port: u16) -> Result<(), WorldError> {
        let node = self.agents[agent.0 as usize].node;
        let n = &mut self.nodes[node.0 as usize];
        if n.ports.iter().any(|(k, _)| *k == (proto, port)) {
            return Err(WorldError::PortInUse {
                node: n.name.clone(),
                proto,
                port,
            });
        }
        n.ports.push(((proto, port), agent));
        Ok(())
    }

    /// Typed access to an agent.
    pub fn agent<T: Agent>(&self, id: AgentId) -> Option<&T> {
        self.agents
            .get(id.0 as usize)
            .and_then(|s| (s.agent.as_ref() as &dyn Any).downcast_ref::<T>())
    }

    /// Typed mutable access to an agent. The caller should not change what the agent
    /// transmits without the world re-polling it; prefer inputs through flows.
    pub fn agent_mut<T: Agent>(&mut self, id: AgentId) -> Option<&mut T> {
        self.agents
            .get_mut(id.0 as usize)
            .and_then(|s| (s.agent.as_mut() as &mut dyn Any).downcast_mut::<T>())
    }

    /// Registers a flow: schedules its agents' start and the sender's stop, and tags their
    /// packets for per-flow accounting.
    pub fn add_flow(&mut self, spec: FlowSpec) -> FlowId {
        let id = self.flows.len() as u32;
        self.agents[spec.sender.0 as usize].flow = Some((id, false));
        self.agents[spec.receiver.0 as usize].flow = Some((id, true));
        self.push(spec.start, Event::Start(spec.receiver.0));
        self.push(spec.start, Event::Start(spec.sender.0));
        self.push(spec.stop, Event::Stop(spec.sender.0));
        self.flows.push(FlowSlot {
            name: spec.name,
            kind: spec.kind,
            sender: spec.sender,
            receiver: spec.receiver,
            start: spec.start,
            stop: spec.stop,
            lost: 0,
            reverse_lost: 0,
            last_delivered: 0,
            series_bps: Vec::new(),
            rtt: Vec::new(),
        });
        FlowId(id)
    }

    /// A flow's (sender, receiver) agents, for typed inspection with [`World::agent`].
    pub fn flow_agents(&self, flow: FlowId) -> Option<(AgentId, AgentId)> {
        self.flows
            .get(flow.0 as usize)
            .map(|f| (f.sender, f.receiver))
    }

    /// Checks that every flow's endpoints can reach each other.
    pub fn check_routes(&mut self) -> Result<(), WorldError> {
        self.compute_routes();
        for f in &self.flows {
            let a = self.agents[f.sender.0 as usize].node;
            let b = self.agents[f.receiver.0 as usize].node;
            for (x, y) in [(a, b), (b, a)] {
                if x != y && self.nodes[x.0 as usize].next_hop[y.0 as usize].is_none() {
                    return Err(WorldError::NoRoute {
                        from: self.node_name(x).to_string(),
                        to: self.node_name(y).to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Shortest paths by hop count (BFS from every node); ties go to the link added first.
    fn compute_routes(&mut self) {
        if self.routes_ready {
            return;
        }
        let n = self.nodes.len();
        for src in 0..n {
            let mut first: Vec<Option<LinkId>> = vec![None; n];
            let mut seen = vec![false; n];
            seen[src] = true;
            let mut queue = VecDeque::new();
            for &l in &self.nodes[src].egress {
                let to = self.links[l.0 as usize].to.0 as usize;
                if !seen[to] {
                    seen[to] = true;
                    first[to] = Some(l);
                    queue.push_back(to);
                }
            }
            while let Some(u) = queue.pop_front() {
                for &l in &self.nodes[u].egress {
                    let to = self.links[l.0 as usize].to.0 as usize;
                    if !seen[to] {
                        seen[to] = true;
                        first[to] = first[u];
                        queue.push_back(to);
                    }
                }
            }
            self.nodes[src].next_hop = first;
        }
        self.routes_ready = true;
    }

    fn push(&mut self, at: Time, event: Event) {
        self.seq += 1;
        let key = (u128::from(at.as_nanos()) << 64) | u128::from(self.seq);
        self.heap.push(Reverse(Scheduled { key, event }));
    }

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
            self.drain_link(l as u32);
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
        while let Some((p, _why)) = slot.link.poll_dropped() {
            Self::count_loss(&mut self.flows, &p);
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
        if let Err((p, DropReason::QueueFull | DropReason::RandomLoss | DropReason::Outage)) =
            slot.link.enqueue(now, p)
        {
            Self::count_loss(&mut self.flows, &p);
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
