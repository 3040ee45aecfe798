//! `adaptnet bench`: simulator speed on a reference scenario.

use adaptnet_experiments::report::table::Table;
use adaptnet_sim::scenario::Scenario;
use anyhow::Result;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

/// The embedded reference scenario.
const REFERENCE: &str = include_str!("../../../../experiments/bench/reference.toml");

/// Runs the scenario `repeat` times and reports the median run.
pub fn run(repeat: u32, scenario: Option<&Path>) -> Result<ExitCode> {
    let s = match scenario {
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
    for i in 0..repeat.max(1) {
        let start = Instant::now();
        let out = s.run(s.seed, &mut |_| {})?;
        let wall = start.elapsed().as_secs_f64();
        let events = out.results.events;
        eprintln!("run {}: {wall:.3} s wall, {events} events", i + 1);
        runs.push((wall, events));
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (wall, events) = runs[runs.len() / 2];
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
    print!("{}", t.render());
    println!("(median of {} runs; one core)", runs.len());
    Ok(ExitCode::SUCCESS)
}
