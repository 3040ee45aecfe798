//! Checks of the env experiments' numbers (quick runs of the real scenario files).

use super::hysteresis::count_events;
use crate::{ExpOptions, Experiment};
use adaptnet_core::env::Hysteresis;
use std::path::PathBuf;
use std::time::Duration;

fn opts() -> ExpOptions {
    ExpOptions {
        experiments_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments"),
        seeds: vec![1],
        quick: true,
    }
}

fn csv(e: &dyn Experiment, name: &str) -> Vec<Vec<String>> {
    let r = e.run(&opts(), &mut |_| {}).expect("runs");
    let (_, bytes) = r.files.iter().find(|(n, _)| n == name).expect("file");
    String::from_utf8_lossy(bytes)
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn num(s: &str) -> f64 {
    s.parse().expect("a number")
}

#[test]
fn test_table4_sleep_saves_about_one_beacon_per_handoff() {
    let rows = csv(&super::table4::Table4, "table4_savings.csv");
    assert_eq!(rows.len(), 3);
    for r in rows {
        let (beacon, sleep, one_beacon) = (num(&r[0]), num(&r[2]), num(&r[4]));
        assert!(
            (sleep - one_beacon).abs() < 0.25 * one_beacon,
            "beacon {beacon}: saved {sleep}, one beacon is {one_beacon}"
        );
    }
}

#[test]
fn test_table5_reset_helps_more_as_backoff_grows() {
    let rows = csv(&super::table5::Table5, "table5.csv");
    let gain = |r: &Vec<String>| num(&r[6]) - num(&r[5]);
    assert!(gain(&rows[0]).abs() < 1e-9, "near: no change");
    assert!(gain(&rows[3]) > gain(&rows[1]), "{rows:?}");
    assert!(gain(&rows[3]) > 0.05, "{rows:?}");
}

#[test]
fn test_table6_dupacks_to_a_reno_sender_save_time_at_every_beacon() {
    let o = ExpOptions {
        seeds: vec![1, 2],
        ..opts()
    };
    let r = super::table6::Table6.run(&o, &mut |_| {}).expect("runs");
    let (_, bytes) = r
        .files
        .iter()
        .find(|(n, _)| n == "table6_savings.json")
        .expect("file");
    let v: serde_json::Value = serde_json::from_slice(bytes).expect("json");
    let rows = v.as_array().expect("array");
    assert_eq!(rows.len(), 3, "one row per beacon interval");
    for row in rows {
        // [beacon, [RFC 6582 pair, Reno pair, rst-timers pair]]
        let reno = &row[1][1];
        let (mean, n) = (reno["mean"].as_f64(), reno["n"].as_u64());
        assert_eq!(n, Some(2), "{row}");
        // §5.4's mechanism works on the sender it was built for: it ends the RTO wait early.
        assert!(mean.is_some_and(|m| m > 0.2), "{row}");
    }
    // The blackout (fade + beacon phase) is drawn from the seed: two seeds, two lengths.
    let (_, bytes) = r
        .files
        .iter()
        .find(|(n, _)| n == "table6.json")
        .expect("file");
    let runs: serde_json::Value = serde_json::from_slice(bytes).expect("json");
    let blackout = |seed: u64| {
        runs.as_array()
            .expect("array")
            .iter()
            .find(|x| {
                x["mode"] == "recv unmodified, Reno"
                    && x["beacon_s"].as_f64() == Some(1.0)
                    && x["handoffs"].as_u64() == Some(1)
                    && x["seed"].as_u64() == Some(seed)
            })
            .and_then(|x| x["outages_s"][0].as_f64())
            .expect("run")
    };
    assert!((blackout(1) - blackout(2)).abs() > 1e-6);
}

#[test]
fn test_hysteresis_cuts_events_and_the_same_seed_repeats() {
    let none = count_events(1, Hysteresis::NONE).expect("runs");
    let all = Hysteresis {
        smoothing_weight: Some(0.2),
        dead_band: 0.3,
        min_dwell: Duration::from_secs(1),
    };
    let damped = count_events(1, all).expect("runs");
    assert!(none.events > 3 * damped.events, "{none:?} vs {damped:?}");
    let band = Hysteresis {
        dead_band: 0.3,
        ..Hysteresis::NONE
    };
    let band = count_events(1, band).expect("runs");
    assert!(
        band.events < none.events && band.events > damped.events,
        "{band:?}"
    );
    assert_eq!(count_events(1, all).expect("runs").events, damped.events);
}
