//! Virtual and real time as one type.
//!
//! Core state machines never read a clock: every input carries `now: Time`, a number of
//! nanoseconds since an epoch chosen by the engine (simulation start for the simulator,
//! process start for the real runtime). Spans of time are plain [`std::time::Duration`]s.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time: nanoseconds since the engine's epoch.
///
/// `Time` is totally ordered and cheap to copy. Arithmetic saturates rather than panics, so a
/// deadline computed from untrusted input (a huge timeout) cannot overflow.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, serde::Serialize)]
pub struct Time(u64);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);
    /// A time later than any the engines reach; used for "never".
    pub const MAX: Time = Time(u64::MAX);

    /// Builds a time from nanoseconds since the epoch.
    pub const fn from_nanos(ns: u64) -> Time {
        Time(ns)
    }

    /// Builds a time from microseconds since the epoch (saturating).
    pub const fn from_micros(us: u64) -> Time {
        Time(us.saturating_mul(1_000))
    }

    /// Builds a time from milliseconds since the epoch (saturating).
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms.saturating_mul(1_000_000))
    }

    /// Builds a time from whole seconds since the epoch (saturating).
    pub const fn from_secs(s: u64) -> Time {
        Time(s.saturating_mul(1_000_000_000))
    }

    /// Builds a time from fractional seconds; negative and NaN map to zero, huge values saturate.
    pub fn from_secs_f64(s: f64) -> Time {
        if s.is_nan() || s <= 0.0 {
            Time::ZERO
        } else {
            // `as` saturates for floats out of range.
            Time(crate::convert::f64_u64_sat((s * 1e9).round()))
        }
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Seconds since the epoch, as a float (for reports and plots).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// Time elapsed since `earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Time::MAX`].
    pub fn saturating_add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(duration_nanos(d)))
    }

    /// `self - d`, saturating at [`Time::ZERO`].
    pub fn saturating_sub(self, d: Duration) -> Time {
        Time(self.0.saturating_sub(duration_nanos(d)))
    }
}

/// A duration's length in nanoseconds, saturating at `u64::MAX` (about 584 years).
pub fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The time it takes to move `bytes` at `rate_bytes_per_s`; `None` for a zero rate.
pub fn transmission_time(bytes: u64, rate_bytes_per_s: f64) -> Option<Duration> {
    if rate_bytes_per_s.is_finite() && rate_bytes_per_s > 0.0 {
        // Whole nanoseconds, rounded half up (cheaper than `f64::round` on a hot path);
        // `as` saturates for absurdly long transmissions.
        Some(Duration::from_nanos(crate::convert::f64_u64_sat(
            bytes as f64 * 1e9 / rate_bytes_per_s + 0.5,
        )))
    } else {
        None
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        self.saturating_add(d)
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}

impl Sub<Duration> for Time {
    type Output = Time;
    fn sub(self, d: Duration) -> Time {
        self.saturating_sub(d)
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    /// Elapsed time; saturates to zero when `rhs` is later.
    fn sub(self, rhs: Time) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
        assert_eq!(Time::ZERO - Duration::from_secs(1), Time::ZERO);
        assert_eq!(Time::from_secs(1) - Time::from_secs(2), Duration::ZERO);
        assert_eq!(
            Time::from_millis(1500) - Time::from_secs(1),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn float_conversion_is_total() {
        assert_eq!(Time::from_secs_f64(-3.0), Time::ZERO);
        assert_eq!(Time::from_secs_f64(f64::NAN), Time::ZERO);
        assert_eq!(Time::from_secs_f64(f64::INFINITY), Time::MAX);
        assert_eq!(Time::from_secs_f64(1.5), Time::from_millis(1500));
    }

    #[test]
    fn transmission_time_of_zero_rate_is_none() {
        assert_eq!(transmission_time(1500, 0.0), None);
        assert_eq!(
            transmission_time(1500, 1500.0),
            Some(Duration::from_secs(1))
        );
    }
}
