//! The sending end of a TPBA flow: core's `FSocket` over a kernel TCP connection and a
//! connected UDP socket, on the crate's driver loop.

use super::{MAGIC, PREAMBLE_LEN, SenderStats, TpbaError, TpbaOptions, snapshot, update};
use crate::clock::Clock;
use crate::driver::{self, Protocol, Shared, Timekeeper};
use crate::error::{ConnectError, ConnectionError};
use crate::message::unspecified_for;
use crate::naitcp::link::Link;
use crate::tcpinfo::tcp_info;
use adaptnet_core::Time;
use adaptnet_core::session::CloseReason;
use adaptnet_core::tpba::{
    FSocket, FlowPath, FsError, FsEvent, Period, TcpCommand, TcpStatus, TpbaEvent,
};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::{mpsc, oneshot};

/// Control datagrams (receiver reports) read per wake-up, at most.
const DATAGRAMS_PER_WAKE: usize = 64;
/// Largest control datagram read (receiver reports are a few dozen bytes).
const CONTROL_DATAGRAM: usize = 2048;

/// What a sender's handles ask of its driver.
pub(crate) enum Command {
    Send {
        data: Vec<u8>,
        boundary: bool,
        reply: oneshot::Sender<Result<(), TpbaError>>,
    },
    Finish {
        reply: oneshot::Sender<Result<(), TpbaError>>,
    },
}

/// The sending end of one TPBA flow: ADUs in, TCP or UDP out as core decides. Clones share
/// the flow; dropping the last closes it gracefully (complete ADUs are sent, then FIN).
#[derive(Clone)]
pub struct TpbaSender(Arc<Inner>);

struct Inner {
    cmd: mpsc::Sender<Command>,
    stats: Arc<Mutex<SenderStats>>,
    shared: Arc<Shared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shared.request_stop();
    }
}

impl TpbaSender {
    /// Opens a flow to a [`TpbaReceiver`](super::TpbaReceiver) at `addr`: connects TCP,
    /// binds a UDP socket, and starts core's `FSocket` in a rate-probing period.
    pub async fn connect(
        addr: SocketAddr,
        options: TpbaOptions,
    ) -> Result<TpbaSender, ConnectError> {
        let io_err = |source| ConnectError::Io { peer: addr, source };
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|e| ConnectError::from_tcp(addr, e))?;
        let udp = UdpSocket::bind(unspecified_for(addr))
            .await
            .map_err(io_err)?;
        udp.connect(addr).await.map_err(io_err)?;
        let local = udp.local_addr().map_err(io_err)?;
        // Fail now, not mid-flow, on a kernel without tcpi_bytes_acked. Its count so far (the
        // SYN) and the preamble are the engine's, not the flow's.
        let info = tcp_info(std::os::fd::AsRawFd::as_raw_fd(&stream))
            .map_err(|e| io_err(io::Error::other(e)))?;
        let acked_base = info.bytes_acked + PREAMBLE_LEN as u64;
        let mut preamble = [0u8; PREAMBLE_LEN];
        preamble[..4].copy_from_slice(MAGIC);
        preamble[4..].copy_from_slice(&local.port().to_be_bytes());
        stream.write_all(&preamble).await.map_err(io_err)?;
        let clock = Clock::new();
        let mut fs = FSocket::f_socket(clock.now(), local, options.fs.clone());
        fs.f_dst(addr);
        let (cmd, commands) = mpsc::channel(options.command_queue_len.max(1));
        let shared = Shared::new();
        let stats = Arc::new(Mutex::new(SenderStats::default()));
        let proto = SenderDriver {
            fs,
            udp,
            link: Link::new(stream),
            acked_base,
            last_info_in_reduction: false,
            congestion_events: 0,
            stats: stats.clone(),
            waiting: VecDeque::new(),
            options: options.clone(),
            finishing: None,
            closed: false,
            nodelay_after: None,
            last_now: Time::ZERO,
            ended: None,
            shared: shared.clone(),
            buf: vec![0; CONTROL_DATAGRAM],
        };
        driver::spawn(
            proto,
            clock,
            commands,
            shared.clone(),
            options.shutdown_timeout,
        );
        Ok(TpbaSender(Arc::new(Inner { cmd, stats, shared })))
    }

    async fn request(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<(), TpbaError>>) -> Command,
    ) -> Result<(), TpbaError> {
        let (tx, rx) = oneshot::channel();
        let gone = || TpbaError::ConnectionLost(ConnectionError::EndpointClosed);
        self.0.cmd.send(make(tx)).await.map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// `f_send`: appends `adu` to the current ADU; `boundary` ends it. Waits while the
    /// flow's send queue is full.
    pub async fn send(&self, adu: Vec<u8>, boundary: bool) -> Result<(), TpbaError> {
        self.request(|reply| Command::Send {
            data: adu,
            boundary,
            reply,
        })
        .await
    }

    /// What the sender has done so far.
    pub fn stats(&self) -> SenderStats {
        snapshot(&self.0.stats)
    }

    /// `f_close`: sends every complete ADU (an unterminated one is discarded), waits until
    /// TCP has acknowledged all of its bytes, closes the TCP connection and returns the
    /// final statistics.
    /// The flow closes for every clone of this handle.
    pub async fn finish(self) -> Result<SenderStats, TpbaError> {
        self.request(|reply| Command::Finish { reply }).await?;
        self.wait_idle().await;
        Ok(self.stats())
    }

    /// Closes the flow at once: complete ADUs still go out (bounded by
    /// [`TpbaOptions::shutdown_timeout`]), waiting sends fail.
    pub fn close(&self) {
        self.0.shared.request_stop();
    }

    /// Waits until the flow's driver has stopped (finished, closed or failed).
    pub async fn wait_idle(&self) {
        self.0.shared.wait_done().await;
    }
}

/// A `send` waiting for room in the flow's send queue.
struct WaitingSend {
    data: Vec<u8>,
    boundary: bool,
    reply: oneshot::Sender<Result<(), TpbaError>>,
}

struct SenderDriver {
    fs: FSocket,
    udp: UdpSocket,
    link: Link,
    /// `tcpi_bytes_acked` that is not the flow's: the SYN and the preamble.
    acked_base: u64,
    last_info_in_reduction: bool,
    congestion_events: u64,
    stats: Arc<Mutex<SenderStats>>,
    waiting: VecDeque<WaitingSend>,
    options: TpbaOptions,
    finishing: Option<oneshot::Sender<Result<(), TpbaError>>>,
    closed: bool,
    /// A `TCP_NODELAY` change core asked for after bytes the socket has not taken yet.
    nodelay_after: Option<bool>,
    last_now: Time,
    /// Why the flow ended, once it has.
    ended: Option<ConnectionError>,
    shared: Arc<Shared>,
    buf: Vec<u8>,
}

impl SenderDriver {
    fn end(&mut self, why: ConnectionError) {
        self.ended.get_or_insert(why);
        self.shared.request_stop();
    }

    /// Reads `TCP_INFO` and hands core the connection's state.
    fn read_tcp_status(&mut self, now: Time) {
        let info = match tcp_info(self.link.fd()) {
            Ok(i) => i,
            Err(e) => {
                let e = io::Error::other(e);
                return self.end(ConnectionError::from_io(e));
            }
        };
        let reducing = info.in_reduction();
        if reducing && !self.last_info_in_reduction {
            self.congestion_events += 1;
        }
        self.last_info_in_reduction = reducing;
        let bytes_acked = info.bytes_acked.saturating_sub(self.acked_base);
        self.fs.handle_tcp_status(
            now,
            TcpStatus {
                bytes_acked,
                cwnd_bytes: info.cwnd_bytes(),
                smss: u64::from(info.snd_mss_bytes),
                congestion_events: self.congestion_events,
            },
        );
        let events = self.congestion_events;
        update(&self.stats, |s| {
            s.tcp_bytes_acked = bytes_acked;
            s.congestion_events = events;
        });
    }

    /// Core's TCP commands, in stream order: a `NoDelay` after bytes still waiting for the
    /// socket is applied once the socket has them.
    fn tcp_commands(&mut self) -> io::Result<()> {
        while let Some(c) = self.fs.poll_tcp_command() {
            match c {
                TcpCommand::NoDelay(on) if self.link.pending_bytes() > 0 => {
                    self.nodelay_after = Some(on);
                }
                TcpCommand::NoDelay(on) => self.link.set_nodelay(on)?,
                TcpCommand::SetCwnd(bytes) => {
                    tracing::debug!("tpba: cwnd_new = {bytes} B cannot be set on kernel TCP");
                    update(&self.stats, |s| s.cwnd_requests += 1);
                }
            }
        }
        Ok(())
    }

    fn record_events(&mut self) {
        let period = self.fs.controller().period();
        let mut events = Vec::new();
        while let Some(e) = self.fs.poll_event() {
            events.push(e);
        }
        update(&self.stats, |s| {
            s.period = Some(period);
            for e in events {
                let FsEvent::Tpba(e) = e else { continue };
                match e {
                    TpbaEvent::Sample {
                        rate_bytes_per_s, ..
                    } => s.samples_bytes_per_s.push(rate_bytes_per_s),
                    TpbaEvent::ProbingDone { rate_bytes_per_s } => {
                        s.probed_rates_bytes_per_s.push(rate_bytes_per_s);
                    }
                    TpbaEvent::Switched {
                        to: Period::Running,
                        ..
                    } => s.switches_to_running += 1,
                    TpbaEvent::Switched {
                        to: Period::Probing,
                        ..
                    } => s.switches_to_probing += 1,
                    TpbaEvent::Decreased { .. } => s.decreases += 1,
                    TpbaEvent::RunningDone { .. } => {}
                }
            }
        });
    }

    fn busy(&self) -> bool {
        !self.fs.is_drained() || !self.waiting.is_empty()
    }
}

impl Protocol for SenderDriver {
    type Command = Command;

    fn io_ready(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_ {
        std::future::poll_fn(move |cx| {
            // The receiver sends nothing on TCP: readable means its end (FIN or RST).
            let tcp = self.ended.is_none() && self.link.poll_ready(cx, true).is_ready();
            if tcp || self.udp.poll_recv_ready(cx).is_ready() {
                return Poll::Ready(Ok(()));
            }
            Poll::Pending
        })
    }

    fn handle_io(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let now = time.now();
        if self.ended.is_none() {
            match self.link.read(&mut self.buf) {
                Ok(Some(0)) => self.end(ConnectionError::ClosedByPeer(CloseReason::Application)),
                Ok(_) => {}
                Err(e) => self.end(ConnectionError::from_io(e)),
            }
        }
        for _ in 0..DATAGRAMS_PER_WAKE {
            match self.udp.try_recv(&mut self.buf) {
                Ok(n) => {
                    let bytes = self.buf.get(..n).unwrap_or_default();
                    if self.fs.handle_control(now, bytes).is_err() {
                        update(&self.stats, |s| s.bad_control += 1);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // ICMP port unreachable and the like: the receiver's UDP may not be up yet.
                Err(e) => tracing::debug!("tpba sender udp recv: {e}"),
            }
        }
        Ok(())
    }

    fn handle_command(&mut self, _now: Time, command: Command) {
        match command {
            Command::Send {
                data,
                boundary,
                reply,
            } => {
                if self.waiting.len() >= self.options.waiting_sends_max {
                    let _ = reply.send(Err(TpbaError::TooManyWaiting(self.waiting.len())));
                } else {
                    self.waiting.push_back(WaitingSend {
                        data,
                        boundary,
                        reply,
                    });
                }
            }
            // Sends already submitted go first; then the flow closes.
            Command::Finish { reply } => self.finishing = Some(reply),
        }
    }

    fn handle_dropped(&mut self, _now: Time, _id: u64) {}

    fn poll_timeout(&self) -> Option<Time> {
        let status = self
            .busy()
            .then(|| self.last_now + self.options.tcp_status_poll);
        match (self.fs.poll_timeout(), status) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        self.last_now = now;
        if self.fs.poll_timeout().is_some_and(|t| t <= now) {
            self.fs.handle_timeout(now);
        }
    }

    fn flush(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let now = time.now();
        loop {
            if !self.link.write_pending()? {
                return Ok(()); // the socket is full: the rest waits, and core with it
            }
            if let Some(on) = self.nodelay_after.take() {
                self.link.set_nodelay(on)?;
            }
            let Some(t) = self.fs.poll_transmit(now) else {
                break;
            };
            match t.path {
                FlowPath::Tcp => self.link.queue(t.bytes),
                FlowPath::Udp | FlowPath::Control => {
                    // A datagram the socket cannot take is lost like any other; the receiver
                    // reports tell core.
                    let sent = self.udp.try_send(&t.bytes).is_ok();
                    update(&self.stats, |s| {
                        s.datagrams_sent += 1;
                        s.datagrams_dropped += u64::from(!sent);
                    });
                }
            }
            // Commands follow the write they come after (NoDelay after the last one).
            self.tcp_commands()?;
        }
        self.tcp_commands()
    }

    fn dispatch(&mut self, now: Time) {
        if self.ended.is_some() {
            return;
        }
        self.last_now = now;
        self.read_tcp_status(now);
        while let Some(w) = self.waiting.front() {
            match self.fs.f_send(now, &w.data, w.boundary) {
                Err(FsError::QueueFull { .. }) => break,
                r => {
                    if let Some(w) = self.waiting.pop_front() {
                        let _ = w.reply.send(r.map(|_| ()).map_err(TpbaError::from));
                    }
                }
            }
        }
        if self.finishing.is_some() && self.waiting.is_empty() && !self.closed {
            self.fs.f_close(now);
            self.closed = true;
        }
        self.record_events();
        if self.closed && self.fs.is_drained() && self.link.pending_bytes() == 0 {
            if let Some(reply) = self.finishing.take() {
                let _ = reply.send(Ok(()));
            }
            self.end(ConnectionError::LocallyClosed);
        }
    }

    fn close_all(&mut self, now: Time) {
        if !self.closed {
            self.fs.f_close(now);
            self.closed = true;
        }
    }

    fn is_idle(&self) -> bool {
        self.ended.is_some() || (self.fs.is_drained() && self.link.pending_bytes() == 0)
    }

    fn finish(&mut self, why: ConnectionError) {
        let why = self.ended.take().unwrap_or(why);
        for w in self.waiting.drain(..) {
            let _ = w.reply.send(Err(TpbaError::ConnectionLost(why.clone())));
        }
        if let Some(reply) = self.finishing.take() {
            let _ = reply.send(Err(TpbaError::ConnectionLost(why)));
        }
        // Dropping the link closes TCP: the kernel sends what it holds, then FIN.
    }
}
