//! Parameter files of the NAI/ATP experiments (`experiments/nai/*.params`, TOML syntax), as plain serde
//! structs. Units are in the names; "KB" is 1024 bytes throughout, for sizes and rates alike.

use crate::{ExpError, ExpOptions};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// Bytes in the paper's "KB".
pub const KB: f64 = 1024.0;

/// The emulated wireless hop (§5.1): the sender's interface is shaped by a bandwidth trace.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestbedParams {
    /// One-way propagation delay in each direction.
    pub delay_ms: f64,
    /// The sender's interface queue (drop-tail), in packets: FreeBSD's 50 (§4.2).
    pub queue_packets: u32,
    /// Capacity of the unshaped receiver → sender direction.
    pub reverse_kbytes_per_s: f64,
    /// How often the oracle reads the true bandwidth (and the window it averages over).
    pub oracle_period_s: f64,
    /// Messages carry bytes end to end (contents from the run's seed, every delivery checked
    /// by digest) instead of sizes only. Off by default: the reproductions need sizes only,
    /// which is faster, and carrying bytes changes no decision.
    #[serde(default)]
    pub message_bytes: bool,
}

/// How a bandwidth trace is obtained.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TraceParams {
    /// Piecewise-linear through `points` (`[time_s, KB/s]`; a repeated time is a jump),
    /// sampled at the middle of every `step_s` into a piecewise-constant trace.
    PiecewiseLinear {
        /// Name in reports.
        name: String,
        /// Breakpoints.
        points: Vec<[f64; 2]>,
        /// Resolution of the piecewise-constant trace.
        step_s: f64,
    },
    /// A seeded mean-reverting random walk of the log-rate with outages (see
    /// `traces::random_walk`), written as a piecewise trace or as Mahimahi opportunities.
    RandomWalk(Box<WalkParams>),
    /// A Mahimahi trace file (path relative to the repository root), cut to `duration_s` and
    /// its opportunities scaled by `scale`. Skipped with a note when `optional` and absent.
    MahimahiFile {
        /// Name in reports.
        name: String,
        /// The file, relative to the repository root (the parent of `experiments/`).
        path: String,
        /// Length kept.
        duration_s: f64,
        /// Capacity multiplier (opportunities are thinned or repeated).
        scale: f64,
        /// Skip (with a note) when the file is absent.
        optional: bool,
    },
    /// A constant rate.
    Constant {
        /// Name in reports.
        name: String,
        /// The rate.
        kbytes_per_s: f64,
    },
}

impl TraceParams {
    /// The trace's name.
    pub fn name(&self) -> &str {
        match self {
            TraceParams::PiecewiseLinear { name, .. }
            | TraceParams::MahimahiFile { name, .. }
            | TraceParams::Constant { name, .. } => name,
            TraceParams::RandomWalk(w) => &w.name,
        }
    }
}

/// Parameters of the random-walk trace generator.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkParams {
    /// Name in reports.
    pub name: String,
    /// Generator seed (fixed: the trace is part of the experiment's definition).
    pub seed: u64,
    /// Length.
    pub duration_s: f64,
    /// Interval between rate changes.
    pub step_s: f64,
    /// Long-run median rate the walk reverts to.
    pub median_kbytes_per_s: f64,
    /// Standard deviation of the log-rate innovation per step.
    pub sigma: f64,
    /// Fraction of the distance to the median recovered per step (0..1).
    pub reversion: f64,
    /// Lower clamp of the rate (outages aside).
    pub min_kbytes_per_s: f64,
    /// Upper clamp.
    pub max_kbytes_per_s: f64,
    /// Chance per step that an outage (rate 0) begins.
    pub outage_probability: f64,
    /// Shortest outage.
    pub outage_min_s: f64,
    /// Longest outage.
    pub outage_max_s: f64,
    /// `"piecewise"` or `"mahimahi"`.
    pub format: String,
}

/// One class of a workload: `n` messages every `delay_s` (Table 2's rows).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassParams {
    /// `"high"`, `"medium"` or `"low"`.
    pub priority: String,
    /// Message size.
    pub size_bytes: u64,
    /// Callback timer.
    pub timer_s: f64,
    /// Inter-arrival spacing.
    pub delay_s: f64,
    /// Number of messages.
    pub n: u32,
}

/// Table 2's "random" workload: every `delay_s` a message with uniform priority, size and
/// timer.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RandomParams {
    /// Number of messages.
    pub n: u32,
    /// Inter-arrival spacing.
    pub delay_s: f64,
    /// Smallest size.
    pub size_min_bytes: u64,
    /// Largest size.
    pub size_max_bytes: u64,
    /// Shortest timer.
    pub timer_min_s: f64,
    /// Longest timer.
    pub timer_max_s: f64,
}

/// One workload of Table 2.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadParams {
    /// Name (`uniform`, `prioritised`, …).
    pub name: String,
    /// Priority levels the workload uses (2, or 3 for `random`).
    pub levels: u8,
    /// Fixed classes.
    #[serde(default)]
    pub classes: Vec<ClassParams>,
    /// The random class.
    pub random: Option<RandomParams>,
}

/// Reads and decodes a parameter file under the experiments directory; errors name the file.
pub fn load<T: DeserializeOwned>(experiments_dir: &Path, file: &str) -> Result<T, ExpError> {
    let path = experiments_dir.join(file);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ExpError::Input(format!("cannot read {}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| ExpError::Input(format!("{}: {e}", path.display())))
}

/// Checks that a number is finite and positive, naming the field.
pub fn positive(value: f64, field: &str, file: &str) -> Result<f64, ExpError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(ExpError::Input(format!(
            "{file}: field {field}: must be a finite number > 0, got {value}"
        )))
    }
}

/// What one run of a trace-driven NAI experiment covers: its seeds (the command line's, else
/// the file's), its traces (the first seed and trace only with `--quick`) and the directory
/// trace paths are relative to (the experiments directory's parent). No seed is an error
/// naming `file`.
pub fn run_plan(
    opts: &ExpOptions,
    file_seeds: &[u64],
    file_traces: &[TraceParams],
    file: &str,
) -> Result<(Vec<u64>, Vec<TraceParams>, PathBuf), ExpError> {
    let mut seeds = if opts.seeds.is_empty() {
        file_seeds.to_vec()
    } else {
        opts.seeds.clone()
    };
    let mut traces = file_traces.to_vec();
    if opts.quick {
        seeds.truncate(1);
        traces.truncate(1);
    }
    if seeds.is_empty() {
        return Err(ExpError::Input(format!("{file}: no seeds")));
    }
    let root = opts
        .experiments_dir
        .parent()
        .unwrap_or(&opts.experiments_dir)
        .to_path_buf();
    Ok((seeds, traces, root))
}
