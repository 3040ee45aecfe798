//! Validation of the simulator and TCP NewReno against the scenario files in
//! `experiments/validation/` (the same checks `adaptnet validate` prints).

use adaptnet_sim::scenario::Scenario;
use adaptnet_sim::validation::{self, Check};
use std::path::PathBuf;

fn experiments() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
}

fn assert_pass(c: Result<Check, adaptnet_sim::scenario::ScenarioError>) {
    let c = c.unwrap_or_else(|e| panic!("{e}"));
    assert!(c.pass, "{c}");
}

#[test]
fn single_newreno_flow_fills_a_bdp_buffered_link() {
    assert_pass(validation::single_flow(&experiments(), 1));
}

#[test]
fn two_equal_rtt_flows_share_fairly() {
    assert_pass(validation::two_flows(&experiments(), &[1, 2, 3]));
}

#[test]
fn newreno_under_random_loss_follows_mathis() {
    for c in validation::mathis(&experiments(), 1).unwrap_or_else(|e| panic!("{e}")) {
        assert!(c.pass, "{c}");
    }
}

#[test]
fn mahimahi_constant_trace_delivers_its_rate() {
    assert_pass(validation::mahimahi(&experiments(), 1));
}

#[test]
fn same_seed_gives_identical_results_and_captures() {
    assert_pass(validation::determinism(&experiments(), 7));
}

#[test]
fn different_seeds_give_different_loss_patterns() {
    let s = Scenario::load(&experiments().join("validation/mathis-loss-1pct.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let a = s.run(7, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let b = s.run(8, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(
        a.results.flows[0].bytes_delivered,
        b.results.flows[0].bytes_delivered
    );
}

#[test]
fn outage_stops_delivery_then_flow_recovers() {
    assert_pass(validation::outage(&experiments(), 1));
}

#[test]
fn reordering_without_loss_triggers_spurious_fast_retransmit() {
    assert_pass(validation::reorder(&experiments(), 1));
}

#[test]
fn every_shipped_scenario_file_loads() {
    let mut files = Vec::new();
    let mut dirs = vec![experiments()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("experiments dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "toml") {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 8);
    for f in files {
        Scenario::load(&f).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Regression: after repeated timeouts a flow's RTO backoff was never cleared (every ACK
/// covered a retransmission, so Karn's rule gave no sample) and four of 100 flows starved.
#[test]
fn hundred_flows_none_starves_after_repeated_timeouts() {
    assert_pass(validation::hundred_flows(&experiments(), 1));
}

#[test]
fn limited_transmit_fast_retransmits_with_a_window_of_three() {
    assert_pass(validation::limited_transmit(&experiments(), 1));
}

#[test]
fn sack_recovers_a_multi_loss_window_without_a_timeout() {
    assert_pass(validation::sack_multi_loss(&experiments(), 1));
}

#[test]
fn timestamps_time_retransmitted_data() {
    assert_pass(validation::timestamps(&experiments(), 1));
}
