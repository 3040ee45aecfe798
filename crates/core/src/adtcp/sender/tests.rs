//! The sender's reaction to each event in each reported state: `cwnd` and `ssthresh` after
//! every step (Figure 5 of papers/004, state × event).

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

/// A sender in congestion avoidance with cwnd 20 segments and ssthresh 15, that last heard
/// `report` (none: a conventional receiver).
fn sender(report: Option<StateReport>) -> AdtcpSender {
    let mut s = AdtcpSender::with_state(20 * SMSS, 15 * SMSS, SenderConfig::default());
    if let Some(r) = report {
        s.on_network_state(T0, Some(r));
    }
    s
}

const CONGESTION: StateReport = StateReport {
    congestion: true,
    channel_error: false,
    route_change: false,
};
const CHANNEL_ERROR: StateReport = StateReport {
    congestion: false,
    channel_error: true,
    route_change: false,
};
const ROUTE_CHANGE: StateReport = StateReport {
    congestion: false,
    channel_error: false,
    route_change: true,
};

fn window(s: &AdtcpSender) -> (u64, Option<u64>) {
    (s.window(), s.ssthresh())
}

#[test]
fn test_established_third_dup_ack_without_report_is_newreno() {
    for report in [None, Some(StateReport::NORMAL), Some(CONGESTION)] {
        let mut s = sender(report);
        s.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
        assert_eq!(window(&s), (13 * SMSS, Some(10 * SMSS)), "{report:?}");
        s.on_recovery_dup_ack(T0, SMSS);
        assert_eq!(s.window(), 14 * SMSS);
        s.on_recovery_end(T0, &ack(20 * SMSS, 12 * SMSS));
        assert_eq!(window(&s), (10 * SMSS, Some(10 * SMSS)));
        assert_eq!(s.reactions().congestion, 1);
        assert_eq!(
            s.last_reaction().map(|r| r.1),
            Some(NetworkState::Congestion)
        );
    }
}

#[test]
fn test_established_third_dup_ack_channel_error_keeps_the_window() {
    let mut s = sender(Some(CHANNEL_ERROR));
    s.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
    // Recovery inflates from the unreduced window; ssthresh is not touched.
    assert_eq!(window(&s), (23 * SMSS, Some(15 * SMSS)));
    s.on_recovery_dup_ack(T0, SMSS);
    assert_eq!(s.window(), 24 * SMSS);
    s.on_partial_ack(T0, &ack(2 * SMSS, 20 * SMSS));
    assert_eq!(s.window(), 23 * SMSS, "RFC 6582 deflation by 2, plus 1");
    s.on_recovery_end(T0, &ack(20 * SMSS, 5 * SMSS));
    assert_eq!(window(&s), (20 * SMSS, Some(15 * SMSS)));
    assert_eq!(s.reactions().channel_error, 1);
    // Still in congestion avoidance (cwnd >= ssthresh): one SMSS per window acknowledged.
    for _ in 0..20 {
        s.on_ack(T0, &ack(SMSS, 10 * SMSS));
    }
    assert_eq!(s.window(), 21 * SMSS);
}

#[test]
fn test_established_channel_error_in_slow_start_stays_in_slow_start() {
    let mut s = AdtcpSender::new(4 * SMSS, SenderConfig::default());
    s.on_network_state(T0, Some(CHANNEL_ERROR));
    s.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 4 * SMSS, SMSS);
    s.on_recovery_end(T0, &ack(4 * SMSS, 0));
    assert_eq!(window(&s), (4 * SMSS, Some(u64::MAX)));
    s.on_ack(T0, &ack(SMSS, 0));
    assert_eq!(s.window(), 5 * SMSS);
}

#[test]
fn test_established_third_dup_ack_route_change_sets_ssthresh_to_cwnd() {
    let mut s = AdtcpSender::new(4 * SMSS, SenderConfig::default());
    for _ in 0..16 {
        s.on_ack(T0, &ack(SMSS, 0)); // slow start to 20 segments
    }
    assert_eq!(window(&s), (20 * SMSS, Some(u64::MAX)));
    s.on_network_state(T0, Some(ROUTE_CHANGE));
    s.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
    assert_eq!(window(&s), (23 * SMSS, Some(20 * SMSS)));
    s.on_recovery_end(T0, &ack(20 * SMSS, 5 * SMSS));
    assert_eq!(window(&s), (20 * SMSS, Some(20 * SMSS)));
    assert_eq!(s.reactions().route_change, 1);
    // Congestion avoidance, not slow start.
    s.on_ack(T0, &ack(SMSS, 0));
    assert_eq!(s.window(), 20 * SMSS);
}

#[test]
fn test_route_change_and_channel_error_together_act_as_route_change() {
    let both = StateReport {
        channel_error: true,
        route_change: true,
        ..StateReport::NORMAL
    };
    let mut s = sender(Some(both));
    s.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
    s.on_recovery_end(T0, &ack(20 * SMSS, 5 * SMSS));
    assert_eq!(window(&s), (20 * SMSS, Some(20 * SMSS)));
}

#[test]
fn test_established_timeout_with_congestion_or_no_report_is_newreno() {
    for report in [None, Some(CONGESTION)] {
        let mut s = sender(report);
        s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
        assert_eq!(window(&s), (SMSS, Some(10 * SMSS)), "{report:?}");
        assert_eq!(s.phase(), Phase::Established);
        assert_eq!(s.max_segment_bytes(), None);
        assert_eq!(s.reactions().congestion, 1);
    }
}

#[test]
fn test_established_timeout_without_congestion_freezes_and_probes() {
    for report in [StateReport::NORMAL, CHANNEL_ERROR, ROUTE_CHANGE] {
        let mut s = sender(Some(report));
        s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
        assert_eq!(s.phase(), Phase::Probing { failures: 0 }, "{report:?}");
        assert_eq!(window(&s), (20 * SMSS, Some(15 * SMSS)), "frozen");
        assert_eq!(s.reactions().disconnection, 1);
        assert_eq!(
            s.last_reaction().map(|r| r.1),
            Some(NetworkState::Disconnection)
        );
        // Small probes, one at a time.
        assert_eq!(s.max_segment_bytes(), Some(1));
        assert_eq!(s.send_permit(T0, 0, 1), SendPermit::Now);
        assert_eq!(s.send_permit(T0, 1, 1), SendPermit::Blocked);
    }
}

#[test]
fn test_probing_timeout_counts_a_failure_and_keeps_the_window() {
    let mut s = sender(Some(StateReport::NORMAL));
    s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
    s.on_congestion_event(T0, CongestionSignal::Timeout, SMSS, SMSS);
    s.on_congestion_event(T0, CongestionSignal::Timeout, SMSS, SMSS);
    assert_eq!(s.phase(), Phase::Probing { failures: 2 });
    assert_eq!(window(&s), (20 * SMSS, Some(15 * SMSS)));
    assert_eq!(s.reactions().probe_failures, 2);
    assert_eq!(s.reactions().disconnection, 1);
}

#[test]
fn test_probing_new_ack_restores_the_frozen_state() {
    let mut s = sender(Some(StateReport::NORMAL));
    s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
    s.on_congestion_event(T0, CongestionSignal::Timeout, SMSS, SMSS);
    s.on_ack(T0, &ack(1, 0));
    assert_eq!(s.phase(), Phase::Established);
    assert_eq!(window(&s), (20 * SMSS, Some(15 * SMSS)));
    assert_eq!(s.max_segment_bytes(), None);
    assert_eq!(s.reactions().reconnections, 1);
    assert_eq!(s.send_permit(T0, 19 * SMSS, SMSS), SendPermit::Now);
    assert_eq!(s.send_permit(T0, 20 * SMSS, SMSS), SendPermit::Blocked);
}

#[test]
fn test_probing_freezes_the_rto_until_reconnection() {
    // papers/004 §2.1: freeze the RTO and probe periodically while disconnected.
    let mut s = sender(Some(StateReport::NORMAL));
    assert!(
        !s.freezes_rto(),
        "established: the stream backs off as usual"
    );
    s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
    assert!(s.freezes_rto(), "probing");
    s.on_congestion_event(T0, CongestionSignal::Timeout, SMSS, SMSS);
    assert!(s.freezes_rto(), "still probing after a failed probe");
    s.on_ack(T0, &ack(1, 0));
    assert!(!s.freezes_rto(), "reconnected");
    // A congestion timeout is NewReno's: backed off.
    let mut c = sender(Some(CONGESTION));
    c.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
    assert!(!c.freezes_rto());
}

#[test]
fn test_probing_closes_after_max_failures() {
    let mut s = AdtcpSender::with_state(
        20 * SMSS,
        15 * SMSS,
        SenderConfig {
            probe_bytes: 40,
            max_probe_failures: 3,
        },
    );
    s.on_network_state(T0, Some(StateReport::NORMAL));
    s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
    assert_eq!(s.max_segment_bytes(), Some(40));
    for failures in 1..3 {
        s.on_congestion_event(T0, CongestionSignal::Timeout, 40, SMSS);
        assert_eq!(s.phase(), Phase::Probing { failures });
        assert!(!s.close_requested());
    }
    s.on_congestion_event(T0, CongestionSignal::Timeout, 40, SMSS);
    assert_eq!(s.phase(), Phase::Closed);
    assert!(s.close_requested());
    assert_eq!(s.send_permit(T0, 0, 1), SendPermit::Blocked);
    // Closed is final.
    s.on_ack(T0, &ack(SMSS, 0));
    assert_eq!(s.phase(), Phase::Closed);
}

#[test]
fn test_timeout_during_channel_error_recovery_freezes_the_saved_window() {
    let mut s = sender(Some(CHANNEL_ERROR));
    s.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
    s.on_recovery_dup_ack(T0, SMSS);
    assert_eq!(s.window(), 24 * SMSS);
    s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
    assert_eq!(s.phase(), Phase::Probing { failures: 0 });
    assert_eq!(
        window(&s),
        (20 * SMSS, Some(15 * SMSS)),
        "not the inflated window"
    );
}

#[test]
fn test_timeout_after_congestion_report_during_recovery_is_newreno() {
    let mut s = sender(Some(CHANNEL_ERROR));
    s.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
    s.on_network_state(T0, Some(CONGESTION));
    s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
    assert_eq!(window(&s), (SMSS, Some(10 * SMSS)));
    // The recovery that was interrupted does not restore anything later.
    s.on_ack(T0, &ack(SMSS, 0));
    assert_eq!(s.window(), 2 * SMSS);
}

#[test]
fn test_ecn_is_congestion_whatever_the_report() {
    let mut s = sender(Some(CHANNEL_ERROR));
    s.on_congestion_event(T0, CongestionSignal::Ecn, 20 * SMSS, SMSS);
    assert_eq!(window(&s), (10 * SMSS, Some(10 * SMSS)));
    assert_eq!(s.reactions().congestion, 1);
}

#[test]
fn test_sack_recovery_from_channel_error_keeps_the_window() {
    let mut s = sender(Some(CHANNEL_ERROR));
    s.on_congestion_event(T0, CongestionSignal::DuplicateAcks, 20 * SMSS, SMSS);
    s.on_pipe_recovery_start(T0, SMSS);
    assert_eq!(s.window(), 20 * SMSS, "pipe-limited at the old window");
    s.on_recovery_end(T0, &ack(20 * SMSS, 5 * SMSS));
    assert_eq!(window(&s), (20 * SMSS, Some(15 * SMSS)));
}

#[test]
fn test_reports_only_change_the_next_reaction() {
    let mut s = sender(None);
    s.on_network_state(T0, Some(CHANNEL_ERROR));
    assert_eq!(window(&s), (20 * SMSS, Some(15 * SMSS)));
    assert_eq!(s.report(), Some(CHANNEL_ERROR));
    assert_eq!(s.name(), "adtcp");
}

#[test]
fn test_report_withdrawn_falls_back_to_newreno() {
    let mut s = sender(Some(StateReport::NORMAL));
    s.on_network_state(T0, None);
    assert_eq!(s.report(), None);
    s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
    assert_eq!(s.phase(), Phase::Established);
    assert_eq!(window(&s), (SMSS, Some(10 * SMSS)));
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Report(Option<(bool, bool, bool)>),
        Ack(u64),
        DupAcks(u64),
        RecoveryDupAck,
        PartialAck(u64),
        RecoveryEnd(u64),
        Timeout(u64),
        Ecn(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        let bytes = 0u64..40 * SMSS;
        prop_oneof![
            proptest::option::of((any::<bool>(), any::<bool>(), any::<bool>()))
                .prop_map(Op::Report),
            bytes.clone().prop_map(Op::Ack),
            bytes.clone().prop_map(Op::DupAcks),
            Just(Op::RecoveryDupAck),
            bytes.clone().prop_map(Op::PartialAck),
            bytes.clone().prop_map(Op::RecoveryEnd),
            bytes.clone().prop_map(Op::Timeout),
            bytes.prop_map(Op::Ecn),
        ]
    }

    proptest! {
        /// Any sequence of events: the window never vanishes, ssthresh never drops below two
        /// segments once set by a congestion reaction, probing allows exactly one segment in
        /// flight and limits its size, and closed is final.
        #[test]
        fn invariants_hold_after_every_event(ops in proptest::collection::vec(op(), 1..200)) {
            let mut s = AdtcpSender::new(4 * SMSS, SenderConfig { probe_bytes: 7, max_probe_failures: 3 });
            let mut closed = false;
            for op in ops {
                match op {
                    Op::Report(r) => s.on_network_state(T0, r.map(|(congestion, channel_error, route_change)| {
                        StateReport { congestion, channel_error, route_change }
                    })),
                    Op::Ack(b) => s.on_ack(T0, &ack(b, b)),
                    Op::DupAcks(f) => s.on_congestion_event(T0, CongestionSignal::DuplicateAcks, f, SMSS),
                    Op::RecoveryDupAck => s.on_recovery_dup_ack(T0, SMSS),
                    Op::PartialAck(b) => s.on_partial_ack(T0, &ack(b, b)),
                    Op::RecoveryEnd(f) => s.on_recovery_end(T0, &ack(SMSS, f)),
                    Op::Timeout(f) => s.on_congestion_event(T0, CongestionSignal::Timeout, f, SMSS),
                    Op::Ecn(f) => s.on_congestion_event(T0, CongestionSignal::Ecn, f, SMSS),
                }
                prop_assert!(s.window() >= 1);
                if let Some(ss) = s.ssthresh() {
                    prop_assert!(ss >= 2 * SMSS);
                }
                prop_assert!(!closed || s.phase() == Phase::Closed, "closed is final");
                closed = s.phase() == Phase::Closed;
                prop_assert_eq!(s.close_requested(), closed);
                match s.phase() {
                    Phase::Probing { failures } => {
                        prop_assert!(failures < 3);
                        prop_assert_eq!(s.max_segment_bytes(), Some(7));
                        prop_assert_eq!(s.send_permit(T0, 0, 7), SendPermit::Now);
                        prop_assert_eq!(s.send_permit(T0, 7, 7), SendPermit::Blocked);
                    }
                    Phase::Closed => prop_assert_eq!(s.send_permit(T0, 0, 1), SendPermit::Blocked),
                    Phase::Established => prop_assert_eq!(s.max_segment_bytes(), None),
                }
            }
        }
    }
}

#[test]
fn test_policy_counters_expose_phase_and_reactions_through_the_trait() {
    let mut s = sender(Some(StateReport::NORMAL));
    s.on_congestion_event(T0, CongestionSignal::Timeout, 20 * SMSS, SMSS);
    let cc: &dyn CongestionController = &s;
    let counters = cc.policy_counters();
    assert_eq!(counters.first(), Some(&("phase", 1)));
    assert!(counters.contains(&("disconnection", 1)));
    assert!(counters.contains(&("congestion", 0)));
}
