//! The NAI scheduler: message queues, priorities (strict or lending slack), EDF, admission,
//! timers, outcomes.
//!
//! # Calling pattern
//!
//! ```text
//! application calls: submit / cancel / defer / resume / set_priority / set_deadline / …
//! transport:  set_rate(now, estimate)                      // each estimator update (1 Hz)
//!             while let Some(c) = next_chunk(now, max, ok) { transmit c }   // as pacing allows
//!             handle_acked / handle_lost / resolve_cancel           // as the peer answers
//!             while let Some(n) = poll_transmit() { tell the receiver to discard n }
//! timers:     handle_timeout(now) when poll_timeout() has passed (callback timers)
//! events:     drain poll_event() after every call
//! ```
//!
//! Every mutation of a message goes through `detach` (out of the service order and the timer
//! index), the change, then `attach`, so the indexes always match the messages.

use super::admission::{self, Entry, OrderKey};
use super::message::*;
use super::notify::Notifier;
use super::ranges::RangeSet;
use super::{MAX_LEVELS, NaiConfig, NaiError, ServiceOrder};
use crate::time::Time;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

#[path = "lifecycle.rs"]
mod lifecycle;

/// One live message.
#[derive(Debug)]
struct Message {
    queue: usize,
    priority: u8,
    size: u64,
    /// Deadline the scheduler plans with and the timer watches (`None`: infinite).
    deadline: Option<Time>,
    /// Last deadline assigned, kept after expiry to report the delivery margin.
    report_deadline: Option<Time>,
    on_expiry: OnExpiry,
    state: MessageState,
    /// The outcome to report once a pending discard is confirmed.
    discard_as: Outcome,
    seq: u64,
    /// First byte never transmitted.
    next_offset: u64,
    /// Transmitted bytes reported lost and not acknowledged since: to send again.
    retx: RangeSet,
    acked: RangeSet,
    wire_seq: Option<u64>,
    /// Where `attach` put it, for `detach`.
    in_order: Option<OrderKey>,
    timer: Option<Time>,
}

impl Message {
    fn unsent(&self) -> u64 {
        self.size - self.next_offset + self.retx.len()
    }

    fn key(&self) -> OrderKey {
        (self.priority, self.deadline.unwrap_or(Time::MAX), self.seq)
    }
}

/// One message queue (§3.2).
#[derive(Debug, Default)]
struct Queue {
    /// Scheduled messages with bytes to send, in service order.
    order: BTreeMap<OrderKey, Entry>,
    level_unsent: [u64; MAX_LEVELS as usize],
    level_count: [u32; MAX_LEVELS as usize],
    /// Stride-scheduling pass: bytes served divided by weight.
    pass: f64,
    /// Under [`ServiceOrder::Slack`]: the message served before more important ones, if any
    /// (`admission::slack_first`).
    ahead: Option<OrderKey>,
    /// Whether `ahead` must be worked out again: the order changed, a message's unsent bytes
    /// grew, or the rate changed since it was.
    ahead_stale: bool,
}

impl Queue {
    fn top_level(&self) -> Option<u8> {
        self.level_count
            .iter()
            .position(|&n| n > 0)
            .and_then(|l| u8::try_from(l).ok())
    }
}

/// The NAI scheduler. See the module docs for what the application gets.
///
/// # The transport's side, and the call order
///
/// A transport (ATP over SPP, ATP over TCP, or your own) drives the scheduler thus, after
/// every input and at every timer:
///
/// 1. `set_rate(now, bytes_per_s)` whenever its bandwidth estimate changes (what admission
///    control, early expiry and queue shares plan with);
/// 2. `next_chunk_at(now, max_len, can_start_new)` while it may send: each [`Chunk`] is a
///    piece of one message to transmit now (retransmissions first); `can_start_new = false`
///    restricts it to messages the receiver already knows;
/// 3. for what the receiver reports: `handle_acked(now, id, offset, len)` (returns true when the
///    message is complete) and `handle_lost(now, id, offset, len)` (the bytes are sent again);
/// 4. `poll_transmit()` until `None`: the scheduler's own output to the wire (data leaves
///    through `next_chunk_at`, which the transport pulls at its own pace): each
///    [`DiscardNotice`] must reach the receiver, and its answer comes back through
///    `resolve_cancel(now, id, delivered)`;
/// 5. `handle_timeout(now)` when `poll_timeout()` has passed (callback timers);
/// 6. `poll_event()` until `None`, for the application.
///
/// A rejected `submit` is reported once to the caller, as `Err(NaiError::Rejected)`, and once
/// as the message's [`NaiEvent::Outcome`] (`Outcome::Rejected`): the error answers the call,
/// the event keeps the rule "exactly one outcome per message" for code that only reads events
/// (a ledger, an engine turning outcomes into futures). Act on one of them, not both.
///
/// ```
/// use adaptnet_core::Time;
/// use adaptnet_core::nai::{NaiConfig, NaiEvent, Outcome, Priority, QueueId, Scheduler, SendOptions};
/// use std::time::Duration;
///
/// let mut s = Scheduler::new(NaiConfig::default());
/// s.set_rate(Time::ZERO, 100_000.0); // the transport's estimate: 100 kB/s
/// let opts = SendOptions {
///     priority: Priority::HIGH,
///     timer: Some(Duration::from_secs(1)),
///     ..SendOptions::default()
/// };
/// let id = s.submit(Time::ZERO, QueueId(0), 3000, opts)?;
/// // The transport sends what the scheduler hands it, 1000 bytes per packet...
/// let mut now = Time::ZERO;
/// while let Some(c) = s.next_chunk_at(now, 1000, true) {
///     // ...and the receiver acknowledges each piece 50 ms later.
///     now = now + Duration::from_millis(50);
///     s.handle_acked(now, c.id, c.offset, u64::from(c.len));
/// }
/// while let Some(n) = s.poll_transmit() {
///     let _ = n; // announce discards to the receiver (none here)
/// }
/// if s.poll_timeout().is_some_and(|t| t <= now) {
///     s.handle_timeout(now);
/// }
/// let events: Vec<NaiEvent> = std::iter::from_fn(|| s.poll_event()).collect();
/// assert!(events.contains(&NaiEvent::Taken { id }));
/// assert!(events.iter().any(|e| matches!(
///     e,
///     NaiEvent::Outcome { id: done, outcome: Outcome::Delivered { .. } } if *done == id
/// )));
/// # Ok::<(), adaptnet_core::nai::NaiError>(())
/// ```
#[derive(Debug)]
pub struct Scheduler {
    config: NaiConfig,
    rate_bytes_per_s: f64,
    rate_known: bool,
    messages: BTreeMap<MessageId, Message>,
    queues: Vec<Queue>,
    /// Sum of the weights of queues that have bytes to send.
    weight_sum: u64,
    timers: BTreeSet<(Time, MessageId)>,
    next_id: u64,
    next_seq: u64,
    next_wire_seq: u64,
    vtime: f64,
    events: VecDeque<NaiEvent>,
    notices: VecDeque<DiscardNotice>,
    notifier: Notifier,
}

impl Scheduler {
    /// A scheduler with the default queue ([`QueueId`] 0) and a zero bandwidth estimate.
    pub fn new(mut config: NaiConfig) -> Scheduler {
        config.levels = config.levels.clamp(1, MAX_LEVELS);
        // Message lengths travel in 32-bit wire fields (SPP, ATP over TCP): a larger limit
        // would admit messages whose length the framing cannot carry.
        config.max_message_bytes = config.max_message_bytes.min(u64::from(u32::MAX));
        config.max_queues = config.max_queues.max(1);
        config.lend_at_percent = config.lend_at_percent.clamp(1, 100);
        let notifier = Notifier::new(config.max_notifications);
        Scheduler {
            config,
            rate_bytes_per_s: 0.0,
            rate_known: false,
            messages: BTreeMap::new(),
            queues: vec![Queue::default()],
            weight_sum: 0,
            timers: BTreeSet::new(),
            next_id: 0,
            next_seq: 0,
            next_wire_seq: 0,
            vtime: 0.0,
            events: VecDeque::new(),
            notices: VecDeque::new(),
            notifier,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &NaiConfig {
        &self.config
    }

    /// Creates another message queue (§3.2).
    pub fn create_queue(&mut self) -> Result<QueueId, NaiError> {
        if self.queues.len() >= self.config.max_queues {
            return Err(NaiError::TooManyQueues);
        }
        self.queues.push(Queue {
            pass: self.vtime,
            ..Queue::default()
        });
        Ok(QueueId(crate::convert::usize_u32_sat(
            self.queues.len() - 1,
        )))
    }

    /// Number of queues.
    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    // ----- application calls -----

    /// Submits a message of `size_bytes` to `queue`. On admission failure the id is still
    /// allocated, an [`Outcome::Rejected`] event is queued, and `Err(Rejected)` is returned.
    pub fn submit(
        &mut self,
        now: Time,
        queue: QueueId,
        size_bytes: u64,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        let q = self.queue_index(queue)?;
        self.check_priority(opts.priority)?;
        if size_bytes == 0 {
            return Err(NaiError::EmptyMessage);
        }
        if size_bytes > self.config.max_message_bytes {
            return Err(NaiError::TooLarge {
                bytes: size_bytes,
                max: self.config.max_message_bytes,
            });
        }
        let id = MessageId(self.next_id);
        self.next_id += 1;
        let deadline = opts
            .timer
            .map(|t| now.saturating_add(t))
            .filter(|d| *d != Time::MAX);
        let seq = self.next_seq;
        self.next_seq += 1;
        let key = (opts.priority.0, deadline.unwrap_or(Time::MAX), seq);
        let verdict = if self.messages.len() >= self.config.max_messages {
            Err(RejectReason::Capacity)
        } else if !self.rate_known {
            // No estimate yet (a transport measures with a packet pair first): admission
            // control has nothing to plan with, so the message is held, not refused. The first
            // `set_rate` checks it like every scheduled message, and one that cannot make its
            // deadline then expires early (§3.3).
            Ok(())
        } else {
            self.admissible(now, q, key, size_bytes)
        };
        if let Err(reason) = verdict {
            self.events.push_back(NaiEvent::Outcome {
                id,
                outcome: Outcome::Rejected(reason),
            });
            return Err(NaiError::Rejected { id, reason });
        }
        self.messages.insert(
            id,
            Message {
                queue: q,
                priority: opts.priority.0,
                size: size_bytes,
                deadline,
                report_deadline: deadline,
                on_expiry: opts.on_expiry,
                state: MessageState::Scheduled,
                discard_as: Outcome::Cancelled,
                seq,
                next_offset: 0,
                retx: RangeSet::new(),
                acked: RangeSet::new(),
                wire_seq: None,
                in_order: None,
                timer: None,
            },
        );
        self.attach(id);
        Ok(id)
    }

    /// Aborts a message. Its outcome is [`Outcome::Cancelled`] — or [`Outcome::Expired`] if it
    /// was suspended by its timer — reported at once when some byte was never sent, otherwise
    /// once the receiver confirms it had not delivered it (if it had, the outcome is
    /// `Delivered`).
    pub fn cancel(&mut self, now: Time, id: MessageId) -> Result<(), NaiError> {
        let m = self.get(id)?;
        let kind = match m.state {
            MessageState::Cancelling => {
                return Err(NaiError::InvalidState { id, state: m.state });
            }
            MessageState::Expired { early } => Outcome::Expired { early },
            MessageState::Scheduled | MessageState::Deferred => Outcome::Cancelled,
        };
        self.discard(now, id, kind);
        Ok(())
    }

    /// Suspends a scheduled (or timer-suspended) message; its callback timer keeps running.
    /// Acknowledged bytes stay acknowledged; a later [`resume`](Self::resume) sends only the rest.
    pub fn defer(&mut self, _now: Time, id: MessageId) -> Result<(), NaiError> {
        let state = self.get(id)?.state;
        match state {
            MessageState::Scheduled | MessageState::Expired { .. } => {
                self.detach(id);
                if let Some(m) = self.messages.get_mut(&id) {
                    m.state = MessageState::Deferred;
                }
                self.attach(id);
                Ok(())
            }
            _ => Err(NaiError::InvalidState { id, state }),
        }
    }

    /// Restarts a deferred message, or continues one suspended by its timer (which then has no
    /// deadline). Subject to admission control; on refusal the message stays suspended.
    pub fn resume(&mut self, now: Time, id: MessageId) -> Result<(), NaiError> {
        let state = self.get(id)?.state;
        let clear_deadline = match state {
            MessageState::Deferred => false,
            MessageState::Expired { .. } => true,
            _ => return Err(NaiError::InvalidState { id, state }),
        };
        self.change(now, id, |m| {
            if clear_deadline {
                m.deadline = None;
            }
            m.state = MessageState::Scheduled;
        })
    }

    /// Moves a live message to another priority level (admission-checked if scheduled).
    pub fn set_priority(
        &mut self,
        now: Time,
        id: MessageId,
        priority: Priority,
    ) -> Result<(), NaiError> {
        self.check_priority(priority)?;
        self.change(now, id, |m| m.priority = priority.0)
    }

    /// Gives a live message a new absolute deadline, or none (admission-checked if scheduled).
    pub fn set_deadline(
        &mut self,
        now: Time,
        id: MessageId,
        deadline: Option<Time>,
    ) -> Result<(), NaiError> {
        let deadline = deadline.filter(|d| *d != Time::MAX);
        self.change(now, id, |m| {
            m.deadline = deadline;
            if deadline.is_some() {
                m.report_deadline = deadline;
            }
        })
    }

    /// The state of a live message.
    pub fn state(&self, id: MessageId) -> Result<MessageState, NaiError> {
        Ok(self.get(id)?.state)
    }

    /// Bytes of a live message not yet acknowledged by the receiver.
    pub fn bytes_remaining(&self, id: MessageId) -> Result<u64, NaiError> {
        let m = self.get(id)?;
        Ok(m.size - m.acked.len())
    }

    /// Registers a bandwidth range; a [`NaiEvent::Bandwidth`] fires once when the estimate
    /// leaves it (at once, if it is already outside and an estimate exists).
    pub fn register_bandwidth_range(
        &mut self,
        low_bytes_per_s: f64,
        high_bytes_per_s: f64,
    ) -> Result<NotificationId, NaiError> {
        if low_bytes_per_s.is_nan()
            || high_bytes_per_s.is_nan()
            || low_bytes_per_s < 0.0
            || low_bytes_per_s > high_bytes_per_s
        {
            return Err(NaiError::BadRange);
        }
        let id = self
            .notifier
            .register(low_bytes_per_s, high_bytes_per_s)
            .ok_or(NaiError::TooManyNotifications)?;
        if self.rate_known {
            self.fire_notifications();
        }
        Ok(id)
    }

    /// Withdraws a registration; `false` if it had already fired or never existed.
    pub fn unregister_bandwidth_range(&mut self, id: NotificationId) -> bool {
        self.notifier.unregister(id)
    }

    // ----- bandwidth source -----

    /// Sets the bandwidth the scheduler plans with (ATP: the estimator's `available`; an oracle:
    /// the true rate). Fires bandwidth notifications and expires early every scheduled message
    /// that can no longer make its deadline (§3.3).
    pub fn set_rate(&mut self, now: Time, rate_bytes_per_s: f64) {
        self.rate_bytes_per_s = if rate_bytes_per_s.is_finite() && rate_bytes_per_s > 0.0 {
            rate_bytes_per_s
        } else if rate_bytes_per_s == f64::INFINITY {
            f64::MAX
        } else {
            0.0
        };
        self.rate_known = true;
        self.fire_notifications();
        let service = self.config.service;
        for q in 0..self.queues.len() {
            let rate = self.queue_rate(q, None);
            let Some(queue) = self.queues.get_mut(q) else {
                return;
            };
            queue.ahead_stale = true;
            for id in admission::undeliverable(&queue.order, rate, now, service) {
                self.expire(now, id, true);
            }
        }
    }

    /// Works out again which message each queue whose order or rate changed serves before
    /// more important ones ([`ServiceOrder::Slack`]).
    fn refresh_ahead(&mut self, now: Time) {
        if self.config.service != ServiceOrder::Slack {
            return;
        }
        for q in 0..self.queues.len() {
            if !self.queues.get(q).is_some_and(|queue| queue.ahead_stale) {
                continue;
            }
            let rate = self.queue_rate(q, None);
            let known = self.rate_known;
            let lend_at = f64::from(self.config.lend_at_percent) / 100.0;
            let Some(queue) = self.queues.get_mut(q) else {
                return;
            };
            // With no estimate yet nothing can be judged: strict order until there is one.
            queue.ahead = if known {
                admission::slack_first(&queue.order, &queue.level_unsent, rate, lend_at, now)
            } else {
                None
            };
            queue.ahead_stale = false;
        }
    }

    /// The transport cannot tell what rate the path will carry: it is in an outage, nothing
    /// is acknowledged, and its estimate is a guess that only decays. Until the next
    /// [`set_rate`](Self::set_rate) messages are held rather than refused, and none expires
    /// early, as before the first estimate: a message with a timer longer than the outage
    /// can still make it when the path returns, and the estimate during the outage is no
    /// evidence either way. Callback timers keep running, so a message that cannot make it
    /// ends `Expired` at its deadline. Bandwidth notifications see a rate of 0.
    pub fn set_rate_unknown(&mut self) {
        self.rate_bytes_per_s = 0.0;
        self.rate_known = false;
        self.fire_notifications();
        for q in &mut self.queues {
            q.ahead_stale = true;
        }
    }

    /// The bandwidth the scheduler plans with.
    pub fn rate_bytes_per_s(&self) -> f64 {
        self.rate_bytes_per_s
    }

    // ----- transport calls -----

    /// Whether any scheduled message has bytes to send.
    pub fn has_sendable(&self) -> bool {
        self.weight_sum > 0
    }

    /// Unsent bytes of all scheduled messages.
    pub fn sendable_bytes(&self) -> u64 {
        self.queues.iter().flat_map(|q| q.level_unsent.iter()).sum()
    }

    /// The next piece to transmit, at most `max_len` bytes: the queue furthest behind its
    /// share (stride scheduling), then the first message of that queue in service order;
    /// retransmissions of a message before its new bytes. With `can_start_new` false, only
    /// messages the transport already knows (that have a `wire_seq`) are considered.
    pub fn next_chunk(&mut self, max_len: u32, can_start_new: bool) -> Option<Chunk> {
        if max_len == 0 {
            return None;
        }
        let (pass, qi, id) = self.select(can_start_new.then_some(u64::MAX))?;
        self.dispatch(pass, qi, id, max_len)
    }

    /// Whether [`next_chunk_within`](Self::next_chunk_within) with `new_max_len` has
    /// something to serve (a sender blocked by the window must not arm a pacing timer).
    pub fn has_sendable_within(&self, new_max_len: Option<u64>) -> bool {
        self.has_sendable() && self.select(new_max_len).is_some()
    }

    /// [`next_chunk`](Self::next_chunk), with early expiry checked where it costs O(1): if the
    /// message about to be served cannot be delivered by its deadline even at its queue's
    /// whole share from `now` (§3.3: "it can also expire early, if the bandwidth estimate
    /// indicates that the message cannot be delivered in time"), it expires early instead of
    /// wasting bandwidth until the next rate update, and the next one is considered.
    pub fn next_chunk_at(&mut self, now: Time, max_len: u32, can_start_new: bool) -> Option<Chunk> {
        self.next_chunk_within(now, max_len, can_start_new.then_some(u64::MAX))
    }

    /// [`next_chunk_at`](Self::next_chunk_at) under receiver flow control: a message not yet
    /// started is served only if it is at most `new_max_len` bytes (`None`: none may start).
    /// A queue whose next message does not fit serves its first started message instead; a
    /// later, smaller message does not overtake it (it would take the room the more important
    /// one waits for).
    pub fn next_chunk_within(
        &mut self,
        now: Time,
        max_len: u32,
        new_max_len: Option<u64>,
    ) -> Option<Chunk> {
        if max_len == 0 {
            return None;
        }
        loop {
            self.refresh_ahead(now);
            let (pass, qi, id) = self.select(new_max_len)?;
            // No estimate yet: nothing says the message cannot make it (it is checked at the
            // first `set_rate`), so it is sent.
            let late = self.rate_known
                && self.messages.get(&id).is_some_and(|m| match m.deadline {
                    Some(d) if d > now => {
                        m.unsent() as f64 > self.queue_rate(qi, None) * (d - now).as_secs_f64()
                    }
                    _ => false,
                });
            if !late {
                return self.dispatch(pass, qi, id, max_len);
            }
            self.expire(now, id, true);
        }
    }

    /// The queue furthest behind its share and the message it would serve.
    fn select(&self, new_max_len: Option<u64>) -> Option<(f64, usize, MessageId)> {
        let mut best: Option<(f64, usize, MessageId)> = None;
        let started = |id: &MessageId| self.messages.get(id).is_some_and(|m| m.wire_seq.is_some());
        for (qi, q) in self.queues.iter().enumerate() {
            if q.order.is_empty() || best.is_some_and(|(p, _, _)| p <= q.pass) {
                continue;
            }
            // The message lent the slack of more important ones, if any. A choice not worked
            // out again since the queue changed (a caller without a clock) is not trusted:
            // strict order is always safe for the more important messages.
            let lent = q
                .ahead
                .filter(|_| !q.ahead_stale)
                .and_then(|k| q.order.get(&k))
                .map(|e| e.id);
            let first = lent.or_else(|| q.order.values().next().map(|e| e.id));
            let fits = |id: &MessageId| {
                started(id)
                    || self
                        .messages
                        .get(id)
                        .is_some_and(|m| new_max_len.is_some_and(|n| m.size <= n))
            };
            let head = match first {
                Some(id) if fits(&id) => Some(id),
                _ => q.order.values().map(|e| e.id).find(started),
            };
            if let Some(id) = head {
                best = Some((q.pass, qi, id));
            }
        }
        best
    }

    /// Takes the next piece of `id` (the head of queue `qi`, whose pass is `pass`).
    fn dispatch(&mut self, pass: f64, qi: usize, id: MessageId, max_len: u32) -> Option<Chunk> {
        self.vtime = pass;
        let weight = self.queue_weight(qi);
        let next_wire = self.next_wire_seq;
        let m = self.messages.get_mut(&id)?;
        let (offset, end, retransmission) = match m.retx.first() {
            Some((s, e)) => (s, e.min(s + u64::from(max_len)), true),
            None => (
                m.next_offset,
                m.size.min(m.next_offset + u64::from(max_len)),
                false,
            ),
        };
        let taken_now = !retransmission && m.next_offset < m.size && end == m.size;
        if retransmission {
            m.retx.remove(offset, end);
        } else {
            m.next_offset = end;
        }
        if taken_now {
            self.events.push_back(NaiEvent::Taken { id });
        }
        let wire_seq = *m.wire_seq.get_or_insert(next_wire);
        if wire_seq == next_wire {
            self.next_wire_seq += 1;
        }
        let chunk = Chunk {
            id,
            wire_seq,
            offset,
            len: crate::convert::u32_sat(end - offset),
            msg_len: m.size,
            priority: Priority(m.priority),
            retransmission,
        };
        self.unsent_changed(id);
        if let Some(q) = self.queues.get_mut(qi) {
            q.pass += (end - offset) as f64 / weight.max(1) as f64;
        }
        Some(chunk)
    }

    /// The receiver acknowledged `[offset, offset + len)` of `id`. Returns whether this
    /// completed the message (its `Delivered` outcome is then queued). Unknown ids are ignored:
    /// late acknowledgements of discarded messages are normal.
    pub fn handle_acked(&mut self, now: Time, id: MessageId, offset: u64, len: u64) -> bool {
        self.acked(now, id, offset, len, false)
    }

    /// [`handle_acked`](Self::handle_acked) for a transport whose receiver delivers every
    /// byte written, in order (NAI over one TCP connection): a discard asked to be confirmed
    /// was only asked after every byte was written, so the stream will deliver the message,
    /// and its acknowledgement in full completes it as `Delivered` even while `Cancelling`.
    pub fn handle_acked_in_stream(
        &mut self,
        now: Time,
        id: MessageId,
        offset: u64,
        len: u64,
    ) -> bool {
        self.acked(now, id, offset, len, true)
    }

    fn acked(&mut self, now: Time, id: MessageId, offset: u64, len: u64, stream: bool) -> bool {
        let Some(m) = self.messages.get(&id) else {
            return false;
        };
        let end = offset.saturating_add(len).min(m.size);
        let Some(m) = self.messages.get_mut(&id) else {
            return false;
        };
        m.acked.insert(offset, end);
        m.retx.remove(offset, end);
        // A message being discarded takes its outcome from the receiver's verdict, never from
        // acknowledgements: a receiver that took the CANCEL first still acknowledges a late
        // piece (to stop its retransmission) but drops it, so "every byte acknowledged" does
        // not mean "delivered" once a CANCEL may have arrived.
        if m.state == MessageState::Cancelling && !stream {
            return false;
        }
        if m.acked.covers(0, m.size) {
            let margin = m.report_deadline.map(|d| DeadlineMargin::of(now, d));
            self.finish(id, Outcome::Delivered { at: now, margin });
            return true;
        }
        self.unsent_changed(id);
        false
    }

    /// `[offset, offset + len)` of `id` was found lost at `now`: it will be sent again (unless
    /// the message is being discarded, or those bytes were acknowledged meanwhile). `now` is
    /// not used yet — a loss changes no deadline — but every input takes the time it happened.
    pub fn handle_lost(&mut self, _now: Time, id: MessageId, offset: u64, len: u64) {
        let Some(m) = self.messages.get(&id) else {
            return;
        };
        if m.state == MessageState::Cancelling {
            return;
        }
        let end = offset.saturating_add(len).min(m.size).min(m.next_offset);
        if let Some(m) = self.messages.get_mut(&id) {
            for (s, e) in m.acked.gaps(offset, end) {
                m.retx.insert(s, e);
            }
        }
        self.unsent_changed(id);
    }

    /// Answer to a [`DiscardNotice`] with `confirm`: whether the receiver had already
    /// delivered the message. Unknown ids are ignored.
    pub fn resolve_cancel(&mut self, now: Time, id: MessageId, delivered: bool) {
        let Some(m) = self.messages.get(&id) else {
            return;
        };
        if m.state != MessageState::Cancelling {
            return;
        }
        let outcome = if delivered {
            Outcome::Delivered {
                at: now,
                margin: m.report_deadline.map(|d| DeadlineMargin::of(now, d)),
            }
        } else {
            m.discard_as
        };
        self.finish(id, outcome);
    }

    /// The next discard the transport must announce to the receiver (the scheduler's only
    /// unsolicited output to the wire; see the call order above).
    pub fn poll_transmit(&mut self) -> Option<DiscardNotice> {
        self.notices.pop_front()
    }

    // ----- timers and events -----

    /// The earliest armed callback timer.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.timers.first().map(|(t, _)| *t)
    }

    /// Fires the callback timers due by `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        while let Some(&(t, id)) = self.timers.first() {
            if t > now {
                break;
            }
            self.expire(now, id, false);
        }
    }

    /// The next application event.
    pub fn poll_event(&mut self) -> Option<NaiEvent> {
        self.events.pop_front()
    }

    /// Number of live (not yet final) messages.
    pub fn live_messages(&self) -> usize {
        self.messages.len()
    }

    /// Ends every live message with [`Outcome::Abandoned`] (its connection is gone), so each
    /// still gets exactly one outcome.
    pub fn abandon_all(&mut self) {
        let ids: Vec<MessageId> = self.messages.keys().copied().collect();
        for id in ids {
            self.finish(id, Outcome::Abandoned);
        }
        self.notices.clear();
    }

    /// Ids of the live messages, in id order.
    pub fn live_ids(&self) -> impl Iterator<Item = MessageId> + '_ {
        self.messages.keys().copied()
    }
}
