//! The paper's NAI-over-TCP baselines (papers/000 §5.2) over kernel TCP sockets — NAI-TCP
//! (one blocking connection, one FIFO queue) and NAI-MTCPk (one connection per priority
//! level, k for the highest, early termination on timer expiry) — as transports of
//! [`crate::message`], so a user can run them on the same network as ATP and compare.
//!
//! Every decision is core's [`BaselineSender`](adaptnet_core::nai::baseline::BaselineSender)
//! and [`RecordReceiver`](adaptnet_core::nai::baseline::record::RecordReceiver), and so is the
//! framing; the driver (the crate's one driver loop) moves record bytes between core and the
//! sockets.
//! The sender's "unacknowledged bytes" of a connection — what the paper's blocking send waited
//! on — are the kernel's send queue (`SIOCOUTQ`: unsent and unacknowledged), so the 32 KB
//! send-buffer bound means the same thing as on the paper's FreeBSD hosts.
//!
//! A client [`Endpoint`] opens the baseline's TCP connections to the server in
//! [`Endpoint::connect`] (one [`Connection`](crate::message::Connection) over all of them); a
//! server endpoint accepts each TCP connection as a receive-only connection (NAI-MTCPk's
//! k + levels − 1 connections arrive as that many: the baselines carry no connection id on
//! the wire). The receiver reads its socket only while the application has room
//! ([`EndpointOptions::message_queue_len`], [`unread_bytes_max`](EndpointOptions::unread_bytes_max)),
//! so a slow reader slows the sender through TCP's own flow control; the bounds are passed
//! by at most what one read of [`READ_CHUNK_BYTES`] completes.
//!
//! A server outlasts careless and hostile peers: it holds at most
//! [`BaselineOptions::max_connections`] accepted connections, closes one that stays silent for
//! [`BaselineOptions::idle_timeout`], reads every connection through one shared buffer (an
//! idle connection costs no buffer), and when accepting fails — out of file descriptors,
//! most often — it logs the error, pauses briefly and keeps accepting.
//!
//! A connection that breaks (the peer closed, reset, vanished) ends with its
//! [`ConnectionError`](crate::error::ConnectionError), and every live message with
//! `Abandoned`: the client learns a dead server from its acknowledgement stream.

mod driver;
pub(crate) mod link;
mod liveness;

use crate::error::ConnectError;
use crate::message::{Endpoint, EndpointOptions, Transport, TransportOptions};
use adaptnet_core::nai::NaiConfig;
use adaptnet_core::nai::baseline::{BaselineConfig, BaselineKind};
use std::net::SocketAddr;

/// Largest message a receiver accepts by default (bytes); a record declaring more ends the
/// connection as a protocol violation.
pub const MAX_MESSAGE_BYTES: u64 = 64 << 20;
/// Messages a baseline connection may have written whole and awaiting their
/// acknowledgement byte, by default (see [`BaselineOptions::new`]).
pub const MAX_UNACKED_MESSAGES: usize = 64;
/// Most bytes read from one TCP connection in one read (and so what one read can add past
/// the receiver's bounds). One buffer of this size serves every connection of an endpoint.
pub const READ_CHUNK_BYTES: usize = 64 << 10;
/// Accepted connections a server holds at once by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// How long, by default, a server keeps an accepted connection that sends nothing.
pub const DEFAULT_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a NAI-MTCPk level carries nothing, while another carries messages, before it
/// writes a heartbeat record by default: well under a server's idle timeout (60 s by default,
/// [`DEFAULT_IDLE_TIMEOUT`]), since the server cannot tell the levels' TCP connections belong
/// together.
pub const HEARTBEAT_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// A baseline's own settings of an endpoint.
#[derive(Clone, Debug)]
pub struct BaselineOptions {
    /// The sender's configuration: which baseline, priority levels, the socket send buffer
    /// the blocking send waits on, record size, and its bounds (`max_messages`,
    /// `max_buffered_bytes`: beyond, `send` fails with `BufferFull`).
    pub config: BaselineConfig,
    /// Largest message the receiver reassembles, bytes.
    pub max_message_bytes: u64,
    /// A server's accepted TCP connections held at once; a connection beyond is accepted and
    /// closed at once (counted in [`EndpointStats::refused`](crate::message::EndpointStats::refused)),
    /// so a flood of connections costs descriptors only briefly and never memory.
    pub max_connections: usize,
    /// A server closes an accepted connection from which nothing arrived for this long
    /// (while the application had room to take more: a slow reader is not an idle peer).
    /// `None`: never.
    pub idle_timeout: Option<std::time::Duration>,
    /// How long a connection that awaits an answer (data in flight, probes out) may hear
    /// nothing at all from its peer — no acknowledgement, no data, on any of its TCP
    /// connections — before it ends as dead (default 8 s, as ATP's `silent_timeout`;
    /// checked by the driver from `TCP_INFO`; `TCP_USER_TIMEOUT` is not set, and the
    /// kernel's keep-alives give up only after four times this, as a backstop). A path that is up but carries nothing for longer (a trace
    /// with a zero-rate stretch) ends the connection like a dead peer unless this is raised
    /// above the stretch; heavy loss on a working path does not.
    pub peer_timeout: std::time::Duration,
    /// The kernel congestion control a client's TCP connections run (`TCP_CONGESTION`:
    /// `cubic`, `reno`, `bbr` …); `None`: the host's default
    /// ([`crate::tcpinfo::congestion_control`] of a new socket tells which).
    pub congestion: Option<String>,
}

impl BaselineOptions {
    /// The options of `transport` (a baseline; ATP is taken as NAI-TCP) with core's default
    /// number of priority levels, as fair baselines on a real path:
    ///
    /// * The blocking send's buffer is the kernel socket's own (`send_buffer_bytes`
    ///   unlimited): a record is written while the socket takes it, and the driver waits
    ///   for the socket to become writable — no polling of the kernel's queue, which at 1 ms
    ///   a poll capped NAI-TCP at 0.12 Gbit/s on loopback. Set a finite `send_buffer_bytes`
    ///   (the simulator's FreeBSD 32 KB) to model a small buffer; the driver then polls the
    ///   kernel's queue every millisecond while messages are live.
    /// * The send call returns once a message is written whole, up to
    ///   [`MAX_UNACKED_MESSAGES`] awaiting their acknowledgement byte
    ///   (`max_unacked_messages`; the paper's and the simulator's 1 waits a round trip per
    ///   message). Outcomes still come with the acknowledgements, in order.
    /// * A level of NAI-MTCPk that has carried nothing for [`HEARTBEAT_AFTER`] while another
    ///   level carried messages writes a heartbeat record (`heartbeat_after`), so that a
    ///   server's idle timeout does not close the unused level's TCP connection and with it the
    ///   whole connection.
    pub fn new(transport: Transport) -> BaselineOptions {
        let kind = transport.baseline_kind().unwrap_or(BaselineKind::NaiTcp);
        let mut config = BaselineConfig::new(kind, NaiConfig::default().levels);
        config.send_buffer_bytes = u64::MAX;
        config.max_unacked_messages = MAX_UNACKED_MESSAGES;
        config.heartbeat_after = Some(HEARTBEAT_AFTER);
        BaselineOptions {
            config,
            max_message_bytes: MAX_MESSAGE_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            peer_timeout: driver::PEER_TIMEOUT,
            congestion: None,
        }
    }
}

impl EndpointOptions {
    /// The baseline's settings, if these options run one.
    pub fn baseline_mut(&mut self) -> Option<&mut BaselineOptions> {
        match &mut self.transport {
            TransportOptions::Baseline(b) => Some(b),
            TransportOptions::Atp(_) => None,
        }
    }
}

/// Starts a baseline endpoint's driver: a server's on `listener`, a client's without one
/// (its connections leave from `local_addr`'s address).
pub(crate) fn start(
    listener: Option<tokio::net::TcpListener>,
    local_addr: SocketAddr,
    options: EndpointOptions,
) -> std::io::Result<Endpoint> {
    let connections = match &options.transport {
        TransportOptions::Baseline(b) => {
            adaptnet_core::nai::baseline::BaselineSender::new(b.config.clone()).connections()
        }
        TransportOptions::Atp(_) => 1,
    };
    let (endpoint, wiring) = Endpoint::wire(&options, local_addr, Some(connections));
    wiring.start(options.shutdown_timeout, |incoming, handles| {
        Ok(driver::BaselineDriver::new(
            listener, options, incoming, handles,
        ))
    })?;
    Ok(endpoint)
}

/// Opens `n` TCP connections from `from` to `peer`, with Nagle off (a record leaves when
/// written, as the paper's blocking sends did), running congestion control `congestion`
/// (`None`: the host's default).
pub(crate) async fn open_streams(
    from: SocketAddr,
    peer: SocketAddr,
    n: usize,
    congestion: Option<&str>,
) -> Result<Vec<tokio::net::TcpStream>, ConnectError> {
    let mut streams = Vec::with_capacity(n);
    for _ in 0..n {
        let socket = if peer.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        };
        let socket = socket.map_err(|source| ConnectError::Io { peer, source })?;
        if let Some(cc) = congestion {
            use std::os::fd::AsRawFd;
            crate::tcpinfo::set_congestion_control(socket.as_raw_fd(), cc).map_err(|e| {
                ConnectError::Io {
                    peer,
                    source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
                }
            })?;
        }
        if !from.ip().is_unspecified() {
            socket
                .bind(from)
                .map_err(|source| ConnectError::Io { peer, source })?;
        }
        let stream = socket
            .connect(peer)
            .await
            .map_err(|e| ConnectError::from_tcp(peer, e))?;
        stream
            .set_nodelay(true)
            .map_err(|source| ConnectError::Io { peer, source })?;
        streams.push(stream);
    }
    Ok(streams)
}
