//! Scenario tests of the environment module that follow the paper's own examples.

use super::*;
use crate::time::Time;

pub(super) fn dev(name: &str) -> Name {
    Name::new(name).unwrap()
}

pub(super) fn t(ms: u64) -> Time {
    Time::from_millis(ms)
}

/// Table 3 (§5.2): the watermarks of `availability` for handoff notification.
pub(super) fn table3() -> Watermarks {
    Watermarks::new(vec![
        Level::low(10.0),  // 0: device is unavailable
        Level::high(20.0), // 1: device is available
        Level::low(30.0),  // 2: dummy
        Level::high(40.0), // 3: about to handoff
        Level::high(50.0), // 4: handoff over
    ])
    .unwrap()
}

/// Sets a value and returns the one event it caused, if any (asserting there is at most one).
pub(super) fn set(env: &mut EnvTable, now: Time, d: &Name, p: &Param, v: f64) -> Option<EnvEvent> {
    env.set_dev_param(now, d, p, v).unwrap();
    let ev = env.poll_event();
    assert_eq!(env.poll_event(), None);
    ev
}

fn levels(ev: &Option<EnvEvent>) -> Option<(LevelMask, LevelMask)> {
    ev.as_ref().map(|e| (e.violated, e.cleared))
}

// Figure 1 is lost from the extracted text; its walk-through in §3 survives:
//   v1 -> v2: high watermarks C and A are violated;
//   v3 -> v4: low watermark B is violated;
//   v5 -> v6: B and D are violated and high watermark C is cleared;
//   v7 -> v8: C is violated and low watermark D is cleared;
//   v9 -> v10: no watermark is violated.
// The one ordering in which each sentence lists exactly what the rules produce is, from the
// bottom: A (high) < D (low) < C (high) < B (low). Values are chosen between the levels.
const A: u16 = 0;
const D: u16 = 1;
const C: u16 = 2;
const B: u16 = 3;

pub(super) fn figure1() -> Watermarks {
    Watermarks::new(vec![
        Level::high(10.0), // A
        Level::low(20.0),  // D
        Level::high(30.0), // C
        Level::low(40.0),  // B
    ])
    .unwrap()
}

/// v1 … v10 of Figure 1 under the ordering above.
pub(super) const FIGURE1_VALUES: [f64; 10] =
    [5.0, 35.0, 45.0, 35.0, 45.0, 15.0, 25.0, 35.0, 38.0, 32.0];

#[test]
fn test_figure1_walk_through() {
    let (d, p) = (dev("wlan0"), Param::SignalQuality);
    let mut env = EnvTable::new();
    env.set_dev_param_wms(&d, &p, figure1()).unwrap();
    let mut got = Vec::new();
    for (i, v) in FIGURE1_VALUES.iter().enumerate() {
        let ev = set(&mut env, t(i as u64), &d, &p, *v);
        got.push(levels(&ev));
    }
    let m = LevelMask::of;
    let e = LevelMask::EMPTY;
    assert_eq!(got[0], None, "v1 is the baseline");
    assert_eq!(got[1], Some((m(&[C, A]), e)), "v1 -> v2: C and A violated");
    assert_eq!(
        got[2], None,
        "v2 -> v3: crossing low B upwards is no violation"
    );
    assert_eq!(got[3], Some((m(&[B]), e)), "v3 -> v4: B violated");
    assert_eq!(got[4], None);
    assert_eq!(
        got[5],
        Some((m(&[B, D]), m(&[C]))),
        "v5 -> v6: B and D violated, C cleared (A is below both lows and stays violated)"
    );
    assert_eq!(got[6], None);
    assert_eq!(
        got[7],
        Some((m(&[C]), m(&[D]))),
        "v7 -> v8: C violated, D cleared"
    );
    assert_eq!(got[8], None);
    assert_eq!(got[9], None, "v9 -> v10: no violation");
    assert_eq!(env.violated(&d, &p), m(&[A, C, B]));
}

#[test]
fn test_table3_handoff_cycle() {
    let (d, p) = (dev("wlan0"), Param::Availability);
    let mut env = EnvTable::new();
    env.set_dev_param_wms(&d, &p, table3()).unwrap();
    let m = LevelMask::of;
    let e = LevelMask::EMPTY;
    // "The parameter value is initialized to 0 indicating that the device is not available."
    assert_eq!(set(&mut env, t(0), &d, &p, 0.0), None);
    // Beacon heard: 25 "violates watermark 1 indicating that the device is now available".
    assert_eq!(
        levels(&set(&mut env, t(1), &d, &p, 25.0)),
        Some((m(&[1]), e))
    );
    for cycle in 0..3u64 {
        let base = 10 + cycle * 10;
        // Handoff decided: 45 violates watermark 3 (and, from the second cycle on, clears the
        // dummy low 2 that the previous cycle violated).
        let cleared = if cycle == 0 { e } else { m(&[2]) };
        let ev = set(&mut env, t(base), &d, &p, 45.0);
        assert_eq!(
            levels(&ev),
            Some((m(&[3]), cleared)),
            "cycle {cycle}: about to handoff"
        );
        // Handoff over: 55 violates watermark 4.
        let ev = set(&mut env, t(base + 1), &d, &p, 55.0);
        assert_eq!(
            levels(&ev),
            Some((m(&[4]), e)),
            "cycle {cycle}: handoff over"
        );
        // Back to 25: "violates the low watermark 2 (dummy) and clears the watermarks 3 and 4".
        let ev = set(&mut env, t(base + 2), &d, &p, 25.0);
        assert_eq!(
            levels(&ev),
            Some((m(&[2]), m(&[3, 4]))),
            "cycle {cycle}: steady"
        );
        assert_eq!(env.violated(&d, &p), m(&[1, 2]));
    }
    // Out of range: 5 violates low 0 ("device is unavailable") and clears high 1.
    let ev = set(&mut env, t(100), &d, &p, 5.0);
    assert_eq!(levels(&ev), Some((m(&[0]), m(&[1]))));
    // Back in range: 25 violates 1 and clears 0; the dummy 2 (above 1) stays violated.
    let ev = set(&mut env, t(101), &d, &p, 25.0);
    assert_eq!(levels(&ev), Some((m(&[1]), m(&[0]))));
    let ev = ev.unwrap();
    assert_eq!((ev.at, ev.value, ev.highs), (t(101), 25.0, m(&[1, 3, 4])));
}

#[test]
fn test_get_dev_params_reports_values_and_state() {
    let (d, p) = (dev("wlan0"), Param::Availability);
    let mut env = EnvTable::new();
    env.set_dev_param_wms(&d, &p, table3()).unwrap();
    env.set_dev_param(t(0), &d, &p, 0.0).unwrap();
    env.set_dev_param(t(5), &d, &p, 25.0).unwrap();
    env.set_dev_param(t(6), &d, &Param::Cost, 3.0).unwrap();
    let got = env.get_dev_params(&d);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].param, Param::Availability);
    assert_eq!((got[0].raw, got[0].updated_at), (25.0, t(5)));
    assert_eq!(got[0].violated, LevelMask::of(&[1]));
    assert_eq!((got[1].param.clone(), got[1].raw), (Param::Cost, 3.0));
    assert!(env.get_dev_params(&dev("eth0")).is_empty());
    assert!(env.set_dev_param(t(7), &d, &p, f64::NAN).is_err());
}

#[test]
fn test_undrained_events_drop_oldest_and_are_counted() {
    let (d, p) = (dev("wlan0"), Param::Availability);
    let mut env = EnvTable::with_event_capacity(2).unwrap();
    env.set_dev_param_wms(&d, &p, table3()).unwrap();
    for (i, v) in [0.0, 25.0, 45.0, 55.0, 25.0].iter().enumerate() {
        env.set_dev_param(t(i as u64), &d, &p, *v).unwrap();
    }
    assert_eq!(env.events_lost(), 2);
    assert_eq!(
        env.poll_event().map(|e| e.violated),
        Some(LevelMask::of(&[4]))
    );
    assert_eq!(
        env.poll_event().map(|e| e.violated),
        Some(LevelMask::of(&[2]))
    );
    assert_eq!(env.poll_event(), None);
}

#[test]
fn test_setting_watermarks_makes_a_baseline() {
    let (d, p) = (dev("wlan0"), Param::Availability);
    let mut env = EnvTable::new();
    env.set_dev_param(t(0), &d, &p, 45.0).unwrap();
    env.set_dev_param_wms(&d, &p, table3()).unwrap();
    assert_eq!(env.poll_event(), None);
    assert_eq!(env.violated(&d, &p), LevelMask::EMPTY);
    // 45 is above level 3: moving to 55 crosses only level 4.
    let ev = set(&mut env, t(1), &d, &p, 55.0);
    assert_eq!(levels(&ev), Some((LevelMask::of(&[4]), LevelMask::EMPTY)));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Up to 12 levels at distinct multiples of 5 in 0..100, each high or low.
    fn arb_levels() -> impl Strategy<Value = Vec<Level>> {
        proptest::collection::btree_map(0u32..20, any::<bool>(), 1..12).prop_map(|m| {
            m.into_iter()
                .map(|(v, high)| {
                    let v = f64::from(v * 5);
                    if high { Level::high(v) } else { Level::low(v) }
                })
                .collect()
        })
    }

    /// Values that often sit exactly on a level.
    fn arb_values() -> impl Strategy<Value = Vec<f64>> {
        proptest::collection::vec((0u32..42).prop_map(|v| f64::from(v) * 2.5), 1..60)
    }

    /// §3 read literally, on level values rather than bit masks.
    fn model(
        levels: &[Level],
        state: &mut Vec<usize>,
        old: f64,
        new: f64,
    ) -> (Vec<usize>, Vec<usize>) {
        let violated: Vec<usize> = levels
            .iter()
            .enumerate()
            .filter(|(_, l)| match l.kind {
                LevelKind::High => old < l.value && l.value <= new,
                LevelKind::Low => old > l.value && l.value >= new,
            })
            .map(|(i, _)| i)
            .collect();
        let cleared: Vec<usize> = state
            .iter()
            .copied()
            .filter(|&s| {
                violated
                    .iter()
                    .any(|&v| match (levels[s].kind, levels[v].kind) {
                        (LevelKind::High, LevelKind::Low) => levels[v].value < levels[s].value,
                        (LevelKind::Low, LevelKind::High) => levels[v].value > levels[s].value,
                        _ => false,
                    })
            })
            .collect();
        state.retain(|s| !cleared.contains(s));
        for v in &violated {
            if !state.contains(v) {
                state.push(*v);
            }
        }
        (violated, cleared)
    }

    fn mask(v: &[usize]) -> LevelMask {
        LevelMask::of(&v.iter().map(|&i| i as u16).collect::<Vec<_>>())
    }

    proptest! {
        #[test]
        fn prop_events_follow_section3(levels in arb_levels(), values in arb_values()) {
            let (d, p) = (dev("x"), Param::Loss);
            let mut env = EnvTable::new();
            env.set_dev_param_wms(&d, &p, Watermarks::new(levels.clone()).unwrap()).unwrap();
            let mut state = Vec::new();
            let mut prev: Option<f64> = None;
            for (i, v) in values.iter().enumerate() {
                let ev = set(&mut env, t(i as u64), &d, &p, *v);
                let expected = prev.map(|old| model(&levels, &mut state, old, *v));
                match expected {
                    Some((violated, cleared)) if !violated.is_empty() => {
                        let ev = ev.unwrap();
                        prop_assert_eq!(ev.violated, mask(&violated));
                        prop_assert_eq!(ev.cleared, mask(&cleared));
                    }
                    _ => prop_assert!(ev.is_none()),
                }
                prop_assert_eq!(env.violated(&d, &p), mask(&state));
                prev = Some(*v);
            }
        }

        /// Whatever the updates, a complex action is active exactly when one of its gates has
        /// its threshold of violated inputs, and it fires exactly when it becomes active.
        #[test]
        fn prop_threshold_circuit_matches_its_definition(
            gates in proptest::collection::vec(
                (proptest::collection::btree_set((0usize..3, 0u16..4), 1..4), 1u32..4),
                1..4,
            ),
            updates in proptest::collection::vec((0usize..3, 0u32..10), 1..80),
        ) {
            let params = [Param::Cost, Param::Loss, Param::Latency];
            let d = dev("x");
            let mut env = EnvTable::new();
            let w = Watermarks::new(vec![
                Level::low(10.0),
                Level::high(20.0),
                Level::low(30.0),
                Level::high(40.0),
            ])
            .unwrap();
            for p in &params {
                env.set_dev_param_wms(&d, p, w.clone()).unwrap();
                env.set_dev_param(t(0), &d, p, 25.0).unwrap();
            }
            let mut table = ActionTable::new(d.clone());
            let mut id = None;
            let mut defs = Vec::new();
            for (inputs, threshold) in &gates {
                let inputs: Vec<(Param, u16)> =
                    inputs.iter().map(|(p, l)| (params[*p].clone(), *l)).collect();
                let threshold = (*threshold).min(inputs.len() as u32);
                id = Some(table.add_gate(UdpAction::Fail, threshold, &inputs).unwrap());
                defs.push((inputs, threshold));
            }
            let id = id.unwrap();
            let mut was_active = false;
            for (i, (p, v)) in updates.iter().enumerate() {
                env.set_dev_param(t(1 + i as u64), &d, &params[*p], f64::from(*v) * 5.0).unwrap();
                let mut fired = 0;
                while let Some(ev) = env.poll_event() {
                    fired += table.handle_event(&ev).len();
                }
                let active = defs.iter().any(|(inputs, threshold)| {
                    let on = inputs.iter().filter(|(p, l)| env.violated(&d, p).contains(*l)).count();
                    on as u32 >= *threshold
                });
                prop_assert_eq!(table.is_active(id), active);
                prop_assert_eq!(fired, usize::from(active && !was_active));
                was_active = active;
            }
        }
    }
}
