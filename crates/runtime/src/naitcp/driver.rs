//! The baselines' [`Protocol`]: core's [`BaselineSender`] (a client connection, over one TCP
//! connection or one per level) and [`RecordReceiver`] (each accepted TCP connection) over
//! non-blocking kernel TCP sockets. Records out while core allows and the socket takes them;
//! acknowledgement bytes in; records in while the application has room; one acknowledgement
//! byte out per delivered message — the bytes of one wake-up's messages in one write, with
//! Nagle off, so no acknowledgement waits on Nagle or a delayed ACK. No protocol decision is
//! made here.
//!
//! # A dead peer
//! Kernel TCP notices a peer that closed or reset (end of stream, `ECONNRESET`), but not one
//! that vanished (a dead host, a link down): it would retransmit for many minutes. So every
//! [`liveness::check_period`] the driver reads `TCP_INFO` of every socket and ends a
//! connection that awaits an answer and heard nothing at all from its peer for
//! [`PEER_TIMEOUT`] ([`BaselineOptions::peer_timeout`]; the same 8 s ATP's `silent_timeout`
//! gives a silent peer): it ends with [`ConnectionError::TimedOut`], every live message gets
//! its outcome (`Abandoned`, or `Expired` for NAI-MTCP timers that fired first) and the end
//! is logged with the sockets' TCP state. Keep-alives (first after [`keepalive_idle`] of
//! quiet, then every second or so) make an idle peer answer. The kernel's `TCP_USER_TIMEOUT` is
//! not set: it measures the age of unacknowledged or unsent data, not the peer's silence,
//! and ended live connections under heavy loss (see [`liveness`]).
//!
//! The first keep-alive probe goes after a quarter of the timeout, so about six fit in it:
//! a single probe (or its answer) dropped by a full bottleneck queue does not leave an idle
//! level of NAI-MTCPk silent for the whole timeout while its other level keeps the queue
//! full.

use super::link::Link;
use super::liveness;
use super::{BaselineOptions, READ_CHUNK_BYTES};
use crate::driver::{Protocol, Timekeeper};
use crate::error::{ConnectError, ConnectionError, SendError};
use crate::iface::send_queue_bytes;
use crate::message::command::{Command, ConnOp};
use crate::message::port::{Handles, Port};
use crate::message::{
    Connection, ConnectionEvent, ConnectionStats, EndpointOptions, EndpointStats, Message,
    TransportOptions,
};
use adaptnet_core::Time;
use adaptnet_core::nai::baseline::BaselineSender;
use adaptnet_core::nai::baseline::record::RecordReceiver;
use adaptnet_core::nai::{NaiError, QueueId};
use adaptnet_core::session::CloseReason;
use adaptnet_core::spp::SppEvent;
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How often a sender re-checks the kernel send queue while messages are live: the blocking
/// send's "room" is the kernel's unacknowledged bytes, which change with no event to wait on.
const ROOM_POLL: Duration = Duration::from_millis(1);
/// How long accepting pauses after the listener failed (out of descriptors: back off rather
/// than spin, and keep accepting after).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// Most record bytes written to one TCP connection per wake-up. A socket that keeps taking
/// bytes (a receiver on loopback that reads as fast) would otherwise hold the loop in one
/// flush for a whole bulk message: NAI-MTCP's urgent level, whose `send` waits in the
/// command channel meanwhile, was written only after a 48 MB bulk message on a loaded host.
const WRITE_BYTES_PER_WAKE: usize = 512 << 10;
/// Reads per connection per wake-up (bounds one unit of work).
const READS_PER_WAKE: usize = 4;
/// Connections taken from the listener per wake-up (a flood of connections is served in
/// batches, between which established connections are read).
const ACCEPTS_PER_WAKE: usize = 32;
/// Acknowledgement bytes a receiver holds for a peer that does not read them before it
/// stops reading that peer's records.
const MAX_PENDING_ACK_BYTES: usize = 64 << 10;
/// How long a connection awaiting an answer may hear nothing from its peer before it is
/// ended as dead.
pub(crate) const PEER_TIMEOUT: Duration = Duration::from_secs(8);
/// Quiet time before the first keep-alive probe at most; then one a second (or so).
pub(crate) const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);

/// Quiet time before the first keep-alive probe for a connection ended after `peer_timeout`
/// of silence: [`KEEPALIVE_IDLE`], but at most a quarter of the timeout (and at least 1 s), so
/// that several probes go before it (see the module docs).
fn keepalive_idle(peer_timeout: Duration) -> Duration {
    (peer_timeout / 4).clamp(Duration::from_secs(1), KEEPALIVE_IDLE)
}

/// Makes kernel TCP notice a vanished peer (see the module docs). Best effort: a platform
/// without these options keeps TCP's own (much longer) timeouts.
fn watch_peer(stream: &TcpStream, peer_timeout: Duration) {
    let fd = std::os::fd::AsRawFd::as_raw_fd(stream);
    let set = |level: libc::c_int, opt: libc::c_int, value: libc::c_int| {
        // SAFETY: setsockopt reads one int of the given size from the pointer.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                opt,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        }
    };
    let secs = |d: Duration| libc::c_int::try_from(d.as_secs()).unwrap_or(libc::c_int::MAX);
    let idle = keepalive_idle(peer_timeout);
    let (interval, count) = liveness::keepalive_interval_and_count(peer_timeout, idle);
    let int = |v: u32| libc::c_int::try_from(v).unwrap_or(libc::c_int::MAX);
    // 0: the kernel's own retransmission limits (`tcp_retries2`), not a user timeout.
    let _ = set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, 0);
    let _ = set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1);
    let _ = set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs(idle));
    let _ = set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, int(interval));
    let _ = set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, int(count));
}

/// One connection's side of the baseline.
enum Role {
    /// A client: core's baseline sender over its TCP connections.
    Sender {
        sender: BaselineSender,
        links: Vec<Link>,
        /// Closing gracefully: ends when no message is live or at this time.
        draining_until: Option<Time>,
        /// The last flush stopped at [`WRITE_BYTES_PER_WAKE`] with records still to write.
        more_to_write: bool,
    },
    /// A server's accepted TCP connection: records in, acknowledgement bytes out.
    Receiver {
        rx: RecordReceiver,
        link: Link,
        /// When the peer last sent something, or the application last held its reading
        /// back: the idle timeout runs from here.
        last_heard: Time,
    },
}

impl Role {
    /// The connection's TCP connections (a sender's one per level, a receiver's one).
    fn links(&self) -> &[Link] {
        match self {
            Role::Sender { links, .. } => links,
            Role::Receiver { link, .. } => std::slice::from_ref(link),
        }
    }
}

struct Conn {
    role: Role,
    port: Port,
}

pub(super) struct BaselineDriver {
    listener: Option<TcpListener>,
    /// A connection (or a failure) the listener produced while the loop waited.
    accepted: Option<io::Result<(TcpStream, SocketAddr)>>,
    accept_paused_until: Option<Time>,
    /// Accept failures since the last success (logged once per streak, not per failure).
    accept_failures: u64,
    /// Accepted connections open (the receivers), bounded by `options.max_connections`.
    receivers: usize,
    conns: BTreeMap<u64, Conn>,
    next_id: u64,
    incoming: mpsc::Sender<Connection>,
    handles: Handles,
    options: BaselineOptions,
    buf: Vec<u8>,
    refused: u64,
    stopping: bool,
    /// The time of the last wake-up (for the room poll's deadline).
    last_now: Time,
    /// When the peers' liveness was last checked (see the module docs).
    liveness_checked: Time,
}

impl BaselineDriver {
    pub(super) fn new(
        listener: Option<TcpListener>,
        options: EndpointOptions,
        incoming: mpsc::Sender<Connection>,
        handles: Handles,
    ) -> BaselineDriver {
        let options = match options.transport {
            TransportOptions::Baseline(b) => b,
            TransportOptions::Atp(_) => BaselineOptions::new(handles.transport),
        };
        BaselineDriver {
            listener,
            accepted: None,
            accept_paused_until: None,
            accept_failures: 0,
            receivers: 0,
            conns: BTreeMap::new(),
            next_id: 0,
            incoming,
            handles,
            options,
            buf: vec![0; READ_CHUNK_BYTES],
            refused: 0,
            stopping: false,
            last_now: Time::ZERO,
            liveness_checked: Time::ZERO,
        }
    }

    fn poll_io(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.accepted.is_none()
            && self.accept_paused_until.is_none()
            && let Some(listener) = &self.listener
            && let Poll::Ready(r) = listener.poll_accept(cx)
        {
            self.accepted = Some(r);
            return Poll::Ready(Ok(()));
        }
        for conn in self.conns.values() {
            let ready = match &conn.role {
                Role::Sender {
                    links,
                    more_to_write,
                    ..
                } => *more_to_write || links.iter().any(|l| l.poll_ready(cx, true).is_ready()),
                Role::Receiver { link, .. } => {
                    link.poll_ready(cx, receiving(&conn.port, link)).is_ready()
                }
            };
            if ready {
                return Poll::Ready(Ok(()));
            }
        }
        Poll::Pending
    }

    /// What the listener gave: a connection to take (or refuse), or a failure to back off
    /// from. Then takes what else is waiting, a batch at most.
    fn handle_accepted(&mut self, now: Time, first: io::Result<(TcpStream, SocketAddr)>) {
        let mut next = Some(first);
        let mut taken = 0;
        while let Some(r) = next.take() {
            match r {
                Ok((stream, peer)) => {
                    if self.accept_failures > 0 {
                        tracing::warn!(
                            failures = self.accept_failures,
                            "accepting TCP connections again"
                        );
                        self.accept_failures = 0;
                    }
                    self.accept(now, stream, peer);
                }
                Err(e) => {
                    // Out of descriptors, most likely (EMFILE/ENFILE): the connection waits in
                    // the backlog. Pause rather than spin, say so once, and keep accepting.
                    if self.accept_failures == 0 {
                        tracing::warn!(error = %e, "accepting a TCP connection failed; pausing and retrying");
                    }
                    self.accept_failures += 1;
                    self.accept_paused_until = Some(now + ACCEPT_BACKOFF);
                    return;
                }
            }
            taken += 1;
            if taken < ACCEPTS_PER_WAKE
                && let Some(listener) = &self.listener
                && let Poll::Ready(r) =
                    listener.poll_accept(&mut Context::from_waker(std::task::Waker::noop()))
            {
                next = Some(r);
            }
        }
    }

    fn accept(&mut self, now: Time, stream: TcpStream, peer: SocketAddr) {
        if self.stopping {
            return;
        }
        if self.receivers >= self.options.max_connections {
            // Dropping the stream closes it: the peer learns at once, and it costs nothing.
            self.refused += 1;
            tracing::debug!(%peer, limit = self.options.max_connections, "connection refused: at the limit");
            return;
        }
        let _ = stream.set_nodelay(true);
        watch_peer(&stream, self.options.peer_timeout);
        let id = self.next_id;
        self.next_id += 1;
        let (port, conn) = self.handles.open(id, peer);
        let rx = RecordReceiver::with_max_message_bytes(self.options.max_message_bytes);
        let link = Link::new(stream);
        self.conns.insert(
            id,
            Conn {
                role: Role::Receiver {
                    rx,
                    link,
                    last_heard: now,
                },
                port,
            },
        );
        self.receivers += 1;
        if self.incoming.try_send(conn).is_err() {
            // Accept queue full or nobody accepts: refuse (the stream closes).
            self.refused += 1;
            self.end(id, ConnectionError::LocallyClosed);
        }
    }

    fn adopt(
        &mut self,
        peer: SocketAddr,
        streams: Vec<TcpStream>,
    ) -> Result<Connection, ConnectError> {
        if self.stopping {
            return Err(ConnectError::EndpointClosed);
        }
        let sender = BaselineSender::new(self.options.config.clone());
        if streams.len() != sender.connections() {
            let source = io::Error::other("wrong number of TCP connections for the baseline");
            return Err(ConnectError::Io { peer, source });
        }
        let id = self.next_id;
        self.next_id += 1;
        let (port, conn) = self.handles.open(id, peer);
        for s in &streams {
            let _ = s.set_nodelay(true);
            watch_peer(s, self.options.peer_timeout);
        }
        let links = streams.into_iter().map(Link::new).collect();
        let role = Role::Sender {
            sender,
            links,
            draining_until: None,
            more_to_write: false,
        };
        self.conns.insert(id, Conn { role, port });
        Ok(conn)
    }

    /// The connections whose peer went silent (see [`liveness::peer_silent`]). A socket whose
    /// `TCP_INFO` cannot be read is left to the kernel's own limits.
    fn silent_peers(&self) -> Vec<u64> {
        let timeout = self.options.peer_timeout;
        let state = |l: &Link| {
            crate::tcpinfo::tcp_info(l.fd())
                .ok()
                .map(|info| liveness::LinkState {
                    info,
                    queued_bytes: send_queue_bytes(l.fd()).unwrap_or(0),
                })
        };
        let mut silent = Vec::new();
        for (&id, conn) in &self.conns {
            let links: Vec<_> = conn.role.links().iter().filter_map(state).collect();
            if liveness::peer_silent(&links, timeout) {
                silent.push(id);
            }
        }
        silent
    }

    /// Reads what connection `id` has (bounded); an error ends the connection.
    fn read(&mut self, now: Time, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let r = match &mut conn.role {
            Role::Sender { sender, links, .. } => read_acks(now, sender, links, &mut self.buf),
            Role::Receiver {
                rx,
                link,
                last_heard,
            } => read_records(now, rx, link, last_heard, &mut conn.port, &mut self.buf),
        };
        if let Err(why) = r {
            self.end(id, why);
        }
    }

    /// Writes what connection `id` has to write; an error ends it.
    fn write(&mut self, now: Time, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let r = match &mut conn.role {
            Role::Sender {
                sender,
                links,
                more_to_write,
                ..
            } => write_records(now, sender, links).map(|more| *more_to_write = more),
            Role::Receiver { link, .. } => link
                .write_pending()
                .map(|_| ())
                .map_err(ConnectionError::from_io),
        };
        if let Err(why) = r {
            self.end(id, why);
        }
    }

    /// Hands connection `id`'s outcomes to its port; ends it if its graceful close is done.
    fn report(&mut self, now: Time, id: u64) {
        let Some(Conn {
            role:
                Role::Sender {
                    sender,
                    draining_until,
                    ..
                },
            port,
        }) = self.conns.get_mut(&id)
        else {
            return;
        };
        while let Some(ev) = sender.poll_event() {
            port.nai_event(ev);
        }
        if draining_until.is_some_and(|until| sender.live_messages() == 0 || now >= until) {
            self.end(id, ConnectionError::LocallyClosed);
        }
    }

    /// Closes connection `id` from this side: a sender after its live messages or `linger`.
    fn close(&mut self, now: Time, id: u64, why: ConnectionError, linger: Duration) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        conn.port.close_locally(why.clone());
        match &mut conn.role {
            Role::Sender { draining_until, .. } if !linger.is_zero() => {
                let until = now + linger;
                *draining_until = Some(draining_until.map_or(until, |d| d.min(until)));
            }
            _ => self.end(id, why),
        }
    }

    /// Ends connection `id`: live messages `Abandoned`, every handle told why (this side's
    /// reason if it was closing), the sockets closed (the kernel sends what it holds, then
    /// FIN).
    fn end(&mut self, id: u64, why: ConnectionError) {
        let Some(mut conn) = self.conns.remove(&id) else {
            return;
        };
        if !matches!(
            why,
            ConnectionError::LocallyClosed | ConnectionError::EndpointClosed
        ) {
            log_tcp_state(id, &why, &conn.role);
        }
        match &mut conn.role {
            Role::Sender { sender, .. } => {
                sender.abandon_all();
                while let Some(ev) = sender.poll_event() {
                    conn.port.nai_event(ev);
                }
            }
            Role::Receiver { .. } => self.receivers = self.receivers.saturating_sub(1),
        }
        let why = conn.port.closing().cloned().unwrap_or(why);
        tracing::info!(id, error = %why, "baseline connection ended");
        conn.port.end(why);
    }

    fn connection_op(&mut self, now: Time, id: u64, op: ConnOp) {
        if let ConnOp::Close { linger } = op {
            self.close(now, id, ConnectionError::LocallyClosed, linger);
            return;
        }
        // A connection gone drops the reply: the handle reports the connection's end.
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let transport = self.handles.transport;
        let unsupported = |what| SendError::Unsupported { transport, what };
        match (op, &mut conn.role) {
            (
                ConnOp::Send {
                    queue,
                    data,
                    opts,
                    reply,
                },
                Role::Sender { sender, .. },
            ) => {
                let r = match conn.port.closing() {
                    Some(why) => Err(SendError::ConnectionLost(why.clone())),
                    None if queue != QueueId(0) => Err(NaiError::UnknownQueue(queue).into()),
                    None => sender
                        .submit_bytes(now, data, opts)
                        .map(|id| conn.port.submitted(id))
                        .map_err(SendError::from),
                };
                let _ = reply.send(r);
            }
            (ConnOp::Send { reply, .. }, Role::Receiver { .. }) => {
                let _ = reply.send(Err(unsupported(
                    "send on an accepted connection: the baselines carry messages client to server",
                )));
            }
            (ConnOp::Control { op, reply, .. }, _) => {
                let _ = reply.send(Err(unsupported(op.name())));
            }
            (ConnOp::CreateQueue { reply }, _) => {
                let _ = reply.send(Err(unsupported("create message queues")));
            }
            (ConnOp::RegisterBandwidthRange { reply, .. }, _) => {
                let _ = reply.send(Err(unsupported("notify bandwidth changes (no estimator)")));
            }
            (ConnOp::Stats { reply }, role) => {
                let _ = reply.send(match role {
                    Role::Sender { sender, .. } => ConnectionStats::Baseline(*sender.stats()),
                    Role::Receiver { rx, .. } => ConnectionStats::BaselineReceiver {
                        delivered: rx.delivered_count(),
                    },
                });
            }
            (ConnOp::Close { .. }, _) => {}
        }
    }
}

/// Logs what kernel TCP knew of each of a connection's sockets as it ended on an error: why a
/// live-looking connection was given up is otherwise invisible.
fn log_tcp_state(id: u64, why: &ConnectionError, role: &Role) {
    for (i, link) in role.links().iter().enumerate() {
        match crate::tcpinfo::tcp_info(link.fd()) {
            Ok(t) => tracing::warn!(
                id,
                link = i,
                error = %why,
                state = t.state,
                ca_state = t.ca_state,
                retransmits = t.retransmits,
                probes = t.probes,
                backoff = t.backoff,
                rto_ms = t.rto_us / 1000,
                unacked = t.unacked_segments,
                lost = t.lost_segments,
                total_retrans = t.total_retrans,
                last_ack_recv_ms = t.last_ack_recv_ms,
                last_data_recv_ms = t.last_data_recv_ms,
                bytes_acked = t.bytes_acked,
                "baseline connection ended on an error; its TCP state"
            ),
            Err(e) => {
                tracing::warn!(id, link = i, error = %why, info = %e, "baseline connection ended on an error")
            }
        }
    }
}

/// Whether a receiver reads its socket: while the application has room and the peer reads
/// its acknowledgements.
fn receiving(port: &Port, link: &Link) -> bool {
    port.has_room() && link.pending_bytes() < MAX_PENDING_ACK_BYTES
}

/// Acknowledgement bytes from the server: each completes the oldest written message of its
/// connection. The server's end of stream ends the connection.
fn read_acks(
    now: Time,
    sender: &mut BaselineSender,
    links: &[Link],
    buf: &mut [u8],
) -> Result<(), ConnectionError> {
    for (i, link) in links.iter().enumerate() {
        for _ in 0..READS_PER_WAKE {
            match link.read(buf).map_err(ConnectionError::from_io)? {
                None => break,
                Some(0) => return Err(ConnectionError::ClosedByPeer(CloseReason::Application)),
                Some(n) => sender.handle_ack_bytes(now, i, n as u64),
            }
        }
    }
    Ok(())
}

/// Records from the client while the application has room: whole messages to the inbox, one
/// acknowledgement byte each queued for the client (papers/000 §5.2). A record that does not
/// parse, or the client's end of stream, ends the connection. `last_heard` moves on with
/// every byte, and while this side holds reading back (the peer is then not idle).
fn read_records(
    now: Time,
    rx: &mut RecordReceiver,
    link: &mut Link,
    last_heard: &mut Time,
    port: &mut Port,
    buf: &mut [u8],
) -> Result<(), ConnectionError> {
    for _ in 0..READS_PER_WAKE {
        if !receiving(port, link) {
            *last_heard = now;
            break;
        }
        let n = match link.read(buf).map_err(ConnectionError::from_io)? {
            None => break,
            Some(0) => return Err(ConnectionError::ClosedByPeer(CloseReason::Application)),
            Some(n) => n,
        };
        *last_heard = now;
        let parsed = rx.handle_bytes(now, buf.get(..n).unwrap_or_default());
        // Messages completed before a corrupt record still reach the application.
        while let Some(ev) = rx.poll_event() {
            match ev {
                // With flow control the bound is kept by reading no more, not by closing.
                SppEvent::Delivered(d) => drop(port.deliver(Message {
                    id: d.id,
                    priority: d.priority,
                    data: d.data.unwrap_or_default(),
                })),
                SppEvent::Discarded { id } => port.event(ConnectionEvent::Discarded(id)),
            }
        }
        let acks = usize::try_from(rx.take_acks()).unwrap_or(usize::MAX);
        link.queue(std::iter::repeat_n(1u8, acks));
        parsed.map_err(ConnectionError::ProtocolViolation)?;
    }
    Ok(())
}

/// Writes the records the sender allows on each connection while the socket takes them, at
/// most [`WRITE_BYTES_PER_WAKE`] per connection; `true` if one stopped there with more to
/// write.
/// "Unacknowledged bytes" are the kernel's send queue (`SIOCOUTQ`); a record is asked for
/// only once the last one was written whole.
fn write_records(
    now: Time,
    sender: &mut BaselineSender,
    links: &mut [Link],
) -> Result<bool, ConnectionError> {
    let mut more = false;
    for (i, link) in links.iter_mut().enumerate() {
        let mut written = 0usize;
        loop {
            if !link.write_pending().map_err(ConnectionError::from_io)? {
                break;
            }
            if written >= WRITE_BYTES_PER_WAKE {
                more = true;
                break;
            }
            let unacked = if sender.config().send_buffer_bytes == u64::MAX {
                0 // the socket's own buffer: it takes what it can, `write_pending` says when
            } else {
                send_queue_bytes(link.fd()).unwrap_or(0)
            };
            let Some(out) = link.next_out() else {
                break;
            };
            if sender.poll_transmit_bytes(now, i, unacked, out).is_none() {
                break;
            }
            written += out.len();
        }
    }
    Ok(more)
}

impl Protocol for BaselineDriver {
    type Command = Command;

    fn io_ready(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_ {
        std::future::poll_fn(move |cx| self.poll_io(cx))
    }

    fn handle_io(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let now = time.now();
        self.last_now = now;
        if let Some(r) = self.accepted.take() {
            self.handle_accepted(now, r);
        }
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.read(now, id);
        }
        Ok(())
    }

    fn handle_command(&mut self, now: Time, command: Command) {
        match command {
            Command::Adopt {
                peer,
                streams,
                reply,
            } => {
                let _ = reply.send(self.adopt(peer, streams));
            }
            Command::Connect { peer, reply } => {
                let source =
                    io::Error::new(io::ErrorKind::Unsupported, "the baselines connect over TCP");
                let _ = reply.send(Err(ConnectError::Io { peer, source }));
            }
            Command::Stats { reply } => {
                let _ = reply.send(EndpointStats {
                    connections: self.conns.len(),
                    refused: self.refused,
                    atp: None,
                });
            }
            Command::Conn { id, op } => self.connection_op(now, id, op),
        }
    }

    fn handle_dropped(&mut self, now: Time, id: u64) {
        self.close(now, id, ConnectionError::LocallyClosed, Duration::ZERO);
    }

    fn poll_timeout(&self) -> Option<Time> {
        let mut next = self.accept_paused_until;
        let mut at = |t: Time| next = Some(next.map_or(t, |n| n.min(t)));
        for conn in self.conns.values() {
            match &conn.role {
                Role::Sender {
                    sender,
                    draining_until,
                    ..
                } => {
                    sender
                        .poll_timeout()
                        .into_iter()
                        .chain(*draining_until)
                        .for_each(&mut at);
                    // Only a modelled send buffer needs polling: with the socket's own,
                    // the socket's writability wakes the loop.
                    if sender.live_messages() > 0 && sender.config().send_buffer_bytes != u64::MAX {
                        at(self.last_now + ROOM_POLL);
                    }
                }
                Role::Receiver { last_heard, .. } => {
                    if let Some(idle) = self.options.idle_timeout {
                        at(*last_heard + idle);
                    }
                }
            }
        }
        if !self.conns.is_empty() {
            at(self.liveness_checked + liveness::check_period(self.options.peer_timeout));
        }
        next
    }

    fn handle_timeout(&mut self, now: Time) {
        self.last_now = now;
        if self.accept_paused_until.is_some_and(|t| t <= now) {
            self.accept_paused_until = None;
        }
        let mut idle = Vec::new();
        for (&id, conn) in &mut self.conns {
            match &mut conn.role {
                Role::Sender { sender, .. } => {
                    if sender.poll_timeout().is_some_and(|t| t <= now) {
                        sender.handle_timeout(now);
                    }
                }
                Role::Receiver { last_heard, .. } => {
                    if self
                        .options
                        .idle_timeout
                        .is_some_and(|d| now >= *last_heard + d)
                    {
                        idle.push(id);
                    }
                }
            }
        }
        if now >= self.liveness_checked + liveness::check_period(self.options.peer_timeout) {
            self.liveness_checked = now;
            idle.extend(self.silent_peers());
        }
        for id in idle {
            self.end(id, ConnectionError::TimedOut);
        }
    }

    fn flush(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let now = time.now();
        self.last_now = now;
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.write(now, id);
        }
        Ok(())
    }

    fn dispatch(&mut self, now: Time) {
        // Received messages reached the ports as they were read; outcomes go now.
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.report(now, id);
        }
    }

    fn close_all(&mut self, _now: Time) {
        self.stopping = true;
        self.listener = None;
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            if let Some(conn) = self.conns.get_mut(&id) {
                conn.port.close_locally(ConnectionError::EndpointClosed);
            }
            self.end(id, ConnectionError::EndpointClosed);
        }
    }

    fn is_idle(&self) -> bool {
        self.conns.is_empty()
    }

    fn finish(&mut self, why: ConnectionError) {
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.end(id, why.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options a stream gets: enough keep-alive probes within the peer timeout that one
    /// lost probe does not end a live connection.
    #[tokio::test]
    async fn keepalive_probes_start_well_within_the_peer_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let stream = TcpStream::connect(listener.local_addr().expect("addr"))
            .await
            .expect("connect");
        let get = |level: libc::c_int, opt: libc::c_int| -> libc::c_int {
            let mut value: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
            // SAFETY: getsockopt writes at most `len` bytes to the int it is given.
            let rc = unsafe {
                libc::getsockopt(
                    fd,
                    level,
                    opt,
                    (&mut value as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            assert_eq!(rc, 0, "getsockopt {opt}");
            value
        };
        for (timeout_s, idle_s) in [(8, 2), (2, 1), (300, 10)] {
            watch_peer(&stream, Duration::from_secs(timeout_s));
            let user_timeout_ms = get(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT);
            let idle = get(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE);
            let interval = get(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL);
            assert_eq!(
                user_timeout_ms, 0,
                "the driver decides, not the user timeout"
            );
            assert_eq!(idle as u64, idle_s, "timeout {timeout_s} s");
            assert_eq!(get(libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
            // Probes from `idle` every `interval` until the timeout: at least two fit, and the
            // kernel gives up on them only after the driver's check would have.
            let probes = (timeout_s as i64 - i64::from(idle)) / i64::from(interval) + 1;
            assert!(probes >= 2, "timeout {timeout_s} s: {probes} probes");
            let count = get(libc::IPPROTO_TCP, libc::TCP_KEEPCNT);
            assert!(
                i64::from(idle) + i64::from(count) * i64::from(interval) > timeout_s as i64,
                "timeout {timeout_s} s: the kernel gives up after {count} probes"
            );
        }
    }
}
