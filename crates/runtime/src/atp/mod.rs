//! NAI/ATP over UDP (papers/000): the ATP transport of [`crate::message`]. One endpoint owns a
//! UDP socket and a driver (the crate's one driver loop) over core's
//! [`Endpoint`](adaptnet_core::atp::endpoint::Endpoint) — handshakes with retry tokens,
//! demultiplexing, keep-alive, CLOSE, and each connection's ATP in both directions. Every
//! protocol decision is core's; this module moves datagrams, reads the interface counters
//! ATP's estimator wants ([`crate::iface`]), and hands core's events to the application.
//!
//! Open an ATP endpoint with [`Endpoint::bind`](crate::message::Endpoint::bind) and
//! [`EndpointOptions::client`](crate::message::EndpointOptions::client)`(Transport::Atp)`
//! (or `server`); [`AtpOptions`] is its transport-specific part.
//!
//! # ATP's bounds
//! Messages, queues, notifications, buffered bytes and connections are core's
//! ([`EndpointConfig`]). Each connection's receiver advertises a window (core's
//! [`adaptnet_core::spp::window`]): the smaller of core's `receive_window_bytes` (128 MB by
//! default, twice the largest message a sender buffers, so an urgent message fits beside
//! it) and the bytes the connection's inbox holds unread (`unread_bytes_max`); messages past
//! the inbox's bound in messages wait in the driver until the application reads. A
//! receiving application that reads slowly slows its sender; nothing is dropped and the
//! connection stays open. `Delivered` means the
//! peer's inbox has the message (it is readable there even after the connection ends).
//!
//! # A silent or dead peer
//! Callback timers fire at their deadlines whatever the peer does. A peer that does not
//! answer for one RTO gets only PINGs, backed off to one a second; after `silent_timeout`
//! (8 s, [`LivenessConfig`](adaptnet_core::session::LivenessConfig)) the connection ends
//! ([`ConnectionError::TimedOut`](crate::error::ConnectionError::TimedOut)), every message
//! whose fate is unknown ends `Abandoned`, and the end is logged.

mod app;
mod driver;
mod state;
#[cfg(test)]
mod tests;

use crate::message::{Endpoint, EndpointOptions, TransportOptions};
use adaptnet_core::atp::endpoint::{EndpointConfig, EndpointStats};
use std::io;
use std::time::Duration;

/// Which interface's counters feed ATP's estimator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InterfaceChoice {
    /// The interface that holds the source address used to reach the first peer.
    Auto,
    /// A named interface (e.g. `eth0`).
    Named(String),
    /// None: ATP counts its own datagrams (as when the counters cannot be read).
    Off,
}

/// ATP's own settings of an endpoint.
#[derive(Clone, Debug)]
pub struct AtpOptions {
    /// Core's endpoint configuration (ATP, handshake, liveness, connection bound). Its
    /// `server` token key is drawn at bind for a server endpoint.
    pub core: EndpointConfig,
    /// Where the estimator's interface counters come from.
    pub interface: InterfaceChoice,
    /// How often interface counters are read, at most.
    pub interface_poll: Duration,
    /// Socket receive and send buffer to ask for, bytes (see
    /// [`grow_socket_buffers`](crate::iface::grow_socket_buffers)).
    pub socket_buffer_bytes: usize,
}

impl Default for AtpOptions {
    /// Defaults suited to a real host: ATP's timer granularity set to 2 ms (an OS timer may
    /// fire that late, and pacing must not stall on it).
    fn default() -> AtpOptions {
        let mut core = EndpointConfig::client();
        core.atp.timer_granularity = Duration::from_millis(2);
        AtpOptions {
            core,
            interface: InterfaceChoice::Auto,
            interface_poll: Duration::from_millis(10),
            socket_buffer_bytes: 8 << 20,
        }
    }
}

impl EndpointOptions {
    /// ATP's settings, if these options run ATP.
    pub fn atp_mut(&mut self) -> Option<&mut AtpOptions> {
        match &mut self.transport {
            TransportOptions::Atp(a) => Some(a),
            TransportOptions::Baseline(_) => None,
        }
    }
}

/// An ATP connection's transport counters and rates.
#[derive(Clone, Debug, PartialEq)]
pub struct AtpConnectionStats {
    /// SPP's counters for what this side sent.
    pub spp: adaptnet_core::spp::SppStats,
    /// Smoothed RTT, if measured.
    pub srtt: Option<Duration>,
    /// The rate ATP paces at (datagram bytes per second).
    pub pacing_bytes_per_s: f64,
    /// Packet pairs sent.
    pub packet_pairs: u64,
    /// Datagrams from the peer that did not parse.
    pub malformed: u64,
    /// The default rate control's state and counters (`None` with Figure 3's estimator).
    pub control: Option<ControlState>,
}

/// What the rate control ([`adaptnet_core::atp::control`]) stands at.
#[derive(Clone, Debug, PartialEq)]
pub struct ControlState {
    /// Its phase.
    pub phase: adaptnet_core::atp::control::Phase,
    /// The bottleneck rate measured, datagram bytes per second.
    pub bottleneck_bytes_per_s: f64,
    /// The minimum RTT.
    pub min_rtt: Option<Duration>,
    /// The most bytes it lets be in flight (BBR's cap: two bandwidth-delay products plus
    /// the allowances for batching).
    pub cwnd_bytes: u64,
    /// Counters (queue reactions, stalls, filler trains).
    pub stats: adaptnet_core::atp::control::ControlStats,
}

/// An ATP endpoint's own counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AtpEndpointStats {
    /// Core's counters of dropped and statelessly answered datagrams.
    pub core: EndpointStats,
    /// The interface whose counters feed the estimator, if any.
    pub interface: Option<String>,
}

/// Starts an ATP endpoint's driver on `socket`.
pub(crate) fn start(
    socket: tokio::net::UdpSocket,
    options: EndpointOptions,
) -> io::Result<Endpoint> {
    let local_addr = socket.local_addr()?;
    let (endpoint, wiring) = Endpoint::wire(&options, local_addr, None);
    wiring.start(options.shutdown_timeout, |incoming, handles| {
        driver::AtpDriver::new(socket, options, incoming, handles)
    })?;
    Ok(endpoint)
}
