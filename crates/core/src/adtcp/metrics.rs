//! The receiver's four metrics (papers/004 §2.2, Table 1), measured over sampling intervals
//! ("a trade-off between metric accuracy and responsiveness; our design chooses half an RTT").
//!
//! | metric | per interval | what raises it |
//! |---|---|---|
//! | IDD, inter-packet delay difference | mean over the interval's packets of (arrival-time difference − sending-time difference) of consecutive packets, µs | queues building up |
//! | STT, short-term throughput | bytes received / interval length | (lowered by congestion) |
//! | POR, packet out-of-order ratio | share of timestamped packets sent before the latest sending time already seen | route changes |
//! | PLR, packet loss ratio | missing bytes in the receive window / (missing + received in the interval) | channel error |
//!
//! IDD subtracts the sender's spacing from the receiver's, so, unlike the plain inter-arrival
//! delay, it is not disturbed by the sender's bursts and pauses, nor by a lost packet between
//! two arrivals (Figure 2): what remains is how much more (or less) the second packet queued
//! than the first. IDD and POR need each packet's sending time, carried in the ADTCP option
//! ([`super::option`]); without it they have no sample and only STT and PLR are measured.
//!
//! An interval opens at the first arrival after the previous one closed, and closes at the
//! first arrival at or after its end; that arrival belongs to the next interval. No sample is
//! made for time in which nothing arrived (a disconnection shows up at the sender, as a
//! timeout, not here). Every sample is computed over the interval's nominal length.

use crate::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Most holes tracked in the receive window. One per loss burst in flight: a window of 1 GiB
/// in 1 KiB segments could not plausibly hold more. Past it the oldest (lowest) hole is
/// forgotten, so PLR undercounts rather than grows memory.
pub const MAX_HOLES: usize = 1024;

/// Shortest sampling interval: keeps STT finite and bounds the sampling work per second.
pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

/// One arriving data segment, as the metrics see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// When it arrived.
    pub at: Time,
    /// Stream position of its first byte.
    pub seq: u64,
    /// Payload bytes.
    pub len: u64,
    /// The sender's clock when it was sent, in microseconds modulo 2^32 (the ADTCP option),
    /// if the sender stamped it.
    pub sent_us: Option<u32>,
}

/// The metrics of one closed sampling interval.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct IntervalSample {
    /// When the interval opened (its first arrival).
    pub start: Time,
    /// Its nominal length.
    pub length: Duration,
    /// Data segments received in it.
    pub packets: u32,
    /// Payload bytes received in it.
    pub bytes: u64,
    /// Mean inter-packet delay difference in microseconds (none without two stamped packets).
    pub idd_us: Option<f64>,
    /// Short-term throughput in bytes per second.
    pub stt_bytes_per_s: f64,
    /// Packet out-of-order ratio in `[0, 1]` (none without stamped packets).
    pub por: Option<f64>,
    /// Packet loss ratio in `[0, 1]`.
    pub plr: f64,
}

/// Counters of the open interval.
#[derive(Clone, Copy, Debug)]
struct Open {
    start: Time,
    length: Duration,
    packets: u32,
    bytes: u64,
    idd_sum_us: f64,
    idd_count: u32,
    stamped: u32,
    out_of_order: u32,
}

/// The ranges of the stream not yet received below the highest byte received.
#[derive(Clone, Debug, Default)]
struct Holes {
    /// One past the highest byte received.
    highest: Option<u64>,
    /// Missing ranges `[start, end)`, sorted and disjoint, all below `highest`.
    list: VecDeque<(u64, u64)>,
}

impl Holes {
    fn on_segment(&mut self, start: u64, end: u64) {
        if end <= start {
            return;
        }
        let Some(high) = self.highest else {
            self.highest = Some(end);
            return;
        };
        self.highest = Some(high.max(end));
        if start >= high {
            if start > high {
                self.list.push_back((high, start));
                if self.list.len() > MAX_HOLES {
                    self.list.pop_front();
                }
            }
            return;
        }
        // Whatever this segment covers below the old highest byte is no longer missing.
        let mut kept = VecDeque::with_capacity(self.list.len() + 1);
        for &(s, e) in &self.list {
            if e <= start || s >= end {
                kept.push_back((s, e));
                continue;
            }
            if s < start {
                kept.push_back((s, start));
            }
            if e > end {
                kept.push_back((end, e));
            }
        }
        self.list = kept;
    }

    fn missing(&self) -> u64 {
        self.list.iter().map(|&(s, e)| e - s).sum()
    }
}

/// `a` was sent before `b` on the wrapping microsecond clock.
fn sent_before(a: u32, b: u32) -> bool {
    let d = b.wrapping_sub(a);
    d != 0 && d < 0x8000_0000
}

/// `a - b` on the wrapping microsecond clock, as a signed number of microseconds.
fn sent_diff_us(a: u32, b: u32) -> i64 {
    let d = i64::from(a.wrapping_sub(b));
    if d >= 1 << 31 { d - (1 << 32) } else { d }
}

/// The receiver-side metric state of one connection.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    open: Option<Open>,
    /// Arrival and sending time of the previous stamped packet.
    prev: Option<(Time, u32)>,
    /// Latest sending time seen (the paper's maximum sending time).
    max_sent: Option<u32>,
    holes: Holes,
}

impl Metrics {
    /// No arrivals yet.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Records an arrival. `interval` is the sampling interval to use if this arrival opens a
    /// new one (at least [`MIN_INTERVAL`]). Returns the interval this arrival closed, if any.
    pub fn on_arrival(&mut self, a: &Arrival, interval: Duration) -> Option<IntervalSample> {
        let closed = match self.open {
            Some(open) if a.at >= open.start.saturating_add(open.length) => {
                self.open = None;
                Some(self.close(&open))
            }
            _ => None,
        };
        let open = self.open.get_or_insert(Open {
            start: a.at,
            length: interval.max(MIN_INTERVAL),
            packets: 0,
            bytes: 0,
            idd_sum_us: 0.0,
            idd_count: 0,
            stamped: 0,
            out_of_order: 0,
        });
        open.packets = open.packets.saturating_add(1);
        open.bytes = open.bytes.saturating_add(a.len);
        self.holes.on_segment(a.seq, a.seq.saturating_add(a.len));
        if let Some(sent) = a.sent_us {
            open.stamped = open.stamped.saturating_add(1);
            if let Some((prev_at, prev_sent)) = self.prev {
                let iad_us = a.at.saturating_since(prev_at).as_nanos() as f64 / 1e3;
                // An i64 of microseconds below 2^31 is exact in an f64.
                let sent_gap_us = sent_diff_us(sent, prev_sent) as f64;
                open.idd_sum_us += iad_us - sent_gap_us;
                open.idd_count = open.idd_count.saturating_add(1);
            }
            self.prev = Some((a.at, sent));
            match self.max_sent {
                Some(max) if sent_before(sent, max) => {
                    open.out_of_order = open.out_of_order.saturating_add(1);
                }
                _ => self.max_sent = Some(sent),
            }
        }
        closed
    }

    fn close(&self, open: &Open) -> IntervalSample {
        let missing = self.holes.missing();
        let denominator = missing.saturating_add(open.bytes);
        IntervalSample {
            start: open.start,
            length: open.length,
            packets: open.packets,
            bytes: open.bytes,
            idd_us: (open.idd_count > 0).then(|| open.idd_sum_us / f64::from(open.idd_count)),
            stt_bytes_per_s: open.bytes as f64 / open.length.as_secs_f64(),
            por: (open.stamped > 0).then(|| f64::from(open.out_of_order) / f64::from(open.stamped)),
            plr: if denominator == 0 {
                0.0
            } else {
                missing as f64 / denominator as f64
            },
        }
    }

    /// Bytes currently missing below the highest byte received.
    pub fn missing_bytes(&self) -> u64 {
        self.holes.missing()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_millis(100);

    fn at_ms(ms: u64, seq: u64, sent_ms: Option<u32>) -> Arrival {
        Arrival {
            at: Time::from_millis(ms),
            seq,
            len: 1000,
            sent_us: sent_ms.map(|s| s * 1000),
        }
    }

    /// Feeds arrivals and returns the intervals they closed.
    fn run(m: &mut Metrics, arrivals: &[Arrival]) -> Vec<IntervalSample> {
        arrivals.iter().filter_map(|a| m.on_arrival(a, T)).collect()
    }

    #[test]
    fn test_idd_of_a_building_queue_is_the_added_queueing_per_packet() {
        // Sent every 10 ms; each packet waits 2 ms longer than the one before.
        let mut m = Metrics::new();
        let arrivals: Vec<_> = (0..11u32)
            .map(|i| {
                at_ms(
                    50 + 12 * u64::from(i),
                    1 + 1000 * u64::from(i),
                    Some(10 * i),
                )
            })
            .collect();
        let closed = run(&mut m, &arrivals);
        assert_eq!(closed.len(), 1, "the arrival at 158 ms closes [50, 150)");
        let s = closed[0];
        assert_eq!(s.start, Time::from_millis(50));
        assert_eq!(s.packets, 9, "arrivals at 50..=146 ms");
        let idd = s.idd_us.expect("stamped");
        assert!((idd - 2000.0).abs() < 1e-6, "{idd}");
        assert_eq!(s.por, Some(0.0));
        assert_eq!(s.plr, 0.0);
        assert!((s.stt_bytes_per_s - 9000.0 / 0.1).abs() < 1e-6);
    }

    #[test]
    fn test_idd_ignores_sender_pauses_and_losses() {
        // Constant delay 30 ms: a pause at the sender and a lost packet change the
        // inter-arrival gaps but not IDD.
        let mut m = Metrics::new();
        let sends = [0u32, 10, 20, 60, 70, 90, 100];
        let mut arrivals: Vec<_> = sends
            .iter()
            .enumerate()
            .map(|(i, &s)| at_ms(u64::from(s) + 30, 1 + 1000 * i as u64, Some(s)))
            .collect();
        arrivals.push(at_ms(500, 99_001, Some(470))); // closes the interval
        let closed = run(&mut m, &arrivals);
        assert_eq!(closed[0].idd_us, Some(0.0));
    }

    #[test]
    fn test_por_counts_packets_sent_before_the_latest_seen() {
        // Sent at 0..50 ms in order, delivered 0, 1, 4, 2, 3, 5 (a route change: the packets
        // on the old path arrive after those on the new one).
        let mut m = Metrics::new();
        let order = [0u32, 1, 4, 2, 3, 5];
        let mut arrivals: Vec<_> = order
            .iter()
            .enumerate()
            .map(|(k, &i)| at_ms(20 + k as u64, 1 + 1000 * u64::from(i), Some(10 * i)))
            .collect();
        arrivals.push(at_ms(200, 6001, Some(60)));
        let s = run(&mut m, &arrivals)[0];
        assert_eq!(s.packets, 6);
        let por = s.por.expect("stamped");
        assert!((por - 2.0 / 6.0).abs() < 1e-12, "{por}");
        // Reordering is not loss: every hole was filled by the end of the interval.
        assert_eq!(s.plr, 0.0);
    }

    #[test]
    fn test_retransmission_is_not_out_of_order() {
        // A retransmission fills an old hole but carries a new sending time.
        let mut m = Metrics::new();
        let s = run(
            &mut m,
            &[
                at_ms(10, 1, Some(0)),
                at_ms(11, 2001, Some(2)),
                at_ms(40, 1001, Some(30)),
                at_ms(200, 3001, Some(190)),
            ],
        )[0];
        assert_eq!(s.por, Some(0.0));
    }

    #[test]
    fn test_plr_counts_missing_bytes_in_the_receive_window() {
        let mut m = Metrics::new();
        // 10 segments, the 3rd and 7th lost (not yet retransmitted when the interval closes).
        let arrivals: Vec<_> = (0..10u64)
            .filter(|i| *i != 2 && *i != 6)
            .map(|i| at_ms(10 + i, 1 + 1000 * i, None))
            .chain([at_ms(150, 10_001, None)])
            .collect();
        let s = run(&mut m, &arrivals)[0];
        assert_eq!(s.packets, 8);
        assert!((s.plr - 2000.0 / 10_000.0).abs() < 1e-12, "{}", s.plr);
        assert_eq!(s.idd_us, None, "no sending times, no IDD");
        assert_eq!(s.por, None);
        // The retransmissions fill the holes; the next interval sees no loss.
        let s2 = run(
            &mut m,
            &[
                at_ms(160, 2001, None),
                at_ms(161, 6001, None),
                at_ms(300, 11_001, None),
            ],
        )[0];
        assert_eq!(m.missing_bytes(), 0);
        assert_eq!(s2.plr, 0.0);
    }

    #[test]
    fn test_interval_length_is_fixed_when_it_opens_and_gaps_make_no_sample() {
        let mut m = Metrics::new();
        assert_eq!(
            m.on_arrival(&at_ms(0, 1, None), Duration::from_millis(50)),
            None
        );
        assert_eq!(m.on_arrival(&at_ms(40, 1001, None), T), None);
        // A long silence, then one arrival: one sample for the interval that had data.
        let s = m
            .on_arrival(&at_ms(5000, 2001, None), T)
            .expect("closes the first interval");
        assert_eq!(s.length, Duration::from_millis(50));
        assert_eq!(s.packets, 2);
        assert!((s.stt_bytes_per_s - 2000.0 / 0.05).abs() < 1e-6);
        // The new interval opened at 5000 ms with the length given then.
        let s = m
            .on_arrival(&at_ms(5100, 3001, None), Duration::ZERO)
            .expect("closes at 5100 ms");
        assert_eq!(s.start, Time::from_millis(5000));
        assert_eq!(s.length, T);
    }

    #[test]
    fn test_sending_clock_wraps() {
        assert!(sent_before(u32::MAX - 5, 3));
        assert!(!sent_before(3, u32::MAX - 5));
        assert_eq!(sent_diff_us(3, u32::MAX - 5), 9);
        assert_eq!(sent_diff_us(u32::MAX - 5, 3), -9);
        let mut m = Metrics::new();
        let base = u32::MAX - 1500;
        let s = run(
            &mut m,
            &[
                Arrival {
                    at: Time::from_millis(10),
                    seq: 1,
                    len: 100,
                    sent_us: Some(base),
                },
                Arrival {
                    at: Time::from_millis(13),
                    seq: 101,
                    len: 100,
                    sent_us: Some(base.wrapping_add(2000)),
                },
                at_ms(500, 201, Some(400)),
            ],
        )[0];
        let idd = s.idd_us.expect("stamped");
        assert!((idd - 1000.0).abs() < 1e-6, "{idd}");
        assert_eq!(s.por, Some(0.0));
    }

    #[test]
    fn test_hole_list_is_bounded() {
        let mut m = Metrics::new();
        for i in 0..(MAX_HOLES as u64 + 10) {
            m.on_arrival(&at_ms(1, 1 + 2000 * i, None), T);
        }
        assert_eq!(m.holes.list.len(), MAX_HOLES);
    }
}
