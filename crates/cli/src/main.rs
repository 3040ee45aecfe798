//! `adaptnet`: run simulated scenarios and experiments, validate the simulator, benchmark it.

mod commands;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// adaptnet: adaptive transport for variable networks.
#[derive(Parser, Debug)]
#[command(name = "adaptnet", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the built-in demo scenario (no files needed) and write its report.
    Demo {
        /// Seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Output directory.
        #[arg(long, default_value = "out/demo")]
        out: PathBuf,
    },
    /// Run a scenario file: summary table, CSV/JSON, SVG goodput plot, requested pcaps.
    Sim {
        /// The scenario (TOML).
        scenario: PathBuf,
        /// Seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Output directory (default: out/SCENARIO-NAME).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run the simulator's validation checks (experiments/validation) and print a table.
    Validate {
        /// The experiments directory.
        #[arg(long)]
        experiments: Option<PathBuf>,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Run a paper experiment (`adaptnet exp list` shows them).
    Exp {
        /// Experiment name, or `list`.
        name: String,
        /// Seeds, comma-separated (default: the experiment's own, usually 1..=5).
        #[arg(long, value_delimiter = ',')]
        seeds: Vec<u64>,
        /// Shorter runs, for a quick look (not comparable with the paper).
        #[arg(long)]
        quick: bool,
        /// Output directory (default: out/NAME).
        #[arg(long)]
        out: Option<PathBuf>,
        /// The experiments directory.
        #[arg(long)]
        experiments: Option<PathBuf>,
    },
    /// Run a benchmark (`adaptnet bench list` shows them; default `sim`: the simulator on
    /// 10 NewReno flows, 10 Mbit/s, 50 ms RTT, 300 s).
    Bench {
        /// Benchmark name, or `list`.
        #[arg(default_value = "sim")]
        name: String,
        /// Runs to make (the median is reported).
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Another scenario for the `sim` benchmark instead of the reference.
        #[arg(long)]
        scenario: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo { seed, out } => commands::sim::demo(seed, &out),
        Command::Sim {
            scenario,
            seed,
            out,
        } => commands::sim::run_file(&scenario, seed, out.as_deref()),
        Command::Validate { experiments, seed } => {
            commands::validate::run(experiments.as_deref(), seed)
        }
        Command::Exp {
            name,
            seeds,
            quick,
            out,
            experiments,
        } => commands::exp::run(&name, seeds, quick, out.as_deref(), experiments.as_deref()),
        Command::Bench {
            name,
            repeat,
            scenario,
        } => commands::bench::run(&name, repeat, scenario.as_deref()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
