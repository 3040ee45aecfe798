//! `adaptnet bench`: speed and scale benchmarks.

use adaptnet_experiments::bench::{self, BenchOptions};
use adaptnet_experiments::report::table::Table;
use anyhow::{Result, bail};
use std::path::Path;
use std::process::ExitCode;

/// Runs benchmark `name` (or lists them for `list`).
pub fn run(name: &str, repeat: u32, scenario: Option<&Path>) -> Result<ExitCode> {
    if name == "loopback" {
        // Real sockets: lives here, beside the runtime, not with the simulator benchmarks.
        let _ = repeat; // one pass: each transport moves 256 MB
        return super::loopback_bench::run(256);
    }
    if name == "list" {
        let mut t = Table::text(["benchmark", "measures"]);
        for b in bench::all() {
            t.row([b.name(), b.summary()]);
        }
        t.row([
            "loopback",
            "bulk throughput over loopback UDP/TCP: ATP, NAI-TCP, kernel TCP (Gbit/s, CPU s/GB; \
             256 MB each)",
        ]);
        print!("{}", t.render());
        return Ok(ExitCode::SUCCESS);
    }
    let Some(b) = bench::find(name) else {
        let known: Vec<&str> = bench::all().iter().map(|b| b.name()).collect();
        bail!("no benchmark named {name:?}; known: {}", known.join(", "));
    };
    eprintln!("{}", b.summary());
    let report = b.run(&BenchOptions {
        repeat,
        scenario: scenario.map(Path::to_path_buf),
    })?;
    print!("{}", report.render());
    Ok(ExitCode::SUCCESS)
}
