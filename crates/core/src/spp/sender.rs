//! The sending side of SPP: packet numbers, in-flight records, selective acknowledgement,
//! loss detection (packet threshold and retransmission timer), and cancel notices.
//!
//! The sender does not own messages; the NAI [`Scheduler`](crate::nai::Scheduler) does. What
//! acknowledgements, losses and verdicts mean for messages comes back as [`SppOutcome`]
//! values, which the owner (the ATP sender) applies to the scheduler in order — SPP never
//! calls into it.

use super::SppConfig;
use super::sent::SentPackets;
use super::wire::{AckFrame, CancelHeader, DataHeader};
use crate::nai::{Chunk, DiscardNotice, MessageId};
use crate::rtt::RttEstimator;
use crate::time::Time;
use std::collections::{BTreeMap, BTreeSet};

/// What a packet carried.
#[derive(Clone, Copy, Debug)]
enum Carried {
    Data {
        id: MessageId,
        wire_seq: u64,
        offset: u64,
        len: u64,
    },
    Cancel {
        wire_seq: u64,
    },
}

#[derive(Clone, Copy, Debug)]
struct Sent {
    at: Time,
    carried: Carried,
}

/// A cancel notice and where it stands.
#[derive(Clone, Copy, Debug)]
struct Notice {
    confirm: bool,
    /// The packet carrying it, while in flight; `None`: due for (re)transmission.
    in_flight: Option<u64>,
}

/// A message the receiver may still hold state for.
#[derive(Clone, Copy, Debug)]
struct Open {
    id: MessageId,
    notice: Option<Notice>,
    /// Its window charge ([`super::window::charge`]), counted when it was started.
    charge: u64,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SppStats {
    /// DATA packets sent (including retransmissions).
    pub data_packets: u64,
    /// DATA payload bytes sent (including retransmissions).
    pub data_bytes: u64,
    /// DATA payload bytes that were retransmissions.
    pub retransmitted_bytes: u64,
    /// CANCEL packets sent.
    pub cancel_packets: u64,
    /// Packets declared lost.
    pub lost_packets: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
}

/// What an acknowledgement or a retransmission timeout means for a message; the SPP sender
/// returns these as values and its owner applies them to the NAI scheduler, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SppOutcome {
    /// The receiver answered a cancel notice that asked for confirmation
    /// ([`Scheduler::resolve_cancel`](crate::nai::Scheduler::resolve_cancel)).
    CancelResolved {
        /// The message.
        id: MessageId,
        /// The receiver had already delivered it.
        delivered: bool,
    },
    /// A piece was acknowledged ([`Scheduler::handle_acked`](crate::nai::Scheduler::handle_acked)).
    Acked {
        /// The message.
        id: MessageId,
        /// Its wire number (for [`SppSender::on_message_acked`]).
        wire_seq: u64,
        /// First byte of the piece.
        offset: u64,
        /// Bytes in the piece.
        len: u64,
    },
    /// A piece was declared lost and must be sent again ([`Scheduler::handle_lost`](crate::nai::Scheduler::handle_lost)).
    Lost {
        /// The message.
        id: MessageId,
        /// First byte of the piece.
        offset: u64,
        /// Bytes in the piece.
        len: u64,
    },
}

/// SPP sender state.
#[derive(Debug)]
pub struct SppSender {
    config: SppConfig,
    next_pn: u64,
    in_flight: SentPackets<Sent>,
    largest_acked: Option<u64>,
    rtt: RttEstimator,
    backoffs: u32,
    open: BTreeMap<u64, Open>,
    /// Messages whose CANCEL may be due (a notice not in flight), lowest first. Kept beside
    /// `open` so that `poll_transmit`, asked before every datagram, does not scan every open
    /// message; an entry whose notice has since left or gone in flight is dropped when met.
    due_notices: BTreeSet<u64>,
    /// One past the highest message number seen.
    next_unopened: u64,
    stats: SppStats,
    /// The receiver's window limit ([`super::window`]); `None`: unlimited.
    peer_limit: Option<u64>,
    /// The receiver's window size.
    peer_window: u64,
    /// Whether `peer_limit` came from the receiver (until then it is this side's own
    /// configured window, assumed for the peer).
    heard_limit: bool,
    /// Charged bytes of every message started, less those the receiver never held.
    started_charge: u64,
    /// The packets one ACK took out of flight, kept between ACKs so that their list is not
    /// allocated (and grown) again for each of the thousands a second a fast path brings.
    acked: Vec<(u64, Sent)>,
}

impl SppSender {
    /// A sender with nothing in flight.
    pub fn new(config: SppConfig) -> SppSender {
        let rtt = RttEstimator::new(config.rto);
        let peer_limit = config.receive_window_bytes;
        SppSender {
            config,
            next_pn: 0,
            in_flight: SentPackets::default(),
            acked: Vec::new(),
            largest_acked: None,
            rtt,
            backoffs: 0,
            open: BTreeMap::new(),
            due_notices: BTreeSet::new(),
            next_unopened: 0,
            stats: SppStats::default(),
            peer_limit,
            peer_window: peer_limit.unwrap_or(u64::MAX),
            heard_limit: false,
            started_charge: 0,
        }
    }

    /// The longest new message that may start now without passing the receiver's window
    /// (`u64::MAX` without flow control), or `None` when no new message may start at all
    /// ([`SppSender::can_start_new`]). Pieces of started messages are not limited: they are
    /// inside the window already. This is what the scheduler's
    /// [`next_chunk_within`](crate::nai::Scheduler::next_chunk_within) takes.
    pub fn new_message_max_len(&self) -> Option<u64> {
        if !self.can_start_new() {
            return None;
        }
        Some(self.peer_limit.map_or(u64::MAX, |l| {
            if self.started_charge <= l.saturating_sub(self.peer_window) {
                // The receiver holds nothing of ours: any message may start, even one
                // larger than the whole window (it goes alone).
                return u64::MAX;
            }
            l.saturating_sub(self.started_charge)
                .saturating_sub(super::window::MESSAGE_CHARGE_BYTES)
        }))
    }

    /// The receiver's window limit, if it limits this sender.
    pub fn peer_window_limit(&self) -> Option<u64> {
        self.peer_limit
    }

    /// Charged bytes of messages started and not returned ([`super::window`]).
    pub fn started_charge(&self) -> u64 {
        self.started_charge
    }

    /// Lowest open message number (what DATA and CANCEL carry as `msg_floor`).
    pub fn msg_floor(&self) -> u64 {
        self.open
            .first_key_value()
            .map_or(self.next_unopened, |(k, _)| *k)
    }

    /// Whether a message never transmitted may be started now.
    pub fn can_start_new(&self) -> bool {
        self.open.len() < self.config.max_open_messages
            && self.next_unopened - self.msg_floor() < self.config.message_window
    }

    /// Whether another DATA packet may be put in flight.
    pub fn can_send_data(&self) -> bool {
        self.in_flight.len() < self.config.max_in_flight_packets
    }

    /// Most payload bytes per DATA packet.
    pub fn max_payload(&self) -> u32 {
        let header = super::wire::SppRepr::Data(DataHeader {
            pn: 0,
            msg_floor: 0,
            wire_seq: 0,
            msg_id: 0,
            msg_len: 1,
            offset: 0,
            len: 1,
            priority: 0,
        })
        .buffer_len();
        u32::from(self.config.max_datagram_bytes)
            .saturating_sub(crate::convert::usize_u32_sat(header))
            .clamp(1, u32::from(u16::MAX))
    }

    /// Records the transmission of `chunk` and returns its header.
    pub fn on_data_sent(&mut self, now: Time, chunk: &Chunk) -> DataHeader {
        let charge = super::window::charge(chunk.msg_len);
        if chunk.wire_seq >= self.next_unopened {
            // A new message: it takes its room in the receiver's window now.
            self.next_unopened = chunk.wire_seq + 1;
            self.started_charge = self.started_charge.saturating_add(charge);
        }
        self.open.entry(chunk.wire_seq).or_insert(Open {
            id: chunk.id,
            notice: None,
            charge,
        });
        let pn = self.take_pn(
            now,
            Carried::Data {
                id: chunk.id,
                wire_seq: chunk.wire_seq,
                offset: chunk.offset,
                len: u64::from(chunk.len),
            },
        );
        self.stats.data_packets += 1;
        self.stats.data_bytes += u64::from(chunk.len);
        if chunk.retransmission {
            self.stats.retransmitted_bytes += u64::from(chunk.len);
        }
        DataHeader {
            pn,
            msg_floor: self.msg_floor(),
            wire_seq: chunk.wire_seq,
            msg_id: chunk.id.0,
            msg_len: crate::convert::u32_sat(chunk.msg_len),
            offset: crate::convert::u32_sat(chunk.offset),
            len: crate::convert::u16_sat(u64::from(chunk.len)),
            priority: chunk.priority.0,
        }
    }

    /// Takes a discard notice from the scheduler: a CANCEL becomes due.
    pub fn on_notice(&mut self, n: DiscardNotice) {
        if n.wire_seq >= self.next_unopened {
            self.next_unopened = n.wire_seq + 1;
        }
        let open = self.open.entry(n.wire_seq).or_insert(Open {
            id: n.id,
            notice: None,
            charge: 0,
        });
        open.notice = Some(Notice {
            confirm: n.confirm,
            in_flight: None,
        });
        self.due_notices.insert(n.wire_seq);
    }

    /// The next CANCEL due, if any (not paced: notices are small and urgent).
    pub fn poll_transmit(&mut self, now: Time) -> Option<CancelHeader> {
        let (wire_seq, msg_id) = loop {
            let wire_seq = self.due_notices.pop_first()?;
            if let Some(open) = self
                .open
                .get(&wire_seq)
                .filter(|o| o.notice.is_some_and(|n| n.in_flight.is_none()))
            {
                break (wire_seq, open.id.0);
            }
        };
        let pn = self.take_pn(now, Carried::Cancel { wire_seq });
        if let Some(n) = self.open.get_mut(&wire_seq).and_then(|o| o.notice.as_mut()) {
            n.in_flight = Some(pn);
        }
        self.stats.cancel_packets += 1;
        Some(CancelHeader {
            pn,
            msg_floor: self.msg_floor(),
            wire_seq,
            msg_id,
        })
    }

    fn take_pn(&mut self, now: Time, carried: Carried) -> u64 {
        let pn = self.next_pn;
        self.next_pn += 1;
        self.in_flight.push(pn, Sent { at: now, carried });
        pn
    }

    /// Processes an acknowledgement and returns what it means for the messages, in the order
    /// to apply them: cancellation verdicts first, then acknowledged pieces, then pieces lost
    /// by the packet threshold. The caller applies each to its scheduler and, when
    /// [`Scheduler::handle_acked`](crate::nai::Scheduler::handle_acked) reports a message acknowledged in full, calls
    /// [`SppSender::on_message_acked`].
    pub fn handle_ack(&mut self, now: Time, ack: &AckFrame) -> Vec<SppOutcome> {
        let mut out = Vec::new();
        match ack.window {
            // Absolute limits: a reordered ACK's smaller one changes nothing.
            Some(w) if self.heard_limit => {
                self.peer_limit = Some(self.peer_limit.map_or(w.limit, |c| c.max(w.limit)));
                self.peer_window = w.size;
            }
            Some(w) => {
                self.peer_limit = Some(w.limit);
                self.peer_window = w.size;
                self.heard_limit = true;
            }
            None => self.peer_limit = None,
        }
        for v in &ack.verdicts {
            if let Some(open) = self.open.get(&v.wire_seq)
                && let Some(n) = open.notice
            {
                if v.unseen {
                    // The receiver never held it: its room comes back to this side.
                    self.started_charge = self.started_charge.saturating_sub(open.charge);
                }
                if n.confirm {
                    out.push(SppOutcome::CancelResolved {
                        id: open.id,
                        delivered: v.delivered,
                    });
                }
                self.open.remove(&v.wire_seq);
            }
        }
        let mut newly = std::mem::take(&mut self.acked);
        newly.clear();
        for &(s, e) in &ack.ranges {
            // `parse` only yields ordered ranges, but a frame built by hand may not be:
            // an empty or inverted range acknowledges nothing (and must not panic `range`).
            if s >= e {
                continue;
            }
            self.in_flight.remove_range(s, e, &mut newly);
        }
        if newly.is_empty() {
            self.acked = newly;
            return out;
        }
        self.backoffs = 0;
        out.reserve(newly.len());
        if let Some(&(pn, sent)) = newly.iter().max_by_key(|(pn, _)| *pn)
            && self.largest_acked.is_none_or(|l| pn > l)
        {
            self.largest_acked = Some(pn);
            self.rtt.on_sample(now - sent.at);
        }
        for (_, sent) in newly.drain(..) {
            match sent.carried {
                Carried::Data {
                    id,
                    wire_seq,
                    offset,
                    len,
                } => out.push(SppOutcome::Acked {
                    id,
                    wire_seq,
                    offset,
                    len,
                }),
                Carried::Cancel { wire_seq } => {
                    // Acknowledged without its verdict (verdicts overflowed): ask again.
                    if let Some(n) = self.open.get_mut(&wire_seq).and_then(|o| o.notice.as_mut()) {
                        n.in_flight = None;
                        self.due_notices.insert(wire_seq);
                    }
                }
            }
        }
        if let Some(largest) = self.largest_acked {
            let limit = largest.saturating_sub(self.config.packet_threshold);
            let mut lost = Vec::new();
            self.in_flight.remove_range(0, limit, &mut lost);
            self.declare_lost(lost, &mut out);
        }
        self.acked = newly;
        out
    }

    /// The scheduler found message `wire_seq` acknowledged in full: the receiver delivered it
    /// and may forget it, so it is no longer open.
    pub fn on_message_acked(&mut self, wire_seq: u64) {
        self.open.remove(&wire_seq);
    }

    /// Packets taken out of flight as lost: their pieces are to be sent again, their
    /// CANCELs are due again.
    fn declare_lost(&mut self, lost: Vec<(u64, Sent)>, out: &mut Vec<SppOutcome>) {
        for (pn, sent) in lost {
            self.stats.lost_packets += 1;
            match sent.carried {
                Carried::Data {
                    id, offset, len, ..
                } => out.push(SppOutcome::Lost { id, offset, len }),
                Carried::Cancel { wire_seq } => {
                    if let Some(n) = self.open.get_mut(&wire_seq).and_then(|o| o.notice.as_mut())
                        && n.in_flight == Some(pn)
                    {
                        n.in_flight = None;
                        self.due_notices.insert(wire_seq);
                    }
                }
            }
        }
    }

    /// The retransmission timer: the oldest packet in flight plus the backed-off RTO.
    pub fn poll_timeout(&self) -> Option<Time> {
        let oldest = self.in_flight.oldest()?;
        Some(oldest.at + self.rtt.backed_off_rto(self.backoffs))
    }

    /// On expiry of the retransmission timer, every packet older than the RTO is lost
    /// (RFC 6298 §5.5 backoff applies to the next timer); returns the lost pieces.
    pub fn handle_timeout(&mut self, now: Time) -> Vec<SppOutcome> {
        let mut out = Vec::new();
        if self.poll_timeout().is_none_or(|t| t > now) {
            return out;
        }
        let rto = self.rtt.backed_off_rto(self.backoffs);
        let mut lost = Vec::new();
        self.in_flight
            .remove_where(|s| s.at + rto <= now, &mut lost);
        self.stats.timeouts += 1;
        self.backoffs = self.backoffs.saturating_add(1);
        self.declare_lost(lost, &mut out);
        out
    }

    /// The peer answered again after a silence (see [`crate::session::Liveness`]): the
    /// retransmission timer's backoff, grown while nothing could be answered, starts over,
    /// so what is still in flight is resent within one RTO rather than after minutes.
    pub fn on_peer_back(&mut self) {
        self.backoffs = 0;
    }

    /// Packets in flight.
    pub fn in_flight_packets(&self) -> usize {
        self.in_flight.len()
    }

    /// Messages open (the receiver may hold state for them).
    pub fn open_messages(&self) -> usize {
        self.open.len()
    }

    /// Counters.
    pub fn stats(&self) -> &SppStats {
        &self.stats
    }

    /// The RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }
}
