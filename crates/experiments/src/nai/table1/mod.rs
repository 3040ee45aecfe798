//! `adaptnet exp nai-table1`: the four-level adaptive application of §4.4 and Table 1
//! (`papers/000_97f7680fd99dd928.txt`), over ATP with poll delays of 1 s and 3 s.
//!
//! "At each level, messages are sent with a 1-second timeout, of a sufficient size and
//! frequency to match the target bandwidth usage" (levels: 25, 100, 125, 250 KB/s; upper
//! bounds 100, 200, 400 KB/s, none). Two schemes:
//! * **bandwidth notifications only**: mode n sends levels 1..n at one priority; the
//!   application registers the current level's `[low, high]` bounds and switches mode when ATP
//!   notifies it;
//! * **callbacks + priorities**: every level always, level 1 at the highest priority; expired
//!   messages are cancelled (the callback's decision).
//!
//! We send one message per level every `period_s` (size = usage × period). Metrics: MB
//! delivered before the timer per level and in total, and the bandwidth used (every DATA
//! payload byte that crossed the link, retransmissions and incomplete messages included). Parameters:
//! `experiments/nai/table1.params`.
//!
//! Trials: the paper ran its application over "a sub-interval of the trace shown in Figure 1";
//! which sub-interval is the random element of its testbed. Each trial therefore draws a new
//! stand-in trace (the random walk's seed advanced by the trial's seed − 1, so trial 1 is the
//! trace of the parameters file) and a new simulator seed; every cell is reported as the mean
//! over trials ± the half-width of its 95 % interval.

mod app;
mod report;
mod run;

pub use app::*;
pub use report::PAPER;
pub use run::*;

use super::params;
use super::traces;
use crate::{ExpError, ExpOptions, Experiment, Report};

/// `adaptnet exp nai-table1`.
pub struct Table1;

impl Experiment for Table1 {
    fn name(&self) -> &'static str {
        "nai-table1"
    }

    fn summary(&self) -> &'static str {
        "NAI/ATP Table 1, Fig. 6: four-level adaptive application, bandwidth notifications vs \
         callbacks+priorities, poll delay 1 s and 3 s"
    }

    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError> {
        let p: Table1Params = params::load(&opts.experiments_dir, PARAMS)?;
        let duration = if opts.quick {
            p.quick_duration_s
        } else {
            p.duration_s
        };
        params::positive(duration, "duration_s", PARAMS)?;
        let root = opts
            .experiments_dir
            .parent()
            .unwrap_or(&opts.experiments_dir)
            .to_path_buf();
        let seeds: Vec<u64> = if !opts.seeds.is_empty() {
            opts.seeds.clone()
        } else {
            (1..=if opts.quick { 2 } else { 10 }).collect()
        };
        let total = (seeds.len() * p.poll_delays_s.len() * 2) as f64;
        let mut trials = Vec::new();
        let mut first_trace = None;
        let mut done = 0.0;
        for &seed in &seeds {
            let mut tp = p.clone();
            let offset = seed.wrapping_sub(1);
            tp.seed = p.seed.wrapping_add(offset);
            if let params::TraceParams::RandomWalk(w) = &mut tp.trace {
                w.seed = w.seed.wrapping_add(offset);
            }
            let trace = traces::build(&tp.trace, &root, p.duration_s)?.map_err(ExpError::Input)?;
            let mut rows = Vec::new();
            for &poll in &p.poll_delays_s {
                for scheme in [Scheme::Notifications, Scheme::Callbacks] {
                    rows.push(run_one(&tp, &trace, scheme, poll, duration)?);
                    done += 1.0;
                    progress(done / total);
                }
            }
            trials.push((seed, trace.mean_bytes_per_s, rows));
            if first_trace.is_none() {
                first_trace = Some(trace);
            }
        }
        let trace = first_trace.ok_or_else(|| ExpError::Input("no seeds to run".into()))?;
        report::report(&p, &trace, &trials, duration)
    }
}
