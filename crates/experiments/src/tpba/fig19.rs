//! Figure 19 (`papers/002` §6.1): "the dependence on the number of TCP connections. Let
//! N_tcp denote the number of simultaneous TCP connections … We conducted ten trials of 40-s
//! duration in both Topologies 1 and 2. Figure 19 shows the average values of fairness for
//! ADU1 and ADU2 after the first rate-probing period has finished. As can be seen, TPBA has no
//! dependence on N_tcp." The plotted values are lost in the extracted text; only that sentence
//! survives.
//!
//! Scenarios: `experiments/tpba/fig19.toml` (Topology 1) and `fig19-topology2.toml` (the
//! long-RTT stand-in), each with five TCP flows and one TPBA flow; a run keeps the first N_tcp
//! TCP flows. Fairness is Jain's index over the active flows in each 1 s interval, averaged
//! over the intervals that start after the TPBA flow's first switch to running.

use super::dynamics::adu1;
use super::{
    first_running_s, jitter_starts, json, kbps_series, mean, mean_from, run, scenario, seeds,
    tpba_switches,
};
use crate::report::plot::line_chart_of;
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_sim::media_metrics::jain_series;
use adaptnet_sim::scenario::{FlowType, Scenario};
use serde::Serialize;

/// `adaptnet exp tpba-fig19`.
pub struct Fig19;

/// The topologies of Figure 19: (name, scenario file).
const TOPOLOGIES: [(&str, &str); 2] = [
    ("Topology 1", "fig19.toml"),
    ("Topology 2", "fig19-topology2.toml"),
];

/// N_tcp of Figure 19.
const N_TCP: std::ops::RangeInclusive<usize> = 1..=5;

/// One trial.
#[derive(Clone, Debug, Serialize)]
pub struct Fig19Run {
    /// "Topology 1" or "Topology 2".
    pub topology: &'static str,
    /// "ADU2" or "ADU1".
    pub adu: &'static str,
    /// Competing TCP connections.
    pub n_tcp: usize,
    /// Seed.
    pub seed: u64,
    /// End of the first rate-probing period, s (`None`: it never ended).
    pub first_running_s: Option<f64>,
    /// Mean Jain's index after it (`None`: no interval after it).
    pub fairness: Option<f64>,
    /// Mean Jain's index from TPBA's start (1 s), defined whether or not probing ended.
    pub fairness_from_start: Option<f64>,
    /// Mean Jain's index among the TCP flows only, from 1 s (how fair TCP is to itself here).
    pub tcp_only_fairness: Option<f64>,
    /// TPBA's mean rate after it, kbit/s.
    pub tpba_kbps: Option<f64>,
    /// The TCP flows' mean rate after it, kbit/s.
    pub tcp_kbps: Option<f64>,
    /// The TCP flows' mean RTT over the run, ms: the loaded RTT §4's choice of T_TCP = 1 s
    /// assumes to be under 200 ms.
    pub tcp_rtt_mean_ms: f64,
    /// The bottleneck queue's peak, bytes (the description says it never overflows).
    pub max_queue_bytes: u64,
    /// Packets the bottleneck queue dropped.
    pub queue_drops: u64,
}

/// The bottleneck's forward direction in the dumbbell.
const BOTTLENECK: &str = "bottleneck:left->right";

/// `base` with only its first `n` TCP flows (every other flow kept).
pub(super) fn with_n_tcp(base: &Scenario, n: usize) -> Scenario {
    let mut s = base.clone();
    let mut kept = 0;
    s.flows.retain(|f| {
        if matches!(f.kind, FlowType::Tcp { .. }) {
            kept += 1;
            kept <= n
        } else {
            true
        }
    });
    s
}

/// Runs one trial.
fn trial(
    s: &Scenario,
    ids: (&'static str, &'static str, usize, u64),
    progress: &mut dyn FnMut(f64),
    done: f64,
    share: f64,
) -> Result<Fig19Run, ExpError> {
    let (topology, adu, n_tcp, seed) = ids;
    let mut s = s.clone();
    jitter_starts(&mut s, seed);
    let (w, r) = run(&s, seed, progress, done, share)?;
    let names: Vec<&str> = s.flows.iter().map(|f| f.name.as_str()).collect();
    let tcps: Vec<&str> = s
        .flows
        .iter()
        .filter(|f| matches!(f.kind, FlowType::Tcp { .. }))
        .map(|f| f.name.as_str())
        .collect();
    let first = first_running_s(&tpba_switches(&w, &s, "tpba")?);
    let period = r.sample_period_s;
    let start_s = s
        .flows
        .iter()
        .find(|f| f.name == "tpba")
        .map_or(0.0, |f| f.start.as_secs_f64());
    let jain = jain_series(&r, &names);
    let after = |series: &[(f64, f64)]| first.and_then(|t| mean_from(series, t, period));
    let rate_after = |kind: &str| -> Option<f64> {
        let xs: Vec<f64> = r
            .flows
            .iter()
            .filter(|f| f.kind == kind)
            .filter_map(|f| after(&kbps_series(&r, f)))
            .collect();
        (!xs.is_empty()).then(|| mean(&xs))
    };
    Ok(Fig19Run {
        topology,
        adu,
        n_tcp,
        seed,
        first_running_s: first,
        fairness: after(&jain),
        fairness_from_start: mean_from(&jain, start_s, period),
        tcp_only_fairness: mean_from(&jain_series(&r, &tcps), start_s, period),
        tpba_kbps: rate_after("tpba"),
        tcp_kbps: rate_after("tcp"),
        tcp_rtt_mean_ms: mean(
            &r.flows
                .iter()
                .filter(|f| f.kind == "tcp" && f.rtt.count > 0)
                .map(|f| f.rtt.mean_ms)
                .collect::<Vec<_>>(),
        ),
        max_queue_bytes: r.link(BOTTLENECK).map_or(0, |l| l.stats.max_queue_bytes),
        queue_drops: r.link(BOTTLENECK).map_or(0, |l| l.stats.dropped_queue),
    })
}

/// The mean ± 95 % interval of the defined values, and how many were undefined.
fn stats(xs: &[Option<f64>]) -> (Option<Spread>, usize) {
    let v: Vec<f64> = xs.iter().flatten().copied().collect();
    let missing = xs.len() - v.len();
    ((!v.is_empty()).then(|| Spread::of(&v)), missing)
}

impl Experiment for Fig19 {
    fn name(&self) -> &'static str {
        "tpba-fig19"
    }

    fn summary(&self) -> &'static str {
        "papers/002 Fig. 19: TPBA's fairness against 1-5 competing TCP connections, ADU1/ADU2, Topologies 1 and 2, ten trials"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 10, 2);
        let mut variants = Vec::new();
        for (topology, file) in TOPOLOGIES {
            let base = scenario(opts, file)?;
            let mut one = base.clone();
            adu1(&mut one);
            variants.push((topology, "ADU2", base));
            variants.push((topology, "ADU1", one));
        }
        let total = (variants.len() * N_TCP.count() * seeds.len()) as f64;
        let mut runs = Vec::new();
        for (topology, adu, base) in &variants {
            for n in N_TCP {
                let s = with_n_tcp(base, n);
                for seed in &seeds {
                    let done = runs.len() as f64 / total;
                    let ids = (*topology, *adu, n, *seed);
                    runs.push(trial(&s, ids, progress, done, 1.0 / total)?);
                }
            }
        }
        let mut report = Report::default();
        report.text(format!(
            "papers/002 §6.1, Figure 19: N_tcp TCP flows from 0 s and one TPBA flow from 1 s on \
             one 1.2 Mbit/s bottleneck (Topology 1: 12 ms RTT; Topology 2: our 160 ms stand-in), \
             40 s, {} trials per point (every start delayed by a draw in [0, 500 ms)). f is \
             Jain's index over the active flows per 1 s interval, averaged over the intervals \
             after TPBA's first rate-probing period, as the paper averages; cells are the mean \
             over trials ± the half-width of its 95 % interval (Student's t). The paper's \
             plotted values are lost in the text; it says only: \"TPBA has no dependence on \
             N_tcp\". Loaded RTT, the bottleneck queue's peak and its drops check the \
             reconstruction: §4 chose T_TCP = 1 s for an average RTT under 200 ms, and the \
             paper reports no loss on this testbed.",
            seeds.len()
        ));
        let cell = |st: (Option<Spread>, usize)| match st {
            (Some(f), 0) => f.fmt_with(3),
            (Some(f), k) => format!("{}, {k} undefined", f.fmt_with(3)),
            (None, k) => format!("- ({k} undefined)"),
        };
        let mut summary = Table::new(["", "paper", "ours"]);
        for (topology, _) in TOPOLOGIES {
            let mut t = Table::new([
                "N_tcp",
                "ADU",
                "f after 1st probing (95 % interval)",
                "1st probing ended (mean s)",
                "f from 1 s",
                "f of the TCPs alone",
                "TPBA kbit/s",
                "TCP kbit/s",
                "fair share kbit/s",
                "TCP RTT ms",
                "peak queue kB",
                "queue drops",
            ]);
            let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
            let mut spread = Vec::new();
            for adu in ["ADU2", "ADU1"] {
                let mut pts = Vec::new();
                for n in N_TCP {
                    let rs: Vec<&Fig19Run> = runs
                        .iter()
                        .filter(|x| x.topology == topology && x.adu == adu && x.n_tcp == n)
                        .collect();
                    let col = |g: fn(&Fig19Run) -> Option<f64>| {
                        stats(&rs.iter().map(|&x| g(x)).collect::<Vec<_>>())
                    };
                    let f = col(|x| x.fairness);
                    if let (Some(m), _) = f {
                        pts.push((n as f64, m.mean));
                    }
                    let ended = col(|x| x.first_running_s);
                    let m0 = |st: (Option<Spread>, usize), digits: usize| {
                        st.0.map_or("-".into(), |m| format!("{:.digits$}", m.mean))
                    };
                    let peak = rs.iter().map(|x| x.max_queue_bytes).max().unwrap_or(0);
                    let drops: u64 = rs.iter().map(|x| x.queue_drops).sum();
                    t.row([
                        n.to_string(),
                        adu.to_string(),
                        cell(f),
                        format!("{}/{} ({})", rs.len() - ended.1, rs.len(), m0(ended, 1)),
                        m0(col(|x| x.fairness_from_start), 3),
                        m0(col(|x| x.tcp_only_fairness), 3),
                        m0(col(|x| x.tpba_kbps), 0),
                        m0(col(|x| x.tcp_kbps), 0),
                        format!("{:.0}", 1200.0 / (n + 1) as f64),
                        m0(col(|x| Some(x.tcp_rtt_mean_ms)), 0),
                        format!("{:.1}", peak as f64 / 1e3),
                        drops.to_string(),
                    ]);
                }
                let lo = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
                let hi = pts.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
                spread.push(format!(
                    "{adu}: mean f {lo:.3}-{hi:.3} over N_tcp 1-5 (spread {:.3})",
                    hi - lo
                ));
                lines.push((adu.to_string(), pts));
            }
            let stem = format!("fig19-{}", topology.to_lowercase().replace(' ', ""));
            report.table(
                format!("{topology}: fairness f after the first probing period"),
                &stem,
                t,
            );
            report.file(
                format!("{stem}.svg"),
                line_chart_of(
                    &format!("Fig. 19 ({topology}): number of TCP connections vs. fairness"),
                    "N_tcp",
                    "f",
                    &lines,
                )?
                .into_bytes(),
            );
            summary.row([
                format!("{topology}: dependence on N_tcp"),
                "none".to_string(),
                spread.join("; "),
            ]);
        }
        report.table("Figure 19, paper vs ours", "fig19-summary", summary);
        report.file("fig19.json", json(&runs)?);
        Ok(report)
    }
}
