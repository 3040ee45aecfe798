//! The control's measurements: a windowed maximum of delivery rates (BBR's `BtlBw` filter), a
//! windowed minimum of RTTs (Copa's `RTTstanding`), and the delivery rate over a sliding span
//! of acknowledgements. Every structure is bounded.

use crate::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Most entries any filter keeps; beyond, the oldest go (a longer history adds nothing the
/// windows below would use).
const MAX_ENTRIES: usize = 4096;

/// The largest value seen within a time window (a monotonic deque: the front is the maximum).
///
/// When every sample has aged out the newest maximum is kept: with nothing new measured (an
/// application-limited or idle sender), the last capacity seen is still the best estimate,
/// and it is never above what was delivered.
#[derive(Clone, Debug, Default)]
pub(crate) struct WindowedMax {
    entries: VecDeque<(Time, f64)>,
}

impl WindowedMax {
    /// Adds a sample.
    pub(crate) fn update(&mut self, now: Time, value: f64) {
        while self.entries.back().is_some_and(|&(_, v)| v <= value) {
            self.entries.pop_back();
        }
        self.entries.push_back((now, value));
        if self.entries.len() > MAX_ENTRIES {
            self.entries.pop_front();
        }
    }

    /// Forgets samples older than `window`, keeping at least one.
    pub(crate) fn expire(&mut self, now: Time, window: Duration) {
        while self.entries.len() > 1
            && self
                .entries
                .front()
                .is_some_and(|&(t, _)| now.saturating_since(t) > window)
        {
            self.entries.pop_front();
        }
    }

    /// Forgets everything and starts again from `value` (a measured decrease).
    pub(crate) fn reset(&mut self, now: Time, value: f64) {
        self.entries.clear();
        self.entries.push_back((now, value));
    }

    /// The maximum, if any sample was taken.
    pub(crate) fn get(&self) -> Option<f64> {
        self.entries.front().map(|&(_, v)| v)
    }
}

/// The smallest duration seen within a time window (monotonic deque: the front is the
/// minimum). Empty once every sample has aged out.
#[derive(Clone, Debug, Default)]
pub(crate) struct WindowedMin {
    entries: VecDeque<(Time, Duration)>,
}

impl WindowedMin {
    /// Adds a sample.
    pub(crate) fn update(&mut self, now: Time, value: Duration) {
        while self.entries.back().is_some_and(|&(_, v)| v >= value) {
            self.entries.pop_back();
        }
        self.entries.push_back((now, value));
        if self.entries.len() > MAX_ENTRIES {
            self.entries.pop_front();
        }
    }

    /// The minimum over the last `window`.
    pub(crate) fn get(&mut self, now: Time, window: Duration) -> Option<Duration> {
        while self
            .entries
            .front()
            .is_some_and(|&(t, _)| now.saturating_since(t) > window)
        {
            self.entries.pop_front();
        }
        self.entries.front().map(|&(_, v)| v)
    }
}

/// Delivery rate over a sliding span of acknowledgements: bytes acknowledged since the newest
/// acknowledgement at least `min_span` and `min_bytes` old, divided by the time since it.
/// Measured at the sender from acknowledgement arrivals, as BBR's delivery rate is (Cardwell
/// et al., "BBR: Congestion-Based Congestion Control", ACM Queue 2016; the IETF draft "Delivery
/// Rate Estimation"): while a queue stands at the bottleneck, this is the bottleneck's rate.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeliveryRate {
    /// (arrival, cumulative bytes acknowledged), oldest first.
    acks: VecDeque<(Time, u64)>,
}

impl DeliveryRate {
    /// An acknowledgement arrived at `now`; `delivered` bytes have been acknowledged in all.
    pub(crate) fn on_ack(&mut self, now: Time, delivered: u64) {
        self.acks.push_back((now, delivered));
        if self.acks.len() > MAX_ENTRIES {
            self.acks.pop_front();
        }
    }

    /// The rate of the acknowledgements that arrived since `since` (at least two of them, and
    /// at least `min_bytes` acknowledged after the first): while every packet they acknowledge
    /// had queued at the bottleneck, their spacing is the bottleneck's (the acknowledgement
    /// clock as a packet train).
    pub(crate) fn rate_since(&self, since: Time, delivered: u64, min_bytes: u64) -> Option<f64> {
        let first = self.acks.partition_point(|&(t, _)| t < since);
        let &(t0, d0) = self.acks.get(first)?;
        let &(t1, _) = self.acks.back()?;
        let secs = t1.saturating_since(t0).as_secs_f64();
        let bytes = delivered.saturating_sub(d0);
        (secs > 0.0 && bytes >= min_bytes.max(1)).then(|| bytes as f64 / secs)
    }

    /// The rate over the shortest span back from `now` that covers both `min_span` and
    /// `min_bytes`, and the cumulative count at that span's start; `None` until there is one.
    pub(crate) fn sample(
        &mut self,
        now: Time,
        delivered: u64,
        min_span: Duration,
        min_bytes: u64,
    ) -> Option<(f64, u64)> {
        let covers = |&(t, d): &(Time, u64)| {
            now.saturating_since(t) >= min_span && delivered.saturating_sub(d) >= min_bytes
        };
        while self.acks.get(1).is_some_and(covers) {
            self.acks.pop_front();
        }
        let front = *self.acks.front()?;
        if !covers(&front) {
            return None;
        }
        let secs = now.saturating_since(front.0).as_secs_f64();
        (secs > 0.0).then(|| (delivered.saturating_sub(front.1) as f64 / secs, front.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_windowed_max_ages_but_keeps_the_newest() {
        let mut m = WindowedMax::default();
        m.update(Time::ZERO, 10.0);
        m.update(Time::from_millis(10), 5.0);
        assert_eq!(m.get(), Some(10.0));
        m.expire(Time::from_millis(50), Duration::from_millis(20));
        assert_eq!(m.get(), Some(5.0));
        m.expire(Time::from_secs(10), Duration::from_millis(20));
        assert_eq!(m.get(), Some(5.0), "the last sample is kept");
        m.reset(Time::from_secs(10), 1.0);
        assert_eq!(m.get(), Some(1.0));
    }

    #[test]
    fn test_windowed_min_empties_when_aged() {
        let mut m = WindowedMin::default();
        m.update(Time::ZERO, Duration::from_millis(5));
        m.update(Time::from_millis(1), Duration::from_millis(9));
        let w = Duration::from_millis(10);
        assert_eq!(
            m.get(Time::from_millis(2), w),
            Some(Duration::from_millis(5))
        );
        assert_eq!(
            m.get(Time::from_millis(11), w),
            Some(Duration::from_millis(9))
        );
        assert_eq!(m.get(Time::from_millis(30), w), None);
    }

    #[test]
    fn test_delivery_rate_spans_time_and_bytes() {
        let mut r = DeliveryRate::default();
        // 1,000 bytes acknowledged every millisecond: 1 MB/s.
        for i in 0..=20u64 {
            r.on_ack(Time::from_millis(i), 1_000 * i);
        }
        let now = Time::from_millis(20);
        let (rate, _) = r
            .sample(now, 20_000, Duration::from_millis(5), 3_000)
            .expect("a sample");
        assert!((rate - 1e6).abs() < 1.0, "{rate}");
        assert!(
            r.sample(now, 20_000, Duration::from_secs(1), 0).is_none(),
            "no span that long"
        );
    }
}
