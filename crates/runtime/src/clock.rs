//! The one clock conversion: wall-clock `Instant`s to core `Time` (nanoseconds since the
//! engine started) and back. Core never reads a clock; everything it sees passes here.

use adaptnet_core::Time;
use std::time::{Duration, Instant};

/// The engine's epoch.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn new() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }

    /// The current time.
    pub fn now(&self) -> Time {
        self.time_of(Instant::now())
    }

    /// `instant` as a core time (the epoch if earlier).
    pub fn time_of(&self, instant: Instant) -> Time {
        let ns = instant.saturating_duration_since(self.epoch).as_nanos();
        Time::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// A core time as an `Instant` (saturating far in the future).
    pub fn instant_of(&self, t: Time) -> Instant {
        let far = self.epoch + Duration::from_secs(86_400 * 365);
        self.epoch
            .checked_add(Duration::from_nanos(t.as_nanos()))
            .map_or(far, |i| i.min(far))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_within_a_nanosecond() {
        let c = Clock::new();
        let later = Instant::now() + Duration::from_millis(1500);
        let t = c.time_of(later);
        assert!(t >= Time::from_millis(1500));
        let back = c.instant_of(t);
        assert!(back <= later && later - back < Duration::from_micros(1));
        assert!(c.instant_of(Time::MAX) > later);
    }
}
