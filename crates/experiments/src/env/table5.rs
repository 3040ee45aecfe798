//! Table 5 (papers/001 §5.3): a mobile TCP sender with TCP_RST_TIMERS on signal quality's
//! high level vs unmodified, near the base station (signal 15, no loss) and far from it
//! (signal alternating between 14 for 30 s and 12 — a radio blackout — for 5, 10 or 50 s,
//! which sets how far the retransmission timer backs off). Throughput over 300 s, seeds vary
//! the phase of the bad periods. Base scenario: `experiments/env/signal-tcp.toml`.

use super::{env_mut, json, mean, only_flow, run, scenario, seeds};
use crate::report::plot::{Bars, bar_chart};
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::rng::SplitMix;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::env::Param;
use serde::Serialize;

/// The paper's Table 5: (region, unmodified Mb/s, modified Mb/s, approximate backoff s).
const PAPER: [(&str, f64, f64, f64); 4] = [
    ("near", 1.16, 1.16, 0.0),
    ("far", 0.99, 1.05, 5.0),
    ("far", 0.51, 0.62, 10.0),
    ("far", 0.1, 0.30, 50.0),
];
/// Length of the good periods when far, s.
const GOOD_S: f64 = 30.0;

/// `adaptnet exp env-table5`.
pub struct Table5;

/// One run.
#[derive(Clone, Debug, Serialize)]
pub struct Table5Run {
    /// Length of each bad period, s (0: near).
    pub bad_s: f64,
    /// TCP_RST_TIMERS on.
    pub modified: bool,
    /// Seed.
    pub seed: u64,
    /// Throughput, Mbit/s.
    pub mbps: f64,
    /// Retransmission timeouts.
    pub timeouts: f64,
    /// Timer resets performed.
    pub resets: f64,
}

/// The signal timeline: 15 near; far, good and bad periods from a seeded offset.
fn signal(bad_s: f64, seed: u64, end_s: f64) -> Vec<(Time, f64)> {
    if bad_s == 0.0 {
        return vec![(Time::ZERO, 15.0)];
    }
    let mut rng = SplitMix::new(seed, 0x5349_474e);
    let mut t = 10.0 + 20.0 * rng.unit();
    let mut v = vec![(Time::ZERO, 14.0)];
    while t < end_s {
        v.push((Time::from_secs_f64(t), 12.0));
        t += bad_s;
        v.push((Time::from_secs_f64(t), 14.0));
        t += GOOD_S;
    }
    v
}

impl Experiment for Table5 {
    fn name(&self) -> &'static str {
        "env-table5"
    }

    fn summary(&self) -> &'static str {
        "papers/001 Table 5: TCP sender with TCP_RST_TIMERS on signal quality, near and far"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 10, 2);
        let total = (PAPER.len() * 2 * seeds.len()) as f64;
        let mut runs = Vec::new();
        for (_, _, _, bad_s) in PAPER {
            for modified in [false, true] {
                for &seed in &seeds {
                    let mut s = scenario(opts, "signal-tcp.toml")?;
                    let end_s = s.duration.as_secs_f64();
                    let env = env_mut(&mut s)?;
                    let Some(p) = env
                        .params
                        .iter_mut()
                        .find(|p| p.param == Param::SignalQuality)
                    else {
                        return Err(ExpError::Input(
                            "signal-tcp.toml: no signal parameter".into(),
                        ));
                    };
                    p.points = signal(bad_s, seed, end_s);
                    if !modified {
                        env.sockets.iter_mut().for_each(|s| s.actions.clear());
                    }
                    let done = runs.len() as f64 / total;
                    let r = run(&s, seed, progress, done, 1.0 / total)?;
                    let f = only_flow(&r)?;
                    runs.push(Table5Run {
                        bad_s,
                        modified,
                        seed,
                        mbps: f.bytes_delivered as f64 * 8.0 / end_s / 1e6,
                        timeouts: super::counter(f, "timeouts"),
                        resets: super::counter(f, "env_rst_timers"),
                    });
                }
            }
        }
        let avg = |bad: f64, m: bool, k: &dyn Fn(&Table5Run) -> f64| {
            let v: Vec<f64> = runs
                .iter()
                .filter(|r| r.bad_s == bad && r.modified == m)
                .map(k)
                .collect();
            mean(&v)
        };
        // The gain per seed (modified − unmodified, same seed: the same signal trace).
        let gains = |bad: f64| -> Vec<f64> {
            seeds
                .iter()
                .filter_map(|&sd| {
                    let at = |m: bool| {
                        runs.iter()
                            .find(|r| r.bad_s == bad && r.modified == m && r.seed == sd)
                            .map(|r| r.mbps)
                    };
                    Some(at(true)? - at(false)?)
                })
                .collect()
        };
        let mut report = Report::default();
        report.text(format!(
            "Table 5 (papers/001 §5.3): throughput of a mobile TCP sender over 300 s (mean of {} \
             seeds). Far: signal 14 for 30 s, then 12 (blackout) for the bad period; the \
             modified socket resets its retransmission timer when signal quality crosses 13.5.",
            seeds.len()
        ));
        let mut t = Table::new([
            "region",
            "paper backoff s",
            "our bad period s",
            "paper unmod Mb/s",
            "paper mod Mb/s",
            "ours unmod Mb/s",
            "ours mod Mb/s",
            "ours RTOs unmod",
            "ours RTOs mod",
            "resets",
            "gain mod − unmod Mb/s, mean ± 95 % over seeds",
        ]);
        let mut bars = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (region, pu, pm, bad_s) in PAPER {
            let (ou, om) = (
                avg(bad_s, false, &|r| r.mbps),
                avg(bad_s, true, &|r| r.mbps),
            );
            t.row([
                region.to_string(),
                format!("{bad_s}"),
                format!("{bad_s}"),
                format!("{pu:.2}"),
                format!("{pm:.2}"),
                format!("{ou:.3}"),
                format!("{om:.3}"),
                format!("{:.1}", avg(bad_s, false, &|r| r.timeouts)),
                format!("{:.1}", avg(bad_s, true, &|r| r.timeouts)),
                format!("{:.1}", avg(bad_s, true, &|r| r.resets)),
                Spread::of(&gains(bad_s)).fmt_with(3),
            ]);
            bars.0.push(pu);
            bars.1.push(pm);
            bars.2.push(ou);
            bars.3.push(om);
        }
        report.table("Throughput, Mbit/s", "table5", t);
        let svg = bar_chart(
            "Table 5: TCP sender throughput",
            "Mbit/s",
            &Bars {
                categories: PAPER
                    .iter()
                    .map(|(r, _, _, b)| format!("{r} (bad {b} s)"))
                    .collect(),
                series: vec![
                    ("paper unmodified", bars.0),
                    ("paper modified", bars.1),
                    ("ours unmodified", bars.2),
                    ("ours modified", bars.3),
                ],
            },
            None,
        )?;
        report.file("table5.svg", svg.into_bytes());
        report.file("table5.json", json(&runs)?);
        Ok(report)
    }
}
