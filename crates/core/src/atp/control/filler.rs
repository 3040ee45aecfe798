//! Filler trains: while the application leaves the link idle, short trains of SPP PROBE
//! datagrams paced at a chosen rate above the estimate (§4.2's packet pair, sent at a rate
//! instead of back to back). The receiver reports the train's dispersion; compared with the
//! rate the train actually left at, it says whether the link took that rate or measured the
//! bottleneck (Keshav, SIGCOMM 1991; Dovrolis, Ramanathan and Moore, INFOCOM 2001: the
//! dispersion of a train sent faster than the bottleneck is the bottleneck's).

use crate::spp::wire::{ProbeHeader, ProbeReport};
use crate::spp::{SppDatagram, SppRepr};
use crate::time::Time;
use std::time::Duration;

/// What a whole train's report says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum TrainVerdict {
    /// It arrived as fast as it left: the link takes at least this rate (bytes/s).
    Taken(f64),
    /// It arrived slower: this is the bottleneck's rate (bytes/s).
    Bottleneck(f64),
}

#[derive(Clone, Copy, Debug)]
struct Train {
    id: u32,
    rate: f64,
    packets: u8,
    sent: u8,
    first: Time,
    last: Time,
    /// DATA bytes sent between the train's first and last datagram: they crossed the
    /// bottleneck within the train's span, so they count in its dispersion.
    data_bytes: u64,
}

/// The filler's state: at most one train at a time.
#[derive(Clone, Debug)]
pub(crate) struct Filler {
    next_at: Time,
    train: Option<Train>,
    next_id: u32,
    /// Trains in a row the link took.
    successes: u32,
    datagram_bytes: u16,
    trains: u64,
    packets: u64,
}

impl Filler {
    pub(crate) fn new(now: Time, datagram_bytes: u16) -> Filler {
        Filler {
            next_at: now,
            train: None,
            // Distinct from the estimator clock's pair ids (which count up from 1).
            next_id: 1 << 31,
            successes: 0,
            datagram_bytes,
            trains: 0,
            packets: 0,
        }
    }

    fn datagram(&self, id: u32, index: u8) -> SppDatagram {
        let repr = SppRepr::Probe(ProbeHeader {
            probe_id: id,
            index,
        });
        let pad = usize::from(self.datagram_bytes).saturating_sub(repr.buffer_len());
        SppDatagram {
            repr,
            payload_len: crate::convert::usize_u32_sat(pad),
        }
    }

    /// Whether a filler datagram is due at `now`.
    pub(crate) fn due(&self, now: Time) -> bool {
        match self.train {
            Some(t) => t.sent < t.packets,
            None => now >= self.next_at,
        }
    }

    /// The rate the current train is paced at, while it is being sent.
    pub(crate) fn sending_rate(&self) -> Option<f64> {
        self.train
            .filter(|t| t.sent > 0 && t.sent < t.packets)
            .map(|t| t.rate)
    }

    pub(crate) fn successes(&self) -> u32 {
        self.successes
    }

    pub(crate) fn trains(&self) -> u64 {
        self.trains
    }

    pub(crate) fn packets(&self) -> u64 {
        self.packets
    }

    /// The next datagram: a new train of `packets` at `rate`, or the current one's next.
    pub(crate) fn poll(&mut self, now: Time, rate: f64, packets: u8) -> Option<SppDatagram> {
        if !self.due(now) || packets < 2 || !(rate.is_finite() && rate > 0.0) {
            return None;
        }
        let train = self.train.get_or_insert_with(|| {
            let id = self.next_id;
            self.next_id = self.next_id.wrapping_add(1) | (1 << 31);
            self.trains += 1;
            Train {
                id,
                rate,
                packets,
                sent: 0,
                first: now,
                last: now,
                data_bytes: 0,
            }
        });
        let index = train.sent;
        train.sent += 1;
        train.last = now;
        let id = train.id;
        self.packets += 1;
        Some(self.datagram(id, index))
    }

    /// DATA of `bytes` went out. Within a train it joins the train's dispersion (a light
    /// application's message does not wait for a train, nor spoil it); more than the train's
    /// own bytes of it means the application is no longer idle, and the train is given up.
    pub(crate) fn on_data_sent(&mut self, now: Time, bytes: u64, interval: Duration) {
        let Some(t) = self
            .train
            .as_mut()
            .filter(|t| t.sent > 0 && t.sent < t.packets)
        else {
            return;
        };
        t.data_bytes = t.data_bytes.saturating_add(bytes);
        let own = u64::from(t.packets) * u64::from(self.datagram_bytes);
        if t.data_bytes > own {
            self.train = None;
            self.successes = 0;
            self.next_at = now.saturating_add(interval);
        }
    }

    /// The receiver's report. Only a whole train's report gives a verdict.
    pub(crate) fn on_report(
        &mut self,
        now: Time,
        report: &ProbeReport,
        taken_fraction: f64,
        interval: Duration,
    ) -> Option<TrainVerdict> {
        let t = self.train?;
        if report.probe_id != t.id || t.sent < t.packets || report.gap_ns == 0 {
            return None;
        }
        let size = self.datagram(t.id, 0).wire_len() as u64;
        let whole = u64::from(t.packets - 1) * size;
        if u64::from(report.bytes) < whole {
            return None;
        }
        self.train = None;
        let bytes = f64::from(report.bytes) + t.data_bytes as f64;
        let received = bytes * 1e9 / report.gap_ns as f64;
        let span = t.last.saturating_since(t.first).as_secs_f64();
        let left = if span > 0.0 {
            (whole + t.data_bytes) as f64 / span
        } else {
            f64::INFINITY
        };
        if received >= taken_fraction * left {
            self.successes += 1;
            // The link took it: the next train follows at once, at a higher gain.
            self.next_at = now;
            Some(TrainVerdict::Taken(received.min(left)))
        } else {
            self.successes = 0;
            self.next_at = now.saturating_add(interval);
            Some(TrainVerdict::Bottleneck(received))
        }
    }

    /// When a sent train's report is overdue: two smoothed RTTs after its last datagram, and
    /// at least 10 ms.
    pub(crate) fn poll_timeout(&self, srtt: Duration) -> Option<Time> {
        self.train
            .filter(|t| t.sent >= t.packets)
            .map(|t| t.last.saturating_add(Self::grace(srtt)))
    }

    /// When the next filler datagram may go (the pacer decides within a train); `None` while
    /// a sent train awaits its report.
    pub(crate) fn next_due(&self) -> Option<Time> {
        match self.train {
            Some(t) if t.sent >= t.packets => None,
            Some(t) => Some(t.last),
            None => Some(self.next_at),
        }
    }

    fn grace(srtt: Duration) -> Duration {
        srtt.saturating_mul(2).max(Duration::from_millis(10))
    }

    /// Gives up a train whose report is overdue (a datagram or the report was lost).
    pub(crate) fn handle_timeout(&mut self, now: Time, srtt: Duration, interval: Duration) {
        if let Some(t) = self.train
            && t.sent >= t.packets
            && now >= t.last.saturating_add(Self::grace(srtt))
        {
            self.train = None;
            self.successes = 0;
            self.next_at = now.saturating_add(interval);
        }
    }
}
