//! One message transport interface for ATP and the NAI-TCP / NAI-MTCPk baselines
//! (papers/000): an [`Endpoint`] you bind, [`Connection`]s you open or accept, messages with
//! priorities and callback timers whose one outcome you await ([`MessageHandle`]), whole
//! messages arriving with [`Connection::recv`], events with [`Connection::next_event`]. The
//! CLI, the benchmarks and the examples use it for every transport alike; which one runs is
//! [`EndpointOptions::transport`].
//!
//! | | ATP ([`crate::atp`]) | NAI-TCP, NAI-MTCPk ([`crate::naitcp`]) |
//! |---|---|---|
//! | carried on | one UDP socket | kernel TCP: one connection, or one per level (k for the highest) |
//! | directions | both | client to server (the server acknowledges each message) |
//! | cancel, defer, resume, re-prioritise, new timer | yes | no: sends are irrevocable (§5.2) |
//! | queues, bandwidth notifications, estimate | yes | no estimator |
//! | a slow reader | slows the sender (a receive window within the inbox's bounds) | slows the sender (TCP flow control) |
//!
//! An operation a transport does not have is [`SendError::Unsupported`]. Every message gets
//! exactly one outcome on every transport, whatever happens: a dead peer ends the connection
//! with a [`ConnectionError`] and every live message `Abandoned`.
//!
//! # Lifecycle
//! Handles are cheap to clone. Dropping a connection's last handle closes it at once (the
//! peer is told); [`Connection::close`] closes it gracefully, after its live messages.
//! Dropping an endpoint's last handle (or [`Endpoint::close`]) closes every connection and
//! sends their CLOSEs; [`Endpoint::wait_idle`] returns once that is done — call it before the
//! runtime stops, as with quinn.
//!
//! # Bounds (all in [`EndpointOptions`])
//! * requests waiting for the driver: `command_queue_len` (callers wait). ATP admits a
//!   send in the caller's task instead (core's connection under a short lock; the driver is
//!   only woken to send it), so its sends never queue here;
//! * connections not yet accepted: `accept_queue_len` (beyond, refused);
//! * per connection, received and not read: `message_queue_len` messages and
//!   `unread_bytes_max` bytes; events: `event_queue_len` (beyond, the oldest dropped and
//!   counted);
//! * messages, queues, buffered bytes, connections: core's bounds in the transport's options.
//!
//! ```no_run
//! use adaptnet_runtime::message::{Endpoint, EndpointOptions, Transport};
//! use adaptnet_core::nai::{Priority, SendOptions};
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Endpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::server(Transport::Atp))?;
//! let client = Endpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::client(Transport::Atp))?;
//! let conn = client.connect(server.local_addr()).await?;
//! let urgent = SendOptions { priority: Priority(0), timer: Some(Duration::from_secs(1)), ..Default::default() };
//! let handle = conn.send(b"hello".to_vec(), urgent).await?;
//! let incoming = server.accept().await.expect("a connection");
//! let message = incoming.recv().await?;
//! assert_eq!(message.data, b"hello");
//! println!("outcome: {:?}", handle.outcome().await);
//! client.close();
//! client.wait_idle().await;
//! # Ok(()) }
//! ```

pub(crate) mod command;
mod connection;
mod endpoint;
pub(crate) mod port;
mod queue;

pub use crate::error::{ConnectError, ConnectionError, EndpointClosed, SendError};
pub use connection::{Connection, MessageHandle};
pub use endpoint::{Endpoint, unspecified_for};
pub use queue::InboxStats;

use crate::atp::{AtpConnectionStats, AtpEndpointStats, AtpOptions};
use crate::naitcp::BaselineOptions;
use adaptnet_core::nai::baseline::{BaselineKind, BaselineStats};
use adaptnet_core::nai::{MessageId, NotificationId, Priority};
use std::time::Duration;

/// Which message transport an endpoint runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// ATP over UDP (SPP), with its bandwidth estimator.
    Atp,
    /// NAI-TCP: one kernel TCP connection, one FIFO queue (papers/000 §5.2).
    NaiTcp,
    /// NAI-MTCPk: one kernel TCP connection per priority level, `k` for the highest, early
    /// termination on timer expiry (§5.2).
    NaiMtcp(u8),
}

impl Transport {
    /// The baseline a TCP transport runs (`None` for ATP).
    pub fn baseline_kind(self) -> Option<BaselineKind> {
        match self {
            Transport::Atp => None,
            Transport::NaiTcp => Some(BaselineKind::NaiTcp),
            Transport::NaiMtcp(k) => Some(BaselineKind::Mtcp {
                high_connections: k,
            }),
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Atp => f.write_str("atp"),
            Transport::NaiTcp => f.write_str("nai-tcp"),
            Transport::NaiMtcp(k) => write!(f, "nai-mtcp{k}"),
        }
    }
}

impl std::str::FromStr for Transport {
    type Err = String;

    /// `atp`, `nai-tcp`, `nai-mtcpK` (K in 1..=8; `nai-mtcp` is `nai-mtcp1`).
    fn from_str(s: &str) -> Result<Transport, String> {
        match s {
            "atp" => Ok(Transport::Atp),
            "nai-tcp" => Ok(Transport::NaiTcp),
            _ => s
                .strip_prefix("nai-mtcp")
                .and_then(|k| {
                    if k.is_empty() {
                        Some(1)
                    } else {
                        k.parse().ok()
                    }
                })
                .filter(|k| (1..=8).contains(k))
                .map(Transport::NaiMtcp)
                .ok_or_else(|| {
                    format!("unknown transport {s:?}: use atp, nai-tcp or nai-mtcpK (K in 1..=8)")
                }),
        }
    }
}

/// The transport's own settings.
#[derive(Clone, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "built once per endpoint; a box would only make the options awkward to edit"
)]
pub enum TransportOptions {
    /// ATP: core's endpoint configuration, the estimator's interface, the socket.
    Atp(AtpOptions),
    /// NAI-TCP or NAI-MTCPk: the baseline's configuration and the receiver's bound.
    Baseline(BaselineOptions),
}

/// How to bind an endpoint: its transport and the bounds every transport shares.
#[derive(Clone, Debug)]
pub struct EndpointOptions {
    /// The transport and its own settings.
    pub transport: TransportOptions,
    /// Whether peers may connect (a server can connect out as well).
    pub server: bool,
    /// Requests from handles queued for the driver; callers wait beyond. (ATP's sends do
    /// not queue: they are admitted in the caller's task.)
    pub command_queue_len: usize,
    /// Connections established and not yet taken by [`Endpoint::accept`]; beyond, new ones
    /// are refused (closed at once).
    pub accept_queue_len: usize,
    /// Per connection: whole messages received and not yet read.
    pub message_queue_len: usize,
    /// Per connection: message bytes received and not yet read. With TCP the baselines stop
    /// reading their socket at the bound (the sender slows); ATP's receive window is at most
    /// this (see [`crate::atp`]), so its sender slows too.
    pub unread_bytes_max: u64,
    /// Per connection: events waiting for [`Connection::next_event`]; beyond, the oldest
    /// is dropped and the next read is [`ConnectionEvent::Lost`].
    pub event_queue_len: usize,
    /// How long a closing endpoint keeps running to send what its closing connections owe
    /// (ATP's CLOSEs); past it, it stops anyway.
    pub shutdown_timeout: Duration,
}

impl EndpointOptions {
    /// A client endpoint of `transport` with defaults suited to a real host.
    pub fn client(transport: Transport) -> EndpointOptions {
        let transport = match transport {
            Transport::Atp => TransportOptions::Atp(AtpOptions::default()),
            Transport::NaiTcp | Transport::NaiMtcp(_) => {
                TransportOptions::Baseline(BaselineOptions::new(transport))
            }
        };
        EndpointOptions {
            transport,
            server: false,
            command_queue_len: 1024,
            accept_queue_len: 64,
            message_queue_len: 65_536,
            unread_bytes_max: 256 << 20,
            event_queue_len: 1024,
            shutdown_timeout: Duration::from_secs(1),
        }
    }

    /// A server endpoint of `transport` (also able to connect out). A baseline server takes
    /// NAI-TCP and NAI-MTCPk clients alike.
    pub fn server(transport: Transport) -> EndpointOptions {
        EndpointOptions {
            server: true,
            ..EndpointOptions::client(transport)
        }
    }

    /// The same options with `levels` priority levels (ATP: NAI's levels; a baseline:
    /// the levels it accepts, and NAI-MTCPk's connections, one per level).
    pub fn with_levels(mut self, levels: u8) -> EndpointOptions {
        match &mut self.transport {
            TransportOptions::Atp(a) => a.core.atp.nai.levels = levels,
            TransportOptions::Baseline(b) => b.config.levels = levels,
        }
        self
    }

    /// Which transport these options run.
    pub fn transport(&self) -> Transport {
        match &self.transport {
            TransportOptions::Atp(_) => Transport::Atp,
            TransportOptions::Baseline(b) => match b.config.kind {
                BaselineKind::NaiTcp => Transport::NaiTcp,
                BaselineKind::Mtcp { high_connections } => Transport::NaiMtcp(high_connections),
            },
        }
    }
}

/// A whole message from the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The sender's message id.
    pub id: MessageId,
    /// Its priority level.
    pub priority: Priority,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// Something a connection tells the application besides messages and outcomes.
#[derive(Clone, Debug, PartialEq)]
pub enum ConnectionEvent {
    /// A callback timer expired; with `OnExpiry::Suspend` the message waits for the
    /// application to `resume`, `defer` or `cancel` it through its handle.
    TimerExpired {
        /// The message.
        id: MessageId,
        /// Expired early on the bandwidth estimate.
        early: bool,
        /// Bytes not yet acknowledged.
        bytes_remaining: u64,
    },
    /// The estimate left a registered range (the registration is consumed).
    Bandwidth {
        /// The registration.
        id: NotificationId,
        /// The estimate, message bytes per second.
        available_bytes_per_s: f64,
    },
    /// The peer abandoned a message this side had partly received.
    Discarded(MessageId),
    /// This many events were dropped, oldest first, because the application did not read
    /// them ([`EndpointOptions::event_queue_len`]).
    Lost(u64),
}

/// A connection's transport counters.
#[derive(Clone, Debug, PartialEq)]
pub enum ConnectionStats {
    /// An ATP connection's.
    Atp(AtpConnectionStats),
    /// A baseline sender's.
    Baseline(BaselineStats),
    /// A baseline receiver's: messages delivered.
    BaselineReceiver {
        /// Whole messages delivered to the application.
        delivered: u64,
    },
}

/// An endpoint's counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointStats {
    /// Connections open (or connecting).
    pub connections: usize,
    /// Connections refused because the accept queue was full or the endpoint closing.
    pub refused: u64,
    /// ATP's endpoint counters (`None` for the baselines).
    pub atp: Option<AtpEndpointStats>,
}
