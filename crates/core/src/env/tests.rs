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
