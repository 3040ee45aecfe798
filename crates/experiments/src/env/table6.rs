//! Table 6 (papers/001 §5.4): time to transfer 10,240 × 1,400 bytes to a mobile receiver that
//! sends 5 duplicate ACKs when a handoff is over, vs unmodified; 1 / 2 / 3 / 6 handoffs, beacon
//! intervals 0.5 / 1 / 2 s. Also §5.5's other binding: a mobile *sender* that resets its
//! retransmission timer (TCP_RST_TIMERS) when the handoff is over, vs unmodified. Base
//! scenario: `experiments/env/handoff-tcp.toml`.
//!
//! The receiver's duplicate ACKs are run against two fixed-host senders: our default NewReno,
//! which by RFC 6582 §3.2 ignores duplicate ACKs below `recover` after a timeout, and the
//! Reno the paper's 1997 hosts ran ([`RecoverAfterRto::Reno`]), for which they start fast
//! retransmit — the mechanism §5.4 relies on.
//!
//! The saving is the rest of the sender's backed-off retransmission wait when the handoff
//! ends, so it depends on where the sender's timer stands then. The scenario lets the radio
//! fade out up to one minimum RTO (1 s) before the cell is lost (`fade_max_s`), so that phase
//! is drawn per handoff from the seed, as it was uncontrolled on the paper's testbed; the
//! experiment reports the saving's distribution over those phases and its mean computed the
//! paper's way, Σ(unmodified − modified) / Σ handoffs over the 1, 2, 3 and 6-handoff runs.

use super::{
    BEACONS_S, HANDOFFS, env_mut, handoff_times, json, mean, only_flow, run, scenario, seeds,
    simple,
};
use crate::report::plot::line_chart_of;
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::env::{Param, TcpAction};
use adaptnet_core::tcp::RecoverAfterRto;
use adaptnet_sim::scenario::FlowType;
use serde::Serialize;
use std::time::Duration;

/// The paper's Table 6: per beacon interval, seconds (unmodified, modified) for 1, 2, 3, 6
/// handoffs, and its savings per handoff.
const PAPER: [(f64, [f64; 4], [f64; 4], f64); 3] = [
    (
        0.5,
        [85.37, 86.63, 87.08, 88.95],
        [84.24, 85.05, 85.15, 85.67],
        0.66,
    ),
    (
        1.0,
        [84.58, 88.01, 90.96, 100.71],
        [83.05, 85.90, 87.87, 92.97],
        1.20,
    ),
    (
        2.0,
        [84.44, 89.01, 86.77, 108.13],
        [82.11, 84.50, 88.73, 96.32],
        2.22,
    ),
];

/// The sockets: (name, the mobile host sends, action when the handoff is over, the sender's
/// rule for duplicate ACKs after an RTO).
const MODES: [(&str, bool, Option<TcpAction>, RecoverAfterRto); 6] = [
    ("recv unmodified", false, None, RecoverAfterRto::Rfc6582),
    (
        "recv dupacks",
        false,
        Some(TcpAction::DupAcks(5)),
        RecoverAfterRto::Rfc6582,
    ),
    ("recv unmodified, Reno", false, None, RecoverAfterRto::Reno),
    (
        "recv dupacks, Reno",
        false,
        Some(TcpAction::DupAcks(5)),
        RecoverAfterRto::Reno,
    ),
    ("send unmodified", true, None, RecoverAfterRto::Rfc6582),
    (
        "send rst-timers",
        true,
        Some(TcpAction::ResetTimers),
        RecoverAfterRto::Rfc6582,
    ),
];

/// `adaptnet exp env-table6`.
pub struct Table6;

/// One run.
#[derive(Clone, Debug, Serialize)]
pub struct Table6Run {
    /// Socket (see `MODES`).
    pub mode: String,
    /// Beacon interval, s.
    pub beacon_s: f64,
    /// Handoffs.
    pub handoffs: usize,
    /// Seed.
    pub seed: u64,
    /// Transfer time, s.
    pub time_s: f64,
    /// Retransmission timeouts.
    pub timeouts: f64,
    /// Each handoff's blackout (from the radio's death to the end of the handoff), s.
    pub outages_s: Vec<f64>,
}

/// Σ(unmodified − modified) / Σ handoffs over `HANDOFFS`, from per-row times.
fn paper_way(unmod: &[f64], modified: &[f64]) -> f64 {
    let diff: f64 = unmod.iter().zip(modified).map(|(u, m)| u - m).sum();
    diff / HANDOFFS.iter().sum::<usize>() as f64
}

/// The (unmodified, modified) socket pairs whose saving is reported.
const PAIRS: [(&str, &str, &str); 3] = [
    ("recv dupacks", "recv unmodified", "recv dupacks"),
    (
        "recv dupacks, Reno sender",
        "recv unmodified, Reno",
        "recv dupacks, Reno",
    ),
    ("send rst-timers", "send unmodified", "send rst-timers"),
];

impl Experiment for Table6 {
    fn name(&self) -> &'static str {
        "env-table6"
    }

    fn summary(&self) -> &'static str {
        "papers/001 Table 6: TCP transfer time across handoffs, 5 dup ACKs / timer reset vs none"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let seeds = seeds(opts, 20, 2);
        let total = (MODES.len() * BEACONS_S.len() * HANDOFFS.len() * seeds.len()) as f64;
        let mut runs: Vec<Table6Run> = Vec::new();
        for &b in &BEACONS_S {
            for &n in &HANDOFFS {
                for (mode, mobile_sends, action, rule) in MODES {
                    for &seed in &seeds {
                        let mut s = scenario(opts, "handoff-tcp.toml")?;
                        if let Some(f) = s.flows.first_mut() {
                            if mobile_sends {
                                std::mem::swap(&mut f.from, &mut f.to);
                            }
                            if let FlowType::Tcp { config, .. } = &mut f.kind {
                                config.recover_after_rto = rule;
                            }
                        }
                        let env = env_mut(&mut s)?;
                        let (Some(h), Some(sock)) =
                            (env.handoffs.as_mut(), env.sockets.first_mut())
                        else {
                            return Err(ExpError::Input(
                                "handoff-tcp.toml: needs [env.handoffs] and one socket".into(),
                            ));
                        };
                        h.beacon = Duration::from_secs_f64(b);
                        h.times = handoff_times(n, 10.0, 70.0);
                        sock.sender_side = mobile_sends;
                        sock.actions = action
                            .map(|a| simple(Param::Availability, 4, a))
                            .into_iter()
                            .collect();
                        let outages_s = h
                            .plan(seed)
                            .iter()
                            .map(|p| (p.over - p.faded).as_secs_f64())
                            .collect();
                        let done = runs.len() as f64 / total;
                        let r = run(&s, seed, progress, done, 1.0 / total)?;
                        let f = only_flow(&r)?;
                        let end = f.counters.get("completed_s").copied().ok_or_else(|| {
                            ExpError::Input(format!(
                                "{mode}, beacon {b} s, {n} handoffs, seed {seed}: the transfer \
                                 did not complete in {} s",
                                s.duration.as_secs_f64()
                            ))
                        })?;
                        runs.push(Table6Run {
                            mode: mode.into(),
                            beacon_s: b,
                            handoffs: n,
                            seed,
                            time_s: end - f.start_s,
                            timeouts: super::counter(f, "timeouts"),
                            outages_s,
                        });
                    }
                }
            }
        }
        let avg = |mode: &str, b: f64, n: usize| {
            let v: Vec<f64> = runs
                .iter()
                .filter(|r| r.mode == mode && r.beacon_s == b && r.handoffs == n)
                .map(|r| r.time_s)
                .collect();
            mean(&v)
        };
        let time_of = |mode: &str, b: f64, n: usize, seed: u64| {
            runs.iter()
                .find(|r| r.mode == mode && r.beacon_s == b && r.handoffs == n && r.seed == seed)
                .map(|r| r.time_s)
        };
        // One sample per seed: the paper's Σ(unmod − mod) / Σ handoffs over the four rows.
        let per_seed = |plain: &str, other: &str, b: f64| -> Vec<f64> {
            seeds
                .iter()
                .filter_map(|&seed| {
                    let u: Option<Vec<f64>> = HANDOFFS
                        .iter()
                        .map(|&n| time_of(plain, b, n, seed))
                        .collect();
                    let m: Option<Vec<f64>> = HANDOFFS
                        .iter()
                        .map(|&n| time_of(other, b, n, seed))
                        .collect();
                    Some(paper_way(&u?, &m?))
                })
                .collect()
        };
        let mut report = Report::default();
        report.text(format!(
            "Table 6 (papers/001 §5.4): seconds to transfer 10,240 × 1,400 bytes (mean of {} \
             seeds; each handoff's beacon phase and the radio's fade before it, which sets the \
             sender's retransmission timer's phase, are drawn from the seed). recv: the mobile host receives and sends 5 duplicate ACKs when a handoff is \
             over, to our RFC 6582 NewReno sender or (Reno) to a sender without the RFC 6582 \
             recover guard after a timeout, as the paper's 1997 Linux; send: the mobile host \
             sends and resets its retransmission timer then (§5.5).",
            seeds.len()
        ));
        let mut t = Table::new([
            "beacon s",
            "handoffs",
            "paper unmod",
            "paper mod",
            "recv unmod",
            "recv dupacks",
            "recv unmod Reno",
            "recv dupacks Reno",
            "send unmod",
            "send rst",
        ]);
        for (b, pu, pm, _) in PAPER {
            for (i, &n) in HANDOFFS.iter().enumerate() {
                t.row([
                    format!("{b}"),
                    n.to_string(),
                    format!("{:.2}", pu[i]),
                    format!("{:.2}", pm[i]),
                    format!("{:.2}", avg("recv unmodified", b, n)),
                    format!("{:.2}", avg("recv dupacks", b, n)),
                    format!("{:.2}", avg("recv unmodified, Reno", b, n)),
                    format!("{:.2}", avg("recv dupacks, Reno", b, n)),
                    format!("{:.2}", avg("send unmodified", b, n)),
                    format!("{:.2}", avg("send rst-timers", b, n)),
                ]);
            }
        }
        report.table("Transfer time, s", "table6", t);
        let mut s = Table::new([
            "beacon s",
            "paper as printed",
            "paper: Σ(unmod − mod) / Σ handoffs of its table",
            "ours recv dupacks (RFC 6582 sender)",
            "ours recv dupacks, Reno sender",
            "ours send rst-timers",
            "one beacon in the Reno interval",
        ]);
        let mut savings = Vec::new();
        for (b, pu, pm, paper) in PAPER {
            let sp: Vec<Spread> = PAIRS
                .iter()
                .map(|(_, plain, other)| Spread::of(&per_seed(plain, other, b)))
                .collect();
            let reno = sp.get(1).copied().unwrap_or(Spread::of(&[]));
            s.row([
                format!("{b}"),
                format!("{paper:.2}"),
                format!("{:.2}", paper_way(&pu, &pm)),
                sp.first().map_or("-".into(), |x| x.fmt_with(2)),
                reno.fmt_with(2),
                sp.get(2).map_or("-".into(), |x| x.fmt_with(2)),
                if reno.contains(b) { "yes" } else { "no" }.into(),
            ]);
            savings.push((b, sp));
        }
        report.table(
            "Savings per handoff, s (ours: mean over seeds ± 95 % interval, each seed's saving \
             computed the paper's way over its 1, 2, 3 and 6-handoff runs)",
            "table6_savings",
            s,
        );
        // The saving's distribution over the timer's phase: one handoff per run, so each seed
        // gives one (blackout, saving) point.
        let mut d = Table::new([
            "beacon s",
            "pair",
            "min",
            "25 %",
            "median",
            "75 %",
            "max",
            "blackout s (min-max)",
        ]);
        let mut pts_csv = Table::new(["beacon s", "pair", "seed", "blackout s", "saving s"]);
        for &b in &BEACONS_S {
            for (label, plain, other) in PAIRS {
                let mut pts: Vec<(f64, f64)> = Vec::new();
                for &seed in &seeds {
                    let one = |mode: &str| {
                        runs.iter().find(|r| {
                            r.mode == mode && r.beacon_s == b && r.handoffs == 1 && r.seed == seed
                        })
                    };
                    if let (Some(u), Some(m)) = (one(plain), one(other)) {
                        let blackout = u.outages_s.first().copied().unwrap_or(0.0);
                        pts.push((blackout, u.time_s - m.time_s));
                        pts_csv.row([
                            format!("{b}"),
                            label.to_string(),
                            seed.to_string(),
                            format!("{blackout:.3}"),
                            format!("{:.3}", u.time_s - m.time_s),
                        ]);
                    }
                }
                let mut v: Vec<f64> = pts.iter().map(|p| p.1).collect();
                v.sort_by(f64::total_cmp);
                let q = |f: f64| -> String {
                    if v.is_empty() {
                        return "-".into();
                    }
                    let i = ((v.len() - 1) as f64 * f).round() as usize;
                    v.get(i).map_or("-".into(), |x| format!("{x:.2}"))
                };
                let lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
                let hi = pts.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
                d.row([
                    format!("{b}"),
                    label.to_string(),
                    q(0.0),
                    q(0.25),
                    q(0.5),
                    q(0.75),
                    q(1.0),
                    format!("{lo:.2}-{hi:.2}"),
                ]);
            }
        }
        report.table(
            "The saving of one handoff over the sender timer's phase (one point per seed), s",
            "table6_phases",
            d,
        );
        report.file("table6_phases.csv", pts_csv.to_csv().into_bytes());
        report.file("table6_savings.json", json(&savings)?);
        let series: Vec<(String, Vec<(f64, f64)>)> = MODES
            .iter()
            .map(|(mode, ..)| {
                let pts = HANDOFFS
                    .iter()
                    .map(|&n| (n as f64, avg(mode, 1.0, n)))
                    .collect();
                (mode.to_string(), pts)
            })
            .collect();
        let svg = line_chart_of(
            "Table 6: transfer time vs handoffs (beacon 1 s)",
            "handoffs per run",
            "seconds",
            &series,
        )?;
        report.file("table6.svg", svg.into_bytes());
        report.file("table6.json", json(&runs)?);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_paper_way_of_the_papers_own_table() {
        // Σ(unmod − mod) / Σ handoffs of the paper's Table 6 gives its 0.66 and 1.20, but
        // 1.39 rather than the 2.22 it prints for a 2 s beacon.
        let got: Vec<f64> = PAPER.iter().map(|(_, u, m, _)| paper_way(u, m)).collect();
        for (g, want) in got.iter().zip([0.66, 1.21, 1.39]) {
            assert!((g - want).abs() < 0.005, "{got:?}");
        }
        assert!((PAPER[2].3 - got[2]).abs() > 0.8);
    }
}
