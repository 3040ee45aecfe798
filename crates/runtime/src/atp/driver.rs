//! The ATP endpoint's [`Protocol`]: core's [`Endpoint`] over one UDP socket. Datagrams in
//! (a few `recvmmsg` batches per wake-up, each at its kernel arrival time), datagrams out
//! (in batches, stopping where the socket is full), interface counters to the estimator,
//! and core's events to each connection's [`Port`]. No protocol decision is made here.

use super::{AtpEndpointStats, AtpOptions, InterfaceChoice, app};
use crate::driver::{self, Protocol, Timekeeper};
use crate::error::{ConnectError, ConnectionError, SendError};
use crate::iface::{InterfaceCounters, send_queue_bytes};
use crate::message::command::{Command, ConnOp};
use crate::message::port::{Handles, Port};
use crate::message::{
    Connection, ConnectionEvent, ConnectionStats, EndpointOptions, EndpointStats, Message,
    TransportOptions,
};
use crate::udp::{Datagram, UdpIo, UdpIoConfig};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{
    ConnEvent, ConnectionId, Endpoint, EndpointError, EndpointEvent,
};
use adaptnet_core::session::CloseReason;
use rand::RngExt;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Batches (`recvmmsg` calls) read per wake-up before the loop attends to timers and
/// commands again.
const RECV_BATCHES: usize = 4;
/// Datagrams sent per wake-up before the loop attends to commands, input and timers again
/// (a fast path and a fast sender would otherwise keep one flush going for tens of
/// milliseconds, and an urgent message would wait for it).
const FLUSH_DATAGRAMS: usize = 256;

type ConnectReply = oneshot::Sender<Result<Connection, ConnectError>>;

pub(super) struct AtpDriver {
    io: UdpIo,
    endpoint: Endpoint,
    atp: AtpOptions,
    incoming: mpsc::Sender<Connection>,
    handles: Handles,
    ports: HashMap<u64, Port>,
    connecting: HashMap<u64, (SocketAddr, ConnectReply)>,
    counters: Option<InterfaceCounters>,
    counters_tried: bool,
    next_interface_read: Time,
    /// The endpoint is closing: incoming connections are refused.
    stopping: bool,
    /// The last flush stopped at its budget: core may have more to send now.
    more_output: bool,
    refused: u64,
    /// Per connection, what its application had read when core was last told (flow
    /// control): messages, bytes.
    taken_told: HashMap<u64, (u64, u64)>,
    /// The receive window every connection advertises, bytes.
    window_bytes: u64,
    /// Per connection, delivered messages waiting for room in the inbox's bound in
    /// messages (the window bounds them with the rest of what the receiver holds).
    staged: HashMap<u64, VecDeque<Message>>,
}

impl AtpDriver {
    pub(super) fn new(
        socket: tokio::net::UdpSocket,
        options: EndpointOptions,
        incoming: mpsc::Sender<Connection>,
        handles: Handles,
    ) -> io::Result<AtpDriver> {
        let TransportOptions::Atp(mut atp) = options.transport else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ATP options expected",
            ));
        };
        // Receiver flow control: the window is at most the bytes the inbox holds unread, so
        // a message core reports delivered always fits it. (Its bound in messages is kept by
        // staging: see `deliver`.)
        let window_bytes = atp
            .core
            .atp
            .spp
            .receive_window_bytes
            .unwrap_or(adaptnet_core::atp::endpoint::DEFAULT_RECEIVE_WINDOW_BYTES)
            .min(options.unread_bytes_max)
            .max(1);
        atp.core.atp.spp.receive_window_bytes = Some(window_bytes);
        atp.core.server = options.server.then(|| {
            let key: [u8; 32] = rand::rng().random();
            adaptnet_core::session::token::TokenConfig::new(key)
        });
        // GSO for the DATA core marks coalescable (never for its probes: see `udp`), and
        // on loopback receive GRO, which keeps every probe's own timestamp there.
        let mut io = UdpIo::new(
            socket,
            UdpIoConfig {
                buffer_bytes: atp.socket_buffer_bytes,
                gso: true,
                max_datagram_bytes: usize::from(atp.core.atp.spp.max_datagram_bytes)
                    .max(crate::udp::MAX_DATAGRAM_BYTES),
            },
        )?;
        io.gro_on_loopback();
        Ok(AtpDriver {
            io,
            endpoint: Endpoint::new(atp.core.clone()),
            atp,
            incoming,
            handles,
            ports: HashMap::new(),
            connecting: HashMap::new(),
            counters: None,
            counters_tried: false,
            next_interface_read: Time::ZERO,
            stopping: false,
            more_output: false,
            refused: 0,
            taken_told: HashMap::new(),
            window_bytes,
            staged: HashMap::new(),
        })
    }

    /// Hands connection `id`'s staged messages to its inbox while it has room.
    fn unstage(&mut self, id: u64) {
        let (Some(port), Some(staged)) = (self.ports.get_mut(&id), self.staged.get_mut(&id)) else {
            return;
        };
        while port.has_room()
            && let Some(m) = staged.pop_front()
        {
            // Within the window, so within the inbox's bytes: nothing to close for.
            let _ = port.deliver(m);
        }
        if staged.is_empty() {
            self.staged.remove(&id);
        }
    }

    /// Returns to each connection's window what its application read since the last call,
    /// and asks the inbox for a wake-up when the next eighth of the window has been read
    /// (the receiver's threshold for a window update), so a sender waiting on a full window
    /// is not left waiting for an unrelated wake-up.
    fn return_window(&mut self) {
        let ids: Vec<u64> = self.staged.keys().copied().collect();
        for id in ids {
            self.unstage(id);
        }
        let step = (self.window_bytes / 8).max(1);
        for (id, port) in &self.ports {
            let Some(conn) = self.endpoint.connection_mut(ConnectionId(*id)) else {
                continue;
            };
            let (messages, bytes) = port.taken();
            let told = self.taken_told.entry(*id).or_default();
            if (messages, bytes) != *told {
                conn.handle_consumed(
                    messages.saturating_sub(told.0),
                    bytes.saturating_sub(told.1),
                );
                *told = (messages, bytes);
            }
            if conn.receiver().held_bytes() > 0 {
                port.wake_when_taken(bytes.saturating_add(step));
            }
        }
    }

    /// Feeds the estimator the interface counters, at most every `interface_poll`. Called
    /// after every wake-up, not only at timers: the estimator reacts between ticks to the
    /// interface queue (a rate it cannot sustain shows there within milliseconds), and a
    /// sender limited by its window rather than its pacing may not see a timer for a tick.
    fn read_interface(&mut self, now: Time) {
        if now < self.next_interface_read {
            return;
        }
        self.next_interface_read = now + self.atp.interface_poll;
        let Some(counters) = self.counters.as_ref() else {
            return;
        };
        let Ok(total) = counters.total_bytes() else {
            return;
        };
        let queued = send_queue_bytes(self.io.socket().as_raw_fd()).unwrap_or(0);
        let datagram = u64::from(self.atp.core.atp.spp.max_datagram_bytes.max(1));
        let packets = u32::try_from(queued / datagram).unwrap_or(u32::MAX);
        self.endpoint.handle_interface(now, total, packets);
    }

    /// Picks the interface once the first peer is known.
    fn choose_interface(&mut self, peer: SocketAddr) {
        if self.counters_tried {
            return;
        }
        self.counters_tried = true;
        self.counters = match &self.atp.interface {
            InterfaceChoice::Off => None,
            InterfaceChoice::Named(name) => InterfaceCounters::new(name).ok(),
            InterfaceChoice::Auto => InterfaceCounters::for_peer(peer).ok(),
        };
        if self.counters.is_none() && self.atp.interface != InterfaceChoice::Off {
            tracing::warn!("interface counters unavailable; ATP counts its own datagrams");
        }
    }

    /// A new connection's port and handle.
    fn open(&mut self, id: ConnectionId, peer: SocketAddr) -> Connection {
        let (port, conn) = self.handles.open(id.0, peer);
        self.ports.insert(id.0, port);
        self.choose_interface(peer);
        conn
    }

    /// Closes connection `id` from this side for `why` (after `linger` for live messages).
    fn close(&mut self, now: Time, id: u64, why: ConnectionError, linger: Duration) {
        if let Some(port) = self.ports.get_mut(&id) {
            port.close_locally(why);
            self.endpoint.close(now, ConnectionId(id), linger);
        }
    }

    fn connection_op(&mut self, now: Time, id: u64, op: ConnOp) {
        if let ConnOp::Close { linger } = op {
            self.close(now, id, ConnectionError::LocallyClosed, linger);
            return;
        }
        // A connection gone drops the reply: the handle reports the connection's end.
        let (Some(port), Some(conn)) = (
            self.ports.get_mut(&id),
            self.endpoint.connection_mut(ConnectionId(id)),
        ) else {
            return;
        };
        let open = port.closing().cloned().map_or(Ok(()), Err);
        match op {
            ConnOp::Send {
                queue,
                data,
                opts,
                reply,
            } => {
                let r = open.map_err(SendError::from).and_then(|()| {
                    let id = app::submit(conn, now, queue, data, opts)?;
                    Ok(port.submitted(id))
                });
                let _ = reply.send(r);
            }
            ConnOp::Control { id, op, reply } => {
                let _ = reply.send(app::control(conn, now, id, op));
            }
            ConnOp::CreateQueue { reply } => {
                let _ = reply.send(app::create_queue(conn));
            }
            ConnOp::RegisterBandwidthRange { low, high, reply } => {
                let _ = reply.send(app::register_bandwidth_range(conn, low, high));
            }
            ConnOp::Stats { reply } => {
                let _ = reply.send(ConnectionStats::Atp(app::stats(conn)));
            }
            ConnOp::Close { .. } => {}
        }
    }

    fn connection_event(&mut self, now: Time, id: ConnectionId, ev: ConnEvent) {
        let Some(port) = self.ports.get_mut(&id.0) else {
            return;
        };
        match ev {
            ConnEvent::Nai(ev) => port.nai_event(ev),
            ConnEvent::Delivered(d) => {
                let message = Message {
                    id: d.id,
                    priority: d.priority,
                    data: d.data.unwrap_or_default(),
                };
                // Flow control: core's window is at most the bytes the inbox holds, and core
                // refuses a peer that passes it, so the inbox's bytes are never passed. Its
                // bound in messages may be: those wait here (a read makes room and wakes
                // the driver). Should the bytes be passed (a bug), the connection is closed
                // rather than the message dropped: its sender was told it was delivered.
                let staged = self.staged.entry(id.0).or_default();
                if !staged.is_empty() || !port.has_room() {
                    staged.push_back(message);
                } else {
                    self.staged.remove(&id.0);
                    if let Some(too_slow) = port.deliver(message) {
                        tracing::error!(?id, "receive window passed: closing");
                        self.close(now, id.0, too_slow, Duration::ZERO);
                    }
                }
            }
            ConnEvent::Discarded(m) => port.event(ConnectionEvent::Discarded(m)),
            ConnEvent::Closed(reason) => {
                tracing::info!(?id, ?reason, "ATP connection ended");
                self.taken_told.remove(&id.0);
                if let Some(mut port) = self.ports.remove(&id.0) {
                    // What was delivered stays readable after the end, staged or not.
                    for m in self.staged.remove(&id.0).into_iter().flatten() {
                        let _ = port.deliver(m);
                    }
                    let why = port.closing().cloned().unwrap_or_else(|| closed_by(reason));
                    port.end(why);
                }
            }
        }
    }
}

/// Why a connection this side did not close ended: its own idle timeout, or the peer's CLOSE
/// (a peer's `Idle` means the peer timed out hearing nothing from here — a timeout all the
/// same).
fn closed_by(reason: CloseReason) -> ConnectionError {
    match reason {
        CloseReason::Idle => ConnectionError::TimedOut,
        r => ConnectionError::ClosedByPeer(r),
    }
}

impl Protocol for AtpDriver {
    type Command = Command;

    fn io_ready(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_ {
        let (more, io) = (self.more_output, &self.io);
        async move { if more { Ok(()) } else { io.ready().await } }
    }

    fn handle_io(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let endpoint = &mut self.endpoint;
        driver::udp::receive(&mut self.io, time, RECV_BATCHES, |now, peer, data| {
            endpoint.handle_datagram(now, peer, data);
        });
        Ok(())
    }

    fn handle_command(&mut self, now: Time, command: Command) {
        match command {
            Command::Connect { peer, reply } => {
                let client_id: u64 = rand::rng().random();
                match self.endpoint.connect(now, peer, client_id) {
                    Ok(id) => {
                        self.connecting.insert(id.0, (peer, reply));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(match e {
                            EndpointError::AlreadyConnected(a) => ConnectError::AlreadyConnected(a),
                            EndpointError::TooManyConnections(n) => {
                                ConnectError::TooManyConnections(n)
                            }
                        }));
                    }
                }
            }
            Command::Adopt { peer, reply, .. } => {
                let source = io::Error::new(io::ErrorKind::Unsupported, "ATP opens no TCP");
                let _ = reply.send(Err(ConnectError::Io { peer, source }));
            }
            Command::Stats { reply } => {
                let _ = reply.send(EndpointStats {
                    connections: self.endpoint.connection_count(),
                    refused: self.refused,
                    atp: Some(AtpEndpointStats {
                        core: self.endpoint.stats().clone(),
                        interface: self.counters.as_ref().map(|c| c.name().to_owned()),
                    }),
                });
            }
            Command::Conn { id, op } => self.connection_op(now, id, op),
        }
    }

    fn handle_dropped(&mut self, now: Time, id: u64) {
        self.close(now, id, ConnectionError::LocallyClosed, Duration::ZERO);
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.endpoint.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Time) {
        self.endpoint.handle_timeout(now);
    }

    fn flush(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let now = time.now();
        self.read_interface(now);
        let endpoint = &mut self.endpoint;
        self.more_output = driver::udp::flush(&mut self.io, time, FLUSH_DATAGRAMS, |now, buf| {
            endpoint.poll_transmit(now, buf).map(|t| Datagram {
                to: t.destination,
                len: t.len,
                coalesce: t.coalesce,
            })
        })?;
        Ok(())
    }

    fn dispatch(&mut self, now: Time) {
        self.return_window();
        while let Some(ev) = self.endpoint.poll_event() {
            match ev {
                EndpointEvent::Connected(id) => {
                    if let Some((peer, reply)) = self.connecting.remove(&id.0) {
                        let conn = self.open(id, peer);
                        // A caller that gave up drops `conn`, whose drop closes it.
                        let _ = reply.send(Ok(conn));
                    }
                }
                EndpointEvent::ConnectFailed(id) => {
                    if let Some((peer, reply)) = self.connecting.remove(&id.0) {
                        let e = if self.stopping {
                            ConnectError::EndpointClosed
                        } else {
                            ConnectError::HandshakeFailed(peer)
                        };
                        let _ = reply.send(Err(e));
                    }
                }
                EndpointEvent::Incoming(id, peer) => {
                    let conn = self.open(id, peer);
                    if self.stopping || self.incoming.try_send(conn).is_err() {
                        // Accept queue full, nobody accepts, or closing: refuse by closing.
                        self.refused += 1;
                        self.close(now, id.0, ConnectionError::LocallyClosed, Duration::ZERO);
                    }
                }
                EndpointEvent::Connection(id, ev) => self.connection_event(now, id, ev),
            }
        }
        for (id, port) in &self.ports {
            if let Some(c) = self.endpoint.connection(ConnectionId(*id)) {
                port.set_estimate(app::planning_rate(c));
            }
        }
    }

    fn close_all(&mut self, now: Time) {
        self.stopping = true;
        let ids: Vec<u64> = self
            .ports
            .keys()
            .chain(self.connecting.keys())
            .copied()
            .collect();
        for id in ids {
            if let Some(port) = self.ports.get_mut(&id) {
                port.close_locally(ConnectionError::EndpointClosed);
            }
            self.endpoint.close(now, ConnectionId(id), Duration::ZERO);
        }
    }

    fn is_idle(&self) -> bool {
        self.endpoint.connection_count() == 0 && !self.io.stalled()
    }

    fn finish(&mut self, why: ConnectionError) {
        for (_, mut port) in self.ports.drain() {
            port.end(why.clone());
        }
        for (_, (_, reply)) in self.connecting.drain() {
            let _ = reply.send(Err(ConnectError::EndpointClosed));
        }
    }
}
