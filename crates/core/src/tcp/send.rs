//! The sending half of a stream: what has been sent and acknowledged, loss detection and
//! recovery (RFC 5681 §3.2, RFC 6582 §3.2 NewReno; RFC 6675 SACK-based recovery when both
//! ends negotiated SACK), RFC 3042 limited transmit, and the retransmission timer (RFC 6298
//! §5).
//!
//! Positions are stream positions (see [`super::seq`]): 0 is the SYN, application bytes
//! occupy `1..=written`, and the FIN, when requested, takes the position after the last byte.

use super::TcpStats;
use super::scoreboard::Scoreboard;
use crate::cc::{AckInfo, CongestionController, CongestionSignal, SendPermit};
use crate::rtt::{RtoConfig, RttEstimator};
use crate::time::Time;
use std::collections::VecDeque;

/// RFC 5681 §3.2: the number of duplicate ACKs that triggers fast retransmit.
pub const DUPACK_THRESHOLD: u32 = 3;

/// One transmitted range still awaiting acknowledgement, for RTT sampling under Karn's rule.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    end: u64,
    sent_at: Time,
    retransmitted: bool,
}

/// A segment the sender decided to transmit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DataSegment {
    /// Stream position of the first byte (or of the FIN).
    pub pos: u64,
    /// Payload bytes.
    pub len: u32,
    /// The segment carries the FIN.
    pub fin: bool,
}

/// Sender state.
#[derive(Debug)]
pub(super) struct SendHalf {
    smss: u64,
    /// Oldest unacknowledged position (RFC 9293 SND.UNA).
    una: u64,
    /// Next position to send (SND.NXT); pulled back to `una` by an RTO (go-back-N).
    nxt: u64,
    /// One past the highest position ever sent.
    max: u64,
    /// One past the last application byte written.
    data_end: u64,
    /// The application closed its side: a FIN follows the data.
    fin_requested: bool,
    /// Peer's advertised window, in bytes (already scaled).
    peer_window: u64,
    /// RFC 6582 "recover": `max` when the last loss recovery or RTO began.
    recover: u64,
    in_recovery: bool,
    /// The first partial ACK of this recovery has been seen (RFC 6582 §3.2 step 5 timer rule).
    partial_ack_seen: bool,
    dupacks: u32,
    /// After an RTO, positions below this are retransmissions even when sent "as new".
    rtx_until: u64,
    /// A segment to retransmit at once, outside the congestion window (fast retransmit and
    /// partial-ACK retransmit).
    pending_rtx: Option<u64>,
    in_flight: VecDeque<InFlight>,
    rtt: RttEstimator,
    rto_deadline: Option<Time>,
    backoffs: u32,
    /// A pacing controller asked to be polled again at this time.
    pacing_wakeup: Option<Time>,
    cc: Box<dyn CongestionController>,
    /// RFC 3042 limited transmit is enabled.
    limited_transmit: bool,
    /// What an RTO does to `recover` (RFC 6582 or the paper's Reno).
    recover_after_rto: super::RecoverAfterRto,
    /// New segments limited transmit may still send (one per early duplicate ACK).
    lt_allowance: u32,
    /// Bytes sent by limited transmit since the last new ACK; RFC 3042 §2 keeps them out of
    /// the FlightSize that sets ssthresh.
    lt_bytes: u64,
    /// Both ends negotiated SACK (RFC 2018 §2): recovery follows RFC 6675.
    sack: bool,
    scoreboard: Scoreboard,
    /// RFC 6675 HighRxt: one past the highest position retransmitted in this recovery.
    high_rxt: u64,
    /// The end of a segment sent although the peer's window did not admit all of it
    /// (nothing else was in flight: it probes a closed window, RFC 9293 §3.8.6.1). The
    /// receiver keeps what its window admits and drops the rest, so when a later ACK opens
    /// the window without acknowledging all of it, the rest is sent again at once rather
    /// than at the next retransmission timeout.
    window_probe: Option<u64>,
}

/// What an arriving acknowledgement says, in stream positions.
#[derive(Clone, Copy, Debug)]
pub(super) struct AckInput<'a> {
    /// The cumulative acknowledgement.
    pub ack: u64,
    /// The segment carries no data, SYN or FIN and does not change the window (RFC 5681 §2
    /// definition of a duplicate ACK).
    pub dup_candidate: bool,
    /// SACK blocks `[start, end)`, most recent first (empty without SACK).
    pub sack: &'a [(u64, u64)],
    /// An RTT measured from the timestamp echo (RFC 7323 §4), valid for any new ACK.
    pub ts_rtt: Option<std::time::Duration>,
}

impl SendHalf {
    /// A new sender maximum segment size (a device change, §4 of papers/001).
    pub(super) fn set_smss(&mut self, smss: u64) {
        self.smss = smss.max(1);
    }

    pub(super) fn new(smss: u64, rto: RtoConfig, cc: Box<dyn CongestionController>) -> SendHalf {
        SendHalf {
            smss: smss.max(1),
            una: 0,
            nxt: 1,
            max: 1,
            data_end: 1,
            fin_requested: false,
            peer_window: u64::from(u16::MAX),
            recover: 0,
            in_recovery: false,
            partial_ack_seen: false,
            dupacks: 0,
            rtx_until: 0,
            pending_rtx: None,
            in_flight: VecDeque::new(),
            rtt: RttEstimator::new(rto),
            rto_deadline: None,
            backoffs: 0,
            pacing_wakeup: None,
            cc,
            limited_transmit: false,
            recover_after_rto: super::RecoverAfterRto::Rfc6582,
            lt_allowance: 0,
            lt_bytes: 0,
            sack: false,
            scoreboard: Scoreboard::default(),
            high_rxt: 0,
            window_probe: None,
        }
    }

    /// Turns SACK-based loss recovery on or off (on only when both ends negotiated SACK).
    pub(super) fn set_sack(&mut self, on: bool) {
        self.sack = on;
        if !on {
            self.scoreboard.clear();
        }
    }

    /// Enables or disables RFC 3042 limited transmit.
    pub(super) fn set_limited_transmit(&mut self, on: bool) {
        self.limited_transmit = on;
    }

    /// Chooses RFC 6582's or Reno's handling of duplicate ACKs after an RTO.
    pub(super) fn set_recover_after_rto(&mut self, rule: super::RecoverAfterRto) {
        self.recover_after_rto = rule;
    }

    pub(super) fn write(&mut self, bytes: u64) {
        if !self.fin_requested {
            self.data_end = self.data_end.saturating_add(bytes);
        }
    }

    pub(super) fn close(&mut self) {
        self.fin_requested = true;
    }

    /// The SYN (position 0) was acknowledged: the connection is established.
    pub(super) fn on_syn_acked(&mut self, now: Time, rtt_sample: Option<std::time::Duration>) {
        self.una = 1;
        if let Some(rtt) = rtt_sample {
            self.rtt.on_sample(rtt);
        }
        self.backoffs = 0;
        self.rto_deadline = None;
        let _ = now;
    }

    pub(super) fn set_peer_window(&mut self, bytes: u64) {
        self.peer_window = bytes;
    }

    pub(super) fn una(&self) -> u64 {
        self.una
    }

    pub(super) fn max_sent(&self) -> u64 {
        self.max
    }

    /// The application closed its direction.
    pub(super) fn fin_requested(&self) -> bool {
        self.fin_requested
    }

    /// Position of the FIN if one was requested.
    fn fin_pos(&self) -> Option<u64> {
        self.fin_requested.then_some(self.data_end)
    }

    /// Everything written (and the FIN, if requested) has been acknowledged.
    pub(super) fn all_acked(&self) -> bool {
        match self.fin_pos() {
            Some(fin) => self.una > fin,
            None => self.una >= self.data_end,
        }
    }

    /// Application bytes written but not yet acknowledged.
    pub(super) fn unacked_bytes(&self) -> u64 {
        self.data_end.saturating_sub(self.una.max(1))
    }

    /// Application bytes acknowledged by the peer.
    pub(super) fn acked_bytes(&self) -> u64 {
        self.una.saturating_sub(1).min(self.data_end - 1)
    }

    fn flight_size(&self) -> u64 {
        self.max - self.una
    }

    /// Processes the acknowledgement of an incoming segment.
    pub(super) fn on_ack(&mut self, now: Time, input: AckInput<'_>, stats: &mut TcpStats) {
        let ack = input.ack;
        if ack > self.max {
            // Acknowledges something never sent: ignore (RFC 9293 §3.10.7.4).
            return;
        }
        if self.sack {
            // RFC 6675 §5: the scoreboard is updated with every ACK's SACK information.
            self.scoreboard
                .update(ack.max(self.una), self.max, input.sack);
        }
        if ack > self.una {
            self.on_new_ack(now, ack, input.ts_rtt, stats);
        } else if ack == self.una && input.dup_candidate && self.max > self.una {
            self.on_dup_ack(now, stats);
        }
        // RFC 6675 §5: recovery also starts when IsLost(HighACK + 1), without waiting for
        // DupThresh duplicate ACKs; not before the cumulative ACK passes the last recovery
        // point (§5.1 after a timeout).
        if self.sack
            && !self.in_recovery
            && self.una >= self.recover
            && self.una < self.max
            && self.scoreboard.is_lost(self.una, self.smss)
        {
            self.enter_recovery(now, stats);
        }
        self.on_window_reopened();
    }

    /// A window probe the peer could not take is sent again as soon as its window admits
    /// it: the receiver's window update (RFC 9293 §3.8.6.2.2) ends the wait, not the
    /// retransmission timer.
    fn on_window_reopened(&mut self) {
        let Some(end) = self.window_probe else {
            return;
        };
        if self.una >= end || self.nxt <= self.una {
            // Acknowledged, or gone back to it after a timeout.
            self.window_probe = None;
            return;
        }
        let seg = self.segment_at(self.una);
        if u64::from(seg.len) <= self.peer_window {
            self.window_probe = None;
            self.pending_rtx = Some(self.una);
        }
    }

    fn on_new_ack(
        &mut self,
        now: Time,
        ack: u64,
        ts_rtt: Option<std::time::Duration>,
        stats: &mut TcpStats,
    ) {
        let newly = ack - self.una;
        stats.bytes_acked += newly;
        self.una = ack;
        self.nxt = self.nxt.max(ack);
        self.dupacks = 0;
        self.lt_allowance = 0;
        self.lt_bytes = 0;

        // Karn's rule (RFC 6298 §3): sample only when no acknowledged range was retransmitted.
        let mut newest = None;
        let mut ambiguous = false;
        while let Some(seg) = self.in_flight.front() {
            if seg.end > ack {
                break;
            }
            ambiguous |= seg.retransmitted;
            newest = Some(seg.sent_at);
            self.in_flight.pop_front();
        }
        // RFC 7323 §4.1: with timestamps, the echo times the segment that triggered this ACK,
        // retransmitted or not, so Karn's ambiguity does not arise.
        let rtt_sample = match (ts_rtt, newest, ambiguous) {
            (Some(rtt), _, _) => Some(rtt),
            (None, Some(sent_at), false) => Some(now - sent_at),
            _ => None,
        };
        if let Some(rtt) = rtt_sample {
            self.rtt.on_sample(rtt);
        }
        // RFC 6298 §5 collapses a backed-off RTO once a new RTT measurement arrives; Karn's
        // rule (§3) forbids measuring from retransmitted data. After a timeout every ACK may
        // cover a retransmission, so without timestamps no measurement ever comes and the
        // backoff would be kept forever: one flow among many then waits 2, 4, 8, 16 s between
        // single segments and starves. Stacks in wide use get a fresh sample from every new
        // ACK (RFC 7323 timestamps in Linux and FreeBSD), so their backoff ends as soon as data
        // is acknowledged; we do the same without timestamps: new data acknowledged clears the
        // backoff, and Karn's rule still decides which ACKs feed the estimator.
        self.backoffs = 0;

        let info = AckInfo {
            newly_acked_bytes: newly,
            bytes_in_flight: self.flight_size(),
            rtt_sample,
            smss: self.smss,
        };
        if self.in_recovery {
            if ack >= self.recover {
                self.in_recovery = false;
                self.cc.on_recovery_end(now, &info);
            } else if self.sack {
                // RFC 6675: a partial ACK changes neither cwnd nor what to retransmit; the
                // scoreboard and `pipe` decide what `next_segment` sends. RFC 6298 §5.3
                // restarts the timer below.
            } else {
                // RFC 6582 §3.2 step 5: retransmit the first unacknowledged segment.
                self.pending_rtx = Some(self.una);
                self.cc.on_partial_ack(now, &info);
                if !self.partial_ack_seen {
                    self.partial_ack_seen = true;
                    self.restart_rto(now);
                }
            }
        } else {
            self.cc.on_ack(now, &info);
        }

        // RFC 6298 §5.2/5.3: stop the timer when all data is acknowledged, else restart it.
        if self.una >= self.max {
            self.rto_deadline = None;
        } else if !self.in_recovery || ack >= self.recover || self.sack {
            self.restart_rto(now);
        }
    }

    fn on_dup_ack(&mut self, now: Time, stats: &mut TcpStats) {
        stats.dup_acks_received += 1;
        self.dupacks += 1;
        if self.limited_transmit && !self.in_recovery && self.dupacks < DUPACK_THRESHOLD {
            // RFC 3042 §2: on each of the first two duplicate ACKs, one new segment may be sent
            // if the receiver's window allows, cwnd unchanged (the allowance is spent in
            // `next_segment`).
            self.lt_allowance += 1;
        }
        if self.in_recovery {
            // With SACK, `pipe` already counts what left the network: no inflation.
            if !self.sack {
                self.cc.on_recovery_dup_ack(now, self.smss);
            }
        } else if self.dupacks == DUPACK_THRESHOLD && self.una >= self.recover {
            // RFC 6582 §3.2 steps 1-2. The `una >= recover` guard keeps duplicate ACKs for data
            // sent before an RTO from starting a second, spurious recovery.
            self.enter_recovery(now, stats);
        }
    }

    /// Fast retransmit and the start of loss recovery (RFC 6582 §3.2 steps 1–2, or RFC 6675
    /// §5 steps 4.1–4.3 with SACK).
    fn enter_recovery(&mut self, now: Time, stats: &mut TcpStats) {
        stats.fast_retransmits += 1;
        // RFC 3042 §2: segments sent by limited transmit do not count in the FlightSize that
        // sets ssthresh (RFC 5681 §3.2 step 2).
        // FlightSize is what the sender counts as outstanding, SND.NXT − SND.UNA (as
        // `send_permit` does). It differs from SND.MAX − SND.UNA only while going back after
        // a timeout — reachable here only under the Reno rule, whose duplicate ACKs for
        // pre-timeout data may start recovery then: counting the window the timeout presumed
        // lost gave `cwnd` back half of it and ran away on deep queues (issue 21 item 7).
        let flight = self
            .nxt
            .saturating_sub(self.una)
            .saturating_sub(self.lt_bytes);
        self.lt_allowance = 0;
        self.recover = self.max;
        self.in_recovery = true;
        self.partial_ack_seen = false;
        // Both: "retransmit the first data segment presumed dropped" (RFC 6675 §5 step 4.3).
        self.pending_rtx = Some(self.una);
        self.high_rxt = self.una;
        self.cc
            .on_congestion_event(now, CongestionSignal::DuplicateAcks, flight, self.smss);
        if self.sack {
            // RFC 6675 §5 step 4.2: "ssthresh = cwnd = (FlightSize / 2)".
            self.cc.on_pipe_recovery_start(now, self.smss);
        }
    }

    /// The retransmission timer fired (RFC 6298 §5.4-5.7).
    pub(super) fn on_rto(&mut self, now: Time, stats: &mut TcpStats) {
        self.rto_deadline = None;
        if self.una >= self.max {
            return;
        }
        stats.timeouts += 1;
        let flight = self.flight_size();
        self.cc
            .on_congestion_event(now, CongestionSignal::Timeout, flight, self.smss);
        // RFC 6582 §3.2 step 4: remember the highest position sent, so duplicate ACKs for
        // pre-timeout data do not start fast recovery. Reno (papers/001's senders) has no such
        // guard: `recover` at SND.UNA lets the third duplicate ACK start fast retransmit.
        self.recover = match self.recover_after_rto {
            super::RecoverAfterRto::Rfc6582 => self.max,
            super::RecoverAfterRto::Reno => self.una,
        };
        self.in_recovery = false;
        self.dupacks = 0;
        self.pending_rtx = None;
        self.rtx_until = self.max;
        self.nxt = self.una;
        self.in_flight.clear();
        // RFC 6298 §5.5 backs the timer off, unless the controller froze it (periodic probes).
        if !self.cc.freezes_rto() {
            self.backoffs = self.backoffs.saturating_add(1);
        }
    }

    fn restart_rto(&mut self, now: Time) {
        self.rto_deadline = Some(now + self.rtt.backed_off_rto(self.backoffs));
    }

    /// Restarts the retransmission timer without backoff and, if data is outstanding, resends
    /// from the first unacknowledged byte: the environment-action hook for "the link is back".
    pub(super) fn reset_rto(&mut self, now: Time) {
        self.backoffs = 0;
        if self.una < self.max {
            self.pending_rtx = Some(self.una);
            self.restart_rto(now);
        }
    }

    /// Chooses the next data (or FIN) segment to send, if any is allowed now.
    pub(super) fn next_segment(&mut self, now: Time, stats: &mut TcpStats) -> Option<DataSegment> {
        self.pacing_wakeup = None;
        if let Some(pos) = self.pending_rtx.take()
            && pos < self.max
        {
            let seg = self.segment_at(pos);
            self.record_sent(now, seg, true, stats);
            self.high_rxt = self.high_rxt.max(seg.pos + u64::from(seg.len));
            return Some(seg);
        }
        if self.sack && self.in_recovery {
            return self.next_sack_recovery_segment(now, stats);
        }
        if self.sack && self.nxt < self.rtx_until {
            // Re-sending after a timeout: skip what the receiver reported holding (RFC 6675
            // §5.1). The segment at SND.UNA is never SACKed, so RFC 2018 §8's rule that it be
            // resent after a timeout holds.
            while let Some(end) = self.scoreboard.sacked_until(self.nxt) {
                self.nxt = end;
            }
        }
        let fin_pending = self.fin_pos().is_some_and(|fin| self.nxt <= fin);
        if self.nxt >= self.data_end && !fin_pending {
            return None;
        }
        let seg = self.segment_at(self.nxt);
        // Flow control: never exceed the peer's window (a FIN alone needs no window).
        let end = self.nxt + u64::from(seg.len);
        let beyond_window = seg.len > 0 && end > self.una + self.peer_window;
        if beyond_window && self.nxt > self.una {
            return None;
        }
        let mut limited = false;
        match self
            .cc
            .send_permit(now, self.nxt - self.una, u64::from(seg.len).max(1))
        {
            SendPermit::Now => {}
            SendPermit::At(t) => {
                self.pacing_wakeup = Some(t);
                return None;
            }
            // RFC 3042 §2: only previously unsent data, and only within the receiver's window
            // (checked above).
            SendPermit::Blocked if self.lt_allowance > 0 && seg.len > 0 && self.nxt >= self.max => {
                limited = true;
            }
            SendPermit::Blocked => return None,
        }
        if limited {
            self.lt_allowance -= 1;
            self.lt_bytes += u64::from(seg.len);
        }
        let retransmission = self.nxt < self.rtx_until;
        self.record_sent(now, seg, retransmission, stats);
        if beyond_window {
            self.window_probe = Some(end);
        }
        self.nxt = end + u64::from(seg.fin);
        self.max = self.max.max(self.nxt);
        Some(seg)
    }

    /// RFC 6675 §5 step (C) with §4 `NextSeg()`: while `cwnd - pipe` allows, send (1) the
    /// first lost hole above HighRxt, else (2) new data, else (3) the first unSACKed hole above
    /// HighRxt. Rule (4), the rescue retransmission, is not implemented (it is a MAY).
    fn next_sack_recovery_segment(
        &mut self,
        now: Time,
        stats: &mut TcpStats,
    ) -> Option<DataSegment> {
        let from = self.high_rxt.max(self.una);
        let hole = self.scoreboard.next_hole(from);
        let lost_hole = hole.filter(|&(s, _)| self.scoreboard.is_lost(s, self.smss));
        let fin_pending = self.fin_pos().is_some_and(|fin| self.nxt <= fin);
        let new_data = (self.nxt < self.data_end || fin_pending)
            && self.nxt + self.smss.min(self.data_end - self.nxt.min(self.data_end))
                <= self.una + self.peer_window;
        let (pos, retransmission) = match (lost_hole, new_data, hole) {
            (Some((s, _)), _, _) => (s, true),
            (None, true, _) => (self.nxt, false),
            (None, false, Some((s, _))) => (s, true),
            (None, false, None) => return None,
        };
        let seg = self.segment_at(pos);
        let pipe = self
            .scoreboard
            .pipe(self.una, self.max, self.high_rxt, self.smss);
        match self.cc.send_permit(now, pipe, u64::from(seg.len).max(1)) {
            SendPermit::Now => {}
            SendPermit::At(t) => {
                self.pacing_wakeup = Some(t);
                return None;
            }
            SendPermit::Blocked => return None,
        }
        self.record_sent(now, seg, retransmission, stats);
        let end = seg.pos + u64::from(seg.len) + u64::from(seg.fin);
        if retransmission {
            self.high_rxt = self.high_rxt.max(end);
        } else {
            self.nxt = end;
            self.max = self.max.max(end);
        }
        Some(seg)
    }

    /// The segment starting at `pos`: up to one SMSS of data (less if the controller asks, see
    /// `CongestionController::max_segment_bytes`), plus the FIN if it fits. With
    /// SACK, it stops where SACKed data begins, so nothing the receiver holds is resent.
    fn segment_at(&self, pos: u64) -> DataSegment {
        let mut data_left = self.data_end.saturating_sub(pos);
        if self.sack
            && let Some(next) = self.scoreboard.next_sacked(pos)
        {
            data_left = data_left.min(next - pos);
        }
        // A controller may ask for smaller segments (ADTCP probes).
        let max = self
            .cc
            .max_segment_bytes()
            .map_or(self.smss, |m| m.clamp(1, self.smss));
        let len = data_left.min(max);
        let fin = self.fin_pos() == Some(pos + len);
        DataSegment {
            pos,
            // `len` is at most SMSS, which the config bounds to u16.
            len: crate::convert::u32_sat(len),
            fin,
        }
    }

    fn record_sent(
        &mut self,
        now: Time,
        seg: DataSegment,
        retransmission: bool,
        stats: &mut TcpStats,
    ) {
        let end = seg.pos + u64::from(seg.len) + u64::from(seg.fin);
        stats.segments_sent += 1;
        stats.bytes_sent += u64::from(seg.len);
        if retransmission {
            stats.segments_retransmitted += 1;
            for f in self
                .in_flight
                .iter_mut()
                .filter(|f| f.end > seg.pos && f.end <= end)
            {
                f.retransmitted = true;
            }
        }
        if end > self.max || !retransmission {
            self.in_flight.push_back(InFlight {
                end,
                sent_at: now,
                retransmitted: retransmission,
            });
        }
        self.cc.on_sent(now, u64::from(seg.len), retransmission);
        if self.rto_deadline.is_none() {
            self.restart_rto(now);
        }
    }

    pub(super) fn poll_timeout(&self) -> Option<Time> {
        match (self.rto_deadline, self.pacing_wakeup) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub(super) fn rto_deadline(&self) -> Option<Time> {
        self.rto_deadline
    }

    pub(super) fn pacing_due(&self, now: Time) -> bool {
        self.pacing_wakeup.is_some_and(|t| t <= now)
    }

    pub(super) fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    pub(super) fn rtt_mut(&mut self) -> &mut RttEstimator {
        &mut self.rtt
    }

    pub(super) fn backoffs(&self) -> u32 {
        self.backoffs
    }

    pub(super) fn cc(&self) -> &dyn CongestionController {
        self.cc.as_ref()
    }

    pub(super) fn cc_mut(&mut self) -> &mut dyn CongestionController {
        self.cc.as_mut()
    }

    pub(super) fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    /// Arms the RTO for a handshake retransmission.
    pub(super) fn arm_rto(&mut self, now: Time) {
        self.restart_rto(now);
    }

    pub(super) fn note_backoff(&mut self) {
        self.backoffs = self.backoffs.saturating_add(1);
    }
}
