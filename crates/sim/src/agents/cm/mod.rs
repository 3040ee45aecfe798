//! Congestion Manager agents (papers/003; `docs/design/cm.md` §5): the simulator's wiring of
//! the sans-IO CM in [`adaptnet_core::cm`].
//!
//! Every host that sends or receives CM flows has one [`CmHost`] — the host's sender-side
//! [`CongestionManager`] (a [`CmHandle`]) and its
//! receiver-side [`CmReceiver`] — shared by
//!
//! - one [`CmHostAgent`] bound to UDP port [`CM_PORT`]: it runs the CM's timers, sends its
//!   probes and the receiver CM's responses, and takes the CM's events (grants, `change_rate`);
//! - the host's CM flows: [`TcpCmSender`] (TCP/CM, §3.2.1), [`CmAudioSender`] (the layered
//!   audio server, §3.2.2) and [`CmUdpSender`] (a greedy sender on request/app_notify/notify,
//!   §3.1), and on the receiving host [`CmDatagramReceiver`], which counts probe-fed data for
//!   the receiver CM.
//!
//! # Why the host agent must be added after the flows of its host
//!
//! The world re-polls every agent of a host, in the order they were added, after any event on
//! that host (see [`crate::agent`]). Flows change the shared CM while they are polled (TCP/CM
//! asks for grants in `poll_transmit`, senders call `cm_notify`), so the host agent, which
//! reports the CM's next deadline and drains its queues, must be polled *last*: add it after
//! every flow agent of its host (the scenario builder does). Grants or rate changes that the
//! host agent finds for flows polled earlier in the same round make it ask for a wake-up at
//! the current instant, so those flows are polled again before time moves on.
//!
//! Events are routed as the digest prescribes: `Grant`s need no routing (a TCP/CM controller
//! reads its grant balance from the CM), `RateChange`s are left in the host's mailbox for the
//! flow's agent, which applies the latest one (`change_rate`) when it is next polled.

mod audio;
mod host;
mod tcp;
mod udp;

pub use audio::{CmAudioSender, CmDatagramReceiver, EncodingChange};
pub use host::CmHostAgent;
pub use tcp::TcpCmSender;
pub use udp::CmUdpSender;

use crate::agents::cbr::cbr_packet;
use crate::packet::{Addr, NodeId, Packet};
use adaptnet_core::Time;
use adaptnet_core::cbr::CbrHeader;
use adaptnet_core::cm::receiver::CmReceiver;
use adaptnet_core::cm::{
    CmConfig, CmHandle, CmStats, CongestionManager, FlowId, FlowKey, FlowQuery, PeerAddr,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// The UDP port of every host's CM control traffic (probes and responses): RFC 3124's number.
pub const CM_PORT: u16 = 3124;

/// The CM's name for a simulator node.
pub fn peer_addr(node: NodeId) -> PeerAddr {
    PeerAddr::from(node.0)
}

/// The node a CM peer address names, if it names one.
pub fn node_of(peer: PeerAddr) -> Option<NodeId> {
    u32::try_from(peer.0).ok().map(NodeId)
}

/// The key both ends use for a flow (papers/003 §2.2.2 per-flow reports): its port pair.
pub fn flow_key(src_port: u16, dst_port: u16) -> FlowKey {
    FlowKey((u64::from(src_port) << 16) | u64::from(dst_port))
}

struct HostInner {
    node: NodeId,
    cm: CmHandle,
    receiver: RefCell<CmReceiver>,
    /// Flows whose agents take `change_rate` callbacks.
    subscribed: RefCell<BTreeSet<FlowId>>,
    /// `change_rate` values not yet applied by their flow's agent (the latest per flow).
    rate_changes: RefCell<BTreeMap<FlowId, f64>>,
}

/// The CM state of one host, shared by its [`CmHostAgent`] and its CM flows' agents.
/// Cloning shares.
#[derive(Clone)]
pub struct CmHost(Rc<HostInner>);

impl CmHost {
    /// A host CM for `node` with `config`.
    pub fn new(node: NodeId, config: CmConfig) -> CmHost {
        CmHost(Rc::new(HostInner {
            node,
            cm: CmHandle::new(CongestionManager::new(config)),
            receiver: RefCell::new(CmReceiver::new()),
            subscribed: RefCell::new(BTreeSet::new()),
            rate_changes: RefCell::new(BTreeMap::new()),
        }))
    }

    /// The host.
    pub fn node(&self) -> NodeId {
        self.0.node
    }

    /// The sender-side CM (never hold a borrow of it while calling into a connection).
    pub fn cm(&self) -> &CmHandle {
        &self.0.cm
    }

    /// The receiver-side CM.
    pub fn receiver(&self) -> &RefCell<CmReceiver> {
        &self.0.receiver
    }

    /// Host-wide CM counters.
    pub fn stats(&self) -> CmStats {
        *self.0.cm.borrow().stats()
    }

    /// Routes `change_rate` callbacks of `flow` to its agent's mailbox.
    fn subscribe(&self, flow: FlowId) {
        self.0.subscribed.borrow_mut().insert(flow);
    }

    /// Leaves a `change_rate(rate)` for `flow` (replacing an older unapplied one) if its agent
    /// takes them; returns whether it was left.
    fn post_rate_change(&self, flow: FlowId, rate_bytes_per_s: f64) -> bool {
        if !self.0.subscribed.borrow().contains(&flow) {
            return false;
        }
        self.0
            .rate_changes
            .borrow_mut()
            .insert(flow, rate_bytes_per_s);
        true
    }

    /// Takes the latest unapplied `change_rate` for `flow`.
    fn take_rate_change(&self, flow: FlowId) -> Option<f64> {
        self.0.rate_changes.borrow_mut().remove(&flow)
    }

    /// `cm_query` for a flow, if it is open.
    pub fn query(&self, flow: FlowId) -> Option<FlowQuery> {
        self.0.cm.borrow().query(flow).ok()
    }
}

impl std::fmt::Debug for CmHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmHost")
            .field("node", &self.0.node)
            .finish()
    }
}

/// Host-wide CM counters as agent counters (prefixed `cm_host_`, the same on every CM flow of
/// a host).
fn host_counters(host: &CmHost) -> Vec<(&'static str, f64)> {
    let s = host.stats();
    vec![
        ("cm_host_decreases", s.decreases as f64),
        ("cm_host_restarts", s.restarts as f64),
        ("cm_host_aging_halvings", s.aging_halvings as f64),
        ("cm_host_probes_sent", s.probes_sent as f64),
        ("cm_host_responses_accepted", s.responses_accepted as f64),
        ("cm_host_granted_bytes", s.granted_bytes as f64),
        ("cm_host_ungranted_bytes", s.ungranted_bytes as f64),
    ]
}

/// The counters that end a probe-fed CM flow's list (audio, greedy UDP): what the CM measured
/// of the flow, once `closed`, then the host's.
fn closing_counters(closed: Option<&ClosedFlow>, host: &CmHost) -> Vec<(&'static str, f64)> {
    let mut v = Vec::new();
    if let Some(c) = closed {
        v.push(("probe_sent_bytes", c.probe_sent_bytes as f64));
        v.push(("probe_lost_bytes", c.probe_lost_bytes as f64));
    }
    v.extend(host_counters(host));
    v
}

/// A probe-fed CM datagram of `bytes` UDP payload bytes from `local` to `remote`: the CBR
/// header (sequence number `seq`, sent at `now`), then padding.
fn cm_datagram(local: Addr, remote: Addr, seq: u32, now: Time, bytes: u64) -> Option<Packet> {
    let header = CbrHeader { seq, sent_at: now };
    let payload = u32::try_from(bytes.saturating_sub(CbrHeader::LEN as u64)).ok()?;
    cbr_packet(local, remote, &header, payload)
}

/// What a CM flow's agent remembers of the flow when it closes (the CM forgets it).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClosedFlow {
    /// Bytes sent in probe-measured intervals.
    pub probe_sent_bytes: u64,
    /// Bytes lost in probe-measured intervals.
    pub probe_lost_bytes: u64,
    /// The flow's rate share at close, bytes/s (if valid).
    pub rate_bytes_per_s: Option<f64>,
}

impl ClosedFlow {
    fn from_query(q: &FlowQuery) -> ClosedFlow {
        ClosedFlow {
            probe_sent_bytes: q.probe_sent_bytes,
            probe_lost_bytes: q.probe_lost_bytes,
            rate_bytes_per_s: q.rate_bytes_per_s,
        }
    }
}

/// Closes `flow` on `host` (`cm_close`), returning its last query.
fn close_flow(host: &CmHost, now: Time, flow: FlowId) -> Option<ClosedFlow> {
    let snapshot = host.query(flow).map(|q| ClosedFlow::from_query(&q));
    let _ = host.cm().borrow_mut().close(now, flow);
    host.take_rate_change(flow);
    host.0.subscribed.borrow_mut().remove(&flow);
    snapshot
}

#[cfg(test)]
mod tcp_cm_behaviour;
#[cfg(test)]
mod tests;
