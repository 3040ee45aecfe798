//! The foundation's validation checks: the simulator and TCP NewReno against known results,
//! run from the scenario files in `experiments/validation/`. Each check returns what was
//! expected, what was measured, and whether it passed; the test suite asserts them and
//! `adaptnet validate` prints them.

use crate::metrics::{LinkResult, RunResults};
use crate::scenario::{FlowType, RunOutput, Scenario, ScenarioError};
use adaptnet_core::tcp::TcpConfig;
use std::fmt;
use std::path::Path;

/// One check's outcome.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Check {
    /// What is checked.
    pub name: String,
    /// Scenario file (relative to the experiments directory).
    pub scenario: String,
    /// The expectation, in words and numbers.
    pub expected: String,
    /// What this run measured.
    pub measured: String,
    /// Whether the measurement meets the expectation.
    pub pass: bool,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {} ({}): expected {}, measured {}",
            if self.pass { "pass" } else { "FAIL" },
            self.name,
            self.scenario,
            self.expected,
            self.measured
        )
    }
}

fn run(dir: &Path, rel: &str, seed: u64) -> Result<RunOutput, ScenarioError> {
    Scenario::load(&dir.join(rel))?.run(seed, &mut |_| {})
}

fn bottleneck(r: &RunResults) -> Option<&LinkResult> {
    r.link("bottleneck:left->right")
}

fn check(name: &str, scenario: &str, expected: String, measured: String, pass: bool) -> Check {
    Check {
        name: name.to_string(),
        scenario: scenario.to_string(),
        expected,
        measured,
        pass,
    }
}

/// One NewReno flow, 1 Mbit/s, 100 ms RTT, BDP buffer: ≥ 90 % utilisation over 60 s.
pub fn single_flow(dir: &Path, seed: u64) -> Result<Check, ScenarioError> {
    let rel = "validation/single-flow.toml";
    let out = run(dir, rel, seed)?;
    let util = bottleneck(&out.results).map_or(0.0, |l| l.utilization);
    Ok(check(
        "NewReno fills a BDP-buffered link",
        rel,
        "utilisation >= 90 %".into(),
        format!("{:.1} %", util * 100.0),
        util >= 0.90,
    ))
}

/// Two equal-RTT NewReno flows over 120 s: Jain's index ≥ 0.95 for every seed.
pub fn two_flows(dir: &Path, seeds: &[u64]) -> Result<Check, ScenarioError> {
    let rel = "validation/two-flows.toml";
    let mut worst = f64::INFINITY;
    let mut all = Vec::new();
    for &seed in seeds {
        let j = run(dir, rel, seed)?.results.jain_index;
        worst = worst.min(j);
        all.push(format!("{j:.3}"));
    }
    Ok(check(
        "two equal-RTT NewReno flows share fairly",
        rel,
        format!("Jain >= 0.95 for seeds {seeds:?}"),
        format!("Jain {}", all.join(", ")),
        worst >= 0.95,
    ))
}

/// NewReno goodput under random loss p within 0.6×–1.4× of MSS·1.22/(RTT·√p).
pub fn mathis(dir: &Path, seed: u64) -> Result<Vec<Check>, ScenarioError> {
    let mut checks = Vec::new();
    for (rel, p) in [
        ("validation/mathis-loss-0.5pct.toml", 0.005),
        ("validation/mathis-loss-1pct.toml", 0.01),
        ("validation/mathis-loss-2pct.toml", 0.02),
    ] {
        let out = run(dir, rel, seed)?;
        let goodput = out
            .results
            .flows
            .first()
            .map_or(0.0, |f| f.goodput_bps / 8.0);
        let model = mathis_bytes_per_s(1460.0, 0.1, p);
        let ratio = goodput / model;
        checks.push(check(
            &format!("NewReno at {} % loss follows Mathis", p * 100.0),
            rel,
            format!("0.6x-1.4x of {:.0} kB/s", model / 1e3),
            format!("{:.0} kB/s = {ratio:.2}x", goodput / 1e3),
            (0.6..=1.4).contains(&ratio),
        ));
    }
    Ok(checks)
}

/// The Mathis et al. estimate of TCP throughput, bytes per second.
pub fn mathis_bytes_per_s(mss_bytes: f64, rtt_s: f64, p: f64) -> f64 {
    mss_bytes * f64::sqrt(1.5) / (rtt_s * p.sqrt())
}

/// A constant 12 Mbit/s Mahimahi trace delivers 12 Mbit/s ± 2 % when saturated.
pub fn mahimahi(dir: &Path, seed: u64) -> Result<Check, ScenarioError> {
    let rel = "validation/mahimahi-12mbps.toml";
    let out = run(dir, rel, seed)?;
    let delivered = bottleneck(&out.results).map_or(0, |l| l.stats.delivered_bytes);
    let rate = delivered as f64 * 8.0 / out.results.duration_s;
    let err = (rate - 12e6).abs() / 12e6;
    Ok(check(
        "Mahimahi constant 12 Mbit/s trace",
        rel,
        "12 Mbit/s +- 2 %".into(),
        format!(
            "{:.3} Mbit/s ({:+.2} %)",
            rate / 1e6,
            (rate / 12e6 - 1.0) * 100.0
        ),
        err <= 0.02,
    ))
}

/// Same scenario and seed ⇒ byte-identical results and captures.
pub fn determinism(dir: &Path, seed: u64) -> Result<Check, ScenarioError> {
    let rel = "validation/outage.toml";
    let a = run(dir, rel, seed)?;
    let b = run(dir, rel, seed)?;
    let ja = serde_json::to_vec(&a.results).unwrap_or_default();
    let jb = serde_json::to_vec(&b.results).unwrap_or_default();
    let same = !ja.is_empty() && ja == jb && a.captures == b.captures;
    Ok(check(
        "same seed, identical results",
        rel,
        "byte-identical JSON and pcap".into(),
        format!(
            "{} bytes JSON, {} bytes pcap, {}",
            ja.len(),
            a.captures.iter().map(|c| c.1.len()).sum::<usize>(),
            if same { "identical" } else { "DIFFERENT" }
        ),
        same,
    ))
}

/// A 5 s outage at 20 s: no delivery during it, recovery afterwards.
pub fn outage(dir: &Path, seed: u64) -> Result<Check, ScenarioError> {
    let rel = "validation/outage.toml";
    let out = run(dir, rel, seed)?;
    let r = &out.results;
    let Some(flow) = r.flows.first() else {
        return Ok(check(
            "outage",
            rel,
            "one flow".into(),
            "none".into(),
            false,
        ));
    };
    let series = || r.sample_times_s.iter().zip(&flow.goodput_series_bps);
    let during: f64 = series()
        .filter(|(t, _)| **t > 21.0 + 1e-9 && **t <= 25.0 + 1e-9)
        .map(|(_, b)| *b)
        .sum();
    let after = series()
        .filter(|(t, _)| **t > 30.0)
        .map(|(_, b)| *b)
        .sum::<f64>()
        / 10.0;
    let timeouts = flow.counters.get("timeouts").copied().unwrap_or(0.0);
    Ok(check(
        "outage stops delivery, flow recovers",
        rel,
        "0 bit/s in (21 s, 25 s]; > 1.5 Mbit/s after 30 s; >= 1 RTO".into(),
        format!(
            "{during:.0} bit/s during, {:.2} Mbit/s after, {timeouts} RTOs",
            after / 1e6
        ),
        during == 0.0 && after > 1.5e6 && timeouts >= 1.0,
    ))
}

/// A reordering burst without loss triggers a spurious fast retransmit.
pub fn reorder(dir: &Path, seed: u64) -> Result<Check, ScenarioError> {
    let rel = "validation/reorder.toml";
    let out = run(dir, rel, seed)?;
    let Some(flow) = out.results.flows.first() else {
        return Ok(check(
            "reorder",
            rel,
            "one flow".into(),
            "none".into(),
            false,
        ));
    };
    let fr = flow
        .counters
        .get("fast_retransmits")
        .copied()
        .unwrap_or(0.0);
    let rto = flow.counters.get("timeouts").copied().unwrap_or(0.0);
    Ok(check(
        "reordering causes a spurious fast retransmit",
        rel,
        "0 packets lost, >= 1 fast retransmit, 0 RTOs".into(),
        format!(
            "{} lost, {fr} fast retransmits, {rto} RTOs",
            flow.packets_lost
        ),
        flow.packets_lost == 0 && fr >= 1.0 && rto == 0.0,
    ))
}

/// 100 NewReno flows on a 100 Mbit/s, 50 ms RTT, BDP-buffered dumbbell (regression: an RTO
/// backoff that was never cleared after a timeout starved single flows for tens of seconds):
/// every flow gets at least a quarter of the mean goodput and Jain's index is at least 0.98.
pub fn hundred_flows(dir: &Path, seed: u64) -> Result<Check, ScenarioError> {
    let rel = "validation/hundred-flows.toml";
    let out = run(dir, rel, seed)?;
    let r = &out.results;
    let goodputs: Vec<f64> = r.flows.iter().map(|f| f.goodput_bps).collect();
    let mean = goodputs.iter().sum::<f64>() / goodputs.len().max(1) as f64;
    let worst = goodputs.iter().copied().fold(f64::INFINITY, f64::min);
    Ok(check(
        "100 flows: no flow starves after timeouts",
        rel,
        "every flow >= 25 % of the mean, Jain >= 0.98".into(),
        format!(
            "worst flow {:.0} kbit/s = {:.0} % of the mean {:.0} kbit/s, Jain {:.3}",
            worst / 1e3,
            100.0 * worst / mean.max(f64::MIN_POSITIVE),
            mean / 1e3,
            r.jain_index
        ),
        goodputs.len() == 100 && worst >= 0.25 * mean && r.jain_index >= 0.98,
    ))
}

fn counter(r: &RunResults, name: &str) -> f64 {
    r.flows
        .first()
        .and_then(|f| f.counters.get(name))
        .copied()
        .unwrap_or(0.0)
}

/// Runs `rel` with `change` applied to every TCP flow's configuration.
fn run_variant(
    dir: &Path,
    rel: &str,
    seed: u64,
    change: impl Fn(&mut TcpConfig),
) -> Result<RunResults, ScenarioError> {
    let mut scenario = Scenario::load(&dir.join(rel))?;
    for flow in &mut scenario.flows {
        if let FlowType::Tcp { config, .. } = &mut flow.kind {
            change(config);
        }
    }
    Ok(scenario.run(seed, &mut |_| {})?.results)
}

/// Runs `rel` as written and with `change` applied to every TCP flow's configuration.
fn run_with_and_without(
    dir: &Path,
    rel: &str,
    seed: u64,
    change: impl Fn(&mut TcpConfig),
) -> Result<(RunResults, RunResults), ScenarioError> {
    Ok((
        run_variant(dir, rel, seed, |_| {})?,
        run_variant(dir, rel, seed, change)?,
    ))
}

/// RFC 3042 limited transmit with a window of three segments whose first is lost: fast
/// retransmit and no timeout; the same run without limited transmit needs a timeout (so the
/// check can tell the two apart).
pub fn limited_transmit(dir: &Path, seed: u64) -> Result<Check, ScenarioError> {
    let rel = "validation/limited-transmit-window3.toml";
    let (with, without) = run_with_and_without(dir, rel, seed, |c| c.limited_transmit = false)?;
    let (fr, rto) = (
        counter(&with, "fast_retransmits"),
        counter(&with, "timeouts"),
    );
    let rto_without = counter(&without, "timeouts");
    Ok(check(
        "limited transmit: fast retransmit with a window of 3",
        rel,
        ">= 1 fast retransmit, 0 RTOs (without it: >= 1 RTO)".into(),
        format!("{fr} fast retransmits, {rto} RTOs (without: {rto_without} RTOs)"),
        fr >= 1.0 && rto == 0.0 && rto_without >= 1.0,
    ))
}

/// SACK (RFC 6675) repairs twelve holes in one window with one retransmission each and no
/// timeout; NewReno on the same losses needs a timeout.
pub fn sack_multi_loss(dir: &Path, seed: u64) -> Result<Check, ScenarioError> {
    let rel = "validation/sack-multi-loss.toml";
    let (with, without) = run_with_and_without(dir, rel, seed, |c| c.sack = false)?;
    let lost = with.flows.first().map_or(0, |f| f.packets_lost);
    let (rtx, rto) = (counter(&with, "retransmits"), counter(&with, "timeouts"));
    let (rtx_without, rto_without) = (
        counter(&without, "retransmits"),
        counter(&without, "timeouts"),
    );
    Ok(check(
        "SACK recovers a multi-loss window without a timeout",
        rel,
        "0 RTOs, one retransmission per lost packet (without SACK: >= 1 RTO)".into(),
        format!(
            "{lost} lost, {rtx} retransmitted, {rto} RTOs (without: {rtx_without} \
             retransmitted, {rto_without} RTOs)"
        ),
        rto == 0.0 && rtx == lost as f64 && lost > 0 && rto_without >= 1.0,
    ))
}

/// RFC 7323 timestamps: ACKs of retransmitted data are timed too, so the same lossy run takes
/// more RTT samples than Karn's rule allows without them.
pub fn timestamps(dir: &Path, seed: u64) -> Result<Check, ScenarioError> {
    let rel = "validation/sack-multi-loss.toml";
    let ts = run_variant(dir, rel, seed, |c| {
        c.sack = false;
        c.timestamps = true;
    })?;
    let no_ts = run_variant(dir, rel, seed, |c| c.sack = false)?;
    let (with, without) = (counter(&ts, "rtt_samples"), counter(&no_ts, "rtt_samples"));
    Ok(check(
        "timestamps: RTT samples from retransmitted data",
        rel,
        "more RTT samples with timestamps than without (NewReno, same losses)".into(),
        format!("{with} samples with timestamps, {without} without"),
        with > without,
    ))
}

/// Every check, in order.
pub fn all(dir: &Path, seed: u64) -> Result<Vec<Check>, ScenarioError> {
    let mut v = vec![
        single_flow(dir, seed)?,
        two_flows(dir, &[seed, seed + 1, seed + 2])?,
    ];
    v.extend(mathis(dir, seed)?);
    v.push(mahimahi(dir, seed)?);
    v.push(determinism(dir, seed)?);
    v.push(outage(dir, seed)?);
    v.push(reorder(dir, seed)?);
    v.push(limited_transmit(dir, seed)?);
    v.push(sack_multi_loss(dir, seed)?);
    v.push(timestamps(dir, seed)?);
    v.push(hundred_flows(dir, seed)?);
    Ok(v)
}
