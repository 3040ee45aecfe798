//! The application's handles: [`Connection`] (cheap to clone; the last one dropped closes
//! the connection) and [`MessageHandle`] (one per submitted message, with its one outcome).

use super::command::{Command, ConnOp, Control, DirectSend, Submitted};
use super::queue::{EventQueue, Inbox, InboxStats};
use super::{ConnectionEvent, ConnectionStats, Message, Transport};
use crate::driver;
use crate::error::{ConnectionError, SendError};
use adaptnet_core::nai::{MessageId, NotificationId, Outcome, Priority, QueueId, SendOptions};
use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// What every handle of one connection shares.
#[derive(Debug)]
pub(crate) struct ConnShared {
    pub(crate) id: u64,
    pub(crate) peer: SocketAddr,
    pub(crate) transport: Transport,
    pub(crate) cmd: mpsc::Sender<Command>,
    /// Where sends are admitted without the command queue, if the transport can.
    pub(crate) direct: Option<Arc<dyn DirectSend>>,
    pub(crate) driver: Arc<driver::Shared>,
    pub(crate) inbox: Arc<Inbox>,
    pub(crate) events: Arc<EventQueue>,
    pub(crate) estimate: watch::Receiver<f64>,
    pub(crate) end: watch::Receiver<Option<ConnectionError>>,
}

impl Drop for ConnShared {
    /// The last handle is gone: the driver closes the connection (its peer is told).
    fn drop(&mut self) {
        if self.end.borrow().is_none() {
            self.driver.dropped(self.id);
        }
    }
}

/// One connection of a message transport (ATP, NAI-TCP or NAI-MTCPk): send messages with
/// priorities and callback timers, each with one outcome; receive whole messages; events.
/// Clones share the connection. Dropping the last clone (and the last [`MessageHandle`] of
/// it) closes the connection at once — the peer is told, live messages end `Abandoned`;
/// [`Connection::close`] closes it gracefully.
#[derive(Clone, Debug)]
pub struct Connection(pub(crate) Arc<ConnShared>);

impl Connection {
    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.0.peer
    }

    /// The transport the connection runs.
    pub fn transport(&self) -> Transport {
        self.0.transport
    }

    /// Why the connection has ended, or `None` while it is open.
    pub fn close_reason(&self) -> Option<ConnectionError> {
        self.0.end.borrow().clone()
    }

    /// The error for a request the driver dropped: the connection's end, or the endpoint's.
    fn lost(&self) -> ConnectionError {
        self.close_reason()
            .unwrap_or(ConnectionError::EndpointClosed)
    }

    /// Sends `op` and awaits its reply; a request the driver dropped is the connection's end.
    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> ConnOp,
    ) -> Result<T, ConnectionError> {
        if let Some(e) = self.close_reason() {
            return Err(e);
        }
        let (tx, rx) = oneshot::channel();
        let command = Command::Conn {
            id: self.0.id,
            op: make(tx),
        };
        self.0.cmd.send(command).await.map_err(|_| self.lost())?;
        rx.await.map_err(|_| self.lost())
    }

    /// Submits a message to the connection's first message queue; returns once the
    /// transport admitted it. A refusal by ATP's admission control is
    /// `Err(SendError::Nai(NaiError::Rejected { .. }))` (the message has an id and an outcome,
    /// `Rejected`, all the same); a baseline holding `max_buffered_bytes` refuses with
    /// `NaiError::BufferFull`.
    ///
    /// `data` is anything that becomes [`Bytes`] without a copy: a `Vec<u8>`, or a `Bytes`
    /// the application keeps a handle to (one buffer sent many times, or slices of one large
    /// one). The transport holds it until the message's outcome and never copies it whole.
    pub async fn send(
        &self,
        data: impl Into<Bytes>,
        opts: SendOptions,
    ) -> Result<MessageHandle, SendError> {
        self.send_on(QueueId(0), data, opts).await
    }

    /// Submits a message to `queue` (one from [`Connection::create_queue`], or `QueueId(0)`,
    /// the queue every connection starts with).
    pub async fn send_on(
        &self,
        queue: QueueId,
        data: impl Into<Bytes>,
        opts: SendOptions,
    ) -> Result<MessageHandle, SendError> {
        let data = data.into();
        let s: Submitted = match &self.0.direct {
            Some(direct) => {
                // Admitted at once, so a loop of sends would otherwise never give its thread
                // back: yield here when the task's scheduling budget is spent.
                tokio::task::coop::consume_budget().await;
                if let Some(e) = self.close_reason() {
                    return Err(e.into());
                }
                direct
                    .send(self.0.id, queue, data, opts)
                    .ok_or_else(|| self.lost())??
            }
            None => {
                self.call(|reply| ConnOp::Send {
                    queue,
                    data,
                    opts,
                    reply,
                })
                .await??
            }
        };
        Ok(MessageHandle {
            id: s.id,
            conn: self.clone(),
            outcome: s.outcome,
            taken: Some(s.taken),
        })
    }

    /// A synchronous send (papers/000 §3.1): submits, and returns once the transport has
    /// taken the message's last byte (or the message ended first).
    pub async fn send_sync(
        &self,
        data: impl Into<Bytes>,
        opts: SendOptions,
    ) -> Result<MessageHandle, SendError> {
        let mut h = self.send(data, opts).await?;
        h.taken().await;
        Ok(h)
    }

    /// Creates another message queue (papers/000 §3.2): NAI schedules messages within a
    /// queue by priority and deadline and shares the bandwidth among queues by the highest
    /// priority each one uses. ATP only; at most `core.atp.nai.max_queues` per connection.
    pub async fn create_queue(&self) -> Result<QueueId, SendError> {
        self.call(|reply| ConnOp::CreateQueue { reply }).await?
    }

    /// Registers a bandwidth range `[low, high]` (message bytes per second); a
    /// [`ConnectionEvent::Bandwidth`] comes when the estimate leaves it. ATP only (the
    /// baselines have no estimator).
    pub async fn register_bandwidth_range(
        &self,
        low: f64,
        high: f64,
    ) -> Result<NotificationId, SendError> {
        self.call(|reply| ConnOp::RegisterBandwidthRange { low, high, reply })
            .await?
    }

    /// The next whole message from the peer; once the connection has ended and every message
    /// that arrived before was read, why it ended.
    pub async fn recv(&self) -> Result<Message, ConnectionError> {
        self.0.inbox.recv().await
    }

    /// The next event (timer expiry, bandwidth notification, discard, lost events); once the
    /// connection has ended and every event was read, why it ended.
    pub async fn next_event(&self) -> Result<ConnectionEvent, ConnectionError> {
        self.0.events.recv().await
    }

    /// How many received messages and bytes wait for [`Connection::recv`].
    pub fn inbox(&self) -> InboxStats {
        self.0.inbox.stats()
    }

    /// The bandwidth NAI plans with now (message bytes per second; the baselines have no
    /// estimator: 0).
    pub fn bandwidth(&self) -> f64 {
        *self.0.estimate.borrow()
    }

    /// A watch on the bandwidth NAI plans with, updated as it changes.
    pub fn bandwidth_watch(&self) -> watch::Receiver<f64> {
        self.0.estimate.clone()
    }

    /// This side's transport counters.
    pub async fn stats(&self) -> Result<ConnectionStats, ConnectionError> {
        self.call(|reply| ConnOp::Stats { reply }).await
    }

    /// Closes the connection once every live message of this side is final or `linger` has
    /// passed (live ones are then `Abandoned`), tells the peer, and returns once it is
    /// closed.
    pub async fn close(&self, linger: Duration) {
        if self.close_reason().is_none() {
            let command = Command::Conn {
                id: self.0.id,
                op: ConnOp::Close { linger },
            };
            // A driver gone has ended the connection already.
            let _ = self.0.cmd.send(command).await;
        }
        self.closed().await;
    }

    /// Waits until the connection has ended; why.
    pub async fn closed(&self) -> ConnectionError {
        let mut end = self.0.end.clone();
        match end.wait_for(Option::is_some).await {
            Ok(e) => e.clone().unwrap_or(ConnectionError::EndpointClosed),
            // The driver's side is gone without an end: the endpoint stopped.
            Err(_) => ConnectionError::EndpointClosed,
        }
    }
}

/// A submitted message: its id, its one outcome, and changes to it while it is live. It
/// keeps its connection open, as a [`Connection`] handle does.
#[derive(Debug)]
pub struct MessageHandle {
    id: MessageId,
    conn: Connection,
    outcome: oneshot::Receiver<Outcome>,
    taken: Option<oneshot::Receiver<()>>,
}

impl MessageHandle {
    /// The message's id (as the receiver sees it).
    pub fn id(&self) -> MessageId {
        self.id
    }

    /// Waits until the transport has taken the message's last byte; `false` if it never will
    /// (the message ended first, or the transport does not say: the baselines).
    pub async fn taken(&mut self) -> bool {
        match self.taken.take() {
            Some(rx) => rx.await.is_ok(),
            None => true,
        }
    }

    /// Waits for the message's one final outcome: `Delivered`, `Expired`, `Cancelled`,
    /// `Rejected`, or `Abandoned` when the connection ended first.
    pub async fn outcome(self) -> Outcome {
        self.outcome.await.unwrap_or(Outcome::Abandoned)
    }

    async fn control(&self, op: Control) -> Result<(), SendError> {
        let id = self.id;
        self.conn
            .call(|reply| ConnOp::Control { id, op, reply })
            .await?
    }

    /// Aborts the message (papers/000 §3.1). ATP only: the baselines' sends are irrevocable.
    pub async fn cancel(&self) -> Result<(), SendError> {
        self.control(Control::Cancel).await
    }

    /// Suspends the message until [`MessageHandle::resume`]. ATP only.
    pub async fn defer(&self) -> Result<(), SendError> {
        self.control(Control::Defer).await
    }

    /// Restarts a deferred or timer-suspended message (admission control applies). ATP only.
    pub async fn resume(&self) -> Result<(), SendError> {
        self.control(Control::Resume).await
    }

    /// Changes the message's priority. ATP only.
    pub async fn set_priority(&self, priority: Priority) -> Result<(), SendError> {
        self.control(Control::Priority(priority)).await
    }

    /// Sets a new callback timer, counted from now (`None`: no deadline). ATP only.
    pub async fn set_timer(&self, timer: Option<Duration>) -> Result<(), SendError> {
        self.control(Control::Timer(timer)).await
    }
}
