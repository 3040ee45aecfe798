//! TCP-ELFN, the network-assisted baseline of papers/004 (§1, §5: "TCP-ELFN collects link
//! state information directly from the network, so it is expected to be more accurate"):
//! NewReno plus explicit link-failure notifications (Holland and Vaidya, MobiCom '99).
//!
//! When a router cannot forward because a link of the route broke, it tells the sender. The
//! sender then "freezes": it keeps its window and stops sending new data (standby), probing
//! the path until an acknowledgement returns, and resumes with the frozen window. Everything
//! else is NewReno. As a policy on our one TCP:
//!
//! | event | action |
//! |---|---|
//! | [`on_link_failure`](CongestionController::on_link_failure) | save `cwnd`/`ssthresh`, enter standby |
//! | RTO in standby | the probe was lost: nothing changes (no window cut); the stream's go-back-N resends the head as the next probe |
//! | third duplicate ACK in standby | the path is back and the losses were the failure's: leave standby, retransmit, keep the window (restored when recovery ends) |
//! | new ACK in standby | the path is back: leave standby with the frozen window |
//! | anything else | NewReno (RFC 5681, RFC 6582) |
//!
//! Probes are one small segment at a time (one byte, as TCP's zero-window probe), while
//! nothing is in flight. Their spacing is set by whoever drives the stream: the stream's RTO
//! (backed off) by default, or periodic by calling [`crate::tcp::Connection::reset_rto`] while
//! [`Elfn::in_standby`] (the simulator's ELFN agent does this).

use super::{AckInfo, CongestionController, CongestionSignal, NewReno, SendPermit};
use crate::time::Time;

/// Payload bytes of a standby probe: one, as TCP's zero-window probe (RFC 9293 §3.8.6.1).
const PROBE_BYTES: u64 = 1;

/// The TCP-ELFN controller. See the module docs.
#[derive(Clone, Debug)]
pub struct Elfn {
    cc: NewReno,
    /// The frozen window `(cwnd, ssthresh)` while in standby or in a recovery that must not
    /// shrink it.
    frozen: Option<(u64, u64)>,
    standby: bool,
    notifications: u64,
    probe_timeouts: u64,
    resumptions: u64,
}

impl Elfn {
    /// A sender with an initial window of `iw_bytes` and an unbounded ssthresh.
    pub fn new(iw_bytes: u64) -> Elfn {
        Elfn {
            cc: NewReno::with_initial_window(iw_bytes),
            frozen: None,
            standby: false,
            notifications: 0,
            probe_timeouts: 0,
            resumptions: 0,
        }
    }

    /// An ELFN controller sized for a stream configuration, boxed for
    /// [`crate::tcp::Connection::connect`].
    pub fn for_tcp(tcp: &crate::tcp::TcpConfig) -> Box<dyn CongestionController> {
        Box::new(Elfn::new(tcp.initial_window.bytes(u64::from(tcp.mss))))
    }

    /// Whether the sender is frozen, waiting for the path to come back.
    pub fn in_standby(&self) -> bool {
        self.standby
    }

    fn window_now(&self) -> (u64, u64) {
        self.frozen
            .unwrap_or((self.cc.window(), self.cc.ssthresh().unwrap_or(u64::MAX)))
    }

    fn resume(&mut self) {
        self.standby = false;
        self.resumptions = self.resumptions.saturating_add(1);
    }
}

impl CongestionController for Elfn {
    fn on_sent(&mut self, now: Time, bytes: u64, retransmission: bool) {
        self.cc.on_sent(now, bytes, retransmission);
    }

    fn on_ack(&mut self, now: Time, ack: &AckInfo) {
        if self.standby {
            // The path is back: resume with the frozen window (the probe's ACK does not grow
            // it).
            self.resume();
            if let Some((cwnd, ssthresh)) = self.frozen.take() {
                self.cc = NewReno::with_state(cwnd, ssthresh);
            }
            return;
        }
        self.cc.on_ack(now, ack);
    }

    fn on_congestion_event(
        &mut self,
        now: Time,
        signal: CongestionSignal,
        bytes_in_flight: u64,
        smss: u64,
    ) {
        match (self.standby, signal) {
            (true, CongestionSignal::Timeout) => {
                self.probe_timeouts = self.probe_timeouts.saturating_add(1);
            }
            (true, CongestionSignal::DuplicateAcks) => {
                // Losses caused by the failure: retransmit without a cut, as NewReno's
                // recovery with ssthresh = cwnd (RFC 6582 §3.2 step 2 inflation).
                self.resume();
                let (cwnd, ssthresh) = self.window_now();
                self.frozen = Some((cwnd, ssthresh));
                self.cc = NewReno::with_state(cwnd.saturating_add(3 * smss), cwnd.max(2 * smss));
            }
            _ => {
                self.frozen = None;
                self.cc
                    .on_congestion_event(now, signal, bytes_in_flight, smss);
            }
        }
    }

    fn on_recovery_dup_ack(&mut self, now: Time, smss: u64) {
        self.cc.on_recovery_dup_ack(now, smss);
    }

    fn on_partial_ack(&mut self, now: Time, ack: &AckInfo) {
        self.cc.on_partial_ack(now, ack);
    }

    fn on_recovery_end(&mut self, now: Time, ack: &AckInfo) {
        match self.frozen.take() {
            Some((cwnd, ssthresh)) if !self.standby => {
                self.cc = NewReno::with_state(cwnd, ssthresh);
            }
            keep => {
                self.frozen = keep;
                self.cc.on_recovery_end(now, ack);
            }
        }
    }

    fn on_pipe_recovery_start(&mut self, now: Time, smss: u64) {
        self.cc.on_pipe_recovery_start(now, smss);
    }

    fn send_permit(&mut self, now: Time, bytes_in_flight: u64, bytes: u64) -> SendPermit {
        if self.standby {
            return if bytes_in_flight == 0 {
                SendPermit::Now
            } else {
                SendPermit::Blocked
            };
        }
        self.cc.send_permit(now, bytes_in_flight, bytes)
    }

    fn on_link_failure(&mut self, _now: Time) {
        self.notifications = self.notifications.saturating_add(1);
        if !self.standby {
            self.frozen = Some(self.window_now());
            self.standby = true;
        }
    }

    fn max_segment_bytes(&self) -> Option<u64> {
        self.standby.then_some(PROBE_BYTES)
    }

    /// `standby` (0 or 1), then the counts of notifications, probe timeouts and resumptions.
    fn policy_counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("standby", u64::from(self.standby)),
            ("notifications", self.notifications),
            ("probe_timeouts", self.probe_timeouts),
            ("resumptions", self.resumptions),
        ]
    }

    fn window(&self) -> u64 {
        self.frozen.map_or_else(|| self.cc.window(), |f| f.0)
    }

    fn ssthresh(&self) -> Option<u64> {
        self.frozen.map(|f| f.1).or_else(|| self.cc.ssthresh())
    }

    fn name(&self) -> &'static str {
        "elfn"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMSS: u64 = 1000;
    const T0: Time = Time::ZERO;

    fn ack(acked: u64, flight: u64) -> AckInfo {
        AckInfo {
            newly_acked_bytes: acked,
            bytes_in_flight: flight,
            rtt_sample: None,
            smss: SMSS,
        }
    }

    /// In congestion avoidance: cwnd 20, ssthresh 15 segments.
    fn elfn() -> Elfn {
        let mut e = Elfn::new(2 * SMSS);
        e.cc = NewReno::with_state(20 * SMSS, 15 * SMSS);
        e
    }

    #[test]
    fn test_established_timeout_without_notification_is_newreno() {
        let mut e = elfn();
        e.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
        assert_eq!(e.window(), SMSS);
        assert_eq!(e.ssthresh(), Some(10 * SMSS));
    }

    #[test]
    fn test_standby_timeouts_keep_the_window_and_an_ack_restores_it() {
        let mut e = elfn();
        e.on_link_failure(T0);
        assert!(e.in_standby());
        assert_eq!(e.max_segment_bytes(), Some(1));
        assert_eq!(e.send_permit(T0, 5 * SMSS, SMSS), SendPermit::Blocked);
        for _ in 0..3 {
            e.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
        }
        assert_eq!((e.window(), e.ssthresh()), (20 * SMSS, Some(15 * SMSS)));
        assert_eq!(e.send_permit(T0, 0, 1), SendPermit::Now);
        e.on_ack(T0, &ack(1, 0));
        assert!(!e.in_standby());
        assert_eq!(e.max_segment_bytes(), None);
        assert_eq!((e.window(), e.ssthresh()), (20 * SMSS, Some(15 * SMSS)));
        assert_eq!(
            e.policy_counters(),
            vec![
                ("standby", 0),
                ("notifications", 1),
                ("probe_timeouts", 3),
                ("resumptions", 1)
            ]
        );
        // Back to NewReno: congestion avoidance, about one SMSS per window of ACKs.
        for _ in 0..20 {
            e.on_ack(T0, &ack(SMSS, 19 * SMSS));
        }
        assert!(
            (20 * SMSS + 1..=21 * SMSS).contains(&e.window()),
            "{}",
            e.window()
        );
    }

    #[test]
    fn test_standby_dup_acks_recover_without_a_cut() {
        let mut e = elfn();
        e.on_link_failure(T0);
        e.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
        assert!(!e.in_standby());
        e.on_recovery_end(T0, &ack(20 * SMSS, 0));
        assert_eq!((e.window(), e.ssthresh()), (20 * SMSS, Some(15 * SMSS)));
        // A later third duplicate ACK without a notification halves it (NewReno).
        e.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
        e.on_recovery_end(T0, &ack(20 * SMSS, 15 * SMSS));
        assert_eq!(e.window(), 10 * SMSS);
    }
}
