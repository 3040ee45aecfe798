//! The ATP endpoint for real networks (sans-IO): one UDP socket's worth of connections,
//! their handshakes and their demultiplexing, with every protocol decision made here so the
//! runtime only moves bytes and keeps time.
//!
//! # Calling pattern
//!
//! ```
//! use adaptnet_core::Time;
//! use adaptnet_core::atp::endpoint::{Endpoint, EndpointConfig, EndpointEvent};
//!
//! let server_addr = "10.0.0.2:7000".parse().unwrap();
//! let client_addr = "10.0.0.1:5000".parse().unwrap();
//! let mut server = Endpoint::new(EndpointConfig::server([7; 32]));
//! let mut client = Endpoint::new(EndpointConfig::client());
//! let now = Time::ZERO;
//! let id = client.connect(now, server_addr, 42).unwrap();
//! let mut buf = [0u8; 2048];
//! // Shuttle datagrams both ways until the handshake is done (a real engine uses sockets).
//! for _ in 0..4 {
//!     while let Some(t) = client.poll_transmit(now, &mut buf) {
//!         assert_eq!(t.destination, server_addr);
//!         server.handle_datagram(now, client_addr, &buf[..t.len]);
//!     }
//!     while let Some(t) = server.poll_transmit(now, &mut buf) {
//!         assert_eq!(t.destination, client_addr);
//!         client.handle_datagram(now, server_addr, &buf[..t.len]);
//!     }
//! }
//! assert_eq!(client.poll_event(), Some(EndpointEvent::Connected(id)));
//! assert!(matches!(server.poll_event(), Some(EndpointEvent::Incoming(_, a)) if a == client_addr));
//! ```
//!
//! After every input, drain `poll_transmit` (each datagram to its address) and `poll_event`;
//! arm one timer at `poll_timeout` and call `handle_timeout` when it fires.
//!
//! # Call order (both engines, the simulator's `AtpEndpointAgent` and the runtime's driver)
//!
//! ```text
//! inputs:        handle_datagram(now, peer, bytes)      // every datagram read
//!                handle_interface(now, total, queued)   // interface counters, when read
//!                handle_timeout(now)                    // once poll_timeout() has passed
//! application:   connect(now, peer, client_id)          // client
//!                send(now, id, queue, bytes, opts)      // → MessageId or AppError
//!                control(now, id, message, op)          // cancel/defer/resume/priority/timer
//!                close(now, id, linger)
//! after each:    drain poll_transmit(now, buf)          // each datagram to its destination
//!                drain poll_event()                     // Connected, Incoming, Delivered,
//!                                                       // outcomes, Closed, …
//!                arm one timer at poll_timeout()
//! ```
//!
//! The application's calls are made here by connection id, or on the connection
//! ([`Endpoint::connection_mut`], see [`AtpConnection::send`] and its neighbours); an engine
//! never reaches into the connection's sender or scheduler. A message arrives whole as
//! [`ConnEvent::Delivered`]; each message sent gets exactly one outcome, as
//! [`ConnEvent::Nai`] carrying [`NaiEvent::Outcome`](crate::nai::NaiEvent::Outcome)
//! (`Abandoned` for those still live when the connection ends).
//!
//! # Bounds and robustness
//! * No state for a peer before it echoes a token ([`crate::session::token`]); HELLOs shorter
//!   than [`crate::session::wire::MIN_HELLO_BYTES`] are dropped; RETRYs are
//!   smaller than the HELLO they answer.
//! * At most [`EndpointConfig::max_connections`]; a validated HELLO beyond is answered with
//!   CLOSE (`Shutdown`).
//! * Datagrams from unknown peers that are not HELLOs, and malformed datagrams, are counted
//!   in [`EndpointStats`] and dropped.
//! * At most [`MAX_PENDING_REPLIES`] stateless replies wait to be sent; beyond, HELLOs are
//!   dropped unanswered (the client retransmits).

mod app;
mod connection;

pub use app::{AppError, ConnectionStats, MessageControl};
pub use connection::{AtpConnection, ConnEvent};

use super::AtpConfig;
use crate::session::token::TokenConfig;
use crate::session::wire::{MIN_HELLO_BYTES, is_session};
use crate::session::{
    ClientHandshake, CloseReason, HandshakeConfig, HandshakeState, LivenessConfig, SessionRepr,
};
use crate::time::Time;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use thiserror::Error;

/// An endpoint's receive window by default: twice the sender's own default buffer
/// ([`AtpConfig::max_buffered_bytes`]), so that while the largest message the peer can send
/// is held, an urgent one still fits beside it.
pub const DEFAULT_RECEIVE_WINDOW_BYTES: u64 = 128 << 20;

/// Most stateless replies (RETRY, CLOSE) queued for sending.
pub const MAX_PENDING_REPLIES: usize = 64;

/// Names a connection within its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(pub u64);

/// Endpoint configuration.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Every connection's ATP configuration.
    pub atp: AtpConfig,
    /// Client handshake timing.
    pub handshake: HandshakeConfig,
    /// Keep-alive and idle timeout.
    pub liveness: LivenessConfig,
    /// Most connections at once (open and connecting).
    pub max_connections: usize,
    /// `Some`: accept incoming connections, issuing tokens with this configuration.
    pub server: Option<TokenConfig>,
}

impl EndpointConfig {
    /// A client-only endpoint with default limits, and receiver flow control with a window
    /// of [`DEFAULT_RECEIVE_WINDOW_BYTES`] (the engine reports what its application takes
    /// with [`AtpConnection::handle_consumed`]).
    pub fn client() -> EndpointConfig {
        let mut atp = AtpConfig::default();
        atp.spp.receive_window_bytes = Some(DEFAULT_RECEIVE_WINDOW_BYTES);
        EndpointConfig {
            atp,
            handshake: HandshakeConfig::default(),
            liveness: LivenessConfig::default(),
            max_connections: 256,
            server: None,
        }
    }

    /// An endpoint that also accepts connections; `key` signs retry tokens (draw it from a
    /// cryptographic RNG).
    pub fn server(key: [u8; 32]) -> EndpointConfig {
        EndpointConfig {
            server: Some(TokenConfig::new(key)),
            ..EndpointConfig::client()
        }
    }
}

/// Why an endpoint call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum EndpointError {
    /// `max_connections` reached.
    #[error("too many connections (limit {0})")]
    TooManyConnections(usize),
    /// There is already a connection with this peer address.
    #[error("already connected to {0}")]
    AlreadyConnected(SocketAddr),
}

/// What happened at the endpoint.
#[derive(Clone, Debug, PartialEq)]
pub enum EndpointEvent {
    /// An outgoing connection was accepted by the server.
    Connected(ConnectionId),
    /// The server did not answer (or refused): the connection is gone.
    ConnectFailed(ConnectionId),
    /// A peer connected (server side).
    Incoming(ConnectionId, SocketAddr),
    /// Something on an established connection. After `ConnEvent::Closed` the id is gone.
    Connection(ConnectionId, ConnEvent),
}

/// Counters of what the endpoint dropped or answered statelessly.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct EndpointStats {
    /// Datagrams that did not parse.
    pub malformed: u64,
    /// Datagrams from peers without a connection that were not HELLOs.
    pub unknown_peer: u64,
    /// HELLOs below the anti-amplification size.
    pub short_hellos: u64,
    /// RETRYs sent.
    pub retries_sent: u64,
    /// HELLOs with a token that did not validate.
    pub bad_tokens: u64,
    /// Validated HELLOs refused because the endpoint was full.
    pub refused_full: u64,
    /// Stateless replies dropped because the reply queue was full.
    pub replies_dropped: u64,
}

#[derive(Debug)]
enum Entry {
    Connecting(ClientHandshake),
    Open {
        conn: Box<AtpConnection>,
        /// Server side: an ACCEPT is owed (after the HELLO, or a repeated HELLO).
        accept_due: bool,
    },
}

/// A datagram [`Endpoint::poll_transmit`] wrote into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Where it goes.
    pub destination: SocketAddr,
    /// Its length, from the start of the buffer.
    pub len: usize,
    /// Whether the engine may send it coalesced with neighbouring datagrams of the same size
    /// to the same destination (one UDP GSO super-packet). True for DATA. False for the
    /// estimator's packet pairs and trains — their arrival gaps are the measurement, and a
    /// coalesced run crosses a virtual link (loopback, veth) as one buffer with one
    /// timestamp — and for handshake, acknowledgement and control datagrams (sent alone, for
    /// simplicity: they are few).
    pub coalesce: bool,
}

impl Transmit {
    fn single(destination: SocketAddr, len: usize) -> Transmit {
        Transmit {
            destination,
            len,
            coalesce: false,
        }
    }
}

/// An ATP endpoint: handshakes, connections, demultiplexing by peer address.
///
/// Call order (the module docs have it in full): inputs (`handle_datagram`,
/// `handle_interface`, `handle_timeout` once `poll_timeout` has passed) and application calls
/// (`connect`, `send`, `control`, `close`, or the calls of [`AtpConnection`] reached with
/// [`Endpoint::connection_mut`]); after each, drain `poll_transmit`, then `poll_event`, then
/// arm one timer at `poll_timeout`.
#[derive(Debug)]
pub struct Endpoint {
    config: EndpointConfig,
    conns: BTreeMap<ConnectionId, (SocketAddr, Entry)>,
    by_addr: HashMap<SocketAddr, ConnectionId>,
    next_id: u64,
    /// Round-robin cursor over connections for `poll_transmit`.
    cursor: u64,
    replies: VecDeque<(SocketAddr, SessionRepr)>,
    events: VecDeque<EndpointEvent>,
    stats: EndpointStats,
}

impl Endpoint {
    /// An endpoint with no connections.
    pub fn new(config: EndpointConfig) -> Endpoint {
        Endpoint {
            config,
            conns: BTreeMap::new(),
            by_addr: HashMap::new(),
            next_id: 0,
            cursor: 0,
            replies: VecDeque::new(),
            events: VecDeque::new(),
            stats: EndpointStats::default(),
        }
    }

    /// What was dropped or answered statelessly.
    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// Connections (open and connecting).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Starts connecting to `peer`; `client_id` should be random (the engine draws it).
    /// [`EndpointEvent::Connected`] or [`EndpointEvent::ConnectFailed`] follows.
    pub fn connect(
        &mut self,
        _now: Time,
        peer: SocketAddr,
        client_id: u64,
    ) -> Result<ConnectionId, EndpointError> {
        if self.by_addr.contains_key(&peer) {
            return Err(EndpointError::AlreadyConnected(peer));
        }
        if self.conns.len() >= self.config.max_connections {
            return Err(EndpointError::TooManyConnections(
                self.config.max_connections,
            ));
        }
        let hs = ClientHandshake::new(self.config.handshake.clone(), client_id);
        Ok(self.insert(peer, Entry::Connecting(hs)))
    }

    fn insert(&mut self, peer: SocketAddr, entry: Entry) -> ConnectionId {
        let id = ConnectionId(self.next_id);
        self.next_id += 1;
        self.conns.insert(id, (peer, entry));
        self.by_addr.insert(peer, id);
        id
    }

    /// Sends a message with its bytes on connection `id` ([`AtpConnection::send`]).
    pub fn send(
        &mut self,
        now: Time,
        id: ConnectionId,
        queue: crate::nai::QueueId,
        data: impl Into<bytes::Bytes>,
        opts: crate::nai::SendOptions,
    ) -> Result<crate::nai::MessageId, AppError> {
        self.connection_mut(id)
            .ok_or(AppError::UnknownConnection(id.0))?
            .send(now, queue, data, opts)
    }

    /// Applies `op` to message `message` of connection `id` ([`AtpConnection::control`]).
    pub fn control(
        &mut self,
        now: Time,
        id: ConnectionId,
        message: crate::nai::MessageId,
        op: MessageControl,
    ) -> Result<(), AppError> {
        self.connection_mut(id)
            .ok_or(AppError::UnknownConnection(id.0))?
            .control(now, message, op)
    }

    /// An established connection, for application calls (send, control, queues, bandwidth
    /// notifications, queries; see `app.rs`).
    pub fn connection_mut(&mut self, id: ConnectionId) -> Option<&mut AtpConnection> {
        match self.conns.get_mut(&id) {
            Some((_, Entry::Open { conn, .. })) => Some(conn),
            _ => None,
        }
    }

    /// An established connection, for queries.
    pub fn connection(&self, id: ConnectionId) -> Option<&AtpConnection> {
        match self.conns.get(&id) {
            Some((_, Entry::Open { conn, .. })) => Some(conn),
            _ => None,
        }
    }

    /// Every connection's id (connecting and open), in order.
    pub fn connection_ids(&self) -> impl Iterator<Item = ConnectionId> + '_ {
        self.conns.keys().copied()
    }

    /// The peer address of a connection.
    pub fn peer(&self, id: ConnectionId) -> Option<SocketAddr> {
        self.conns.get(&id).map(|(a, _)| *a)
    }

    /// Interface counters for every connection's estimator.
    pub fn handle_interface(&mut self, now: Time, total_bytes: u64, queue_packets: u32) {
        for (_, entry) in self.conns.values_mut() {
            if let Entry::Open { conn, .. } = entry {
                conn.handle_interface(now, total_bytes, queue_packets);
            }
        }
    }

    /// A datagram from `peer`.
    pub fn handle_datagram(&mut self, now: Time, peer: SocketAddr, bytes: &[u8]) {
        let Some(&id) = self.by_addr.get(&peer) else {
            self.handle_stranger(now, peer, bytes);
            return;
        };
        let Some((_, entry)) = self.conns.get_mut(&id) else {
            return;
        };
        match entry {
            Entry::Connecting(hs) => {
                let Ok(p) = SessionRepr::parse(bytes) else {
                    self.stats.malformed += 1;
                    return;
                };
                hs.handle_packet(now, &p);
                self.advance_handshake(now, id);
            }
            Entry::Open { conn, accept_due } => {
                if is_session(bytes)
                    && let Ok(SessionRepr::Hello { client_id, .. }) = SessionRepr::parse(bytes)
                {
                    // Our ACCEPT was lost: the client asks again with the same id.
                    if client_id == conn.client_id() {
                        *accept_due = true;
                    }
                    return;
                }
                if conn.handle_datagram(now, bytes).is_err() {
                    self.stats.malformed += 1;
                }
            }
        }
    }

    /// A datagram from a peer without a connection: only a HELLO gets an answer.
    fn handle_stranger(&mut self, now: Time, peer: SocketAddr, bytes: &[u8]) {
        let Some(tokens) = self.config.server.as_ref() else {
            self.stats.unknown_peer += 1;
            return;
        };
        if !is_session(bytes) {
            self.stats.unknown_peer += 1;
            return;
        }
        let Ok(SessionRepr::Hello { client_id, token }) = SessionRepr::parse(bytes) else {
            self.stats.unknown_peer += 1;
            return;
        };
        if bytes.len() < MIN_HELLO_BYTES {
            self.stats.short_hellos += 1;
            return;
        }
        if token.is_empty() || !tokens.validate(now, peer, client_id, &token) {
            if !token.is_empty() {
                self.stats.bad_tokens += 1;
            }
            let token = tokens.issue(now, peer, client_id);
            self.stats.retries_sent += 1;
            self.reply(peer, SessionRepr::Retry { client_id, token });
            return;
        }
        if self.conns.len() >= self.config.max_connections {
            self.stats.refused_full += 1;
            let reason = CloseReason::Shutdown;
            self.reply(peer, SessionRepr::Close { client_id, reason });
            return;
        }
        let conn = AtpConnection::new(
            self.config.atp.clone(),
            self.config.liveness.clone(),
            client_id,
            now,
        );
        let entry = Entry::Open {
            conn: Box::new(conn),
            accept_due: true,
        };
        let id = self.insert(peer, entry);
        self.events.push_back(EndpointEvent::Incoming(id, peer));
    }

    fn reply(&mut self, peer: SocketAddr, p: SessionRepr) {
        if self.replies.len() >= MAX_PENDING_REPLIES {
            self.stats.replies_dropped += 1;
        } else {
            self.replies.push_back((peer, p));
        }
    }

    fn advance_handshake(&mut self, now: Time, id: ConnectionId) {
        let Some((peer, Entry::Connecting(hs))) = self.conns.get(&id) else {
            return;
        };
        match hs.state() {
            HandshakeState::Waiting => {}
            HandshakeState::Established => {
                let conn = AtpConnection::new(
                    self.config.atp.clone(),
                    self.config.liveness.clone(),
                    hs.client_id(),
                    now,
                );
                let peer = *peer;
                let entry = Entry::Open {
                    conn: Box::new(conn),
                    accept_due: false,
                };
                self.conns.insert(id, (peer, entry));
                self.events.push_back(EndpointEvent::Connected(id));
            }
            HandshakeState::Failed => {
                let peer = *peer;
                self.remove(id, peer);
                self.events.push_back(EndpointEvent::ConnectFailed(id));
            }
        }
    }

    fn remove(&mut self, id: ConnectionId, peer: SocketAddr) {
        self.conns.remove(&id);
        if self.by_addr.get(&peer) == Some(&id) {
            self.by_addr.remove(&peer);
        }
    }

    /// Writes the next datagram into `buf` (at least `max_datagram_bytes`, 2048 is safe) and
    /// says where it goes. Stateless replies first, then connections in turn.
    pub fn poll_transmit(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit> {
        while let Some((peer, p)) = self.replies.pop_front() {
            if let Ok(n) = p.emit(buf) {
                return Some(Transmit::single(peer, n));
            }
        }
        // Connections in turn from the cursor, wrapping; no list of ids is collected: this
        // runs once per datagram.
        let from = ConnectionId(self.cursor);
        let (id, transmit) = next_transmit(self.conns.range_mut(from..), now, buf)
            .or_else(|| next_transmit(self.conns.range_mut(..from), now, buf))?;
        self.cursor = id.0.wrapping_add(1);
        Some(transmit)
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.conns
            .values()
            .filter_map(|(_, e)| match e {
                Entry::Connecting(hs) => hs.poll_timeout(),
                Entry::Open { conn, .. } => conn.poll_timeout(),
            })
            .min()
    }

    /// Runs every due timer: handshake retransmissions, ATP timers, idle timeouts.
    pub fn handle_timeout(&mut self, now: Time) {
        let ids: Vec<ConnectionId> = self.conns.keys().copied().collect();
        for id in ids {
            match self.conns.get_mut(&id) {
                Some((_, Entry::Connecting(hs))) => {
                    hs.handle_timeout(now);
                    self.advance_handshake(now, id);
                }
                Some((_, Entry::Open { conn, .. }))
                    if conn.poll_timeout().is_some_and(|t| t <= now) =>
                {
                    conn.handle_timeout(now);
                }
                _ => {}
            }
        }
    }

    /// Closes a connection (see [`AtpConnection::close`]); unknown ids are ignored.
    pub fn close(&mut self, now: Time, id: ConnectionId, linger: std::time::Duration) {
        match self.conns.get_mut(&id) {
            Some((_, Entry::Open { conn, .. })) => conn.close(now, linger),
            Some((peer, Entry::Connecting(_))) => {
                let peer = *peer;
                self.remove(id, peer);
                self.events.push_back(EndpointEvent::ConnectFailed(id));
            }
            None => {}
        }
    }

    /// The next event. A connection whose `Closed` event has been returned (and whose CLOSE
    /// was sent) is forgotten.
    pub fn poll_event(&mut self) -> Option<EndpointEvent> {
        if let Some(ev) = self.events.pop_front() {
            return Some(ev);
        }
        let mut found = None;
        let mut finished = Vec::new();
        for (id, (peer, entry)) in self.conns.iter_mut() {
            let Entry::Open { conn, .. } = entry else {
                continue;
            };
            if let Some(ev) = conn.poll_event() {
                found = Some(EndpointEvent::Connection(*id, ev));
                break;
            }
            if conn.is_finished() {
                finished.push((*id, *peer));
            }
        }
        for (id, peer) in finished {
            self.remove(id, peer);
        }
        found
    }
}

/// The first datagram one of `entries` has to send, written into `buf`: a handshake's, an
/// accept owed to a client, or an open connection's.
fn next_transmit<'a>(
    entries: impl Iterator<Item = (&'a ConnectionId, &'a mut (SocketAddr, Entry))>,
    now: Time,
    buf: &mut [u8],
) -> Option<(ConnectionId, Transmit)> {
    for (id, (peer, entry)) in entries {
        let n = match entry {
            Entry::Connecting(hs) => hs
                .poll_transmit(now)
                .and_then(|p| p.emit(buf).ok())
                .map(|n| (n, false)),
            Entry::Open { conn, accept_due } => {
                if *accept_due {
                    *accept_due = false;
                    let client_id = conn.client_id();
                    SessionRepr::Accept { client_id }
                        .emit(buf)
                        .ok()
                        .map(|n| (n, false))
                } else {
                    conn.poll_transmit(now, buf)
                }
            }
        };
        if let Some((len, coalesce)) = n {
            return Some((
                *id,
                Transmit {
                    destination: *peer,
                    len,
                    coalesce,
                },
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests;
