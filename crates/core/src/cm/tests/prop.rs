//! Property tests: whatever the sequence of requests, notifications, feedback and timeouts,
//! the bytes a macroflow grants (net of refunds) never exceed ∫ rate dt + burst allowance, and
//! the grant accounting never drifts: every granted byte is used by a `notify`, declined,
//! lapsed, or still outstanding.

use super::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Request(usize, u64),
    RequestWith(usize, u64, u64, Option<u16>),
    Notify(usize, u64),
    Update(usize, u64, u8, Option<u16>),
    Advance(u32),
    Timeout,
    Cancel(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..3, 1u64..20_000).prop_map(|(f, b)| Op::Request(f, b)),
        (
            0usize..3,
            1u64..20_000,
            0u64..10_000,
            proptest::option::of(0u16..300)
        )
            .prop_map(|(f, b, m, l)| Op::RequestWith(f, b, m, l)),
        (0usize..3, 0u64..5_000).prop_map(|(f, b)| Op::Notify(f, b)),
        (
            0usize..3,
            0u64..20_000,
            0u8..4,
            proptest::option::of(1u16..500)
        )
            .prop_map(|(f, n, m, r)| Op::Update(f, n, m, r)),
        (0u32..300_000).prop_map(Op::Advance),
        Just(Op::Timeout),
        (0usize..3).prop_map(Op::Cancel),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn grants_never_exceed_rate_times_time_plus_allowance(
        ops in proptest::collection::vec(op(), 1..200),
        weights in proptest::collection::vec(0.1f64..10.0, 3),
    ) {
        let mut cm = cm();
        let flows: Vec<FlowId> = weights
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let o = FlowOptions { weight: *w, ..FlowOptions::implicit() };
                cm.open(Time::ZERO, DEST, FlowKey(i as u64), o).expect("open")
            })
            .collect();
        let mf = cm.getmacroflow(flows[0]).expect("open");
        let allowance = cm.macroflow_info(mf).expect("mf").burst_bytes;
        let mut now = Time::ZERO;
        // ∫ rate dt, with the rate in force between steps (aging only lowers it).
        let mut budget = 0.0f64;
        let mut notified = 0u64;
        for op in ops {
            let rate_before = cm.macroflow_info(mf).expect("mf").rate_bytes_per_s;
            match op {
                Op::Request(f, b) => cm.request(now, flows[f], b).expect("open"),
                Op::RequestWith(f, b, m, l) => {
                    let req = Request {
                        bytes: b,
                        min_bytes: m,
                        latency: l.map(|v| ms(u64::from(v))),
                    };
                    cm.request_with(now, flows[f], req).expect("open");
                }
                Op::Notify(f, b) => {
                    notified += b;
                    cm.notify(now, flows[f], b).expect("open");
                }
                Op::Update(f, n, m, r) => {
                    let mode = [LossMode::NoCongestion, LossMode::Loss, LossMode::Ecn,
                        LossMode::NoFeedback][usize::from(m)];
                    let fb = Feedback {
                        nrecd_bytes: n,
                        nlost_bytes: n / 10,
                        mode,
                        rtt: r.map(|v| ms(u64::from(v))),
                    };
                    cm.update(now, flows[f], fb).expect("open");
                }
                Op::Advance(us) => {
                    let next = now + Duration::from_micros(u64::from(us));
                    budget += rate_before * (next - now).as_secs_f64();
                    now = next;
                }
                Op::Timeout => {
                    if let Some(t) = cm.poll_timeout() {
                        let next = now.max(t);
                        budget += rate_before * (next - now).as_secs_f64();
                        now = next;
                        cm.handle_timeout(now);
                    }
                }
                Op::Cancel(f) => cm.cancel_request(now, flows[f]).expect("open"),
            }
            while cm.poll_event().is_some() {}
            let s = cm.stats();
            let net = s.granted_bytes as f64 - s.refunded_bytes as f64;
            prop_assert!(
                net <= budget + allowance + 1e-3,
                "granted {} - refunded {} > {} + {}", s.granted_bytes, s.refunded_bytes,
                budget, allowance
            );
            // Accounting: granted = used by notify + declined + lapsed + outstanding, where
            // the bytes used are those notified minus those sent without a grant.
            let mut outstanding = 0;
            for &f in &flows {
                outstanding += cm.grant_balance(now, f).expect("open");
            }
            let s = cm.stats();
            let used = notified - s.ungranted_bytes;
            prop_assert_eq!(
                s.granted_bytes,
                used + s.refunded_bytes + s.expired_bytes + outstanding,
                "notified {}, stats {:?}", notified, s
            );
        }
    }
}
