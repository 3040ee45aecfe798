//! How late the emulator hands packets over: a fixed-size histogram of the time between the
//! moment the link model says a packet arrives and the moment it is written to the far side's
//! device.
//!
//! Resolution is 1 µs up to 1 ms and 100 µs up to 100 ms; later packets fall into one overflow
//! bucket (the exact maximum is kept apart). The bound of the memory is the two bucket arrays:
//! 2,000 counters, whatever the run's length.

use serde::Serialize;
use std::time::Duration;

/// Buckets of 1 µs below 1 ms.
const FINE_BUCKETS: usize = 1_000;
/// Buckets of 100 µs from 1 ms to 100 ms.
const COARSE_BUCKETS: usize = 990;
const FINE_NS: u64 = 1_000;
const COARSE_NS: u64 = 100_000;
const FINE_END_NS: u64 = FINE_NS * FINE_BUCKETS as u64;
const COARSE_END_NS: u64 = FINE_END_NS + COARSE_NS * COARSE_BUCKETS as u64;

/// A lateness histogram. `late` counts the packets later than the bound it was made with —
/// the packets the emulator could not serve in time.
#[derive(Clone, Debug)]
pub struct Lateness {
    fine: Box<[u64; FINE_BUCKETS]>,
    coarse: Box<[u64; COARSE_BUCKETS]>,
    over: u64,
    count: u64,
    max_ns: u64,
    late: u64,
    bound_ns: u64,
}

/// What a [`Lateness`] histogram says, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatenessSummary {
    /// Packets measured.
    pub packets: u64,
    /// Median lateness, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Largest, µs.
    pub max_us: f64,
    /// Packets later than `bound_us`.
    pub late: u64,
    /// The bound, µs.
    pub bound_us: f64,
}

impl Lateness {
    /// An empty histogram counting packets later than `bound` as late.
    pub fn new(bound: Duration) -> Lateness {
        Lateness {
            fine: Box::new([0; FINE_BUCKETS]),
            coarse: Box::new([0; COARSE_BUCKETS]),
            over: 0,
            count: 0,
            max_ns: 0,
            late: 0,
            bound_ns: u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Records one packet `ns` nanoseconds late.
    pub fn record(&mut self, ns: u64) {
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
        if ns > self.bound_ns {
            self.late += 1;
        }
        let slot = if ns < FINE_END_NS {
            usize::try_from(ns / FINE_NS)
                .ok()
                .and_then(|i| self.fine.get_mut(i))
        } else if ns < COARSE_END_NS {
            usize::try_from((ns - FINE_END_NS) / COARSE_NS)
                .ok()
                .and_then(|i| self.coarse.get_mut(i))
        } else {
            None
        };
        match slot {
            Some(c) => *c += 1,
            None => self.over += 1,
        }
    }

    /// Packets recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `q`-quantile (0 ≤ q ≤ 1) as the upper edge of its bucket, or the maximum when it
    /// falls into the overflow bucket.
    pub fn quantile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.fine.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(((i as u64 + 1) * FINE_NS).min(self.max_ns));
            }
        }
        for (i, &c) in self.coarse.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let edge = FINE_END_NS + (i as u64 + 1) * COARSE_NS;
                return Duration::from_nanos(edge.min(self.max_ns));
            }
        }
        Duration::from_nanos(self.max_ns)
    }

    /// p50, p99, max and the late count.
    pub fn summary(&self) -> LatenessSummary {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        LatenessSummary {
            packets: self.count,
            p50_us: us(self.quantile(0.5)),
            p99_us: us(self.quantile(0.99)),
            max_us: self.max_ns as f64 / 1e3,
            late: self.late,
            bound_us: self.bound_ns as f64 / 1e3,
        }
    }

    /// Forgets every packet (keeps the bound).
    pub fn clear(&mut self) {
        self.fine.fill(0);
        self.coarse.fill(0);
        self.over = 0;
        self.count = 0;
        self.max_ns = 0;
        self.late = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_follow_the_recorded_values() {
        let mut h = Lateness::new(Duration::from_millis(1));
        for us in 1..=100u64 {
            h.record(us * 1_000 - 500);
        }
        assert_eq!(h.quantile(0.5), Duration::from_micros(50));
        assert_eq!(h.quantile(0.99), Duration::from_micros(99));
        assert_eq!(h.summary().max_us, 99.5);
        assert_eq!(h.summary().late, 0);
        h.record(5_000_000); // 5 ms: coarse bucket, late
        h.record(2_000_000_000); // 2 s: overflow, late
        let s = h.summary();
        assert_eq!(s.late, 2);
        assert_eq!(s.max_us, 2e6);
        assert_eq!(h.quantile(1.0), Duration::from_secs(2));
        h.clear();
        assert_eq!(h.count(), 0);
        assert_eq!(h.quantile(0.99), Duration::ZERO);
    }
}
