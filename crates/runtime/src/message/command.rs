//! What a message endpoint's handles ask its driver, whatever the transport. A request whose
//! connection is gone is answered by dropping its reply: the handle then reports the
//! connection's end ([`ConnectionError`](crate::error::ConnectionError)).

use super::{Connection, ConnectionStats, EndpointStats};
use crate::error::{ConnectError, SendError};
use adaptnet_core::nai::{MessageId, NotificationId, Outcome, Priority, QueueId, SendOptions};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::oneshot;

/// A request to the endpoint's driver.
pub(crate) enum Command {
    /// Open a connection by handshake (ATP).
    Connect {
        peer: SocketAddr,
        reply: oneshot::Sender<Result<Connection, ConnectError>>,
    },
    /// Take over TCP streams the caller connected (the baselines: connecting is the kernel's,
    /// done in the caller's task so the driver never waits on it).
    Adopt {
        peer: SocketAddr,
        streams: Vec<tokio::net::TcpStream>,
        reply: oneshot::Sender<Result<Connection, ConnectError>>,
    },
    /// The endpoint's counters.
    Stats {
        reply: oneshot::Sender<EndpointStats>,
    },
    /// A request about one connection.
    Conn { id: u64, op: ConnOp },
}

/// A request about one connection.
pub(crate) enum ConnOp {
    Send {
        queue: QueueId,
        data: bytes::Bytes,
        opts: SendOptions,
        reply: oneshot::Sender<Result<Submitted, SendError>>,
    },
    Control {
        id: MessageId,
        op: Control,
        reply: oneshot::Sender<Result<(), SendError>>,
    },
    CreateQueue {
        reply: oneshot::Sender<Result<QueueId, SendError>>,
    },
    RegisterBandwidthRange {
        low: f64,
        high: f64,
        reply: oneshot::Sender<Result<NotificationId, SendError>>,
    },
    /// Close after live messages are final or `linger` has passed (the caller waits for the
    /// connection's end, not for a reply).
    Close { linger: Duration },
    Stats {
        reply: oneshot::Sender<ConnectionStats>,
    },
}

/// A change to a live message (papers/000 §3.1).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Control {
    Cancel,
    Defer,
    Resume,
    Priority(Priority),
    /// A new callback timer counted from when the driver applies it (`None`: no deadline).
    Timer(Option<Duration>),
}

impl Control {
    /// What the change is called, for [`SendError::Unsupported`].
    pub(crate) fn name(self) -> &'static str {
        match self {
            Control::Cancel => "cancel a message",
            Control::Defer => "defer a message",
            Control::Resume => "resume a message",
            Control::Priority(_) => "change a message's priority",
            Control::Timer(_) => "change a message's timer",
        }
    }
}

/// A transport that admits messages in the caller's task, without a round trip through the
/// driver's command queue: ATP, whose core connection the driver and the send path share
/// under a short lock (as quinn's streams write into their connection's state and only wake
/// its driver). Admission is still core's; the driver is woken to send what was admitted.
pub(crate) trait DirectSend: Send + Sync + std::fmt::Debug {
    /// Submits a message on connection `conn`'s `queue`, as [`ConnOp::Send`] would; `None`
    /// if the connection is gone (the caller reports its end).
    fn send(
        &self,
        conn: u64,
        queue: QueueId,
        data: bytes::Bytes,
        opts: SendOptions,
    ) -> Option<Result<Submitted, SendError>>;
}

/// An admitted message, as the driver hands it back: its id and where its outcome (and the
/// moment the transport took its last byte) will be told.
pub(crate) struct Submitted {
    pub(crate) id: MessageId,
    pub(crate) outcome: oneshot::Receiver<Outcome>,
    pub(crate) taken: oneshot::Receiver<()>,
}
