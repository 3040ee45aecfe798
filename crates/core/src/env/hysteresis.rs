//! Hysteresis per parameter (papers/001 §6, "Hysteresis", and §8's "hysteresis thread").
//!
//! > "a sudden transient change in the value does not affect the current state drastically.
//! > … Instead of using the last measured value, a weighted average of last few values can be
//! > used." (§6)
//!
//! Three independent knobs, all off by default (then the table follows §3 exactly):
//!
//! - **smoothing**: the watermarks see an exponentially weighted moving average
//!   `avg = w * value + (1 - w) * avg` with weight `w` in (0, 1] per sample; the first sample
//!   initialises the average. The weight is per parameter (the paper leaves open whether it
//!   should be per application; per parameter keeps one state for all subscribers).
//! - **dead band**: a level changes side only once the value is `dead_band` beyond it (see
//!   [`crate::env::Watermarks::sides`]), so a value wobbling within the band of a level
//!   produces no event.
//! - **minimum dwell**: a change of the levels' sides becomes an event only after it has held
//!   for `min_dwell`; a change that reverts sooner is forgotten, and a further change during
//!   the wait restarts it. The event carries the time the dwell ended.

use super::error::EnvError;
use std::time::Duration;

/// Hysteresis settings of one parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hysteresis {
    /// Weight of a new sample in the moving average, in (0, 1]; `None`: no smoothing.
    pub smoothing_weight: Option<f64>,
    /// Distance beyond a level the value must reach to cross it (same unit as the value).
    pub dead_band: f64,
    /// How long a change must hold before it is an event.
    pub min_dwell: Duration,
}

impl Default for Hysteresis {
    fn default() -> Self {
        Hysteresis::NONE
    }
}

impl Hysteresis {
    /// No hysteresis: every crossing is an event at once (§3 as written).
    pub const NONE: Hysteresis = Hysteresis {
        smoothing_weight: None,
        dead_band: 0.0,
        min_dwell: Duration::ZERO,
    };

    /// Checks the ranges: weight in (0, 1], dead band finite and >= 0.
    pub fn validate(&self) -> Result<(), EnvError> {
        if let Some(w) = self.smoothing_weight
            && !(w > 0.0 && w <= 1.0)
        {
            return Err(EnvError::InvalidHysteresis(
                "smoothing weight must be in (0, 1]",
            ));
        }
        if !(self.dead_band.is_finite() && self.dead_band >= 0.0) {
            return Err(EnvError::InvalidHysteresis(
                "dead band must be finite and >= 0",
            ));
        }
        Ok(())
    }

    /// The smoothed value after sample `raw`, given the previous average.
    pub fn smooth(&self, previous: Option<f64>, raw: f64) -> f64 {
        match (self.smoothing_weight, previous) {
            (Some(w), Some(avg)) => w * raw + (1.0 - w) * avg,
            _ => raw,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_validation_rejects_out_of_range() {
        assert!(Hysteresis::NONE.validate().is_ok());
        let bad_weight = Hysteresis {
            smoothing_weight: Some(0.0),
            ..Hysteresis::NONE
        };
        assert!(bad_weight.validate().is_err());
        let bad_band = Hysteresis {
            dead_band: -1.0,
            ..Hysteresis::NONE
        };
        assert!(bad_band.validate().is_err());
    }

    #[test]
    fn test_smoothing_is_an_ewma() {
        let h = Hysteresis {
            smoothing_weight: Some(0.25),
            ..Hysteresis::NONE
        };
        assert_eq!(h.smooth(None, 8.0), 8.0);
        assert_eq!(h.smooth(Some(8.0), 0.0), 6.0);
        assert_eq!(Hysteresis::NONE.smooth(Some(8.0), 0.0), 0.0);
    }
}
