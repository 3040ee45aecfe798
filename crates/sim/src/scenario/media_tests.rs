//! The media flow types end to end: validation errors name the field, and runs of the
//! paper's setups show the behaviour the paper reports (numbers that could fail).

use super::super::{Scenario, ScenarioError};
use crate::agents::lda::LdaSender;
use crate::agents::tpba::{TpbaReceiver, TpbaSender};
use crate::metrics::RunResults;
use crate::world::FlowId;
use adaptnet_core::Time;
use adaptnet_core::tpba::Period;
use std::path::Path;

const TOPOLOGY1: &str = include_str!("../../../../experiments/tpba/topology1.toml");
const FIG3: &str = include_str!("../../../../experiments/tpba/fig3-lda.toml");

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(text, "test.toml", Path::new("."), "test")
}

fn run(s: &Scenario, seed: u64) -> (crate::world::World, RunResults) {
    let mut w = s.build(seed).expect("builds");
    w.run_until(s.duration, &mut |_| {});
    let r = w.results(&s.name);
    (w, r)
}

/// Mean of a flow's goodput series over samples ending in `(from_s, to_s]`, bit/s.
fn mean_bps(r: &RunResults, flow: &str, from_s: f64, to_s: f64) -> f64 {
    let f = r.flow(flow).expect("flow");
    let xs: Vec<f64> = r
        .sample_times_s
        .iter()
        .zip(&f.goodput_series_bps)
        .filter(|(t, _)| **t > from_s && **t <= to_s)
        .map(|(_, b)| *b)
        .collect();
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

#[test]
fn test_tpba_reaches_the_fair_share_with_three_flows_and_recovers_after() {
    let s = parse(TOPOLOGY1).expect("valid");
    let (w, r) = run(&s, 1);
    // Flows 1-3 share 1.2 Mbit/s from the first probing period after flow 2 joins.
    let (f1, f2, f3) = (
        mean_bps(&r, "flow1", 18.0, 25.0),
        mean_bps(&r, "flow2", 18.0, 25.0),
        mean_bps(&r, "flow3", 18.0, 25.0),
    );
    let tcp_mean = (f1 + f2) / 2.0;
    assert!(
        (f3 - tcp_mean).abs() < 0.25 * tcp_mean,
        "TPBA {f3:.0} vs TCP mean {tcp_mean:.0} bit/s"
    );
    // After flow 2 left, a later probing period raises flow 3 again (§6.1).
    let late = mean_bps(&r, "flow3", 33.0, 40.0);
    assert!(
        late > 1.2 * f3,
        "rate increase after probing: {late:.0} vs {f3:.0}"
    );
    let (snd, rcv) = w.flow_agents(FlowId(2)).expect("flow 3");
    let sender = w.agent::<TpbaSender>(snd).expect("tpba sender");
    let receiver = w.agent::<TpbaReceiver>(rcv).expect("tpba receiver");
    assert!(sender.switches().len() >= 4, "{:?}", sender.switches());
    assert!(
        sender
            .switches()
            .iter()
            .any(|s| s.to == Period::Probing && s.cwnd_new_bytes.is_some())
    );
    let c = r.flow("flow3").expect("flow3").counters.clone();
    assert!(c["cwnd_handovers"] >= 1.0, "cwnd_new reached TCP: {c:?}");
    // No ADU corrupted, duplicated or reordered across the switches; ADUs came on both paths.
    assert_eq!(receiver.corrupted(), 0);
    assert_eq!(receiver.out_of_order(), 0);
    let arrivals = receiver.arrivals();
    assert!(arrivals.iter().any(|a| a.tcp) && arrivals.iter().any(|a| !a.tcp));
    assert!(arrivals.windows(2).all(|p| p[1].seq == p[0].seq + 1));
}

#[test]
fn test_lda_from_600_kbps_stays_above_the_fair_share_without_loss() {
    let s = parse(FIG3).expect("valid");
    let (w, r) = run(&s, 1);
    let fair = 1.2e6 / 3.0;
    let lda = mean_bps(&r, "flow3", 10.0, 60.0);
    let tcp = (mean_bps(&r, "flow1", 10.0, 60.0) + mean_bps(&r, "flow2", 10.0, 60.0)) / 2.0;
    assert!(lda > 1.3 * fair, "LDA {lda:.0} bit/s");
    assert!(tcp < 0.8 * fair, "TCP {tcp:.0} bit/s");
    let (snd, _) = w.flow_agents(FlowId(2)).expect("flow 3");
    let sender = w.agent::<LdaSender>(snd).expect("lda sender");
    let c = &r.flow("flow3").expect("flow3").counters;
    assert_eq!(c["lossy_adaptation_points"], 0.0, "no loss reported");
    // The rate never came down: it ends at or above where it started.
    let rates = sender.rates();
    assert!(rates.last().expect("rates").1 >= rates[0].1);
}

#[test]
fn test_tfrc_flow_runs_against_tcp() {
    let text = r#"
duration_s = 30
[topology]
kind = "dumbbell"
pairs = 2
[topology.bottleneck]
bandwidth_mbps = 1.2
delay_ms = 20
queue_packets = 20
[[flows]]
type = "tcp"
from = "s0"
to = "r0"
[[flows]]
name = "media"
type = "tfrc"
from = "s1"
to = "r1"
segment_bytes = 512
"#;
    let s = parse(text).expect("valid");
    let (_, r) = run(&s, 3);
    let tfrc = mean_bps(&r, "media", 10.0, 30.0);
    assert!(tfrc > 100e3 && tfrc < 1.0e6, "TFRC {tfrc:.0} bit/s");
    assert_eq!(r.flow("media").expect("media").kind, "tfrc");
}

#[test]
fn test_same_seed_same_results() {
    let s = parse(TOPOLOGY1).expect("valid");
    let a = serde_json::to_string(&run(&s, 7).1).expect("json");
    let b = serde_json::to_string(&run(&s, 7).1).expect("json");
    assert_eq!(a, b);
}

fn expect_invalid(text: &str, field: &str, needle: &str) {
    match parse(text) {
        Err(ScenarioError::Invalid {
            field: f, message, ..
        }) => {
            assert_eq!(f, field, "message: {message}");
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
        other => panic!("expected Invalid({field}), got {other:?}"),
    }
}

fn one_flow(keys: &str) -> String {
    format!(
        "duration_s = 5\n[topology]\nkind = \"dumbbell\"\npairs = 1\n[topology.bottleneck]\n\
         bandwidth_mbps = 1\n[[flows]]\nfrom = \"s0\"\nto = \"r0\"\n{keys}\n"
    )
}

#[test]
fn test_media_flow_errors_name_the_field_and_the_fix() {
    expect_invalid(
        &one_flow("type = \"tpba\"\nt_runing_s = 10"),
        "flows[0]",
        "t_runing_s",
    );
    expect_invalid(
        &one_flow("type = \"tpba\"\nepsilon_kbps = 30\nz_percent = 5"),
        "flows[0]",
        "at most one",
    );
    expect_invalid(
        &one_flow("type = \"tpba\"\nr_f = -1"),
        "flows[0].r_f",
        "(0, 100]",
    );
    expect_invalid(
        &one_flow("type = \"tpba\"\nsampling = \"sometimes\""),
        "flows[0].sampling",
        "cwnd-reductions",
    );
    expect_invalid(
        &one_flow("type = \"tpba\"\nadu_bytes = 64\nwrite_bytes = 512"),
        "flows[0].write_bytes",
        "1..=64",
    );
    expect_invalid(
        &one_flow("type = \"ldaf\"\nbottleneck = \"guess\""),
        "flows[0].bottleneck",
        "packet-pair",
    );
    expect_invalid(
        &one_flow("type = \"lda\"\nt_adapt_s = 0"),
        "flows[0].t_adapt_s",
        "> 0",
    );
    expect_invalid(
        &one_flow("type = \"tfrc\"\nb = 0.5"),
        "flows[0].b",
        "[1, 8]",
    );
    expect_invalid(&one_flow("type = \"rap\""), "flows[0].type", "\"tfrc\"");
}

#[test]
fn test_media_flow_keys_reach_the_configs() {
    let s = parse(&one_flow(
        "type = \"tpba\"\nt_running_s = 30\nz_percent = 5\nsampling = \"cwnd-reductions\"\n\
         sampling_max_s = 3\nlarge_decrease_fraction = 0.3\nlarge_decrease_successive = 2\n\
         adu_bytes = 64\nwrite_bytes = 64",
    ))
    .expect("valid");
    let super::super::FlowType::Media(super::MediaFlow::Tpba(c)) = &s.flows[0].kind else {
        panic!("not tpba: {:?}", s.flows[0].kind);
    };
    assert_eq!(c.fs.tpba.t_running, std::time::Duration::from_secs(30));
    assert_eq!(
        c.fs.tpba.agreement,
        adaptnet_core::tpba::Agreement::Relative { z: 0.05 }
    );
    assert_eq!(c.adu_bytes, 64);
    assert_eq!(s.flows[0].start, Time::ZERO);
    let s = parse(&one_flow(
        "type = \"ldaf\"\nair0_kbps = 100\nbottleneck_kbps = 1000",
    ))
    .expect("valid");
    assert_eq!(s.flows[0].kind.name(), "ldaf");
}

#[test]
fn test_jain_over_time_counts_only_active_flows() {
    let s = parse(TOPOLOGY1).expect("valid");
    let (_, r) = run(&s, 1);
    let j = crate::media_metrics::jain_series(&r, &["flow1", "flow2", "flow3"]);
    // Second 1: flow 1 alone (flow 3 starts at 1 s) is perfectly fair by definition.
    assert_eq!(j.first().map(|p| p.1), Some(1.0));
    let at = |t: f64| j.iter().find(|p| (p.0 - t).abs() < 1e-9).map(|p| p.1);
    // Three flows near their fair share late in flow 2's life.
    assert!(at(24.0).expect("24 s") > 0.95);
}
