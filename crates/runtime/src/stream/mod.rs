//! A TCP-like byte stream over UDP: core's [`tcp::Connection`](adaptnet_core::tcp::Connection)
//! carried one segment per datagram (an emitted [`TcpRepr`](adaptnet_core::tcp::TcpRepr)
//! header, then the payload bytes), exposed to the application as a [`StreamConn`] that
//! implements tokio's [`AsyncRead`](tokio::io::AsyncRead) + [`AsyncWrite`](tokio::io::AsyncWrite).
//!
//! Every protocol decision is core's [`tcp::endpoint::Endpoint`](adaptnet_core::tcp::endpoint::Endpoint):
//! demultiplexing, SYN cookies, initial sequence numbers, the mapping from sequence numbers to
//! real bytes, congestion control (NewReno, ADTCP, or a
//! [`CmController`](adaptnet_core::cm::CmController) on a CM of [`crate::cm`], with one
//! macroflow per destination host shared by every stream to it — and by the process's other
//! CM flows to that host, [`Congestion::Cm`]) and the linger. The simulator's TCP framings run
//! the same endpoint.
//!
//! One [`StreamEndpoint`] owns a UDP socket and runs as a task on the caller's tokio runtime
//! (the crate's one driver loop; no thread of its own, CM-delegated or not). Handles are
//! cheap to clone and talk to the driver through a bounded command channel and
//! per-connection bounded byte queues.
//!
//! # Lifecycle
//! Dropping the last handle of a stream closes our direction gracefully (a FIN after what
//! was written) and discards what the peer still sends; dropping the endpoint's last handle
//! (or [`StreamEndpoint::close`]) closes every stream the same way and waits, at most
//! [`StreamOptions::shutdown_timeout`], for the FINs to be acknowledged;
//! [`StreamEndpoint::wait_idle`] returns when it is done. The peer reads end of stream.
//!
//! # Bounds
//! * bytes written and not yet acknowledged: [`StreamOptions::send_buffer_bytes`] per
//!   stream (writers wait);
//! * bytes received and not yet read: the TCP receive window (`core.recv_buffer`) for the
//!   reassembly buffer plus [`StreamOptions::read_buffer_bytes`] handed to the reader (a
//!   slow reader closes the window: its sender waits, nothing is lost);
//! * streams: [`StreamOptions::max_connections`]; accepted but not yet taken:
//!   [`StreamOptions::accept_queue_len`] (beyond, closed at once);
//! * application calls waiting for the driver: [`StreamOptions::command_queue_len`].
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

mod conn;
mod driver;
mod icmp;

pub use conn::StreamConn;

use crate::error::{ConnectError, EndpointClosed};
use adaptnet_core::tcp::TcpConfig;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// The TCP port number a listening endpoint answers on (the UDP socket is the real
/// address; TCP ports only tell streams apart between two endpoints).
pub const LISTEN_PORT: u16 = 1;

/// Which congestion control the endpoint's streams use.
#[derive(Clone, Debug)]
pub enum Congestion {
    /// Core's NewReno, one window per stream.
    NewReno,
    /// TCP/CM (papers/003 §3.2.1): the process's CM ([`crate::cm::Cm::global`]); every
    /// stream to the same destination host shares that host's macroflow (one window) with
    /// the process's other CM flows to it.
    Cm,
    /// TCP/CM on a given CM ([`crate::cm::Cm::new`]) instead of the process's.
    CmOf(crate::cm::Cm),
    /// ADTCP (papers/004): core's [`AdtcpSender`](adaptnet_core::adtcp::AdtcpSender)
    /// policy reacts to the network state the receiver identifies (congestion, channel
    /// error, route change, disconnection) and reports in the ADTCP option. The endpoint
    /// also speaks the option (`core.adtcp` is set): its data carry send times, and as a
    /// receiver it identifies and reports. The peer must speak it as well
    /// ([`StreamOptions::with_adtcp`] on the server) for reports to come back; without them
    /// the policy is NewReno.
    Adtcp(adaptnet_core::adtcp::SenderConfig),
}

/// How to bind a stream endpoint: core's TCP configuration, the congestion control, and
/// every bound, named with its unit.
#[derive(Clone, Debug)]
pub struct StreamOptions {
    /// Core's TCP configuration (MSS, RTO, receive window …).
    pub core: TcpConfig,
    /// NewReno, CM-delegated or ADTCP congestion control.
    pub congestion: Congestion,
    /// Whether SYNs from peers are accepted.
    pub server: bool,
    /// Most streams open at once (lingering ones included).
    pub max_connections: usize,
    /// Established incoming streams waiting for [`StreamEndpoint::accept`]; beyond, new
    /// streams are closed at once.
    pub accept_queue_len: usize,
    /// Application calls (`connect`, `stats`) waiting for the driver; callers wait beyond.
    pub command_queue_len: usize,
    /// Bytes a stream holds written but not yet acknowledged before writers wait.
    pub send_buffer_bytes: usize,
    /// In-order bytes handed towards a reader and not yet read before the receive window
    /// starts closing.
    pub read_buffer_bytes: usize,
    /// Socket receive and send buffer to ask for, bytes.
    pub socket_buffer_bytes: usize,
    /// Fault injection for tests: drop every n-th datagram this endpoint sends.
    pub drop_every_nth_sent: Option<u64>,
    /// How long a finished stream's state lingers to answer a retransmitted FIN.
    pub linger: Duration,
    /// How long a closing endpoint waits for its streams' FINs to be acknowledged.
    pub shutdown_timeout: Duration,
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
            accept_queue_len: 64,
            command_queue_len: 64,
            send_buffer_bytes: 4 << 20,
            read_buffer_bytes: 1 << 20,
            socket_buffer_bytes: 8 << 20,
            drop_every_nth_sent: None,
            linger: Duration::from_secs(2),
            shutdown_timeout: Duration::from_secs(1),
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

    /// The same options with CM-delegated congestion control on `cm`.
    pub fn with_cm_of(self, cm: crate::cm::Cm) -> StreamOptions {
        StreamOptions {
            congestion: Congestion::CmOf(cm),
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
    /// SYNs refused (not a server, too many streams), and incoming streams closed because
    /// the accept queue was full.
    pub refused: u64,
    /// SYNs answered with a SYN cookie (no state kept).
    pub cookies_sent: u64,
    /// Streams open now (allocated state).
    pub open_streams: u64,
    /// Bytes of storage the streams' byte buffers hold now (written and not yet
    /// acknowledged, received and not yet read, reassembly): while bytes flow, the most they
    /// held lately; once a stream's bytes have stood still for 100 ms, what it buffers (an
    /// idle stream with nothing buffered holds nothing).
    pub buffer_storage_bytes: u64,
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
        reply: oneshot::Sender<Result<StreamConn, ConnectError>>,
    },
    Stats {
        reply: oneshot::Sender<StreamStats>,
    },
}

/// A stream endpoint bound to a UDP socket, running as a task on the caller's tokio
/// runtime. Clones share it; dropping the last clone (or [`StreamEndpoint::close`]) closes
/// every stream gracefully.
#[derive(Clone, Debug)]
pub struct StreamEndpoint(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    cmd: mpsc::Sender<Command>,
    incoming: tokio::sync::Mutex<mpsc::Receiver<StreamConn>>,
    local_addr: SocketAddr,
    driver: Arc<crate::driver::Shared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.driver.request_stop();
    }
}

impl StreamEndpoint {
    /// Binds `addr` and starts the endpoint's task on the current tokio runtime.
    pub fn bind(addr: SocketAddr, options: StreamOptions) -> io::Result<StreamEndpoint> {
        let socket = std::net::UdpSocket::bind(addr)?;
        StreamEndpoint::from_std(socket, options)
    }

    /// Uses an already bound socket (e.g. one created inside another network namespace);
    /// call inside a tokio runtime. With [`Congestion::Cm`] the process CM starts on this
    /// runtime if none runs.
    pub fn from_std(
        socket: std::net::UdpSocket,
        options: StreamOptions,
    ) -> io::Result<StreamEndpoint> {
        tokio::runtime::Handle::try_current().map_err(|_| {
            io::Error::other("a stream endpoint must be started inside a tokio runtime")
        })?;
        socket.set_nonblocking(true)?;
        let local_addr = socket.local_addr()?;
        let cm = match &options.congestion {
            // TCP/CM calls the CM synchronously: only an in-process CM can serve it.
            Congestion::Cm => Some(crate::cm::Cm::global_in_process().map_err(io::Error::other)?),
            Congestion::CmOf(cm) => Some(cm.in_process().cloned().ok_or_else(|| {
                io::Error::other("a CM-delegated stream needs an in-process CM, not the daemon's")
            })?),
            Congestion::NewReno | Congestion::Adtcp(_) => None,
        };
        let (cmd_tx, cmd_rx) = mpsc::channel(options.command_queue_len.max(1));
        let (in_tx, in_rx) = mpsc::channel(options.accept_queue_len.max(1));
        let shared = crate::driver::Shared::new();
        let shutdown = options.shutdown_timeout;
        let (proto, time) = driver::StreamDriver::new(
            tokio::net::UdpSocket::from_std(socket)?,
            options,
            in_tx,
            shared.clone(),
            cm,
        )?;
        tokio::spawn(crate::driver::run(
            proto,
            time,
            cmd_rx,
            shared.clone(),
            shutdown,
        ));
        Ok(StreamEndpoint(Arc::new(Inner {
            cmd: cmd_tx,
            incoming: tokio::sync::Mutex::new(in_rx),
            local_addr,
            driver: shared,
        })))
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local_addr
    }

    /// Opens a stream to the endpoint at `peer` (waits for the handshake). Fails with
    /// [`ConnectError::Refused`] as soon as the peer resets the handshake or the network
    /// reports nothing listening there (ICMP port unreachable), with
    /// [`ConnectError::NoAnswer`] after the SYN's retransmissions otherwise.
    pub async fn connect(&self, peer: SocketAddr) -> Result<StreamConn, ConnectError> {
        let (reply, rx) = oneshot::channel();
        self.0
            .cmd
            .send(Command::Connect { peer, reply })
            .await
            .map_err(|_| ConnectError::EndpointClosed)?;
        rx.await.map_err(|_| ConnectError::EndpointClosed)?
    }

    /// The next incoming stream (handshake completed); `None` once the endpoint stopped.
    pub async fn accept(&self) -> Option<StreamConn> {
        self.0.incoming.lock().await.recv().await
    }

    /// The endpoint's counters.
    pub async fn stats(&self) -> Result<StreamStats, EndpointClosed> {
        let (reply, rx) = oneshot::channel();
        self.0
            .cmd
            .send(Command::Stats { reply })
            .await
            .map_err(|_| EndpointClosed)?;
        rx.await.map_err(|_| EndpointClosed)
    }

    /// Closes every stream gracefully (FINs after what was written) and stops the endpoint
    /// once they are acknowledged or [`StreamOptions::shutdown_timeout`] passed; new calls
    /// fail. [`StreamEndpoint::wait_idle`] waits for it.
    pub fn close(&self) {
        self.0.driver.request_stop();
    }

    /// Whether the endpoint was closed (or its driver stopped).
    pub fn is_closed(&self) -> bool {
        self.0.driver.stop_requested() || self.0.driver.is_done()
    }

    /// Waits until the endpoint's driver has stopped (after [`StreamEndpoint::close`], or
    /// the last handle dropped elsewhere): every stream has ended and its FIN was sent.
    pub async fn wait_idle(&self) {
        self.0.driver.wait_done().await;
    }
}
