//! The TPBA experiments (`papers/002_ef8b8f60f6080824.txt`, TCP-Rate-Probing-Based
//! Adaptation): §3's Figure 3 (`tpba-fig3`), §6.1's Figures 10–12 (`tpba-fig10`) and the
//! long-RTT Figures 14–18 (`tpba-fig14`), and §6.2's Table 4 comparison with the δR metrics of
//! Figures 29–31 plus TFRC (`tpba-table4`). Scenario files are under `experiments/tpba/`;
//! every reconstruction is stated there and in EXPERIMENTS.md. No controller constant is tuned
//! here: only the scenario (buffers, RTT) is chosen.

mod dynamics;
mod fig3;
mod metrics;
mod table4;

pub use metrics::{DeltaR, delta_r};

use crate::report::{json, mean};
use crate::{ExpError, ExpOptions, Experiment};
use adaptnet_core::Time;
use adaptnet_sim::metrics::{FlowResult, RunResults};
use adaptnet_sim::scenario::Scenario;
use adaptnet_sim::world::World;

/// The TPBA experiments, in the paper's order.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(fig3::Fig3),
        Box::new(dynamics::Dynamics::topology1()),
        Box::new(dynamics::Dynamics::topology2()),
        Box::new(table4::Table4),
    ]
}

/// Loads `experiments/tpba/<file>`.
fn scenario(opts: &ExpOptions, file: &str) -> Result<Scenario, ExpError> {
    Ok(Scenario::load(
        &opts.experiments_dir.join("tpba").join(file),
    )?)
}

/// The seeds to run: the user's, or the experiment's defaults (fewer when quick).
fn seeds(opts: &ExpOptions, full: u64, quick: u64) -> Vec<u64> {
    if !opts.seeds.is_empty() {
        return opts.seeds.clone();
    }
    (1..=if opts.quick { quick } else { full }).collect()
}

/// Runs a scenario, mapping its progress into `[done, done + share)`; returns the world
/// (for typed inspection of the agents) and the results.
fn run(
    s: &Scenario,
    seed: u64,
    progress: &mut dyn FnMut(f64),
    done: f64,
    share: f64,
) -> Result<(World, RunResults), ExpError> {
    let total = s.duration.as_secs_f64().max(1e-9);
    let mut world = s.build(seed)?;
    world.run_until(s.duration, &mut |t: Time| {
        progress(done + share * (t.as_secs_f64() / total).min(1.0))
    });
    let results = world.results(&s.name);
    Ok((world, results))
}

/// The flow named `name`.
fn flow<'a>(r: &'a RunResults, name: &str) -> Result<&'a FlowResult, ExpError> {
    r.flow(name)
        .ok_or_else(|| ExpError::Input(format!("{}: no flow named {name:?}", r.scenario)))
}

/// A flow's rate series `(t, kbit/s)`, the point at the end of each interval.
fn kbps_series(r: &RunResults, f: &FlowResult) -> Vec<(f64, f64)> {
    r.sample_times_s
        .iter()
        .zip(&f.goodput_series_bps)
        .map(|(t, b)| (*t, b / 1e3))
        .collect()
}

/// Mean of a flow's rate over samples ending in `(from_s, to_s]`, kbit/s.
fn mean_kbps(r: &RunResults, f: &FlowResult, from_s: f64, to_s: f64) -> f64 {
    let xs: Vec<f64> = kbps_series(r, f)
        .into_iter()
        .filter(|(t, _)| *t > from_s && *t <= to_s)
        .map(|(_, k)| k)
        .collect();
    mean(&xs)
}

#[cfg(test)]
mod tests;
