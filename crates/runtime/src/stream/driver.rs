//! The endpoint's driver: one task on its own thread owns the socket, every stream's core
//! [`Connection`] and byte buffers, and (with [`Congestion::Cm`]) the endpoint's CM. After any
//! input it services everything: CM timers and events, then each stream — take new bytes
//! from the writer, free acknowledged ones, hand delivered ones to the reader, fire timers,
//! drain `poll_transmit` and `poll_event` — and sleeps until the earliest `poll_timeout`.

use super::StreamStats;
use super::{Command, Congestion, Error, LISTEN_PORT, Shared, StreamConn, StreamOptions, lock};
use crate::clock::Clock;
use adaptnet_core::Time;
use adaptnet_core::cm::{CmController, CmHandle, CongestionManager, FlowId, FlowKey, PeerAddr};
use adaptnet_core::tcp::bytes::ReceiveRing;
use adaptnet_core::tcp::{Connection, State, TcpEvent, TcpRepr};
use rand::RngExt;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, mpsc, oneshot};

/// Datagrams read per wake-up before servicing (bounds one unit of work).
const RECV_BATCH: usize = 64;
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
    socket: tokio::net::UdpSocket,
    options: StreamOptions,
    clock: Clock,
    cm: Option<CmHandle>,
    slots: HashMap<Key, Slot>,
    incoming: mpsc::Sender<StreamConn>,
    kick: Arc<Notify>,
    next_port: u16,
    out: VecDeque<(SocketAddr, Vec<u8>)>,
    stats: StreamStats,
    sent_count: u64,
}

impl Driver {
    pub(super) fn new(
        socket: std::net::UdpSocket,
        options: StreamOptions,
        incoming: mpsc::Sender<StreamConn>,
    ) -> std::io::Result<Driver> {
        let socket = tokio::net::UdpSocket::from_std(socket)?;
        let cm = match &options.congestion {
            Congestion::NewReno => None,
            Congestion::Cm(config) => Some(CmHandle::new(CongestionManager::new(config.clone()))),
        };
        Ok(Driver {
            socket,
            options,
            clock: Clock::new(),
            cm,
            slots: HashMap::new(),
            incoming,
            kick: Arc::new(Notify::new()),
            next_port: LISTEN_PORT + 1,
            out: VecDeque::new(),
            stats: StreamStats::default(),
            sent_count: 0,
        })
    }

    pub(super) async fn run(
        mut self,
        mut cmd: mpsc::Receiver<Command>,
        mut stop: oneshot::Receiver<()>,
    ) {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        loop {
            let deadline = self.poll_timeout().map(|t| self.clock.instant_of(t));
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                r = self.socket.recv_from(&mut buf) => {
                    if let Ok((n, from)) = r {
                        self.handle_datagram(from, buf.get(..n).unwrap_or_default());
                        for _ in 1..RECV_BATCH {
                            match self.socket.try_recv_from(&mut buf) {
                                Ok((n, from)) => {
                                    self.handle_datagram(from, buf.get(..n).unwrap_or_default());
                                }
                                Err(_) => break,
                            }
                        }
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
            if self.flush().await.is_err() {
                break;
            }
        }
        for slot in self.slots.values() {
            let mut s = lock(&slot.shared);
            s.aborted = true;
            s.wake_all();
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        let mut t = self.cm.as_ref().and_then(|cm| cm.borrow().poll_timeout());
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
                return (cc, Some(flow));
            }
            tracing::warn!("cm_open refused: the stream runs NewReno");
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
                let _ = reply.send(self.stats);
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
        let key = (from, repr.dst_port, repr.src_port);
        if !self.slots.contains_key(&key) {
            self.maybe_accept(now, from, key, &repr);
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

    fn maybe_accept(&mut self, now: Time, from: SocketAddr, key: Key, repr: &TcpRepr) {
        if !repr.flags.syn || repr.flags.ack {
            self.stats.unknown += 1;
            return;
        }
        if !self.options.server
            || repr.dst_port != LISTEN_PORT
            || self.slots.len() >= self.options.max_connections
        {
            self.stats.refused += 1;
            return;
        }
        let iss: u32 = rand::rng().random();
        let (cc, flow) = self.controller(now, from, key);
        let conn = Connection::accept(self.options.core.clone(), repr, iss, cc);
        let mut slot = self.new_slot(conn, iss, Some(repr.seq), flow);
        slot.incoming = true;
        self.slots.insert(key, slot);
    }

    /// Runs the CM, then every stream; repeats while the CM issued grants meanwhile.
    fn service(&mut self) {
        for _ in 0..4 {
            let now = self.clock.now();
            let mut granted = false;
            if let Some(cm) = &self.cm {
                let mut cm = cm.borrow_mut();
                if cm.poll_timeout().is_some_and(|t| t <= now) {
                    cm.handle_timeout(now);
                }
                // Stream flows take their feedback from ACKs: the CM sends no probes for them.
                while cm.poll_transmit(now).is_some() {}
                while let Some(ev) = cm.poll_event() {
                    granted |= matches!(ev, adaptnet_core::cm::CmEvent::Grant { .. });
                }
            }
            let keys: Vec<Key> = self.slots.keys().copied().collect();
            for key in keys {
                self.service_slot(now, key);
            }
            if !granted {
                break;
            }
        }
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
            if let (Some(cm), Some(flow)) = (&self.cm, slot.flow) {
                let _ = cm.borrow_mut().close(now, flow);
            }
            self.slots.remove(&key);
        }
    }

    async fn flush(&mut self) -> std::io::Result<()> {
        while let Some((to, data)) = self.out.pop_front() {
            self.sent_count += 1;
            if self
                .options
                .drop_every_nth_sent
                .is_some_and(|n| n > 0 && self.sent_count.is_multiple_of(n))
            {
                self.stats.injected_drops += 1;
                continue;
            }
            loop {
                match self.socket.try_send_to(&data, to) {
                    Ok(_) => {
                        self.stats.datagrams_sent += 1;
                        break;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        self.socket.writable().await?;
                    }
                    // Lost as a network would lose it; the protocol recovers.
                    Err(_) => break,
                }
            }
        }
        Ok(())
    }
}

/// Swallows bytes nobody will read.
struct Discard;

impl Extend<u8> for Discard {
    fn extend<T: IntoIterator<Item = u8>>(&mut self, iter: T) {
        iter.into_iter().for_each(drop);
    }
}
