//! A stand-in for 802.11 contention on the ad hoc hops (issue 21): the per-packet service time
//! of a shared wireless medium varies (backoff, neighbours' transmissions, retries), which our
//! fixed-rate links do not show. [`ContentionParams::bandwidth`] turns a hop's rate into a
//! piecewise-constant one that is redrawn every `slot_ms`, uniform in
//! `rate × [1 − spread, 1 + spread]` (mean unchanged), from the path's seed. Off by default
//! ([`super::ManetConfig::contention`]); adtcp-accuracy reports what it changes.

use crate::link::Bandwidth;
use crate::trace::PiecewiseTrace;
use rand::RngExt;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// Most rate steps one hop direction gets (a bound on memory: 16 bytes each).
pub const MAX_STEPS: usize = 1 << 20;

/// Service-rate variation of every hop. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentionParams {
    /// How long one drawn rate holds, ms (a few packet times).
    pub slot_ms: f64,
    /// Relative half-width of the uniform rate draw, in `[0, 1)`.
    pub spread: f64,
}

impl ContentionParams {
    /// The varying bandwidth of a hop of `rate_bits_per_s` over `duration`, from `seed`.
    /// Slots are lengthened if the run would need more than [`MAX_STEPS`].
    pub fn bandwidth(&self, rate_bits_per_s: f64, duration: Duration, seed: u64) -> Bandwidth {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let run_s = duration.as_secs_f64().max(1e-3);
        let slot_s = (self.slot_ms / 1e3).max(run_s / MAX_STEPS as f64).max(1e-6);
        let base = rate_bits_per_s / 8.0;
        let spread = self.spread.clamp(0.0, 0.99);
        let mut steps = Vec::new();
        let mut t = 0.0;
        while t < run_s && steps.len() < MAX_STEPS {
            let u: f64 = rng.random();
            steps.push((t, base * (1.0 - spread + 2.0 * spread * u)));
            t += slot_s;
        }
        Bandwidth::Piecewise(PiecewiseTrace { steps })
    }
}
