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
        let trace = traces::build(&p.trace, &root, p.duration_s)?.map_err(ExpError::Input)?;
        let mut rows = Vec::new();
        let total = (p.poll_delays_s.len() * 2) as f64;
        for &poll in &p.poll_delays_s {
            for scheme in [Scheme::Notifications, Scheme::Callbacks] {
                rows.push(run_one(&p, &trace, scheme, poll, duration)?);
                progress(rows.len() as f64 / total);
            }
        }
        report::report(&p, &trace, &rows, duration)
    }
}
