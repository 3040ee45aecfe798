//! Round-trip time estimation and the retransmission timeout, per RFC 6298.
//!
//! Shared by every transport that times retransmissions (the stream, SPP) and by the
//! Congestion Manager, so that "srtt", "rttvar" and "min RTT" mean the same thing everywhere.

use std::time::Duration;

/// RFC 6298 §2 constants and the bounds an application may tune.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RtoConfig {
    /// RTO before any sample (RFC 6298 §2.1: 1 s).
    pub initial: Duration,
    /// Lower bound on the RTO (RFC 6298 §2.4: 1 s; many stacks use 200 ms).
    pub min: Duration,
    /// Upper bound on the RTO, also bounding exponential backoff (RFC 6298 §2.5: ≥ 60 s).
    pub max: Duration,
    /// Clock granularity G (RFC 6298 §2.3).
    pub granularity: Duration,
}

impl Default for RtoConfig {
    fn default() -> Self {
        RtoConfig {
            initial: Duration::from_secs(1),
            min: Duration::from_secs(1),
            max: Duration::from_secs(60),
            granularity: Duration::from_millis(1),
        }
    }
}

/// Smoothed RTT, RTT variation and minimum RTT, with the derived RTO.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    config: RtoConfig,
    srtt: Option<Duration>,
    rttvar: Duration,
    min_rtt: Option<Duration>,
    latest: Option<Duration>,
    samples: u64,
}

impl RttEstimator {
    /// An estimator with no samples yet.
    pub fn new(config: RtoConfig) -> RttEstimator {
        RttEstimator {
            config,
            srtt: None,
            rttvar: Duration::ZERO,
            min_rtt: None,
            latest: None,
            samples: 0,
        }
    }

    /// An estimator resuming from cached path state (RFC 9040 temporal sharing): `srtt`,
    /// `rttvar` and `min_rtt` as measured by an earlier connection. Counts as one sample.
    pub fn seeded(
        config: RtoConfig,
        srtt: Duration,
        rttvar: Duration,
        min_rtt: Duration,
    ) -> RttEstimator {
        RttEstimator {
            config,
            srtt: Some(srtt),
            rttvar,
            min_rtt: Some(min_rtt.min(srtt)),
            latest: Some(srtt),
            samples: 1,
        }
    }

    /// Folds in one RTT measurement (RFC 6298 §2.2 and §2.3, alpha = 1/8, beta = 1/4).
    pub fn on_sample(&mut self, rtt: Duration) {
        self.samples += 1;
        self.latest = Some(rtt);
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                // Saturating: a sample of hours (a bogus timestamp) must not overflow.
                let err = srtt.abs_diff(rtt);
                self.rttvar = self.rttvar.saturating_mul(3).saturating_add(err) / 4;
                self.srtt = Some(srtt.saturating_mul(7).saturating_add(rtt) / 8);
            }
        }
    }

    /// The retransmission timeout before backoff: `SRTT + max(G, 4*RTTVAR)`, clamped to
    /// `[min, max]`; the initial RTO when no sample has been taken.
    pub fn rto(&self) -> Duration {
        let raw = match self.srtt {
            None => self.config.initial,
            Some(srtt) => {
                srtt.saturating_add(self.config.granularity.max(self.rttvar.saturating_mul(4)))
            }
        };
        raw.clamp(self.config.min, self.config.max.max(self.config.min))
    }

    /// The RTO after `backoffs` consecutive expirations (RFC 6298 §5.5), capped at `max`.
    pub fn backed_off_rto(&self, backoffs: u32) -> Duration {
        let factor = 1u32.checked_shl(backoffs.min(16)).unwrap_or(u32::MAX);
        self.rto()
            .saturating_mul(factor)
            .min(self.config.max.max(self.config.min))
    }

    /// Smoothed RTT, if any sample has been taken.
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }

    /// RTT variation (zero before the first sample).
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// Smallest RTT seen.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// Most recent sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// Number of samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The configuration in force.
    pub fn config(&self) -> &RtoConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn test_first_sample_sets_srtt_and_half_rttvar() {
        let mut e = RttEstimator::new(RtoConfig {
            min: ms(1),
            ..RtoConfig::default()
        });
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.on_sample(ms(100));
        assert_eq!(e.srtt(), Some(ms(100)));
        assert_eq!(e.rttvar(), ms(50));
        assert_eq!(e.rto(), ms(300));
    }

    #[test]
    fn test_later_samples_are_smoothed() {
        let mut e = RttEstimator::new(RtoConfig::default());
        e.on_sample(ms(100));
        e.on_sample(ms(200));
        // rttvar = 3/4*50 + 1/4*100 = 62.5; srtt = 7/8*100 + 1/8*200 = 112.5
        assert_eq!(e.srtt(), Some(Duration::from_micros(112_500)));
        assert_eq!(e.rttvar(), Duration::from_micros(62_500));
        assert_eq!(e.min_rtt(), Some(ms(100)));
    }

    #[test]
    fn test_huge_samples_saturate_instead_of_panicking() {
        let mut e = RttEstimator::new(RtoConfig::default());
        e.on_sample(Duration::MAX);
        e.on_sample(Duration::MAX);
        e.on_sample(ms(1));
        assert_eq!(e.rto(), Duration::from_secs(60));
    }

    #[test]
    fn test_seeded_estimator_starts_from_cached_state() {
        let e = RttEstimator::seeded(RtoConfig::default(), ms(200), ms(20), ms(150));
        assert_eq!(e.srtt(), Some(ms(200)));
        assert_eq!(e.min_rtt(), Some(ms(150)));
        assert_eq!(e.rto(), Duration::from_secs(1));
        assert_eq!(e.samples(), 1);
    }

    #[test]
    fn test_rto_respects_minimum_and_backoff_cap() {
        let mut e = RttEstimator::new(RtoConfig::default());
        e.on_sample(ms(10));
        assert_eq!(e.rto(), Duration::from_secs(1), "RFC 6298 §2.4 floor");
        assert_eq!(e.backed_off_rto(3), Duration::from_secs(8));
        assert_eq!(e.backed_off_rto(40), Duration::from_secs(60));
    }
}
