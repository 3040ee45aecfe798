//! `adaptnet exp nai-estimators`: ATP's two estimators — Figure 3 as printed (`ATP`, what the
//! reproductions run) and the library's default, the rate control (`ATP-default`,
//! `EstimatorMode::Control`) — against the oracle
//! (the true link rate), NAI-TCP and the best NAI-MTCPk, on Table 2's six workloads over
//! traces no other experiment uses (`experiments/nai/estimators.params`). Reports, per trace,
//! the fraction delivered before the timer per workload and priority, and checks the aims:
//! the default within 5 points of the oracle on high priority and 15 on low priority, never
//! below NAI-TCP on high priority where priorities contend, and ATP at least 1.3× the best
//! MTCPk on high priority for `filesystem` and `overload` (papers/000 §5.4).

use super::net::Implementation;
use super::params::{self, TraceParams};
use super::table2::{self, CellResult, Table2Params, mean_fraction, run_cell};
use super::traces;
use super::workloads::level_name;
use crate::report::table::Table;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::nai::Priority;
use serde::Deserialize;

/// The parameter file.
pub const PARAMS: &str = "nai/estimators.params";

/// `experiments/nai/estimators.params`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EstimatorsParams {
    /// Trials.
    pub seeds: Vec<u64>,
    /// The traces compared on.
    pub traces: Vec<TraceParams>,
}

/// The implementations compared, in table order.
const COMPARED: [Implementation; 7] = [
    Implementation::Atp,
    Implementation::AtpDefault,
    Implementation::Oracle,
    Implementation::NaiTcp,
    Implementation::Mtcp(1),
    Implementation::Mtcp(2),
    Implementation::Mtcp(3),
];

/// Workloads where priorities contend (the high-priority aim against NAI-TCP applies there).
const CONTENDED: [&str; 3] = ["prioritised", "filesystem", "overload"];

/// `adaptnet exp nai-estimators`.
pub struct Estimators;

/// Mean on-time percent of `level` for each compared implementation.
fn fractions(cells: &[Vec<CellResult>], level: usize) -> Vec<f64> {
    cells
        .iter()
        .map(|trials| 100.0 * mean_fraction(trials, level))
        .collect()
}

impl Experiment for Estimators {
    fn name(&self) -> &'static str {
        "nai-estimators"
    }

    fn summary(&self) -> &'static str {
        "ATP's estimators (Figure 3 as printed vs the default rate control) against the oracle, \
         NAI-TCP and NAI-MTCPk on Table 2's workloads over three new traces"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let t2: Table2Params = params::load(&opts.experiments_dir, table2::PARAMS)?;
        let p: EstimatorsParams = params::load(&opts.experiments_dir, PARAMS)?;
        let (seeds, trace_params, root) = params::run_plan(opts, &p.seeds, &p.traces, PARAMS)?;
        let mut report = Report::default();
        report.text(
            "ATP's estimators on new traces: percent of messages delivered before their timers \
             (mean over trials). ATP = Figure 3 as printed (the reproductions' estimator); \
             ATP-default = the library's default, the rate control (short queues).",
        );
        let total = (trace_params.len() * t2.workloads.len() * COMPARED.len() * seeds.len()) as f64;
        let mut done = 0.0;
        let drain = (t2.drain_s, t2.max_drain_s);
        for tp in &trace_params {
            let trace = match traces::build(tp, &root, t2.duration_s)? {
                Ok(b) => b,
                Err(note) => {
                    report.text(note);
                    continue;
                }
            };
            let testbed = super::net::Testbed::new(&t2.testbed, trace.bandwidth.clone(), PARAMS)?;
            let mut header = vec!["workload".to_string(), "priority".to_string()];
            header.extend(COMPARED.iter().map(|i| format!("{} %", i.label())));
            let mut table = Table::new(header);
            let mut aims = Vec::new();
            for w in &t2.workloads {
                let mut cells: Vec<Vec<CellResult>> = Vec::new();
                for &imp in &COMPARED {
                    let mut trials = Vec::new();
                    for &seed in &seeds {
                        trials.push(run_cell(&testbed, w, imp, seed, t2.duration_s, drain)?);
                        done += 1.0;
                        progress(done / total);
                    }
                    cells.push(trials);
                }
                let lowest = usize::from(w.levels.max(1)) - 1;
                for level in 0..usize::from(w.levels) {
                    let used = cells
                        .first()
                        .and_then(|t| t.first())
                        .and_then(|c| c.tallies.get(level))
                        .is_some_and(|t| t.total > 0);
                    if !used {
                        continue;
                    }
                    let f = fractions(&cells, level);
                    let name = level_name(Priority(u8::try_from(level).unwrap_or(0)), w.levels);
                    let mut row = vec![w.name.clone(), name.to_string()];
                    row.extend(f.iter().map(|v| format!("{v:.1}")));
                    table.row(row);
                    let (paper, default, oracle, nai_tcp) = (f[0], f[1], f[2], f[3]);
                    let best_mtcp = f[4].max(f[5]).max(f[6]);
                    if level == 0 {
                        aims.push((
                            format!("{} high: ATP-default within 5 of the oracle", w.name),
                            oracle - default <= 5.0,
                            format!("{default:.1} vs {oracle:.1}"),
                        ));
                        if CONTENDED.contains(&w.name.as_str()) {
                            aims.push((
                                format!("{} high: ATP-default >= NAI-TCP", w.name),
                                default >= nai_tcp,
                                format!("{default:.1} vs {nai_tcp:.1}"),
                            ));
                        }
                        if w.name == "filesystem" || w.name == "overload" {
                            for (label, v) in [("ATP", paper), ("ATP-default", default)] {
                                aims.push((
                                    format!("{} high: {label} >= 1.3x best MTCPk", w.name),
                                    v >= 1.3 * best_mtcp,
                                    format!("{v:.1} vs {best_mtcp:.1}"),
                                ));
                            }
                        }
                    } else if level == lowest {
                        aims.push((
                            format!("{} low: ATP-default within 15 of the oracle", w.name),
                            oracle - default <= 15.0,
                            format!("{default:.1} vs {oracle:.1}"),
                        ));
                    }
                }
            }
            report.table(
                format!(
                    "trace {} (mean {:.0} KB/s)",
                    trace.name,
                    trace.mean_bytes_per_s / 1024.0
                ),
                &format!("estimators-{}", trace.name),
                table,
            );
            let met = aims.iter().filter(|a| a.1).count();
            let mut t = Table::text(["aim", "met", "measured"]);
            for (aim, ok, measured) in &aims {
                t.row([
                    aim.clone(),
                    if *ok { "yes" } else { "NO" }.into(),
                    measured.clone(),
                ]);
            }
            report.table(
                format!("aims on {}: {met} of {} met", trace.name, aims.len()),
                &format!("estimators-aims-{}", trace.name),
                t,
            );
            report.file(trace.file.0.clone(), trace.file.1.clone().into_bytes());
        }
        Ok(report)
    }
}
