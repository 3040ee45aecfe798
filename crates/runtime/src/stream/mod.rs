//! A TCP-like byte stream over UDP: core's [`tcp::Connection`](adaptnet_core::tcp::Connection)
//! carried one segment per datagram (an emitted [`TcpRepr`](adaptnet_core::tcp::TcpRepr)
//! header, then the payload bytes), exposed to the application as a [`StreamConn`] that
//! implements tokio's [`AsyncRead`] + [`AsyncWrite`].
//!
//! Core's TCP counts *virtual* bytes; the runtime keeps the real ones: a send buffer indexed
//! by stream offset (freed as `bytes_acked` advances; a segment's payload is the bytes at
//! `seq − ISS − 1`) and a bounded receive reassembly buffer by offset from which the bytes
//! up to `bytes_delivered` are handed to the reader. The runtime makes no congestion
//! decision: each endpoint runs either core's NewReno or a
//! [`CmController`](adaptnet_core::cm::CmController) on the process's CM ([`crate::cm`]),
//! with one macroflow per destination host shared by every stream to it — and by the
//! process's other CM flows to that host ([`Congestion::Cm`]).
//!
//! One [`StreamEndpoint`] owns a UDP socket and a driver task. Core's CM handle is
//! single-threaded (`Rc<RefCell>`), so a CM-delegated endpoint's driver runs on the CM host's
//! thread, beside the CM; a NewReno endpoint's on a thread of its own with a current-thread
//! tokio runtime. Handles talk to the driver through a bounded command channel and
//! per-connection shared buffers; they work from any runtime.
//!
//! # Bounds
//! * bytes written and not yet acknowledged: [`StreamOptions::send_buffer_bytes`] per
//!   connection (writers wait);
//! * bytes received and not yet read: the TCP receive window (`core.recv_buffer`) for the
//!   reassembly buffer plus [`StreamOptions::read_buffer_bytes`] handed to the reader;
//! * connections: [`StreamOptions::max_connections`]; accepted but not yet taken:
//!   [`StreamOptions::accept_queue`] (beyond, refused).
//!
//! A listening endpoint allocates nothing for a SYN: it answers with a SYN cookie (core's
//! [`tcp::cookie`](adaptnet_core::tcp::cookie), the session tokens' HMAC) and allocates the
//! stream when an ACK echoes it — an unvalidated peer is sent one SYN-ACK per SYN, no larger
//! than 3× it (issue 9 item 6).
//!
//! ```no_run
//! use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let server = StreamEndpoint::bind("127.0.0.1:0".parse()?, StreamOptions::server())?;
//! let client = StreamEndpoint::bind("127.0.0.1:0".parse()?, StreamOptions::client())?;
//! let mut out = client.connect(server.local_addr()).await?;
//! out.write_all(b"hello").await?;
//! out.shutdown().await?;
//! let mut incoming = server.accept().await.expect("a stream");
//! let mut got = Vec::new();
//! incoming.read_to_end(&mut got).await?;
//! assert_eq!(got, b"hello");
//! # Ok(()) }
//! ```

mod driver;

use adaptnet_core::tcp::TcpConfig;
use adaptnet_core::tcp::bytes::SendBuffer;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, mpsc, oneshot};

/// The TCP port number a listening endpoint answers on (the UDP socket is the real
/// address; TCP ports only tell streams apart between two endpoints).
pub const LISTEN_PORT: u16 = 1;

/// Why a stream call failed.
#[derive(Debug, Error)]
pub enum Error {
    /// A socket operation failed.
    #[error("socket: {0}")]
    Io(#[from] io::Error),
    /// The handshake failed (no answer after core's retries, or reset).
    #[error("could not connect to {0}")]
    ConnectFailed(SocketAddr),
    /// The endpoint refused: [`StreamOptions::max_connections`] streams are open.
    #[error("too many connections (limit {0})")]
    TooManyConnections(usize),
    /// The endpoint has stopped.
    #[error("endpoint closed")]
    Closed,
    /// The process CM could not be started or reached.
    #[error("{0}")]
    Cm(#[from] crate::cm::Error),
}

/// Which congestion control the endpoint's streams use.
#[derive(Clone, Debug)]
pub enum Congestion {
    /// Core's NewReno, one window per stream.
    NewReno,
    /// TCP/CM (papers/003 §3.2.1): the process's CM ([`crate::cm::Cm::global`]); every
    /// stream to the same destination host shares that host's macroflow (one window) with
    /// the process's other CM flows to it.
    Cm,
    /// ADTCP (papers/004): core's [`AdtcpSender`](adaptnet_core::adtcp::AdtcpSender)
    /// policy reacts to the network state the receiver identifies (congestion, channel
    /// error, route change, disconnection) and reports in the ADTCP option. The endpoint
    /// also speaks the option (`core.adtcp` is set): its data carry send times, and as a
    /// receiver it identifies and reports. The peer must speak it as well
    /// ([`StreamOptions::with_adtcp`] on the server) for reports to come back; without them
    /// the policy is NewReno.
    Adtcp(adaptnet_core::adtcp::SenderConfig),
}

/// How to bind a stream endpoint.
#[derive(Clone, Debug)]
pub struct StreamOptions {
    /// Core's TCP configuration (MSS, RTO, receive window …).
    pub core: TcpConfig,
    /// NewReno or CM-delegated congestion control.
    pub congestion: Congestion,
    /// Whether SYNs from peers are accepted.
    pub server: bool,
    /// Most streams open at once.
    pub max_connections: usize,
    /// Established incoming streams waiting for [`StreamEndpoint::accept`].
    pub accept_queue: usize,
    /// Bytes a stream holds written but not yet acknowledged before writers wait.
    pub send_buffer_bytes: usize,
    /// In-order bytes handed to a reader and not yet read before the receive window closes.
    pub read_buffer_bytes: usize,
    /// Socket receive and send buffer to ask for, bytes.
    pub socket_buffer_bytes: usize,
    /// Fault injection for tests: drop every n-th datagram this endpoint sends.
    pub drop_every_nth_sent: Option<u64>,
    /// How long a finished stream's state lingers to answer a retransmitted FIN.
    pub linger: std::time::Duration,
}

impl StreamOptions {
    /// A client endpoint: NewReno, MSS sized so a segment fits a 1500-byte path MTU in one
    /// UDP datagram, 4 MiB windows.
    pub fn client() -> StreamOptions {
        let core = TcpConfig {
            mss: 1400,
            ..TcpConfig::default()
        };
        StreamOptions {
            core,
            congestion: Congestion::NewReno,
            server: false,
            max_connections: 1024,
            accept_queue: 64,
            send_buffer_bytes: 4 << 20,
            read_buffer_bytes: 1 << 20,
            socket_buffer_bytes: 8 << 20,
            drop_every_nth_sent: None,
            linger: std::time::Duration::from_secs(2),
        }
    }

    /// A server endpoint (also able to connect out).
    pub fn server() -> StreamOptions {
        StreamOptions {
            server: true,
            ..StreamOptions::client()
        }
    }

    /// The same options with the ADTCP policy and option (default sender parameters); use
    /// it on both ends.
    pub fn with_adtcp(self) -> StreamOptions {
        StreamOptions {
            congestion: Congestion::Adtcp(adaptnet_core::adtcp::SenderConfig::default()),
            core: TcpConfig {
                adtcp: true,
                ..self.core
            },
            ..self
        }
    }

    /// The same options with CM-delegated congestion control (the process CM).
    pub fn with_cm(self) -> StreamOptions {
        StreamOptions {
            congestion: Congestion::Cm,
            ..self
        }
    }
}

/// Counters of an endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Datagrams that did not parse as a segment.
    pub malformed: u64,
    /// Segments for no known stream (dropped without state).
    pub unknown: u64,
    /// SYNs refused (not a server, too many streams, accept queue full).
    pub refused: u64,
    /// SYNs answered with a SYN cookie (no state kept).
    pub cookies_sent: u64,
    /// Streams open now (allocated state).
    pub open_streams: u64,
    /// Datagrams dropped by [`StreamOptions::drop_every_nth_sent`].
    pub injected_drops: u64,
    /// Datagrams sent.
    pub datagrams_sent: u64,
    /// Datagrams received.
    pub datagrams_received: u64,
    /// Segments received carrying the ADTCP option (papers/004): reports on ACKs, send
    /// times on data.
    pub adtcp_options_received: u64,
}

/// Requests from handles to the driver.
enum Command {
    Connect {
        peer: SocketAddr,
        reply: oneshot::Sender<Result<StreamConn, Error>>,
    },
    Stats {
        reply: oneshot::Sender<StreamStats>,
    },
}

/// A stream endpoint bound to a UDP socket.
pub struct StreamEndpoint {
    cmd: mpsc::Sender<Command>,
    incoming: tokio::sync::Mutex<mpsc::Receiver<StreamConn>>,
    local_addr: SocketAddr,
    /// Dropped with the endpoint: the driver stops.
    _stop: oneshot::Sender<()>,
}

impl StreamEndpoint {
    /// Binds `addr` and starts the endpoint's driver thread.
    pub fn bind(addr: SocketAddr, options: StreamOptions) -> Result<StreamEndpoint, Error> {
        let socket = std::net::UdpSocket::bind(addr)?;
        StreamEndpoint::from_std(socket, options)
    }

    /// Uses an already bound socket (e.g. one created inside another network namespace).
    pub fn from_std(
        socket: std::net::UdpSocket,
        options: StreamOptions,
    ) -> Result<StreamEndpoint, Error> {
        socket.set_nonblocking(true)?;
        let local_addr = socket.local_addr()?;
        let (cmd_tx, cmd_rx) = mpsc::channel(64);
        let (in_tx, in_rx) = mpsc::channel(options.accept_queue.max(1));
        let (stop_tx, stop_rx) = oneshot::channel();
        match options.congestion {
            Congestion::Cm => {
                crate::cm::Cm::global()?.spawn(move |host| {
                    tokio::task::spawn_local(async move {
                        match driver::Driver::new(socket, options, in_tx, Some(host)) {
                            Ok(d) => d.run(cmd_rx, stop_rx).await,
                            Err(e) => tracing::error!("stream endpoint: {e}"),
                        }
                    });
                })?;
            }
            Congestion::NewReno | Congestion::Adtcp(_) => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                std::thread::Builder::new()
                    .name(format!("adaptnet-stream {local_addr}"))
                    .spawn(move || {
                        rt.block_on(async move {
                            match driver::Driver::new(socket, options, in_tx, None) {
                                Ok(d) => d.run(cmd_rx, stop_rx).await,
                                Err(e) => tracing::error!("stream endpoint: {e}"),
                            }
                        });
                    })?;
            }
        }
        Ok(StreamEndpoint {
            cmd: cmd_tx,
            incoming: tokio::sync::Mutex::new(in_rx),
            local_addr,
            _stop: stop_tx,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Opens a stream to the endpoint at `peer` (waits for the handshake).
    pub async fn connect(&self, peer: SocketAddr) -> Result<StreamConn, Error> {
        let (reply, rx) = oneshot::channel();
        self.cmd
            .send(Command::Connect { peer, reply })
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// The next incoming stream (handshake completed); `None` once the endpoint stopped.
    pub async fn accept(&self) -> Option<StreamConn> {
        self.incoming.lock().await.recv().await
    }

    /// The endpoint's counters.
    pub async fn stats(&self) -> Result<StreamStats, Error> {
        let (reply, rx) = oneshot::channel();
        self.cmd
            .send(Command::Stats { reply })
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)
    }
}

/// What a [`StreamConn`] and the driver share: the application's side of the byte buffers.
#[derive(Debug, Default)]
struct Shared {
    /// Bytes written and not yet acknowledged, by stream offset.
    send_buf: SendBuffer,
    send_cap: usize,
    /// In-order bytes for the reader.
    rx: VecDeque<u8>,
    rx_cap: usize,
    /// The peer's FIN has come and every byte before it is in `rx`.
    eof: bool,
    /// The application asked to close its direction.
    shutdown: bool,
    /// Our FIN and all our bytes were acknowledged.
    send_closed: bool,
    /// The connection was reset or timed out (or the endpoint stopped).
    aborted: bool,
    /// The handle was dropped.
    dropped: bool,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

impl Shared {
    fn wake_all(&mut self) {
        if let Some(w) = self.read_waker.take() {
            w.wake();
        }
        if let Some(w) = self.write_waker.take() {
            w.wake();
        }
    }
}

fn lock(s: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic while holding the lock leaves plain buffers; keep using them.
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One stream: [`AsyncRead`] gives the peer's bytes in order (then EOF after its FIN),
/// [`AsyncWrite`] queues bytes (waiting while the send buffer is full), `poll_shutdown`
/// sends our FIN and completes once everything was acknowledged. Dropping it closes our
/// direction and discards what the peer still sends.
pub struct StreamConn {
    shared: Arc<Mutex<Shared>>,
    kick: Arc<Notify>,
    peer: SocketAddr,
}

impl StreamConn {
    /// The peer endpoint's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }
}

impl std::fmt::Debug for StreamConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamConn")
            .field("peer", &self.peer)
            .finish()
    }
}

fn reset() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "stream aborted")
}

impl AsyncRead for StreamConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut s = lock(&self.shared);
        if !s.rx.is_empty() {
            let n = s.rx.len().min(buf.remaining());
            let (a, b) = s.rx.as_slices();
            let from_a = n.min(a.len());
            buf.put_slice(a.get(..from_a).unwrap_or_default());
            buf.put_slice(b.get(..n - from_a).unwrap_or_default());
            s.rx.drain(..n);
            drop(s);
            self.kick.notify_one();
            return Poll::Ready(Ok(()));
        }
        if s.eof {
            return Poll::Ready(Ok(()));
        }
        if s.aborted {
            return Poll::Ready(Err(reset()));
        }
        s.read_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for StreamConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut s = lock(&self.shared);
        if s.aborted {
            return Poll::Ready(Err(reset()));
        }
        if s.shutdown {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "stream shut down",
            )));
        }
        let room = s.send_cap.saturating_sub(s.send_buf.len());
        if room == 0 {
            s.write_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = room.min(buf.len());
        s.send_buf.push(buf.get(..n).unwrap_or_default());
        drop(s);
        self.kick.notify_one();
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Written bytes are already with the driver; there is no lower buffer to flush.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = lock(&self.shared);
        if s.send_closed {
            return Poll::Ready(Ok(()));
        }
        if s.aborted {
            return Poll::Ready(Err(reset()));
        }
        let first = !s.shutdown;
        s.shutdown = true;
        s.write_waker = Some(cx.waker().clone());
        drop(s);
        if first {
            self.kick.notify_one();
        }
        Poll::Pending
    }
}

impl Drop for StreamConn {
    fn drop(&mut self) {
        lock(&self.shared).dropped = true;
        self.kick.notify_one();
    }
}
