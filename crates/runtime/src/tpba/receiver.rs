//! The receiving end of a TPBA flow: accepts the sender's TCP connection (one flow), reads
//! its preamble, then feeds core's `FSocket` from TCP and UDP and hands whole ADUs to the
//! application — on the crate's driver loop.

use super::{
    MAGIC, MAX_DATAGRAM, PREAMBLE_LEN, ReceiverStats, TpbaOptions, snapshot, update, violation,
};
use crate::clock::Clock;
use crate::driver::{self, Protocol, Shared, Timekeeper};
use crate::error::ConnectionError;
use adaptnet_core::Time;
use adaptnet_core::session::CloseReason;
use adaptnet_core::tpba::{FSocket, FlowPath, FsEvent};
use adaptnet_core::wire::WireError;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::mpsc;

/// TCP reads and datagrams taken per wake-up, at most (bounds one unit of work).
const READS_PER_WAKE: usize = 4;
const DATAGRAMS_PER_WAKE: usize = 64;
/// TCP bytes read at once.
const TCP_CHUNK: usize = 64 << 10;

/// A receiver takes no commands: its handle only reads ADUs.
pub(crate) enum NoCommand {}

/// The receiving end of one TPBA flow: yields whole ADUs in order. Dropping it closes the
/// flow's sockets.
pub struct TpbaReceiver {
    adus: mpsc::Receiver<Vec<u8>>,
    local_addr: SocketAddr,
    stats: Arc<Mutex<ReceiverStats>>,
    /// Why the flow ended, set before the ADU queue closes.
    end: Arc<Mutex<Option<ConnectionError>>>,
    shared: Arc<Shared>,
    /// Dropping it tells the driver the handle is gone.
    _commands: mpsc::Sender<NoCommand>,
}

impl Drop for TpbaReceiver {
    fn drop(&mut self) {
        self.shared.request_stop();
    }
}

impl TpbaReceiver {
    /// Listens on `addr` (TCP, and UDP on the same port) for one flow. Call inside a tokio
    /// runtime.
    pub fn bind(addr: SocketAddr, options: TpbaOptions) -> io::Result<TpbaReceiver> {
        tokio::runtime::Handle::try_current().map_err(|_| {
            io::Error::other("a TPBA receiver must be bound inside a tokio runtime")
        })?;
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        let local_addr = listener.local_addr()?;
        let udp = std::net::UdpSocket::bind(local_addr)?;
        udp.set_nonblocking(true)?;
        let udp = UdpSocket::from_std(udp)?;
        let (tx, adus) = mpsc::channel(options.adu_queue_len.max(1));
        let (commands_tx, commands) = mpsc::channel(1);
        let shared = Shared::new();
        let stats = Arc::new(Mutex::new(ReceiverStats::default()));
        let end = Arc::new(Mutex::new(None));
        let clock = Clock::new();
        let proto = ReceiverDriver {
            phase: Phase::Listening(listener),
            accepted: None,
            udp,
            local_addr,
            options: options.clone(),
            clock,
            out: tx,
            held: None,
            stats: stats.clone(),
            end: end.clone(),
            ended: None,
            shared: shared.clone(),
            chunk: vec![0; TCP_CHUNK],
            dgram: vec![0; MAX_DATAGRAM],
        };
        driver::spawn(
            proto,
            clock,
            commands,
            shared.clone(),
            options.shutdown_timeout,
        );
        Ok(TpbaReceiver {
            adus,
            local_addr,
            stats,
            end,
            shared,
            _commands: commands_tx,
        })
    }

    /// The bound address (TCP and UDP).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `f_recv`: the next whole ADU, in order; once the flow has ended and every ADU was
    /// read, why it ended: [`ConnectionError::ClosedByPeer`] when the sender closed TCP and
    /// no datagram came for `reorder_timeout`, [`ConnectionError::TimedOut`] when no sender
    /// came with a preamble in time, the socket's error otherwise.
    pub async fn recv(&mut self) -> Result<Vec<u8>, ConnectionError> {
        match self.adus.recv().await {
            Some(adu) => {
                // Room again: a driver holding an ADU can hand it over.
                self.shared.wake();
                Ok(adu)
            }
            None => Err(snapshot(&self.end).unwrap_or(ConnectionError::EndpointClosed)),
        }
    }

    /// What the receiver has done so far.
    pub fn stats(&self) -> ReceiverStats {
        snapshot(&self.stats)
    }

    /// Closes the flow's sockets now.
    pub fn close(&self) {
        self.shared.request_stop();
    }

    /// Waits until the receiver's driver has stopped.
    pub async fn wait_idle(&self) {
        self.shared.wait_done().await;
    }
}

/// Where the one flow is.
enum Phase {
    Listening(TcpListener),
    Preamble {
        stream: TcpStream,
        peer: SocketAddr,
        got: Vec<u8>,
        until: Time,
    },
    Flowing(Box<Flow>),
    Ended,
}

struct Flow {
    stream: TcpStream,
    fs: FSocket,
    report_to: SocketAddr,
    tcp_open: bool,
    last_input: Time,
}

struct ReceiverDriver {
    phase: Phase,
    accepted: Option<io::Result<(TcpStream, SocketAddr)>>,
    udp: UdpSocket,
    local_addr: SocketAddr,
    options: TpbaOptions,
    clock: Clock,
    out: mpsc::Sender<Vec<u8>>,
    /// An ADU the application had no room for yet.
    held: Option<Vec<u8>>,
    stats: Arc<Mutex<ReceiverStats>>,
    end: Arc<Mutex<Option<ConnectionError>>>,
    ended: Option<ConnectionError>,
    shared: Arc<Shared>,
    chunk: Vec<u8>,
    dgram: Vec<u8>,
}

impl ReceiverDriver {
    fn end(&mut self, why: ConnectionError) {
        self.ended.get_or_insert(why);
        self.phase = Phase::Ended;
        self.shared.request_stop();
    }

    /// Reads the preamble's bytes as they come; starts the flow once it is whole.
    fn read_preamble(&mut self, now: Time) {
        let Phase::Preamble {
            stream, peer, got, ..
        } = &mut self.phase
        else {
            return;
        };
        let mut buf = [0u8; PREAMBLE_LEN];
        let want = PREAMBLE_LEN - got.len();
        let r = stream.try_read(buf.get_mut(..want).unwrap_or_default());
        match r {
            Ok(0) => return self.end(ConnectionError::ClosedByPeer(CloseReason::Application)),
            Ok(n) => got.extend_from_slice(buf.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => return self.end(ConnectionError::from_io(e)),
        }
        if got.len() < PREAMBLE_LEN {
            return;
        }
        if !got.starts_with(MAGIC) {
            let bad = WireError::Malformed("not a TPBA preamble");
            return self.end(ConnectionError::ProtocolViolation(bad));
        }
        let port = u16::from_be_bytes([got[4], got[5]]);
        let report_to = SocketAddr::new(peer.ip(), port);
        let Phase::Preamble { stream, .. } = std::mem::replace(&mut self.phase, Phase::Ended)
        else {
            return;
        };
        let fs = FSocket::f_socket(self.clock.now(), self.local_addr, self.options.fs.clone());
        self.phase = Phase::Flowing(Box::new(Flow {
            stream,
            fs,
            report_to,
            tcp_open: true,
            last_input: now,
        }));
    }

    /// Reads what TCP and UDP hold (bounded) into core.
    fn read_flow(&mut self, now: Time) {
        let Phase::Flowing(f) = &mut self.phase else {
            return;
        };
        let mut failed = None;
        for _ in 0..READS_PER_WAKE {
            if !f.tcp_open {
                break;
            }
            match f.stream.try_read(&mut self.chunk) {
                Ok(0) => f.tcp_open = false,
                Ok(n) => {
                    let bytes = self.chunk.get(..n).unwrap_or_default();
                    if let Err(e) = f.fs.handle_tcp_bytes(now, bytes) {
                        failed = Some(violation(e)); // the stream's framing is lost
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // A reset after the sender's last byte ends TCP as a FIN would.
                Err(_) => f.tcp_open = false,
            }
            f.last_input = now;
        }
        for _ in 0..DATAGRAMS_PER_WAKE {
            match self.udp.try_recv(&mut self.dgram) {
                Ok(n) => {
                    f.last_input = now;
                    let bytes = self.dgram.get(..n).unwrap_or_default();
                    if f.fs.handle_udp(now, bytes).is_err() {
                        update(&self.stats, |s| s.bad_datagrams += 1);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => tracing::debug!("tpba receiver udp recv: {e}"),
            }
        }
        if let Some(why) = failed {
            self.end(why);
        }
    }

    /// When the flow ends if nothing more comes: `reorder_timeout` after the last input once
    /// the sender has closed TCP.
    fn linger_end(&self) -> Option<Time> {
        match &self.phase {
            Phase::Flowing(f) if !f.tcp_open => {
                Some(f.last_input + self.options.fs.reorder_timeout)
            }
            _ => None,
        }
    }
}

impl Protocol for ReceiverDriver {
    type Command = NoCommand;

    fn io_ready(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_ {
        std::future::poll_fn(move |cx| {
            let ready = match &self.phase {
                Phase::Listening(l) => match l.poll_accept(cx) {
                    Poll::Ready(r) => {
                        self.accepted = Some(r);
                        true
                    }
                    Poll::Pending => false,
                },
                Phase::Preamble { stream, .. } => stream.poll_read_ready(cx).is_ready(),
                Phase::Flowing(f) => {
                    (f.tcp_open && f.stream.poll_read_ready(cx).is_ready())
                        || self.udp.poll_recv_ready(cx).is_ready()
                }
                Phase::Ended => false,
            };
            if ready {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
    }

    fn handle_io(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let now = time.now();
        match self.accepted.take() {
            // One flow per receiver: the listener closes.
            Some(Ok((stream, peer))) => {
                self.phase = Phase::Preamble {
                    stream,
                    peer,
                    got: Vec::with_capacity(PREAMBLE_LEN),
                    until: now + self.options.preamble_timeout,
                };
            }
            Some(Err(e)) => self.end(ConnectionError::from_io(e)),
            None => {}
        }
        self.read_preamble(now);
        self.read_flow(now);
        Ok(())
    }

    fn handle_command(&mut self, _now: Time, command: NoCommand) {
        match command {}
    }

    fn handle_dropped(&mut self, _now: Time, _id: u64) {}

    fn poll_timeout(&self) -> Option<Time> {
        match &self.phase {
            Phase::Preamble { until, .. } => Some(*until),
            Phase::Flowing(f) => [f.fs.poll_timeout(), self.linger_end()]
                .into_iter()
                .flatten()
                .min(),
            Phase::Listening(_) | Phase::Ended => None,
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if matches!(&self.phase, Phase::Preamble { until, .. } if *until <= now) {
            return self.end(ConnectionError::TimedOut);
        }
        if let Phase::Flowing(f) = &mut self.phase
            && f.fs.poll_timeout().is_some_and(|t| t <= now)
        {
            f.fs.handle_timeout(now);
        }
    }

    fn flush(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let now = time.now();
        let Phase::Flowing(f) = &mut self.phase else {
            return Ok(());
        };
        while let Some(t) = f.fs.poll_transmit(now) {
            if t.path == FlowPath::Control {
                if let Err(e) = self.udp.try_send_to(&t.bytes, f.report_to) {
                    tracing::debug!("tpba receiver report: {e}");
                }
                update(&self.stats, |s| s.reports_sent += 1);
            }
        }
        Ok(())
    }

    fn dispatch(&mut self, now: Time) {
        let Phase::Flowing(f) = &mut self.phase else {
            return;
        };
        while let Some(e) = f.fs.poll_event() {
            update(&self.stats, |s| match e {
                FsEvent::AduReceived { tcp: true, .. } => s.adus_tcp += 1,
                FsEvent::AduReceived { tcp: false, .. } => s.adus_udp += 1,
                FsEvent::AduLost { count, .. } => s.adus_lost += count,
                _ => {}
            });
        }
        // Hand ADUs over while the application keeps up; hold one otherwise (its read wakes
        // the driver).
        while let Some(adu) = self.held.take().or_else(|| f.fs.f_recv()) {
            match self.out.try_send(adu) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(adu)) => {
                    self.held = Some(adu);
                    break;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    return self.end(ConnectionError::LocallyClosed);
                }
            }
        }
        if self.held.is_none() && self.linger_end().is_some_and(|t| now >= t) {
            // The sender is gone and quiet: recv() sees why after the last ADU.
            self.end(ConnectionError::ClosedByPeer(CloseReason::Application));
        }
    }

    fn close_all(&mut self, _now: Time) {
        self.phase = Phase::Ended;
    }

    fn is_idle(&self) -> bool {
        true
    }

    fn finish(&mut self, why: ConnectionError) {
        let why = self.ended.take().unwrap_or(why);
        update(&self.end, |e| {
            e.get_or_insert(why);
        });
        // The ADU queue closes when the driver drops `out`, after this.
    }
}
