//! The simulated world: nodes, links, agents, flows, and the event loop.
//!
//! One binary heap of `(time, sequence, event)` orders everything; the sequence number makes
//! ties deterministic. Links and agents each keep at most one "live" wake-up: a new heap entry
//! is pushed only when a component's deadline moves *earlier*; an entry whose time no longer
//! matches the component's recorded wake-up is stale and skipped, and a component woken
//! before its deadline simply has nothing to do (every `handle_timeout` tolerates that).
//!
//! Files by concern: `ids` (identifiers and build errors), `events` (the heap), `build`
//! (nodes, links, agents, flows), `routing` (shortest paths), `run` (the event loop),
//! `results` (measurements at the end).

mod build;
mod env;
mod events;
mod ids;
mod results;
mod routing;
mod run;

pub use ids::{AgentId, FlowId, LinkId, WorldError};

use crate::agent::{Agent, InterfaceInfo};
use crate::link::{DropReason, Link, LinkConfig, WireSize};
use crate::metrics::{FlowResult, LinkResult, RttSummary, RunResults, jain_index};
use crate::packet::{NodeId, Packet, Proto};
use crate::pcap::PcapWriter;
use adaptnet_core::Time;
use events::Scheduled;
use std::any::Any;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Duration;

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

/// A packet lost inside the network, as recorded by the drop log
/// ([`World::enable_drop_log`]): what a global monitor needs to tell why each packet was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropRecord {
    /// When the loss was reported (the link reports a loss when it is advanced to its time).
    pub at: Time,
    /// The link that lost it.
    pub link: LinkId,
    /// The packet's flow, if it belongs to one.
    pub flow: Option<u32>,
    /// True for the receiver → sender direction of its flow.
    pub reverse: bool,
    /// The packet's payload bytes (0 for a pure ACK).
    pub payload_len: u32,
    /// Why it was lost.
    pub reason: DropReason,
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
    /// Every in-network loss, when enabled.
    drop_log: Option<Vec<DropRecord>>,
}

/// splitmix64: derives independent seeds for links and agents from the world seed.
pub fn mix_seed(seed: u64, tag: u64) -> u64 {
    let mut z = seed ^ tag.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
