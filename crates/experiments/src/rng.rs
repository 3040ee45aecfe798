//! The one seeded generator of the experiments (splitmix64) for workloads, Web-like
//! backgrounds and synthetic traces: deterministic, dependency-free, and good enough for
//! drawing sizes, arrival times, timers and trace noise.

/// splitmix64.
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator from `seed` and a `stream` tag (different tags give unrelated sequences).
    pub fn new(seed: u64, stream: u64) -> SplitMix {
        SplitMix(adaptnet_sim::world::mix_seed(seed, stream))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        // The splitmix64 output function is the world's seed mixer with a zero tag.
        adaptnet_sim::world::mix_seed(self.0, 0)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform integer in [lo, hi] (inclusive).
    pub fn int(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Exponential with this mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }

    /// Pareto with this shape and scale (minimum).
    pub fn pareto(&mut self, shape: f64, scale: f64) -> f64 {
        scale / (1.0 - self.unit()).powf(1.0 / shape)
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let mut a = SplitMix::new(3, 1);
        let mut b = SplitMix::new(3, 1);
        let mut c = SplitMix::new(3, 2);
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        assert_eq!(xs, (0..4).map(|_| b.next_u64()).collect::<Vec<_>>());
        assert_ne!(xs, (0..4).map(|_| c.next_u64()).collect::<Vec<_>>());
        let u = a.unit();
        assert!((0.0..1.0).contains(&u));
        assert!((5..=7).contains(&a.int(5, 7)));
    }
}
