//! adaptnet-experiments: the papers' experiments as runnable, reportable units, and the
//! report formats (tables, CSV, SVG) every command shares.
//!
//! An [`Experiment`] runs simulations and returns a [`Report`]: text and tables for the
//! terminal (each paper figure or table beside ours), and files (CSV, JSON, SVG) for the
//! output directory. `adaptnet exp <name>` runs one; `adaptnet exp list` lists them.

#![deny(missing_docs)]

pub mod adtcp;
pub mod bench;
pub mod cm;
pub mod env;
pub mod nai;
pub mod report;
pub mod rng;
pub mod scenario_run;
pub mod tpba;

use report::OutputFile;
use report::table::Table;
use std::path::PathBuf;
use thiserror::Error;

/// Why an experiment failed to run.
#[derive(Debug, Error)]
pub enum ExpError {
    /// A scenario file was invalid or a world could not be built.
    #[error(transparent)]
    Scenario(#[from] adaptnet_sim::scenario::ScenarioError),
    /// A report could not be rendered.
    #[error(transparent)]
    Report(#[from] report::ReportError),
    /// An input the experiment needs is missing or wrong.
    #[error("{0}")]
    Input(String),
}

/// How to run an experiment.
#[derive(Clone, Debug)]
pub struct ExpOptions {
    /// The `experiments/` directory (scenario files, traces).
    pub experiments_dir: PathBuf,
    /// Seeds to run (experiments that average over trials use all of them).
    pub seeds: Vec<u64>,
    /// Shorter runs for smoke tests; results are not comparable with the paper.
    pub quick: bool,
}

/// A block of a report.
#[derive(Clone, Debug)]
pub enum Block {
    /// A paragraph.
    Text(String),
    /// A titled table.
    Table(String, Table),
}

/// What an experiment produced.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Terminal output, in order.
    pub blocks: Vec<Block>,
    /// Files for the output directory.
    pub files: Vec<OutputFile>,
}

impl Report {
    /// Adds a paragraph.
    pub fn text(&mut self, s: impl Into<String>) {
        self.blocks.push(Block::Text(s.into()));
    }

    /// Adds a titled table (also written as `<file_stem>.csv`).
    pub fn table(&mut self, title: impl Into<String>, file_stem: &str, t: Table) {
        self.files
            .push((format!("{file_stem}.csv"), t.to_csv().into_bytes()));
        self.blocks.push(Block::Table(title.into(), t));
    }

    /// Adds an output file.
    pub fn file(&mut self, name: impl Into<String>, bytes: Vec<u8>) {
        self.files.push((name.into(), bytes));
    }

    /// The terminal rendering.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for b in &self.blocks {
            match b {
                Block::Text(s) => {
                    out.push_str(s);
                    out.push_str("\n\n");
                }
                Block::Table(title, t) => {
                    out.push_str(title);
                    out.push('\n');
                    out.push_str(&t.render());
                    out.push('\n');
                }
            }
        }
        out
    }
}

/// A reproducible experiment.
pub trait Experiment {
    /// Short name used on the command line (`adaptnet exp <name>`).
    fn name(&self) -> &'static str;
    /// One line: what it reproduces.
    fn summary(&self) -> &'static str;
    /// Runs it; `progress` receives the completed fraction in [0, 1].
    fn run(&self, opts: &ExpOptions, progress: &mut dyn FnMut(f64)) -> Result<Report, ExpError>;
}

/// Every experiment, in the order `adaptnet exp list` shows them.
pub fn all() -> Vec<Box<dyn Experiment>> {
    let mut v: Vec<Box<dyn Experiment>> = vec![
        Box::new(nai::bulk::Bulk),
        Box::new(nai::table1::Table1),
        Box::new(nai::table2::Table2),
        Box::new(nai::estimators::Estimators),
        Box::new(nai::endpoint::EndpointExp),
    ];
    v.extend(cm::all());
    v.extend(tpba::all());
    v.extend(env::all());
    v.extend(adtcp::all());
    v
}

/// The experiment with this name.
pub fn find(name: &str) -> Option<Box<dyn Experiment>> {
    all().into_iter().find(|e| e.name() == name)
}
