//! `adaptnet exp`: run a paper experiment.

use adaptnet_experiments::{ExpOptions, report::table::Table};
use anyhow::{Result, bail};
use std::path::Path;
use std::process::ExitCode;

/// Runs experiment `name` (or lists them for `list`).
pub fn run(
    name: &str,
    seeds: Vec<u64>,
    quick: bool,
    out: Option<&Path>,
    experiments: Option<&Path>,
) -> Result<ExitCode> {
    if name == "list" {
        let mut t = Table::text(["experiment", "reproduces"]);
        for e in adaptnet_experiments::all() {
            t.row([e.name(), e.summary()]);
        }
        print!("{}", t.render());
        return Ok(ExitCode::SUCCESS);
    }
    let Some(exp) = adaptnet_experiments::find(name) else {
        let known: Vec<&str> = adaptnet_experiments::all()
            .iter()
            .map(|e| e.name())
            .collect();
        bail!("no experiment named {name:?}; known: {}", known.join(", "));
    };
    let opts = ExpOptions {
        experiments_dir: super::experiments_dir(experiments),
        seeds,
        quick,
    };
    let mut progress = super::Progress::new(1000, name);
    let report = exp.run(&opts, &mut |f| {
        progress.set((f.clamp(0.0, 1.0) * 1000.0) as u64)
    })?;
    progress.finish();
    print!("{}", report.render());
    let default_out = Path::new("out").join(name);
    let dir = out.unwrap_or(&default_out);
    super::write_files(dir, &report.files)?;
    println!("wrote {} files to {}", report.files.len(), dir.display());
    Ok(ExitCode::SUCCESS)
}
