//! Running a scenario inside an experiment, with its progress mapped into the experiment's.

use crate::ExpError;
use adaptnet_core::Time;
use adaptnet_sim::metrics::RunResults;
use adaptnet_sim::scenario::Scenario;

/// Runs a scenario, mapping its virtual-time progress into `[done, done + share)`.
pub fn run(
    s: &Scenario,
    seed: u64,
    progress: &mut dyn FnMut(f64),
    done: f64,
    share: f64,
) -> Result<RunResults, ExpError> {
    let total = s.duration.as_secs_f64().max(1e-9);
    let out = s.run(seed, &mut |t: Time| {
        progress(done + share * (t.as_secs_f64() / total).min(1.0))
    })?;
    Ok(out.results)
}
