//! ATP through core's endpoint (`adaptnet_core::atp::endpoint`): the simulator runs exactly
//! what the runtime runs over UDP — the handshake with its retry token, demultiplexing by peer
//! address, keep-alive and idle timeout, CLOSE, and each connection's ATP in both directions
//! with the message bytes in the datagrams — rather than wiring an [`AtpSender`] to an
//! [`AtpReceiver`] as [`super::atp`] does (the mode the paper's reproductions keep).
//!
//! [`AtpClientAgent`] hosts an NAI application: it connects at its start, starts the
//! application once the server accepts, and closes gracefully at its stop. [`AtpServerAgent`]
//! accepts any number of clients and logs what each delivers. Either can be told to close
//! at a time or to die (fall silent, as a crashed host) for fault tests.
//!
//! Each datagram core writes becomes one UDP packet: an SPP datagram's header goes in
//! [`Packet::header`] and its payload in [`Packet::payload`]; a session packet (HELLO,
//! RETRY, ACCEPT, PING, CLOSE) is all header. Link sizes are those of the direct mode for the
//! same datagrams. Hosts' addresses are their capture addresses ([`NodeId::ipv4`]).
//!
//! Compared with the direct mode, a run pays the handshake (two round trips, the first HELLO
//! padded to [`MIN_HELLO_BYTES`](adaptnet_core::session::wire::MIN_HELLO_BYTES)) before the
//! application starts, the server's own estimator probes the return path, and PINGs flow
//! when a side is quiet.
//!
//! [`AtpSender`]: adaptnet_core::atp::AtpSender
//! [`AtpReceiver`]: adaptnet_core::atp::AtpReceiver

use super::message_bytes::{MessageBytes, MessageData, PayloadCheck, SenderHost, SubmitBytes};
use super::nai_app::{Ledger, NaiApp, NaiPort};
use super::nai_flow::{DeliveryLog, NaiFlow};
use crate::agent::{Agent, InterfaceInfo};
use crate::packet::{Addr, NodeId, Packet, Proto};
use crate::world::{AgentId, FlowSpec, World, WorldError};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{
    AppError, AtpConnection, ConnEvent, ConnectionId, Endpoint, EndpointConfig, EndpointEvent,
    EndpointStats,
};
use adaptnet_core::nai::{MessageId, NaiError, NotificationId, QueueId, SendOptions};
use adaptnet_core::session::CloseReason;
use adaptnet_core::session::wire::is_session;
use adaptnet_core::spp::{Delivery, SppEvent, SppRepr};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// Largest datagram core writes (its `max_datagram_bytes` is at most this).
const BUF_BYTES: usize = 2048;

/// A simulated address as the socket address core sees.
pub fn socket_addr(a: Addr) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(a.node.ipv4()), a.port))
}

/// The simulated address of a socket address from [`socket_addr`]; `None` for any other.
pub fn sim_addr(s: SocketAddr) -> Option<Addr> {
    let SocketAddr::V4(v4) = s else {
        return None;
    };
    let [ten, a, b, c] = v4.ip().octets();
    let n = u32::from_be_bytes([0, a, b, c]).checked_sub(1)?;
    (ten == 10).then_some(Addr {
        node: NodeId(n),
        port: v4.port(),
    })
}

/// One datagram as a UDP packet (see the module docs for the split).
fn datagram_packet(src: Addr, dst: Addr, bytes: &[u8]) -> Option<Packet> {
    let split = if is_session(bytes) {
        bytes.len()
    } else {
        SppRepr::parse(bytes).map_or(bytes.len(), |r| r.buffer_len().min(bytes.len()))
    };
    let (head, body) = bytes.split_at(split);
    let body_len = u32::try_from(body.len()).ok()?;
    let mut p = Packet::with_header(src, dst, Proto::Udp, head.len(), body_len, |buf| {
        buf.copy_from_slice(head);
        Ok::<usize, ()>(head.len())
    })
    .ok()?;
    if !body.is_empty() {
        p.set_payload(body);
    }
    Some(p)
}

/// The datagram a packet carries: header then payload (zeros if the payload is virtual, which
/// no endpoint agent sends).
fn packet_bytes(p: &Packet) -> Vec<u8> {
    let mut v = Vec::with_capacity(p.header.len() + p.payload_len as usize);
    v.extend_from_slice(&p.header);
    match &p.payload {
        Some(data) => v.extend_from_slice(data),
        None => v.resize(v.len() + p.payload_len as usize, 0),
    }
    v
}

/// Faults and the end of a connection, for either agent.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Close every connection at this time (gracefully, after `close_linger`).
    pub close_at: Option<Time>,
    /// How long a close waits for live messages to become final.
    pub close_linger: Duration,
    /// The host dies at this time: from then on it neither sends nor hears anything.
    pub die_at: Option<Time>,
}

/// A connection's end, as one side saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// When the `Closed` event came.
    pub at: Time,
    /// The reason it carried (the peer's, when the peer closed).
    pub reason: CloseReason,
}

/// What both agents share: the endpoint, its packets and its faults.
struct Host {
    local: Addr,
    endpoint: Endpoint,
    faults: Faults,
    dead: bool,
    closed_all: bool,
    /// Datagrams whose destination is not a simulated address (none expected).
    misaddressed: u64,
}

impl Host {
    fn new(local: Addr, config: EndpointConfig, faults: Faults) -> Host {
        Host {
            local,
            endpoint: Endpoint::new(config),
            faults,
            dead: false,
            closed_all: false,
            misaddressed: 0,
        }
    }

    fn handle_packet(&mut self, now: Time, packet: &Packet) {
        if !self.dead {
            let bytes = packet_bytes(packet);
            self.endpoint
                .handle_datagram(now, socket_addr(packet.src), &bytes);
        }
    }

    /// Runs faults due by `now`; returns whether the host is alive.
    fn handle_faults(&mut self, now: Time) -> bool {
        if self.faults.die_at.is_some_and(|t| t <= now) {
            self.dead = true;
        }
        if !self.dead && !self.closed_all && self.faults.close_at.is_some_and(|t| t <= now) {
            self.close_all(now);
        }
        !self.dead
    }

    fn close_all(&mut self, now: Time) {
        self.closed_all = true;
        let linger = self.faults.close_linger;
        let ids: Vec<ConnectionId> = self.endpoint.connection_ids().collect();
        for id in ids {
            self.endpoint.close(now, id, linger);
        }
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        if self.dead {
            return None;
        }
        let mut buf = [0u8; BUF_BYTES];
        while let Some(t) = self.endpoint.poll_transmit(now, &mut buf) {
            let Some(dst) = sim_addr(t.destination) else {
                self.misaddressed += 1;
                continue;
            };
            if let Some(p) = buf
                .get(..t.len)
                .and_then(|b| datagram_packet(self.local, dst, b))
            {
                return Some(p);
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<Time> {
        if self.dead {
            return None;
        }
        let close = self.faults.close_at.filter(|_| !self.closed_all);
        [self.endpoint.poll_timeout(), close, self.faults.die_at]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.handle_faults(now) && self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
        }
    }

    fn on_interface(&mut self, now: Time, info: &InterfaceInfo) {
        if !self.dead {
            let queued = u32::try_from(info.queue_packets).unwrap_or(u32::MAX);
            let total = info.tx_bytes.saturating_add(info.rx_bytes);
            self.endpoint.handle_interface(now, total, queued);
        }
    }
}

/// The NAI port of a connection that has ended: it takes nothing. Events still owed to the
/// application (there are none after `Closed`, but the ledger must never miss an outcome)
/// are handed over with it.
struct Gone;

impl NaiPort for Gone {
    fn submit(&mut self, _: Time, size_bytes: u64, _: SendOptions) -> Result<MessageId, NaiError> {
        Err(NaiError::BufferFull {
            bytes: size_bytes,
            buffered: 0,
            max: 0,
        })
    }
    fn register_bandwidth_range(&mut self, _: f64, _: f64) -> Option<NotificationId> {
        None
    }
    fn bandwidth_estimate(&self) -> Option<f64> {
        None
    }
    fn live_messages(&self) -> usize {
        0
    }
}

impl SubmitBytes for Gone {
    fn port(&mut self) -> &mut dyn NaiPort {
        self
    }
    fn port_ref(&self) -> &dyn NaiPort {
        self
    }
    fn buffered_bytes(&self) -> u64 {
        0
    }
    fn submit_bytes(
        &mut self,
        now: Time,
        data: Vec<u8>,
        o: SendOptions,
    ) -> Result<MessageId, NaiError> {
        self.submit(now, data.len() as u64, o)
    }
}

/// The application's side of a connection: core's `send` on queue 0, as the direct mode's
/// port does on the sender's scheduler.
impl SubmitBytes for AtpConnection {
    fn port(&mut self) -> &mut dyn NaiPort {
        self
    }
    fn port_ref(&self) -> &dyn NaiPort {
        self
    }
    fn buffered_bytes(&self) -> u64 {
        self.stats().buffered_bytes
    }
    fn submit_bytes(
        &mut self,
        now: Time,
        data: Vec<u8>,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        let len = data.len() as u64;
        self.send(now, QueueId(0), data, opts).map_err(|e| match e {
            AppError::Nai(e) => e,
            // Closing: the application was stopped first, so this is not reached; to an NAI
            // application it would be a buffer that takes nothing.
            AppError::Closing | AppError::UnknownConnection(_) => NaiError::BufferFull {
                bytes: len,
                buffered: 0,
                max: 0,
            },
        })
    }
}

/// The client side: connects to the server at its start, runs an NAI application on the
/// connection once accepted, and closes gracefully at its stop (after
/// [`Faults::close_linger`]).
pub struct AtpClientAgent {
    host: Host,
    server: Addr,
    client_id: u64,
    conn: Option<ConnectionId>,
    app: SenderHost,
    started_app: bool,
    connected_at: Option<Time>,
    connect_failed_at: Option<Time>,
    ended: Option<Ended>,
    /// Messages the server sent this side (none in the experiments).
    inbox: DeliveryLog,
    /// (time, rate the scheduler plans with) at each change.
    rate_series: Vec<(Time, f64)>,
}

impl AtpClientAgent {
    /// A client on `local` for the server at `server`, running `app`; `client_id` names the
    /// connection on the wire (draw it from the run's seed). Messages carry `bytes`.
    pub fn new(
        local: Addr,
        server: Addr,
        config: EndpointConfig,
        client_id: u64,
        app: Box<dyn NaiApp>,
        bytes: MessageBytes,
        faults: Faults,
    ) -> AtpClientAgent {
        let mut host = SenderHost::new(app);
        host.set_bytes(bytes);
        AtpClientAgent {
            host: Host::new(local, config, faults),
            server,
            client_id,
            conn: None,
            app: host,
            started_app: false,
            connected_at: None,
            connect_failed_at: None,
            ended: None,
            inbox: DeliveryLog::default(),
            rate_series: Vec::new(),
        }
    }

    /// Every submission and outcome.
    pub fn ledger(&self) -> &Ledger {
        self.app.ledger()
    }

    /// The application.
    pub fn app(&self) -> &dyn NaiApp {
        self.app.app()
    }

    /// The message contents sent (digests by id).
    pub fn message_bytes(&self) -> Option<&MessageBytes> {
        self.app.message_bytes()
    }

    /// When the server accepted (the application started then).
    pub fn connected_at(&self) -> Option<Time> {
        self.connected_at
    }

    /// When the handshake failed, if it did.
    pub fn connect_failed_at(&self) -> Option<Time> {
        self.connect_failed_at
    }

    /// How the connection ended, if it has.
    pub fn ended(&self) -> Option<Ended> {
        self.ended
    }

    /// The connection, while open.
    pub fn connection(&self) -> Option<&AtpConnection> {
        self.host.endpoint.connection(self.conn?)
    }

    /// The endpoint's counters of dropped and statelessly answered datagrams.
    pub fn endpoint_stats(&self) -> &EndpointStats {
        self.host.endpoint.stats()
    }

    /// The rate NAI planned with, at each change.
    pub fn rate_series(&self) -> &[(Time, f64)] {
        &self.rate_series
    }

    /// Hands the endpoint's events to the application and the logs.
    fn pump(&mut self, now: Time) {
        while let Some(ev) = self.host.endpoint.poll_event() {
            match ev {
                EndpointEvent::Connected(id) => {
                    self.conn = Some(id);
                    self.connected_at = Some(now);
                    if let Some(c) = self.host.endpoint.connection_mut(id)
                        && !self.started_app
                    {
                        self.started_app = true;
                        self.app.start(now, c);
                    }
                }
                EndpointEvent::ConnectFailed(_) => {
                    self.connect_failed_at = Some(now);
                    self.app.stop();
                }
                EndpointEvent::Incoming(..) => {}
                EndpointEvent::Connection(id, ev) => self.connection_event(now, id, ev),
            }
        }
        if let Some(c) = self.connection() {
            let rate = c.bandwidth_bytes_per_s();
            if self.rate_series.last().is_none_or(|&(_, r)| r != rate) {
                self.rate_series.push((now, rate));
            }
        }
    }

    fn connection_event(&mut self, now: Time, id: ConnectionId, ev: ConnEvent) {
        match ev {
            ConnEvent::Nai(ev) => match self.host.endpoint.connection_mut(id) {
                Some(c) => self.app.on_event(now, &ev, c),
                None => self.app.on_event(now, &ev, &mut Gone),
            },
            ConnEvent::Delivered(d) => self.inbox.record(SppEvent::Delivered(d)),
            ConnEvent::Discarded(m) => self.inbox.record(SppEvent::Discarded { id: m }),
            ConnEvent::Closed(reason) => {
                self.ended = Some(Ended { at: now, reason });
                self.conn = None;
                self.app.stop();
            }
        }
    }
}

impl Agent for AtpClientAgent {
    fn start(&mut self, now: Time) {
        if self.host.dead {
            return;
        }
        let peer = socket_addr(self.server);
        // A fresh endpoint cannot refuse its first connection.
        if self
            .host
            .endpoint
            .connect(now, peer, self.client_id)
            .is_err()
        {
            self.connect_failed_at = Some(now);
        }
    }

    fn stop(&mut self, now: Time) {
        self.app.stop();
        if !self.host.dead {
            self.host.close_all(now);
            self.pump(now);
        }
    }

    fn handle_packet(&mut self, now: Time, packet: Packet) {
        self.host.handle_packet(now, &packet);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.host.handle_timeout(now);
        self.pump(now);
        if self.host.dead {
            return;
        }
        if let Some(c) = self
            .conn
            .and_then(|id| self.host.endpoint.connection_mut(id))
        {
            self.app.handle_timeout(now, c);
        }
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.host.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        let app = self.conn.and(self.app.poll_timeout());
        [self.host.poll_timeout(), app.filter(|_| !self.host.dead)]
            .into_iter()
            .flatten()
            .min()
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let mut v = Vec::new();
        if let Some(s) = self.connection().map(AtpConnection::stats) {
            v.extend([
                ("data_packets", s.spp.data_packets as f64),
                ("data_bytes", s.spp.data_bytes as f64),
                ("retransmitted_bytes", s.spp.retransmitted_bytes as f64),
                ("lost_packets", s.spp.lost_packets as f64),
                ("packet_pairs", s.packet_pairs as f64),
                ("malformed", s.malformed as f64),
            ]);
        }
        let e = self.endpoint_stats();
        v.push(("endpoint_malformed", e.malformed as f64));
        v
    }

    fn wants_interface_info(&self) -> bool {
        true
    }

    fn on_interface(&mut self, now: Time, info: &InterfaceInfo) {
        self.host.on_interface(now, info);
    }
}

/// What the server saw of one connection.
#[derive(Clone, Debug)]
pub struct ServerConnection {
    /// The client's address.
    pub peer: Addr,
    /// When the connection was accepted.
    pub accepted_at: Time,
    /// Messages delivered on it.
    log: DeliveryLog,
    /// DATA payload bytes received on it (duplicates included).
    pub payload_bytes: u64,
    /// How it ended, if it has.
    pub ended: Option<Ended>,
}

impl ServerConnection {
    /// Messages delivered, in order of delivery.
    pub fn deliveries(&self) -> &[Delivery] {
        self.log.deliveries()
    }

    /// Every delivery checked against what the client sent.
    pub fn payload_check(&self, sent: &MessageBytes) -> PayloadCheck {
        self.log.payload_check(sent)
    }

    /// Partly received messages dropped on the client's cancel notice.
    pub fn discards(&self) -> u64 {
        self.log.discards()
    }
}

/// The server side: accepts clients (handshake with retry tokens), delivers their messages,
/// and answers: acknowledgements, and its own connections' estimator probes and keep-alive
/// PINGs (it submits no messages of its own).
pub struct AtpServerAgent {
    host: Host,
    conns: BTreeMap<ConnectionId, ServerConnection>,
    delivered_bytes: u64,
}

impl AtpServerAgent {
    /// A server on `local` whose tokens are signed with the key in `config.server`.
    pub fn new(local: Addr, config: EndpointConfig, faults: Faults) -> AtpServerAgent {
        AtpServerAgent {
            host: Host::new(local, config, faults),
            conns: BTreeMap::new(),
            delivered_bytes: 0,
        }
    }

    /// Every connection accepted, by id, in order.
    pub fn connections(&self) -> impl Iterator<Item = &ServerConnection> {
        self.conns.values()
    }

    /// The connection from `peer` (the latest, if it connected more than once).
    pub fn connection_from(&self, peer: Addr) -> Option<&ServerConnection> {
        self.conns.values().rev().find(|c| c.peer == peer)
    }

    /// The endpoint's counters of dropped and statelessly answered datagrams.
    pub fn endpoint_stats(&self) -> &EndpointStats {
        self.host.endpoint.stats()
    }

    fn pump(&mut self, now: Time) {
        while let Some(ev) = self.host.endpoint.poll_event() {
            match ev {
                EndpointEvent::Incoming(id, peer) => {
                    let Some(peer) = sim_addr(peer) else {
                        continue;
                    };
                    self.conns.insert(
                        id,
                        ServerConnection {
                            peer,
                            accepted_at: now,
                            log: DeliveryLog::default(),
                            payload_bytes: 0,
                            ended: None,
                        },
                    );
                }
                EndpointEvent::Connection(id, ev) => {
                    let Some(c) = self.conns.get_mut(&id) else {
                        continue;
                    };
                    match ev {
                        ConnEvent::Delivered(d) => {
                            self.delivered_bytes += d.size_bytes;
                            c.log.record(SppEvent::Delivered(d));
                        }
                        ConnEvent::Discarded(m) => c.log.record(SppEvent::Discarded { id: m }),
                        ConnEvent::Closed(reason) => c.ended = Some(Ended { at: now, reason }),
                        ConnEvent::Nai(_) => {}
                    }
                }
                EndpointEvent::Connected(_) | EndpointEvent::ConnectFailed(_) => {}
            }
        }
    }
}

impl Agent for AtpServerAgent {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let data = !is_session(&packet.header)
            && matches!(SppRepr::parse(&packet.header), Ok(SppRepr::Data(_)));
        if data
            && !self.host.dead
            && let Some(c) = self.open_from(packet.src)
        {
            c.payload_bytes += u64::from(packet.payload_len);
        }
        self.host.handle_packet(now, &packet);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.host.handle_timeout(now);
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.host.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.host.poll_timeout()
    }

    fn delivered_bytes(&self) -> u64 {
        self.delivered_bytes
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let messages: usize = self.conns.values().map(|c| c.deliveries().len()).sum();
        let e = self.endpoint_stats();
        vec![
            ("connections", self.conns.len() as f64),
            ("messages_delivered", messages as f64),
            ("message_bytes_delivered", self.delivered_bytes as f64),
            ("retries_sent", e.retries_sent as f64),
            ("endpoint_malformed", e.malformed as f64),
        ]
    }

    fn wants_interface_info(&self) -> bool {
        true
    }

    fn on_interface(&mut self, now: Time, info: &InterfaceInfo) {
        self.host.on_interface(now, info);
    }
}

impl AtpServerAgent {
    /// The open connection from `peer`, if any.
    fn open_from(&mut self, peer: Addr) -> Option<&mut ServerConnection> {
        self.conns
            .values_mut()
            .rev()
            .find(|c| c.peer == peer && c.ended.is_none())
    }
}

/// A server's endpoint configuration: `config` with a token key drawn from the world's seed.
pub fn server_config(world: &World, mut config: EndpointConfig, tag: u64) -> EndpointConfig {
    let mut rng = ChaCha8Rng::seed_from_u64(world.derive_seed(0x7365_7276_6572 ^ tag));
    let mut key = [0u8; 32];
    rng.fill_bytes(&mut key);
    config.server = Some(adaptnet_core::session::token::TokenConfig::new(key));
    config
}

/// A client id drawn from the world's seed for the client at `local`.
pub fn client_id(world: &World, local: Addr) -> u64 {
    world.derive_seed(0x636c_6965_6e74 ^ (u64::from(local.node.0) << 16) ^ u64::from(local.port))
}

/// Installs an ATP client (running `app`) on `from` and a server on `to`, both on UDP `port`,
/// as one flow active over `[start, stop)`: the client connects at `start` and closes at
/// `stop`, waiting `faults.close_linger` for live messages. Messages always carry bytes
/// (the endpoint has no sizes-only path). Returns (client, server).
#[allow(clippy::too_many_arguments)]
pub fn install(
    world: &mut World,
    name: &str,
    config: EndpointConfig,
    from: NodeId,
    to: NodeId,
    port: u16,
    app: Box<dyn NaiApp>,
    start: Time,
    stop: Time,
    client_faults: Faults,
    server_faults: Faults,
) -> Result<(AgentId, AgentId), WorldError> {
    let flow = NaiFlow {
        name,
        kind: "atp-endpoint",
        from,
        to,
        proto: Proto::Udp,
        port,
        extra_ports: Vec::new(),
        start,
        stop,
        data: MessageData::Bytes,
    };
    let (local, remote) = flow.addrs();
    let max = config.atp.max_buffered_bytes;
    let bytes = flow
        .message_bytes(world, max)
        .unwrap_or_else(|| MessageBytes::new(world.derive_seed(u64::from(port)), max));
    let server = AtpServerAgent::new(
        remote,
        server_config(world, config.clone(), u64::from(port)),
        server_faults,
    );
    let id = client_id(world, local);
    let client = AtpClientAgent::new(local, remote, config, id, app, bytes, client_faults);
    flow.install(world, Box::new(client), Box::new(server))
}

/// Adds one more client (running `app`) on `from`, UDP `port`, for the server `server` at
/// `server_addr`, as its own flow over `[start, stop)`: several clients demultiplexed by one
/// server endpoint. Returns the client.
#[allow(clippy::too_many_arguments)]
pub fn add_client(
    world: &mut World,
    name: &str,
    config: EndpointConfig,
    from: NodeId,
    port: u16,
    server: AgentId,
    server_addr: Addr,
    app: Box<dyn NaiApp>,
    start: Time,
    stop: Time,
    faults: Faults,
) -> Result<AgentId, WorldError> {
    let local = Addr { node: from, port };
    let max = config.atp.max_buffered_bytes;
    let seed =
        world.derive_seed(0x6d73_6762_7974_6573 ^ (u64::from(from.0) << 16) ^ u64::from(port));
    let bytes = MessageBytes::new(seed, max);
    let id = client_id(world, local);
    let client = AtpClientAgent::new(local, server_addr, config, id, app, bytes, faults);
    let c = world.add_agent(from, Proto::Udp, port, Box::new(client))?;
    world.add_flow(FlowSpec {
        name: name.to_string(),
        kind: "atp-endpoint".into(),
        sender: c,
        receiver: server,
        start,
        stop,
    });
    Ok(c)
}
