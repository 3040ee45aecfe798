//! NAI/ATP over UDP: the application's side.
//!
//! One [`AtpEndpoint`] owns a UDP socket and a task that drives core's
//! [`Endpoint`](adaptnet_core::atp::endpoint::Endpoint). Handles talk to that task through a
//! bounded command channel; every handle is cheap and can be used from any task.
//!
//! * [`AtpEndpoint::connect`] / [`AtpEndpoint::accept`] give a [`Connection`]; ATP runs in
//!   both directions on it.
//! * [`Connection::send`] submits a message (priority, callback timer, what to do on expiry)
//!   and returns a [`MessageHandle`] once NAI has admitted it (a refusal is an error);
//!   [`MessageHandle::outcome`] awaits its one final [`Outcome`]; [`MessageHandle::taken`]
//!   awaits the moment ATP has taken its last byte (the paper's synchronous send, §3.1);
//!   cancel, defer, resume and priority/deadline changes are methods of the handle.
//!   [`Connection::create_queue`] and [`Connection::send_on`] give the application more
//!   message queues (§3.2).
//! * Callback-timer expiry and bandwidth-range notifications arrive as
//!   [`ConnectionEvent`]s from [`Connection::next_event`] — an async stream of events, chosen
//!   over a handler so the application decides in its own task whether to resume, defer or
//!   cancel ([`OnExpiry::Suspend`](adaptnet_core::nai::OnExpiry::Suspend)).
//! * Whole messages from the peer arrive from [`Connection::recv`].
//!
//! # Bounds
//! * commands waiting for the driver: [`EndpointOptions::command_queue`] (callers wait);
//! * connections not yet accepted: [`EndpointOptions::accept_queue`] (beyond, refused);
//! * received bytes the application has not read: [`EndpointOptions::max_unread_bytes`]
//!   per connection (beyond, the connection is closed — the application is too slow to keep
//!   it, and silently dropping a delivered message would break exactly-once);
//! * messages, queues, notifications, buffered bytes, connections: core's limits
//!   ([`EndpointConfig`]).
//!
//! Dropping the [`AtpEndpoint`] stops its task; live connections are closed at once (peers
//! see CLOSE) and their live messages end [`Outcome::Abandoned`].

mod driver;

use adaptnet_core::atp::endpoint::{ConnectionId, EndpointConfig, EndpointError};
use adaptnet_core::nai::{
    MessageId, NaiError, NotificationId, Outcome, Priority, QueueId, SendOptions,
};
use adaptnet_core::session::CloseReason;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{Mutex, mpsc, oneshot, watch};

pub use driver::EndpointStatsSnapshot;

/// Why a runtime call failed.
#[derive(Debug, Error)]
pub enum Error {
    /// A socket operation failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// NAI refused the call (admission control, a bound, an unknown message …).
    #[error(transparent)]
    Nai(#[from] NaiError),
    /// The endpoint refused the call (too many connections, already connected).
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    /// The server did not answer the handshake, or refused it.
    #[error("could not connect to {0}")]
    ConnectFailed(SocketAddr),
    /// The connection (or the endpoint) is closed.
    #[error("connection closed")]
    Closed,
}

/// Which interface's counters feed ATP's estimator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InterfaceChoice {
    /// The interface that holds the source address used to reach the first peer.
    Auto,
    /// A named interface (e.g. `eth0`).
    Named(String),
    /// None: ATP counts its own datagrams (as when the counters cannot be read).
    Off,
}

/// How to bind an endpoint.
#[derive(Clone, Debug)]
pub struct EndpointOptions {
    /// Core's endpoint configuration (ATP, handshake, liveness, bounds).
    pub core: EndpointConfig,
    /// Whether to accept connections (a random token key is drawn at bind).
    pub server: bool,
    /// Where the estimator's interface counters come from.
    pub interface: InterfaceChoice,
    /// Commands queued for the driver task before callers wait.
    pub command_queue: usize,
    /// Accepted connections waiting for [`AtpEndpoint::accept`].
    pub accept_queue: usize,
    /// Received bytes a connection holds for the application before it is closed.
    pub max_unread_bytes: u64,
    /// How often interface counters are read, at most.
    pub interface_poll: Duration,
    /// Socket receive and send buffer to ask for, bytes (see
    /// [`grow_socket_buffers`](crate::iface::grow_socket_buffers)).
    pub socket_buffer_bytes: usize,
}

impl EndpointOptions {
    /// A client endpoint with defaults suited to a real host: ATP's timer granularity set to
    /// 2 ms (an OS timer may fire that late, and pacing must not stall on it).
    pub fn client() -> EndpointOptions {
        let mut core = EndpointConfig::client();
        core.atp.timer_granularity = Duration::from_millis(2);
        EndpointOptions {
            core,
            server: false,
            interface: InterfaceChoice::Auto,
            command_queue: 1024,
            accept_queue: 64,
            max_unread_bytes: 256 << 20,
            interface_poll: Duration::from_millis(10),
            socket_buffer_bytes: 8 << 20,
        }
    }

    /// A server endpoint (also able to connect out).
    pub fn server() -> EndpointOptions {
        EndpointOptions {
            server: true,
            ..EndpointOptions::client()
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
    /// The peer cancelled a message this side had partly received.
    Discarded(MessageId),
    /// The connection ended.
    Closed(CloseReason),
}

/// A change to a live message.
#[derive(Clone, Copy, Debug)]
enum Control {
    Cancel,
    Defer,
    Resume,
    Priority(Priority),
    Deadline(Option<Duration>),
}

/// Requests from handles to the driver task.
enum Command {
    Connect {
        peer: SocketAddr,
        reply: oneshot::Sender<Result<Connection, Error>>,
    },
    Send {
        conn: ConnectionId,
        queue: QueueId,
        data: Vec<u8>,
        opts: SendOptions,
        reply: oneshot::Sender<Result<MessageHandle, Error>>,
    },
    Control {
        conn: ConnectionId,
        id: MessageId,
        op: Control,
        reply: oneshot::Sender<Result<(), Error>>,
    },
    CreateQueue {
        conn: ConnectionId,
        reply: oneshot::Sender<Result<QueueId, Error>>,
    },
    Notify {
        conn: ConnectionId,
        low: f64,
        high: f64,
        reply: oneshot::Sender<Result<NotificationId, Error>>,
    },
    Close {
        conn: ConnectionId,
        linger: Duration,
        reply: oneshot::Sender<()>,
    },
    Stats {
        reply: oneshot::Sender<EndpointStatsSnapshot>,
    },
    ConnStats {
        conn: ConnectionId,
        reply: oneshot::Sender<Result<ConnectionStats, Error>>,
    },
}

/// A connection's transport counters and rates.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionStats {
    /// SPP's counters for what this side sent.
    pub spp: adaptnet_core::spp::SppStats,
    /// Smoothed RTT, if measured.
    pub srtt: Option<Duration>,
    /// The rate ATP paces at (datagram bytes per second).
    pub pacing_bytes_per_s: f64,
    /// Packet pairs sent.
    pub packet_pairs: u64,
    /// Datagrams from the peer that did not parse.
    pub malformed: u64,
}

/// Sends a command and awaits its reply; a gone driver is [`Error::Closed`].
async fn call<T>(
    cmd: &mpsc::Sender<Command>,
    make: impl FnOnce(oneshot::Sender<T>) -> Command,
) -> Result<T, Error> {
    let (tx, rx) = oneshot::channel();
    cmd.send(make(tx)).await.map_err(|_| Error::Closed)?;
    rx.await.map_err(|_| Error::Closed)
}

/// An ATP endpoint bound to a UDP socket.
pub struct AtpEndpoint {
    cmd: mpsc::Sender<Command>,
    incoming: Mutex<mpsc::Receiver<Connection>>,
    local_addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl AtpEndpoint {
    /// Binds `addr` and starts the endpoint's task on the current tokio runtime.
    pub async fn bind(addr: SocketAddr, options: EndpointOptions) -> Result<AtpEndpoint, Error> {
        let socket = tokio::net::UdpSocket::bind(addr).await?;
        AtpEndpoint::start(socket, options)
    }

    /// Uses an already bound socket (e.g. one created inside another network namespace);
    /// it is switched to non-blocking mode. Call within a tokio runtime.
    pub fn from_std(
        socket: std::net::UdpSocket,
        options: EndpointOptions,
    ) -> Result<AtpEndpoint, Error> {
        socket.set_nonblocking(true)?;
        AtpEndpoint::start(tokio::net::UdpSocket::from_std(socket)?, options)
    }

    fn start(
        socket: tokio::net::UdpSocket,
        options: EndpointOptions,
    ) -> Result<AtpEndpoint, Error> {
        let local_addr = socket.local_addr()?;
        // GSO for the DATA core marks coalescable (never for its probes: see `udp`).
        let io = crate::udp::UdpIo::new(
            socket,
            crate::udp::UdpIoConfig {
                buffer_bytes: options.socket_buffer_bytes,
                gso: true,
                max_datagram_bytes: usize::from(options.core.atp.spp.max_datagram_bytes)
                    .max(crate::udp::MAX_DATAGRAM_BYTES),
            },
        )?;
        let (cmd_tx, cmd_rx) = mpsc::channel(options.command_queue.max(1));
        let (in_tx, in_rx) = mpsc::channel(options.accept_queue.max(1));
        let driver = driver::Driver::new(io, options, cmd_tx.clone(), in_tx);
        let task = tokio::spawn(driver.run(cmd_rx));
        Ok(AtpEndpoint {
            cmd: cmd_tx,
            incoming: Mutex::new(in_rx),
            local_addr,
            task,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Connects to `peer` (handshake with retransmissions; fails after about 30 s of
    /// silence or on refusal).
    pub async fn connect(&self, peer: SocketAddr) -> Result<Connection, Error> {
        call(&self.cmd, |reply| Command::Connect { peer, reply }).await?
    }

    /// The next incoming connection; `None` once the endpoint has stopped.
    pub async fn accept(&self) -> Option<Connection> {
        self.incoming.lock().await.recv().await
    }

    /// What the endpoint dropped or answered statelessly, and its connection count.
    pub async fn stats(&self) -> Result<EndpointStatsSnapshot, Error> {
        call(&self.cmd, |reply| Command::Stats { reply }).await
    }
}

impl Drop for AtpEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One ATP connection. Dropping it does not close it; call [`Connection::close`].
pub struct Connection {
    id: ConnectionId,
    peer: SocketAddr,
    cmd: mpsc::Sender<Command>,
    messages: mpsc::UnboundedReceiver<Message>,
    events: mpsc::UnboundedReceiver<ConnectionEvent>,
    unread: Arc<AtomicU64>,
    estimate: watch::Receiver<f64>,
}

impl Connection {
    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Submits a message to the connection's first message queue; returns once NAI admitted
    /// it. A refusal by admission control is `Err(Error::Nai(NaiError::Rejected { .. }))`.
    pub async fn send(&self, data: Vec<u8>, opts: SendOptions) -> Result<MessageHandle, Error> {
        self.send_on(QueueId(0), data, opts).await
    }

    /// Submits a message to `queue` (one from [`Connection::create_queue`], or `QueueId(0)`,
    /// the queue every connection starts with).
    pub async fn send_on(
        &self,
        queue: QueueId,
        data: Vec<u8>,
        opts: SendOptions,
    ) -> Result<MessageHandle, Error> {
        let conn = self.id;
        call(&self.cmd, |reply| Command::Send {
            conn,
            queue,
            data,
            opts,
            reply,
        })
        .await?
    }

    /// Creates another message queue (§3.2 of the paper): NAI schedules messages within a
    /// queue by priority and deadline, and shares the bandwidth among queues by the highest
    /// priority each one uses. At most `core.atp.nai.max_queues` per connection
    /// (`Err(Error::Nai(NaiError::TooManyQueues))` beyond).
    pub async fn create_queue(&self) -> Result<QueueId, Error> {
        let conn = self.id;
        call(&self.cmd, |reply| Command::CreateQueue { conn, reply }).await?
    }

    /// A synchronous send (§3.1): submits and returns once ATP has taken the whole message.
    pub async fn send_sync(
        &self,
        data: Vec<u8>,
        opts: SendOptions,
    ) -> Result<MessageHandle, Error> {
        let mut h = self.send(data, opts).await?;
        h.taken().await;
        Ok(h)
    }

    /// The next whole message from the peer; `None` once the connection has closed.
    pub async fn recv(&mut self) -> Option<Message> {
        let m = self.messages.recv().await?;
        self.unread
            .fetch_sub(m.data.len() as u64, Ordering::Relaxed);
        Some(m)
    }

    /// The next event (timer expiry, bandwidth notification, discard, close); `None` after
    /// the connection is gone.
    pub async fn next_event(&mut self) -> Option<ConnectionEvent> {
        self.events.recv().await
    }

    /// Registers a bandwidth range `[low, high]` (message bytes per second); an event comes
    /// when the estimate leaves it.
    pub async fn register_bandwidth_range(
        &self,
        low: f64,
        high: f64,
    ) -> Result<NotificationId, Error> {
        let conn = self.id;
        call(&self.cmd, |reply| Command::Notify {
            conn,
            low,
            high,
            reply,
        })
        .await?
    }

    /// The bandwidth NAI plans with now (message bytes per second).
    pub fn bandwidth(&self) -> f64 {
        *self.estimate.borrow()
    }

    /// A watch on the bandwidth NAI plans with, updated as it changes.
    pub fn bandwidth_watch(&self) -> watch::Receiver<f64> {
        self.estimate.clone()
    }

    /// This side's transport counters.
    pub async fn stats(&self) -> Result<ConnectionStats, Error> {
        let conn = self.id;
        call(&self.cmd, |reply| Command::ConnStats { conn, reply }).await?
    }

    /// Closes the connection after live messages are final or `linger` has passed, and
    /// waits until it is closed.
    pub async fn close(&self, linger: Duration) -> Result<(), Error> {
        let conn = self.id;
        call(&self.cmd, |reply| Command::Close {
            conn,
            linger,
            reply,
        })
        .await
    }
}

/// A submitted message.
pub struct MessageHandle {
    id: MessageId,
    conn: ConnectionId,
    cmd: mpsc::Sender<Command>,
    outcome: oneshot::Receiver<Outcome>,
    taken: Option<oneshot::Receiver<()>>,
}

impl MessageHandle {
    /// The message's id (as the receiver sees it).
    pub fn id(&self) -> MessageId {
        self.id
    }

    /// Waits until ATP has taken the message's last byte; `false` if it never will (it ended
    /// first: cancelled, expired, abandoned).
    pub async fn taken(&mut self) -> bool {
        match self.taken.take() {
            Some(rx) => rx.await.is_ok(),
            None => true,
        }
    }

    /// Waits for the message's one final outcome. If the endpoint stopped first, the
    /// message is [`Outcome::Abandoned`].
    pub async fn outcome(self) -> Result<Outcome, Error> {
        Ok(self.outcome.await.unwrap_or(Outcome::Abandoned))
    }

    async fn control(&self, op: Control) -> Result<(), Error> {
        let (conn, id) = (self.conn, self.id);
        call(&self.cmd, |reply| Command::Control {
            conn,
            id,
            op,
            reply,
        })
        .await?
    }

    /// Aborts the message (§3.1).
    pub async fn cancel(&self) -> Result<(), Error> {
        self.control(Control::Cancel).await
    }

    /// Suspends the message until [`MessageHandle::resume`].
    pub async fn defer(&self) -> Result<(), Error> {
        self.control(Control::Defer).await
    }

    /// Restarts a deferred or timer-suspended message (admission control applies).
    pub async fn resume(&self) -> Result<(), Error> {
        self.control(Control::Resume).await
    }

    /// Changes the message's priority.
    pub async fn set_priority(&self, priority: Priority) -> Result<(), Error> {
        self.control(Control::Priority(priority)).await
    }

    /// Sets a new callback timer, counted from now (`None`: no deadline).
    pub async fn set_timer(&self, timer: Option<Duration>) -> Result<(), Error> {
        self.control(Control::Deadline(timer)).await
    }
}
