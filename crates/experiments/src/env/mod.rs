//! The environment-events experiments (papers/001, Sudame & Badrinath): Tables 2, 4, 5 and 6
//! and the hysteresis the paper leaves open (§6), each `adaptnet exp env-<name>`. Scenarios are
//! under `experiments/env/`; the handoff model and the radio blackouts are documented in
//! `adaptnet_sim::scenario::env`. The paper's testbed (2 Mbit/s Wavelan, mobile IP, Linux
//! 2.1.24) is replaced by one wireless link with the paper's measured TCP rates (1.2 Mbit/s up,
//! 1.4 Mbit/s down); EXPERIMENTS.md says what that changes.

mod hysteresis;
mod overhead;
mod table4;
mod table5;
mod table6;

use crate::report::{json, mean};
use crate::scenario_run::run;
use crate::{ExpError, ExpOptions, Experiment};
use adaptnet_core::Time;
use adaptnet_core::env::{Action, Param};
use adaptnet_sim::metrics::{FlowResult, RunResults};
use adaptnet_sim::scenario::Scenario;
use adaptnet_sim::scenario::env::{EnvActionDef, EnvDef};

/// The env experiments, in table order.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(overhead::Table2),
        Box::new(table4::Table4),
        Box::new(table5::Table5),
        Box::new(table6::Table6),
        Box::new(hysteresis::Hysteresis),
    ]
}

/// Datagrams (or segments) per run in §5: 10,240 of 1,400 bytes.
pub const PACKETS: u32 = 10_240;
/// Bytes of each.
pub const PACKET_BYTES: u64 = 1_400;
/// Handoffs per run in Tables 4 and 6.
pub const HANDOFFS: [usize; 4] = [1, 2, 3, 6];
/// Beacon intervals of Tables 4 and 6, seconds.
pub const BEACONS_S: [f64; 3] = [0.5, 1.0, 2.0];

/// Loads `experiments/env/<file>`.
fn scenario(opts: &ExpOptions, file: &str) -> Result<Scenario, ExpError> {
    Ok(Scenario::load(
        &opts.experiments_dir.join("env").join(file),
    )?)
}

/// The seeds: the user's, or 1..=full (1..=quick when quick).
fn seeds(opts: &ExpOptions, full: u64, quick: u64) -> Vec<u64> {
    if !opts.seeds.is_empty() {
        return opts.seeds.clone();
    }
    (1..=if opts.quick { quick } else { full }).collect()
}

/// The scenario's `[env]`, mutably.
fn env_mut(s: &mut Scenario) -> Result<&mut EnvDef, ExpError> {
    let file = s.file.clone();
    s.env
        .as_mut()
        .ok_or_else(|| ExpError::Input(format!("{file}: the experiment needs an [env] table")))
}

/// `n` handoffs spread evenly over `span_s` seconds, the first after `start_s`.
fn handoff_times(n: usize, start_s: f64, span_s: f64) -> Vec<Time> {
    (0..n)
        .map(|i| Time::from_secs_f64(start_s + span_s * (i as f64 + 0.5) / n as f64))
        .collect()
}

/// A simple action on `param`'s level `level`.
fn simple(param: Param, level: u16, action: impl Into<Action>) -> EnvActionDef {
    EnvActionDef {
        inputs: vec![(param, level)],
        complex: false,
        action: action.into(),
    }
}

/// The run's only flow.
fn only_flow(r: &RunResults) -> Result<&FlowResult, ExpError> {
    r.flows
        .first()
        .ok_or_else(|| ExpError::Input(format!("{}: no flow", r.scenario)))
}

/// A counter of a flow (0 if absent).
fn counter(f: &FlowResult, k: &str) -> f64 {
    f.counters.get(k).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests;
