//! Table 2 (papers/001 §5.1): the mechanism's cost. A bulk transfer's throughput with no
//! events, with 100 events/s, and with 100 events/s delivered to 10 subscribed applications and
//! checked against a 10-entry action table. The simulator charges no processing time, so its
//! throughputs can only show that events that trigger no action leave TCP untouched; the
//! processing cost is shown by the wall-clock time of the same runs (printed, not written: it is
//! not deterministic). Base scenario: `experiments/env/overhead.toml`.

use super::{env_mut, json, mean, only_flow, run, scenario, seeds, simple};
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::env::{Param, TcpAction};
use serde::Serialize;

/// The paper's Table 2 rows and Wavelan throughput (Ethernet: 7.43 / 7.47 / 7.39 / 7.46).
const PAPER: [(&str, f64); 4] = [
    ("unmodified kernel", 1.16),
    ("no events", 1.16),
    ("100 events/s", 1.16),
    ("100 events/s, 10 apps, 10 actions", 1.16),
];

/// `adaptnet exp env-table2`.
pub struct Table2;

/// One run.
#[derive(Clone, Debug, Serialize)]
pub struct Table2Run {
    /// Case (rows of `PAPER`, from the second).
    pub case: String,
    /// Seed.
    pub seed: u64,
    /// Throughput, Mbit/s.
    pub mbps: f64,
    /// Events the socket saw.
    pub events: f64,
}

impl Experiment for Table2 {
    fn name(&self) -> &'static str {
        "env-table2"
    }

    fn summary(&self) -> &'static str {
        "papers/001 Table 2: bulk TCP throughput with 0 and 100 events/s, 10 apps, 10 actions"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 10, 2);
        let cases = [PAPER[1].0, PAPER[2].0, PAPER[3].0];
        let total = (cases.len() * seeds.len()) as f64;
        let mut runs = Vec::new();
        let mut wall = Vec::new();
        for (ci, case) in cases.iter().enumerate() {
            let started = std::time::Instant::now();
            for &seed in &seeds {
                let mut s = scenario(opts, "overhead.toml")?;
                let end_s = s.duration.as_secs_f64();
                let env = env_mut(&mut s)?;
                let load = Param::from_name("load").map_err(|e| ExpError::Input(e.to_string()))?;
                if ci >= 1 {
                    // 100 crossings per second: 0 and 100 alternate every 10 ms.
                    let Some(p) = env.params.iter_mut().find(|p| p.param == load) else {
                        return Err(ExpError::Input(
                            "overhead.toml: no \"load\" parameter".into(),
                        ));
                    };
                    let n = (end_s * 100.0) as u64;
                    p.points = (0..n)
                        .map(|i| {
                            let v = if i % 2 == 0 { 0.0 } else { 100.0 };
                            (Time::from_millis(10 * i), v)
                        })
                        .collect();
                }
                if ci == 2 {
                    env.subscribers = 10;
                    if let Some(sock) = env.sockets.first_mut() {
                        sock.actions = (0..10)
                            .map(|i| {
                                let a = if i % 2 == 0 {
                                    TcpAction::ResetTimers
                                } else {
                                    TcpAction::DupAcks(3)
                                };
                                simple(Param::Cost, (i % 2) as u16, a)
                            })
                            .collect();
                    }
                }
                let done = runs.len() as f64 / total;
                let r = run(&s, seed, progress, done, 1.0 / total)?;
                let f = only_flow(&r)?;
                let end = f.counters.get("completed_s").copied().unwrap_or(f.stop_s);
                runs.push(Table2Run {
                    case: case.to_string(),
                    seed,
                    mbps: f.bytes_delivered as f64 * 8.0 / (end - f.start_s).max(1e-9) / 1e6,
                    events: super::counter(f, "env_events"),
                });
            }
            wall.push(started.elapsed().as_secs_f64() / seeds.len() as f64);
        }
        let mut report = Report::default();
        report.text(format!(
            "Table 2 (papers/001 §5.1): throughput of 10,240 × 1,400 bytes sent by TCP from the \
             mobile host (mean of {} seeds). The simulator charges no CPU time: equal \
             throughputs show that events which trigger no action leave TCP's behaviour \
             untouched, not that they are free; see the wall-clock column and `adaptnet bench`.",
            seeds.len()
        ));
        let mut t = Table::new([
            "case",
            "paper Wavelan Mb/s",
            "ours Mb/s",
            "ours min",
            "ours max",
            "events seen",
        ]);
        t.row([PAPER[0].0, "1.16", "-", "-", "-", "-"]);
        let mut console = Table::new(["case", "wall ms per run (not deterministic)"]);
        for (i, case) in cases.iter().enumerate() {
            let v: Vec<f64> = runs
                .iter()
                .filter(|r| r.case == *case)
                .map(|r| r.mbps)
                .collect();
            let ev: Vec<f64> = runs
                .iter()
                .filter(|r| r.case == *case)
                .map(|r| r.events)
                .collect();
            let min = v.iter().copied().fold(f64::INFINITY, f64::min);
            let max = v.iter().copied().fold(0.0, f64::max);
            t.row([
                case.to_string(),
                format!("{:.2}", PAPER[i + 1].1),
                format!("{:.4}", mean(&v)),
                format!("{min:.4}"),
                format!("{max:.4}"),
                format!("{:.0}", mean(&ev)),
            ]);
            console.row([
                case.to_string(),
                format!("{:.1}", wall.get(i).copied().unwrap_or(0.0) * 1e3),
            ]);
        }
        report.table("Throughput, Mbit/s", "table2", t);
        report.blocks.push(crate::Block::Table(
            "Wall-clock cost in the simulator".into(),
            console,
        ));
        report.file("table2.json", json(&runs)?);
        Ok(report)
    }
}
