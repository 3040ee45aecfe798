//! Agents: the protocol endpoints that live on simulated hosts.
//!
//! An agent wraps one or more sans-IO state machines from `adaptnet-core` and translates
//! between them and [`Packet`]s. The world drives every agent the same way the core
//! conventions prescribe: inputs (`start`, `handle_packet`, `handle_timeout`), then
//! `poll_transmit` until `None`, then `poll_timeout` to arm the next wake-up.
//!
//! After any input to any agent on a host, the world re-polls *all* agents on that host, so
//! agents sharing host-wide state (a Congestion Manager, say) see each other's effects.

use crate::packet::Packet;
use adaptnet_core::Time;
use std::any::Any;
use std::time::Duration;

/// A host's network-interface counters, summed over its outgoing links.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InterfaceInfo {
    /// Packets waiting in the outgoing queues (not counting ones being transmitted).
    pub queue_packets: u64,
    /// Bytes waiting in the outgoing queues.
    pub queue_bytes: u64,
    /// Bytes that have left the host's transmitters since the start (cumulative).
    pub tx_bytes: u64,
    /// Bytes delivered to the host since the start (cumulative).
    pub rx_bytes: u64,
}

/// A protocol endpoint on a simulated host. Experiments inspect agents by type through
/// `&dyn Agent` → `&dyn Any` upcasting (see [`World::agent`](crate::world::World::agent)).
pub trait Agent: Any {
    /// The flow starts (called at its start time).
    fn start(&mut self, _now: Time) {}

    /// The flow stops (called at its stop time): stop generating new data.
    fn stop(&mut self, _now: Time) {}

    /// A packet addressed to this agent arrived.
    fn handle_packet(&mut self, now: Time, packet: Packet);

    /// The time returned by `poll_timeout` has come (or a wake-up was requested earlier and
    /// the agent must tolerate being called before its deadline).
    fn handle_timeout(&mut self, now: Time);

    /// The next packet to send, if any.
    fn poll_transmit(&mut self, now: Time) -> Option<Packet>;

    /// When the agent next needs `handle_timeout`.
    fn poll_timeout(&self) -> Option<Time>;

    /// Application bytes delivered so far (receiving side); used for goodput series.
    fn delivered_bytes(&self) -> u64 {
        0
    }

    /// Round-trip samples recorded since the last call (sending side).
    fn take_rtt_samples(&mut self) -> Vec<(Time, Duration)> {
        Vec::new()
    }

    /// Named counters for the run summary.
    fn counters(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Whether the agent wants its host's interface counters (see [`Agent::on_interface`]).
    fn wants_interface_info(&self) -> bool {
        false
    }

    /// The host's interface counters, given before each input when
    /// [`Agent::wants_interface_info`] is true (what a real host reads from its NIC).
    fn on_interface(&mut self, _now: Time, _info: &InterfaceInfo) {}
}
