//! What `nai-table2` measures and how one cell (workload × implementation × trial) runs.

use crate::ExpError;
use crate::nai::net::{Implementation, Run, Testbed, atp_config};
use crate::nai::params::{TestbedParams, TraceParams, WorkloadParams};
use crate::nai::traces::BuiltTrace;
use crate::nai::workloads;
use adaptnet_core::Time;
use adaptnet_core::nai::{AdmissionScope, Outcome};
use adaptnet_sim::agents::message_bytes::PayloadCheck;
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
    /// With `testbed.message_bytes`, every delivery checked against the bytes sent.
    pub payload: Option<PayloadCheck>,
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
            // The simulator never abandons (its connections do not end); counted as unresolved.
            Some(Outcome::Abandoned) | None => t.pending += 1,
        }
    }
    CellResult {
        tallies,
        violations,
        live_at_end: 0,
        payload: None,
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
    result.payload = run.payload_check();
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
