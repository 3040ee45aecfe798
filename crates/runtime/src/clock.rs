//! The one clock conversion: wall-clock `Instant`s to core `Time` (nanoseconds since the
//! engine started) and back. Core never reads a clock; everything it sees passes here.

use adaptnet_core::Time;
use std::time::{Duration, Instant, SystemTime};

/// The engine's epoch.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
    /// The wall-clock reading taken with `epoch`, for the kernel's receive timestamps (which
    /// are wall-clock time).
    epoch_system: SystemTime,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn new() -> Clock {
        Clock {
            epoch: Instant::now(),
            epoch_system: SystemTime::now(),
        }
    }

    /// When a datagram arrived, as a core time: the kernel's receive timestamp `at` where
    /// there is one, kept within `[floor, now]` — never later than now, and never earlier
    /// than `floor`, the last time the caller handed core, so core sees time move forward
    /// even if the wall clock was stepped. Without a timestamp, now.
    pub fn arrival(&self, at: Option<SystemTime>, floor: Time) -> Time {
        let now = self.now();
        let Some(at) = at else {
            return now;
        };
        let since = at
            .duration_since(self.epoch_system)
            .unwrap_or(Duration::ZERO);
        let t = Time::from_nanos(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX));
        t.min(now).max(floor.min(now))
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

    #[test]
    fn arrival_stays_between_floor_and_now() {
        let c = Clock::new();
        std::thread::sleep(Duration::from_millis(20));
        let floor = Time::from_millis(5);
        // A timestamp 10 ms after the epoch is kept as is.
        let t = c.arrival(Some(c.epoch_system + Duration::from_millis(10)), floor);
        assert_eq!(t, Time::from_millis(10));
        // One before the floor (a stepped wall clock) is raised to it; one in the future
        // is lowered to now; none is now.
        assert_eq!(c.arrival(Some(SystemTime::UNIX_EPOCH), floor), floor);
        let future = c.arrival(Some(SystemTime::now() + Duration::from_secs(60)), floor);
        assert!(future <= c.now() && future >= Time::from_millis(20));
        assert!(c.arrival(None, floor) >= Time::from_millis(20));
    }
}
