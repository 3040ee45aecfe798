//! A connection's two receive queues, shared by the driver (which pushes and never waits)
//! and the application's handles (which wait): whole messages ([`Inbox`], bounded in
//! messages and bytes) and events ([`EventQueue`], bounded in events). Both end with the
//! connection's [`ConnectionError`], after what they hold has been read.

use super::{ConnectionEvent, Message};
use crate::driver;
use crate::error::ConnectionError;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::Notify;

/// Items, their byte count, and the end once known.
#[derive(Debug)]
struct Slots<T> {
    items: VecDeque<T>,
    bytes: u64,
    peak_bytes: u64,
    /// Items dropped to make room since the last read (events only).
    lost: u64,
    end: Option<ConnectionError>,
}

/// A queue the driver fills and handles wait on.
#[derive(Debug)]
struct Mailbox<T> {
    slots: Mutex<Slots<T>>,
    ready: Notify,
}

impl<T> Mailbox<T> {
    fn new() -> Mailbox<T> {
        Mailbox {
            slots: Mutex::new(Slots {
                items: VecDeque::new(),
                bytes: 0,
                peak_bytes: 0,
                lost: 0,
                end: None,
            }),
            ready: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots<T>> {
        // Plain data: a panic elsewhere while holding the lock leaves it usable.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the queue (the first end wins); readers drain it, then get `why`.
    fn end(&self, why: ConnectionError) {
        self.lock().end.get_or_insert(why);
        self.ready.notify_waiters();
    }

    /// Waits until `take` finds something in the slots (an item, or the end).
    async fn wait_for<R>(
        &self,
        mut take: impl FnMut(&mut Slots<T>) -> Option<Result<R, ConnectionError>>,
    ) -> Result<R, ConnectionError> {
        loop {
            // Registered before looking, so a push between the look and the wait wakes us.
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = take(&mut self.lock()) {
                return r;
            }
            notified.await;
        }
    }
}

/// How full a connection's receive queue is ([`Connection::inbox`](super::Connection::inbox)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InboxStats {
    /// Messages received and not yet read.
    pub unread_messages: usize,
    /// Their bytes.
    pub unread_bytes: u64,
    /// The most unread bytes the connection has held at once.
    pub unread_bytes_peak: u64,
}

/// Whole messages received and not yet read, bounded by `max_messages` and `max_bytes`.
/// The driver asks [`Inbox::has_room`] before it takes more from a transport with flow
/// control (the kernel's TCP window then slows the sender); a transport without it pushes
/// what core delivered and learns from [`Inbox::push`] that the bound was passed.
#[derive(Debug)]
pub(crate) struct Inbox {
    queue: Mailbox<Message>,
    max_messages: usize,
    max_bytes: u64,
    /// Woken when a read makes room in a full inbox, or passes `wake_at_taken_bytes`.
    driver: Arc<driver::Shared>,
    /// Messages and bytes the application has read so far (a transport with receiver flow
    /// control returns their room to its peer's window).
    taken_messages: AtomicU64,
    taken_bytes: AtomicU64,
    /// The driver wants a wake-up once `taken_bytes` reaches this (`u64::MAX`: no).
    wake_at_taken_bytes: AtomicU64,
}

impl Inbox {
    pub(crate) fn new(max_messages: usize, max_bytes: u64, driver: Arc<driver::Shared>) -> Inbox {
        Inbox {
            queue: Mailbox::new(),
            max_messages: max_messages.max(1),
            max_bytes: max_bytes.max(1),
            driver,
            taken_messages: AtomicU64::new(0),
            taken_bytes: AtomicU64::new(0),
            wake_at_taken_bytes: AtomicU64::new(u64::MAX),
        }
    }

    /// Messages and bytes the application has read so far.
    pub(crate) fn taken(&self) -> (u64, u64) {
        // Bytes are added before messages, so a reader never sees a message without its
        // bytes (it may see bytes whose message it counts on the next look).
        let messages = self.taken_messages.load(Ordering::Acquire);
        let bytes = self.taken_bytes.load(Ordering::Acquire);
        (messages, bytes)
    }

    /// Asks for a driver wake-up once the application has read `bytes` in total.
    pub(crate) fn wake_when_taken(&self, bytes: u64) {
        self.wake_at_taken_bytes.store(bytes, Ordering::Release);
    }

    fn full(&self, s: &Slots<Message>) -> bool {
        s.items.len() >= self.max_messages || s.bytes >= self.max_bytes
    }

    /// Whether another message may be taken in without passing a bound.
    pub(crate) fn has_room(&self) -> bool {
        !self.full(&self.queue.lock())
    }

    /// Adds a delivered message (always: its sender was told it was delivered). Returns the
    /// inbox's figures if it is now past a bound.
    pub(crate) fn push(&self, m: Message) -> Option<InboxStats> {
        let mut s = self.queue.lock();
        s.bytes += m.data.len() as u64;
        s.peak_bytes = s.peak_bytes.max(s.bytes);
        s.items.push_back(m);
        let over = s.items.len() > self.max_messages || s.bytes > self.max_bytes;
        let stats = over.then(|| InboxStats {
            unread_messages: s.items.len(),
            unread_bytes: s.bytes,
            unread_bytes_peak: s.peak_bytes,
        });
        drop(s);
        self.queue.ready.notify_waiters();
        stats
    }

    /// No more messages will come; readers get `why` after the rest.
    pub(crate) fn end(&self, why: ConnectionError) {
        self.queue.end(why);
    }

    /// The next message, or why the connection ended once none is left.
    pub(crate) async fn recv(&self) -> Result<Message, ConnectionError> {
        let mut made_room = false;
        let r = self
            .queue
            .wait_for(|s| {
                let was_full = self.full(s);
                match s.items.pop_front() {
                    Some(m) => {
                        let len = m.data.len() as u64;
                        s.bytes -= len;
                        let taken = self.taken_bytes.fetch_add(len, Ordering::AcqRel) + len;
                        self.taken_messages.fetch_add(1, Ordering::AcqRel);
                        let due = self.wake_at_taken_bytes.load(Ordering::Acquire);
                        if taken >= due {
                            self.wake_at_taken_bytes.store(u64::MAX, Ordering::Release);
                            made_room = true;
                        }
                        made_room |= was_full && !self.full(s);
                        Some(Ok(m))
                    }
                    None => s.end.clone().map(Err),
                }
            })
            .await;
        if made_room {
            self.driver.wake();
        }
        r
    }

    /// How full it is.
    pub(crate) fn stats(&self) -> InboxStats {
        let s = self.queue.lock();
        InboxStats {
            unread_messages: s.items.len(),
            unread_bytes: s.bytes,
            unread_bytes_peak: s.peak_bytes,
        }
    }
}

/// Events for the application, at most `max_events`: a full queue drops its oldest event,
/// and the next read returns [`ConnectionEvent::Lost`] with how many were dropped (the
/// driver never waits on an application that does not read its events).
#[derive(Debug)]
pub(crate) struct EventQueue {
    queue: Mailbox<ConnectionEvent>,
    max_events: usize,
}

impl EventQueue {
    pub(crate) fn new(max_events: usize) -> EventQueue {
        EventQueue {
            queue: Mailbox::new(),
            max_events: max_events.max(1),
        }
    }

    /// Adds an event, dropping the oldest if the queue is full.
    pub(crate) fn push(&self, ev: ConnectionEvent) {
        let mut s = self.queue.lock();
        if s.items.len() >= self.max_events {
            s.items.pop_front();
            s.lost += 1;
        }
        s.items.push_back(ev);
        drop(s);
        self.queue.ready.notify_waiters();
    }

    /// No more events will come.
    pub(crate) fn end(&self, why: ConnectionError) {
        self.queue.end(why);
    }

    /// The next event (a [`ConnectionEvent::Lost`] first if some were dropped), or why the
    /// connection ended once none is left.
    pub(crate) async fn recv(&self) -> Result<ConnectionEvent, ConnectionError> {
        self.queue
            .wait_for(|s| {
                if s.lost > 0 {
                    return Some(Ok(ConnectionEvent::Lost(std::mem::take(&mut s.lost))));
                }
                match s.items.pop_front() {
                    Some(ev) => Some(Ok(ev)),
                    None => s.end.clone().map(Err),
                }
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adaptnet_core::nai::{MessageId, Priority};

    fn message(id: u64, len: usize) -> Message {
        Message {
            id: MessageId(id),
            priority: Priority(0),
            data: vec![0; len],
        }
    }

    #[tokio::test]
    async fn inbox_reports_a_passed_bound_keeps_every_message_then_ends() {
        let inbox = Inbox::new(2, 100, driver::Shared::new());
        assert!(inbox.push(message(0, 60)).is_none());
        assert!(inbox.has_room());
        let over = inbox.push(message(1, 60)).expect("past the byte bound");
        assert_eq!((over.unread_messages, over.unread_bytes), (2, 120));
        assert!(!inbox.has_room());
        inbox.end(ConnectionError::Reset);
        assert_eq!(inbox.recv().await.expect("kept").id, MessageId(0));
        assert!(inbox.has_room());
        assert_eq!(inbox.recv().await.expect("kept").id, MessageId(1));
        assert!(matches!(inbox.recv().await, Err(ConnectionError::Reset)));
        assert_eq!(inbox.stats().unread_bytes_peak, 120);
    }

    #[tokio::test]
    async fn a_full_event_queue_drops_the_oldest_and_says_how_many() {
        let events = EventQueue::new(2);
        for i in 0..5 {
            events.push(ConnectionEvent::Discarded(MessageId(i)));
        }
        assert!(matches!(events.recv().await, Ok(ConnectionEvent::Lost(3))));
        assert!(matches!(
            events.recv().await,
            Ok(ConnectionEvent::Discarded(MessageId(3)))
        ));
        assert!(matches!(
            events.recv().await,
            Ok(ConnectionEvent::Discarded(MessageId(4)))
        ));
        events.end(ConnectionError::LocallyClosed);
        assert!(matches!(
            events.recv().await,
            Err(ConnectionError::LocallyClosed)
        ));
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_on_push_and_on_end() {
        let inbox = Arc::new(Inbox::new(8, 1 << 20, driver::Shared::new()));
        let reader = {
            let inbox = inbox.clone();
            tokio::spawn(async move { (inbox.recv().await, inbox.recv().await) })
        };
        tokio::task::yield_now().await;
        inbox.push(message(7, 3));
        inbox.end(ConnectionError::TimedOut);
        let (first, second) = reader.await.expect("reader");
        assert_eq!(first.expect("message").id, MessageId(7));
        assert!(matches!(second, Err(ConnectionError::TimedOut)));
    }
}
