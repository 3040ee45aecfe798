//! TCP NewReno congestion control: RFC 5681 (slow start, congestion avoidance, fast
//! retransmit/recovery) with the RFC 6582 fast-recovery window arithmetic.
//!
//! The stream owns loss detection and the recovery point; this type owns `cwnd` and
//! `ssthresh` and applies the RFCs' formulas at each event.

use super::{AckInfo, CongestionController, CongestionSignal, SendPermit};
use crate::time::Time;

/// NewReno window state.
#[derive(Clone, Debug)]
pub struct NewReno {
    cwnd: u64,
    ssthresh: u64,
    /// Bytes acknowledged since `cwnd` last grew in congestion avoidance (RFC 5681 §3.1,
    /// the byte-counting form of "cwnd += SMSS*SMSS/cwnd" per ACK).
    ca_acked: u64,
}

impl NewReno {
    /// A controller with the RFC 5681 §3.1 initial window for this SMSS and an unbounded
    /// initial ssthresh.
    pub fn new(smss: u64) -> NewReno {
        NewReno::with_initial_window(initial_window(smss))
    }

    /// A controller with an explicit initial window in bytes.
    pub fn with_initial_window(iw_bytes: u64) -> NewReno {
        NewReno {
            cwnd: iw_bytes.max(1),
            ssthresh: u64::MAX,
            ca_acked: 0,
        }
    }

    /// A controller in a given state: `cwnd` and `ssthresh` in bytes (for policies that save
    /// and restore the window, such as ADTCP's).
    pub fn with_state(cwnd: u64, ssthresh: u64) -> NewReno {
        NewReno {
            cwnd: cwnd.max(1),
            ssthresh,
            ca_acked: 0,
        }
    }
}

/// The initial congestion window a connection starts with (a per-connection option).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum InitialWindow {
    /// RFC 3390 §1, kept by RFC 5681 §3.1: `min(4*SMSS, max(2*SMSS, 4380 bytes))`, that is
    /// 2, 3 or 4 segments by SMSS. The default, and what the papers' TCPs used.
    #[default]
    Rfc3390,
    /// RFC 6928 §2: `min(10*SMSS, max(2*SMSS, 14600 bytes))` ("IW10").
    Iw10,
    /// A fixed number of segments (at least one).
    Segments(u32),
}

impl InitialWindow {
    /// The window in bytes for this SMSS.
    pub fn bytes(self, smss: u64) -> u64 {
        let smss = smss.max(1);
        match self {
            InitialWindow::Rfc3390 => initial_window(smss),
            InitialWindow::Iw10 => (10 * smss).min((2 * smss).max(14_600)),
            InitialWindow::Segments(n) => u64::from(n.max(1)).saturating_mul(smss),
        }
    }
}

/// RFC 5681 §3.1 initial window: 2, 3 or 4 segments depending on SMSS.
pub fn initial_window(smss: u64) -> u64 {
    if smss > 2190 {
        2 * smss
    } else if smss > 1095 {
        3 * smss
    } else {
        4 * smss
    }
}

impl CongestionController for NewReno {
    fn on_sent(&mut self, _now: Time, _bytes: u64, _retransmission: bool) {}

    fn on_ack(&mut self, _now: Time, ack: &AckInfo) {
        let smss = ack.smss.max(1);
        if self.cwnd < self.ssthresh {
            // RFC 5681 §3.1, eq. (2): cwnd += min(N, SMSS).
            self.cwnd += ack.newly_acked_bytes.min(smss);
        } else {
            // RFC 5681 §3.1, eq. (3) in byte-counting form: one SMSS per cwnd of data acked.
            self.ca_acked += ack.newly_acked_bytes;
            if self.ca_acked >= self.cwnd {
                self.ca_acked -= self.cwnd;
                self.cwnd += smss;
            }
        }
    }

    fn on_congestion_event(
        &mut self,
        _now: Time,
        signal: CongestionSignal,
        bytes_in_flight: u64,
        smss: u64,
    ) {
        // RFC 5681 §3.1 eq. (4): ssthresh = max(FlightSize / 2, 2*SMSS).
        self.ssthresh = (bytes_in_flight / 2).max(2 * smss);
        self.ca_acked = 0;
        self.cwnd = match signal {
            // RFC 6582 §3.2 step 2: cwnd = ssthresh + 3*SMSS ("inflates" for the three
            // segments that left the network).
            CongestionSignal::DuplicateAcks => self.ssthresh + 3 * smss,
            // RFC 5681 §3.1: after an RTO, cwnd = loss window = 1 SMSS.
            CongestionSignal::Timeout => smss,
            // RFC 3168 §6.1.2: react as to a loss, without retransmitting.
            CongestionSignal::Ecn => self.ssthresh,
        };
    }

    fn on_pipe_recovery_start(&mut self, _now: Time, _smss: u64) {
        // RFC 6675 §5 step 4.2: no inflation; `pipe` accounts for the segments that left.
        self.cwnd = self.ssthresh;
    }

    fn on_recovery_dup_ack(&mut self, _now: Time, smss: u64) {
        // RFC 6582 §3.2 step 3: inflate by one SMSS per additional duplicate ACK.
        self.cwnd += smss;
    }

    fn on_partial_ack(&mut self, _now: Time, ack: &AckInfo) {
        // RFC 6582 §3.2 step 5: deflate by the amount acknowledged, then add back one SMSS if
        // at least one SMSS was acknowledged.
        self.cwnd = self.cwnd.saturating_sub(ack.newly_acked_bytes);
        if ack.newly_acked_bytes >= ack.smss {
            self.cwnd += ack.smss;
        }
        self.cwnd = self.cwnd.max(ack.smss);
    }

    fn on_recovery_end(&mut self, _now: Time, ack: &AckInfo) {
        // RFC 6582 §3.2 step 6, option (1): cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS).
        self.cwnd = self
            .ssthresh
            .min(ack.bytes_in_flight.max(ack.smss) + ack.smss);
    }

    fn send_permit(&mut self, _now: Time, bytes_in_flight: u64, bytes: u64) -> SendPermit {
        if bytes_in_flight + bytes <= self.cwnd || bytes_in_flight == 0 {
            SendPermit::Now
        } else {
            SendPermit::Blocked
        }
    }

    fn set_window(&mut self, _now: Time, bytes: u64) -> bool {
        self.cwnd = bytes.max(1);
        self.ca_acked = 0;
        true
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn ssthresh(&self) -> Option<u64> {
        Some(self.ssthresh)
    }

    fn name(&self) -> &'static str {
        "newreno"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMSS: u64 = 1000;

    #[test]
    fn test_set_window_hands_over_cwnd_and_keeps_ssthresh() {
        let mut cc = NewReno::with_state(20_000, 8_000);
        assert!(cc.set_window(Time::ZERO, 5_000));
        assert_eq!(cc.window(), 5_000);
        assert_eq!(cc.ssthresh(), Some(8_000));
        // Below ssthresh again: slow start resumes from the handed-over window.
        cc.on_ack(Time::ZERO, &ack(SMSS, 4_000));
        assert_eq!(cc.window(), 6_000);
        assert!(cc.set_window(Time::ZERO, 0));
        assert_eq!(cc.window(), 1, "never zero");
    }

    fn ack(acked: u64, flight: u64) -> AckInfo {
        AckInfo {
            newly_acked_bytes: acked,
            bytes_in_flight: flight,
            rtt_sample: None,
            smss: SMSS,
        }
    }

    #[test]
    fn test_initial_window_options() {
        assert_eq!(InitialWindow::Rfc3390.bytes(1460), 4380);
        assert_eq!(InitialWindow::Iw10.bytes(1460), 14_600);
        assert_eq!(
            InitialWindow::Iw10.bytes(536),
            5360,
            "10*SMSS below 14600 bytes"
        );
        assert_eq!(
            InitialWindow::Iw10.bytes(9000),
            18_000,
            "2*SMSS above 14600 bytes"
        );
        assert_eq!(InitialWindow::Segments(0).bytes(1000), 1000);
        assert_eq!(InitialWindow::Segments(7).bytes(1000), 7000);
    }

    #[test]
    fn test_initial_window_follows_rfc5681() {
        assert_eq!(initial_window(1460), 4380);
        assert_eq!(initial_window(536), 2144);
        assert_eq!(initial_window(9000), 18000);
    }

    #[test]
    fn test_slow_start_ack_grows_by_acked_up_to_smss() {
        let mut cc = NewReno::with_initial_window(4 * SMSS);
        cc.on_ack(Time::ZERO, &ack(SMSS, 0));
        assert_eq!(cc.window(), 5 * SMSS);
        cc.on_ack(Time::ZERO, &ack(3 * SMSS, 0));
        assert_eq!(
            cc.window(),
            6 * SMSS,
            "growth is capped at one SMSS per ACK"
        );
    }

    #[test]
    fn test_congestion_avoidance_grows_one_smss_per_window() {
        let mut cc = NewReno::with_initial_window(10 * SMSS);
        cc.on_congestion_event(Time::ZERO, CongestionSignal::Timeout, 20 * SMSS, SMSS);
        assert_eq!(cc.window(), SMSS);
        assert_eq!(cc.ssthresh(), Some(10 * SMSS));
        // Slow start back up to ssthresh.
        for _ in 0..9 {
            cc.on_ack(Time::ZERO, &ack(SMSS, 0));
        }
        assert_eq!(cc.window(), 10 * SMSS);
        for _ in 0..9 {
            cc.on_ack(Time::ZERO, &ack(SMSS, 0));
        }
        assert_eq!(
            cc.window(),
            10 * SMSS,
            "no growth before a full window is acked"
        );
        cc.on_ack(Time::ZERO, &ack(SMSS, 0));
        assert_eq!(cc.window(), 11 * SMSS);
    }

    #[test]
    fn test_fast_recovery_inflates_deflates_and_exits_at_ssthresh() {
        let mut cc = NewReno::with_initial_window(20 * SMSS);
        cc.on_congestion_event(Time::ZERO, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
        assert_eq!(cc.ssthresh(), Some(10 * SMSS));
        assert_eq!(cc.window(), 13 * SMSS);
        cc.on_recovery_dup_ack(Time::ZERO, SMSS);
        assert_eq!(cc.window(), 14 * SMSS);
        // Partial ACK of 3 segments: deflate by 3, add back 1.
        cc.on_partial_ack(Time::ZERO, &ack(3 * SMSS, 16 * SMSS));
        assert_eq!(cc.window(), 12 * SMSS);
        cc.on_recovery_end(Time::ZERO, &ack(5 * SMSS, 12 * SMSS));
        assert_eq!(cc.window(), 10 * SMSS);
    }

    #[test]
    fn test_ssthresh_never_below_two_segments() {
        let mut cc = NewReno::new(SMSS);
        cc.on_congestion_event(Time::ZERO, CongestionSignal::DuplicateAcks, SMSS, SMSS);
        assert_eq!(cc.ssthresh(), Some(2 * SMSS));
    }

    #[test]
    fn test_window_limits_sending_but_never_stalls_empty_pipe() {
        let mut cc = NewReno::with_initial_window(2 * SMSS);
        assert_eq!(cc.send_permit(Time::ZERO, SMSS, SMSS), SendPermit::Now);
        assert_eq!(
            cc.send_permit(Time::ZERO, 2 * SMSS, SMSS),
            SendPermit::Blocked
        );
        assert_eq!(cc.send_permit(Time::ZERO, 0, 5 * SMSS), SendPermit::Now);
    }
}
