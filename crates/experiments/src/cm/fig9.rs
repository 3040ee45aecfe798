//! Figure 9 (papers/003 §4.1): four concurrent Web-like connections from one server to one
//! client over a 1 Mbit/s, 120 ms bottleneck with TCP and CBR cross traffic — independent
//! NewReno connections against TCP/CM connections sharing one macroflow.
//!
//! Scenarios: `experiments/cm/fig9-newreno.toml` and `fig9-tcpcm.toml` (identical but for the
//! four test flows' type). Per connection: throughput = bytes / (completion − start); spread =
//! max/min; aggregate = sum (the paper's ≈650 and ≈500 kbit/s are sums of its per-connection
//! rates); Jain's index over the four.

use super::{
    flow, jitter_starts, json, kbps, mean, run, scenario, seeds, sequence_trace, transfer_bps,
};
use crate::report::plot::line_chart_of;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_sim::metrics::{RunResults, jain_index};
use adaptnet_sim::scenario::{FlowType, Scenario};
use serde::Serialize;
use std::time::Duration;

/// The four test connections.
const CONNS: [&str; 4] = ["conn1", "conn2", "conn3", "conn4"];
/// Connections open within this window (drawn per seed).
const OPEN_JITTER: Duration = Duration::from_millis(50);

/// `adaptnet exp cm-fig9`.
pub struct Fig9;

/// One run's numbers.
#[derive(Clone, Debug, Serialize)]
pub struct Fig9Run {
    /// "newreno" or "tcp-cm".
    pub mode: String,
    /// Seed.
    pub seed: u64,
    /// Per-connection throughput, bit/s.
    pub conn_bps: Vec<f64>,
    /// max / min.
    pub spread: f64,
    /// Jain's index over the four.
    pub jain: f64,
    /// Sum of the four, bit/s.
    pub aggregate_bps: f64,
    /// Whether all four transfers completed.
    pub all_completed: bool,
}

/// Runs one mode with one seed; `quick` shrinks the transfers.
pub fn run_one(
    opts: &ExpOptions,
    tcp_cm: bool,
    seed: u64,
    progress: &mut dyn FnMut(f64),
    done: f64,
    share: f64,
) -> Result<(Fig9Run, RunResults), ExpError> {
    let file = if tcp_cm {
        "fig9-tcpcm.toml"
    } else {
        "fig9-newreno.toml"
    };
    let mut s = scenario(opts, file)?;
    if opts.quick {
        quick(&mut s);
    }
    jitter_starts(&mut s, seed, &CONNS, OPEN_JITTER);
    let r = run(&s, seed, progress, done, share)?;
    let mut conn_bps = Vec::new();
    let mut all_completed = true;
    for name in CONNS {
        let f = flow(&r, name)?;
        all_completed &= f.counters.contains_key("completed_s");
        conn_bps.push(transfer_bps(f));
    }
    let (lo, hi) = min_max(&conn_bps);
    let run = Fig9Run {
        mode: if tcp_cm { "tcp-cm" } else { "newreno" }.into(),
        seed,
        spread: hi / lo.max(1e-9),
        jain: jain_index(&conn_bps),
        aggregate_bps: conn_bps.iter().sum(),
        conn_bps,
        all_completed,
    };
    Ok((run, r))
}

/// Quick mode: 250 kB transfers, 50 s.
fn quick(s: &mut Scenario) {
    s.duration = Time::from_secs(50);
    for f in &mut s.flows {
        f.stop = f.stop.min(s.duration);
        if let FlowType::Tcp { bytes, .. } | FlowType::TcpCm { bytes, .. } = &mut f.kind
            && bytes.is_some()
        {
            *bytes = Some(250_000);
        }
    }
}

fn min_max(xs: &[f64]) -> (f64, f64) {
    xs.iter()
        .fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)))
}

fn seq_plot(r: &RunResults, title: &str) -> Result<Vec<u8>, ExpError> {
    // Up to a little after the last transfer completes.
    let mut end: f64 = 0.0;
    for name in CONNS {
        let f = flow(r, name)?;
        end = end.max(
            f.counters
                .get("completed_s")
                .copied()
                .unwrap_or(r.duration_s),
        );
    }
    let mut series = Vec::new();
    for name in CONNS {
        let mut trace = sequence_trace(r, flow(r, name)?);
        trace.retain(|p| p.0 <= end + 5.0);
        series.push((name, trace));
    }
    Ok(line_chart_of(title, "time (s)", "data delivered (kB)", &series)?.into_bytes())
}

impl Experiment for Fig9 {
    fn name(&self) -> &'static str {
        "cm-fig9"
    }

    fn summary(&self) -> &'static str {
        "papers/003 Fig. 9: 4 Web-like connections, NewReno vs TCP/CM, 1 Mbit/s, 120 ms"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 5, 2);
        let share = 1.0 / (2 * seeds.len()) as f64;
        let mut runs = Vec::new();
        let mut first: Vec<RunResults> = Vec::new();
        for (i, seed) in seeds.iter().enumerate() {
            for (j, tcp_cm) in [false, true].into_iter().enumerate() {
                let done = (2 * i + j) as f64 * share;
                let (r, res) = run_one(opts, tcp_cm, *seed, progress, done, share)?;
                runs.push(r);
                if i == 0 {
                    first.push(res);
                }
            }
        }
        let mut report = Report::default();
        report.text(
            "papers/003 Figure 9: four concurrent 1 MB transfers (server s0 -> client r0) over a \
             1 Mbit/s bottleneck, 120 ms RTT, 50-packet DropTail buffer; cross traffic: one \
             NewReno bulk transfer and 200 kbit/s CBR (reconstructed). Throughput per \
             connection = bytes / transfer time.",
        );
        let mut t = Table::new([
            "mode",
            "seed",
            "conn1",
            "conn2",
            "conn3",
            "conn4",
            "spread",
            "Jain",
            "aggregate",
        ]);
        for r in &runs {
            let mut row = vec![r.mode.clone(), r.seed.to_string()];
            row.extend(r.conn_bps.iter().map(|b| kbps(*b)));
            row.push(format!("{:.2}", r.spread));
            row.push(format!("{:.3}", r.jain));
            row.push(kbps(r.aggregate_bps));
            t.row(row);
        }
        report.table("per run (kbit/s)", "fig9-runs", t);
        report.table(
            format!("Figure 9, paper vs ours (mean over seeds {seeds:?})"),
            "fig9-summary",
            summary_table(&runs),
        );
        if let [nr, cm] = first.as_slice() {
            report.file(
                "fig9-newreno-seq.svg",
                seq_plot(nr, "Fig. 9 (top): 4 TCP NewReno connections")?,
            );
            report.file(
                "fig9-tcpcm-seq.svg",
                seq_plot(cm, "Fig. 9 (bottom): 4 TCP/CM connections")?,
            );
            report.file("fig9-newreno-results.json", json(nr)?);
            report.file("fig9-tcpcm-results.json", json(cm)?);
        }
        report.file("fig9.json", json(&runs)?);
        Ok(report)
    }
}

/// Mean over seeds of each mode's numbers, beside the paper's.
pub fn summary_table(runs: &[Fig9Run]) -> Table {
    let stat = |mode: &str, f: &dyn Fn(&Fig9Run) -> f64| {
        mean(
            &runs
                .iter()
                .filter(|r| r.mode == mode)
                .map(f)
                .collect::<Vec<_>>(),
        )
    };
    let lo = |r: &Fig9Run| min_max(&r.conn_bps).0;
    let hi = |r: &Fig9Run| min_max(&r.conn_bps).1;
    let mut t = Table::new([
        "metric",
        "paper NewReno",
        "ours NewReno",
        "paper TCP/CM",
        "ours TCP/CM",
    ]);
    t.row([
        "per-connection kbit/s (min-max)".to_string(),
        "120-213".into(),
        format!(
            "{}-{}",
            kbps(stat("newreno", &lo)),
            kbps(stat("newreno", &hi))
        ),
        "~120 each".into(),
        format!(
            "{}-{}",
            kbps(stat("tcp-cm", &lo)),
            kbps(stat("tcp-cm", &hi))
        ),
    ]);
    t.row([
        "spread max/min".to_string(),
        "1.78".into(),
        format!("{:.2}", stat("newreno", &|r| r.spread)),
        "~1.0".into(),
        format!("{:.2}", stat("tcp-cm", &|r| r.spread)),
    ]);
    t.row([
        "Jain index".to_string(),
        "-".into(),
        format!("{:.3}", stat("newreno", &|r| r.jain)),
        "-".into(),
        format!("{:.3}", stat("tcp-cm", &|r| r.jain)),
    ]);
    t.row([
        "aggregate kbit/s".to_string(),
        "~650".into(),
        kbps(stat("newreno", &|r| r.aggregate_bps)),
        "~500".into(),
        kbps(stat("tcp-cm", &|r| r.aggregate_bps)),
    ]);
    t
}
