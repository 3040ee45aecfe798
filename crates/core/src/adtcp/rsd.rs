//! Relative sample density (RSD): is a sample high or low *relative to its own history*?
//! papers/004 §3 "sample value classification".
//!
//! An absolute threshold cannot work "since network conditions change over time"; RSD keeps
//! a histogram of past samples instead. The value range is divided into `bins` intervals, each
//! with a counter; a new sample increments its interval's counter, and its RSD is the share of
//! the history that lies below it — a value on the empirical CDF. An RSD near 1 says "higher
//! than almost everything seen", near 0 "lower than almost everything".
//!
//! Forgetting (§3): "subtract proportionally from every interval counter, so the original
//! sample distribution is maintained and the total number of samples is kept constant". Once
//! `history` samples have accumulated, every new sample multiplies all counters by
//! `history / (history + 1)`: old samples lose weight exponentially, new ones count fully.
//!
//! Memory is one counter per bin; each sample costs one pass over the bins.

use thiserror::Error;

/// Most bins a histogram may have (a bound on memory and on the work per sample).
pub const MAX_BINS: usize = 4096;

/// How sample values map onto bins. Values outside the range fall into the first or last bin.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Scale {
    /// Bins of equal width over `[lo, hi)`.
    Linear {
        /// Lower end of the range.
        lo: f64,
        /// Upper end of the range.
        hi: f64,
    },
    /// Bins of equal width in `log2(value)` over `[lo, hi)` (both positive): equal relative
    /// resolution over many orders of magnitude, for rates whose scale is not known in advance.
    /// Values at or below `lo` (including zero) fall into the first bin.
    Log2 {
        /// Lower end of the range (> 0).
        lo: f64,
        /// Upper end of the range.
        hi: f64,
    },
}

/// The parameters of one RSD classifier.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct RsdConfig {
    /// The value range and how it is divided.
    pub scale: Scale,
    /// Number of bins (the paper's N), at most [`MAX_BINS`].
    pub bins: usize,
    /// Total weight the history is held at by forgetting (the paper's M), in samples.
    ///
    /// Default 100: each new sample scales the history by 100/101, so a sample's weight halves
    /// after about 70 newer samples — at the default half-RTT sampling interval, 35 round
    /// trips. That is long enough for one history to hold both congested and quiet periods
    /// (a high IDD is high *relative to quiet times*, so the quiet times must still be
    /// remembered while a congestion episode lasts), and short enough to re-learn a new path's
    /// delay and rate within seconds after a route change.
    pub history: f64,
    /// A sample whose RSD exceeds this is high. Default 0.7 (the top 30 %): with the paper's
    /// argument that IDD and STT noise is largely independent, a false congestion alarm
    /// needs both to err, about 0.3 × 0.3 = 9 % of quiet intervals before any correlation,
    /// while a real congestion episode (which pushes both metrics to their extremes) still
    /// passes both tests. The paper's exact percentages were lost from its text.
    pub high_above: f64,
    /// A sample whose RSD is below this is low. Default 0.3 (the bottom 30 %), symmetric with
    /// `high_above`.
    pub low_below: f64,
    /// Samples needed before any sample is judged; until then every level is
    /// [`Level::Unknown`]. Default 10: with fewer, the empirical CDF moves in steps of more
    /// than 10 %, too coarse to tell the top 30 % from the middle.
    pub min_samples: u32,
}

impl RsdConfig {
    /// The defaults above over the given scale and number of bins.
    pub fn new(scale: Scale, bins: usize) -> RsdConfig {
        RsdConfig {
            scale,
            bins,
            history: 100.0,
            high_above: 0.7,
            low_below: 0.3,
            min_samples: 10,
        }
    }
}

/// Why an [`RsdConfig`] cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Error)]
pub enum RsdConfigError {
    /// The range is empty, not finite, or (for [`Scale::Log2`]) not positive.
    #[error("rsd range must be finite with lo < hi (and lo > 0 for a log2 scale)")]
    BadRange,
    /// `bins` is zero or above [`MAX_BINS`].
    #[error("rsd bins must be between 1 and {MAX_BINS}, got {0}")]
    BadBins(usize),
    /// `history` is below one sample or not finite.
    #[error("rsd history must be a finite number of samples >= 1")]
    BadHistory,
    /// The thresholds are not `0 <= low_below <= high_above <= 1`.
    #[error("rsd thresholds must satisfy 0 <= low_below <= high_above <= 1")]
    BadThresholds,
}

/// A sample's level relative to its history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Level {
    /// In the low tail (RSD below `low_below`).
    Low,
    /// Neither high nor low.
    Medium,
    /// In the high tail (RSD above `high_above`).
    High,
    /// Not judged: too little history, or no sample.
    Unknown,
}

/// One classified sample.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Classified {
    /// The sample's relative sample density, in `[0, 1]`.
    pub rsd: f64,
    /// Its level.
    pub level: Level,
}

/// An RSD classifier: a forgetting histogram of one metric's samples.
#[derive(Clone, Debug)]
pub struct Rsd {
    config: RsdConfig,
    counts: Vec<f64>,
    total: f64,
    samples: u64,
}

impl Rsd {
    /// An empty history.
    pub fn new(config: RsdConfig) -> Result<Rsd, RsdConfigError> {
        let (lo, hi, log) = match config.scale {
            Scale::Linear { lo, hi } => (lo, hi, false),
            Scale::Log2 { lo, hi } => (lo, hi, true),
        };
        if !(lo.is_finite() && hi.is_finite() && lo < hi) || (log && lo <= 0.0) {
            return Err(RsdConfigError::BadRange);
        }
        if config.bins == 0 || config.bins > MAX_BINS {
            return Err(RsdConfigError::BadBins(config.bins));
        }
        if !(config.history.is_finite() && config.history >= 1.0) {
            return Err(RsdConfigError::BadHistory);
        }
        if !(0.0 <= config.low_below
            && config.low_below <= config.high_above
            && config.high_above <= 1.0)
        {
            return Err(RsdConfigError::BadThresholds);
        }
        Ok(Rsd {
            config,
            counts: vec![0.0; config.bins],
            total: 0.0,
            samples: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RsdConfig {
        &self.config
    }

    /// The bin a value falls into (out-of-range values into the end bins).
    pub fn bin(&self, value: f64) -> usize {
        let (pos, lo, hi) = match self.config.scale {
            Scale::Linear { lo, hi } => (value, lo, hi),
            Scale::Log2 { lo, hi } => {
                if value <= lo {
                    return 0;
                }
                (value.log2(), lo.log2(), hi.log2())
            }
        };
        let last = self.config.bins.saturating_sub(1);
        let frac = (pos - lo) / (hi - lo);
        if frac.is_nan() || frac <= 0.0 {
            return 0;
        }
        let idx = crate::convert::f64_u64_sat((frac * self.config.bins as f64).floor());
        usize::try_from(idx).map_or(last, |i| i.min(last))
    }

    /// Records a sample and classifies it against the history that now includes it (the
    /// paper's order: increment, compute RSD, then forget).
    ///
    /// The RSD counts the history strictly below the sample's bin plus *half* of its own bin,
    /// the mid-point of the CDF step. With the whole step (everything at or below), a metric
    /// that never varies would have RSD 1 and read as "always high"; with the mid-point it
    /// reads 0.5, neither high nor low, which is what a constant metric says about the network.
    /// A NaN sample is ignored ([`Level::Unknown`]).
    pub fn classify(&mut self, value: f64) -> Classified {
        if value.is_nan() {
            return Classified {
                rsd: 0.5,
                level: Level::Unknown,
            };
        }
        let k = self.bin(value);
        if let Some(c) = self.counts.get_mut(k) {
            *c += 1.0;
        }
        self.total += 1.0;
        self.samples = self.samples.saturating_add(1);
        let below: f64 = self.counts.iter().take(k).sum();
        let own = self.counts.get(k).copied().unwrap_or(0.0);
        let rsd = ((below + own / 2.0) / self.total).clamp(0.0, 1.0);
        self.forget();
        let level = if self.samples < u64::from(self.config.min_samples) {
            Level::Unknown
        } else if rsd > self.config.high_above {
            Level::High
        } else if rsd < self.config.low_below {
            Level::Low
        } else {
            Level::Medium
        };
        Classified { rsd, level }
    }

    /// Proportional forgetting: scale every counter so the total is `history` again.
    fn forget(&mut self) {
        if self.total > self.config.history {
            let keep = self.config.history / self.total;
            for c in &mut self.counts {
                *c *= keep;
            }
            self.total = self.config.history;
        }
    }

    /// The total weight of the history (at most `history`).
    pub fn total(&self) -> f64 {
        self.total
    }

    /// Samples recorded since creation.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The weight held by each bin.
    pub fn counts(&self) -> &[f64] {
        &self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn linear(bins: usize, history: f64) -> Rsd {
        Rsd::new(RsdConfig {
            history,
            min_samples: 1,
            ..RsdConfig::new(Scale::Linear { lo: 0.0, hi: 10.0 }, bins)
        })
        .expect("valid config")
    }

    #[test]
    fn test_bins_linear_and_log_with_clamping() {
        let r = linear(10, 100.0);
        assert_eq!(r.bin(0.0), 0);
        assert_eq!(r.bin(3.5), 3);
        assert_eq!(r.bin(9.99), 9);
        assert_eq!(r.bin(10.0), 9, "the upper end belongs to the last bin");
        assert_eq!(r.bin(-5.0), 0);
        assert_eq!(r.bin(1e300), 9);
        assert_eq!(r.bin(f64::INFINITY), 9);
        let log = Rsd::new(RsdConfig::new(
            Scale::Log2 {
                lo: 1.0,
                hi: 1024.0,
            },
            10,
        ))
        .expect("valid config");
        assert_eq!(log.bin(0.0), 0);
        assert_eq!(log.bin(1.5), 0);
        assert_eq!(log.bin(2.0), 1);
        assert_eq!(log.bin(600.0), 9);
        assert_eq!(log.bin(1e9), 9);
    }

    #[test]
    fn test_classification_against_history() {
        let mut r = linear(10, 1000.0);
        // A history spread evenly over 0..10: one sample per bin, ten times.
        for _ in 0..10 {
            for v in 0..10 {
                r.classify(f64::from(v) + 0.5);
            }
        }
        let high = r.classify(9.5);
        assert_eq!(high.level, Level::High);
        // 90 samples below, 11 in its own bin (half counted), out of 101.
        assert!((high.rsd - (90.0 + 5.5) / 101.0).abs() < 1e-12, "{high:?}");
        assert_eq!(r.classify(0.5).level, Level::Low);
        assert_eq!(r.classify(5.0).level, Level::Medium);
    }

    #[test]
    fn test_constant_metric_is_neither_high_nor_low() {
        let mut r = linear(10, 100.0);
        for _ in 0..50 {
            let c = r.classify(4.2);
            assert_eq!(c.rsd, 0.5);
            assert_eq!(c.level, Level::Medium);
        }
    }

    #[test]
    fn test_unknown_until_min_samples() {
        let mut r =
            Rsd::new(RsdConfig::new(Scale::Linear { lo: 0.0, hi: 1.0 }, 4)).expect("valid config");
        for _ in 0..9 {
            assert_eq!(r.classify(0.9).level, Level::Unknown);
        }
        assert_eq!(
            r.classify(0.9).level,
            Level::Medium,
            "tenth sample is judged"
        );
        assert_eq!(r.classify(f64::NAN).level, Level::Unknown);
        assert_eq!(r.samples(), 10, "NaN is not recorded");
    }

    #[test]
    fn test_forgetting_keeps_total_and_proportions() {
        let mut r = linear(10, 4.0);
        r.classify(1.0);
        r.classify(1.0);
        r.classify(8.0);
        r.classify(8.0);
        assert_eq!(r.total(), 4.0);
        assert_eq!(r.counts()[1], 2.0);
        // A fifth sample: counts become (2, 2, 1) scaled by 4/5.
        r.classify(5.0);
        assert!((r.total() - 4.0).abs() < 1e-12);
        assert!((r.counts()[1] - 1.6).abs() < 1e-12);
        assert!((r.counts()[8] - 1.6).abs() < 1e-12);
        assert!((r.counts()[5] - 0.8).abs() < 1e-12);
    }

    #[test]
    fn test_forgetting_lets_a_new_regime_become_normal() {
        let mut r = linear(10, 20.0);
        for _ in 0..100 {
            r.classify(1.0);
        }
        // The level shifts up: at first the new values are high ...
        assert_eq!(r.classify(7.0).level, Level::High);
        // ... but the old ones fade, and after a while the new level is the norm.
        for _ in 0..300 {
            r.classify(7.0);
        }
        assert_eq!(r.classify(7.0).level, Level::Medium);
        assert!(
            r.counts()[1] < 1e-3,
            "old samples forgotten: {}",
            r.counts()[1]
        );
        assert_eq!(r.classify(1.0).level, Level::Low);
    }

    #[test]
    fn test_bad_configs_are_rejected() {
        let ok = RsdConfig::new(Scale::Linear { lo: 0.0, hi: 1.0 }, 10);
        assert!(Rsd::new(ok).is_ok());
        for (cfg, err) in [
            (
                RsdConfig {
                    scale: Scale::Linear { lo: 1.0, hi: 1.0 },
                    ..ok
                },
                RsdConfigError::BadRange,
            ),
            (
                RsdConfig {
                    scale: Scale::Log2 { lo: 0.0, hi: 1.0 },
                    ..ok
                },
                RsdConfigError::BadRange,
            ),
            (RsdConfig { bins: 0, ..ok }, RsdConfigError::BadBins(0)),
            (
                RsdConfig {
                    bins: MAX_BINS + 1,
                    ..ok
                },
                RsdConfigError::BadBins(MAX_BINS + 1),
            ),
            (RsdConfig { history: 0.5, ..ok }, RsdConfigError::BadHistory),
            (
                RsdConfig {
                    low_below: 0.8,
                    high_above: 0.2,
                    ..ok
                },
                RsdConfigError::BadThresholds,
            ),
        ] {
            assert_eq!(Rsd::new(cfg).map(|_| ()), Err(err));
        }
    }

    proptest! {
        #[test]
        fn rsd_is_a_probability_and_total_is_bounded(
            values in proptest::collection::vec(any::<f64>(), 1..300),
            history in 1.0f64..200.0,
        ) {
            let mut r = linear(16, history);
            for v in values {
                let c = r.classify(v);
                prop_assert!((0.0..=1.0).contains(&c.rsd));
                prop_assert!(r.total() <= history + 1e-9);
                let sum: f64 = r.counts().iter().sum();
                prop_assert!((sum - r.total()).abs() < 1e-6 * history.max(1.0));
            }
        }
    }
}
