//! `adaptnet validate`: the simulator's validation checks as a table.

use adaptnet_experiments::report::table::Table;
use adaptnet_sim::validation;
use anyhow::Result;
use std::path::Path;
use std::process::ExitCode;

/// Runs every check; fails (exit code 1) if any check fails.
pub fn run(experiments: Option<&Path>, seed: u64) -> Result<ExitCode> {
    let dir = super::experiments_dir(experiments);
    let checks = validation::all(&dir, seed)?;
    let mut t = Table::text(["check", "expected", "measured", "result"]);
    for c in &checks {
        t.row([
            c.name.clone(),
            c.expected.clone(),
            c.measured.clone(),
            if c.pass { "pass" } else { "FAIL" }.to_string(),
        ]);
    }
    print!("{}", t.render());
    let failed = checks.iter().filter(|c| !c.pass).count();
    println!("\n{} checks, {failed} failed (seed {seed})", checks.len());
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
