//! Table 4 and Figures 29–31 (`papers/002` §6.2): the 16 cases of TPBA, LDAF and LDA (with
//! Table 4's `T_adapt`, `T_rtcp`, `T_running`, `AIR0`, `R_f`) plus TFRC as flow 3 against TCP
//! flows 1 and 2 from 0 s and TCP flow 4 joining at 200 s; 300 s; ten seeds each; the δR
//! metrics of [`super::metrics`]. Rate snapshots (Figs. 20, 22–28) are written as SVGs for
//! the first seed. Scenario: `experiments/tpba/table4.toml`.

use super::metrics::{DeltaR, delta_r};
use super::{flow, jitter_starts, json, mean, run, scenario, seeds};
use crate::report::plot::{Bars, bar_chart, line_chart_of};
use crate::report::spread::Spread;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::ratectl::kbps;
use adaptnet_core::ratectl::lda::{AirUpdate, LdaConfig};
use adaptnet_core::ratectl::tfrc::TfrcConfig;
use adaptnet_sim::agents::lda::{Bottleneck, LdaFlowConfig};
use adaptnet_sim::scenario::{FlowType, MediaFlow, Scenario};
use serde::Serialize;
use std::time::Duration;

/// `adaptnet exp tpba-table4`.
pub struct Table4;

/// A Table 4 case.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Case {
    /// The paper's name, e.g. `TPBA-3-1-10-3`.
    pub name: &'static str,
    /// "TPBA", "LDAF", "LDA" or "TFRC".
    pub scheme: &'static str,
    /// `T_adapt`, s.
    pub t_adapt_s: f64,
    /// `T_rtcp`, s.
    pub t_rtcp_s: f64,
    /// `T_running`, s (TPBA).
    pub t_running_s: f64,
    /// `AIR0`, kbit/s (LDA, LDAF).
    pub air0_kbps: f64,
    /// `R_f`.
    pub r_f: f64,
}

const fn case(
    name: &'static str,
    scheme: &'static str,
    a: f64,
    b: f64,
    c: f64,
    d: f64,
    r_f: f64,
) -> Case {
    Case {
        name,
        scheme,
        t_adapt_s: a,
        t_rtcp_s: b,
        t_running_s: c,
        air0_kbps: d,
        r_f,
    }
}

/// Table 4 (columns a = T_adapt, b = T_rtcp, c = T_running, d = AIR0, R_f), plus TFRC.
pub const CASES: [Case; 17] = [
    case("TPBA-3-1-10-3", "TPBA", 3.0, 1.0, 10.0, 0.0, 3.0),
    case("TPBA-3-1-10-6", "TPBA", 3.0, 1.0, 10.0, 0.0, 6.0),
    case("TPBA-3-1-30-3", "TPBA", 3.0, 1.0, 30.0, 0.0, 3.0),
    case("TPBA-1-0.5-10-3", "TPBA", 1.0, 0.5, 10.0, 0.0, 3.0),
    case("TPBA-1-0.5-30-3", "TPBA", 1.0, 0.5, 30.0, 0.0, 3.0),
    case("LDAF-3-1-10-3", "LDAF", 3.0, 1.0, 0.0, 10.0, 3.0),
    case("LDAF-3-1-10-6", "LDAF", 3.0, 1.0, 0.0, 10.0, 6.0),
    case("LDAF-3-1-100-3", "LDAF", 3.0, 1.0, 0.0, 100.0, 3.0),
    case("LDAF-1-0.5-10-3", "LDAF", 1.0, 0.5, 0.0, 10.0, 3.0),
    case("LDAF-1-0.5-100-3", "LDAF", 1.0, 0.5, 0.0, 100.0, 3.0),
    case("LDA-3-1-10-3", "LDA", 3.0, 1.0, 0.0, 10.0, 3.0),
    case("LDA-3-1-10-6", "LDA", 3.0, 1.0, 0.0, 10.0, 6.0),
    case("LDA-3-1-100-3", "LDA", 3.0, 1.0, 0.0, 100.0, 3.0),
    case("LDA-3-1-100-6", "LDA", 3.0, 1.0, 0.0, 100.0, 6.0),
    case("LDA-1-0.5-10-3", "LDA", 1.0, 0.5, 0.0, 10.0, 3.0),
    case("LDA-1-0.5-100-3", "LDA", 1.0, 0.5, 0.0, 100.0, 3.0),
    case("TFRC", "TFRC", 0.0, 0.0, 0.0, 0.0, 0.0),
];

/// §6.2: "LDAF-3-1-10-3 and LDAF-3-1-10-6 … do not reach a repetitive cycle at time 200 s.
/// Therefore we collected rates over 400 s instead of 200 s": flow 4 joins at 400 s and the
/// run lasts 500 s for them.
fn change_s(c: &Case) -> f64 {
    if matches!(c.name, "LDAF-3-1-10-3" | "LDAF-3-1-10-6") {
        400.0
    } else {
        200.0
    }
}

/// The scenario with flow 3 replaced by `c`.
fn scenario_for(base: &Scenario, c: &Case) -> Result<Scenario, ExpError> {
    let mut s = base.clone();
    let change = change_s(c);
    s.duration = Time::from_secs_f64(change + 100.0);
    for f in &mut s.flows {
        f.stop = s.duration;
        if f.name == "flow4" {
            f.start = Time::from_secs_f64(change);
        }
        if f.name != "flow3" {
            continue;
        }
        f.kind = match c.scheme {
            "TPBA" => {
                let FlowType::Media(MediaFlow::Tpba(mut t)) = f.kind.clone() else {
                    return Err(ExpError::Input(format!("{}: flow3 must be tpba", s.file)));
                };
                t.fs.tpba.t_adapt = Duration::from_secs_f64(c.t_adapt_s);
                t.fs.tpba.t_rtcp = Duration::from_secs_f64(c.t_rtcp_s);
                t.fs.tpba.t_running = Duration::from_secs_f64(c.t_running_s);
                t.fs.tpba.r_f = c.r_f;
                FlowType::Media(MediaFlow::Tpba(t))
            }
            "LDA" | "LDAF" => FlowType::Media(MediaFlow::Lda(LdaFlowConfig {
                lda: LdaConfig {
                    t_adapt: Duration::from_secs_f64(c.t_adapt_s),
                    t_rtcp: Duration::from_secs_f64(c.t_rtcp_s),
                    // §6.2: "The initial value of the rate, r0, is set to 10 kbps".
                    r0_bytes_per_s: kbps(10.0),
                    air0_bytes_per_s: kbps(c.air0_kbps),
                    r_f: c.r_f,
                    air_update: if c.scheme == "LDAF" {
                        AirUpdate::Fixed
                    } else {
                        AirUpdate::Iterated
                    },
                    ..LdaConfig::default()
                },
                bottleneck: Bottleneck::PacketPair,
            })),
            _ => FlowType::Media(MediaFlow::Tfrc(TfrcConfig::default())),
        };
    }
    Ok(s)
}

/// One run's metrics.
#[derive(Clone, Debug, Serialize)]
pub struct CaseRun {
    /// Case name.
    pub case: &'static str,
    /// Seed.
    pub seed: u64,
    /// The metrics, kbit/s.
    pub delta_r: DeltaR,
    /// Mean rates of flows 1-4 over the 100 s after flow 4 joined, kbit/s.
    pub after_join_kbps: [f64; 4],
}

fn fmt(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v:.0}"))
}

fn mean_of(xs: &[Option<f64>]) -> Option<f64> {
    let v: Vec<f64> = xs.iter().flatten().copied().collect();
    (!v.is_empty()).then(|| mean(&v))
}

impl Experiment for Table4 {
    fn name(&self) -> &'static str {
        "tpba-table4"
    }

    fn summary(&self) -> &'static str {
        "papers/002 Table 4, Figs. 29-31: dR_intra, dR_ave1, dR_ave2 of 16 TPBA/LDAF/LDA cases and TFRC, flow 4 joining at 200 s"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let base = scenario(opts, "table4.toml")?;
        let seeds = seeds(opts, 10, 2);
        let n = (seeds.len() * CASES.len()) as f64;
        let mut runs: Vec<CaseRun> = Vec::new();
        let mut report = Report::default();
        report.text(
            "papers/002 §6.2: flows 1, 2 TCP and flow 3 (the case) from 0 s, flow 4 TCP from \
             200 s (400 s for LDAF-3-1-10-3/-6, as the paper did), S_average = 1 s; Topology 1 \
             (1.2 Mbit/s, 12 ms), every flow started within 500 ms of its time by the seed, ADU2 for TPBA, r0 = 10 kbit/s for LDA/LDAF, 512-byte packets. \
             The paper's Figures 29-31 (the δR bars) are lost in the text: only its conclusions \
             survive (TPBA beats LDA on all three metrics; LDA does not converge after the \
             change; R_f 3 vs 6 makes no significant difference). TFRC (RFC 5348) is ours.",
        );
        for c in &CASES {
            let s = scenario_for(&base, c)?;
            let change = change_s(c) as usize;
            for seed in &seeds {
                let done = runs.len() as f64 / n;
                // The trials differ by when flows 1-3 start (flow 4 joins later).
                let mut s = s.clone();
                jitter_starts(&mut s, *seed);
                let (_, r) = run(&s, *seed, progress, done, 1.0 / n)?;
                let rates: Vec<Vec<f64>> = ["flow1", "flow2", "flow3", "flow4"]
                    .iter()
                    .map(|nm| {
                        flow(&r, nm).map(|f| f.goodput_series_bps.iter().map(|b| b / 1e3).collect())
                    })
                    .collect::<Result<_, _>>()?;
                let [r1, r2, r3, r4]: [Vec<f64>; 4] = rates
                    .try_into()
                    .map_err(|_| ExpError::Input("four flows expected".into()))?;
                let after = |v: &Vec<f64>| mean(v.get(change..).unwrap_or(&[]));
                let after_join_kbps = [after(&r1), after(&r2), after(&r3), after(&r4)];
                let d = delta_r(
                    &[r1.clone(), r2.clone(), r3.clone(), r4.clone()],
                    change - 1,
                    change + 99,
                );
                if Some(seed) == seeds.first() {
                    let t: Vec<f64> = r.sample_times_s.clone();
                    let pts =
                        |v: &Vec<f64>| t.iter().copied().zip(v.iter().copied()).collect::<Vec<_>>();
                    report.file(
                        format!("table4-{}-rates.svg", c.name),
                        line_chart_of(
                            &format!("snapshot of the rate ({})", c.name),
                            "time (s)",
                            "kbit/s",
                            &[
                                ("flow 1 (TCP)", pts(&r1)),
                                ("flow 2 (TCP)", pts(&r2)),
                                ("flow 3", pts(&r3)),
                                ("flow 4 (TCP)", pts(&r4)),
                            ],
                        )?
                        .into_bytes(),
                    );
                }
                runs.push(CaseRun {
                    case: c.name,
                    seed: *seed,
                    delta_r: d,
                    after_join_kbps,
                });
            }
        }
        let mut t = Table::new([
            "case",
            "runs",
            "n_cross (mean)",
            "fallback runs",
            "dR_intra mean",
            "dR_intra max",
            "dR_ave1 mean",
            "dR_ave1 max",
            "dR_ave2 mean",
            "dR_ave2 max",
            "flow3 after join",
            "TCP mean after join",
        ]);
        let mut per_case = Vec::new();
        for c in &CASES {
            let rs: Vec<&CaseRun> = runs.iter().filter(|r| r.case == c.name).collect();
            let col = |f: fn(&DeltaR) -> Option<f64>| -> Vec<Option<f64>> {
                rs.iter().map(|r| f(&r.delta_r)).collect()
            };
            let max_of = |xs: &[Option<f64>]| xs.iter().flatten().copied().reduce(f64::max);
            let (intra, ave1, ave2) = (col(|d| d.intra), col(|d| d.ave1), col(|d| d.ave2));
            let ncross: Vec<Option<f64>> = rs
                .iter()
                .map(|r| r.delta_r.n_cross.map(|n| n as f64))
                .collect();
            let f3 = mean(&rs.iter().map(|r| r.after_join_kbps[2]).collect::<Vec<_>>());
            let tcp = mean(
                &rs.iter()
                    .map(|r| {
                        (r.after_join_kbps[0] + r.after_join_kbps[1] + r.after_join_kbps[3]) / 3.0
                    })
                    .collect::<Vec<_>>(),
            );
            t.row([
                c.name.to_string(),
                rs.len().to_string(),
                fmt(mean_of(&ncross)),
                rs.iter().filter(|r| r.delta_r.fallback).count().to_string(),
                fmt(mean_of(&intra)),
                fmt(max_of(&intra)),
                fmt(mean_of(&ave1)),
                fmt(max_of(&ave1)),
                fmt(mean_of(&ave2)),
                fmt(max_of(&ave2)),
                format!("{f3:.0}"),
                format!("{tcp:.0}"),
            ]);
            per_case.push((c, mean_of(&intra), mean_of(&ave1), mean_of(&ave2)));
        }
        report.table(
            "δR metrics per case, kbit/s (Figs. 29-31: mean and max over seeds)",
            "table4-delta-r",
            t,
        );
        let scheme_mean = |scheme: &str, k: usize| {
            let v: Vec<Option<f64>> = per_case
                .iter()
                .filter(|p| p.0.scheme == scheme)
                .map(|p| [p.1, p.2, p.3][k])
                .collect();
            mean_of(&v)
        };
        let mut st = Table::new(["metric", "paper", "TPBA", "LDA", "LDAF", "TFRC"]);
        for (k, (m, paper)) in [
            ("dR_intra", "TPBA < LDA"),
            ("dR_ave1", "TPBA < LDA"),
            (
                "dR_ave2",
                "TPBA < LDA; LDA does not converge after the change",
            ),
        ]
        .iter()
        .enumerate()
        {
            st.row([
                m.to_string(),
                paper.to_string(),
                fmt(scheme_mean("TPBA", k)),
                fmt(scheme_mean("LDA", k)),
                fmt(scheme_mean("LDAF", k)),
                fmt(scheme_mean("TFRC", k)),
            ]);
        }
        report.table(
            "paper vs ours: mean over each scheme's cases, kbit/s",
            "table4-summary",
            st,
        );
        // The same headline per seed (each seed's mean over a scheme's cases), as a mean with
        // its 95 % interval, and LDA − TPBA per seed (> 0: the paper's order).
        let seeds_run: Vec<u64> = {
            let mut v: Vec<u64> = runs.iter().map(|r| r.seed).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let per_seed = |scheme: &str, k: usize| -> Vec<Option<f64>> {
            seeds_run
                .iter()
                .map(|&sd| {
                    let v: Vec<Option<f64>> = runs
                        .iter()
                        .filter(|r| r.seed == sd)
                        .filter(|r| CASES.iter().any(|c| c.name == r.case && c.scheme == scheme))
                        .map(|r| [r.delta_r.intra, r.delta_r.ave1, r.delta_r.ave2][k])
                        .collect();
                    mean_of(&v)
                })
                .collect()
        };
        let spread = |xs: &[Option<f64>]| {
            let v: Vec<f64> = xs.iter().flatten().copied().collect();
            Spread::of(&v)
        };
        let mut sp = Table::new(["metric", "TPBA", "LDA", "LDA − TPBA", "TPBA < LDA"]);
        for (k, m) in ["dR_intra", "dR_ave1", "dR_ave2"].iter().enumerate() {
            let (tp, ld) = (per_seed("TPBA", k), per_seed("LDA", k));
            let diff: Vec<Option<f64>> = tp
                .iter()
                .zip(&ld)
                .map(|(a, b)| Some((*b)? - (*a)?))
                .collect();
            let d = spread(&diff);
            sp.row([
                m.to_string(),
                spread(&tp).fmt_with(0),
                spread(&ld).fmt_with(0),
                d.fmt_with(0),
                if d.low() > 0.0 {
                    "yes (interval above 0)"
                } else if d.high() < 0.0 {
                    "no (interval below 0)"
                } else {
                    "undecided"
                }
                .to_string(),
            ]);
        }
        report.table(
            "the same per seed: mean ± 95 % interval over seeds, kbit/s",
            "table4-spread",
            sp,
        );
        let categories: Vec<String> = CASES.iter().map(|c| c.name.to_string()).collect();
        for (k, (file, title)) in [
            ("fig29-delta-r-intra.svg", "Fig. 29: calculated dR_intra"),
            ("fig30-delta-r-ave1.svg", "Fig. 30: calculated dR_ave1"),
            ("fig31-delta-r-ave2.svg", "Fig. 31: calculated dR_ave2"),
        ]
        .iter()
        .enumerate()
        {
            let vals: Vec<f64> = per_case
                .iter()
                .map(|p| [p.1, p.2, p.3][k].unwrap_or(0.0))
                .collect();
            let bars = Bars {
                categories: categories.clone(),
                series: vec![("mean over seeds (0: undefined)", vals)],
            };
            report.file(*file, bar_chart(title, "kbit/s", &bars, None)?.into_bytes());
        }
        report.file("table4.json", json(&runs)?);
        Ok(report)
    }
}
