//! The window of ACK-fed flows (RFC 3124 §5.2 `AIMD_CC`: outstanding bytes ≤ cwnd) and
//! TCP/CM's `cm_update` bookkeeping (RFC 3124 §5.1.1): every byte TCP sends is reported back
//! exactly once, so the CM's outstanding count follows the stream's flight through fast
//! recovery and after a timeout.

use super::*;
use crate::cc::{AckInfo, CongestionController, CongestionSignal};
use crate::cm::tcp::CmController;
use std::collections::BTreeMap;

/// A CM with srtt = 100 ms and the 4-MTU initial window (rate 40 kB/s).
fn cm_with(options: FlowOptions) -> (CongestionManager, FlowId) {
    let mut cm = cm();
    let f = cm
        .open(Time::ZERO, DEST, FlowKey(1), options)
        .expect("open");
    cm.update(Time::ZERO, f, Feedback::received(0, Some(ms(100))))
        .expect("update");
    drain(&mut cm);
    (cm, f)
}

/// Sends every grant at once; returns the bytes granted and sent up to `until`.
fn send_grants_until(cm: &mut CongestionManager, f: FlowId, until: Time) -> u64 {
    let mut sent = 0;
    let mut now = Time::ZERO;
    loop {
        let granted: u64 = drain(cm)
            .into_iter()
            .filter_map(|e| match e {
                CmEvent::Grant { bytes, .. } => Some(bytes),
                CmEvent::RateChange { .. } | CmEvent::RequestExpired { .. } => None,
            })
            .sum();
        if granted > 0 {
            cm.notify(now, f, granted).expect("notify");
            sent += granted;
            continue;
        }
        match cm.poll_timeout() {
            Some(t) if t <= until => {
                now = t;
                cm.handle_timeout(t);
            }
            _ => return sent,
        }
    }
}

#[test]
fn test_ack_fed_flow_stops_at_the_window_and_resumes_on_feedback() {
    let (mut cm, f) = cm_with(FlowOptions::acked());
    cm.request(Time::ZERO, f, 100 * MTU).expect("request");
    // The rate alone would allow 40 kB in a second; the window stops it at 4 MTU.
    assert_eq!(send_grants_until(&mut cm, f, Time::from_secs(1)), 4 * MTU);
    assert_eq!(cm.outstanding_bytes(f), Ok(4 * MTU));
    // RFC 3124 §5.2: "When cwnd or ownd are updated and indicate that at least one MTU may be
    // transmitted, AIMD_CC calls the CM to schedule a transmission". One MTU received: ownd
    // -1, slow start cwnd +1, so two more MTUs fit.
    let t = Time::from_secs(1);
    cm.update(t, f, Feedback::received(MTU, None))
        .expect("update");
    assert_eq!(cm.outstanding_bytes(f), Ok(3 * MTU));
    assert_eq!(send_grants_until(&mut cm, f, Time::from_secs(2)), 2 * MTU);
    // No aging for a window-limited flow: a second without feedback leaves the rate alone.
    let r = rate(&cm, f);
    run_until(&mut cm, Time::from_secs(5));
    assert_eq!(rate(&cm, f), r);
    assert_eq!(cm.stats().aging_halvings, 0);
    // A timeout writes the flow's outstanding bytes off: the retransmission may go.
    let timeout = Feedback {
        mode: LossMode::NoFeedback,
        ..Feedback::loss(0, MTU)
    };
    cm.update(Time::from_secs(5), f, timeout).expect("update");
    assert_eq!(cm.outstanding_bytes(f), Ok(0));
}

#[test]
fn test_implicit_flow_is_paced_but_not_window_limited() {
    let (mut cm, f) = cm_with(FlowOptions::implicit());
    cm.request(Time::ZERO, f, 100 * MTU).expect("request");
    let sent = send_grants_until(&mut cm, f, Time::from_millis(500));
    // Paced at 40 kB/s (aged from srtt + G = 101 ms on, without feedback): still at least
    // twice the 4-MTU window, which does not apply to it.
    assert!(sent >= 8 * MTU, "{sent}");
    assert_eq!(cm.outstanding_bytes(f), Ok(0), "not counted");
}

#[test]
fn test_window_limited_flow_does_not_block_a_paced_flow_behind_it() {
    let mut cm = cm();
    let acked = cm
        .open(Time::ZERO, DEST, FlowKey(1), FlowOptions::acked())
        .expect("open");
    let paced = cm
        .open(Time::ZERO, DEST, FlowKey(2), FlowOptions::implicit())
        .expect("open");
    cm.update(Time::ZERO, acked, Feedback::received(0, Some(ms(100))))
        .expect("update");
    drain(&mut cm);
    // Fill the window.
    cm.notify(Time::ZERO, acked, 4 * MTU).expect("notify");
    cm.request(Time::ZERO, acked, 10 * MTU).expect("request");
    cm.request(Time::ZERO, paced, 10 * MTU).expect("request");
    let got = run_until(&mut cm, Time::from_millis(300));
    let to = |flow| {
        got.iter()
            .filter(|(_, e)| matches!(e, CmEvent::Grant { flow: g, .. } if *g == flow))
            .count()
    };
    assert_eq!(to(acked), 0, "window full");
    assert!(to(paced) >= 10, "the paced flow takes the rate: {got:?}");
}

fn ack(newly: u64, in_flight: u64) -> AckInfo {
    AckInfo {
        newly_acked_bytes: newly,
        bytes_in_flight: in_flight,
        rtt_sample: None,
        smss: MTU,
    }
}

/// A TCP/CM controller on its own CM with srtt = 100 ms.
fn controller() -> (CmHandle, Box<dyn CongestionController>, FlowId) {
    let cm = CmHandle::new(CongestionManager::new(config()));
    let (cc, f) = CmController::open(&cm, Time::ZERO, DEST, FlowKey(1)).expect("open");
    CmController::seed_rtt(&cm, Time::ZERO, f, ms(100)).expect("seed");
    (cm, cc, f)
}

fn outstanding(cm: &CmHandle, f: FlowId) -> u64 {
    cm.borrow().outstanding_bytes(f).expect("open")
}

#[test]
fn test_tcp_cm_outstanding_follows_the_flight_through_newreno_recovery() {
    let (cm, mut cc, f) = controller();
    let now = Time::from_secs(1);
    // Segments 1-10 sent; 1 and 5 are lost.
    for _ in 0..10 {
        cc.on_sent(now, MTU, false);
    }
    assert_eq!(outstanding(&cm, f), 10 * MTU);
    // Third duplicate ACK (2, 3, 4 arrived): RFC 3124 §5.1.1 step 4, 3 received + 1 lost.
    cc.on_congestion_event(now, CongestionSignal::DuplicateAcks, 10 * MTU, MTU);
    cc.on_sent(now, MTU, true); // fast retransmit of 1
    assert_eq!(outstanding(&cm, f), 7 * MTU);
    // 6-10 arrive: one MTU each.
    for _ in 0..5 {
        cc.on_recovery_dup_ack(now, MTU);
    }
    // Two new segments (11, 12) go out and arrive during recovery.
    cc.on_sent(now, MTU, false);
    cc.on_sent(now, MTU, false);
    cc.on_recovery_dup_ack(now, MTU);
    cc.on_recovery_dup_ack(now, MTU);
    // Left: the retransmission of 1 and the lost 5.
    assert_eq!(outstanding(&cm, f), 2 * MTU);
    // Partial ACK up to 5 (1-4 acknowledged, 8 segments still below snd_max): step 5, the
    // retransmission arrived and 5 is lost. Then 5 is retransmitted.
    cc.on_partial_ack(now, &ack(4 * MTU, 8 * MTU));
    assert_eq!(outstanding(&cm, f), 0);
    cc.on_sent(now, MTU, true);
    // The ACK that ends recovery acknowledges 5-12: only the retransmission is news.
    cc.on_recovery_end(now, &ack(8 * MTU, 0));
    assert_eq!(outstanding(&cm, f), 0);
    // Normal ACKs report what they acknowledge.
    for _ in 0..3 {
        cc.on_sent(now, MTU, false);
    }
    cc.on_ack(now, &ack(MTU, 2 * MTU));
    assert_eq!(outstanding(&cm, f), 2 * MTU);
}

#[test]
fn test_tcp_cm_timeout_writes_off_the_flight_and_go_back_n_is_reported() {
    let (cm, mut cc, f) = controller();
    let now = Time::from_secs(1);
    for _ in 0..8 {
        cc.on_sent(now, MTU, false);
    }
    cc.on_congestion_event(now, CongestionSignal::Timeout, 8 * MTU, MTU);
    assert_eq!(outstanding(&cm, f), 0, "CM_NO_FEEDBACK: written off");
    // Go-back-N: segment 1 again; its ACK leaves 7 written-off segments "in flight" for the
    // stream, yet the resent MTU is reported.
    cc.on_sent(now, MTU, true);
    assert_eq!(outstanding(&cm, f), MTU);
    cc.on_ack(now, &ack(MTU, 7 * MTU));
    assert_eq!(outstanding(&cm, f), 0, "not stuck at the window");
    // 2 and 3 resent; the receiver had 3-5, so the ACK jumps over 2-5.
    cc.on_sent(now, MTU, true);
    cc.on_sent(now, MTU, true);
    cc.on_ack(now, &ack(4 * MTU, 3 * MTU));
    assert_eq!(outstanding(&cm, f), 0);
    // 6-8 resent and acknowledged: back to normal reporting.
    for _ in 0..3 {
        cc.on_sent(now, MTU, true);
    }
    cc.on_ack(now, &ack(3 * MTU, 0));
    cc.on_sent(now, MTU, false);
    cc.on_sent(now, MTU, false);
    cc.on_ack(now, &ack(MTU, MTU));
    assert_eq!(outstanding(&cm, f), MTU);
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Request(usize, u64),
        Notify(usize, u64),
        Update(usize, u64, u64, u8),
        Advance(u32),
        Timeout,
        Cancel(usize),
        /// To a new macroflow (`false`) or back to flow 0's.
        Move(usize, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..3, 1u64..20_000).prop_map(|(f, b)| Op::Request(f, b)),
            (0usize..3, 0u64..5_000).prop_map(|(f, b)| Op::Notify(f, b)),
            (0usize..3, 0u64..8_000, 0u64..3_000, 0u8..4)
                .prop_map(|(f, r, l, m)| Op::Update(f, r, l, m)),
            (0u32..300_000).prop_map(Op::Advance),
            Just(Op::Timeout),
            (0usize..3).prop_map(Op::Cancel),
            (1usize..3, any::<bool>()).prop_map(|(f, b)| Op::Move(f, b)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Whatever the calls, each macroflow's window count is exactly its window-limited
        /// flows' outstanding plus granted bytes (nothing leaks when grants lapse, flows move
        /// or time out), and probe-less paced flows never count.
        #[test]
        fn window_count_matches_the_flows(ops in proptest::collection::vec(op(), 1..200)) {
            let mut cm = cm();
            let options = [FlowOptions::acked(), FlowOptions::acked(), FlowOptions::implicit()];
            let flows: Vec<FlowId> = options
                .iter()
                .enumerate()
                .map(|(i, o)| cm.open(Time::ZERO, DEST, FlowKey(i as u64), *o).expect("open"))
                .collect();
            cm.update(Time::ZERO, flows[0], Feedback::received(0, Some(ms(100))))
                .expect("open");
            let mut now = Time::ZERO;
            for op in ops {
                match op {
                    Op::Request(f, b) => cm.request(now, flows[f], b).expect("open"),
                    Op::Notify(f, b) => cm.notify(now, flows[f], b).expect("open"),
                    Op::Update(f, r, l, m) => {
                        let mode = [LossMode::NoCongestion, LossMode::Loss, LossMode::Ecn,
                            LossMode::NoFeedback][usize::from(m)];
                        let fb = Feedback { nrecd_bytes: r, nlost_bytes: l, mode, rtt: None };
                        cm.update(now, flows[f], fb).expect("open");
                    }
                    Op::Advance(us) => now += Duration::from_micros(u64::from(us)),
                    Op::Timeout => {
                        if let Some(t) = cm.poll_timeout() {
                            now = now.max(t);
                            cm.handle_timeout(now);
                        }
                    }
                    Op::Cancel(f) => cm.cancel_request(now, flows[f]).expect("open"),
                    Op::Move(f, back) => {
                        let target = if back {
                            Some(cm.getmacroflow(flows[0]).expect("open"))
                        } else {
                            None
                        };
                        cm.setmacroflow(now, flows[f], target).expect("open");
                    }
                }
                while cm.poll_event().is_some() {}
                let mut want: BTreeMap<MacroflowId, u64> = BTreeMap::new();
                for (i, f) in flows.iter().enumerate() {
                    let balance = cm.grant_balance(now, *f).expect("open");
                    let mf = cm.getmacroflow(*f).expect("open");
                    let entry = want.entry(mf).or_insert(0);
                    if i < 2 {
                        *entry += cm.outstanding_bytes(*f).expect("open") + balance;
                    } else {
                        prop_assert_eq!(cm.outstanding_bytes(*f).expect("open"), 0);
                    }
                }
                for (mf, bytes) in want {
                    let info = cm.macroflow_info(mf).expect("mf");
                    prop_assert_eq!(info.window_used_bytes, bytes, "macroflow {:?}", mf);
                }
            }
        }
    }
}

/// Regression: a controller that found the CM borrowed by its engine dropped its
/// `cm_notify`/`cm_update` (lost congestion state). They are now queued and applied when the
/// engine's borrow ends.
#[test]
fn test_reports_made_while_the_cm_is_borrowed_are_applied_after() {
    let handle = CmHandle::new(cm());
    let (mut cc, flow) = CmController::open(&handle, Time::ZERO, DEST, FlowKey(1)).expect("open");
    let guard = handle.borrow_mut();
    cc.on_sent(Time::ZERO, MTU, false);
    cc.on_sent(Time::ZERO, MTU, false);
    assert_eq!(handle.deferred_reports(), 2);
    assert_eq!(
        guard.outstanding_bytes(flow),
        Ok(0),
        "not applied during the borrow"
    );
    drop(guard);
    assert_eq!(handle.deferred_reports(), 0);
    assert_eq!(handle.borrow().outstanding_bytes(flow), Ok(2 * MTU));
    // An acknowledgement reported while borrowed is applied too, after the sends.
    let guard = handle.borrow_mut();
    let ack = AckInfo {
        newly_acked_bytes: 2 * MTU,
        bytes_in_flight: 0,
        rtt_sample: Some(ms(100)),
        smss: MTU,
    };
    cc.on_ack(Time::from_millis(100), &ack);
    drop(guard);
    assert_eq!(handle.borrow().outstanding_bytes(flow), Ok(0));
    assert_eq!(handle.dropped_reports(), 0);
}

/// Regression: two CM-delegated streams on a shaped link stopped for good after a timeout.
/// After the restart the window held one MTU; stream A had been granted it, but its engine
/// never polled A again, so the grant was never used, declined or checked — and since grants
/// lapsed only when their own flow asked for its balance, it held the window forever and
/// stream B stayed parked behind it. RFC 3124 §3.3: the CM "MUST be robust to applications
/// forgetting to invoke cm_notify(stream_info, 0) correctly, or applications that crash or
/// disappear after having made a cm_request() call". The grant now lapses on the CM's own
/// timer, one grant lifetime (max(srtt, threshold)) after it was issued.
#[test]
fn test_regression_stall_unused_grant_held_the_window_forever() {
    let mut cm = cm();
    let a = cm
        .open(Time::ZERO, DEST, FlowKey(1), FlowOptions::acked())
        .expect("open");
    let b = cm
        .open(Time::ZERO, DEST, FlowKey(2), FlowOptions::acked())
        .expect("open");
    cm.update(Time::ZERO, a, Feedback::received(0, Some(ms(100))))
        .expect("update");
    // B's timeout: persistent congestion, the window is one MTU.
    let timeout = Feedback {
        mode: LossMode::NoFeedback,
        ..Feedback::loss(0, MTU)
    };
    cm.update(Time::ZERO, b, timeout).expect("update");
    drain(&mut cm);
    let t0 = Time::from_millis(10);
    cm.request(t0, a, MTU).expect("request");
    let granted_a = drain(&mut cm)
        .iter()
        .any(|e| matches!(e, CmEvent::Grant { flow, .. } if *flow == a));
    assert!(granted_a, "A takes the one-MTU window");
    // A disappears. B asks: the window is full.
    cm.request(t0, b, MTU).expect("request");
    assert!(drain(&mut cm).is_empty(), "B waits for the window");
    // Only the CM's timers run from now on, until just past A's grant's lifetime.
    let lifetime = ms(100); // max(srtt 100 ms, grant_lifetime_min 10 ms)
    let events = run_until(&mut cm, t0 + lifetime + ms(1));
    let grant_b = events
        .iter()
        .find(|(_, e)| matches!(e, CmEvent::Grant { flow, .. } if *flow == b))
        .map(|(t, _)| *t);
    let at = grant_b.expect("B is granted once A's grant lapses");
    assert!(at > t0 + lifetime && at <= t0 + lifetime + ms(1), "{at:?}");
    assert_eq!(cm.stats().expired_bytes, MTU);
    assert_eq!(cm.grant_balance(at, a), Ok(0));
    let mf = cm.getmacroflow(b).expect("open");
    assert_eq!(
        cm.macroflow_info(mf).expect("open").window_used_bytes,
        MTU,
        "only B's grant counts against the window"
    );
}
