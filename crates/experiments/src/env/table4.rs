//! Table 4 (papers/001 §5.2): UDP datagrams lost across handoffs, unmodified vs sleeping
//! between "about to handoff" (availability level 3) and "handoff over" (level 4); beacon
//! intervals 0.5 / 1 / 2 s, 1 / 2 / 3 / 6 handoffs per run, 10,240 datagrams of 1,400 bytes,
//! ten seeds (the beacon phase). Also the buffer action: the application never blocks.
//! Base scenario: `experiments/env/handoff-udp.toml`.

use super::{
    BEACONS_S, HANDOFFS, env_mut, handoff_times, json, mean, only_flow, run, scenario, seeds,
    simple,
};
use crate::report::plot::{Bars, bar_chart};
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::env::{Param, UdpAction};
use serde::Serialize;
use std::time::Duration;

/// The paper's Table 4: per beacon interval, packets lost (unmodified, modified) for 1, 2, 3
/// and 6 handoffs, and its savings per handoff.
const PAPER: [(f64, [f64; 4], [f64; 4], f64); 3] = [
    (
        0.5,
        [154.0, 242.0, 390.0, 654.0],
        [99.0, 150.0, 237.0, 432.0],
        43.0,
    ),
    (
        1.0,
        [277.0, 476.0, 672.0, 1170.0],
        [168.0, 244.0, 447.0, 762.0],
        81.0,
    ),
    (
        2.0,
        [386.0, 812.0, 1188.0, 2298.0],
        [236.0, 412.0, 702.0, 1236.0],
        174.0,
    ),
];

/// `adaptnet exp env-table4`.
pub struct Table4;

/// One run.
#[derive(Clone, Debug, Serialize)]
pub struct Table4Run {
    /// "unmodified", "sleep" or "buffer".
    pub mode: String,
    /// Beacon interval, s.
    pub beacon_s: f64,
    /// Handoffs in the run.
    pub handoffs: usize,
    /// Seed.
    pub seed: u64,
    /// Datagrams lost in the network.
    pub lost: u64,
    /// Datagrams delivered.
    pub delivered: u64,
    /// Time the application was blocked in sends, s.
    pub blocked_s: f64,
    /// Datagrams the socket buffered.
    pub buffered: f64,
}

#[allow(clippy::too_many_arguments, reason = "one run's whole setting, named")]
fn one(
    opts: &ExpOptions,
    mode: &str,
    beacon_s: f64,
    handoffs: usize,
    seed: u64,
    progress: &mut dyn FnMut(f64),
    done: f64,
    share: f64,
) -> Result<Table4Run, ExpError> {
    let mut s = scenario(opts, "handoff-udp.toml")?;
    let env = env_mut(&mut s)?;
    let file = "handoff-udp.toml";
    let (Some(h), Some(sock)) = (env.handoffs.as_mut(), env.sockets.first_mut()) else {
        return Err(ExpError::Input(format!(
            "{file}: needs [env.handoffs] and one socket"
        )));
    };
    h.beacon = Duration::from_secs_f64(beacon_s);
    h.times = handoff_times(handoffs, 10.0, 100.0);
    let avail = Param::Availability;
    sock.actions = match mode {
        "sleep" => vec![
            simple(avail.clone(), 3, UdpAction::Sleep { max_sleep: None }),
            simple(avail, 4, UdpAction::Wakeup),
        ],
        "buffer" => vec![
            simple(avail.clone(), 3, UdpAction::Buffer),
            simple(avail, 4, UdpAction::Wakeup),
        ],
        _ => Vec::new(),
    };
    let r = run(&s, seed, progress, done, share)?;
    let f = only_flow(&r)?;
    Ok(Table4Run {
        mode: mode.into(),
        beacon_s,
        handoffs,
        seed,
        lost: f.packets_lost,
        delivered: f.packets_received,
        blocked_s: super::counter(f, "blocked_s"),
        buffered: super::counter(f, "datagrams_buffered"),
    })
}

fn avg(
    runs: &[Table4Run],
    mode: &str,
    beacon_s: f64,
    n: usize,
    k: impl Fn(&Table4Run) -> f64,
) -> f64 {
    let v: Vec<f64> = runs
        .iter()
        .filter(|r| r.mode == mode && r.beacon_s == beacon_s && r.handoffs == n)
        .map(k)
        .collect();
    mean(&v)
}

/// Savings per handoff: the mean over handoff counts of (unmodified − other) / handoffs.
fn savings(runs: &[Table4Run], other: &str, beacon_s: f64) -> f64 {
    let per: Vec<f64> = HANDOFFS
        .iter()
        .map(|&n| {
            let u = avg(runs, "unmodified", beacon_s, n, |r| r.lost as f64);
            let m = avg(runs, other, beacon_s, n, |r| r.lost as f64);
            (u - m) / n as f64
        })
        .collect();
    mean(&per)
}

/// The sleep saving per handoff of each seed (the mean over handoff counts of
/// (unmodified − sleep) / handoffs), for its spread over seeds.
fn savings_per_seed(runs: &[Table4Run], other: &str, beacon_s: f64, seeds: &[u64]) -> Vec<f64> {
    seeds
        .iter()
        .map(|&seed| {
            let mine: Vec<Table4Run> = runs.iter().filter(|r| r.seed == seed).cloned().collect();
            savings(&mine, other, beacon_s)
        })
        .collect()
}

impl Experiment for Table4 {
    fn name(&self) -> &'static str {
        "env-table4"
    }

    fn summary(&self) -> &'static str {
        "papers/001 Table 4: UDP loss per handoff, unmodified vs sleep/wakeup (and buffer)"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 10, 2);
        let modes = ["unmodified", "sleep", "buffer"];
        let total = (modes.len() * BEACONS_S.len() * HANDOFFS.len() * seeds.len()) as f64;
        let mut runs = Vec::new();
        for &b in &BEACONS_S {
            for &n in &HANDOFFS {
                for mode in modes {
                    for &seed in &seeds {
                        let done = runs.len() as f64 / total;
                        runs.push(one(opts, mode, b, n, seed, progress, done, 1.0 / total)?);
                    }
                }
            }
        }
        let mut report = Report::default();
        report.text(format!(
            "Table 4 (papers/001 §5.2): datagrams lost per run (mean of {} seeds) with 1/2/3/6 \
             handoffs; 10,240 datagrams of 1,400 bytes at 85/s. Handoff model: the link is \
             blacked out from the loss of the cell until the handoff is over; the host notices \
             after two missed beacons + 0.2 s; the handoff lasts one beacon interval.",
            seeds.len()
        ));
        let mut t = Table::new([
            "beacon s",
            "handoffs",
            "paper unmod",
            "paper mod",
            "ours unmod",
            "ours sleep",
            "ours buffer",
            "buffer blocked s",
        ]);
        for (b, pu, pm, _) in PAPER {
            for (i, &n) in HANDOFFS.iter().enumerate() {
                t.row([
                    format!("{b}"),
                    n.to_string(),
                    format!("{:.0}", pu[i]),
                    format!("{:.0}", pm[i]),
                    format!("{:.1}", avg(&runs, "unmodified", b, n, |r| r.lost as f64)),
                    format!("{:.1}", avg(&runs, "sleep", b, n, |r| r.lost as f64)),
                    format!("{:.1}", avg(&runs, "buffer", b, n, |r| r.lost as f64)),
                    format!("{:.2}", avg(&runs, "buffer", b, n, |r| r.blocked_s)),
                ]);
            }
        }
        report.table("Datagrams lost per run", "table4", t);
        let mut s = Table::new([
            "beacon s",
            "paper savings/handoff",
            "ours sleep",
            "ours buffer",
            "one beacon of data",
            "sleep blocked s/handoff",
            "ours sleep, mean ± 95 % over seeds",
        ]);
        let mut bars = (Vec::new(), Vec::new(), Vec::new());
        for (b, _, _, paper) in PAPER {
            let sl = savings(&runs, "sleep", b);
            let bu = savings(&runs, "buffer", b);
            let blocked: Vec<f64> = HANDOFFS
                .iter()
                .map(|&n| avg(&runs, "sleep", b, n, |r| r.blocked_s) / n as f64)
                .collect();
            s.row([
                format!("{b}"),
                format!("{paper:.0}"),
                format!("{sl:.1}"),
                format!("{bu:.1}"),
                format!("{:.0}", 85.0 * b),
                format!("{:.2}", mean(&blocked)),
                Spread::of(&savings_per_seed(&runs, "sleep", b, &seeds)).fmt_with(1),
            ]);
            bars.0.push(paper);
            bars.1.push(sl);
            bars.2.push(bu);
        }
        report.table("Savings per handoff (datagrams)", "table4_savings", s);
        let svg = bar_chart(
            "Table 4: datagrams saved per handoff",
            "datagrams",
            &Bars {
                categories: BEACONS_S.iter().map(|b| format!("beacon {b} s")).collect(),
                series: vec![
                    ("paper", bars.0),
                    ("ours sleep", bars.1),
                    ("ours buffer", bars.2),
                ],
            },
            None,
        )?;
        report.file("table4.svg", svg.into_bytes());
        report.file("table4.json", json(&runs)?);
        Ok(report)
    }
}
