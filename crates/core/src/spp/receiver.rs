//! The receiving side of SPP: acknowledges packet numbers selectively, suppresses duplicates,
//! reassembles each message from its pieces, delivers it exactly once, discards cancelled
//! messages (answering each CANCEL with a verdict), measures packet pairs (§4.2), and — with
//! flow control — holds at most its window for the application ([`super::window`]).

use super::SppConfig;
use super::window::{charge, charge_many};
use super::wire::{
    AckFrame, AckWindow, MAX_ACK_RANGES, MAX_VERDICTS, ProbeReport, SppDatagram, SppRepr, Verdict,
};
use crate::nai::{MessageId, Priority, RangeSet};
use crate::time::Time;
use std::collections::{BTreeMap, VecDeque};

/// A message handed to the receiving application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The sender's message id.
    pub id: MessageId,
    /// Message size in bytes.
    pub size_bytes: u64,
    /// Its priority level.
    pub priority: Priority,
    /// When the last piece arrived.
    pub at: Time,
    /// The message's bytes, when the engine carries them
    /// ([`SppReceiver::handle_datagram_payload`]); `None` when it moves sizes only (the
    /// simulator's default).
    pub data: Option<Vec<u8>>,
}

/// Something the receiving application should know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SppEvent {
    /// A complete message, reported once.
    Delivered(Delivery),
    /// A partly received message was cancelled by the sender; its data is dropped.
    Discarded {
        /// The sender's message id.
        id: MessageId,
    },
}

#[derive(Debug)]
enum RxState {
    Partial {
        id: MessageId,
        len: u64,
        priority: u8,
        got: RangeSet,
        /// The message's buffer when payloads are carried, allocated for the whole message
        /// but filled only up to the furthest byte received (see [`write_piece`]).
        data: Option<Vec<u8>>,
    },
    Delivered,
    Discarded,
    /// Cancelled before any of it was held: its window credit went back to the sender.
    DiscardedUnseen,
}

/// Writes a piece at `start` into a message buffer filled up to `buf.len()`. Pieces arrive
/// mostly in order, so the buffer is not zero-filled when allocated (at 10 Gbit/s the memset
/// and the page faults it takes were a tenth of the receiver's CPU): an in-order piece is
/// appended, a piece beyond the filled part first zero-fills only the gap, and a piece that
/// lands inside it overwrites. The caller checked `start + bytes.len()` against the message's
/// length, which is the buffer's capacity. Returns false if the piece does not fit.
fn write_piece(buf: &mut Vec<u8>, start: u64, bytes: &[u8]) -> bool {
    let Ok(start) = usize::try_from(start) else {
        return false;
    };
    let Some(end) = start.checked_add(bytes.len()) else {
        return false;
    };
    if end > buf.capacity() {
        return false;
    }
    if buf.len() < start {
        buf.resize(start, 0);
    }
    let overlap = buf.len().min(end) - start;
    let (inside, beyond) = bytes.split_at(overlap);
    match buf.get_mut(start..start + overlap) {
        Some(dst) => dst.copy_from_slice(inside),
        None => return false,
    }
    buf.extend_from_slice(beyond);
    true
}

/// Most verdicts and probe reports waiting to be sent; beyond, the packet that asked for one
/// is dropped unacknowledged, so the sender asks again.
const MAX_PENDING_VERDICTS: usize = 256;
const MAX_PENDING_REPORTS: usize = 4;

/// SPP receiver state. Call pattern: `handle_datagram` for each arrival, then drain
/// `poll_transmit` (acknowledgements go out at once) and `poll_event`.
#[derive(Debug)]
pub struct SppReceiver {
    config: SppConfig,
    received: RangeSet,
    ack_due: bool,
    msgs: BTreeMap<u64, RxState>,
    floor: u64,
    verdicts: VecDeque<Verdict>,
    /// The probe train being measured: id, first arrival, bytes after the first, last index.
    probe: Option<(u32, Time, u64, u8)>,
    reports: VecDeque<ProbeReport>,
    events: VecDeque<SppEvent>,
    delivered: u64,
    /// Bytes allocated to buffers of partly received messages (bounded by
    /// [`SppConfig::max_reassembly_bytes`]).
    reassembly_bytes: u64,
    /// Charged bytes ([`super::window`]) of the messages held: partly received, or whole and
    /// not yet taken by the application.
    held_charge: u64,
    /// Of `held_charge`, what whole messages not yet taken account for.
    unconsumed_charge: u64,
    /// Charged bytes of every message no longer held (taken, or discarded after being held).
    credited: u64,
    /// The window limit last advertised.
    advertised_limit: u64,
}

impl SppReceiver {
    /// A receiver that has seen nothing.
    pub fn new(config: SppConfig) -> SppReceiver {
        SppReceiver {
            config,
            received: RangeSet::new(),
            ack_due: false,
            msgs: BTreeMap::new(),
            floor: 0,
            verdicts: VecDeque::new(),
            probe: None,
            reports: VecDeque::new(),
            events: VecDeque::new(),
            delivered: 0,
            reassembly_bytes: 0,
            held_charge: 0,
            unconsumed_charge: 0,
            credited: 0,
            advertised_limit: 0,
        }
    }

    /// The window limit this receiver advertises, with flow control: the most charged
    /// message bytes its sender may have started ([`super::window`]).
    pub fn window_limit(&self) -> Option<u64> {
        self.config
            .receive_window_bytes
            .map(|w| self.credited.saturating_add(w))
    }

    /// The application took `messages` whole messages of `bytes` bytes in total (flow
    /// control): their room is credited back, and an ACK with the grown window is sent once
    /// it has grown by an eighth of the window (sooner would be an ACK per message read).
    /// More than was delivered is ignored.
    pub fn handle_consumed(&mut self, messages: u64, bytes: u64) {
        let c = charge_many(messages, bytes).min(self.unconsumed_charge);
        self.unconsumed_charge -= c;
        self.held_charge = self.held_charge.saturating_sub(c);
        self.credited = self.credited.saturating_add(c);
        self.note_credit();
    }

    /// Sends a window update when the limit has grown enough since the last ACK.
    fn note_credit(&mut self) {
        if let (Some(w), Some(limit)) = (self.config.receive_window_bytes, self.window_limit())
            && limit.saturating_sub(self.advertised_limit) >= (w / 8).max(1)
        {
            self.ack_due = true;
        }
    }

    /// The peer asked for an acknowledgement (a PING: it probes a silent path or a closed
    /// window): one goes out with the next `poll_transmit`.
    pub fn request_ack(&mut self) {
        self.ack_due = true;
    }

    /// A held message is no longer held (discarded or forgotten): credit its charge.
    fn credit_held(&mut self, len: u64) {
        let c = charge(len);
        self.held_charge = self.held_charge.saturating_sub(c);
        self.credited = self.credited.saturating_add(c);
        self.note_credit();
    }

    /// Charged bytes held for the application (partly received, or whole and not taken).
    pub fn held_bytes(&self) -> u64 {
        self.held_charge
    }

    /// Handles one arriving datagram (`payload_len` bytes after the header) whose payload
    /// the engine does not carry (the simulator's default): deliveries report sizes only.
    pub fn handle_datagram(&mut self, now: Time, repr: &SppRepr, payload_len: u32) {
        self.handle(now, repr, payload_len, None);
    }

    /// Handles one arriving datagram with the bytes after its header: DATA pieces are copied
    /// into the message's buffer and [`Delivery::data`] holds the whole message. Buffers of
    /// partly received messages are bounded by [`SppConfig::max_reassembly_bytes`]; a piece
    /// that would exceed it is dropped unacknowledged (the sender retransmits it later).
    pub fn handle_datagram_payload(&mut self, now: Time, repr: &SppRepr, payload: &[u8]) {
        let len = crate::convert::usize_u32_sat(payload.len());
        self.handle(now, repr, len, Some(payload));
    }

    fn handle(&mut self, now: Time, repr: &SppRepr, payload_len: u32, payload: Option<&[u8]>) {
        match repr {
            SppRepr::Data(h) => {
                if u32::from(h.len) != payload_len {
                    return;
                }
                self.advance_floor(h.msg_floor);
                if self.on_data(now, h, payload) {
                    self.ack(h.pn);
                }
            }
            SppRepr::Cancel(h) => {
                self.advance_floor(h.msg_floor);
                if self.verdicts.len() >= MAX_PENDING_VERDICTS {
                    return;
                }
                let verdict = self.on_cancel(h.wire_seq);
                self.verdicts.push_back(verdict);
                self.ack(h.pn);
            }
            SppRepr::Probe(p) => {
                // Packet-pair / packet-train dispersion (§4.2; Keshav 1991, Dovrolis et al.
                // 2001): each later packet of the train extends the measured span; the report
                // of the latest one replaces an unsent report of the same train.
                let size = repr.buffer_len() as u64 + u64::from(payload_len);
                match (p.index, self.probe) {
                    (0, _) => self.probe = Some((p.probe_id, now, 0, 0)),
                    (i, Some((id, first, bytes, last))) if id == p.probe_id && i > last => {
                        let bytes = bytes.saturating_add(size);
                        self.probe = Some((id, first, bytes, i));
                        let report = ProbeReport {
                            probe_id: id,
                            gap_ns: crate::time::duration_nanos(now - first),
                            bytes: crate::convert::u32_sat(bytes),
                        };
                        let room = self.reports.len() < MAX_PENDING_REPORTS;
                        match self.reports.back_mut() {
                            Some(r) if r.probe_id == id => *r = report,
                            _ if room => self.reports.push_back(report),
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
            SppRepr::Ack(_) | SppRepr::Report(_) => {}
        }
    }

    /// Returns whether the packet is to be acknowledged.
    fn on_data(&mut self, now: Time, h: &super::wire::DataHeader, payload: Option<&[u8]>) -> bool {
        if h.wire_seq < self.floor {
            return true; // finished long ago: a duplicate
        }
        if h.wire_seq - self.floor >= self.config.message_window {
            return false; // outside the window the sender promised
        }
        let start = u64::from(h.offset);
        let end = start + u64::from(h.len);
        let msg_len = u64::from(h.msg_len);
        if end > msg_len {
            return false; // a piece beyond its message: malformed, ignore
        }
        if !self.msgs.contains_key(&h.wire_seq) {
            // A new message takes its window charge now. A sender that keeps to the window
            // never passes it (it counted the message when it sent the first piece); one that
            // does not is refused here, unacknowledged. A message larger than the whole
            // window is let in alone (nothing else held), as the sender sends it.
            if self.config.receive_window_bytes.is_some_and(|w| {
                self.held_charge > 0 && self.held_charge.saturating_add(charge(msg_len)) > w
            }) {
                return false;
            }
            // With payloads, its buffer is allocated now, within the bound.
            let data = match payload {
                Some(_)
                    if self.reassembly_bytes.saturating_add(msg_len)
                        > self.config.max_reassembly_bytes =>
                {
                    return false; // no room: drop unacknowledged, it will come again
                }
                Some(_) => {
                    let Ok(n) = usize::try_from(msg_len) else {
                        return false;
                    };
                    self.reassembly_bytes += msg_len;
                    Some(Vec::with_capacity(n))
                }
                None => None,
            };
            self.held_charge = self.held_charge.saturating_add(charge(msg_len));
            self.msgs.insert(
                h.wire_seq,
                RxState::Partial {
                    id: MessageId(h.msg_id),
                    len: msg_len,
                    priority: h.priority,
                    got: RangeSet::new(),
                    data,
                },
            );
        }
        let Some(state) = self.msgs.get_mut(&h.wire_seq) else {
            return false;
        };
        let RxState::Partial {
            id,
            len,
            priority,
            got,
            data,
        } = state
        else {
            return true; // delivered or discarded: duplicate suppression
        };
        if *len != msg_len || id.0 != h.msg_id || data.is_some() != payload.is_some() {
            return false; // inconsistent with earlier pieces: ignore
        }
        // Written before it is counted: a piece refused below for fragmentation leaves only
        // correct bytes that a retransmission writes again.
        if let (Some(buf), Some(bytes)) = (data.as_mut(), payload)
            && !write_piece(buf, start, bytes)
        {
            return false;
        }
        if got.range_count() >= self.config.max_ranges_per_message {
            let mut trial = got.clone();
            trial.insert(start, end);
            if trial.range_count() > self.config.max_ranges_per_message {
                return false; // too fragmented: drop unacknowledged, it will come again
            }
            *got = trial;
        } else {
            got.insert(start, end);
        }
        if got.covers(0, *len) {
            let data = data.take();
            // Every byte was written, so the buffer is filled to the message's length.
            debug_assert!(data.as_ref().is_none_or(|d| d.len() as u64 == *len));
            if data.is_some() {
                self.reassembly_bytes = self.reassembly_bytes.saturating_sub(*len);
            }
            let d = Delivery {
                id: *id,
                size_bytes: *len,
                priority: Priority(*priority),
                at: now,
                data,
            };
            let whole = charge(*len);
            *state = RxState::Delivered;
            self.unconsumed_charge = self.unconsumed_charge.saturating_add(whole);
            self.delivered += 1;
            self.events.push_back(SppEvent::Delivered(d));
        }
        true
    }

    /// Frees a partial message's buffer and window charge (it was discarded or forgotten).
    fn release(&mut self, state: &RxState) {
        if let RxState::Partial { len, data, .. } = state {
            if data.is_some() {
                self.reassembly_bytes = self.reassembly_bytes.saturating_sub(*len);
            }
            self.credit_held(*len);
        }
    }

    /// Discards a message; returns the verdict (whether it had already been delivered, and
    /// whether none of it was ever held).
    fn on_cancel(&mut self, wire_seq: u64) -> Verdict {
        let verdict = |delivered, unseen| Verdict {
            wire_seq,
            delivered,
            unseen,
        };
        if wire_seq < self.floor {
            return verdict(false, false); // the sender has closed it; it ignores this verdict
        }
        match self.msgs.get(&wire_seq) {
            Some(RxState::Delivered) => verdict(true, false),
            Some(RxState::Discarded) => verdict(false, false),
            Some(RxState::DiscardedUnseen) => verdict(false, true),
            Some(RxState::Partial { id, .. }) => {
                self.events.push_back(SppEvent::Discarded { id: *id });
                if let Some(old) = self.msgs.insert(wire_seq, RxState::Discarded) {
                    self.release(&old);
                }
                verdict(false, false)
            }
            None => {
                // Remembered (within the window of numbers), so later pieces are dropped and
                // a repeated CANCEL gets the same verdict.
                if wire_seq - self.floor < self.config.message_window {
                    self.msgs.insert(wire_seq, RxState::DiscardedUnseen);
                    verdict(false, true)
                } else {
                    verdict(false, false)
                }
            }
        }
    }

    fn advance_floor(&mut self, floor: u64) {
        if floor > self.floor {
            self.floor = floor;
            let kept = self.msgs.split_off(&floor);
            let forgotten = std::mem::replace(&mut self.msgs, kept);
            for state in forgotten.values() {
                self.release(state);
            }
        }
    }

    fn ack(&mut self, pn: u64) {
        self.received.insert(pn, pn.saturating_add(1));
        while self.received.range_count() > MAX_ACK_RANGES {
            self.received.pop_first();
        }
        self.ack_due = true;
    }

    /// The next datagram to send back: an ACK (with pending verdicts), then probe reports.
    pub fn poll_transmit(&mut self, _now: Time) -> Option<SppDatagram> {
        if self.ack_due || !self.verdicts.is_empty() {
            self.ack_due = false;
            let ranges = self.received.iter_rev().take(MAX_ACK_RANGES).collect();
            let n = self.verdicts.len().min(MAX_VERDICTS);
            let verdicts = self.verdicts.drain(..n).collect();
            let window = self.config.receive_window_bytes.map(|size| AckWindow {
                limit: self.credited.saturating_add(size),
                size,
            });
            if let Some(w) = window {
                self.advertised_limit = w.limit;
            }
            return Some(SppDatagram {
                repr: SppRepr::Ack(AckFrame {
                    ranges,
                    verdicts,
                    window,
                }),
                payload_len: 0,
            });
        }
        self.reports.pop_front().map(|r| SppDatagram {
            repr: SppRepr::Report(r),
            payload_len: 0,
        })
    }

    /// The receiver has no timers (it acknowledges at once).
    pub fn poll_timeout(&self) -> Option<Time> {
        None
    }

    /// The next event for the receiving application.
    pub fn poll_event(&mut self) -> Option<SppEvent> {
        self.events.pop_front()
    }

    /// Messages delivered so far.
    pub fn delivered_count(&self) -> u64 {
        self.delivered
    }

    /// Bytes held in buffers of partly received messages.
    pub fn reassembly_bytes(&self) -> u64 {
        self.reassembly_bytes
    }

    /// Messages the receiver is tracking (partial, or finished above the floor).
    pub fn tracked_messages(&self) -> usize {
        self.msgs.len()
    }
}

#[cfg(test)]
mod write_piece_tests {
    use super::write_piece;
    use proptest::prelude::*;

    proptest! {
        /// Pieces of a message written in any order, some twice, leave exactly the message.
        #[test]
        fn pieces_in_any_order_rebuild_the_message(
            len in 1usize..5000,
            cuts in proptest::collection::vec(0usize..5000, 0..12),
            order in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
        ) {
            let msg: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c % len).collect();
            bounds.extend([0, len]);
            bounds.sort_unstable();
            bounds.dedup();
            let pieces: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
            let mut buf = Vec::with_capacity(len);
            // Some pieces first in a random order (repeats allowed), then every piece once.
            let picks = order.iter().map(|i| pieces[i.index(pieces.len())]);
            for (s, e) in picks.chain(pieces.iter().rev().copied()) {
                prop_assert!(write_piece(&mut buf, s as u64, &msg[s..e]));
                prop_assert!(buf.len() <= len);
            }
            prop_assert_eq!(buf, msg);
        }
    }

    #[test]
    fn a_piece_beyond_the_buffer_is_refused() {
        let mut buf = Vec::with_capacity(8);
        assert!(write_piece(&mut buf, 4, &[1, 2, 3, 4]));
        assert_eq!(buf, [0, 0, 0, 0, 1, 2, 3, 4]);
        let cap = buf.capacity() as u64;
        assert!(!write_piece(&mut buf, cap, &[9]));
        assert!(!write_piece(&mut buf, u64::MAX, &[9]));
        assert!(write_piece(&mut buf, 0, &[5, 6]));
        assert_eq!(buf, [5, 6, 0, 0, 1, 2, 3, 4]);
    }
}
