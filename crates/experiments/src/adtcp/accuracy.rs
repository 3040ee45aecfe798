//! Identification accuracy (papers/004 §3, its Figure 4 "inaccuracy of congestion
//! identification"): single metric (IDD only, STT only) against multi-metric (IDD and STT),
//! for a single TCP flow and with competing traffic (on/off cross traffic in the place of the
//! paper's CBR flows), across mobility speeds.
//!
//! As in the paper, every lost data packet is one trial: its true cause comes from the global
//! monitor ([`adaptnet_sim::manet::monitor`]), read from the drop itself. The identification
//! judged is the one the sender acts on: the receiver learns of a loss when data arrives
//! above the gap, and every ACK it sends from then on (the duplicate ACKs that trigger the
//! sender's reaction) carries the report of its latest closed sampling interval. A second
//! column keeps the earlier reading — the first interval that closes after the loss — for
//! comparison. A method is wrong when it calls congestion what is not, or non-congestion what is;
//! the second kind is an **incompatible error** (it makes the sender more aggressive than
//! TCP). The TCP sender is NewReno stamping ADTCP sending times (it ignores the reports), so
//! the measurement does not change the traffic.
//!
//! IDD only: congestion iff IDD is high. STT only: iff STT is low. Multi-metric: iff both
//! (Table 2). A metric the RSD could not judge (too little history) counts as "not high" /
//! "not low".
//!
//! Percentages are means over the runs (one per seed at a speed; every speed and seed for a
//! case's "all speeds" row) with their 95 % intervals. A second table reruns the
//! identification with other RSD histories and thresholds (`rsd_sensitivity` in the
//! parameter file): the receiver's classifier is the only tunable part of the rule.

use super::{Params, json, run_path, run_seed};
use crate::report::plot::{Bars, bar_chart, line_chart_of};
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::adtcp::receiver::Identification;
use adaptnet_core::adtcp::rsd::Level;
use adaptnet_sim::manet::Protocol;
use adaptnet_sim::manet::monitor::{Loss, TrueState};
use serde::Serialize;
use std::time::Duration;

/// `adaptnet exp adtcp-accuracy`.
pub struct Accuracy;

/// The three methods' judgements of one loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Judgement {
    /// IDD high.
    pub idd: bool,
    /// STT low.
    pub stt: bool,
    /// Both (Table 2's congestion rule).
    pub multi: bool,
    /// PLR high (channel error identified).
    pub plr: bool,
    /// POR high (route change identified).
    pub por: bool,
}

impl Judgement {
    /// The judgements of an identification.
    pub fn of(id: &Identification) -> Judgement {
        let idd = id.levels.idd == Level::High;
        let stt = id.levels.stt == Level::Low;
        Judgement {
            idd,
            stt,
            multi: idd && stt,
            plr: id.levels.plr == Level::High,
            por: id.levels.por == Level::High,
        }
    }
}

/// The first interval closing after a loss at `at` (the earlier reading).
pub fn judge(ids: &[(Time, Identification)], at: Time) -> Option<Judgement> {
    let idx = ids.partition_point(|(t, _)| *t <= at);
    ids.get(idx).map(|(_, id)| Judgement::of(id))
}

/// The identification the sender acts on for a loss at `at`: the latest interval closed when
/// the receiver first saw data above a gap at or after `at` (`holes`, in time order).
pub fn judge_at_detection(
    ids: &[(Time, Identification)],
    holes: &[Time],
    at: Time,
) -> Option<Judgement> {
    let seen = *holes.get(holes.partition_point(|t| *t < at))?;
    let idx = ids.partition_point(|(t, _)| *t <= seen).checked_sub(1)?;
    ids.get(idx).map(|(_, id)| Judgement::of(id))
}

/// Counts of trials and wrong calls, for one true state or for all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AccuracyCell {
    /// Losses judged.
    pub losses: u64,
    /// Of them, congestion losses.
    pub congestion_losses: u64,
    /// Wrong congestion calls, IDD only.
    pub wrong_idd: u64,
    /// Wrong congestion calls, STT only.
    pub wrong_stt: u64,
    /// Wrong congestion calls, multi-metric.
    pub wrong_multi: u64,
    /// Congestion losses called non-congestion by the multi-metric rule.
    pub incompatible_multi: u64,
    /// Of those, the ones reported as channel error or route change: the ADTCP sender keeps
    /// its window on such a report at a third duplicate ACK (on a plain "normal" report it
    /// still halves, as NewReno; papers/004 Table 2 and §4).
    pub incompatible_acted: u64,
    /// Non-congestion losses whose own state the receiver also reported (PLR high for
    /// channel error, POR high for route change; disconnections are the sender's to find).
    pub state_named: u64,
}

impl AccuracyCell {
    /// Adds one trial.
    pub fn add(&mut self, truth: TrueState, j: Judgement) {
        let cong = truth == TrueState::Congestion;
        self.losses += 1;
        self.congestion_losses += u64::from(cong);
        self.wrong_idd += u64::from(j.idd != cong);
        self.wrong_stt += u64::from(j.stt != cong);
        self.wrong_multi += u64::from(j.multi != cong);
        self.incompatible_multi += u64::from(cong && !j.multi);
        self.incompatible_acted += u64::from(cong && !j.multi && (j.plr || j.por));
        self.state_named += u64::from(match truth {
            TrueState::ChannelError => j.plr,
            TrueState::RouteChange => j.por,
            _ => false,
        });
    }

    /// Adds another cell.
    pub fn merge(&mut self, o: &AccuracyCell) {
        self.losses += o.losses;
        self.congestion_losses += o.congestion_losses;
        self.wrong_idd += o.wrong_idd;
        self.wrong_stt += o.wrong_stt;
        self.wrong_multi += o.wrong_multi;
        self.incompatible_multi += o.incompatible_multi;
        self.incompatible_acted += o.incompatible_acted;
        self.state_named += o.state_named;
    }

    /// `n` as a percentage of the losses.
    pub fn pct(&self, n: u64) -> f64 {
        if self.losses == 0 {
            0.0
        } else {
            100.0 * n as f64 / self.losses as f64
        }
    }

    /// `n` as a percentage of the losses, NaN without losses (a run with nothing to judge is
    /// left out of a mean, not counted as perfect).
    pub fn pct_or_nan(&self, n: u64) -> f64 {
        if self.losses == 0 {
            f64::NAN
        } else {
            self.pct(n)
        }
    }
}

/// Scores a run's losses — at the receiver's detection with `holes`, else by the first
/// interval after each loss; returns (all losses, per true state in [`TrueState::ALL`]
/// order, losses that could not be judged).
pub fn score(
    losses: &[Loss],
    ids: &[(Time, Identification)],
    holes: Option<&[Time]>,
) -> (AccuracyCell, [AccuracyCell; 5], u64) {
    let mut all = AccuracyCell::default();
    let mut by = [AccuracyCell::default(); 5];
    let mut unjudged = 0;
    for l in losses {
        let judged = match holes {
            Some(h) => judge_at_detection(ids, h, l.at),
            None => judge(ids, l.at),
        };
        let Some(j) = judged else {
            unjudged += 1;
            continue;
        };
        all.add(l.truth, j);
        if let Some(i) = TrueState::ALL.iter().position(|s| *s == l.truth)
            && let Some(c) = by.get_mut(i)
        {
            c.add(l.truth, j);
        }
    }
    (all, by, unjudged)
}

/// The four headline percentages of a set of runs, each a mean with its 95 % interval.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spreads {
    /// Wrong calls, IDD only.
    pub idd: Spread,
    /// Wrong calls, STT only.
    pub stt: Spread,
    /// Wrong calls, IDD and STT.
    pub multi: Spread,
    /// Incompatible errors (congestion called non-congestion), of all losses.
    pub incompatible: Spread,
    /// Incompatible errors reported as channel error or route change, of all losses.
    pub acted: Spread,
    /// Congestion losses called non-congestion, of the congestion losses.
    pub missed: Spread,
}

impl Spreads {
    /// Over runs, one cell each.
    pub fn of(runs: &[AccuracyCell]) -> Spreads {
        let s = |f: fn(&AccuracyCell) -> u64| {
            Spread::of(&runs.iter().map(|c| c.pct_or_nan(f(c))).collect::<Vec<_>>())
        };
        Spreads {
            idd: s(|c| c.wrong_idd),
            stt: s(|c| c.wrong_stt),
            multi: s(|c| c.wrong_multi),
            incompatible: s(|c| c.incompatible_multi),
            acted: s(|c| c.incompatible_acted),
            missed: Spread::of(
                &runs
                    .iter()
                    .map(|c| {
                        let cong = c.congestion_losses;
                        if cong == 0 {
                            f64::NAN
                        } else {
                            100.0 * c.incompatible_multi as f64 / cong as f64
                        }
                    })
                    .collect::<Vec<_>>(),
            ),
        }
    }
}

/// One (case, speed) row.
#[derive(Clone, Debug, Serialize)]
struct Row {
    case: &'static str,
    speed_m_per_s: f64,
    all: AccuracyCell,
    /// Each run's cell, in seed order.
    runs: Vec<AccuracyCell>,
    /// Each run's cell judged by the first interval after each loss.
    runs_after_loss: Vec<AccuracyCell>,
    by_state: Vec<(&'static str, AccuracyCell)>,
    unjudged: u64,
    congested_time_share: f64,
}

const CASES: [(&str, bool); 2] = [("single flow", false), ("with cross traffic", true)];

impl Experiment for Accuracy {
    fn name(&self) -> &'static str {
        "adtcp-accuracy"
    }

    fn summary(&self) -> &'static str {
        "papers/004 Fig. 4: congestion identification errors, IDD / STT / IDD+STT, vs speed"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p = Params::load(opts, "accuracy.params")?;
        let seeds = p.seeds(opts);
        let speeds = p.speeds(opts.quick).to_vec();
        let duration = p.duration(opts.quick);
        let period = Duration::from_secs_f64(p.monitor_period_ms / 1e3);
        let total = (CASES.len() * speeds.len() * seeds.len()).max(1) as f64;
        let mut done = 0.0;
        let mut rows = Vec::new();
        for (case, competing) in CASES {
            for &speed in &speeds {
                let cfg = p.path_config(speed, true, competing, opts.quick);
                let mut row = Row {
                    case,
                    speed_m_per_s: speed,
                    all: AccuracyCell::default(),
                    runs: Vec::new(),
                    runs_after_loss: Vec::new(),
                    by_state: TrueState::ALL
                        .iter()
                        .map(|s| (s.name(), AccuracyCell::default()))
                        .collect(),
                    unjudged: 0,
                    congested_time_share: 0.0,
                };
                for &seed in &seeds {
                    let out = run_path(
                        &cfg,
                        duration,
                        run_seed(seed, speed),
                        &[Protocol::NewRenoObserved],
                        period,
                    )?;
                    let (all, by, unjudged) = score(
                        out.monitor.losses(),
                        &out.identifications,
                        Some(&out.hole_detections),
                    );
                    row.all.merge(&all);
                    row.runs.push(all);
                    row.runs_after_loss
                        .push(score(out.monitor.losses(), &out.identifications, None).0);
                    for (slot, c) in row.by_state.iter_mut().zip(by.iter()) {
                        slot.1.merge(c);
                    }
                    row.unjudged += unjudged;
                    row.congested_time_share +=
                        out.monitor.time_share(TrueState::Congestion) / seeds.len() as f64;
                    done += 1.0;
                    progress(done / total);
                }
                rows.push(row);
            }
        }
        let sensitivity = sensitivity(&p, opts, duration, period, &seeds)?;
        report(&rows, &speeds, &sensitivity)
    }
}

/// One RSD setting's results per case, over the sensitivity speeds and the seeds.
#[derive(Clone, Debug, Serialize)]
struct SensitivityRow {
    rsd: adaptnet_sim::manet::RsdParams,
    case: &'static str,
    losses: u64,
    spreads: Spreads,
}

fn sensitivity(
    p: &Params,
    opts: &ExpOptions,
    duration: Duration,
    period: Duration,
    seeds: &[u64],
) -> Result<Vec<SensitivityRow>, ExpError> {
    let mut out = Vec::new();
    for rsd in &p.rsd_sensitivity {
        for (case, competing) in CASES {
            let mut runs = Vec::new();
            for &speed in p.sensitivity_speeds() {
                let mut cfg = p.path_config(speed, true, competing, opts.quick);
                cfg.rsd = Some(*rsd);
                for &seed in seeds {
                    let o = run_path(
                        &cfg,
                        duration,
                        run_seed(seed, speed),
                        &[Protocol::NewRenoObserved],
                        period,
                    )?;
                    runs.push(
                        score(
                            o.monitor.losses(),
                            &o.identifications,
                            Some(&o.hole_detections),
                        )
                        .0,
                    );
                }
            }
            out.push(SensitivityRow {
                rsd: *rsd,
                case,
                losses: runs.iter().map(|c| c.losses).sum(),
                spreads: Spreads::of(&runs),
            });
        }
    }
    Ok(out)
}

fn report(
    rows: &[Row],
    speeds: &[f64],
    sensitivity: &[SensitivityRow],
) -> Result<Report, ExpError> {
    let mut r = Report::default();
    r.text(
        "papers/004 §3, Figure 4: percent of inaccurate congestion identifications per lost \
         packet, against the global monitor's ground truth. The paper's numbers are lost from \
         its text; its claims are shapes: (1) single-metric accuracy falls quickly as speed \
         rises in the single-flow case; (2) multi-metric errors stay far below either single \
         metric; (3) incompatible errors (congestion called non-congestion) stay near zero; \
         (4) with competing flows, congestion is frequent and the multi-metric rule still \
         has the fewest errors.",
    );
    let mut t = Table::new([
        "case",
        "speed m/s",
        "losses",
        "congestion losses",
        "IDD only %",
        "STT only %",
        "IDD+STT %",
        "incompatible %",
        "of which reported ch. err / rte %",
        "congestion losses missed %",
        "incompatible % (after loss)",
        "paper's claim",
    ]);
    let mut line = |case: &str, speed: String, cells: &[&Row]| {
        let runs: Vec<AccuracyCell> = cells.iter().flat_map(|r| r.runs.clone()).collect();
        let losses: u64 = cells.iter().map(|r| r.all.losses).sum();
        let cong: u64 = cells
            .iter()
            .map(|r| r.by_state.get(1).map_or(0, |c| c.1.losses))
            .sum();
        let sp = Spreads::of(&runs);
        let after: Vec<AccuracyCell> = cells
            .iter()
            .flat_map(|r| r.runs_after_loss.clone())
            .collect();
        let sp_after = Spreads::of(&after);
        t.row([
            case.to_string(),
            speed,
            losses.to_string(),
            cong.to_string(),
            format!("{:.1}", sp.idd),
            format!("{:.1}", sp.stt),
            format!("{:.1}", sp.multi),
            format!("{:.1}", sp.incompatible),
            format!("{:.1}", sp.acted),
            format!("{:.1}", sp.missed),
            format!("{:.1}", sp_after.incompatible),
            "IDD+STT << IDD, STT; incompatible ≈ 0".to_string(),
        ]);
    };
    for (case, _) in CASES {
        let of_case: Vec<&Row> = rows.iter().filter(|x| x.case == case).collect();
        for row in &of_case {
            line(case, format!("{:.0}", row.speed_m_per_s), &[row]);
        }
        line(case, "all".to_string(), &of_case);
    }
    r.table(
        "Wrong identifications, percent of lost packets (mean ± 95 % interval over runs)",
        "accuracy",
        t,
    );
    if !sensitivity.is_empty() {
        let mut st = Table::new([
            "history",
            "high above",
            "low below",
            "case",
            "losses",
            "IDD only %",
            "STT only %",
            "IDD+STT %",
            "incompatible %",
            "congestion losses missed %",
        ]);
        for x in sensitivity {
            st.row([
                format!("{}", x.rsd.history),
                format!("{}", x.rsd.high_above),
                format!("{}", x.rsd.low_below),
                x.case.to_string(),
                x.losses.to_string(),
                format!("{:.1}", x.spreads.idd),
                format!("{:.1}", x.spreads.stt),
                format!("{:.1}", x.spreads.multi),
                format!("{:.1}", x.spreads.incompatible),
                format!("{:.1}", x.spreads.missed),
            ]);
        }
        r.table(
            "Sensitivity to the RSD history and thresholds (every metric's classifier; \
             sensitivity speeds, mean ± 95 % interval over runs)",
            "accuracy_rsd_sensitivity",
            st,
        );
    }

    let mut s = Table::new([
        "case",
        "true state",
        "losses",
        "IDD only %",
        "STT only %",
        "IDD+STT %",
        "own state named %",
    ]);
    for (case, _) in CASES {
        let mut by = [AccuracyCell::default(); 5];
        for row in rows.iter().filter(|x| x.case == case) {
            for (slot, (_, c)) in by.iter_mut().zip(row.by_state.iter()) {
                slot.merge(c);
            }
        }
        for (state, c) in TrueState::ALL.iter().zip(by.iter()) {
            if c.losses == 0 {
                continue;
            }
            let named = match state {
                TrueState::ChannelError | TrueState::RouteChange => {
                    format!("{:.1}", c.pct(c.state_named))
                }
                _ => "—".into(),
            };
            s.row([
                case.to_string(),
                state.name().to_string(),
                c.losses.to_string(),
                format!("{:.1}", c.pct(c.wrong_idd)),
                format!("{:.1}", c.pct(c.wrong_stt)),
                format!("{:.1}", c.pct(c.wrong_multi)),
                named,
            ]);
        }
    }
    r.table(
        "Wrong congestion calls per true state (all speeds); for congestion losses every \
         wrong call is an incompatible error",
        "accuracy_by_state",
        s,
    );
    for (i, (case, _)) in CASES.iter().enumerate() {
        let pick = |f: fn(&AccuracyCell) -> u64| -> Vec<f64> {
            rows.iter()
                .filter(|x| x.case == *case)
                .map(|x| x.all.pct(f(&x.all)))
                .collect()
        };
        let bars = Bars {
            categories: speeds.iter().map(|s| format!("{s:.0} m/s")).collect(),
            series: vec![
                ("IDD only", pick(|c| c.wrong_idd)),
                ("STT only", pick(|c| c.wrong_stt)),
                ("IDD+STT", pick(|c| c.wrong_multi)),
                ("incompatible (IDD+STT)", pick(|c| c.incompatible_multi)),
            ],
        };
        let svg = bar_chart(
            &format!("Inaccurate congestion identification, {case}"),
            "% of lost packets",
            &bars,
            None,
        )?;
        r.file(
            format!("accuracy_{}.svg", ["single", "multi"][i]),
            svg.into_bytes(),
        );
    }
    let series: Vec<(String, Vec<(f64, f64)>)> = CASES
        .iter()
        .map(|(case, _)| {
            (
                format!("IDD+STT, {case}"),
                rows.iter()
                    .filter(|x| x.case == *case)
                    .map(|x| (x.speed_m_per_s, x.all.pct(x.all.wrong_multi)))
                    .collect(),
            )
        })
        .collect();
    r.file(
        "accuracy_multi_vs_speed.svg",
        line_chart_of(
            "Multi-metric wrong identifications vs speed",
            "speed (m/s)",
            "% of lost packets",
            &series,
        )?
        .into_bytes(),
    );
    r.file("accuracy.json", json(&rows)?);
    r.file("accuracy_rsd_sensitivity.json", json(&sensitivity)?);
    Ok(r)
}
