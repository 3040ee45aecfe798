//! `adaptnet exp nai-table2`: the priority and deadline workloads of Table 2 and Figure 7
//! (`papers/000_97f7680fd99dd928.txt` §5.4), for ATP, NAI-TCP, NAI-MTCP1/2/3 and an oracle
//! (ATP fed the true link rate), over the synthetic five-minute trace and other traces.
//!
//! Metric (Figure 7): the fraction of messages of each priority delivered before their timers
//! expire (outcome `Delivered` with an early margin), averaged over the trials (seeds).
//! Parameters: `experiments/nai/table2.params`.

mod cells;
mod report;

pub use cells::*;

use super::net::Testbed;
use super::params;
use super::traces;
use crate::{ExpError, ExpOptions, Experiment, Report};
use adaptnet_core::nai::AdmissionScope;

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
        let (seeds, trace_params, root) = params::run_plan(opts, &p.seeds, &p.traces, file)?;
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
        report::report(&p, &seeds, &results, &ablation, &notes)
    }
}
