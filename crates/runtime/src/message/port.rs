//! The driver's side of one connection, for every message transport: where delivered
//! messages, events and outcomes go, and how the connection's end reaches every handle. A
//! driver makes a [`Port`] and the application's [`Connection`] together
//! ([`Handles::open`]) and keeps only the port.

use super::command::{Command, DirectSend, Submitted};
use super::connection::ConnShared;
use super::queue::{EventQueue, Inbox};
use super::{Connection, ConnectionEvent, EndpointOptions, Message, Transport};
use crate::clock::Clock;
use crate::driver;
use crate::error::ConnectionError;
use adaptnet_core::nai::{MessageId, NaiEvent, Outcome};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// What a driver needs to give new connections their handles.
#[derive(Clone, Debug)]
pub(crate) struct Handles {
    pub(crate) cmd: mpsc::Sender<Command>,
    pub(crate) driver: Arc<driver::Shared>,
    pub(crate) transport: Transport,
    /// The endpoint's clock: the driver's time, and the send path's where it admits
    /// messages itself.
    pub(crate) clock: Clock,
    /// Where connections' sends are admitted without the command queue, if the transport
    /// can ([`DirectSend`]); set by the driver before it opens a connection.
    pub(crate) direct: Option<Arc<dyn DirectSend>>,
    message_queue_len: usize,
    unread_bytes_max: u64,
    event_queue_len: usize,
}

impl Handles {
    pub(crate) fn new(
        cmd: mpsc::Sender<Command>,
        driver: Arc<driver::Shared>,
        options: &EndpointOptions,
    ) -> Handles {
        Handles {
            cmd,
            driver,
            transport: options.transport(),
            clock: Clock::new(),
            direct: None,
            message_queue_len: options.message_queue_len,
            unread_bytes_max: options.unread_bytes_max,
            event_queue_len: options.event_queue_len,
        }
    }

    /// A new connection `id` with `peer`: the driver's port and the application's handle.
    pub(crate) fn open(&self, id: u64, peer: SocketAddr) -> (Port, Connection) {
        let inbox = Arc::new(Inbox::new(
            self.message_queue_len,
            self.unread_bytes_max,
            self.driver.clone(),
        ));
        let events = Arc::new(EventQueue::new(self.event_queue_len));
        let (estimate_tx, estimate_rx) = watch::channel(0.0);
        let (end_tx, end_rx) = watch::channel(None);
        let port = Port {
            inbox: inbox.clone(),
            events: events.clone(),
            estimate: estimate_tx,
            end: end_tx,
            pending: HashMap::new(),
            closing: None,
        };
        let conn = Connection(Arc::new(ConnShared {
            id,
            peer,
            transport: self.transport,
            cmd: self.cmd.clone(),
            direct: self.direct.clone(),
            driver: self.driver.clone(),
            inbox,
            events,
            estimate: estimate_rx,
            end: end_rx,
        }));
        (port, conn)
    }
}

/// Where a live message's outcome and "taken" moment go.
#[derive(Debug)]
struct Pending {
    outcome: oneshot::Sender<Outcome>,
    taken: Option<oneshot::Sender<()>>,
}

/// The driver's side of one connection.
#[derive(Debug)]
pub(crate) struct Port {
    inbox: Arc<Inbox>,
    events: Arc<EventQueue>,
    estimate: watch::Sender<f64>,
    end: watch::Sender<Option<ConnectionError>>,
    pending: HashMap<MessageId, Pending>,
    /// Why this side is closing, once it asked: the transport's "closed" is then this.
    closing: Option<ConnectionError>,
}

impl Port {
    /// Hands the application a whole message. A transport without receiver flow control
    /// delivers whatever core delivered; if that passes the inbox's bounds the answer is
    /// the error to close the connection with (the message itself stays readable).
    pub(crate) fn deliver(&mut self, m: Message) -> Option<ConnectionError> {
        self.inbox
            .push(m)
            .map(|s| ConnectionError::ApplicationTooSlow {
                unread_messages: s.unread_messages,
                unread_bytes: s.unread_bytes,
            })
    }

    /// Messages and bytes the application has read from this connection so far (a
    /// transport with receiver flow control returns their room to the peer).
    pub(crate) fn taken(&self) -> (u64, u64) {
        self.inbox.taken()
    }

    /// Wakes the driver once the application has read `bytes` in total.
    pub(crate) fn wake_when_taken(&self, bytes: u64) {
        self.inbox.wake_when_taken(bytes);
    }

    /// Whether the application has room for more (a transport with flow control reads its
    /// socket only then).
    pub(crate) fn has_room(&self) -> bool {
        self.inbox.has_room()
    }

    /// An event for the application.
    pub(crate) fn event(&self, ev: ConnectionEvent) {
        self.events.push(ev);
    }

    /// A message was admitted: its outcome will be told through the returned receivers.
    pub(crate) fn submitted(&mut self, id: MessageId) -> Submitted {
        let (out_tx, out_rx) = oneshot::channel();
        let (taken_tx, taken_rx) = oneshot::channel();
        self.pending.insert(
            id,
            Pending {
                outcome: out_tx,
                taken: Some(taken_tx),
            },
        );
        Submitted {
            id,
            outcome: out_rx,
            taken: taken_rx,
        }
    }

    /// One event of this side's NAI (ATP's scheduler or a baseline's sender).
    pub(crate) fn nai_event(&mut self, ev: NaiEvent) {
        match ev {
            NaiEvent::Outcome { id, outcome } => {
                if let Some(p) = self.pending.remove(&id) {
                    let _ = p.outcome.send(outcome);
                }
            }
            NaiEvent::Taken { id } => {
                if let Some(tx) = self.pending.get_mut(&id).and_then(|p| p.taken.take()) {
                    let _ = tx.send(());
                }
            }
            NaiEvent::TimerExpired {
                id,
                early,
                bytes_remaining,
            } => self.event(ConnectionEvent::TimerExpired {
                id,
                early,
                bytes_remaining,
            }),
            NaiEvent::Bandwidth {
                id,
                available_bytes_per_s,
            } => self.event(ConnectionEvent::Bandwidth {
                id,
                available_bytes_per_s,
            }),
        }
    }

    /// The bandwidth NAI plans with now (message bytes per second).
    pub(crate) fn set_estimate(&self, rate: f64) {
        self.estimate.send_if_modified(|r| {
            let changed = *r != rate;
            *r = rate;
            changed
        });
    }

    /// Records that this side is closing, and why (the first reason stays). Returns whether
    /// this is the first request.
    pub(crate) fn close_locally(&mut self, why: ConnectionError) -> bool {
        let first = self.closing.is_none();
        self.closing.get_or_insert(why);
        first
    }

    /// Why this side is closing, if it asked to.
    pub(crate) fn closing(&self) -> Option<&ConnectionError> {
        self.closing.as_ref()
    }

    /// The connection has ended: every handle learns `why` (the application keeps reading
    /// what arrived before), every message still live is `Abandoned` — the transport has
    /// reported every outcome it knows before this.
    pub(crate) fn end(&mut self, why: ConnectionError) {
        self.end.send_if_modified(|e| {
            let first = e.is_none();
            if first {
                *e = Some(why.clone());
            }
            first
        });
        self.inbox.end(why.clone());
        self.events.end(why);
        for (_, p) in self.pending.drain() {
            let _ = p.outcome.send(Outcome::Abandoned);
        }
    }
}

impl Drop for Port {
    /// A port dropped without an end (a driver gone mid-loop) still tells every handle.
    fn drop(&mut self) {
        if self.end.borrow().is_none() {
            self.end(ConnectionError::EndpointClosed);
        }
    }
}
