//! TPBA over real sockets (`papers/002_ef8b8f60f6080824.txt` §4–§5): a sender that drives
//! core's [`FSocket`] with a kernel TCP connection and a UDP socket, and a receiver that
//! accepts both and yields ADUs in order.
//!
//! Every decision — when probing ends, the running rate, when to switch, which ADU goes on
//! which path, reassembly — is core's. This module moves bytes and reports the kernel TCP
//! connection's state to core:
//!
//! * `FlowPath::Tcp` bytes are appended to the TCP stream (a writer task keeps the order);
//!   `FlowPath::Udp` and `FlowPath::Control` bytes are datagrams to the peer's UDP socket;
//! * [`TcpCommand::NoDelay`] sets `TCP_NODELAY` in stream order, after the last write of a
//!   probing period (§4: Nagle off so the tail leaves and the buffer evacuates);
//! * [`TcpStatus`] comes from Linux `TCP_INFO` ([`crate::tcpinfo`]): `tcpi_bytes_acked` is the
//!   movement of snd_una the probing period samples every `T_TCP` — the counterpart of the
//!   paper's kernel change with none; window reductions are counted as entries into
//!   `TCP_CA_Recovery`/`TCP_CA_Loss` seen when `TCP_INFO` is read.
//! * [`TcpCommand::SetCwnd`] (§4's `cwnd_new`) cannot be applied: Linux lets user space
//!   neither read-modify nor set the congestion window. It is counted in
//!   [`SenderStats::cwnd_requests`] and otherwise ignored; running with
//!   `net.ipv4.tcp_slow_start_after_idle = 0` keeps the kernel from restarting slow start
//!   after the running period's silence, which is what `cwnd_new` is for.
//!
//! # Rendezvous
//!
//! The receiver listens on one address for TCP and binds UDP on the same port. The sender
//! connects TCP, then writes a 6-byte preamble (`b"TPBA"` and its UDP port, big-endian)
//! before any flow byte, so the receiver knows where its receiver reports go before the
//! first datagram. One flow per receiver.
//!
//! ```no_run
//! use adaptnet_runtime::tpba::{TpbaReceiver, TpbaSender};
//! use adaptnet_core::tpba::FsConfig;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut rx = TpbaReceiver::bind("127.0.0.1:0".parse()?).await?;
//! let tx = TpbaSender::connect(rx.local_addr(), FsConfig::default()).await?;
//! tx.send(b"frame 0".to_vec(), true).await?;
//! assert_eq!(rx.recv().await.as_deref(), Some(&b"frame 0"[..]));
//! let stats = tx.finish().await?;
//! println!("probed rates: {:?}", stats.probed_rates_bytes_per_s);
//! # Ok(()) }
//! ```

use crate::clock::Clock;
use crate::tcpinfo::{TcpInfoError, tcp_info};
use adaptnet_core::tpba::{
    FSocket, FlowPath, FsConfig, FsError, FsEvent, Period, TcpCommand, TcpStatus, TpbaEvent,
};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{mpsc, oneshot};

/// The preamble's magic.
const MAGIC: &[u8; 4] = b"TPBA";
/// Preamble bytes: magic and the sender's UDP port.
const PREAMBLE_LEN: usize = 6;
/// How often the sender reads `TCP_INFO` while TCP data is unacknowledged or ADUs wait
/// (evacuation before a switch and room in `tcp_buffer_bytes` are seen this late at most).
const STATUS_POLL: Duration = Duration::from_millis(2);
/// `send` calls waiting for room in the flow's send queue, at most.
const PENDING_SENDS: usize = 64;
/// Largest datagram either side reads.
const MAX_DATAGRAM: usize = 64 << 10;
/// How long the receiver waits for the preamble.
const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a TPBA call failed.
#[derive(Debug, Error)]
pub enum TpbaError {
    /// A socket operation failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// The flow refused the call (ADU too large, closed …).
    #[error(transparent)]
    Fs(#[from] FsError),
    /// `TCP_INFO` could not be read.
    #[error(transparent)]
    TcpInfo(#[from] TcpInfoError),
    /// The sender's task has stopped (its TCP connection failed, or it finished).
    #[error("the flow is closed")]
    Closed,
}

/// What the sender has done so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SenderStats {
    /// The period in force.
    pub period: Option<Period>,
    /// Each probing period's result `rs`, bytes/s, in order.
    pub probed_rates_bytes_per_s: Vec<f64>,
    /// Probing samples `r[i]` taken, bytes/s, in order (all periods).
    pub samples_bytes_per_s: Vec<f64>,
    /// Switches made to the running period.
    pub switches_to_running: u32,
    /// Switches made back to probing.
    pub switches_to_probing: u32,
    /// Running-rate decreases.
    pub decreases: u32,
    /// `SetCwnd` commands core issued that the kernel cannot apply.
    pub cwnd_requests: u32,
    /// `tcpi_bytes_acked` of the flow's bytes at the last `TCP_INFO` reading.
    pub tcp_bytes_acked: u64,
    /// Window reductions seen in `TCP_INFO`.
    pub congestion_events: u64,
    /// Datagrams sent on UDP (data and control).
    pub datagrams_sent: u64,
    /// Control datagrams that did not parse.
    pub bad_control: u64,
}

/// What the receiver has done so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// ADUs delivered whose data came on TCP.
    pub adus_tcp: u64,
    /// ADUs delivered whose data came on UDP.
    pub adus_udp: u64,
    /// ADUs abandoned as incomplete.
    pub adus_lost: u64,
    /// Datagrams that did not parse.
    pub bad_datagrams: u64,
    /// Receiver reports sent.
    pub reports_sent: u64,
}

fn lock<T: Clone>(m: &Mutex<T>) -> T {
    match m.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    }
}

fn update<T>(m: &Mutex<T>, f: impl FnOnce(&mut T)) {
    match m.lock() {
        Ok(mut g) => f(&mut g),
        Err(p) => f(&mut p.into_inner()),
    }
}

// ---------------------------------------------------------------------------------------
// Sender.

enum Cmd {
    Send {
        data: Vec<u8>,
        boundary: bool,
        reply: oneshot::Sender<Result<(), TpbaError>>,
    },
    Finish {
        reply: oneshot::Sender<()>,
    },
}

/// What the writer task puts on the TCP connection, in order.
enum Write {
    Bytes(Vec<u8>),
    NoDelay(bool),
}

/// The sending end of one TPBA flow: ADUs in, TCP or UDP out as core decides.
pub struct TpbaSender {
    cmd: mpsc::Sender<Cmd>,
    stats: Arc<Mutex<SenderStats>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TpbaSender {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TpbaSender {
    /// Opens a flow to a [`TpbaReceiver`] at `addr`: connects TCP, binds a UDP socket, and
    /// starts core's [`FSocket`] in a rate-probing period.
    pub async fn connect(addr: SocketAddr, config: FsConfig) -> Result<TpbaSender, TpbaError> {
        let stream = TcpStream::connect(addr).await?;
        let local_any: SocketAddr = if addr.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let udp = UdpSocket::bind(local_any).await?;
        udp.connect(addr).await?;
        let udp_port = udp.local_addr()?.port();
        let fd = stream.as_raw_fd();
        // Fail now, not mid-flow, on a kernel without tcpi_bytes_acked. Its count so far (the
        // SYN) and the preamble are the engine's, not the flow's.
        let acked_base = tcp_info(fd)?.bytes_acked + PREAMBLE_LEN as u64;
        let (rd, mut wr) = stream.into_split();
        let mut preamble = [0u8; PREAMBLE_LEN];
        preamble[..4].copy_from_slice(MAGIC);
        preamble[4..].copy_from_slice(&udp_port.to_be_bytes());
        wr.write_all(&preamble).await?;
        let clock = Clock::new();
        let mut fs = FSocket::f_socket(clock.now(), udp.local_addr()?, config);
        fs.f_dst(addr);
        let (wtx, wrx) = mpsc::unbounded_channel();
        tokio::spawn(writer(wr, wrx));
        let (cmd_tx, cmd_rx) = mpsc::channel(PENDING_SENDS);
        let stats = Arc::new(Mutex::new(SenderStats::default()));
        let task = tokio::spawn(
            SenderDriver {
                fs,
                clock,
                udp,
                fd,
                _rd: rd,
                writer: wtx,
                stats: stats.clone(),
                acked_base,
                last_info_in_reduction: false,
                congestion_events: 0,
            }
            .run(cmd_rx),
        );
        Ok(TpbaSender {
            cmd: cmd_tx,
            stats,
            task,
        })
    }

    /// `f_send`: appends `adu` to the current ADU; `boundary` ends it. Waits while the
    /// flow's send queue is full.
    pub async fn send(&self, adu: Vec<u8>, boundary: bool) -> Result<(), TpbaError> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Cmd::Send {
                data: adu,
                boundary,
                reply: tx,
            })
            .await
            .map_err(|_| TpbaError::Closed)?;
        rx.await.map_err(|_| TpbaError::Closed)?
    }

    /// What the sender has done so far.
    pub fn stats(&self) -> SenderStats {
        lock(&self.stats)
    }

    /// `f_close`: sends every complete ADU (an unterminated one is discarded), waits until
    /// TCP has acknowledged all of its bytes, closes the TCP connection and returns the
    /// final statistics.
    pub async fn finish(self) -> Result<SenderStats, TpbaError> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Cmd::Finish { reply: tx })
            .await
            .map_err(|_| TpbaError::Closed)?;
        rx.await.map_err(|_| TpbaError::Closed)?;
        Ok(self.stats())
    }
}

async fn writer(mut wr: OwnedWriteHalf, mut rx: mpsc::UnboundedReceiver<Write>) {
    while let Some(w) = rx.recv().await {
        let ok = match w {
            Write::Bytes(b) => wr.write_all(&b).await.is_ok(),
            Write::NoDelay(on) => wr.as_ref().set_nodelay(on).is_ok(),
        };
        if !ok {
            return;
        }
    }
    let _ = wr.shutdown().await;
}

struct PendingSend {
    data: Vec<u8>,
    boundary: bool,
    reply: oneshot::Sender<Result<(), TpbaError>>,
}

struct SenderDriver {
    fs: FSocket,
    clock: Clock,
    udp: UdpSocket,
    /// The TCP socket's descriptor; valid while `_rd` (or the writer's half) lives.
    fd: RawFd,
    _rd: tokio::net::tcp::OwnedReadHalf,
    writer: mpsc::UnboundedSender<Write>,
    stats: Arc<Mutex<SenderStats>>,
    /// `tcpi_bytes_acked` that is not the flow's: the SYN and the preamble.
    acked_base: u64,
    last_info_in_reduction: bool,
    congestion_events: u64,
}

impl SenderDriver {
    async fn run(mut self, mut cmds: mpsc::Receiver<Cmd>) {
        let mut pending: VecDeque<PendingSend> = VecDeque::new();
        let mut finishing: Option<oneshot::Sender<()>> = None;
        let mut closed = false;
        let mut buf = vec![0u8; MAX_DATAGRAM];
        loop {
            let now = self.clock.now();
            if self.read_tcp_status(now).is_err() {
                return; // the connection is gone: callers see Closed
            }
            while let Some(p) = pending.front() {
                match self.fs.f_send(now, &p.data, p.boundary) {
                    Err(FsError::QueueFull { .. }) => break,
                    r => {
                        if let Some(p) = pending.pop_front() {
                            let _ = p.reply.send(r.map(|_| ()).map_err(TpbaError::from));
                        }
                    }
                }
            }
            if finishing.is_some() && pending.is_empty() && !closed {
                self.fs.f_close(now);
                closed = true;
            }
            if self.fs.poll_timeout().is_some_and(|t| t <= now) {
                self.fs.handle_timeout(now);
            }
            if self.transmit(now).await.is_err() {
                return;
            }
            self.record_events();
            if closed && self.fs.is_drained() {
                if let Some(reply) = finishing.take() {
                    let _ = reply.send(());
                }
                return; // dropping the writer's channel closes the TCP connection
            }
            let mut wake = self.fs.poll_timeout().map(|t| self.clock.instant_of(t));
            if !self.fs.is_drained() || !pending.is_empty() {
                let poll = Instant::now() + STATUS_POLL;
                wake = Some(wake.map_or(poll, |w| w.min(poll)));
            }
            let sleep = async {
                match wake {
                    Some(w) => tokio::time::sleep_until(w.into()).await,
                    None => std::future::pending().await,
                }
            };
            let accepting = pending.len() < PENDING_SENDS && finishing.is_none();
            tokio::select! {
                cmd = cmds.recv(), if accepting => match cmd {
                    Some(Cmd::Send { data, boundary, reply }) => {
                        pending.push_back(PendingSend { data, boundary, reply });
                    }
                    // Sends already submitted go first; then the flow closes.
                    Some(Cmd::Finish { reply }) => finishing = Some(reply),
                    None => return,
                },
                r = self.udp.recv(&mut buf) => match r {
                    Ok(n) => {
                        let now = self.clock.now();
                        if self.fs.handle_control(now, buf.get(..n).unwrap_or_default()).is_err() {
                            update(&self.stats, |s| s.bad_control += 1);
                        }
                    }
                    // ICMP port unreachable and the like: the receiver may not be up yet.
                    Err(e) => tracing::debug!("tpba sender udp recv: {e}"),
                },
                () = sleep => {}
            }
        }
    }

    fn read_tcp_status(&mut self, now: adaptnet_core::Time) -> Result<(), TpbaError> {
        let info = tcp_info(self.fd)?;
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
        Ok(())
    }

    async fn transmit(&mut self, now: adaptnet_core::Time) -> Result<(), TpbaError> {
        while let Some(t) = self.fs.poll_transmit(now) {
            match t.path {
                FlowPath::Tcp => self
                    .writer
                    .send(Write::Bytes(t.bytes))
                    .map_err(|_| TpbaError::Closed)?,
                FlowPath::Udp | FlowPath::Control => {
                    if let Err(e) = self.udp.send(&t.bytes).await {
                        // A lost datagram is the network's business; the reports tell core.
                        tracing::debug!("tpba sender udp send: {e}");
                    }
                    update(&self.stats, |s| s.datagrams_sent += 1);
                }
            }
            // Commands follow the write they come after (NoDelay after the last one).
            self.commands()?;
        }
        self.commands()
    }

    fn commands(&mut self) -> Result<(), TpbaError> {
        while let Some(c) = self.fs.poll_tcp_command() {
            match c {
                TcpCommand::NoDelay(on) => self
                    .writer
                    .send(Write::NoDelay(on))
                    .map_err(|_| TpbaError::Closed)?,
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
}

// ---------------------------------------------------------------------------------------
// Receiver.

/// The receiving end of one TPBA flow: accepts the sender's TCP connection and datagrams,
/// feeds core's [`FSocket`] and yields whole ADUs in order.
pub struct TpbaReceiver {
    adus: mpsc::Receiver<Vec<u8>>,
    local_addr: SocketAddr,
    stats: Arc<Mutex<ReceiverStats>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TpbaReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TpbaReceiver {
    /// Listens on `addr` (TCP, and UDP on the same port) with the default [`FsConfig`].
    pub async fn bind(addr: SocketAddr) -> Result<TpbaReceiver, TpbaError> {
        TpbaReceiver::bind_with(addr, FsConfig::default()).await
    }

    /// Listens on `addr` with `config` (its `t_rtcp` paces receiver reports; its bounds
    /// bound reassembly).
    pub async fn bind_with(addr: SocketAddr, config: FsConfig) -> Result<TpbaReceiver, TpbaError> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let udp = UdpSocket::bind(local_addr).await?;
        let capacity = config.recv_queue_adus.max(1);
        let (tx, rx) = mpsc::channel(capacity);
        let stats = Arc::new(Mutex::new(ReceiverStats::default()));
        let task = tokio::spawn(receive(listener, udp, config, tx, stats.clone()));
        Ok(TpbaReceiver {
            adus: rx,
            local_addr,
            stats,
            task,
        })
    }

    /// The bound address (TCP and UDP).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `f_recv`: the next whole ADU, in order. `None` once the sender has closed the TCP
    /// connection and no datagram has arrived for `reorder_timeout` (or the flow failed).
    pub async fn recv(&mut self) -> Option<Vec<u8>> {
        self.adus.recv().await
    }

    /// What the receiver has done so far.
    pub fn stats(&self) -> ReceiverStats {
        lock(&self.stats)
    }
}

async fn receive(
    listener: TcpListener,
    udp: UdpSocket,
    config: FsConfig,
    out: mpsc::Sender<Vec<u8>>,
    stats: Arc<Mutex<ReceiverStats>>,
) {
    let linger = config.reorder_timeout;
    let Ok((stream, peer)) = listener.accept().await else {
        return;
    };
    drop(listener); // one flow per receiver
    let (mut rd, _wr) = stream.into_split();
    let mut preamble = [0u8; PREAMBLE_LEN];
    match tokio::time::timeout(PREAMBLE_TIMEOUT, rd.read_exact(&mut preamble)).await {
        Ok(Ok(_)) if preamble.starts_with(MAGIC) => {}
        _ => return,
    }
    let report_to = SocketAddr::new(peer.ip(), u16::from_be_bytes([preamble[4], preamble[5]]));
    let clock = Clock::new();
    let local = udp.local_addr().unwrap_or(peer);
    let mut fs = FSocket::f_socket(clock.now(), local, config);
    let mut chunk = vec![0u8; 64 << 10];
    let mut dgram = vec![0u8; MAX_DATAGRAM];
    let mut held: Option<Vec<u8>> = None;
    let mut tcp_open = true;
    let mut last_input = Instant::now();
    loop {
        let now = clock.now();
        if fs.poll_timeout().is_some_and(|t| t <= now) {
            fs.handle_timeout(now);
        }
        while let Some(t) = fs.poll_transmit(now) {
            if t.path == FlowPath::Control {
                if let Err(e) = udp.send_to(&t.bytes, report_to).await {
                    tracing::debug!("tpba receiver report: {e}");
                }
                update(&stats, |s| s.reports_sent += 1);
            }
        }
        while let Some(e) = fs.poll_event() {
            update(&stats, |s| match e {
                FsEvent::AduReceived { tcp: true, .. } => s.adus_tcp += 1,
                FsEvent::AduReceived { tcp: false, .. } => s.adus_udp += 1,
                FsEvent::AduLost { count, .. } => s.adus_lost += count,
                _ => {}
            });
        }
        // Hand ADUs over while the application keeps up; hold one otherwise.
        while let Some(adu) = held.take().or_else(|| fs.f_recv()) {
            match out.try_send(adu) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(adu)) => {
                    held = Some(adu);
                    break;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return,
            }
        }
        let linger_end = (!tcp_open).then(|| last_input + linger);
        if linger_end.is_some_and(|t| Instant::now() >= t) && held.is_none() {
            return; // sender gone and quiet: recv() sees None
        }
        let wake = [fs.poll_timeout().map(|t| clock.instant_of(t)), linger_end]
            .into_iter()
            .flatten()
            .min();
        let sleep = async {
            match wake {
                Some(w) => tokio::time::sleep_until(w.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = rd.read(&mut chunk), if tcp_open => {
                last_input = Instant::now();
                match r {
                    Ok(0) | Err(_) => tcp_open = false,
                    Ok(n) => {
                        let now = clock.now();
                        if fs.handle_tcp_bytes(now, chunk.get(..n).unwrap_or_default()).is_err() {
                            return; // the stream's framing is lost
                        }
                    }
                }
            }
            r = udp.recv(&mut dgram) => {
                last_input = Instant::now();
                if let Ok(n) = r {
                    let now = clock.now();
                    if fs.handle_udp(now, dgram.get(..n).unwrap_or_default()).is_err() {
                        update(&stats, |s| s.bad_datagrams += 1);
                    }
                }
            }
            permit = out.reserve(), if held.is_some() => match permit {
                Ok(p) => {
                    if let Some(adu) = held.take() {
                        p.send(adu);
                    }
                }
                Err(_) => return,
            },
            () = sleep => {}
        }
    }
}
