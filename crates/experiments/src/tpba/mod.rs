//! The TPBA experiments (`papers/002_ef8b8f60f6080824.txt`, TCP-Rate-Probing-Based
//! Adaptation): §3's Figure 3 (`tpba-fig3`), §6.1's Figures 10–12 (`tpba-fig10`) and the
//! long-RTT Figures 14–18 (`tpba-fig14`), and §6.2's Table 4 comparison with the δR metrics of
//! Figures 29–31 plus TFRC (`tpba-table4`), §6.1's Figure 19 (`tpba-fig19`: fairness against
//! the number of TCP connections) and Table 3 (`tpba-table3`: the response to a flow joining
//! or leaving), and the comparison §8 plans beyond the paper (`tpba-compare`: TPBA, the CM's
//! layered audio, TFRC and LDA against TCP, on the paper's bottleneck, a loss-driven one and a
//! cellular trace). Scenario files are under `experiments/tpba/`; every reconstruction is
//! stated there and in EXPERIMENTS.md. No controller constant is tuned here: only the scenario
//! (buffers, RTT) is chosen.

mod compare;
mod dynamics;
mod fig19;
mod fig3;
mod metrics;
mod table3;
mod table4;

pub use metrics::{DeltaR, Stable, delta_r, mean_from, settle_time, smoothness};

use crate::report::{json, mean};
use crate::{ExpError, ExpOptions, Experiment};
use adaptnet_core::Time;
use adaptnet_core::tpba::Period;
use adaptnet_sim::agents::tpba::{SwitchRecord, TpbaSender};
use adaptnet_sim::metrics::{FlowResult, RunResults};
use adaptnet_sim::scenario::Scenario;
use adaptnet_sim::world::{FlowId, World};
use std::time::Duration;

/// The TPBA experiments, in the paper's order.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(fig3::Fig3),
        Box::new(dynamics::Dynamics::topology1()),
        Box::new(dynamics::Dynamics::topology2()),
        Box::new(fig19::Fig19),
        Box::new(table3::Table3),
        Box::new(table4::Table4),
        Box::new(compare::Compare),
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

/// The trials of §6 differ by when the flows were started (by hand in the paper): every flow
/// starts a uniform draw in [0, 500 ms) from the seed after the time the scenario gives it
/// (its stop time, if any, stays).
fn jitter_starts(s: &mut Scenario, seed: u64) {
    let mut rng = crate::rng::SplitMix::new(seed, 0x5450_4241);
    for f in s.flows.iter_mut() {
        let start = f.start + Duration::from_millis(500).mul_f64(rng.unit());
        if start < f.stop {
            f.start = start;
        }
    }
}

/// The switches of the TPBA flow named `name` in a finished run.
fn tpba_switches(w: &World, s: &Scenario, name: &str) -> Result<Vec<SwitchRecord>, ExpError> {
    let not_tpba = || ExpError::Input(format!("{}: no tpba flow named {name:?}", s.file));
    let i = s
        .flows
        .iter()
        .position(|f| f.name == name)
        .ok_or_else(not_tpba)?;
    let (snd, _) = w
        .flow_agents(FlowId(u32::try_from(i).map_err(|_| not_tpba())?))
        .ok_or_else(not_tpba)?;
    Ok(w.agent::<TpbaSender>(snd)
        .ok_or_else(not_tpba)?
        .switches()
        .to_vec())
}

/// The end of the first rate-probing period (the first switch to running), seconds.
fn first_running_s(switches: &[SwitchRecord]) -> Option<f64> {
    switches
        .iter()
        .find(|s| s.to == Period::Running)
        .map(|s| s.at_s)
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
