//! `adaptnet exp nai-table2`: the priority and deadline workloads of Table 2 and Figure 7
//! (`papers/000_97f7680fd99dd928.txt` §5.4), for ATP, NAI-TCP, NAI-MTCP1/2/3 and an oracle
//! (ATP fed the true link rate), over the synthetic five-minute trace and other traces.
//!
//! Metric (Figure 7): the fraction of messages of each priority delivered before their timers
//! expire (outcome `Delivered` with an early margin), averaged over the trials (seeds).
//! Parameters: `experiments/nai/table2.params`.

use super::net::{Implementation, Run, Testbed, atp_config};
use super::params::{self, TestbedParams, TraceParams, WorkloadParams};
use super::table2_report;
use super::traces::{self, BuiltTrace};
use super::workloads;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::Time;
use adaptnet_core::nai::{AdmissionScope, Outcome};
use adaptnet_sim::agents::nai_app::{Ledger, ScheduledApp};
use serde::Deserialize;

/// The parameter file.
pub const PARAMS: &str = "nai/table2.params";

/// The implementations compared, in table order.
pub const IMPLEMENTATIONS: [Implementation; 6] = [
    Implementation::Atp,
    Implementation::NaiTcp,
    Implementation::Mtcp(1),
    Implementation::Mtcp(2),
    Implementation::Mtcp(3),
    Implementation::Oracle,
];

/// The implementations rerun in the admission-scope ablation.
pub const ABLATION: [Implementation; 2] = [Implementation::Atp, Implementation::Oracle];

/// `experiments/nai/table2.params`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table2Params {
    /// Span of the workloads (and of the traces).
    pub duration_s: f64,
    /// Extra time after the last submission for outcomes to settle.
    pub drain_s: f64,
    /// If some message still has no outcome after `drain_s`, keep running (5 s at a time) up
    /// to this long after the last submission.
    pub max_drain_s: f64,
    /// Trials.
    pub seeds: Vec<u64>,
    /// The testbed.
    pub testbed: TestbedParams,
    /// Traces; the first is the paper's stand-in.
    pub traces: Vec<TraceParams>,
    /// Table 2's workloads.
    pub workloads: Vec<WorkloadParams>,
}

/// What happened to the messages of one priority level in one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Messages submitted.
    pub total: u64,
    /// Delivered before the timer expired.
    pub on_time: u64,
    /// Delivered after it.
    pub late: u64,
    /// Expired early (ATP: on the estimate; NAI-TCP/MTCP: the half-timeout rule).
    pub expired_early: u64,
    /// Expired at the deadline.
    pub expired: u64,
    /// Refused by admission control.
    pub rejected: u64,
    /// Cancelled (only at the end of a run).
    pub cancelled: u64,
    /// No outcome.
    pub pending: u64,
}

impl Tally {
    /// Fraction delivered on time.
    pub fn fraction(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.on_time as f64 / self.total as f64
        }
    }
}

/// One run: per-level tallies and the ledger's consistency.
#[derive(Clone, Debug, PartialEq)]
pub struct CellResult {
    /// Index = priority level.
    pub tallies: Vec<Tally>,
    /// Messages without exactly one outcome, plus outcomes for unknown ids.
    pub violations: u64,
    /// Messages still live when the run ended.
    pub live_at_end: usize,
}

/// Tallies a ledger by priority level.
pub fn tally(ledger: &Ledger, levels: u8) -> CellResult {
    let mut tallies = vec![Tally::default(); usize::from(levels.max(1))];
    let mut violations = ledger.unknown_outcomes;
    for r in ledger.messages().values() {
        if r.outcomes_reported != 1 {
            violations += 1;
        }
        let Some(t) = tallies.get_mut(usize::from(r.priority.0)) else {
            violations += 1;
            continue;
        };
        t.total += 1;
        match r.outcome {
            _ if r.on_time() => t.on_time += 1,
            Some(Outcome::Delivered { .. }) => t.late += 1,
            Some(Outcome::Expired { early: true }) => t.expired_early += 1,
            Some(Outcome::Expired { early: false }) => t.expired += 1,
            Some(Outcome::Rejected(_)) => t.rejected += 1,
            Some(Outcome::Cancelled) => t.cancelled += 1,
            None => t.pending += 1,
        }
    }
    CellResult {
        tallies,
        violations,
        live_at_end: 0,
    }
}

/// Runs `workload` (trial `seed`) on `implementation` over `testbed` for `duration_s` plus
/// `drain.0`, and on while messages lack an outcome, up to `drain.1` after `duration_s`.
pub fn run_cell(
    testbed: &Testbed,
    workload: &WorkloadParams,
    implementation: Implementation,
    seed: u64,
    duration_s: f64,
    drain: (f64, f64),
) -> Result<CellResult, ExpError> {
    let scope = AdmissionScope::default();
    run_cell_with(
        testbed,
        workload,
        implementation,
        seed,
        duration_s,
        drain,
        scope,
    )
}

/// [`run_cell`] with ATP's admission control protecting `scope` (an ablation).
pub fn run_cell_with(
    testbed: &Testbed,
    workload: &WorkloadParams,
    implementation: Implementation,
    seed: u64,
    duration_s: f64,
    (drain_s, max_drain_s): (f64, f64),
    scope: AdmissionScope,
) -> Result<CellResult, ExpError> {
    let msgs = workloads::messages(workload, seed)?;
    let app = Box::new(ScheduledApp::new(msgs));
    let mut config = atp_config(workload.levels, 1);
    config.nai.admission = scope;
    let mut run = Run::new(testbed, implementation, config, app, seed)?;
    run.run_until(Time::from_secs_f64(duration_s + drain_s));
    let mut t = duration_s + drain_s;
    while t < duration_s + max_drain_s && run.ledger().is_some_and(|l| l.pending() > 0) {
        t += 5.0;
        run.run_until(Time::from_secs_f64(t));
    }
    let live = run.finish();
    let ledger = run
        .ledger()
        .ok_or_else(|| ExpError::Input("the sender agent has no ledger".into()))?;
    let mut result = tally(ledger, workload.levels);
    result.live_at_end = live;
    Ok(result)
}

/// Mean fraction on time of level `level` over `cells`.
pub fn mean_fraction(cells: &[CellResult], level: usize) -> f64 {
    if cells.is_empty() {
        return 0.0;
    }
    cells
        .iter()
        .map(|c| c.tallies.get(level).map_or(0.0, Tally::fraction))
        .sum::<f64>()
        / cells.len() as f64
}

/// All results of one trace: `[workload][implementation] → trials`.
pub struct TraceResults {
    /// The trace.
    pub trace: BuiltTrace,
    /// Cells, indexed like `params.workloads` × [`IMPLEMENTATIONS`].
    pub cells: Vec<Vec<Vec<CellResult>>>,
}

/// `adaptnet exp nai-table2`.
pub struct Table2;

impl Experiment for Table2 {
    fn name(&self) -> &'static str {
        "nai-table2"
    }

    fn summary(&self) -> &'static str {
        "NAI/ATP Table 2, Fig. 7: messages delivered before their timers, 6 workloads, ATP vs \
         NAI-TCP vs NAI-MTCP1-3 vs oracle, 3 traces"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p: Table2Params = params::load(&opts.experiments_dir, PARAMS)?;
        let file = PARAMS;
        params::positive(p.duration_s, "duration_s", file)?;
        let mut seeds = if opts.seeds.is_empty() {
            p.seeds.clone()
        } else {
            opts.seeds.clone()
        };
        let mut trace_params = p.traces.clone();
        if opts.quick {
            seeds.truncate(1);
            trace_params.truncate(1);
        }
        if seeds.is_empty() {
            return Err(ExpError::Input(format!("{file}: no seeds")));
        }
        let root = opts
            .experiments_dir
            .parent()
            .unwrap_or(&opts.experiments_dir)
            .to_path_buf();
        let mut notes = Vec::new();
        let mut built = Vec::new();
        for t in &trace_params {
            match traces::build(t, &root, p.duration_s)? {
                Ok(b) => built.push(b),
                Err(note) => notes.push(note),
            }
        }
        // The ablation runs on the first trace only, and not in quick mode: count exactly the
        // runs made, and advance after each, so the bar ends at 100 %.
        let ablation_runs = if opts.quick || built.is_empty() {
            0
        } else {
            p.workloads.len() * ABLATION.len() * seeds.len()
        };
        let total = (built.len() * p.workloads.len() * IMPLEMENTATIONS.len() * seeds.len()
            + ablation_runs) as f64;
        let mut done = 0.0;
        let mut results = Vec::new();
        for trace in built {
            let testbed = Testbed::new(&p.testbed, trace.bandwidth.clone(), file)?;
            let mut cells = Vec::new();
            for w in &p.workloads {
                let mut row = Vec::new();
                for imp in IMPLEMENTATIONS {
                    let mut trials = Vec::new();
                    for &seed in &seeds {
                        let drain = (p.drain_s, p.max_drain_s);
                        trials.push(run_cell(&testbed, w, imp, seed, p.duration_s, drain)?);
                        done += 1.0;
                        progress(done / total);
                    }
                    row.push(trials);
                }
                cells.push(row);
            }
            results.push(TraceResults { trace, cells });
        }
        // Ablation on the first trace: admission control protecting every level (the literal
        // reading of §3.3) instead of the newcomer's level only.
        let mut ablation = Vec::new();
        if let (false, Some(first)) = (opts.quick, results.first()) {
            let testbed = Testbed::new(&p.testbed, first.trace.bandwidth.clone(), file)?;
            for w in &p.workloads {
                let mut row = Vec::new();
                for imp in ABLATION {
                    let mut trials = Vec::new();
                    for &seed in &seeds {
                        let drain = (p.drain_s, p.max_drain_s);
                        let scope = AdmissionScope::AllLevels;
                        trials.push(run_cell_with(
                            &testbed,
                            w,
                            imp,
                            seed,
                            p.duration_s,
                            drain,
                            scope,
                        )?);
                        done += 1.0;
                        progress(done / total);
                    }
                    row.push(trials);
                }
                ablation.push(row);
            }
        }
        table2_report::report(&p, &seeds, &results, &ablation, &notes)
    }
}
