//! The paper's two NAI-over-TCP baselines (`papers/000_97f7680fd99dd928.txt` §5.2), sans-IO:
//! the engine owns the TCP connections and this state machine decides what to write on each.
//!
//! * **NAI-TCP**: "The sender opens a single, blocking connection to the receiver. New messages
//!   wait on a queue to be sent. Whenever a send call returns, the first queued message is sent
//!   if less than half of its timeout has expired, otherwise it is discarded … Send operations
//!   are irrevocable. Once a send completes, the time is compared against the timer … The
//!   receiver sends a 1-byte user-level acknowledgement to the sender upon receipt of each
//!   message." Priorities are ignored: one FIFO queue.
//! * **NAI-MTCPk**: "one connection is opened for each priority level, and the number of
//!   high-priority connections is additionally controlled by a parameter" (k). "Behavior is
//!   otherwise the same as TCP with timers (sends cannot be aborted), though MTCP can terminate
//!   transmission of a message early if its timer expires." No bandwidth estimator.
//!
//! # How the sends are modelled
//!
//! A send call writes the message as [`record`]s while the connection's unacknowledged bytes
//! stay within `send_buffer_bytes` (the kernel socket buffer, FreeBSD 4's 32 KB by default), and
//! *returns* when the receiver's 1-byte acknowledgement arrives; only then does that connection
//! take its next message (the half-timeout rule applies at that moment, and outcomes are
//! `Delivered` with the margin against the deadline, which may be late). Each connection's
//! queue is FIFO in submission order.
//!
//! NAI-MTCP's early termination: when a message's callback timer (deadline = submission +
//! timer) expires, the application **stops writing it**. Bytes already handed to TCP are
//! irrevocable and still go out; if some bytes were never written, an ABORT record follows
//! them so the receiver drops the partial message. The connection is free at once (the send
//! call is abandoned) and its next message queues behind those bytes. A message still waiting
//! in a queue when its timer expires is removed. Either way the outcome is
//! [`Outcome::Expired`] `{ early: false }`; a message fully written before expiry may still be
//! delivered by the receiver, but its late acknowledgement is ignored (timers are enforced at
//! the sender, §4.3).
//!
//! A message discarded by the half-timeout rule gets [`Outcome::Expired`] `{ early: true }`:
//! like ATP's early expiry, the sender gave up before the deadline.
//!
//! # Calling pattern
//!
//! ```text
//! open connections() TCP connections; connection i carries records of conn index i
//! application: submit(now, bytes, opts) or submit_bytes(now, data, opts)
//! for each connection i after every input:
//!     while let Some(r) = poll_transmit(now, i, conn_i.bytes_unacked()) {
//!         conn_i.write(r.stream_len()) and carry r's header at that stream offset
//!     }
//!     (or, carrying bytes: poll_transmit_bytes(now, i, unacked, &mut buf) and write buf)
//! handle_ack_bytes(now, i, n) for n acknowledgement bytes read from connection i
//! handle_timeout(now) at poll_timeout(); drain poll_event()
//! receiver, per connection: record::RecordReceiver::handle_bytes(now, &bytes_read) (or
//!     handle_record for each record's header, virtual payload); write take_acks() bytes back
//! ```

pub mod record;

use super::payloads::PayloadStore;
use super::{DeadlineMargin, MAX_LEVELS};
use super::{MessageId, NaiError, NaiEvent, Outcome, Priority, RejectReason, SendOptions};
use crate::time::Time;
use bytes::Bytes;
use record::{RecordHeader, RecordKind};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// Which baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum BaselineKind {
    /// One connection, one FIFO queue, no timers (§5.2 "TCP with timers").
    NaiTcp,
    /// One connection per priority level, `high_connections` for the most important level,
    /// and early termination on timer expiry (§5.2 "Multi-stream TCP").
    Mtcp {
        /// The paper's k (NAI-MTCPk).
        high_connections: u8,
    },
}

/// Baseline configuration.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BaselineConfig {
    /// NAI-TCP or NAI-MTCPk.
    pub kind: BaselineKind,
    /// Priority levels in use, `1..=MAX_LEVELS` (NAI-MTCP opens one connection per level).
    pub levels: u8,
    /// Most unacknowledged bytes a connection may hold before the application stops writing
    /// (the socket send buffer).
    pub send_buffer_bytes: u64,
    /// Most message bytes per record (one application `write`).
    pub max_record_bytes: u32,
    /// Most live messages; further submissions are rejected with `Capacity`.
    pub max_messages: usize,
    /// Most bytes of messages submitted with their data
    /// ([`BaselineSender::submit_bytes`]) held at once.
    pub max_buffered_bytes: u64,
    /// Fully written messages a connection may have awaiting their acknowledgement byte
    /// while it writes the next. 1 (the default) is the paper's NAI-TCP: the send call
    /// returns only when the acknowledgement arrives (§5.2), one message per round trip.
    /// More lets the send call return once the message is written whole, as a blocking TCP
    /// write does, and only the outcome waits for the acknowledgement: the acknowledgement
    /// no longer throttles (a real engine's fair baseline on a fast path; see the runtime's
    /// `BaselineOptions`). The half-timeout rule applies when the send call returns.
    pub max_unacked_messages: usize,
    /// A connection that has written nothing for this long while another connection of the
    /// same sender wrote since writes a heartbeat record (a header, no message). A receiver
    /// that closes connections idle for a while cannot tell that NAI-MTCPk's TCP connections
    /// belong together (nothing on the wire says so), and closing a level the application has
    /// not used ends the whole sender. At most one heartbeat per this interval per idle
    /// connection, and none while every connection is idle (a sender with nothing to send is
    /// idle). `None` (the default, the paper's and the simulator's): never.
    pub heartbeat_after: Option<Duration>,
}

impl BaselineConfig {
    /// A configuration with FreeBSD 4's default 32 KB send buffer and 8 KB writes.
    pub fn new(kind: BaselineKind, levels: u8) -> BaselineConfig {
        BaselineConfig {
            kind,
            levels,
            send_buffer_bytes: 32 * 1024,
            max_record_bytes: 8 * 1024,
            max_messages: 65_536,
            max_buffered_bytes: 64 << 20,
            max_unacked_messages: 1,
            heartbeat_after: None,
        }
    }
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BaselineStats {
    /// Messages discarded by the half-timeout rule.
    pub half_timeout_discards: u64,
    /// Messages whose writing was stopped by their timer (MTCP), partial ones.
    pub aborted_partial: u64,
    /// Messages whose timer expired after they were fully written (MTCP).
    pub expired_after_written: u64,
    /// Messages removed from a queue by their timer (MTCP).
    pub expired_queued: u64,
    /// Message bytes written to the connections.
    pub bytes_written: u64,
    /// Heartbeat records written (see [`BaselineConfig::heartbeat_after`]).
    pub heartbeats: u64,
}

#[derive(Debug)]
struct Msg {
    size: u64,
    priority: u8,
    submitted: Time,
    timer: Option<Duration>,
    deadline: Option<Time>,
    /// Connection sending it, once started.
    conn: Option<usize>,
}

#[derive(Debug, Default)]
struct Conn {
    /// Level served (`None`: every level, NAI-TCP).
    level: Option<u8>,
    /// The message whose send call is in progress and the bytes of it written so far.
    sending: Option<(MessageId, u64)>,
    /// An ABORT record to write before anything else.
    abort_due: Option<(MessageId, u8, u64)>,
    /// Fully written messages, in order: each acknowledgement byte answers the first.
    awaiting_ack: VecDeque<MessageId>,
    /// When this connection last got a record to write (a heartbeat too).
    last_write: Option<Time>,
    /// When it last got a record of a message (data or abort) to write.
    last_message_write: Option<Time>,
}

/// The sending side of NAI-TCP or NAI-MTCPk. See the module docs.
#[derive(Debug)]
pub struct BaselineSender {
    config: BaselineConfig,
    msgs: BTreeMap<MessageId, Msg>,
    /// One FIFO queue per level (NAI-TCP uses only queue 0).
    queues: Vec<VecDeque<MessageId>>,
    conns: Vec<Conn>,
    timers: BTreeSet<(Time, MessageId)>,
    events: VecDeque<NaiEvent>,
    next_id: u64,
    stats: BaselineStats,
    /// The bytes of live messages submitted with [`BaselineSender::submit_bytes`].
    payloads: PayloadStore,
    /// The message bytes the last data record returned by `poll_transmit` carries: (message,
    /// first byte, length).
    last_chunk: Option<(MessageId, u64, u64)>,
}

impl BaselineSender {
    /// A sender with nothing queued.
    pub fn new(mut config: BaselineConfig) -> BaselineSender {
        config.levels = config.levels.clamp(1, MAX_LEVELS);
        config.max_record_bytes = config.max_record_bytes.max(1);
        let conns: Vec<Conn> = match config.kind {
            BaselineKind::NaiTcp => vec![Conn::default()],
            BaselineKind::Mtcp { high_connections } => {
                let high = (0..high_connections.max(1)).map(|_| Conn {
                    level: Some(0),
                    ..Conn::default()
                });
                let rest = (1..config.levels).map(|l| Conn {
                    level: Some(l),
                    ..Conn::default()
                });
                high.chain(rest).collect()
            }
        };
        let config_max = config.max_buffered_bytes;
        BaselineSender {
            queues: (0..config.levels).map(|_| VecDeque::new()).collect(),
            config,
            msgs: BTreeMap::new(),
            conns,
            timers: BTreeSet::new(),
            events: VecDeque::new(),
            next_id: 0,
            stats: BaselineStats::default(),
            payloads: PayloadStore::new(config_max),
            last_chunk: None,
        }
    }

    /// Queues a message that carries its bytes: like [`submit`](Self::submit) with
    /// `data.len()` as the size; the bytes are kept until the message's outcome, so
    /// [`record_payload`](Self::record_payload) can fill each data record. At most
    /// [`BaselineConfig::max_buffered_bytes`] are held; beyond, the call fails with
    /// [`NaiError::BufferFull`] and nothing is queued.
    pub fn submit_bytes(
        &mut self,
        now: Time,
        data: impl Into<Bytes>,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        let data = data.into();
        let len = data.len() as u64;
        self.payloads.check(len)?;
        let id = self.submit(now, len, opts)?;
        self.payloads.insert(id, data);
        Ok(id)
    }

    /// The message bytes following the data record `header` that
    /// [`poll_transmit`](Self::poll_transmit) just returned, for a message submitted with
    /// [`submit_bytes`](Self::submit_bytes); `None` for an abort record, a message submitted
    /// by size only, or any other record.
    pub fn record_payload(&self, header: &RecordHeader) -> Option<&[u8]> {
        let (id, start, len) = self.last_chunk?;
        if header.kind != RecordKind::Data
            || header.msg_id != id.0
            || u64::from(header.chunk_len) != len
        {
            return None;
        }
        self.payloads.get(id, start, len)
    }

    /// [`poll_transmit`](Self::poll_transmit), with the whole record written to `out`
    /// (cleared first): the header, then the message bytes it carries (zeros for a message
    /// submitted by size only) — exactly [`RecordHeader::stream_len`] bytes, ready for the
    /// stream. The engine writes `out` to connection `conn`.
    pub fn poll_transmit_bytes(
        &mut self,
        now: Time,
        conn: usize,
        unacked_bytes: u64,
        out: &mut Vec<u8>,
    ) -> Option<RecordHeader> {
        let h = self.poll_transmit(now, conn, unacked_bytes)?;
        out.clear();
        out.resize(record::RECORD_HEADER_LEN, 0);
        // `out` holds exactly a header: emit cannot fail.
        let _ = h.emit(out);
        match self.record_payload(&h) {
            Some(body) => out.extend_from_slice(body),
            None => out.resize(usize::try_from(h.stream_len()).unwrap_or(0), 0),
        }
        Some(h)
    }

    /// Bytes held for messages submitted with [`submit_bytes`](Self::submit_bytes).
    pub fn buffered_bytes(&self) -> u64 {
        self.payloads.buffered_bytes()
    }

    /// The configuration.
    pub fn config(&self) -> &BaselineConfig {
        &self.config
    }

    /// TCP connections the engine must open (NAI-TCP: 1; NAI-MTCPk: k + levels − 1).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Counters.
    pub fn stats(&self) -> &BaselineStats {
        &self.stats
    }

    /// Live (not yet final) messages.
    pub fn live_messages(&self) -> usize {
        self.msgs.len()
    }

    fn aborts_on_expiry(&self) -> bool {
        matches!(self.config.kind, BaselineKind::Mtcp { .. })
    }

    /// Queues a message. There is no admission control (no bandwidth estimator); only the
    /// capacity bound rejects, with an [`Outcome::Rejected`] event as for ATP.
    #[allow(
        clippy::indexing_slicing,
        reason = "one queue per level (`levels` of them, checked at submission) and connection \
                  indices below `conns.len()` (checked on entry)"
    )]
    pub fn submit(
        &mut self,
        now: Time,
        size_bytes: u64,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        if opts.priority.0 >= self.config.levels {
            return Err(NaiError::BadPriority {
                priority: opts.priority.0,
                levels: self.config.levels,
            });
        }
        if size_bytes == 0 {
            return Err(NaiError::EmptyMessage);
        }
        let max = u64::from(u32::MAX);
        if size_bytes > max {
            return Err(NaiError::TooLarge {
                bytes: size_bytes,
                max,
            });
        }
        let id = MessageId(self.next_id);
        self.next_id += 1;
        if self.msgs.len() >= self.config.max_messages {
            let reason = RejectReason::Capacity;
            self.events.push_back(NaiEvent::Outcome {
                id,
                outcome: Outcome::Rejected(reason),
            });
            return Err(NaiError::Rejected { id, reason });
        }
        let deadline = opts
            .timer
            .map(|t| now.saturating_add(t))
            .filter(|d| *d != Time::MAX);
        self.msgs.insert(
            id,
            Msg {
                size: size_bytes,
                priority: opts.priority.0,
                submitted: now,
                timer: opts.timer,
                deadline,
                conn: None,
            },
        );
        let q = match self.config.kind {
            BaselineKind::NaiTcp => 0,
            BaselineKind::Mtcp { .. } => usize::from(opts.priority.0),
        };
        self.queues[q].push_back(id);
        if self.aborts_on_expiry()
            && let Some(d) = deadline
        {
            self.timers.insert((d, id));
        }
        Ok(id)
    }

    /// The next record to write on connection `conn`, given its unacknowledged byte count:
    /// a message's, or else a heartbeat if one is due.
    pub fn poll_transmit(
        &mut self,
        now: Time,
        conn: usize,
        unacked_bytes: u64,
    ) -> Option<RecordHeader> {
        let header = match self.poll_record(now, conn, unacked_bytes) {
            Some(h) => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.last_message_write = Some(now);
                }
                h
            }
            None => {
                let room = self.config.send_buffer_bytes.saturating_sub(unacked_bytes);
                if self.heartbeat_due(conn).is_none_or(|t| t > now)
                    || (room < record::RECORD_HEADER_LEN as u64 && unacked_bytes > 0)
                {
                    return None;
                }
                self.stats.heartbeats += 1;
                RecordHeader {
                    kind: RecordKind::Heartbeat,
                    priority: 0,
                    msg_id: 0,
                    msg_len: 0,
                    chunk_len: 0,
                }
            }
        };
        if let Some(c) = self.conns.get_mut(conn) {
            c.last_write = Some(now);
        }
        Some(header)
    }

    /// When connection `conn` is due a heartbeat: [`BaselineConfig::heartbeat_after`] after
    /// its last record, if it has nothing of its own to write or to hear back (a connection
    /// with a message in flight is not idle, and its socket may be full) and another
    /// connection wrote a message's record since (heartbeats do not count, or two idle
    /// levels would keep each other beating).
    fn heartbeat_due(&self, conn: usize) -> Option<Time> {
        let after = self.config.heartbeat_after?;
        let c = self.conns.get(conn)?;
        if c.sending.is_some() || c.abort_due.is_some() || !c.awaiting_ack.is_empty() {
            return None;
        }
        let own = c.last_write;
        let sibling_since = self.conns.iter().enumerate().any(|(i, c)| {
            i != conn
                && c.last_message_write
                    .is_some_and(|t| own.is_none_or(|o| t > o))
        });
        sibling_since.then(|| own.unwrap_or(Time::ZERO).saturating_add(after))
    }

    /// The next record of connection `conn`'s messages, if any may go.
    #[allow(
        clippy::indexing_slicing,
        reason = "one queue per level (`levels` of them, checked at submission) and connection \
                  indices below `conns.len()` (checked on entry)"
    )]
    fn poll_record(&mut self, now: Time, conn: usize, unacked_bytes: u64) -> Option<RecordHeader> {
        let room = self.config.send_buffer_bytes.saturating_sub(unacked_bytes);
        let header = record::RECORD_HEADER_LEN as u64;
        let c = self.conns.get_mut(conn)?;
        if let Some((id, priority, size)) = c.abort_due {
            if room < header && unacked_bytes > 0 {
                return None;
            }
            c.abort_due = None;
            return Some(RecordHeader {
                kind: RecordKind::Abort,
                priority,
                msg_id: id.0,
                msg_len: crate::convert::u32_sat(size),
                chunk_len: 0,
            });
        }
        let (id, written, m) = loop {
            if self.conns[conn].sending.is_none() {
                let next = self.next_message(now, conn)?;
                self.conns[conn].sending = Some((next, 0));
                if let Some(m) = self.msgs.get_mut(&next) {
                    m.conn = Some(conn);
                }
            }
            let (id, written) = self.conns[conn].sending?;
            match self.msgs.get(&id) {
                Some(m) => break (id, written, m),
                // Finished meanwhile (cannot happen through the public calls): move on.
                None => self.conns[conn].sending = None,
            }
        };
        if written >= m.size {
            let c = &mut self.conns[conn];
            if c.awaiting_ack.len() >= self.config.max_unacked_messages.max(1) {
                return None; // waiting for the acknowledgement: the send call has not returned
            }
            // The send call returned (pipelined): the next message starts on this call.
            c.sending = None;
            return self.poll_record(now, conn, unacked_bytes);
        }
        let chunk = (m.size - written).min(u64::from(self.config.max_record_bytes));
        if header + chunk > room && unacked_bytes > 0 {
            return None;
        }
        let h = RecordHeader {
            kind: RecordKind::Data,
            priority: m.priority,
            msg_id: id.0,
            msg_len: crate::convert::u32_sat(m.size),
            chunk_len: crate::convert::u32_sat(chunk),
        };
        let done = written + chunk == m.size;
        self.last_chunk = Some((id, written, chunk));
        let c = &mut self.conns[conn];
        c.sending = Some((id, written + chunk));
        if done {
            c.awaiting_ack.push_back(id);
        }
        self.stats.bytes_written += chunk;
        Some(h)
    }

    /// The first queued message for `conn` that passes the half-timeout rule; earlier ones
    /// that fail it are discarded (§5.2).
    #[allow(
        clippy::indexing_slicing,
        reason = "one queue per level (`levels` of them, checked at submission) and connection \
                  indices below `conns.len()` (checked on entry)"
    )]
    fn next_message(&mut self, now: Time, conn: usize) -> Option<MessageId> {
        let q = usize::from(self.conns[conn].level.unwrap_or(0));
        while let Some(id) = self.queues[q].pop_front() {
            let Some(m) = self.msgs.get(&id) else {
                continue;
            };
            let waited = now.saturating_since(m.submitted);
            match m.timer {
                Some(t) if waited.saturating_mul(2) >= t => {
                    self.stats.half_timeout_discards += 1;
                    self.finish(id, Outcome::Expired { early: true });
                }
                _ => return Some(id),
            }
        }
        None
    }

    /// `n` acknowledgement bytes were read from connection `conn`: each completes the oldest
    /// fully written message on it (§5.2: the send call returns).
    pub fn handle_ack_bytes(&mut self, now: Time, conn: usize, n: u64) {
        for _ in 0..n {
            let Some(c) = self.conns.get_mut(conn) else {
                return;
            };
            let Some(id) = c.awaiting_ack.pop_front() else {
                return; // more acknowledgements than messages: ignore
            };
            if c.sending.is_some_and(|(s, _)| s == id) {
                c.sending = None;
            }
            if let Some(m) = self.msgs.get(&id) {
                let margin = m.deadline.map(|d| DeadlineMargin::of(now, d));
                self.finish(id, Outcome::Delivered { at: now, margin });
            }
        }
    }

    /// The earliest callback timer (NAI-MTCP only), or heartbeat (see
    /// [`BaselineConfig::heartbeat_after`]; `poll_transmit` writes it).
    pub fn poll_timeout(&self) -> Option<Time> {
        let timer = self.timers.first().map(|(t, _)| *t);
        (0..self.conns.len())
            .filter_map(|c| self.heartbeat_due(c))
            .chain(timer)
            .min()
    }

    /// Fires the callback timers due by `now`: NAI-MTCP stops writing those messages.
    pub fn handle_timeout(&mut self, now: Time) {
        while let Some(&(t, id)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.remove(&(t, id));
            self.expire(id);
        }
    }

    #[allow(
        clippy::indexing_slicing,
        reason = "a message's connection is set by `poll_transmit` to an index below `conns.len()`"
    )]
    fn expire(&mut self, id: MessageId) {
        let Some(m) = self.msgs.get(&id) else {
            return;
        };
        let (size, priority, conn) = (m.size, m.priority, m.conn);
        match conn {
            None => {
                for q in &mut self.queues {
                    q.retain(|x| *x != id);
                }
                self.stats.expired_queued += 1;
            }
            Some(c) => {
                let conn = &mut self.conns[c];
                if let Some((s, written)) = conn.sending
                    && s == id
                {
                    conn.sending = None;
                    if written < size {
                        self.stats.aborted_partial += 1;
                        if written > 0 {
                            conn.abort_due = Some((id, priority, size));
                        }
                    } else {
                        self.stats.expired_after_written += 1;
                    }
                } else if conn.awaiting_ack.contains(&id) {
                    // Written whole (pipelined sends): only its acknowledgement is awaited.
                    self.stats.expired_after_written += 1;
                }
            }
        }
        self.finish(id, Outcome::Expired { early: false });
    }

    fn finish(&mut self, id: MessageId, outcome: Outcome) {
        self.payloads.release(id);
        if let Some(m) = self.msgs.remove(&id) {
            if let Some(d) = m.deadline {
                self.timers.remove(&(d, id));
            }
            self.events.push_back(NaiEvent::Outcome { id, outcome });
        }
    }

    /// Ends the run: every live message gets its final outcome now — `Expired` if its
    /// deadline has passed, else `Cancelled` (the application gave up). Returns how many.
    pub fn finish_all(&mut self, now: Time) -> usize {
        let ids: Vec<MessageId> = self.msgs.keys().copied().collect();
        for &id in &ids {
            let expired = self
                .msgs
                .get(&id)
                .and_then(|m| m.deadline)
                .is_some_and(|d| d <= now);
            let outcome = if expired {
                Outcome::Expired { early: false }
            } else {
                Outcome::Cancelled
            };
            self.finish(id, outcome);
        }
        for q in &mut self.queues {
            q.clear();
        }
        for c in &mut self.conns {
            c.sending = None;
        }
        ids.len()
    }

    /// The connections are gone (the peer closed or reset them, or the engine closed them)
    /// before every message's fate was known: each live message ends
    /// [`Outcome::Abandoned`] — bytes already written may or may not have been delivered, as
    /// with ATP's [`Scheduler::abandon_all`](crate::nai::Scheduler::abandon_all). Nothing is
    /// written or timed afterwards. Returns how many.
    pub fn abandon_all(&mut self) -> usize {
        let ids: Vec<MessageId> = self.msgs.keys().copied().collect();
        for &id in &ids {
            self.finish(id, Outcome::Abandoned);
        }
        for q in &mut self.queues {
            q.clear();
        }
        for c in &mut self.conns {
            c.sending = None;
            c.abort_due = None;
            c.awaiting_ack.clear();
        }
        ids.len()
    }

    /// The next application event (outcomes only: the baselines have no estimator).
    pub fn poll_event(&mut self) -> Option<NaiEvent> {
        self.events.pop_front()
    }

    /// The priority a message was submitted with, while it is live.
    pub fn priority(&self, id: MessageId) -> Option<Priority> {
        self.msgs.get(&id).map(|m| Priority(m.priority))
    }
}

#[cfg(test)]
mod tests;
