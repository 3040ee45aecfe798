//! A headline as a mean with its spread: the mean over seeds and the half-width of its 95 %
//! confidence interval (Student's t, two-sided), so a claim of agreement with a paper can be
//! checked against the interval rather than against one seed set.

use serde::Serialize;
use std::fmt;

/// The mean of a set of per-seed results and its 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    /// The sample mean.
    pub mean: f64,
    /// Half-width of the two-sided 95 % interval around `mean` (0 with fewer than two
    /// samples: one run has no measured spread).
    pub half_width_95: f64,
    /// The sample standard deviation (n − 1 in the denominator; 0 below two samples).
    pub std_dev: f64,
    /// How many samples.
    pub n: usize,
}

impl Spread {
    /// The spread of `samples` (non-finite samples are ignored; an empty set has mean 0).
    pub fn of(samples: &[f64]) -> Spread {
        let xs: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        let n = xs.len();
        let mean = super::mean(&xs);
        if n < 2 {
            return Spread {
                mean,
                half_width_95: 0.0,
                std_dev: 0.0,
                n,
            };
        }
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let std_dev = var.sqrt();
        Spread {
            mean,
            half_width_95: t_975(n - 1) * std_dev / (n as f64).sqrt(),
            std_dev,
            n,
        }
    }

    /// The interval's lower end.
    pub fn low(&self) -> f64 {
        self.mean - self.half_width_95
    }

    /// The interval's upper end.
    pub fn high(&self) -> f64 {
        self.mean + self.half_width_95
    }

    /// Whether `value` lies inside the 95 % interval (the test a claim of agreement with a
    /// paper's number must pass).
    pub fn contains(&self, value: f64) -> bool {
        value >= self.low() && value <= self.high()
    }

    /// `mean ± half-width` with `decimals` digits after the point.
    pub fn fmt_with(&self, decimals: usize) -> String {
        format!(
            "{:.*} ± {:.*}",
            decimals, self.mean, decimals, self.half_width_95
        )
    }
}

impl fmt::Display for Spread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let decimals = f.precision().unwrap_or(2);
        f.write_str(&self.fmt_with(decimals))
    }
}

/// The 97.5 % quantile of Student's t with `dof` degrees of freedom (two-sided 95 %).
/// Tabulated to 30 degrees of freedom; beyond, the normal quantile with the first
/// Cornish–Fisher correction (error below 0.002 there).
fn t_975(dof: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match dof {
        0 => f64::INFINITY,
        d if d <= TABLE.len() => TABLE[d - 1],
        d => {
            let z: f64 = 1.959_964;
            z + (z.powi(3) + z) / (4.0 * d as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_spread_of_known_samples() {
        // Five samples with mean 3 and sample standard deviation sqrt(2.5).
        let s = Spread::of(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(s.n, 5);
        assert!((s.mean - 3.0).abs() < 1e-12);
        assert!((s.std_dev - 2.5f64.sqrt()).abs() < 1e-12);
        // t(4) = 2.776: half-width = 2.776 * 1.5811 / 2.2361 = 1.963.
        assert!((s.half_width_95 - 1.963).abs() < 1e-3, "{s:?}");
        assert!(s.contains(1.1) && !s.contains(0.9));
    }

    #[test]
    fn test_spread_single_sample_has_no_interval() {
        let s = Spread::of(&[7.0]);
        assert_eq!((s.mean, s.half_width_95, s.n), (7.0, 0.0, 1));
    }

    #[test]
    fn test_spread_ignores_non_finite() {
        let s = Spread::of(&[1.0, f64::NAN, 3.0]);
        assert_eq!(s.n, 2);
        assert!((s.mean - 2.0).abs() < 1e-12);
    }

    #[test]
    fn test_t_quantile_large_dof_approaches_normal() {
        assert!((t_975(30) - 2.042).abs() < 1e-9);
        assert!((t_975(40) - 2.021).abs() < 2e-3);
        assert!((t_975(1000) - 1.962).abs() < 1e-3);
    }

    #[test]
    fn test_display_uses_precision() {
        let s = Spread::of(&[1.0, 3.0]);
        assert_eq!(format!("{s:.1}"), format!("2.0 ± {:.1}", s.half_width_95));
    }
}
