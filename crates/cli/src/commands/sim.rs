//! `adaptnet sim` and `adaptnet demo`.

use adaptnet_experiments::report;
use adaptnet_sim::scenario::{RunOutput, Scenario};
use anyhow::Result;
use std::path::Path;
use std::process::ExitCode;

/// The embedded demo scenario.
const DEMO: &str = include_str!("../../../../experiments/demo.toml");

/// Runs a scenario with a progress bar.
pub fn run_with_progress(s: &Scenario, seed: u64) -> Result<RunOutput> {
    let mut progress = super::Progress::new(s.duration.as_nanos() / 1_000_000, &s.name);
    let out = s.run(seed, &mut |t| progress.set(t.as_nanos() / 1_000_000))?;
    progress.finish();
    Ok(out)
}

fn run_and_report(s: &Scenario, seed: Option<u64>, out_dir: &Path) -> Result<ExitCode> {
    let seed = seed.unwrap_or(s.seed);
    println!(
        "scenario {} (seed {seed}, {} s simulated)",
        s.name,
        s.duration.as_secs_f64()
    );
    if let Some(d) = &s.description {
        println!("{}\n", d.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    let wall = std::time::Instant::now();
    let out = run_with_progress(s, seed)?;
    let elapsed = wall.elapsed();
    let r = &out.results;
    print!("{}", report::flow_table(r).render());
    println!();
    print!("{}", report::link_table(r).render());
    println!(
        "\nJain's fairness index (non-CBR flows): {:.3}   events: {}   wall time: {:.2} s",
        r.jain_index,
        r.events,
        elapsed.as_secs_f64()
    );
    let mut files = report::run_files(r)?;
    files.extend(
        out.captures
            .iter()
            .map(|(name, bytes)| (format!("{name}.pcap"), bytes.clone())),
    );
    super::write_files(out_dir, &files)?;
    println!(
        "wrote {}/{{results.json, summary.csv, goodput.csv, rtt.csv, queue.csv, goodput.svg{}}}",
        out_dir.display(),
        if out.captures.is_empty() {
            ""
        } else {
            ", *.pcap"
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `adaptnet sim <file>`.
pub fn run_file(path: &Path, seed: Option<u64>, out: Option<&Path>) -> Result<ExitCode> {
    let s = Scenario::load(path)?;
    let default_out = Path::new("out").join(&s.name);
    run_and_report(&s, seed, out.unwrap_or(&default_out))
}

/// `adaptnet demo`: the simulated scenario, then the real thing — an ATP server and client
/// on loopback UDP in this process running a short two-priority workload.
pub fn demo(seed: Option<u64>, out: &Path) -> Result<ExitCode> {
    let s = Scenario::parse(DEMO, "<embedded:demo.toml>", Path::new("."), "demo")?;
    let code = run_and_report(&s, seed, out)?;
    super::real::demo_loopback(out)?;
    Ok(code)
}
