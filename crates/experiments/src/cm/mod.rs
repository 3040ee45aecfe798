//! The Congestion Manager experiments (papers/003, Balakrishnan, Rahul, Seshan, SIGCOMM '99):
//! Figures 3, 4, 6, 7, 9 and 10, each `adaptnet exp cm-fig<N>`. Setups follow
//! `docs/design/cm.md` §2; every reconstruction (cross traffic, buffers, transfer sizes) is
//! stated in the scenario files under `experiments/cm/` and in EXPERIMENTS.md. No CM constant
//! is tuned here: only the scenario (traffic, buffers) is chosen.
//!
//! Shared choices: 1,000-byte packets (ns-2's default, the paper's "1KB"), TCP MSS and CM MTU
//! of 1,000 bytes, 120 ms round-trip propagation delay, and ns-2's default DropTail limit of 50
//! packets where the paper does not give a buffer.

mod fig10;
mod fig3;
mod fig4;
mod fig6;
mod fig7;
mod fig9;
mod plot;
mod web;

use crate::report::{json, mean};
use crate::rng::SplitMix;
use crate::scenario_run::run;
use crate::{ExpError, ExpOptions, Experiment};
use adaptnet_sim::link::QueueLimit;
use adaptnet_sim::metrics::{FlowResult, RunResults};
use adaptnet_sim::scenario::{Scenario, TopologyDef};
use std::time::Duration;

/// The CM experiments, in figure order.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(fig3::Fig3),
        Box::new(fig4::Fig4),
        Box::new(fig6::Fig6),
        Box::new(fig7::Fig7),
        Box::new(fig9::Fig9),
        Box::new(fig10::Fig10),
    ]
}

/// Loads `experiments/cm/<file>`.
fn scenario(opts: &ExpOptions, file: &str) -> Result<Scenario, ExpError> {
    Ok(Scenario::load(&opts.experiments_dir.join("cm").join(file))?)
}

/// The seeds to run: the user's, or the experiment's defaults (fewer when quick).
fn seeds(opts: &ExpOptions, full: u64, quick: u64) -> Vec<u64> {
    if !opts.seeds.is_empty() {
        return opts.seeds.clone();
    }
    (1..=if opts.quick { quick } else { full }).collect()
}

/// Sets the dumbbell's bottleneck rate (both directions) and, if given, its queue.
fn set_bottleneck(
    s: &mut Scenario,
    bits_per_s: f64,
    queue: Option<QueueLimit>,
) -> Result<(), ExpError> {
    let TopologyDef::Dumbbell { spec, .. } = &mut s.topology else {
        return Err(ExpError::Input(format!(
            "{}: the experiment needs a dumbbell topology",
            s.file
        )));
    };
    for l in [&mut spec.bottleneck, &mut spec.bottleneck_reverse] {
        l.bandwidth = adaptnet_sim::link::Bandwidth::bits_per_s(bits_per_s);
        if let Some(q) = queue {
            l.queue = q;
        }
    }
    Ok(())
}

/// Delays the start of the named flows by a uniform draw in `[0, max)` from `seed`: the only
/// run-to-run variation of otherwise deterministic setups (a browser opens its connections a
/// few milliseconds apart).
fn jitter_starts(s: &mut Scenario, seed: u64, names: &[&str], max: Duration) {
    let mut rng = SplitMix::new(seed, 0x4a49_5454);
    for f in s
        .flows
        .iter_mut()
        .filter(|f| names.contains(&f.name.as_str()))
    {
        let d = max.mul_f64(rng.unit());
        f.start += d;
        f.stop = f.stop.max(f.start + Duration::from_millis(1));
    }
}

/// The flow named `name`.
fn flow<'a>(r: &'a RunResults, name: &str) -> Result<&'a FlowResult, ExpError> {
    r.flow(name)
        .ok_or_else(|| ExpError::Input(format!("{}: no flow named {name:?}", r.scenario)))
}

/// A sized transfer's throughput, bit/s: its bytes over the time from its start to its
/// completion (or to its stop if it did not complete).
fn transfer_bps(f: &FlowResult) -> f64 {
    let end = f.counters.get("completed_s").copied().unwrap_or(f.stop_s);
    f.bytes_delivered as f64 * 8.0 / (end - f.start_s).max(1e-9)
}

/// Cumulative bytes delivered (kB) at each sample time: the sequence trace of a flow.
fn sequence_trace(r: &RunResults, f: &FlowResult) -> Vec<(f64, f64)> {
    let mut acc = 0.0;
    let mut pts = vec![(0.0, 0.0)];
    for (t, bps) in r.sample_times_s.iter().zip(&f.goodput_series_bps) {
        acc += bps * r.sample_period_s / 8.0;
        pts.push((*t, acc / 1e3));
    }
    pts
}

/// kbit/s with no decimals.
fn kbps(bps: f64) -> String {
    format!("{:.0}", bps / 1e3)
}

#[cfg(test)]
mod tests;
