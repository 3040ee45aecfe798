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
    use super::super::tests::{dev, t};
    use super::super::{EnvEvent, EnvTable, Level, LevelMask, Name, Param, Watermarks};
    use super::*;

    /// A signal-quality parameter with one high level at 20 and one low level at 10.
    fn setup(h: Hysteresis) -> (EnvTable, Name, Param) {
        let (d, p) = (dev("wlan0"), Param::SignalQuality);
        let mut env = EnvTable::new();
        let w = Watermarks::new(vec![Level::low(10.0), Level::high(20.0)]).unwrap();
        env.set_dev_param_wms(&d, &p, w).unwrap();
        env.set_hysteresis(&d, &p, h).unwrap();
        (env, d, p)
    }

    /// Feeds `values` one every 100 ms from `start_ms`, firing timeouts as they come due,
    /// and returns the events.
    fn feed_from(
        env: &mut EnvTable,
        start_ms: u64,
        d: &Name,
        p: &Param,
        values: &[f64],
    ) -> Vec<EnvEvent> {
        let mut out = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let now = t(start_ms + 100 * i as u64);
            while let Some(due) = env.poll_timeout().filter(|&due| due <= now) {
                env.handle_timeout(due);
            }
            env.set_dev_param(now, d, p, *v).unwrap();
            out.extend(std::iter::from_fn(|| env.poll_event()));
        }
        out
    }

    fn feed(env: &mut EnvTable, d: &Name, p: &Param, values: &[f64]) -> Vec<EnvEvent> {
        feed_from(env, 0, d, p, values)
    }

    /// 19, 21, 19, 21, …: flapping around the high level.
    fn flapping(n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| if i % 2 == 0 { 19.0 } else { 21.0 })
            .collect()
    }

    #[test]
    fn test_without_hysteresis_flapping_floods_events() {
        let (mut env, d, p) = setup(Hysteresis::NONE);
        let events = feed(&mut env, &d, &p, &flapping(40));
        assert_eq!(
            events.len(),
            20,
            "every upward crossing of 20 is a violation"
        );
    }

    #[test]
    fn test_dead_band_suppresses_flapping() {
        let h = Hysteresis {
            dead_band: 2.0,
            ..Hysteresis::NONE
        };
        let (mut env, d, p) = setup(h);
        let mut values = flapping(40);
        assert!(feed(&mut env, &d, &p, &values).is_empty());
        // A real move past the band is still one event, at the sample that reaches 22.
        values = vec![19.0, 22.0, 21.0, 19.0, 21.0, 23.0];
        let events = feed_from(&mut env, 10_000, &d, &p, &values);
        assert_eq!(events.len(), 1);
        assert_eq!((events[0].at, events[0].value), (t(10_100), 22.0));
        assert_eq!(events[0].violated, LevelMask::of(&[1]));
    }

    #[test]
    fn test_min_dwell_suppresses_flapping_and_reports_lasting_changes() {
        let h = Hysteresis {
            min_dwell: Duration::from_millis(500),
            ..Hysteresis::NONE
        };
        let (mut env, d, p) = setup(h);
        // Flapping every 100 ms never holds for 500 ms.
        assert!(feed(&mut env, &d, &p, &flapping(40)).is_empty());
        // The last sample (21 at 3.9 s) is pending; going back before the dwell cancels it.
        assert_eq!(env.poll_timeout(), Some(t(3_900 + 500)));
        env.set_dev_param(t(4_000), &d, &p, 19.0).unwrap();
        assert_eq!(env.poll_timeout(), None);
        // A move that lasts: one event, dated at the end of the dwell.
        env.set_dev_param(t(5_000), &d, &p, 25.0).unwrap();
        env.set_dev_param(t(5_200), &d, &p, 26.0).unwrap();
        assert_eq!(env.poll_timeout(), Some(t(5_500)));
        env.handle_timeout(t(5_499));
        assert_eq!(env.poll_event(), None, "not due yet");
        env.handle_timeout(t(5_500));
        let ev = env.poll_event().unwrap();
        assert_eq!((ev.at, ev.value), (t(5_500), 26.0));
        assert_eq!(ev.violated, LevelMask::of(&[1]));
        assert_eq!(env.poll_timeout(), None);
    }

    #[test]
    fn test_dwell_restarts_when_the_target_changes() {
        let h = Hysteresis {
            min_dwell: Duration::from_millis(500),
            ..Hysteresis::NONE
        };
        let (mut env, d, p) = setup(h);
        env.set_dev_param(t(0), &d, &p, 15.0).unwrap();
        env.set_dev_param(t(100), &d, &p, 25.0).unwrap(); // target: high on
        env.set_dev_param(t(400), &d, &p, 5.0).unwrap(); // target: low on instead
        assert_eq!(env.poll_timeout(), Some(t(900)));
        env.handle_timeout(t(900));
        let ev = env.poll_event().unwrap();
        assert_eq!(
            ev.violated,
            LevelMask::of(&[0]),
            "only the change that held"
        );
        assert_eq!(env.poll_event(), None);
    }

    #[test]
    fn test_smoothing_ignores_a_spike_and_follows_a_trend() {
        let h = Hysteresis {
            smoothing_weight: Some(0.25),
            ..Hysteresis::NONE
        };
        let (mut env, d, p) = setup(h);
        // One spike to 30 from 15: the average reaches 17.5, below 20.
        assert!(feed(&mut env, &d, &p, &[15.0, 30.0, 15.0, 15.0]).is_empty());
        // A lasting move to 30: the average goes 18.75, 21.5625 -> violation on the second sample.
        let (mut env, d, p) = setup(h);
        let events = feed(&mut env, &d, &p, &[15.0, 15.0, 30.0, 30.0, 30.0]);
        assert_eq!(events.len(), 1);
        assert_eq!((events[0].at, events[0].value), (t(300), 21.5625));
        let reading = env.get_dev_param(&d, &p).unwrap();
        assert_eq!(reading.raw, 30.0);
        assert!(reading.effective > 20.0 && reading.effective < 30.0);
    }

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
