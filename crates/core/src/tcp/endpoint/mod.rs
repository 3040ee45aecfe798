//! A TCP endpoint, sans-IO: every connection of one address, told apart by (peer address,
//! local port, peer port) — RFC 9293 §3.4's "socket pair" — with what the engines used to do
//! each on their own: passive opens (stateless SYN cookies, [`super::cookie`], or the
//! simulator's fully specified passive opens), initial sequence numbers, the mapping from
//! sequence numbers to stream offsets and real bytes ([`super::bytes`]), congestion control
//! per connection (NewReno, ADTCP, or the host's CM, [`Congestion`]), and the linger that
//! keeps a finished connection's state to answer a retransmitted FIN.
//!
//! Read [`Stream`] (one connection's bookkeeping) first, then [`Endpoint`].
//!
//! Both engines run it: the runtime's stream transport over UDP (one segment per datagram,
//! [`Endpoint::handle_datagram`] / [`Endpoint::poll_transmit`]) and the simulator's TCP
//! framings (segments as simulated packets, [`Endpoint::handle_segment`] /
//! [`Endpoint::poll_segment`]).

mod congestion;
mod stream;
#[cfg(test)]
mod tests;

pub use congestion::Congestion;
pub use stream::Stream;

use super::cookie::SynCookies;
use super::{Connection, Segment, TcpConfig, TcpEvent, TcpRepr};
use crate::cm::PeerAddr;
use crate::session::token::TokenConfig;
use crate::time::Time;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::Hash;
use std::net::SocketAddr;
use std::time::Duration;

/// What an engine's addresses must offer the endpoint.
pub trait EndpointAddr: Copy + Eq + Ord + Hash + Debug {
    /// The address as the SYN cookie's MAC covers it.
    fn cookie_addr(&self) -> SocketAddr;
    /// The host as the CM groups flows (one macroflow per destination host).
    fn cm_peer(&self) -> PeerAddr;
}

impl EndpointAddr for SocketAddr {
    fn cookie_addr(&self) -> SocketAddr {
        *self
    }

    fn cm_peer(&self) -> PeerAddr {
        PeerAddr::from(self.ip())
    }
}

/// A connection of an endpoint. Handles are never reused; they order connections by when
/// they were made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionHandle(pub u64);

/// How the endpoint answers a SYN for no connection.
#[derive(Clone, Debug)]
pub enum Listen {
    /// It does not: SYNs for no connection are refused (a client).
    Off,
    /// SYNs to `port` get a SYN cookie as the SYN-ACK's ISS and allocate nothing; an ACK that
    /// echoes a valid cookie opens the connection (RFC 4987 §3.6, [`super::cookie`]). An
    /// unvalidated peer is sent one SYN-ACK per SYN, no larger than 3× it.
    Cookies {
        /// The listening port.
        port: u16,
        /// The cookies' secret and lifetime (draw the key at start-up).
        tokens: TokenConfig,
    },
}

/// How an endpoint behaves.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Every connection's TCP configuration.
    pub tcp: TcpConfig,
    /// Passive opens.
    pub listen: Listen,
    /// Most connections held at once (passive opens beyond are refused; `connect` fails).
    pub max_connections: usize,
    /// How long a finished connection's state stays after the application let it go, to
    /// answer a retransmitted FIN (TIME-WAIT's purpose, RFC 9293 §3.6.1); `None` keeps it
    /// until the endpoint goes (the simulator's agents read finished connections' counters).
    pub linger: Option<Duration>,
    /// Whether connections carry real bytes out ([`Endpoint::write`] keeps them until
    /// acknowledged and segments carry them) and in (arriving payloads are reassembled and
    /// [`Endpoint::read`] returns them). Without, bytes are counted only.
    pub send_bytes: bool,
    /// See `send_bytes`.
    pub recv_bytes: bool,
    /// Congestion control of new connections.
    pub congestion: Congestion,
    /// Stateless answers (cookie SYN-ACKs, resets) waiting to be sent; beyond, segments are
    /// dropped unanswered as a congested network would drop them.
    pub max_queued_answers: usize,
    /// Answer a segment for no connection with a reset (RFC 9293 §3.10.7.1, "If the state
    /// is CLOSED … a reset is sent in response to any incoming segment except another
    /// reset"): a refused SYN fails its `connect` at once, and a peer retransmitting its FIN
    /// to a connection whose linger ended learns the end. Never more than one reset, no
    /// larger than the segment, per segment. Off for the simulator's agents, whose peers
    /// are known.
    pub reset_unknown: bool,
}

impl EndpointConfig {
    /// A client: no passive opens, real bytes both ways, NewReno, a 2 s linger.
    pub fn client(tcp: TcpConfig) -> EndpointConfig {
        EndpointConfig {
            tcp,
            listen: Listen::Off,
            max_connections: 1024,
            linger: Some(Duration::from_secs(2)),
            send_bytes: true,
            recv_bytes: true,
            congestion: Congestion::NewReno,
            max_queued_answers: 1024,
            reset_unknown: true,
        }
    }
}

/// Counters of an endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams that did not parse as a segment.
    pub malformed: u64,
    /// Segments for no connection (dropped without state).
    pub unknown: u64,
    /// SYNs refused (not listening, too many connections) and `connect`s refused.
    pub refused: u64,
    /// SYNs answered with a SYN cookie (no state kept).
    pub cookies_sent: u64,
    /// Segments received carrying the ADTCP option (papers/004).
    pub adtcp_options_received: u64,
    /// Data segments that arrived beyond a hole in the stream (after a loss, or overtaking
    /// an earlier segment).
    pub out_of_order: u64,
    /// Data segments that arrived without bytes although this side carries them.
    pub missing_payload: u64,
    /// Data segments that left without their bytes although this side carries them (the
    /// send buffer lacked them: an engine bug).
    pub unmaterialised: u64,
}

/// Something an engine should act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndpointEvent<A> {
    /// An active open completed (the `connect` handle).
    Connected(ConnectionHandle),
    /// A passive open completed: a new connection from a peer.
    Incoming(ConnectionHandle, A),
    /// Bytes can be read (coalesced until the next `read`).
    Readable(ConnectionHandle),
    /// The peer closed its direction; after the readable bytes, the stream ends.
    PeerClosed(ConnectionHandle),
    /// Our FIN and every byte before it were acknowledged.
    SendClosed(ConnectionHandle),
    /// Reset by the peer, or given up after the retransmission timeouts (an active open that
    /// never completed ends this way too).
    Aborted(ConnectionHandle),
    /// The connection's state is gone (after its linger, or `abandon_all`).
    Closed(ConnectionHandle),
}

/// Why the endpoint refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// [`EndpointConfig::max_connections`] connections are held.
    #[error("too many connections (limit {0})")]
    TooManyConnections(usize),
    /// The socket pair is taken (or no local port is free).
    #[error("the address and ports are in use")]
    InUse,
    /// No such connection (never made, or gone).
    #[error("no such connection")]
    UnknownConnection,
}

/// One segment to send, with where it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outgoing<A> {
    /// The peer.
    pub to: A,
    /// The header and the payload's length.
    pub segment: Segment,
    /// The connection it belongs to (`None` for a stateless answer).
    pub handle: Option<ConnectionHandle>,
}

/// A datagram written by [`Endpoint::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit<A> {
    /// The peer.
    pub to: A,
    /// Bytes written at the start of the buffer.
    pub len: usize,
}

/// The reset answering `seg` (with `payload_len` bytes) for no connection (RFC 9293
/// §3.10.7.1): "If the ACK bit is off, sequence number zero is used, <SEQ=0><ACK=SEG.SEQ+
/// SEG.LEN><CTL=RST,ACK>. If the ACK bit is on, <SEQ=SEG.ACK><CTL=RST>".
fn reset_for(seg: &TcpRepr, payload_len: u32) -> Segment {
    let len = payload_len
        .wrapping_add(u32::from(seg.flags.syn))
        .wrapping_add(u32::from(seg.flags.fin));
    let (seq, ack, with_ack) = if seg.flags.ack {
        (seg.ack, 0, false)
    } else {
        (0, seg.seq.wrapping_add(len), true)
    };
    let flags = super::Flags {
        rst: true,
        ack: with_ack,
        ..super::Flags::default()
    };
    Segment {
        repr: TcpRepr::control(seg.dst_port, seg.src_port, seq, ack, flags),
        payload_len: 0,
    }
}

/// What became of a segment for no connection.
enum Accepted {
    /// It completed a cookie handshake: a new connection.
    Opened(ConnectionHandle),
    /// A SYN answered with a cookie.
    Answered,
    /// Refused or unknown.
    Refused,
}

/// (peer, our port, its port): the socket pair that names a connection.
type Key<A> = (A, u16, u16);

/// Every TCP connection of one address. The calling pattern (an engine's loop):
///
/// ```text
/// for each arriving segment:   handle_datagram(now, from, bytes)  (or handle_segment)
/// when poll_timeout() passed:  handle_timeout(now)
/// application calls:           connect / write / close / read / release
/// then drain:                  poll_event() until None, poll_transmit(now, buf) until None
/// then sleep until:            poll_timeout()
/// ```
/// `poll_transmit` must be drained after every input, application calls included (a `write`
/// may send at once). Under [`Congestion::Cm`], after any CM event or timer the engine polls
/// `poll_transmit` again (a grant lets a blocked connection send).
#[derive(Debug)]
pub struct Endpoint<A> {
    config: EndpointConfig,
    streams: BTreeMap<ConnectionHandle, Stream<A>>,
    by_key: HashMap<Key<A>, ConnectionHandle>,
    next_handle: u64,
    /// Ephemeral ports for `connect` without one, tried in turn.
    next_port: u16,
    /// The connection served last by `poll_segment`: the next search starts after it, so no
    /// connection always comes first (a fixed order lets one stream's segments always take
    /// the last places of a full drop-tail queue; Floyd and Jacobson, "On traffic phase
    /// effects in packet-switched gateways", 1992).
    last_served: Option<ConnectionHandle>,
    cookies: Option<(u16, SynCookies)>,
    /// The ISS of passive opens without cookies (fully specified passive opens).
    passive_iss: u32,
    answers: VecDeque<(A, Segment)>,
    events: VecDeque<EndpointEvent<A>>,
    stats: EndpointStats,
    /// Refuse every new connection (the endpoint is closing).
    closing: bool,
}

/// The first port `connect` picks without one (0 and 1 are left out: 1 is the runtime's
/// listening port).
const FIRST_EPHEMERAL_PORT: u16 = 2;

impl<A: EndpointAddr> Endpoint<A> {
    /// An endpoint with no connection.
    pub fn new(config: EndpointConfig) -> Endpoint<A> {
        let cookies = match &config.listen {
            Listen::Off => None,
            Listen::Cookies { port, tokens } => Some((*port, SynCookies::new(tokens.clone()))),
        };
        Endpoint {
            config,
            streams: BTreeMap::new(),
            by_key: HashMap::new(),
            next_handle: 0,
            next_port: FIRST_EPHEMERAL_PORT,
            last_served: None,
            cookies,
            passive_iss: 0,
            answers: VecDeque::new(),
            events: VecDeque::new(),
            stats: EndpointStats::default(),
            closing: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    /// The counters.
    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// Connections held (including lingering ones and passive opens waiting for a SYN).
    pub fn connection_count(&self) -> usize {
        self.streams.len()
    }

    /// Handles of every connection held, oldest first.
    pub fn handles(&self) -> impl Iterator<Item = ConnectionHandle> + '_ {
        self.streams.keys().copied()
    }

    /// Connection `h`.
    pub fn stream(&self, h: ConnectionHandle) -> Option<&Stream<A>> {
        self.streams.get(&h)
    }

    /// Connection `h`, mutably (its TCP state is [`Stream::conn`]).
    pub fn stream_mut(&mut self, h: ConnectionHandle) -> Option<&mut Stream<A>> {
        self.streams.get_mut(&h)
    }

    /// Sets the ISS of later fully specified passive opens.
    pub fn set_passive_iss(&mut self, iss: u32) {
        self.passive_iss = iss;
    }

    fn admit(&mut self, key: Key<A>) -> Result<ConnectionHandle, EndpointError> {
        if self.closing || self.streams.len() >= self.config.max_connections {
            self.stats.refused += 1;
            return Err(EndpointError::TooManyConnections(
                self.config.max_connections,
            ));
        }
        if self.by_key.contains_key(&key) {
            return Err(EndpointError::InUse);
        }
        let h = ConnectionHandle(self.next_handle);
        self.next_handle += 1;
        Ok(h)
    }

    fn insert(&mut self, h: ConnectionHandle, mut stream: Stream<A>) {
        if self.config.send_bytes {
            stream.carry_send_bytes();
        }
        if self.config.recv_bytes {
            let cap = usize::try_from(self.config.tcp.recv_buffer).unwrap_or(usize::MAX >> 1);
            stream.carry_recv_bytes(cap);
        }
        self.by_key
            .insert((stream.remote, stream.local_port, stream.remote_port), h);
        self.streams.insert(h, stream);
    }

    /// A local port for a connection to `remote:remote_port` that no connection uses.
    fn free_port(&mut self, remote: A, remote_port: u16) -> Option<u16> {
        for _ in 0..=u16::MAX {
            let port = self.next_port;
            self.next_port = match port.wrapping_add(1) {
                p if p < FIRST_EPHEMERAL_PORT => FIRST_EPHEMERAL_PORT,
                p => p,
            };
            let listening = self.cookies.as_ref().is_some_and(|(p, _)| *p == port);
            if !listening && !self.by_key.contains_key(&(remote, port, remote_port)) {
                return Some(port);
            }
        }
        None
    }

    /// Active open to `remote:remote_port` from `local_port` (`None`: a free port) with
    /// initial sequence number `iss` (draw it from the engine's seeded RNG). The SYN leaves
    /// on the next `poll_transmit`; [`EndpointEvent::Connected`] or
    /// [`EndpointEvent::Aborted`] follows.
    pub fn connect(
        &mut self,
        now: Time,
        remote: A,
        local_port: Option<u16>,
        remote_port: u16,
        iss: u32,
    ) -> Result<ConnectionHandle, EndpointError> {
        let local_port = match local_port {
            Some(p) => p,
            None => self
                .free_port(remote, remote_port)
                .ok_or(EndpointError::InUse)?,
        };
        let key = (remote, local_port, remote_port);
        let h = self.admit(key)?;
        let (cc, flow) =
            self.config
                .congestion
                .open(now, remote, local_port, remote_port, &self.config.tcp);
        let mut s = Stream::new(remote, local_port, remote_port, iss);
        s.conn = Some(Connection::connect(
            self.config.tcp.clone(),
            local_port,
            remote_port,
            iss,
            cc,
        ));
        s.flow = flow;
        self.insert(h, s);
        Ok(h)
    }

    /// A fully specified passive open (RFC 9293 §3.10.1): a SYN from `remote:remote_port` to
    /// `local_port` opens this connection, with the ISS of [`Endpoint::set_passive_iss`]. The
    /// simulator's receiving agents know their peers; they open this way, in a fixed order.
    pub fn open_passive(
        &mut self,
        remote: A,
        local_port: u16,
        remote_port: u16,
    ) -> Result<ConnectionHandle, EndpointError> {
        let key = (remote, local_port, remote_port);
        let h = self.admit(key)?;
        let mut s = Stream::new(remote, local_port, remote_port, 0);
        s.passive = true;
        self.insert(h, s);
        Ok(h)
    }

    /// Turns a passive open still waiting for its SYN into an active open with `iss` (RFC
    /// 9293 §3.10.2: a SEND on a LISTEN connection makes it active).
    pub fn open_active(
        &mut self,
        now: Time,
        h: ConnectionHandle,
        iss: u32,
    ) -> Result<(), EndpointError> {
        let config = self.config.tcp.clone();
        let congestion = self.config.congestion.clone();
        let s = self
            .streams
            .get_mut(&h)
            .filter(|s| s.conn.is_none())
            .ok_or(EndpointError::UnknownConnection)?;
        let (cc, flow) = congestion.open(now, s.remote, s.local_port, s.remote_port, &config);
        s.iss = iss;
        s.passive = false;
        s.flow = flow;
        s.conn = Some(Connection::connect(
            config,
            s.local_port,
            s.remote_port,
            iss,
            cc,
        ));
        Ok(())
    }

    /// Parses a datagram holding one segment (header, then payload) from `from` and handles
    /// it. A datagram that does not parse is counted and dropped.
    pub fn handle_datagram(&mut self, now: Time, from: A, data: &[u8]) {
        let Ok((repr, payload)) = TcpRepr::parse_segment(data) else {
            self.stats.malformed += 1;
            return;
        };
        let Ok(len) = u32::try_from(payload.len()) else {
            self.stats.malformed += 1;
            return;
        };
        self.handle_segment(now, from, &repr, len, Some(payload));
    }

    /// Handles a segment from `from` whose payload is `payload_len` bytes: `payload` holds
    /// them when the engine carries bytes (`None`: counted only). Returns the connection it
    /// was for, if any.
    pub fn handle_segment(
        &mut self,
        now: Time,
        from: A,
        repr: &TcpRepr,
        payload_len: u32,
        payload: Option<&[u8]>,
    ) -> Option<ConnectionHandle> {
        if repr.adtcp.is_some() {
            self.stats.adtcp_options_received += 1;
        }
        let key = (from, repr.dst_port, repr.src_port);
        let h = match self.by_key.get(&key) {
            Some(h) => *h,
            None => self.accept(now, from, repr, payload_len)?,
        };
        let passive_iss = self.passive_iss;
        let config = &self.config;
        let s = self.streams.get_mut(&h)?;
        if repr.flags.syn {
            s.irs = Some(repr.seq);
        }
        if payload_len > 0 && !repr.flags.syn && s.irs.is_some() && s.conn.is_some() {
            if s.store_payload(repr, payload) {
                self.stats.out_of_order += 1;
            }
            if config.recv_bytes && payload.is_none() {
                self.stats.missing_payload += 1;
            }
        }
        match s.conn.as_mut() {
            Some(c) => c.handle_segment(now, repr, payload_len),
            None if repr.flags.syn && !repr.flags.ack => {
                let (cc, flow) =
                    config
                        .congestion
                        .open(now, from, s.local_port, s.remote_port, &config.tcp);
                s.iss = passive_iss;
                s.flow = flow;
                s.conn = Some(Connection::accept(
                    config.tcp.clone(),
                    repr,
                    passive_iss,
                    cc,
                ));
            }
            // A passive open hears nothing but a SYN.
            None => return None,
        }
        self.after_input(now, h);
        Some(h)
    }

    /// A segment for no connection: a SYN gets a cookie SYN-ACK (nothing kept), an ACK that
    /// echoes a valid cookie opens the connection, anything else a reset
    /// ([`EndpointConfig::reset_unknown`]). Returns the new connection.
    fn accept(
        &mut self,
        now: Time,
        from: A,
        repr: &TcpRepr,
        payload_len: u32,
    ) -> Option<ConnectionHandle> {
        let h = match self.accept_or_refuse(now, from, repr) {
            Accepted::Opened(h) => return Some(h),
            Accepted::Answered => return None,
            Accepted::Refused => None,
        };
        // An ACK to the listening port that echoes no valid cookie may be a segment that
        // overtook (or outlived) the one carrying the cookie: it is dropped, not reset —
        // a reset would abort a handshake that a retransmission still completes.
        let cookie_candidate = repr.flags.ack
            && !repr.flags.syn
            && self
                .cookies
                .as_ref()
                .is_some_and(|(port, _)| *port == repr.dst_port);
        if self.config.reset_unknown
            && !cookie_candidate
            && !repr.flags.rst
            && self.answers.len() < self.config.max_queued_answers
        {
            self.answers.push_back((from, reset_for(repr, payload_len)));
        }
        h
    }

    fn accept_or_refuse(&mut self, now: Time, from: A, repr: &TcpRepr) -> Accepted {
        let listening = self
            .cookies
            .as_ref()
            .is_some_and(|(port, _)| *port == repr.dst_port);
        if repr.flags.syn && !repr.flags.ack {
            if !listening
                || self.closing
                || self.streams.len() >= self.config.max_connections
                || self.answers.len() >= self.config.max_queued_answers
            {
                self.stats.refused += 1;
            } else if let Some((_, jar)) = &self.cookies
                && let Some(seg) = jar.answer(now, from.cookie_addr(), repr, &self.config.tcp)
            {
                self.answers.push_back((from, seg));
                self.stats.cookies_sent += 1;
                return Accepted::Answered;
            }
            return Accepted::Refused;
        }
        if !listening || repr.flags.syn || repr.flags.rst || !repr.flags.ack {
            self.stats.unknown += 1;
            return Accepted::Refused;
        }
        // Validate before spending anything (a CM flow) on the peer.
        let valid = self
            .cookies
            .as_ref()
            .is_some_and(|(_, jar)| jar.is_valid(now, from.cookie_addr(), repr));
        if !valid {
            self.stats.unknown += 1;
            return Accepted::Refused;
        }
        let key = (from, repr.dst_port, repr.src_port);
        let Ok(h) = self.admit(key) else {
            return Accepted::Refused;
        };
        let (cc, flow) =
            self.config
                .congestion
                .open(now, from, repr.dst_port, repr.src_port, &self.config.tcp);
        let conn = self
            .cookies
            .as_ref()
            .and_then(|(_, jar)| jar.accept(now, from.cookie_addr(), repr, &self.config.tcp, cc));
        let Some(conn) = conn else {
            self.stats.unknown += 1;
            if let Some(flow) = flow {
                self.config.congestion.close(now, flow);
            }
            return Accepted::Refused;
        };
        let mut s = Stream::new(from, repr.dst_port, repr.src_port, repr.ack.wrapping_sub(1));
        s.irs = Some(repr.seq.wrapping_sub(1));
        s.passive = true;
        s.flow = flow;
        s.conn = Some(conn);
        self.insert(h, s);
        Accepted::Opened(h)
    }

    /// The network reports that nothing answers at `to` (an ICMP port unreachable for a
    /// datagram sent there): every connection to `to` still in its active open, or waiting
    /// only for the acknowledgement of its FIN, is aborted
    /// ([`Connection::handle_unreachable`],
    /// [`AbortReason::Unreachable`](super::AbortReason::Unreachable)), so a `connect` fails
    /// at once rather than after the SYN's retransmissions, and a closed connection's state
    /// goes after its linger rather than after its FIN's. Returns how many.
    pub fn handle_unreachable(&mut self, now: Time, to: A) -> usize {
        let hit: Vec<ConnectionHandle> = self
            .streams
            .iter_mut()
            .filter(|(_, s)| s.remote == to)
            .filter_map(|(h, s)| {
                let c = s.conn.as_mut()?;
                c.handle_unreachable().then_some(*h)
            })
            .collect();
        for h in &hit {
            self.after_input(now, *h);
        }
        hit.len()
    }

    /// Bytes of storage the connections' byte buffers hold (sent and unacknowledged,
    /// received and unread or out of order): what carrying bytes costs in memory now. After
    /// [`Endpoint::trim_storage`], a connection with nothing buffered holds at most
    /// [`KEEP_WHEN_EMPTY_BYTES`](super::bytes::KEEP_WHEN_EMPTY_BYTES) (none) per direction.
    pub fn storage_bytes(&self) -> usize {
        self.streams.values().map(Stream::storage_bytes).sum()
    }

    /// Gives back the storage of connection `h`'s emptied byte buffers (they keep their
    /// largest size while bytes flow, so a busy flow does not reallocate at every read):
    /// call it when the connection has gone quiet. Nothing else changes.
    pub fn trim_storage(&mut self, h: ConnectionHandle) {
        if let Some(s) = self.streams.get_mut(&h) {
            s.trim_storage();
        }
    }

    /// After an input to connection `h`: free acknowledged bytes, turn its events into the
    /// endpoint's, note when it finished.
    fn after_input(&mut self, now: Time, h: ConnectionHandle) {
        let Some(s) = self.streams.get_mut(&h) else {
            return;
        };
        s.settle();
        let Some(conn) = s.conn.as_mut() else {
            return;
        };
        while let Some(ev) = conn.poll_event() {
            let out = match ev {
                TcpEvent::Connected => {
                    s.announced = true;
                    if let Some(flow) = s.flow {
                        self.config
                            .congestion
                            .connected(now, flow, conn.rtt().latest());
                    }
                    if s.passive {
                        EndpointEvent::Incoming(h, s.remote)
                    } else {
                        EndpointEvent::Connected(h)
                    }
                }
                TcpEvent::Readable if !s.released => EndpointEvent::Readable(h),
                TcpEvent::PeerClosed => EndpointEvent::PeerClosed(h),
                TcpEvent::SendClosed => EndpointEvent::SendClosed(h),
                TcpEvent::Aborted => EndpointEvent::Aborted(h),
                TcpEvent::Readable => continue,
            };
            self.events.push_back(out);
        }
        if s.done_at.is_none() && s.finished() {
            s.done_at = Some(now);
        }
    }

    /// Appends `data` to connection `h`'s stream (kept until acknowledged when the endpoint
    /// carries bytes; counted only otherwise). Bound what you write by
    /// [`Stream::unacked_bytes`]: the endpoint keeps every unacknowledged byte.
    pub fn write(&mut self, h: ConnectionHandle, data: &[u8]) -> Result<(), EndpointError> {
        let s = self
            .streams
            .get_mut(&h)
            .filter(|s| s.conn.is_some())
            .ok_or(EndpointError::UnknownConnection)?;
        s.write_bytes(data);
        Ok(())
    }

    /// Closes connection `h`'s sending direction: a FIN follows what was written.
    pub fn close(&mut self, now: Time, h: ConnectionHandle) {
        if let Some(s) = self.streams.get_mut(&h)
            && let Some(conn) = s.conn.as_mut()
            && !s.close_requested
        {
            s.close_requested = true;
            conn.close();
            self.after_input(now, h);
        }
    }

    /// Reads up to `max` delivered bytes of connection `h`: appends them to `out` when the
    /// endpoint carries bytes. Returns how many were read.
    pub fn read(&mut self, h: ConnectionHandle, max: u64, out: &mut impl Extend<u8>) -> u64 {
        self.streams
            .get_mut(&h)
            .map_or(0, |s| s.read_at_most(max, out))
    }

    /// From now on, connections carry real bytes out (those with nothing written yet too).
    pub fn carry_send_bytes(&mut self) {
        self.config.send_bytes = true;
        for s in self.streams.values_mut() {
            s.carry_send_bytes();
        }
    }

    /// From now on, connections carry real bytes in (those that received nothing yet too).
    pub fn carry_recv_bytes(&mut self) {
        self.config.recv_bytes = true;
        let cap = usize::try_from(self.config.tcp.recv_buffer).unwrap_or(usize::MAX >> 1);
        for s in self.streams.values_mut() {
            s.carry_recv_bytes(cap);
        }
    }

    /// The application let connection `h` go (its last handle dropped): our direction closes
    /// (FIN after what was written), what still arrives is read and discarded, and the state
    /// goes after the linger once both directions are closed.
    pub fn release(&mut self, now: Time, h: ConnectionHandle) {
        if let Some(s) = self.streams.get_mut(&h) {
            s.released = true;
        }
        self.close(now, h);
        self.after_input(now, h);
    }

    /// Releases every connection and refuses new ones: the endpoint is closing. Idle once
    /// [`Endpoint::is_idle`].
    pub fn close_all(&mut self, now: Time) {
        self.closing = true;
        let handles: Vec<ConnectionHandle> = self.streams.keys().copied().collect();
        for h in handles {
            self.release(now, h);
        }
    }

    /// Nothing left to send: no connection still closing (every one finished or aborted,
    /// whatever its linger) and no stateless answer queued.
    pub fn is_idle(&self) -> bool {
        self.answers.is_empty()
            && self
                .streams
                .values()
                .all(|s| s.conn.is_none() || s.done_at.is_some())
    }

    /// Drops every connection at once (the endpoint is gone): a connection that had not
    /// finished gets a reset (RFC 9293 §3.10.7.1's ABORT: "a RESET segment should be sent"),
    /// queued for one last `poll_transmit`, so its peer learns at once rather than after its
    /// retransmission timeouts; each CM flow is closed and each connection announced
    /// [`EndpointEvent::Closed`].
    pub fn abandon_all(&mut self, now: Time) {
        self.answers.clear();
        let handles: Vec<ConnectionHandle> = self.streams.keys().copied().collect();
        for h in handles {
            if let Some(rst) = self.streams.get(&h).and_then(Stream::reset_segment)
                && self.answers.len() < self.config.max_queued_answers
            {
                self.answers.push_back(rst);
            }
            self.remove(now, h);
        }
    }

    fn remove(&mut self, now: Time, h: ConnectionHandle) {
        if let Some(s) = self.streams.remove(&h) {
            self.by_key.remove(&(s.remote, s.local_port, s.remote_port));
            if let Some(flow) = s.flow {
                self.config.congestion.close(now, flow);
            }
            if self.last_served == Some(h) {
                self.last_served = self.streams.range(..h).next_back().map(|(k, _)| *k);
            }
            self.events.push_back(EndpointEvent::Closed(h));
        }
    }

    /// The earliest timer: a connection's (retransmission, delayed ACK, pacing) or a linger's
    /// end.
    pub fn poll_timeout(&self) -> Option<Time> {
        let linger = self.config.linger;
        self.streams
            .values()
            .flat_map(|s| {
                let conn = s.conn.as_ref().and_then(Connection::poll_timeout);
                let gone = match (s.released, s.done_at, linger) {
                    (true, Some(d), Some(l)) => Some(d + l),
                    _ => None,
                };
                [conn, gone]
            })
            .flatten()
            .min()
    }

    /// Runs the timers due at `now`: each connection's, then the lingers that ended.
    pub fn handle_timeout(&mut self, now: Time) {
        let handles: Vec<ConnectionHandle> = self.streams.keys().copied().collect();
        for h in &handles {
            if let Some(conn) = self.streams.get_mut(h).and_then(|s| s.conn.as_mut()) {
                conn.handle_timeout(now);
            }
            self.after_input(now, *h);
        }
        let Some(linger) = self.config.linger else {
            return;
        };
        for h in handles {
            let gone = self
                .streams
                .get(&h)
                .is_some_and(|s| s.released && s.done_at.is_some_and(|d| now >= d + linger));
            if gone {
                self.remove(now, h);
            }
        }
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<EndpointEvent<A>> {
        self.events.pop_front()
    }

    /// The next segment to send (header and payload length), connections taking turns:
    /// stateless answers first, then the first connection after the one served last that has
    /// something to send. Fill its payload with [`Endpoint::copy_payload`].
    pub fn poll_segment(&mut self, now: Time) -> Option<Outgoing<A>> {
        if let Some((to, segment)) = self.answers.pop_front() {
            return Some(Outgoing {
                to,
                segment,
                handle: None,
            });
        }
        let after = self.last_served;
        let order: Vec<ConnectionHandle> = match after {
            Some(last) => self
                .streams
                .range(ConnectionHandle(last.0.saturating_add(1))..)
                .chain(self.streams.range(..=last))
                .map(|(h, _)| *h)
                .collect(),
            None => self.streams.keys().copied().collect(),
        };
        for h in order {
            let Some(s) = self.streams.get_mut(&h) else {
                continue;
            };
            let Some(conn) = s.conn.as_mut() else {
                continue;
            };
            if let Some(segment) = conn.poll_transmit(now) {
                self.last_served = Some(h);
                let to = s.remote;
                // Sending may raise events (an ACK of a SYN-ACK never does; a pacing or CM
                // decision might) and finish a connection.
                self.after_input(now, h);
                return Some(Outgoing {
                    to,
                    segment,
                    handle: Some(h),
                });
            }
        }
        None
    }

    /// Copies the payload of `out` (from [`Endpoint::poll_segment`]) into `buf`, as long as
    /// its payload. `false` when the endpoint does not carry bytes or lacks them (counted
    /// as `unmaterialised` when it should have had them).
    pub fn copy_payload(&mut self, out: &Outgoing<A>, buf: &mut [u8]) -> bool {
        let Some(s) = out.handle.and_then(|h| self.streams.get(&h)) else {
            return false;
        };
        let Some(send) = s.send.as_ref() else {
            return false;
        };
        let ok = send.copy_segment(s.iss, out.segment.repr.seq, buf);
        if !ok {
            self.stats.unmaterialised += 1;
        }
        ok
    }

    /// Writes the next datagram — the segment's header, then its payload — into `buf` (at
    /// least `mss` + [`super::wire::MAX_HEADER_LEN`] bytes). A segment that does not fit or
    /// whose bytes are missing is dropped (counted), as the network would lose it; the
    /// connection retransmits.
    pub fn poll_transmit(&mut self, now: Time, buf: &mut [u8]) -> Option<Transmit<A>> {
        loop {
            let out = self.poll_segment(now)?;
            let payload = out.segment.payload_len as usize;
            let Ok(h) = out.segment.repr.emit(buf) else {
                self.stats.unmaterialised += 1;
                continue;
            };
            let Some(dst) = buf.get_mut(h..h + payload) else {
                self.stats.unmaterialised += 1;
                continue;
            };
            if payload > 0 && !self.copy_payload(&out, dst) {
                if self.config.send_bytes {
                    continue;
                }
                dst.fill(0);
            }
            return Some(Transmit {
                to: out.to,
                len: h + payload,
            });
        }
    }
}
