//! The errors of every message transport (ATP, NAI-TCP, NAI-MTCPk), modelled on quinn's: why a
//! connection could not be opened ([`ConnectError`]), why an open one ended
//! ([`ConnectionError`] — data an application can act on, not only a message), and why a call
//! on a connection was refused ([`SendError`]). One vocabulary for every protocol: a caller
//! never learns a transport's private error type to tell a reset from a timeout.

use crate::message::Transport;
use adaptnet_core::nai::NaiError;
use adaptnet_core::session::CloseReason;
use adaptnet_core::wire::WireError;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use thiserror::Error;

/// Why [`Endpoint::connect`](crate::message::Endpoint::connect) failed.
#[derive(Debug, Error)]
pub enum ConnectError {
    /// The endpoint was closed (or dropped) first.
    #[error("the endpoint is closed")]
    EndpointClosed,
    /// The ATP handshake ended without a connection: the server did not answer within the
    /// handshake's retransmissions, or refused.
    #[error("no ATP connection to {0}: the handshake got no answer or was refused")]
    HandshakeFailed(SocketAddr),
    /// The peer's host refused the connection (TCP RST: nothing listens there).
    #[error("{0} refused the connection (is a server running there?)")]
    Refused(SocketAddr),
    /// This endpoint already has a connection to the peer (ATP: one per peer address).
    #[error("already connected to {0}")]
    AlreadyConnected(SocketAddr),
    /// The peer did not answer the handshake (a stream's SYN went unanswered through its
    /// retransmissions), or reset it.
    #[error(
        "no answer from {0}: the handshake timed out or was reset (is a server running there?)"
    )]
    NoAnswer(SocketAddr),
    /// The endpoint holds as many connections as it may.
    #[error("too many connections (limit {0})")]
    TooManyConnections(usize),
    /// A socket operation failed.
    #[error("connecting to {peer}: {source}")]
    Io {
        /// The peer.
        peer: SocketAddr,
        /// The socket's error.
        source: io::Error,
    },
}

impl ConnectError {
    /// A failed TCP connect, by its kind.
    pub(crate) fn from_tcp(peer: SocketAddr, source: io::Error) -> ConnectError {
        match source.kind() {
            io::ErrorKind::ConnectionRefused => ConnectError::Refused(peer),
            _ => ConnectError::Io { peer, source },
        }
    }
}

/// Why a connection ended. Every handle of the connection sees the same value: receiving
/// returns it once the messages that arrived before the end have been read, and
/// [`Connection::closed`](crate::message::Connection::closed) returns it at once.
#[derive(Clone, Debug, Error)]
pub enum ConnectionError {
    /// This side closed it: [`Connection::close`](crate::message::Connection::close), or the
    /// last handle of the connection was dropped.
    #[error("closed by this side")]
    LocallyClosed,
    /// The endpoint was closed or dropped, and its connections with it.
    #[error("the endpoint closed")]
    EndpointClosed,
    /// The peer closed it: an ATP CLOSE with the peer's reason, or a TCP FIN
    /// ([`CloseReason::Application`]).
    #[error("closed by the peer ({0:?})")]
    ClosedByPeer(CloseReason),
    /// Nothing was heard from the peer within the idle timeout (ATP's liveness, on either
    /// side; a TCP retransmission timeout).
    #[error("timed out: the peer went silent")]
    TimedOut,
    /// The peer reset the connection (TCP RST, a broken pipe).
    #[error("reset by the peer")]
    Reset,
    /// The network reports the peer unreachable (ICMP host or network unreachable).
    #[error("the peer is unreachable")]
    Unreachable,
    /// The application did not read what arrived: the connection held more unread messages
    /// or bytes than its bounds
    /// ([`EndpointOptions::message_queue_len`](crate::message::EndpointOptions::message_queue_len),
    /// [`unread_bytes_max`](crate::message::EndpointOptions::unread_bytes_max)) and a
    /// transport without receiver flow control (ATP today) closed it rather than drop a
    /// message its sender was told was delivered. The messages that arrived stay readable.
    #[error(
        "the application is too slow: {unread_messages} unread messages, {unread_bytes} unread \
         bytes exceed the connection's bounds"
    )]
    ApplicationTooSlow {
        /// Messages received and not read when the connection was closed.
        unread_messages: usize,
        /// Their bytes.
        unread_bytes: u64,
    },
    /// The peer broke the protocol (a record that does not parse, a message over the bound).
    #[error("the peer broke the protocol: {0}")]
    ProtocolViolation(WireError),
    /// A socket operation failed.
    #[error("socket: {0}")]
    Io(Arc<io::Error>),
}

impl ConnectionError {
    /// What a socket error on an established connection means.
    pub(crate) fn from_io(e: io::Error) -> ConnectionError {
        use io::ErrorKind as K;
        match e.kind() {
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => ConnectionError::Reset,
            K::HostUnreachable | K::NetworkUnreachable => ConnectionError::Unreachable,
            K::TimedOut => ConnectionError::TimedOut,
            _ => ConnectionError::Io(Arc::new(e)),
        }
    }
}

/// Why a call on a connection's sending side (send, a change to a message, a queue, a
/// bandwidth notification) was refused.
#[derive(Debug, Error)]
pub enum SendError {
    /// NAI refused it: admission control (`NaiError::Rejected`, the message still has its id
    /// and outcome), a bound, an unknown message or queue.
    #[error(transparent)]
    Nai(#[from] NaiError),
    /// The connection has ended, for this reason.
    #[error("connection lost: {0}")]
    ConnectionLost(#[from] ConnectionError),
    /// The transport cannot do this (the baselines' sends are irrevocable and one-way,
    /// papers/000 §5.2).
    #[error("{transport} cannot {what}")]
    Unsupported {
        /// The connection's transport.
        transport: Transport,
        /// What was asked.
        what: &'static str,
    },
}

/// The endpoint has stopped (closed or dropped) and answers nothing more.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error("the endpoint is closed")]
pub struct EndpointClosed;

impl From<EndpointClosed> for ConnectError {
    fn from(_: EndpointClosed) -> ConnectError {
        ConnectError::EndpointClosed
    }
}

/// Why a read from a byte stream ([`StreamConn`](crate::stream::StreamConn)) failed. As an
/// [`io::Error`] (what `AsyncRead` returns) it keeps this value as its inner error and a kind
/// that says the same ([`ReadError::kind`]).
#[derive(Clone, Debug, Error)]
pub enum ReadError {
    /// The connection ended before the peer closed its direction.
    #[error("connection lost: {0}")]
    ConnectionLost(#[from] ConnectionError),
}

/// Why a write to a byte stream failed (see [`ReadError`] for the [`io::Error`] form).
#[derive(Clone, Debug, Error)]
pub enum WriteError {
    /// The connection ended.
    #[error("connection lost: {0}")]
    ConnectionLost(#[from] ConnectionError),
    /// This side already shut the stream down for writing.
    #[error("the stream was shut down for writing")]
    Finished,
}

impl ConnectionError {
    /// The [`io::ErrorKind`] that says the same.
    pub fn io_kind(&self) -> io::ErrorKind {
        use io::ErrorKind as K;
        match self {
            ConnectionError::Reset => K::ConnectionReset,
            ConnectionError::TimedOut => K::TimedOut,
            ConnectionError::Unreachable => K::HostUnreachable,
            ConnectionError::LocallyClosed | ConnectionError::EndpointClosed => K::NotConnected,
            ConnectionError::ClosedByPeer(_) => K::ConnectionAborted,
            ConnectionError::Io(e) => e.kind(),
            ConnectionError::ApplicationTooSlow { .. } | ConnectionError::ProtocolViolation(_) => {
                K::ConnectionAborted
            }
        }
    }
}

impl ReadError {
    /// The [`io::ErrorKind`] of the [`io::Error`] form.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            ReadError::ConnectionLost(e) => e.io_kind(),
        }
    }
}

impl WriteError {
    /// The [`io::ErrorKind`] of the [`io::Error`] form.
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            WriteError::ConnectionLost(e) => e.io_kind(),
            WriteError::Finished => io::ErrorKind::BrokenPipe,
        }
    }
}

impl From<ReadError> for io::Error {
    fn from(e: ReadError) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}

impl From<WriteError> for io::Error {
    fn from(e: WriteError) -> io::Error {
        io::Error::new(e.kind(), e)
    }
}
