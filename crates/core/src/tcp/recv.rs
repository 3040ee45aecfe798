//! The receiving half of a stream: in-order delivery, out-of-order ranges, and when to
//! acknowledge (RFC 5681 §4.2 delayed ACKs, immediate ACKs for out-of-order data and for
//! segments that fill a hole, RFC 9293 §3.10.7.4; a window update when reading reopens a
//! window the sender sees mostly closed, RFC 9293 §3.8.6.2.2).

use super::options::MAX_SACK_BLOCKS;
use super::ranges::insert_merged;
use crate::time::Time;
use std::time::Duration;

/// Bound on remembered out-of-order ranges: one range per hole, and a window of 1 GiB in
/// 1 KiB segments could not plausibly have more holes than this.
const MAX_OOO_RANGES: usize = 1024;

/// When the next ACK is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckDue {
    None,
    At(Time),
    Now,
}

/// Receiver state.
#[derive(Debug)]
pub(super) struct RecvHalf {
    /// Next position expected (RFC 9293 RCV.NXT). 0 until the SYN arrives.
    nxt: u64,
    /// Received ranges above `nxt`, sorted and disjoint.
    ooo: Vec<(u64, u64)>,
    /// Bytes delivered in order but not yet read by the application.
    unread: u64,
    /// Total bytes delivered in order.
    delivered: u64,
    /// Receive buffer size: the window is this minus `unread`.
    buffer: u64,
    /// Position of the peer's FIN, once seen.
    fin_at: Option<u64>,
    fin_delivered: bool,
    delayed_ack: Option<Duration>,
    /// Full segments received since the last ACK (RFC 5681 §4.2: ACK at least every second).
    unacked_segments: u32,
    /// In-order segments acknowledged together (2, RFC 5681 §4.2; more with the "increase the
    /// number of delayed ACKs" environment action).
    ack_every: u32,
    due: AckDue,
    /// Extra ACKs the application asked for (the "extra duplicate ACKs" environment action).
    extra_acks: u32,
    /// Out-of-order ranges to report in SACK blocks, most recent first (RFC 2018 §4).
    sack_recent: Vec<(u64, u64)>,
    /// Our effective send MSS, taken as the sender's (RFC 9293 §3.8.6.2.2: "the receiver
    /// must use its own Eff.snd.MSS, making the assumption that it is the same as the
    /// sender's"): the step by which a window update is worth a segment.
    mss: u64,
    /// The right edge of the window last advertised (RCV.NXT + RCV.WND as the peer knows
    /// them): what the peer may send up to until it hears from us again.
    adv_right: u64,
}

impl RecvHalf {
    pub(super) fn new(buffer: u64, delayed_ack: Option<Duration>, mss: u64) -> RecvHalf {
        RecvHalf {
            nxt: 0,
            ooo: Vec::new(),
            unread: 0,
            delivered: 0,
            buffer,
            fin_at: None,
            fin_delivered: false,
            delayed_ack,
            unacked_segments: 0,
            ack_every: 2,
            due: AckDue::None,
            extra_acks: 0,
            sack_recent: Vec::new(),
            mss: mss.max(1),
            adv_right: 0,
        }
    }

    /// The peer's SYN arrived: the stream begins after it.
    pub(super) fn on_syn(&mut self) {
        if self.nxt == 0 {
            self.nxt = 1;
        }
        self.due = AckDue::Now;
    }

    /// A segment advertising a window of `window` bytes (as the peer reads it, after
    /// scaling) from RCV.NXT is leaving.
    pub(super) fn on_window_sent(&mut self, window: u64) {
        self.adv_right = self.nxt.saturating_add(window);
    }

    pub(super) fn nxt(&self) -> u64 {
        self.nxt
    }

    /// The window to advertise, in bytes.
    pub(super) fn window(&self) -> u64 {
        self.buffer.saturating_sub(self.unread)
    }

    /// Handles `len` payload bytes at `pos` (and a FIN after them if `fin`).
    /// Returns the number of bytes newly delivered in order.
    pub(super) fn on_segment(&mut self, now: Time, pos: u64, len: u64, fin: bool) -> u64 {
        if fin {
            self.fin_at.get_or_insert(pos + len);
        }
        let end = pos.saturating_add(len);
        let window_end = self.nxt + self.window();
        if len > 0 && (end <= self.nxt || pos >= window_end) {
            // Entirely old (a retransmission we already have) or beyond the window:
            // acknowledge at once so the sender learns where we are.
            self.due = AckDue::Now;
            return 0;
        }
        let end = end.min(window_end);
        let had_hole = !self.ooo.is_empty();
        let mut advanced = 0;
        if len > 0 {
            if pos <= self.nxt {
                advanced = end - self.nxt;
                self.nxt = end;
                advanced += self.absorb_ooo();
            } else {
                insert_merged(&mut self.ooo, pos, end, MAX_OOO_RANGES);
            }
        }
        self.refresh_sack(if advanced == 0 && len > 0 {
            Some(pos)
        } else {
            None
        });
        self.delivered += advanced;
        self.unread += advanced;
        let fin_now = !self.fin_delivered && self.fin_at == Some(self.nxt);
        if fin_now {
            self.fin_delivered = true;
            self.nxt += 1;
        }

        if advanced == 0 && len > 0 {
            // Out of order: RFC 5681 §4.2 says ACK immediately (the duplicate ACK).
            self.due = AckDue::Now;
        } else if had_hole || fin_now || self.delayed_ack.is_none() {
            // Filling a hole also gets an immediate ACK (RFC 5681 §4.2).
            self.due = AckDue::Now;
        } else if advanced > 0 {
            self.unacked_segments += 1;
            if self.unacked_segments >= self.ack_every {
                self.due = AckDue::Now;
            } else if self.due == AckDue::None {
                let delay = self.delayed_ack.unwrap_or_default();
                self.due = AckDue::At(now + delay);
            }
        }
        advanced
    }

    /// RFC 2018 §4: "The first SACK block ... MUST specify the contiguous block of data
    /// containing the segment which triggered this ACK"; the others repeat the most recently
    /// reported blocks. Each remembered block is re-read from the current out-of-order ranges,
    /// so merged or delivered ranges are reported as they are now.
    fn refresh_sack(&mut self, newest: Option<u64>) {
        if self.ooo.is_empty() {
            // Nothing out of order (the common case): nothing to report, nothing to allocate.
            self.sack_recent.clear();
            return;
        }
        let mut list: Vec<(u64, u64)> = Vec::with_capacity(MAX_SACK_BLOCKS);
        let starts = newest
            .into_iter()
            .chain(self.sack_recent.iter().map(|r| r.0));
        for p in starts {
            if let Some(&r) = self.ooo.iter().find(|&&(s, e)| s <= p && p < e)
                && !list.contains(&r)
            {
                list.push(r);
            }
        }
        list.truncate(MAX_SACK_BLOCKS);
        self.sack_recent = list;
    }

    /// The ranges to report as SACK blocks, most recent first.
    pub(super) fn sack_ranges(&self) -> &[(u64, u64)] {
        &self.sack_recent
    }

    fn absorb_ooo(&mut self) -> u64 {
        let mut gained = 0;
        while let Some(&(s, e)) = self.ooo.first() {
            if s > self.nxt {
                break;
            }
            if e > self.nxt {
                gained += e - self.nxt;
                self.nxt = e;
            }
            self.ooo.remove(0);
        }
        gained
    }

    /// The application consumed `bytes` of delivered data (opens the window). A window
    /// update is due at once when the read reopened enough of a window the sender sees
    /// mostly closed ([`RecvHalf::window_update_due`]).
    pub(super) fn read(&mut self, bytes: u64) -> u64 {
        let n = bytes.min(self.unread);
        self.unread -= n;
        if n > 0 && self.window_update_due() {
            self.due = AckDue::Now;
        }
        n
    }

    /// Whether the window has opened enough beyond what the peer was last told to be worth
    /// a segment of its own.
    ///
    /// RFC 9293 §3.8.6.2.2 (receiver SWS avoidance): the right edge moves only once
    /// "RCV.BUFF - RCV.USER - RCV.WND >= min( Fr * RCV.BUFF, Eff.snd.MSS )" with Fr = 1/2,
    /// RCV.WND being what the peer may still send. Without an update the sender learns of
    /// the new window only from its next probe (a retransmission timeout, backed off).
    ///
    /// Sent only while the peer's usable window is at most half the buffer (Linux's
    /// `tcp_cleanup_rbuf` rule): above that the sender is not held back by our window, and
    /// the ACKs its data draws carry the window anyway — an update per read would double the
    /// ACKs of a reader that keeps up. Not after the peer's FIN: nothing more will come.
    fn window_update_due(&self) -> bool {
        if self.fin_delivered || self.nxt == 0 {
            return false;
        }
        let offered = self.adv_right.saturating_sub(self.nxt);
        let step = (self.buffer / 2).min(self.mss).max(1);
        offered <= self.buffer / 2 && self.window() >= offered.saturating_add(step)
    }

    pub(super) fn unread(&self) -> u64 {
        self.unread
    }

    pub(super) fn delivered(&self) -> u64 {
        self.delivered
    }

    pub(super) fn fin_delivered(&self) -> bool {
        self.fin_delivered
    }

    /// An ACK should be sent now.
    pub(super) fn ack_due(&self, now: Time) -> bool {
        match self.due {
            AckDue::None => self.extra_acks > 0,
            AckDue::At(t) => t <= now || self.extra_acks > 0,
            AckDue::Now => true,
        }
    }

    /// An ACK (pure or piggybacked) was sent.
    pub(super) fn on_ack_sent(&mut self, now: Time) {
        let was_due = match self.due {
            AckDue::Now => true,
            AckDue::At(t) => t <= now,
            AckDue::None => false,
        };
        if !was_due {
            self.extra_acks = self.extra_acks.saturating_sub(1);
        }
        self.due = AckDue::None;
        self.unacked_segments = 0;
    }

    pub(super) fn poll_timeout(&self) -> Option<Time> {
        match self.due {
            AckDue::At(t) => Some(t),
            _ => None,
        }
    }

    pub(super) fn set_ack_every(&mut self, segments: u32) {
        self.ack_every = segments.max(1);
    }

    pub(super) fn set_delayed_ack(&mut self, delay: Option<Duration>) {
        self.delayed_ack = delay;
        if delay.is_none() && matches!(self.due, AckDue::At(_)) {
            self.due = AckDue::Now;
        }
    }

    pub(super) fn request_extra_acks(&mut self, n: u32) {
        self.extra_acks = self.extra_acks.saturating_add(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn established(delayed: Option<Duration>) -> RecvHalf {
        let mut r = RecvHalf::new(1 << 20, delayed, 1000);
        r.on_syn();
        r.on_ack_sent(Time::ZERO);
        r
    }

    #[test]
    fn test_in_order_delivery_advances_nxt() {
        let mut r = established(None);
        assert_eq!(r.on_segment(Time::ZERO, 1, 100, false), 100);
        assert_eq!(r.nxt(), 101);
        assert!(r.ack_due(Time::ZERO));
    }

    #[test]
    fn test_hole_is_filled_and_acked_immediately() {
        let mut r = established(Some(Duration::from_millis(200)));
        assert_eq!(r.on_segment(Time::ZERO, 101, 100, false), 0);
        assert!(r.ack_due(Time::ZERO), "out-of-order data is acked at once");
        r.on_ack_sent(Time::ZERO);
        assert_eq!(r.on_segment(Time::ZERO, 1, 100, false), 200);
        assert!(r.ack_due(Time::ZERO), "filling a hole is acked at once");
        assert_eq!(r.nxt(), 201);
    }

    #[test]
    fn test_ack_every_third_segment_when_asked() {
        let now = Time::ZERO;
        let mut r = established(Some(Duration::from_millis(200)));
        r.set_ack_every(3);
        r.on_segment(now, 1, 100, false);
        assert!(!r.ack_due(now));
        r.on_segment(now, 101, 100, false);
        assert!(!r.ack_due(now), "two segments wait for the third");
        r.on_segment(now, 201, 100, false);
        assert!(r.ack_due(now));
    }

    #[test]
    fn test_delayed_ack_waits_for_second_segment_or_timer() {
        let mut r = established(Some(Duration::from_millis(200)));
        r.on_segment(Time::ZERO, 1, 100, false);
        assert!(!r.ack_due(Time::ZERO));
        assert_eq!(r.poll_timeout(), Some(Time::from_millis(200)));
        assert!(r.ack_due(Time::from_millis(200)));
        r.on_segment(Time::ZERO, 101, 100, false);
        assert!(r.ack_due(Time::ZERO), "every second segment is acked");
    }

    #[test]
    fn test_sack_ranges_most_recent_first_and_refreshed() {
        let mut r = established(None);
        r.on_segment(Time::ZERO, 201, 100, false);
        r.on_segment(Time::ZERO, 501, 100, false);
        assert_eq!(r.sack_ranges(), [(501, 601), (201, 301)]);
        // Extending the older block makes it the most recent.
        r.on_segment(Time::ZERO, 301, 100, false);
        assert_eq!(r.sack_ranges(), [(201, 401), (501, 601)]);
        // Filling the first hole delivers [1, 401): only [501, 601) remains to report.
        r.on_segment(Time::ZERO, 1, 200, false);
        assert_eq!(r.sack_ranges(), [(501, 601)]);
    }

    #[test]
    fn test_fin_after_data_is_delivered_once() {
        let mut r = established(None);
        r.on_segment(Time::ZERO, 1, 10, true);
        assert!(r.fin_delivered());
        assert_eq!(r.nxt(), 12);
        assert_eq!(r.on_segment(Time::ZERO, 1, 10, true), 0);
        assert_eq!(r.nxt(), 12);
    }

    #[test]
    fn test_window_shrinks_with_unread_data() {
        let mut r = RecvHalf::new(1000, None, 100);
        r.on_syn();
        r.on_segment(Time::ZERO, 1, 600, false);
        assert_eq!(r.window(), 400);
        // Data beyond the window is cut off.
        assert_eq!(r.on_segment(Time::ZERO, 601, 600, false), 400);
        assert_eq!(r.read(700), 700);
        assert_eq!(r.window(), 700);
    }

    /// A receiver whose window the peer was told is `buffer` bytes, then filled by `fill`.
    fn filled(buffer: u64, mss: u64, fill: u64) -> RecvHalf {
        let mut r = RecvHalf::new(buffer, Some(Duration::from_millis(200)), mss);
        r.on_syn();
        r.on_window_sent(r.window());
        r.on_ack_sent(Time::ZERO);
        r.on_segment(Time::ZERO, 1, fill, false);
        r.on_window_sent(r.window());
        r.on_ack_sent(Time::ZERO);
        r
    }

    #[test]
    fn test_full_window_read_opens_it_with_an_update() {
        let mut r = filled(10_000, 1000, 10_000);
        assert_eq!(r.window(), 0);
        assert!(!r.ack_due(Time::ZERO));
        // Less than an MSS freed: not yet worth a segment (silly window avoidance).
        r.read(999);
        assert!(!r.ack_due(Time::ZERO));
        r.read(1);
        assert!(r.ack_due(Time::ZERO), "an MSS freed: the update goes now");
        r.on_window_sent(r.window());
        r.on_ack_sent(Time::ZERO);
        // The peer knows the window is 1000 now; the next MSS read tells it again.
        r.read(500);
        assert!(!r.ack_due(Time::ZERO));
        r.read(500);
        assert!(r.ack_due(Time::ZERO));
    }

    #[test]
    fn test_small_buffer_updates_at_half_the_buffer() {
        // min(RCV.BUFF / 2, MSS) with a buffer smaller than two segments.
        let mut r = filled(1000, 1460, 1000);
        r.read(499);
        assert!(!r.ack_due(Time::ZERO));
        r.read(1);
        assert!(r.ack_due(Time::ZERO));
    }

    #[test]
    fn test_reader_that_keeps_up_sends_no_updates() {
        // The peer still may send more than half the buffer: reading sends nothing extra.
        let mut r = filled(10_000, 1000, 4000);
        r.read(4000);
        assert!(!r.ack_due(Time::ZERO));
    }

    #[test]
    fn test_no_update_after_the_peer_finished() {
        let mut r = RecvHalf::new(1000, None, 100);
        r.on_syn();
        r.on_segment(Time::ZERO, 1, 1000, true);
        r.on_window_sent(r.window());
        r.on_ack_sent(Time::ZERO);
        r.read(1000);
        assert!(
            !r.ack_due(Time::ZERO),
            "a FIN came: nothing more to ask for"
        );
    }
}
