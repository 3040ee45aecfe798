//! Simulator speed: the reference scenario's events per second and speed-up over real time.

use super::{BenchOptions, Benchmark, median_by};
use crate::report::table::Table;
use crate::{ExpError, Report};
use adaptnet_sim::scenario::Scenario;
use std::path::Path;
use std::time::Instant;

/// The embedded reference scenario.
const REFERENCE: &str = include_str!("../../../../experiments/bench/reference.toml");

/// `adaptnet bench sim`.
pub struct SimSpeed;

impl Benchmark for SimSpeed {
    fn name(&self) -> &'static str {
        "sim"
    }

    fn summary(&self) -> &'static str {
        "simulator speed: 10 NewReno flows, 10 Mbit/s, 50 ms RTT, 300 s (target >= 1000x real time)"
    }

    fn run(&self, opts: &BenchOptions) -> Result<Report, ExpError> {
        let s = match &opts.scenario {
            Some(p) => Scenario::load(p)?,
            None => Scenario::parse(
                REFERENCE,
                "<embedded:bench/reference.toml>",
                Path::new("."),
                "bench-reference",
            )?,
        };
        let sim_s = s.duration.as_secs_f64();
        let mut runs = Vec::new();
        for _ in 0..opts.repeat.max(1) {
            let start = Instant::now();
            let out = s.run(s.seed, &mut |_| {})?;
            runs.push((start.elapsed().as_secs_f64(), out.results.events));
        }
        let Some((wall, events)) = median_by(&runs, |r| r.0) else {
            return Err(ExpError::Input("no runs".into()));
        };
        let mut t = Table::new([
            "scenario",
            "simulated s",
            "wall s",
            "events",
            "events/s",
            "speed-up vs real time",
        ]);
        t.row([
            s.name.clone(),
            format!("{sim_s:.0}"),
            format!("{wall:.3}"),
            events.to_string(),
            format!("{:.2e}", events as f64 / wall),
            format!("{:.0}x", sim_s / wall),
        ]);
        let mut report = Report::default();
        report.table(
            format!("median of {} runs, one core", runs.len()),
            "bench-sim",
            t,
        );
        Ok(report)
    }
}
