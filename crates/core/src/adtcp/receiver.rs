//! The ADTCP receiver: metrics per sampling interval, each classified by its own RSD history,
//! then Table 2's rules (papers/004 §3–4). "Upon each packet arrival at the receiver, during
//! normal operations, the values of the metrics are calculated and network states are
//! estimated; the receiver passes the state information to the sender in outgoing ACKs."
//!
//! The stream ([`crate::tcp::Connection`]) owns one when its configuration enables ADTCP,
//! feeds it every arriving data segment, and puts [`Receiver::report`] in every segment it
//! sends. It needs no timer: everything happens on arrivals.

use super::identify::{Levels, StateReport, identify};
use super::metrics::{Arrival, IntervalSample, MIN_INTERVAL, Metrics};
use super::rsd::{Level, Rsd, RsdConfig, RsdConfigError, Scale};
use std::time::Duration;

/// Receiver parameters.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ReceiverConfig {
    /// The sampling interval as a fraction of the smoothed RTT. Default 0.5: "our design
    /// chooses half an RTT" (papers/004 §2.2), long enough to hold several packets of a
    /// window, short enough to report a change within the RTT the sender needs to act on it.
    pub interval_rtt_fraction: f64,
    /// The sampling interval while no RTT is known. Default 100 ms: half the RTT of a
    /// few-hop wireless path; replaced as soon as the handshake gives an RTT sample.
    pub default_interval: Duration,
    /// IDD classifier, over microseconds. Default: linear over ±100 ms in 1000 bins (0.2 ms
    /// each). The range covers the per-packet queueing change of slow multi-hop paths (a 1 KB
    /// packet takes 4 ms per 2 Mbit/s hop, the paper's setting); 0.2 ms resolves one
    /// 1500-byte packet at 60 Mbit/s. Larger values (route-change gaps) go to the end bins,
    /// where they still count as high.
    pub idd: RsdConfig,
    /// STT classifier, over bytes per second. Default: log2 scale from 1 kB/s to 10 GB/s, 12
    /// bins per octave (6 % steps, 280 bins): rates differ by orders of magnitude between
    /// paths, and what matters is a drop relative to the path's own rate.
    pub stt: RsdConfig,
    /// POR classifier over `[0, 1]`. Default: 100 bins of 1 %.
    pub por: RsdConfig,
    /// PLR classifier over `[0, 1]`. Default: 100 bins of 1 %.
    pub plr: RsdConfig,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        let ratio = RsdConfig::new(Scale::Linear { lo: 0.0, hi: 1.0 }, 100);
        ReceiverConfig {
            interval_rtt_fraction: 0.5,
            default_interval: Duration::from_millis(100),
            idd: RsdConfig::new(
                Scale::Linear {
                    lo: -100_000.0,
                    hi: 100_000.0,
                },
                1000,
            ),
            stt: RsdConfig::new(Scale::Log2 { lo: 1e3, hi: 1e10 }, 280),
            por: ratio,
            plr: ratio,
        }
    }
}

/// The outcome of one sampling interval.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Identification {
    /// The interval's metrics.
    pub sample: IntervalSample,
    /// Their levels against their histories.
    pub levels: Levels,
    /// The states identified.
    pub report: StateReport,
}

/// Receiver-side network-state identification for one connection.
#[derive(Clone, Debug)]
pub struct Receiver {
    config: ReceiverConfig,
    metrics: Metrics,
    idd: Rsd,
    stt: Rsd,
    por: Rsd,
    plr: Rsd,
    last: Option<Identification>,
    intervals: u64,
}

impl Receiver {
    /// A receiver with no history.
    pub fn new(config: ReceiverConfig) -> Result<Receiver, RsdConfigError> {
        Ok(Receiver {
            config,
            metrics: Metrics::new(),
            idd: Rsd::new(config.idd)?,
            stt: Rsd::new(config.stt)?,
            por: Rsd::new(config.por)?,
            plr: Rsd::new(config.plr)?,
            last: None,
            intervals: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ReceiverConfig {
        &self.config
    }

    /// The sampling interval for a smoothed RTT (or the default without one).
    pub fn interval(&self, srtt: Option<Duration>) -> Duration {
        let fraction = self.config.interval_rtt_fraction;
        let interval = match srtt {
            Some(rtt) if fraction.is_finite() && fraction > 0.0 => rtt.mul_f64(fraction.min(1e3)),
            _ => self.config.default_interval,
        };
        interval.max(MIN_INTERVAL)
    }

    /// Records an arriving data segment; `srtt` (the connection's smoothed RTT, if known) sets
    /// the length of the interval it may open. Returns the identification of the interval it
    /// closed, if any.
    pub fn on_arrival(&mut self, a: &Arrival, srtt: Option<Duration>) -> Option<Identification> {
        let interval = self.interval(srtt);
        let sample = self.metrics.on_arrival(a, interval)?;
        let levels = Levels {
            idd: sample
                .idd_us
                .map_or(Level::Unknown, |v| self.idd.classify(v).level),
            stt: self.stt.classify(sample.stt_bytes_per_s).level,
            por: sample
                .por
                .map_or(Level::Unknown, |v| self.por.classify(v).level),
            plr: self.plr.classify(sample.plr).level,
        };
        let id = Identification {
            sample,
            levels,
            report: identify(levels),
        };
        self.last = Some(id);
        self.intervals = self.intervals.saturating_add(1);
        Some(id)
    }

    /// The state to report in outgoing segments: that of the latest closed interval,
    /// repeated in every ACK until the next interval closes.
    ///
    /// None while the congestion rule cannot be evaluated — before the first interval closes,
    /// while the IDD or STT history is too short, or when the interval had no IDD sample (no
    /// sending times, or a single packet). "Not congested" is then unknown, and a report of
    /// "normal" would let the sender read its next timeout as a disconnection and keep its
    /// window: the incompatible error that makes a sender unfriendly (papers/004 §3). Without
    /// a report, the sender acts as standard TCP.
    pub fn report(&self) -> Option<StateReport> {
        self.last
            .filter(|id| id.levels.idd != Level::Unknown && id.levels.stt != Level::Unknown)
            .map(|id| id.report)
    }

    /// The latest identification.
    pub fn last(&self) -> Option<&Identification> {
        self.last.as_ref()
    }

    /// Sampling intervals closed so far.
    pub fn intervals(&self) -> u64 {
        self.intervals
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adtcp::identify::NetworkState;
    use crate::time::Time;

    /// Quiet path for `n` intervals of 100 ms: ten 1000-byte packets sent every 10 ms with a
    /// constant delay, and a little jitter so the histories have width. Returns the next
    /// send time and sequence number.
    fn quiet(rx: &mut Receiver, from_ms: u64, seq: &mut u64, n: u64) -> u64 {
        let mut t = from_ms;
        for i in 0..n * 10 {
            let jitter = (i * 7919) % 5; // 0..4 ms, deterministic
            rx.on_arrival(
                &Arrival {
                    at: Time::from_millis(t + 30 + jitter),
                    seq: *seq,
                    len: 1000,
                    sent_us: Some(crate::convert::u32_sat(t * 1000)),
                },
                Some(Duration::from_millis(200)),
            );
            *seq += 1000;
            t += 10;
        }
        t
    }

    #[test]
    fn test_interval_is_half_the_rtt() {
        let rx = Receiver::new(ReceiverConfig::default()).expect("valid");
        assert_eq!(
            rx.interval(Some(Duration::from_millis(80))),
            Duration::from_millis(40)
        );
        assert_eq!(rx.interval(None), Duration::from_millis(100));
        assert_eq!(rx.interval(Some(Duration::ZERO)), MIN_INTERVAL);
    }

    fn deliver(rx: &mut Receiver, at_ms: u64, seq: u64, sent_ms: u64) -> Option<Identification> {
        rx.on_arrival(
            &Arrival {
                at: Time::from_millis(at_ms),
                seq,
                len: 1000,
                sent_us: Some(crate::convert::u32_sat(sent_ms * 1000)),
            },
            Some(Duration::from_millis(200)),
        )
    }

    #[test]
    fn test_quiet_path_is_normal_then_queue_buildup_is_congestion() {
        let mut rx = Receiver::new(ReceiverConfig::default()).expect("valid");
        let mut seq = 1;
        let t = quiet(&mut rx, 0, &mut seq, 40);
        assert!(rx.intervals() >= 35);
        assert_eq!(
            rx.report().map(StateReport::primary),
            Some(NetworkState::Normal)
        );
        // Congestion: the sender keeps sending every 10 ms but the bottleneck delivers one
        // packet every 25 ms, so each packet queues 15 ms longer than the one before and
        // throughput drops to 40 %.
        let mut congested = Vec::new();
        let mut arrival = t + 30;
        for i in 0..40u64 {
            let sent = t + 10 * i;
            arrival = arrival.max(sent + 30) + 25;
            if let Some(id) = deliver(&mut rx, arrival, seq, sent)
                && id.sample.start >= Time::from_millis(t + 50)
            {
                congested.push(id);
            }
            seq += 1000;
        }
        assert!(congested.len() >= 5);
        for id in &congested {
            assert_eq!(id.levels.idd, Level::High, "{id:?}");
            assert_eq!(id.levels.stt, Level::Low, "{id:?}");
            assert_eq!(id.report.primary(), NetworkState::Congestion);
        }
    }

    #[test]
    fn test_loss_is_channel_error() {
        let mut rx = Receiver::new(ReceiverConfig::default()).expect("valid");
        let mut seq = 1;
        let mut t = quiet(&mut rx, 0, &mut seq, 30);
        // Two segments lost (holes left in the window), same timing otherwise.
        let mut ids = Vec::new();
        for i in 0..10u64 {
            if i != 3 && i != 6 {
                ids.extend(deliver(&mut rx, t + 30, seq, t));
            }
            seq += 1000;
            t += 10;
        }
        ids.extend(deliver(&mut rx, t + 130, seq, t + 100));
        let id = ids.last().expect("an interval closed");
        assert_eq!(id.levels.plr, Level::High, "{id:?}");
        assert_eq!(id.report.primary(), NetworkState::ChannelError);
    }

    #[test]
    fn test_reordering_is_route_change() {
        let mut rx = Receiver::new(ReceiverConfig::default()).expect("valid");
        let mut seq = 1;
        let t = quiet(&mut rx, 0, &mut seq, 30);
        // Packets 3 and 4 take the old, longer path and arrive after 5 and 6.
        let base = seq;
        let mut ids = Vec::new();
        for (k, i) in [0u64, 1, 2, 5, 6, 3, 4, 7, 8, 9].into_iter().enumerate() {
            ids.extend(deliver(
                &mut rx,
                t + 30 + 10 * k as u64,
                base + 1000 * i,
                t + 10 * i,
            ));
        }
        ids.extend(deliver(&mut rx, t + 230, base + 10_000, t + 200));
        let id = ids
            .iter()
            .find(|id| id.sample.por.is_some_and(|p| p > 0.0))
            .expect("an interval with the reordering");
        assert_eq!(id.levels.por, Level::High, "{id:?}");
        assert!(id.report.route_change);
        assert_eq!(
            id.levels.plr,
            Level::Medium,
            "the holes were filled: {id:?}"
        );
    }
}
