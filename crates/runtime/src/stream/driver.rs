//! The endpoint's driver: one task owns the socket and every stream's core [`Connection`]
//! and byte buffers; with [`Congestion::Cm`] it runs on the process CM's thread and its
//! streams' controllers use that CM. After any input it services every stream — take new
//! bytes from the writer, free acknowledged ones, hand delivered ones to the reader, fire
//! timers, drain `poll_transmit` and `poll_event` — then the CM's events, and sleeps until the
//! earliest `poll_timeout` (the CM's own timers run in the CM host's task, which wakes the
//! driver when one of its streams is granted).

use super::StreamStats;
use super::{Command, Error, LISTEN_PORT, Shared, StreamConn, StreamOptions, lock};
use crate::clock::Clock;
use crate::cm::host::{HostShared, Route};
use crate::udp::{Datagram, UdpIo, UdpIoConfig};
use adaptnet_core::Time;
use adaptnet_core::cm::{CmController, CmHandle, FlowId, FlowKey, PeerAddr};
use adaptnet_core::session::token::TokenConfig;
use adaptnet_core::tcp::bytes::ReceiveRing;
use adaptnet_core::tcp::cookie::SynCookies;
use adaptnet_core::tcp::{Connection, State, TcpEvent, TcpRepr};
use rand::RngExt;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, mpsc, oneshot};

/// Receive batches (`recvmmsg` calls) per wake-up before servicing (bounds one unit of
/// work).
const RECV_BATCHES: usize = 2;
/// Room for the TCP header and options above the MSS in one datagram.
const MAX_HEADER_BYTES: usize = 60;
/// Service rounds (every stream polled) per wake-up while the CM keeps granting; beyond,
/// the driver wakes itself at once (bounds one unit of work).
const MAX_SERVICE_ROUNDS: usize = 8;
/// Largest datagram accepted or built.
const MAX_DATAGRAM: usize = 65_535;

/// (peer endpoint, our TCP port, its TCP port).
type Key = (SocketAddr, u16, u16);

struct Slot {
    conn: Connection,
    shared: Arc<Mutex<Shared>>,
    /// The peer's initial sequence number, once its SYN is seen.
    irs: Option<u32>,
    iss: u32,
    ring: ReceiveRing,
    /// Bytes passed to `Connection::write`.
    written: u64,
    close_called: bool,
    flow: Option<FlowId>,
    seeded: bool,
    /// A client's pending `connect`.
    connecting: Option<oneshot::Sender<Result<StreamConn, Error>>>,
    /// An incoming stream not yet handed to `accept`.
    incoming: bool,
    /// When the stream finished (both directions closed, or aborted).
    done_at: Option<Time>,
}

pub(super) struct Driver {
    io: UdpIo,
    options: StreamOptions,
    clock: Clock,
    cm: Option<CmHandle>,
    /// The process CM's host (CM-delegated endpoints only).
    host: Option<Rc<HostShared>>,
    slots: HashMap<Key, Slot>,
    incoming: mpsc::Sender<StreamConn>,
    kick: Arc<Notify>,
    next_port: u16,
    out: VecDeque<(SocketAddr, Vec<u8>)>,
    stats: StreamStats,
    sent_count: u64,
    /// Service rounds so far (rotates the service order).
    rounds: usize,
    /// A listening endpoint's SYN cookies (a fresh secret per endpoint).
    cookies: SynCookies,
    /// The last receive batch, copied out of the socket's buffers.
    rx: RxBatch,
}

/// Datagrams of one receive batch, back to back, with their sources.
#[derive(Default)]
struct RxBatch {
    bytes: Vec<u8>,
    datagrams: Vec<(SocketAddr, std::ops::Range<usize>)>,
}

impl Driver {
    pub(super) fn new(
        socket: std::net::UdpSocket,
        options: StreamOptions,
        incoming: mpsc::Sender<StreamConn>,
        host: Option<Rc<HostShared>>,
    ) -> std::io::Result<Driver> {
        // Every segment may share a GSO run: TCP measures nothing from packet spacing.
        let max_datagram_bytes = usize::from(options.core.mss)
            .saturating_add(MAX_HEADER_BYTES)
            .min(MAX_DATAGRAM);
        let io = UdpIo::new(
            tokio::net::UdpSocket::from_std(socket)?,
            UdpIoConfig {
                buffer_bytes: options.socket_buffer_bytes,
                gso: true,
                max_datagram_bytes,
            },
        )?;
        // One clock for the CM and every driver that calls it: its inputs' `now` must not
        // go backwards.
        let clock = host.as_ref().map_or_else(Clock::new, |h| h.clock);
        Ok(Driver {
            io,
            options,
            clock,
            cm: host.as_ref().map(|h| h.cm.clone()),
            host,
            slots: HashMap::new(),
            incoming,
            kick: Arc::new(Notify::new()),
            next_port: LISTEN_PORT + 1,
            out: VecDeque::new(),
            stats: StreamStats::default(),
            sent_count: 0,
            rounds: 0,
            cookies: SynCookies::new(TokenConfig::new(rand::rng().random())),
            rx: RxBatch::default(),
        })
    }

    pub(super) async fn run(
        mut self,
        mut cmd: mpsc::Receiver<Command>,
        mut stop: oneshot::Receiver<()>,
    ) {
        loop {
            let deadline = self.poll_timeout().map(|t| self.clock.instant_of(t));
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            let stalled = self.io.stalled();
            tokio::select! {
                r = self.io.readable() => {
                    if r.is_err() {
                        break;
                    }
                    self.receive();
                }
                // The socket took the last batch only in part: send the rest when it can.
                w = self.io.writable(), if stalled => {
                    if w.is_err() {
                        break;
                    }
                }
                c = cmd.recv() => match c {
                    Some(c) => self.handle_command(c),
                    None => break,
                },
                () = self.kick.notified() => {}
                () = sleep => {}
                _ = &mut stop => break,
            }
            self.service();
            if self.flush().is_err() {
                break;
            }
        }
        let now = self.clock.now();
        for slot in self.slots.values() {
            let mut s = lock(&slot.shared);
            s.aborted = true;
            s.wake_all();
            drop(s);
            if let Some(flow) = slot.flow {
                self.close_flow(now, flow);
            }
        }
    }

    /// `cm_close` for a stream's flow, and no more events for it.
    fn close_flow(&self, now: Time, flow: FlowId) {
        if let (Some(host), Some(cm)) = (&self.host, &self.cm) {
            host.unroute(flow);
            let _ = cm.borrow_mut().close(now, flow);
            host.wake.notify_one();
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        // The CM's timers are the CM host's; it wakes this driver for its streams' grants.
        let mut t: Option<Time> = None;
        for slot in self.slots.values() {
            let next = slot.conn.poll_timeout();
            let linger = slot.done_at.map(|d| d + self.options.linger);
            for x in [next, linger].into_iter().flatten() {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        }
        t
    }

    fn new_shared(&self) -> Arc<Mutex<Shared>> {
        Arc::new(Mutex::new(Shared {
            send_cap: self.options.send_buffer_bytes.max(1),
            rx_cap: self.options.read_buffer_bytes.max(1),
            ..Shared::default()
        }))
    }

    fn controller(
        &self,
        now: Time,
        peer: SocketAddr,
        key: Key,
    ) -> (
        Box<dyn adaptnet_core::cc::CongestionController>,
        Option<FlowId>,
    ) {
        if let Some(cm) = &self.cm {
            // One macroflow per destination host (the CM groups flows by `PeerAddr`).
            let flow_key = FlowKey((u64::from(key.1) << 16) | u64::from(key.2));
            if let Ok((cc, flow)) = CmController::open(cm, now, PeerAddr::from(peer.ip()), flow_key)
            {
                if let Some(host) = &self.host {
                    host.route(flow, Route::Stream(self.kick.clone()));
                }
                return (cc, Some(flow));
            }
            tracing::warn!("cm_open refused: the stream runs NewReno");
        }
        if let super::Congestion::Adtcp(config) = self.options.congestion {
            return (
                adaptnet_core::adtcp::AdtcpSender::for_tcp(&self.options.core, config),
                None,
            );
        }
        (Connection::newreno(&self.options.core), None)
    }

    fn new_slot(&self, conn: Connection, iss: u32, irs: Option<u32>, flow: Option<FlowId>) -> Slot {
        let ring = usize::try_from(self.options.core.recv_buffer).unwrap_or(usize::MAX >> 1);
        Slot {
            conn,
            shared: self.new_shared(),
            irs,
            iss,
            ring: ReceiveRing::new(ring),
            written: 0,
            close_called: false,
            flow,
            seeded: false,
            connecting: None,
            incoming: false,
            done_at: None,
        }
    }

    fn handle_command(&mut self, cmd: Command) {
        let now = self.clock.now();
        match cmd {
            Command::Stats { reply } => {
                let mut stats = self.stats;
                stats.open_streams = self.slots.len() as u64;
                let _ = reply.send(stats);
            }
            Command::Connect { peer, reply } => {
                if self.slots.len() >= self.options.max_connections {
                    let _ =
                        reply.send(Err(Error::TooManyConnections(self.options.max_connections)));
                    return;
                }
                let mut port = self.next_port;
                while port <= LISTEN_PORT || self.slots.contains_key(&(peer, port, LISTEN_PORT)) {
                    port = port.wrapping_add(1);
                }
                self.next_port = port.wrapping_add(1);
                let key = (peer, port, LISTEN_PORT);
                let iss: u32 = rand::rng().random();
                let (cc, flow) = self.controller(now, peer, key);
                let conn =
                    Connection::connect(self.options.core.clone(), port, LISTEN_PORT, iss, cc);
                let mut slot = self.new_slot(conn, iss, None, flow);
                slot.connecting = Some(reply);
                self.slots.insert(key, slot);
            }
        }
    }

    fn handle_datagram(&mut self, from: SocketAddr, data: &[u8]) {
        self.stats.datagrams_received += 1;
        let now = self.clock.now();
        let Ok(repr) = TcpRepr::parse(data) else {
            self.stats.malformed += 1;
            return;
        };
        let header_len = data.get(12).map_or(0, |b| usize::from(b >> 4) * 4);
        let payload = data.get(header_len..).unwrap_or_default();
        let Ok(payload_len) = u32::try_from(payload.len()) else {
            self.stats.malformed += 1;
            return;
        };
        if repr.adtcp.is_some() {
            self.stats.adtcp_options_received += 1;
        }
        let key = (from, repr.dst_port, repr.src_port);
        if !self.slots.contains_key(&key) && !self.maybe_accept(now, from, key, &repr) {
            return;
        }
        let Some(slot) = self.slots.get_mut(&key) else {
            return;
        };
        if repr.flags.syn {
            slot.irs = Some(repr.seq);
        }
        if let Some(irs) = slot.irs
            && !payload.is_empty()
            && !repr.flags.syn
        {
            let near = slot.conn.bytes_delivered();
            slot.ring.store_segment(irs, repr.seq, near, payload);
        }
        slot.conn.handle_segment(now, &repr, payload_len);
    }

    /// A segment for no stream. A listening endpoint keeps no state for a SYN: it answers
    /// with a SYN-ACK whose ISS is a SYN cookie (core's `tcp::cookie`), and allocates the
    /// stream only for an ACK that echoes one (issue 9 item 6). Returns whether a stream was
    /// allocated (the segment is then handled as the stream's).
    fn maybe_accept(&mut self, now: Time, from: SocketAddr, key: Key, repr: &TcpRepr) -> bool {
        let listening = self.options.server && repr.dst_port == LISTEN_PORT;
        if repr.flags.syn && !repr.flags.ack {
            if !listening || self.slots.len() >= self.options.max_connections {
                self.stats.refused += 1;
            } else if let Some(seg) = self.cookies.answer(now, from, repr, &self.options.core) {
                let mut dgram = vec![0u8; seg.repr.buffer_len()];
                if let Ok(n) = seg.repr.emit(&mut dgram) {
                    dgram.truncate(n);
                    self.out.push_back((from, dgram));
                    self.stats.cookies_sent += 1;
                }
            }
            return false;
        }
        if !listening || repr.flags.syn || repr.flags.rst || !repr.flags.ack {
            self.stats.unknown += 1;
            return false;
        }
        if self.slots.len() >= self.options.max_connections {
            self.stats.refused += 1;
            return false;
        }
        let (cc, flow) = self.controller(now, from, key);
        let Some(conn) = self.cookies.accept(now, from, repr, &self.options.core, cc) else {
            self.stats.unknown += 1;
            if let Some(flow) = flow {
                self.close_flow(now, flow);
            }
            return false;
        };
        let iss = repr.ack.wrapping_sub(1);
        let mut slot = self.new_slot(conn, iss, Some(repr.seq.wrapping_sub(1)), flow);
        slot.incoming = true;
        self.slots.insert(key, slot);
        true
    }

    /// Runs the CM's due timers, then every stream, then drains the CM again; repeats while
    /// that last step finds grants. Streams' reports (`cm_notify`, `cm_update`) and their
    /// timeouts feed the CM while they are serviced, so a grant can be issued to a stream
    /// already serviced in this round; it must be polled again now, as the CM's contract
    /// asks ("after any CM event or timer on a host, the engine re-polls that host's
    /// connections", `cm::tcp`) and as the simulator does by polling its CM host agent after
    /// the flows of the host. (Servicing the CM only first, and going again only for grants
    /// found there, left such a grant unused until the next wake-up — none came when nothing
    /// else was in flight: the "CM streams stall" of EXPERIMENTS.md.)
    fn service(&mut self) {
        let now = self.clock.now();
        self.service_cm(now);
        for _ in 0..MAX_SERVICE_ROUNDS {
            let now = self.clock.now();
            for key in self.service_order() {
                self.service_slot(now, key);
            }
            if !self.service_cm(now) {
                return;
            }
        }
        // Still granting after the bound on one unit of work: come back at once.
        self.kick.notify_one();
    }

    /// The streams in the order to service them this round: rotated by one every round.
    /// Streams put their segments on the wire in service order, so a fixed order lets the
    /// first stream's segments always take the last free places of a full bottleneck queue
    /// and the next stream's always be dropped (drop-tail lockout; Floyd and Jacobson,
    /// "On traffic phase effects in packet-switched gateways", 1992). Measured on the tbf
    /// link: the locked-out stream lost every segment for a second, saw not one duplicate
    /// ACK and repaired only by timeouts, while the other never noticed the congestion.
    fn service_order(&mut self) -> Vec<Key> {
        let mut keys: Vec<Key> = self.slots.keys().copied().collect();
        keys.sort_unstable();
        if !keys.is_empty() {
            let first = self.rounds % keys.len();
            keys.rotate_left(first);
        }
        self.rounds = self.rounds.wrapping_add(1);
        keys
    }

    /// Runs the CM's due timers and routes its events (grants to other drivers' streams
    /// wake those drivers, an application flow's go to its handle); returns whether one of
    /// this driver's streams was granted. The CM host re-arms its timer afterwards.
    fn service_cm(&mut self, now: Time) -> bool {
        let Some(host) = &self.host else {
            return false;
        };
        let granted = host.pump(now, Some(&self.kick));
        host.wake.notify_one();
        granted
    }

    fn service_slot(&mut self, now: Time, key: Key) {
        let Some(slot) = self.slots.get_mut(&key) else {
            return;
        };
        if slot.conn.poll_timeout().is_some_and(|t| t <= now) {
            slot.conn.handle_timeout(now);
        }
        // The application's side: new bytes, freed bytes, delivered bytes.
        {
            let mut s = lock(&slot.shared);
            let total = s.send_buf.end();
            if total > slot.written && slot.conn.is_established() {
                slot.conn.write(total - slot.written);
                slot.written = total;
            }
            if (s.shutdown || s.dropped) && !slot.close_called && slot.conn.is_established() {
                slot.conn.close();
                slot.close_called = true;
            }
            let acked = slot.conn.bytes_acked().min(total);
            if s.send_buf.release_through(acked) > 0
                && let Some(w) = s.write_waker.take()
            {
                w.wake();
            }
            let ready = slot.conn.bytes_delivered().saturating_sub(slot.ring.base());
            let room = if s.dropped {
                ready
            } else {
                (s.rx_cap.saturating_sub(s.rx.len())) as u64
            };
            let n = ready.min(room);
            if n > 0 {
                if s.dropped {
                    slot.ring.take(n, &mut Discard);
                } else {
                    slot.ring.take(n, &mut s.rx);
                }
                slot.conn.read(n);
                if let Some(w) = s.read_waker.take() {
                    w.wake();
                }
            }
        }
        // Transmit.
        while let Some(seg) = slot.conn.poll_transmit(now) {
            let mut dgram = vec![0u8; seg.repr.buffer_len() + seg.payload_len as usize];
            let Ok(h) = seg.repr.emit(&mut dgram) else {
                continue;
            };
            dgram.truncate(h + seg.payload_len as usize);
            if seg.payload_len > 0 {
                let s = lock(&slot.shared);
                let copied = dgram
                    .get_mut(h..)
                    .is_some_and(|dst| s.send_buf.copy_segment(slot.iss, seg.repr.seq, dst));
                if !copied {
                    // Core asked for bytes the runtime no longer holds: an engine bug.
                    tracing::error!(
                        seq = seg.repr.seq,
                        base = s.send_buf.base(),
                        len = seg.payload_len,
                        "segment outside the send buffer"
                    );
                    continue;
                }
            }
            self.out.push_back((key.0, dgram));
        }
        // Events.
        while let Some(ev) = slot.conn.poll_event() {
            match ev {
                TcpEvent::Connected => {
                    if let (Some(cm), Some(flow), false) = (&self.cm, slot.flow, slot.seeded) {
                        slot.seeded = true;
                        if let Some(rtt) = slot.conn.rtt().latest() {
                            let _ = CmController::seed_rtt(cm, now, flow, rtt);
                        }
                    }
                    let conn = StreamConn {
                        shared: slot.shared.clone(),
                        kick: self.kick.clone(),
                        peer: key.0,
                    };
                    if let Some(reply) = slot.connecting.take() {
                        if let Err(Ok(c)) = reply.send(Ok(conn)) {
                            drop(c); // the caller gave up: the stream closes
                        }
                    } else if slot.incoming {
                        slot.incoming = false;
                        if self.incoming.try_send(conn).is_err() {
                            self.stats.refused += 1;
                        }
                    }
                }
                TcpEvent::Aborted => {
                    if let Some(reply) = slot.connecting.take() {
                        let _ = reply.send(Err(Error::ConnectFailed(key.0)));
                    }
                    let mut s = lock(&slot.shared);
                    s.aborted = true;
                    s.wake_all();
                }
                TcpEvent::SendClosed => {
                    let mut s = lock(&slot.shared);
                    s.send_closed = true;
                    s.wake_all();
                }
                TcpEvent::Readable | TcpEvent::PeerClosed => {}
            }
        }
        {
            let mut s = lock(&slot.shared);
            if slot.conn.peer_closed() && slot.ring.base() >= slot.conn.bytes_delivered() && !s.eof
            {
                s.eof = true;
                if let Some(w) = s.read_waker.take() {
                    w.wake();
                }
            }
            let finished = slot.conn.state() == State::Aborted
                || (s.eof && s.send_closed && (s.dropped || s.rx.is_empty()));
            if finished && slot.done_at.is_none() {
                slot.done_at = Some(now);
            }
        }
        if slot.done_at.is_some_and(|d| now >= d + self.options.linger) {
            if let Some(flow) = slot.flow {
                self.close_flow(now, flow);
            }
            self.slots.remove(&key);
        }
    }

    /// Reads up to [`RECV_BATCHES`] batches of datagrams (`recvmmsg`). A batch is copied
    /// out of the socket's buffers into `rx` (reused; `handle_datagram` needs the whole
    /// driver while the socket's buffers belong to it) and then handled datagram by datagram.
    fn receive(&mut self) {
        let mut rx = std::mem::take(&mut self.rx);
        for _ in 0..RECV_BATCHES {
            rx.bytes.clear();
            rx.datagrams.clear();
            let got = self.io.recv_batch(|from, _, data| {
                let start = rx.bytes.len();
                rx.bytes.extend_from_slice(data);
                rx.datagrams.push((from, start..rx.bytes.len()));
            });
            if !matches!(got, Ok(n) if n > 0) {
                break;
            }
            for (from, range) in &rx.datagrams {
                let data = rx.bytes.get(range.clone()).unwrap_or_default();
                self.handle_datagram(*from, data);
            }
        }
        self.rx = rx;
    }

    /// Hands the queued segments to the socket in batches (runs to one peer as GSO
    /// super-packets); what the kernel does not take now waits in [`UdpIo`] while the loop
    /// goes on reading.
    fn flush(&mut self) -> std::io::Result<()> {
        let (out, stats, sent_count) = (&mut self.out, &mut self.stats, &mut self.sent_count);
        let drop_every = self.options.drop_every_nth_sent.filter(|&n| n > 0);
        self.io.send_from(|buf| {
            loop {
                let (to, data) = out.pop_front()?;
                *sent_count += 1;
                if drop_every.is_some_and(|n| sent_count.is_multiple_of(n)) {
                    stats.injected_drops += 1;
                    continue;
                }
                let len = data.len().min(buf.len());
                buf.get_mut(..len)?.copy_from_slice(data.get(..len)?);
                stats.datagrams_sent += 1;
                return Some(Datagram {
                    to,
                    len,
                    coalesce: true,
                });
            }
        })
    }
}

/// Swallows bytes nobody will read.
struct Discard;

impl Extend<u8> for Discard {
    fn extend<T: IntoIterator<Item = u8>>(&mut self, iter: T) {
        iter.into_iter().for_each(drop);
    }
}
