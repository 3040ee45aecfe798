//! Benchmarks: speed and scale measured in release builds and reported as ratios against a
//! baseline taken in the same run (never as timed assertions in tests).

mod cm;
mod env;
mod nai;
mod sim;

use crate::{ExpError, Report};
use std::path::PathBuf;

/// How to run a benchmark.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Repetitions; the median is reported.
    pub repeat: u32,
    /// A scenario file to use instead of the benchmark's reference, where that makes sense.
    pub scenario: Option<PathBuf>,
}

/// A benchmark.
pub trait Benchmark {
    /// Name used on the command line (`adaptnet bench <name>`).
    fn name(&self) -> &'static str;
    /// One line: what it measures and the target.
    fn summary(&self) -> &'static str;
    /// Runs it.
    fn run(&self, opts: &BenchOptions) -> Result<Report, ExpError>;
}

/// Every benchmark.
pub fn all() -> Vec<Box<dyn Benchmark>> {
    vec![
        Box::new(sim::SimSpeed),
        Box::new(cm::CmGrants),
        Box::new(nai::NaiSpeed),
        Box::new(env::EnvSpeed),
    ]
}

/// The benchmark with this name.
pub fn find(name: &str) -> Option<Box<dyn Benchmark>> {
    all().into_iter().find(|b| b.name() == name)
}

/// The median of `runs` by the key `f` (upper median for even counts); `None` if empty.
pub fn median_by<T: Clone>(runs: &[T], f: impl Fn(&T) -> f64) -> Option<T> {
    let mut v: Vec<T> = runs.to_vec();
    v.sort_by(|a, b| f(a).total_cmp(&f(b)));
    v.get(v.len() / 2).cloned()
}
