//! The stream endpoint's [`Protocol`]: core's TCP [`Endpoint`] over one UDP socket, one
//! segment per datagram. Datagrams in (a few `recvmmsg` batches per wake-up, each at its
//! kernel arrival time), datagrams out (in batches, stopping where the socket is full), the
//! application's bytes between its handles' queues and core, and core's events to the
//! handles. No protocol decision is made here.
//!
//! Under the CM, the endpoint's connections call the CM synchronously (core's `cm::tcp`),
//! and after sending the driver pumps the CM's events: a grant to one of its own streams
//! sends again at once, one to another endpoint's stream wakes that endpoint's driver.

use super::conn::{Buffers, Port, lock};
use super::icmp;
use super::{Command, Congestion, LISTEN_PORT, StreamConn, StreamOptions, StreamStats};
use crate::cm::LocalCm as Cm;
use crate::cm::host::Route;
use crate::driver::{self, Protocol, Shared, Timekeeper};
use crate::error::{ConnectError, ConnectionError};
use crate::udp::{Datagram, UdpIo, UdpIoConfig};
use adaptnet_core::Time;
use adaptnet_core::session::CloseReason;
use adaptnet_core::session::token::TokenConfig;
use adaptnet_core::tcp::bytes::trim_when_empty;
use adaptnet_core::tcp::endpoint::{
    self as core_ep, ConnectionHandle, Endpoint, EndpointConfig, EndpointEvent, Listen,
};
use adaptnet_core::tcp::{AbortReason, wire::MAX_HEADER_LEN};
use rand::RngExt;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::Interest;
use tokio::sync::{mpsc, oneshot};

/// Receive batches (`recvmmsg` calls) per wake-up before the loop attends to timers and
/// commands again.
const RECV_BATCHES: usize = 2;
/// Datagrams sent per wake-up before the loop attends to commands, input and timers again.
const FLUSH_DATAGRAMS: usize = 256;
/// Send rounds per wake-up while the CM keeps granting this endpoint's streams; beyond, the
/// driver comes back at once (bounds one unit of work).
const MAX_CM_ROUNDS: usize = 8;
/// Largest datagram accepted or built.
const MAX_DATAGRAM: usize = 65_535;
/// ICMP error reports read per wake-up (each may end connects); the rest wait for the next.
const MAX_ICMP_REPORTS: usize = 64;
/// How long a stream's bytes must stand still before its emptied buffers give their storage
/// back. While bytes flow the buffers keep their size: a bulk flow empties them several times
/// a millisecond, and giving the storage back each time cost the loopback benchmark 45 % of
/// its throughput; an idle stream holds little (issue 17: ~5 MB a stream before).
const QUIET_BEFORE_TRIM: Duration = Duration::from_millis(100);

/// Moves what the application wrote on stream `h` to core (which keeps it until
/// acknowledged).
fn hand_over(endpoint: &mut Endpoint<SocketAddr>, h: ConnectionHandle, b: &mut Buffers) {
    if !b.pending.is_empty() {
        let (front, back) = b.pending.as_slices();
        let _ = endpoint.write(h, front);
        let _ = endpoint.write(h, back);
        b.pending.clear();
    }
}

type ConnectReply = oneshot::Sender<Result<StreamConn, ConnectError>>;

pub(super) struct StreamDriver {
    io: UdpIo,
    endpoint: Endpoint<SocketAddr>,
    options: StreamOptions,
    shared: Arc<Shared>,
    incoming: mpsc::Sender<StreamConn>,
    /// The CM the streams run under (kept alive while the endpoint runs).
    cm: Option<Cm>,
    ports: HashMap<ConnectionHandle, Port>,
    connecting: HashMap<ConnectionHandle, (SocketAddr, ConnectReply)>,
    stats: StreamStats,
    sent_count: u64,
    /// The last flush stopped at its budget: core may have more to send now.
    more_output: bool,
    /// The last time handed to core (for `finish`, which has none).
    last_now: Time,
}

impl StreamDriver {
    pub(super) fn new(
        socket: tokio::net::UdpSocket,
        options: StreamOptions,
        incoming: mpsc::Sender<StreamConn>,
        shared: Arc<Shared>,
        cm: Option<Cm>,
    ) -> io::Result<(StreamDriver, Timekeeper)> {
        // Every segment may share a GSO run: TCP measures nothing from packet spacing.
        let max_datagram_bytes = usize::from(options.core.mss)
            .saturating_add(MAX_HEADER_LEN)
            .min(MAX_DATAGRAM);
        let io = UdpIo::new(
            socket,
            UdpIoConfig {
                buffer_bytes: options.socket_buffer_bytes,
                gso: true,
                max_datagram_bytes,
            },
        )?;
        // A connect to an address where nothing listens fails when the network says so.
        let ipv6 = io.socket().local_addr()?.is_ipv6();
        if let Err(e) = icmp::enable(io.socket().as_raw_fd(), ipv6) {
            tracing::debug!(error = %e, "no ICMP error reports: connects to nowhere time out");
        }
        let congestion = match (&options.congestion, &cm) {
            (_, Some(cm)) => core_ep::Congestion::Cm(cm.host().cm.clone()),
            (Congestion::Adtcp(config), None) => core_ep::Congestion::Adtcp(*config),
            _ => core_ep::Congestion::NewReno,
        };
        let listen = if options.server {
            Listen::Cookies {
                port: LISTEN_PORT,
                // A fresh secret per endpoint.
                tokens: TokenConfig::new(rand::rng().random()),
            }
        } else {
            Listen::Off
        };
        let endpoint = Endpoint::new(EndpointConfig {
            listen,
            max_connections: options.max_connections,
            linger: Some(options.linger),
            congestion,
            ..EndpointConfig::client(options.core.clone())
        });
        // One clock for the CM and every driver that calls it: its inputs' `now` must not go
        // backwards.
        let clock = cm
            .as_ref()
            .map_or_else(crate::clock::Clock::new, |c| c.host().clock);
        let driver = StreamDriver {
            io,
            endpoint,
            options,
            shared,
            incoming,
            cm,
            ports: HashMap::new(),
            connecting: HashMap::new(),
            stats: StreamStats::default(),
            sent_count: 0,
            more_output: false,
            last_now: Time::ZERO,
        };
        Ok((driver, Timekeeper::new(clock)))
    }

    /// A new stream's port (and its CM route) and first handle.
    fn open(&mut self, h: ConnectionHandle, peer: SocketAddr) -> StreamConn {
        let (port, conn) = Port::open(
            h.0,
            peer,
            self.shared.clone(),
            self.options.send_buffer_bytes,
            self.options.read_buffer_bytes,
        );
        self.ports.insert(h, port);
        conn
    }

    /// Grants for `h`'s CM flow wake this driver.
    fn route(&self, h: ConnectionHandle) {
        if let (Some(cm), Some(flow)) = (&self.cm, self.endpoint.stream(h).and_then(|s| s.flow())) {
            cm.host().route(flow, Route::Stream(self.shared.clone()));
        }
    }

    /// Why stream `h` ended, from core's account.
    fn why_aborted(&self, h: ConnectionHandle) -> ConnectionError {
        let reason = self
            .endpoint
            .stream(h)
            .and_then(|s| s.conn())
            .and_then(adaptnet_core::tcp::Connection::abort_reason);
        match reason {
            Some(AbortReason::Reset) => ConnectionError::Reset,
            Some(AbortReason::Unreachable) => ConnectionError::Unreachable,
            _ => ConnectionError::TimedOut,
        }
    }

    /// The application's side of every stream: written bytes and shutdowns to core, core's
    /// acknowledged and delivered bytes back.
    fn exchange(&mut self, now: Time) {
        let handles: Vec<ConnectionHandle> = self.ports.keys().copied().collect();
        for h in handles {
            let Some(port) = self.ports.get(&h) else {
                continue;
            };
            let buffers = port.buffers.clone();
            let dropped = port.dropped;
            let mut b = lock(&buffers);
            let mut moved = !b.pending.is_empty();
            hand_over(&mut self.endpoint, h, &mut b);
            if b.shutdown && !b.shutdown_sent {
                b.shutdown_sent = true;
                self.endpoint.close(now, h);
            }
            let Some(s) = self.endpoint.stream(h) else {
                continue;
            };
            let unacked = usize::try_from(s.unacked_bytes()).unwrap_or(usize::MAX);
            if unacked < b.unacked {
                b.wake_writer();
            }
            moved |= unacked != b.unacked;
            b.unacked = unacked;
            if !dropped {
                let room = b.rx_cap.saturating_sub(b.rx.len()) as u64;
                if room > 0 && self.endpoint.read(h, room, &mut b.rx) > 0 {
                    b.wake_reader();
                    moved = true;
                }
            }
            if moved && let Some(port) = self.ports.get_mut(&h) {
                port.trim_at = Some(now + QUIET_BEFORE_TRIM);
            }
            if dropped {
                continue;
            }
            let s = self.endpoint.stream(h);
            if !b.eof && s.is_some_and(|s| s.at_eof()) {
                b.eof = true;
                b.wake_reader();
            }
            if !b.send_closed && s.is_some_and(|s| s.send_closed()) {
                b.send_closed = true;
                b.wake_writer();
            }
            let both_closed = b.eof && b.send_closed;
            drop(b);
            if both_closed && let Some(port) = self.ports.get(&h) {
                port.end(ConnectionError::ClosedByPeer(CloseReason::Application));
            }
        }
    }

    fn handle_event(&mut self, now: Time, ev: EndpointEvent<SocketAddr>) {
        match ev {
            EndpointEvent::Connected(h) => {
                if let Some((peer, reply)) = self.connecting.remove(&h) {
                    let conn = self.open(h, peer);
                    // A caller that gave up drops `conn`, whose drop closes the stream.
                    if let Err(Ok(conn)) = reply.send(Ok(conn)) {
                        drop(conn);
                    }
                }
            }
            EndpointEvent::Incoming(h, peer) => {
                self.route(h);
                let conn = self.open(h, peer);
                if self.shared.stop_requested() || self.incoming.try_send(conn).is_err() {
                    // Accept queue full, nobody accepts, or closing: the dropped handle
                    // closes the stream.
                    self.stats.refused += 1;
                }
            }
            EndpointEvent::Aborted(h) => {
                let why = self.why_aborted(h);
                if let Some((peer, reply)) = self.connecting.remove(&h) {
                    let e = match why {
                        // A listening endpoint that refuses resets the SYN; where nothing
                        // listens, the network answers port unreachable.
                        ConnectionError::Reset | ConnectionError::Unreachable => {
                            ConnectError::Refused(peer)
                        }
                        _ => ConnectError::NoAnswer(peer),
                    };
                    let _ = reply.send(Err(e));
                    self.endpoint.release(now, h);
                }
                if let Some(port) = self.ports.get(&h) {
                    port.end(why);
                }
            }
            EndpointEvent::Closed(h) => {
                if let Some(port) = self.ports.remove(&h) {
                    port.end(ConnectionError::ClosedByPeer(CloseReason::Application));
                }
                self.connecting.remove(&h);
            }
            EndpointEvent::Readable(_)
            | EndpointEvent::PeerClosed(_)
            | EndpointEvent::SendClosed(_) => {}
        }
    }

    /// Gives back the storage of the emptied buffers of every stream whose bytes have stood
    /// still for [`QUIET_BEFORE_TRIM`].
    fn trim_quiet(&mut self, now: Time) {
        for (h, port) in &mut self.ports {
            if port.trim_at.is_some_and(|t| t <= now) {
                port.trim_at = None;
                let mut b = lock(&port.buffers);
                trim_when_empty(&mut b.pending);
                trim_when_empty(&mut b.rx);
                drop(b);
                self.endpoint.trim_storage(*h);
            }
        }
    }

    /// Bytes of storage the streams' byte buffers hold: core's (unacknowledged, reassembly)
    /// and the handles' queues.
    fn buffer_storage_bytes(&self) -> u64 {
        let queues: usize = self
            .ports
            .values()
            .map(|p| {
                let b = lock(&p.buffers);
                b.pending.capacity() + b.rx.capacity()
            })
            .sum();
        (self.endpoint.storage_bytes() + queues) as u64
    }

    /// Sends what core has; returns whether the budget ran out.
    fn send(&mut self, time: &mut Timekeeper) -> io::Result<bool> {
        let (endpoint, stats, sent_count) =
            (&mut self.endpoint, &mut self.stats, &mut self.sent_count);
        let drop_every = self.options.drop_every_nth_sent.filter(|&n| n > 0);
        driver::udp::flush(&mut self.io, time, FLUSH_DATAGRAMS, |now, buf| {
            loop {
                let t = endpoint.poll_transmit(now, buf)?;
                *sent_count += 1;
                if drop_every.is_some_and(|n| sent_count.is_multiple_of(n)) {
                    stats.injected_drops += 1;
                    continue;
                }
                stats.datagrams_sent += 1;
                return Some(Datagram {
                    to: t.to,
                    len: t.len,
                    coalesce: true,
                });
            }
        })
    }
}

impl Protocol for StreamDriver {
    type Command = Command;

    fn io_ready(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_ {
        let (more, io) = (self.more_output, &self.io);
        async move {
            if more {
                return Ok(());
            }
            // An ICMP error report raises EPOLLERR, not readability.
            tokio::select! {
                r = io.ready() => r,
                r = io.socket().ready(Interest::ERROR) => r.map(drop),
            }
        }
    }

    fn handle_io(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        // The error queue first: reading it clears the socket's pending error, which would
        // otherwise fail the next receive or send once.
        let socket = self.io.socket();
        for _ in 0..MAX_ICMP_REPORTS {
            let report = socket.try_io(Interest::ERROR, || icmp::recv_report(socket.as_raw_fd()));
            match report {
                Ok(icmp::Report::PortUnreachable(peer)) => {
                    let now = time.now();
                    let refused = self.endpoint.handle_unreachable(now, peer);
                    tracing::debug!(%peer, refused, "port unreachable");
                }
                Ok(icmp::Report::Other) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::debug!(error = %e, "reading the error queue failed");
                    break;
                }
            }
        }
        let (endpoint, stats) = (&mut self.endpoint, &mut self.stats);
        driver::udp::receive(&mut self.io, time, RECV_BATCHES, |now, peer, data| {
            stats.datagrams_received += 1;
            endpoint.handle_datagram(now, peer, data);
        });
        Ok(())
    }

    fn handle_command(&mut self, now: Time, command: Command) {
        self.last_now = now;
        match command {
            Command::Stats { reply } => {
                let core = self.endpoint.stats();
                let _ = reply.send(StreamStats {
                    malformed: core.malformed,
                    unknown: core.unknown,
                    refused: core.refused + self.stats.refused,
                    cookies_sent: core.cookies_sent,
                    open_streams: self.endpoint.connection_count() as u64,
                    buffer_storage_bytes: self.buffer_storage_bytes(),
                    adtcp_options_received: core.adtcp_options_received,
                    ..self.stats
                });
            }
            Command::Connect { peer, reply } => {
                let iss: u32 = rand::rng().random();
                match self.endpoint.connect(now, peer, None, LISTEN_PORT, iss) {
                    Ok(h) => {
                        self.route(h);
                        self.connecting.insert(h, (peer, reply));
                    }
                    Err(core_ep::EndpointError::TooManyConnections(n)) => {
                        let e = if self.shared.stop_requested() {
                            ConnectError::EndpointClosed
                        } else {
                            ConnectError::TooManyConnections(n)
                        };
                        let _ = reply.send(Err(e));
                    }
                    Err(e) => {
                        let source = io::Error::new(io::ErrorKind::AddrInUse, e);
                        let _ = reply.send(Err(ConnectError::Io { peer, source }));
                    }
                }
            }
        }
    }

    fn handle_dropped(&mut self, now: Time, id: u64) {
        let h = ConnectionHandle(id);
        if let Some(port) = self.ports.get_mut(&h) {
            port.dropped = true;
            // What the application wrote before it let go still goes, then the FIN.
            let b = port.buffers.clone();
            hand_over(&mut self.endpoint, h, &mut lock(&b));
        }
        self.endpoint.release(now, h);
    }

    fn poll_timeout(&self) -> Option<Time> {
        // The CM's deadlines too: a grant it paces to one of these streams must be issued
        // even if the CM's own task has stopped (its runtime gone).
        let cm = self
            .cm
            .as_ref()
            .and_then(|c| c.host().cm.borrow().poll_timeout());
        let trim = self.ports.values().filter_map(|p| p.trim_at).min();
        [self.endpoint.poll_timeout(), cm, trim]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: Time) {
        self.last_now = now;
        self.endpoint.handle_timeout(now);
        self.trim_quiet(now);
    }

    fn flush(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let mut more = false;
        for _ in 0..MAX_CM_ROUNDS {
            let now = time.now();
            self.last_now = now;
            self.exchange(now);
            more = self.send(time)?;
            let granted = match &self.cm {
                Some(cm) => cm.host().pump(time.now(), Some(&self.shared)),
                None => false,
            };
            if more || !granted {
                break;
            }
            // A grant to one of these streams: send again now, as core's CM contract asks.
            more = true;
        }
        self.more_output = more;
        Ok(())
    }

    fn dispatch(&mut self, now: Time) {
        self.last_now = now;
        self.exchange(now);
        while let Some(ev) = self.endpoint.poll_event() {
            self.handle_event(now, ev);
        }
        self.exchange(now);
    }

    fn close_all(&mut self, now: Time) {
        // What the applications wrote goes first, then each stream's FIN; their handles
        // learn at once that the endpoint closed.
        self.exchange(now);
        for port in self.ports.values() {
            port.end(ConnectionError::EndpointClosed);
        }
        self.endpoint.close_all(now);
        for (_, (_, reply)) in self.connecting.drain() {
            let _ = reply.send(Err(ConnectError::EndpointClosed));
        }
    }

    fn is_idle(&self) -> bool {
        self.endpoint.is_idle() && !self.io.stalled()
    }

    fn finish(&mut self, why: ConnectionError) {
        for port in self.ports.values() {
            port.end(why.clone());
        }
        self.ports.clear();
        for (_, (_, reply)) in self.connecting.drain() {
            let _ = reply.send(Err(ConnectError::EndpointClosed));
        }
        if let Some(cm) = &self.cm {
            for h in self.endpoint.handles().collect::<Vec<_>>() {
                if let Some(flow) = self.endpoint.stream(h).and_then(|s| s.flow()) {
                    cm.host().unroute(flow);
                }
            }
        }
        self.endpoint.abandon_all(self.last_now);
        // The resets of streams that did not finish in time, best effort: a full socket
        // loses them as the network would, and the peer times out instead.
        let (endpoint, now) = (&mut self.endpoint, self.last_now);
        let _ = self.io.send_from(|buf| {
            endpoint.poll_transmit(now, buf).map(|t| Datagram {
                to: t.to,
                len: t.len,
                coalesce: false,
            })
        });
    }
}
