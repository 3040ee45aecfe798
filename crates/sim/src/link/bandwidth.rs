//! How fast a link serialises packets: a constant rate, a piecewise-constant trace, or a
//! Mahimahi delivery-opportunity trace.

use crate::trace::{MahimahiTrace, PiecewiseTrace};
use adaptnet_core::Time;

/// The capacity model of one link direction.
#[derive(Clone, Debug, PartialEq)]
pub enum Bandwidth {
    /// A fixed rate.
    Constant {
        /// Bytes per second; zero means the link never transmits.
        rate_bytes_per_s: f64,
    },
    /// A rate that changes at given times (fluid service: a packet's transmission integrates
    /// the rate over time).
    Piecewise(PiecewiseTrace),
    /// Discrete delivery opportunities of 1500 bytes each (Mahimahi semantics).
    Mahimahi(MahimahiTrace),
}

impl Bandwidth {
    /// A constant rate given in bits per second.
    pub fn bits_per_s(bps: f64) -> Bandwidth {
        Bandwidth::Constant {
            rate_bytes_per_s: bps / 8.0,
        }
    }

    /// The instantaneous rate at `t` in bytes per second (the mean over the trace period for
    /// Mahimahi traces); used by oracles and reports, not by the service itself.
    pub fn rate_at(&self, t: Time) -> f64 {
        match self {
            Bandwidth::Constant { rate_bytes_per_s } => *rate_bytes_per_s,
            Bandwidth::Piecewise(trace) => trace.rate_at(t.as_secs_f64()),
            Bandwidth::Mahimahi(trace) => trace.mean_rate_bytes_per_s(),
        }
    }

    /// The bytes the link can carry in `[0, end]` (for utilisation figures).
    pub fn capacity_bytes(&self, end: Time) -> f64 {
        let end_s = end.as_secs_f64();
        match self {
            Bandwidth::Constant { rate_bytes_per_s } => rate_bytes_per_s * end_s,
            Bandwidth::Piecewise(trace) => trace
                .steps
                .iter()
                .enumerate()
                .take_while(|(_, (start, _))| *start < end_s)
                .map(|(i, &(start, rate))| {
                    let seg_end = trace.steps.get(i + 1).map_or(end_s, |&(s, _)| s.min(end_s));
                    rate * (seg_end - start)
                })
                .sum(),
            Bandwidth::Mahimahi(trace) => {
                // Opportunities strictly before `end`, plus those exactly at it.
                let opps = Opportunities::new(trace);
                let mut n = opps.first_at_or_after(end);
                while opps.time(n) <= end {
                    n += 1;
                }
                n as f64 * crate::trace::MAHIMAHI_OPPORTUNITY_BYTES as f64
            }
        }
    }

    /// For fluid models: when a transmission of `bytes` started at `start` completes;
    /// `None` if the rate stays zero forever. Mahimahi links are not fluid (returns `None`).
    pub(crate) fn fluid_finish(&self, start: Time, bytes: u64) -> Option<Time> {
        match self {
            Bandwidth::Constant { rate_bytes_per_s } => {
                adaptnet_core::time::transmission_time(bytes, *rate_bytes_per_s).map(|d| start + d)
            }
            Bandwidth::Piecewise(trace) => piecewise_finish(trace, start, bytes),
            Bandwidth::Mahimahi(_) => None,
        }
    }
}

/// Integrates a piecewise-constant rate from `start` until `bytes` have been served.
fn piecewise_finish(trace: &PiecewiseTrace, start: Time, bytes: u64) -> Option<Time> {
    let steps = &trace.steps;
    let mut t = start.as_secs_f64();
    let mut left = bytes as f64;
    let mut idx = steps.partition_point(|&(s, _)| s <= t).saturating_sub(1);
    loop {
        let rate = steps.get(idx).map_or(0.0, |s| s.1);
        let seg_end = steps.get(idx + 1).map_or(f64::INFINITY, |&(s, _)| s);
        if rate > 0.0 {
            let need = left / rate;
            if t + need <= seg_end {
                return Some(Time::from_secs_f64(t + need));
            }
            left -= rate * (seg_end - t);
        } else if seg_end.is_infinite() {
            return None;
        }
        t = seg_end;
        idx += 1;
    }
}

/// Mahimahi opportunity times: global opportunity index `k` (counting across repeats of the
/// trace) ↔ time.
#[derive(Clone, Debug)]
pub(crate) struct Opportunities {
    times_ns: Vec<u64>,
    period_ns: u64,
}

impl Opportunities {
    pub(crate) fn new(trace: &MahimahiTrace) -> Opportunities {
        Opportunities {
            times_ns: trace
                .opportunities_ms
                .iter()
                .map(|ms| ms.saturating_mul(1_000_000))
                .collect(),
            period_ns: trace.period_ms().saturating_mul(1_000_000),
        }
    }

    /// Time of opportunity `k`.
    pub(crate) fn time(&self, k: u64) -> Time {
        let n = self.times_ns.len() as u64;
        let wrap = k / n;
        let within = usize::try_from(k % n)
            .ok()
            .and_then(|i| self.times_ns.get(i))
            .copied()
            .unwrap_or(0);
        Time::from_nanos(wrap.saturating_mul(self.period_ns).saturating_add(within))
    }

    /// The first opportunity at or after `t`.
    pub(crate) fn first_at_or_after(&self, t: Time) -> u64 {
        let n = self.times_ns.len() as u64;
        let wrap = t.as_nanos() / self.period_ns;
        let within = t.as_nanos() % self.period_ns;
        let i = self.times_ns.partition_point(|&x| x < within) as u64;
        wrap * n + i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_finish_is_size_over_rate() {
        let bw = Bandwidth::bits_per_s(1e6);
        assert_eq!(
            bw.fluid_finish(Time::ZERO, 1250),
            Some(Time::from_millis(10))
        );
        let zero = Bandwidth::Constant {
            rate_bytes_per_s: 0.0,
        };
        assert_eq!(zero.fluid_finish(Time::ZERO, 1), None);
    }

    #[test]
    fn piecewise_finish_integrates_across_steps() {
        let trace = PiecewiseTrace {
            steps: vec![(0.0, 1000.0), (1.0, 0.0), (2.0, 500.0)],
        };
        let bw = Bandwidth::Piecewise(trace);
        // 500 bytes in the first half second.
        assert_eq!(
            bw.fluid_finish(Time::ZERO, 500),
            Some(Time::from_millis(500))
        );
        // 1500 bytes from 0.5 s: 500 by 1 s, nothing until 2 s, then 1000 more at 500 B/s.
        assert_eq!(
            bw.fluid_finish(Time::from_millis(500), 1500),
            Some(Time::from_secs(4))
        );
        let dead = Bandwidth::Piecewise(PiecewiseTrace {
            steps: vec![(0.0, 10.0), (1.0, 0.0)],
        });
        assert_eq!(dead.fluid_finish(Time::ZERO, 100), None);
    }

    #[test]
    fn capacity_integrates_each_model() {
        let end = Time::from_secs(4);
        assert_eq!(Bandwidth::bits_per_s(8000.0).capacity_bytes(end), 4000.0);
        let pw = Bandwidth::Piecewise(PiecewiseTrace {
            steps: vec![(0.0, 1000.0), (1.0, 0.0), (2.0, 500.0)],
        });
        assert_eq!(pw.capacity_bytes(end), 2000.0);
        let mm = Bandwidth::Mahimahi(MahimahiTrace {
            opportunities_ms: vec![500, 1000],
        });
        // Two opportunities per second: 8 in four seconds.
        assert_eq!(mm.capacity_bytes(end), 8.0 * 1500.0);
    }

    #[test]
    fn opportunities_wrap_with_period() {
        let trace = MahimahiTrace {
            opportunities_ms: vec![0, 0, 5, 10],
        };
        let o = Opportunities::new(&trace);
        assert_eq!(o.time(0), Time::ZERO);
        assert_eq!(o.time(2), Time::from_millis(5));
        assert_eq!(o.time(3), Time::from_millis(10));
        assert_eq!(o.time(4), Time::from_millis(10));
        assert_eq!(o.time(6), Time::from_millis(15));
        assert_eq!(o.first_at_or_after(Time::from_millis(1)), 2);
        assert_eq!(o.first_at_or_after(Time::from_millis(6)), 3);
        assert_eq!(o.first_at_or_after(Time::from_millis(11)), 6);
    }
}
