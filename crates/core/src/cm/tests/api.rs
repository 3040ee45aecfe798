//! The CM API: AIMD, aging, thresholds, scheduler shares, macroflows, temporal sharing, errors.

use super::*;

/// A CM with one flow whose macroflow has srtt = min RTT = 100 ms and `cwnd_mtus` MTUs of
/// window (rate = cwnd / 100 ms).
fn with_flow(cwnd_mtus: u64) -> (CongestionManager, FlowId) {
    let mut cm = cm();
    let f = cm
        .open(Time::ZERO, DEST, FlowKey(1), FlowOptions::implicit())
        .expect("open");
    cm.update(Time::ZERO, f, Feedback::received(0, Some(ms(100))))
        .expect("update");
    // Slow start from the 4-MTU initial window.
    cm.update(
        Time::ZERO,
        f,
        Feedback::received((cwnd_mtus - 4) * MTU, None),
    )
    .expect("update");
    drain(&mut cm);
    (cm, f)
}

#[test]
fn test_aimd_halves_on_loss_once_per_rtt_and_restarts_on_timeout() {
    let (mut cm, f) = with_flow(20);
    assert!((rate(&cm, f) - 200_000.0).abs() < 1e-6);
    let t = Time::from_secs(1);
    cm.update(t, f, Feedback::loss(0, MTU)).expect("update");
    assert!((rate(&cm, f) - 100_000.0).abs() < 1e-6, "halved");
    cm.update(t + ms(10), f, Feedback::loss(0, MTU))
        .expect("update");
    assert!((rate(&cm, f) - 100_000.0).abs() < 1e-6, "same RTT: once");
    // ECN counts as loss.
    let ecn = Feedback {
        mode: LossMode::Ecn,
        ..Feedback::received(0, None)
    };
    cm.update(t + ms(200), f, ecn).expect("update");
    assert!((rate(&cm, f) - 50_000.0).abs() < 1e-6);
    // Additive increase: one MTU per window of acknowledged data.
    cm.update(t + ms(400), f, Feedback::received(5 * MTU, None))
        .expect("update");
    assert!((rate(&cm, f) - 60_000.0).abs() < 1e-6);
    // Losses not due to congestion do not reduce the rate.
    let benign = Feedback {
        nlost_bytes: MTU,
        ..Feedback::received(0, None)
    };
    cm.update(t + ms(600), f, benign).expect("update");
    assert!((rate(&cm, f) - 60_000.0).abs() < 1e-6);
    let timeout = Feedback {
        mode: LossMode::NoFeedback,
        ..Feedback::loss(0, MTU)
    };
    cm.update(t + ms(800), f, timeout).expect("update");
    assert!((rate(&cm, f) - 10_000.0).abs() < 1e-6, "1 MTU per srtt");
    assert_eq!(cm.stats().decreases, 2);
    assert_eq!(cm.stats().restarts, 1);
}

#[test]
fn test_aging_halves_rate_every_min_rtt_without_feedback() {
    let (mut cm, f) = with_flow(64);
    // srtt 125 ms, min 100 ms.
    cm.update(Time::ZERO, f, Feedback::received(0, Some(ms(300))))
        .expect("update");
    let srtt = cm.query(f).expect("open").srtt.expect("sampled");
    assert_eq!(srtt, Duration::from_millis(125));
    let rttvar = cm.query(f).expect("open").rttvar.expect("sampled");
    assert_eq!(rttvar, Duration::from_micros(87_500));
    // "A round-trip time" for the trigger: srtt plus one clock granularity (1 ms), the
    // paper's; `AgingTrigger::Rto` waits srtt + 4 rttvar = 475 ms (see the next test).
    let _ = rttvar;
    let trigger = srtt + Duration::from_millis(1);
    let r0 = rate(&cm, f);
    let t0 = Time::from_secs(1);
    cm.notify(t0, f, MTU).expect("notify");
    // papers/003 §2.2.3: triggered when no feedback came within a round-trip time...
    run_until(&mut cm, t0 + trigger - Duration::from_nanos(1));
    assert_eq!(rate(&cm, f), r0);
    run_until(&mut cm, t0 + trigger);
    assert!((rate(&cm, f) - r0 / 2.0).abs() < 1e-6);
    // ...then halves every minimum RTT.
    for k in 1..=4 {
        run_until(
            &mut cm,
            t0 + trigger + ms(100 * k) - Duration::from_nanos(1),
        );
        assert!(
            (rate(&cm, f) - r0 / 2f64.powi(k as i32)).abs() < 1e-6,
            "k={k}"
        );
        run_until(&mut cm, t0 + trigger + ms(100 * k));
        assert!((rate(&cm, f) - r0 / 2f64.powi(k as i32 + 1)).abs() < 1e-6);
    }
    assert!(cm.macroflow_info(MacroflowId(0)).expect("mf").aging);
    // Feedback ends aging.
    let t1 = t0 + trigger + ms(450);
    cm.update(t1, f, Feedback::received(MTU, None))
        .expect("update");
    let r1 = rate(&cm, f);
    run_until(&mut cm, t1 + ms(1000));
    assert_eq!(rate(&cm, f), r1, "nothing outstanding: no aging");
    assert_eq!(cm.stats().aging_halvings, 5);
}

#[test]
fn test_aging_rto_trigger_waits_for_rttvar() {
    let mut cm = CongestionManager::new(CmConfig {
        aging_trigger: AgingTrigger::Rto,
        ..config()
    });
    let f = cm
        .open(Time::ZERO, DEST, FlowKey(1), FlowOptions::implicit())
        .expect("open");
    cm.update(Time::ZERO, f, Feedback::received(0, Some(ms(100))))
        .expect("update");
    cm.update(Time::ZERO, f, Feedback::received(0, Some(ms(300))))
        .expect("update");
    // srtt 125 ms, rttvar 87.5 ms: the trigger is srtt + 4 rttvar = 475 ms.
    let r0 = rate(&cm, f);
    let t0 = Time::from_secs(1);
    cm.notify(t0, f, MTU).expect("notify");
    run_until(&mut cm, t0 + ms(475) - Duration::from_nanos(1));
    assert_eq!(rate(&cm, f), r0, "srtt has passed, srtt + 4 rttvar has not");
    run_until(&mut cm, t0 + ms(475));
    assert!((rate(&cm, f) - r0 / 2.0).abs() < 1e-6);
}

#[test]
fn test_every_rate_change_thresholds_report_small_changes() {
    let count = |th: Thresholds| {
        let mut cm = cm();
        let f = cm
            .open(
                Time::ZERO,
                DEST,
                FlowKey(1),
                FlowOptions {
                    thresholds: th,
                    ..FlowOptions::implicit()
                },
            )
            .expect("open");
        cm.update(Time::ZERO, f, Feedback::received(0, Some(ms(100))))
            .expect("update");
        drain(&mut cm);
        // Three small increases (one MTU each on a 4-MTU window: +25 %, +20 %, +17 %).
        let mut n = 0;
        for _ in 0..3 {
            cm.update(Time::ZERO, f, Feedback::received(MTU, None))
                .expect("update");
            n += drain(&mut cm).len();
        }
        n
    };
    // papers/003 §2.3: change_rate "whenever a flow's share of the available rate changes".
    assert_eq!(count(Thresholds::EVERY_RATE_CHANGE), 3);
    // The ±20 % default reports only once the rate has moved by a quarter.
    assert!(count(Thresholds::DEFAULT) < 3);
}

#[test]
fn test_aging_with_srtt_half_life_is_slower() {
    let mut cm = CongestionManager::new(CmConfig {
        aging_half_life: AgingHalfLife::Srtt,
        ..config()
    });
    let f = cm
        .open(Time::ZERO, DEST, FlowKey(1), FlowOptions::implicit())
        .expect("open");
    cm.update(Time::ZERO, f, Feedback::received(0, Some(ms(100))))
        .expect("update");
    cm.update(Time::ZERO, f, Feedback::received(0, Some(ms(300))))
        .expect("update");
    let r0 = rate(&cm, f);
    let t0 = Time::from_secs(1) + ms(126); // trigger: srtt + G, as in the test above
    cm.notify(Time::from_secs(1), f, MTU).expect("notify");
    // Halvings at +0, +125 ms, +250 ms (srtt), not every 100 ms.
    run_until(&mut cm, t0 + ms(249));
    assert!((rate(&cm, f) - r0 / 4.0).abs() < 1e-6);
    run_until(&mut cm, t0 + ms(250));
    assert!((rate(&cm, f) - r0 / 8.0).abs() < 1e-6);
}

#[test]
fn test_aging_stops_at_the_rate_floor() {
    let (mut cm, f) = with_flow(4);
    cm.notify(Time::from_secs(1), f, MTU).expect("notify");
    run_until(&mut cm, Time::from_secs(100));
    assert!((rate(&cm, f) - config().min_rate_bytes_per_s).abs() < 1e-6);
    assert_eq!(cm.poll_timeout(), None, "no timer once at the floor");
}

#[test]
fn test_thresholds_gate_change_rate() {
    let mut cm = cm();
    let th = Thresholds {
        rate_down: 0.6,
        rate_up: 2.0,
        ..Thresholds::NEVER
    };
    let f = cm
        .open(
            Time::ZERO,
            DEST,
            FlowKey(1),
            FlowOptions {
                thresholds: th,
                ..FlowOptions::implicit()
            },
        )
        .expect("open");
    assert!(drain(&mut cm).is_empty(), "no valid estimate yet");
    assert_eq!(cm.query(f).expect("open").rate_bytes_per_s, None);
    cm.update(Time::ZERO, f, Feedback::received(0, Some(ms(100))))
        .expect("update");
    let first = drain(&mut cm);
    assert!(
        matches!(first[..], [CmEvent::RateChange { rate_bytes_per_s, .. }] if (rate_bytes_per_s - 40_000.0).abs() < 1e-6),
        "{first:?}"
    );
    // Growth to 1.75× the reported rate: below rate_up, silent.
    cm.update(Time::ZERO, f, Feedback::received(3 * MTU, None))
        .expect("update");
    assert!(drain(&mut cm).is_empty());
    // Past 2×: reported.
    cm.update(Time::ZERO, f, Feedback::received(2 * MTU, None))
        .expect("update");
    assert_eq!(drain(&mut cm).len(), 1);
    // Halving to 0.5× of the last report: below rate_down, reported once (coalesced).
    cm.update(Time::from_secs(1), f, Feedback::loss(0, MTU))
        .expect("update");
    let ev = drain(&mut cm);
    assert!(
        matches!(ev[..], [CmEvent::RateChange { rate_bytes_per_s, .. }] if (rate_bytes_per_s - 45_000.0).abs() < 1e-6),
        "{ev:?}"
    );
    // A second flow halves the first one's share: below 0.6×, reported.
    let g = cm
        .open(
            Time::from_secs(1),
            DEST,
            FlowKey(2),
            FlowOptions::implicit(),
        )
        .expect("open");
    let ev = drain(&mut cm);
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert!(
        ev.iter()
            .any(|e| matches!(e, CmEvent::RateChange { flow, .. } if *flow == f))
    );
    assert!(
        ev.iter()
            .any(|e| matches!(e, CmEvent::RateChange { flow, .. } if *flow == g))
    );
    // Disabling thresholds silences the flow.
    cm.thresh(Time::from_secs(1), f, Thresholds::NEVER)
        .expect("thresh");
    cm.close(Time::from_secs(1), g).expect("close");
    let ev = drain(&mut cm);
    assert!(
        ev.iter()
            .all(|e| !matches!(e, CmEvent::RateChange { flow, .. } if *flow == f)),
        "{ev:?}"
    );
}

/// Backlogs flows of the given weights and counts the bytes granted to each over `secs`.
fn shares(weights: &[f64], secs: u64) -> Vec<u64> {
    let (mut cm, _) = with_flow(10);
    let flows: Vec<FlowId> = weights
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let opts = FlowOptions {
                weight: *w,
                ..FlowOptions::implicit()
            };
            let f = cm
                .open(Time::ZERO, DEST, FlowKey(10 + i as u64), opts)
                .expect("open");
            cm.request(Time::ZERO, f, u64::MAX).expect("request");
            f
        })
        .collect();
    let mut got = vec![0u64; flows.len()];
    for (_, e) in run_until(&mut cm, Time::from_secs(secs)) {
        if let CmEvent::Grant { flow, bytes } = e
            && let Some(i) = flows.iter().position(|f| *f == flow)
        {
            got[i] += bytes;
        }
    }
    got
}

#[test]
fn test_weighted_shares_within_five_percent_of_weights() {
    let weights = [1.0, 2.0, 3.0, 0.5];
    let got = shares(&weights, 10);
    let total: u64 = got.iter().sum();
    let wsum: f64 = weights.iter().sum();
    // 10 s at 100 kB/s; `with_flow`'s own flow has no request and takes nothing.
    assert!(total >= 990_000, "work-conserving: {total}");
    for (g, w) in got.iter().zip(weights) {
        let share = *g as f64 / total as f64;
        let want = w / wsum;
        assert!(
            (share - want).abs() <= 0.05 * want,
            "share {share} want {want}"
        );
    }
}

#[test]
fn test_receiver_hints_multiply_weights() {
    let (mut cm, _) = with_flow(10);
    let a = cm
        .open(Time::ZERO, DEST, FlowKey(2), FlowOptions::implicit())
        .expect("open");
    let b = cm
        .open(Time::ZERO, DEST, FlowKey(3), FlowOptions::implicit())
        .expect("open");
    cm.set_receiver_hint(Time::ZERO, b, 3.0).expect("hint");
    for f in [a, b] {
        cm.request(Time::ZERO, f, u64::MAX).expect("request");
    }
    let (mut ga, mut gb) = (0u64, 0u64);
    for (_, e) in run_until(&mut cm, Time::from_secs(5)) {
        match e {
            CmEvent::Grant { flow, bytes } if flow == a => ga += bytes,
            CmEvent::Grant { flow, bytes } if flow == b => gb += bytes,
            _ => {}
        }
    }
    let ratio = gb as f64 / ga as f64;
    assert!((ratio - 3.0).abs() < 0.15, "ratio {ratio}");
    let qa = cm.query(a).expect("open").rate_bytes_per_s.expect("valid");
    let qb = cm.query(b).expect("open").rate_bytes_per_s.expect("valid");
    assert!((qb / qa - 3.0).abs() < 1e-9);
}

#[test]
fn test_grants_are_paced_at_the_rate_after_the_burst_allowance() {
    let (mut cm, f) = with_flow(10); // 100 kB/s: one 1000-byte grant per 10 ms
    cm.request(Time::ZERO, f, 50 * MTU).expect("request");
    let mut times = vec![];
    for e in drain(&mut cm) {
        if let CmEvent::Grant { .. } = e {
            times.push(Time::ZERO);
        }
    }
    assert_eq!(times.len(), 2, "the burst allowance: 2 MTU at once");
    for (t, e) in run_until(&mut cm, Time::from_secs(2)) {
        if let CmEvent::Grant { bytes, .. } = e {
            assert_eq!(bytes, MTU);
            times.push(t);
        }
    }
    assert_eq!(times.len(), 50);
    for w in times[2..].windows(2) {
        let gap = w[1] - w[0];
        assert!(gap >= ms(10) - Duration::from_nanos(2) && gap <= ms(10) + Duration::from_nanos(2));
    }
}

#[test]
fn test_macroflows_group_by_destination_and_can_be_changed() {
    let mut cm = cm();
    let o = FlowOptions::implicit();
    let a = cm.open(Time::ZERO, DEST, FlowKey(1), o).expect("open");
    let b = cm.open(Time::ZERO, DEST, FlowKey(2), o).expect("open");
    let c = cm
        .open(Time::ZERO, PeerAddr(8), FlowKey(1), o)
        .expect("open");
    let ma = cm.getmacroflow(a).expect("open");
    assert_eq!(cm.getmacroflow(b), Ok(ma));
    assert_ne!(cm.getmacroflow(c), Ok(ma));
    cm.request(Time::ZERO, b, 10 * MTU).expect("request");
    let mb = cm.setmacroflow(Time::ZERO, b, None).expect("new macroflow");
    assert_ne!(mb, ma);
    assert_eq!(cm.getmacroflow(b), Ok(mb));
    // 8 MTU moved; the new macroflow's burst allowance granted 2 of them at once.
    assert_eq!(cm.pending_request(b), Ok(6 * MTU), "request moved");
    assert_eq!(cm.setmacroflow(Time::ZERO, b, Some(ma)), Ok(ma));
    assert_eq!(
        cm.macroflow_info(mb),
        Err(CmError::UnknownMacroflow(mb)),
        "emptied, removed"
    );
    assert_eq!(
        cm.setmacroflow(Time::ZERO, b, Some(MacroflowId(99))),
        Err(CmError::UnknownMacroflow(MacroflowId(99)))
    );
}

#[test]
fn test_temporal_sharing_starts_from_cached_rtt_and_rate() {
    let (mut cm, f) = with_flow(30);
    let before = cm.query(f).expect("open");
    cm.close(Time::from_secs(1), f).expect("close");
    // Within rate_ttl: RTT and rate are reused.
    let g = cm
        .open(
            Time::from_secs(3),
            DEST,
            FlowKey(2),
            FlowOptions::implicit(),
        )
        .expect("open");
    let q = cm.query(g).expect("open");
    assert_eq!(q.srtt, Some(ms(100)));
    assert_eq!(q.min_rtt, Some(ms(100)));
    assert_eq!(q.rate_bytes_per_s, before.rate_bytes_per_s);
    cm.close(Time::from_secs(4), g).expect("close");
    // Past rate_ttl, within rtt_ttl: only the RTT; initial window over the cached srtt.
    let h = cm
        .open(
            Time::from_secs(60),
            DEST,
            FlowKey(3),
            FlowOptions::implicit(),
        )
        .expect("open");
    let q = cm.query(h).expect("open");
    assert_eq!(q.srtt, Some(ms(100)));
    assert!((q.macroflow_rate_bytes_per_s - 40_000.0).abs() < 1e-6);
    // Another destination starts from nothing.
    let i = cm
        .open(
            Time::from_secs(60),
            PeerAddr(9),
            FlowKey(3),
            FlowOptions::implicit(),
        )
        .expect("open");
    assert_eq!(cm.query(i).expect("open").srtt, None);
}

#[test]
fn test_bad_flow_ids_and_arguments_are_errors() {
    let mut cm = cm();
    let bad = FlowId(42);
    let now = Time::ZERO;
    assert_eq!(cm.request(now, bad, 1), Err(CmError::UnknownFlow(bad)));
    assert_eq!(cm.notify(now, bad, 1), Err(CmError::UnknownFlow(bad)));
    assert_eq!(
        cm.update(now, bad, Feedback::received(1, None)),
        Err(CmError::UnknownFlow(bad))
    );
    assert!(cm.query(bad).is_err());
    assert!(cm.mtu(bad).is_err());
    assert!(cm.close(now, bad).is_err());
    assert!(cm.getmacroflow(bad).is_err());
    let bad_weight = FlowOptions {
        weight: 0.0,
        ..FlowOptions::implicit()
    };
    assert!(matches!(
        cm.open(now, DEST, FlowKey(1), bad_weight),
        Err(CmError::InvalidArgument(_))
    ));
    let f = cm
        .open(now, DEST, FlowKey(1), FlowOptions::implicit())
        .expect("open");
    assert_eq!(cm.mtu(f), Ok(MTU));
    let inverted = Thresholds {
        rate_down: 2.0,
        ..Thresholds::DEFAULT
    };
    assert!(cm.thresh(now, f, inverted).is_err());
    assert!(cm.set_weight(now, f, f64::NAN).is_err());
    cm.close(now, f).expect("close");
    assert_eq!(cm.notify(now, f, 1), Err(CmError::UnknownFlow(f)), "closed");
}

#[test]
fn test_notify_returns_unused_grants_and_charges_ungranted_bytes() {
    let (mut cm, f) = with_flow(10);
    let mf = cm.getmacroflow(f).expect("open");
    cm.request(Time::ZERO, f, MTU).expect("request");
    assert_eq!(cm.grant_balance(Time::ZERO, f), Ok(MTU));
    cm.notify(Time::ZERO, f, 0).expect("decline");
    assert_eq!(cm.stats().refunded_bytes, MTU);
    let tokens = cm.macroflow_info(mf).expect("mf").tokens_bytes;
    cm.notify(Time::ZERO, f, 3 * MTU)
        .expect("send without grant");
    assert_eq!(cm.stats().ungranted_bytes, 3 * MTU);
    let after = cm.macroflow_info(mf).expect("mf").tokens_bytes;
    assert!((tokens - after - 3000.0).abs() < 1e-6, "debt charged");
    // A grant lapses after max(srtt, grant_lifetime_min).
    cm.request(Time::from_secs(1), f, MTU).expect("request");
    run_until(&mut cm, Time::from_secs(2));
    assert_eq!(cm.grant_balance(Time::from_secs(2), f), Ok(0));
    assert_eq!(cm.stats().expired_bytes, MTU);
}

#[test]
fn test_extreme_application_inputs_do_not_panic() {
    let mut cm = cm();
    let f = cm
        .open(Time::ZERO, DEST, FlowKey(1), FlowOptions::implicit())
        .expect("open");
    let t = Time::from_secs(1);
    cm.update(t, f, Feedback::received(u64::MAX, Some(Duration::MAX)))
        .expect("update");
    cm.update(t, f, Feedback::received(u64::MAX, Some(Duration::MAX)))
        .expect("update");
    cm.request(t, f, u64::MAX).expect("request");
    cm.notify(t, f, u64::MAX).expect("notify");
    cm.update(t, f, Feedback::loss(u64::MAX, u64::MAX))
        .expect("update");
    run_until(&mut cm, t + Duration::from_secs(10));
    cm.cancel_request(t, f).expect("cancel");
    // Without requests only aging runs, and it stops at the rate floor.
    run_until(&mut cm, Time::MAX);
    assert_eq!(cm.poll_timeout(), None);
    cm.handle_timeout(Time::ZERO);
    let q = cm.query(f).expect("open");
    assert!(q.macroflow_rate_bytes_per_s.is_finite());
}

/// Regression: `notify` ended every outstanding grant, so an application calling it once
/// per grant had the later grants refunded at the first call and then charged as debt.
#[test]
fn test_notify_once_per_grant_neither_refunds_nor_charges() {
    let (mut cm, f) = with_flow(10);
    cm.request(Time::ZERO, f, 8 * MTU).expect("request");
    // The first grants come as a burst: several are outstanding when the application sends
    // the first one and notifies it, one notify per grant, as grants arrive.
    let mut pending: Vec<u64> = drain(&mut cm)
        .into_iter()
        .filter_map(|e| match e {
            CmEvent::Grant { flow, bytes } if flow == f => Some(bytes),
            _ => None,
        })
        .collect();
    assert!(pending.len() >= 2, "a burst of grants: {pending:?}");
    let mut notified = 0;
    let mut now = Time::ZERO;
    loop {
        for g in pending.drain(..) {
            cm.notify(now, f, g).expect("notify");
            notified += g;
        }
        let Some(t) = cm.poll_timeout().filter(|t| *t <= Time::from_millis(300)) else {
            break;
        };
        now = t;
        cm.handle_timeout(now);
        pending.extend(drain(&mut cm).into_iter().filter_map(|e| match e {
            CmEvent::Grant { flow, bytes } if flow == f => Some(bytes),
            _ => None,
        }));
    }
    assert_eq!(notified, 8 * MTU);
    let s = cm.stats();
    assert_eq!((s.refunded_bytes, s.ungranted_bytes), (0, 0));
    // A notify for part of a grant leaves the rest usable.
    cm.request(Time::from_millis(300), f, MTU).expect("request");
    run_until(&mut cm, Time::from_millis(400));
    let t = Time::from_millis(400);
    cm.notify(t, f, MTU / 2).expect("notify");
    assert_eq!(cm.grant_balance(t, f), Ok(MTU / 2));
    cm.notify(t, f, MTU / 2).expect("notify");
    assert_eq!(cm.stats().ungranted_bytes, 0);
}

/// The grants of one flow, with their times, until `until`.
fn grants_until(cm: &mut CongestionManager, f: FlowId, until: Time) -> Vec<(Time, u64)> {
    run_until(cm, until)
        .into_iter()
        .filter_map(|(t, e)| match e {
            CmEvent::Grant { flow, bytes } if flow == f => Some((t, bytes)),
            _ => None,
        })
        .collect()
}

#[test]
fn test_min_bytes_grants_come_whole_when_the_tokens_allow() {
    // 10 MTUs per 100 ms = 100 kB/s; the burst allowance (2 MTU) is spent first.
    let (mut cm, f) = with_flow(10);
    drain(&mut cm);
    let t0 = Time::from_secs(1);
    cm.request_with(
        t0,
        f,
        Request {
            bytes: 4 * MTU,
            min_bytes: 2 * MTU,
            latency: None,
        },
    )
    .expect("request");
    let mut grants: Vec<(Time, u64)> = drain(&mut cm)
        .into_iter()
        .filter_map(|e| match e {
            CmEvent::Grant { bytes, .. } => Some((t0, bytes)),
            _ => None,
        })
        .collect();
    grants.extend(grants_until(&mut cm, f, t0 + ms(200)));
    // papers/003 §2.4: notified "based on the minimum number of bytes requested": two grants
    // of 2 MTUs, the second once 2 MTUs of tokens have accrued (20 ms at 100 kB/s).
    assert_eq!(
        grants.iter().map(|g| g.1).collect::<Vec<_>>(),
        [2 * MTU, 2 * MTU]
    );
    assert_eq!(grants[1].0 - grants[0].0, ms(20));
    // min_bytes beyond the burst allowance is capped to it.
    cm.request_with(
        t0 + ms(200),
        f,
        Request {
            bytes: 10 * MTU,
            min_bytes: 100 * MTU,
            latency: None,
        },
    )
    .expect("request");
    let sizes: Vec<u64> = grants_until(&mut cm, f, t0 + ms(400))
        .iter()
        .map(|g| g.1)
        .chain(drain(&mut cm).into_iter().filter_map(|e| match e {
            CmEvent::Grant { bytes, .. } => Some(bytes),
            _ => None,
        }))
        .collect();
    assert!(sizes.iter().all(|&b| b <= 2 * MTU), "{sizes:?}");
}

#[test]
fn test_request_latency_withdraws_what_was_not_granted_in_time() {
    let (mut cm, f) = with_flow(10);
    drain(&mut cm);
    let t0 = Time::from_secs(1);
    // 20 MTUs at 10 MTUs per 100 ms take ~180 ms after the burst; only 50 ms are useful.
    cm.request_with(
        t0,
        f,
        Request {
            bytes: 20 * MTU,
            min_bytes: 0,
            latency: Some(ms(50)),
        },
    )
    .expect("request");
    let events = run_until(&mut cm, t0 + ms(300));
    let granted: u64 = events
        .iter()
        .filter_map(|(_, e)| match e {
            CmEvent::Grant { bytes, .. } => Some(*bytes),
            _ => None,
        })
        .sum::<u64>();
    let expired: Vec<(Time, u64)> = events
        .iter()
        .filter_map(|(t, e)| match e {
            CmEvent::RequestExpired { flow, bytes } if *flow == f => Some((*t, *bytes)),
            _ => None,
        })
        .collect();
    assert_eq!(expired.len(), 1, "{events:?}");
    assert_eq!(expired[0].0, t0 + ms(50));
    assert_eq!(granted + expired[0].1, 20 * MTU);
    assert_eq!(cm.pending_request(f), Ok(0));
    assert_eq!(cm.stats().expired_request_bytes, expired[0].1);
}
