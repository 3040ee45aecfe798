//! The layered audio server of papers/003 §3.2.2 and §4.2: a synchronous sender over UDP that
//! has no feedback of its own. It learns its rate from the CM only — `cm_query` at start, then
//! `change_rate` callbacks driven by the CM's probes — and always sends the highest encoding
//! whose bit rate does not exceed that rate.
//!
//! Paper constants: encodings of 10, 20, 40, 80, 160 and 320 kbit/s; 1 KB packets (we take
//! 1 KB = 1,000 bytes, so 80 kbit/s is 10 packets per second).
//!
//! # Driving a `LayeredAudioSender`
//!
//! ```text
//! let flow = cm.open(now, dest, key, FlowOptions::probed())?;       // cm_open
//! let mut audio = LayeredAudioSender::new(flow, AudioConfig::paper());
//! audio.start(now, cm.query(flow)?.rate_bytes_per_s);               // cm_query
//! on CmEvent::RateChange { flow, rate_bytes_per_s, .. } for this flow:
//!     audio.handle_change_rate(now, rate_bytes_per_s)               // change_rate
//! while let Some(p) = audio.poll_transmit(now) {
//!     send p.bytes to dest (and give the receiver CM `handle_data(key, p.bytes)`);
//!     cm.notify(now, flow, p.bytes)                                 // cm_notify
//! }
//! arm a timer at audio.poll_timeout()
//! ```

use super::FlowId;
use crate::time::Time;
use std::time::Duration;

/// Audio sender parameters.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AudioConfig {
    /// Available encodings, bit/s, ascending.
    pub encodings_bps: Vec<u64>,
    /// Bytes per packet.
    pub packet_bytes: u32,
}

impl AudioConfig {
    /// papers/003 §4.2: 10–320 kbit/s in factors of two, 1 KB packets.
    pub fn paper() -> AudioConfig {
        AudioConfig {
            encodings_bps: vec![10_000, 20_000, 40_000, 80_000, 160_000, 320_000],
            packet_bytes: 1000,
        }
    }
}

/// One packet to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AudioPacket {
    /// Sequence number from 0.
    pub seq: u32,
    /// UDP payload bytes.
    pub bytes: u64,
    /// The encoding this packet carries, bit/s.
    pub encoding_bps: u64,
}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AudioStats {
    /// Packets sent.
    pub packets: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Encoding changes.
    pub switches: u64,
    /// Packets sent at each encoding (same order as `encodings_bps`).
    pub packets_per_encoding: Vec<u64>,
}

/// The layered audio sender.
#[derive(Clone, Debug)]
pub struct LayeredAudioSender {
    config: AudioConfig,
    flow: FlowId,
    encoding: usize,
    next_send: Option<Time>,
    last_sent: Option<Time>,
    seq: u32,
    stats: AudioStats,
}

impl LayeredAudioSender {
    /// A stopped sender for CM flow `flow`. An empty encoding list is replaced by the paper's.
    pub fn new(flow: FlowId, mut config: AudioConfig) -> LayeredAudioSender {
        config.encodings_bps.retain(|b| *b > 0);
        if config.encodings_bps.is_empty() {
            config.encodings_bps = AudioConfig::paper().encodings_bps;
        }
        config.encodings_bps.sort_unstable();
        config.packet_bytes = config.packet_bytes.max(1);
        let n = config.encodings_bps.len();
        LayeredAudioSender {
            config,
            flow,
            encoding: 0,
            next_send: None,
            last_sent: None,
            seq: 0,
            stats: AudioStats {
                packets_per_encoding: vec![0; n],
                ..AudioStats::default()
            },
        }
    }

    /// The CM flow.
    pub fn flow(&self) -> FlowId {
        self.flow
    }

    /// The encoding in use, bit/s.
    pub fn encoding_bps(&self) -> u64 {
        // `encoding` indexes `encodings_bps`, which is never empty (see `new`).
        self.config
            .encodings_bps
            .get(self.encoding)
            .copied()
            .unwrap_or_default()
    }

    /// Counters.
    pub fn stats(&self) -> &AudioStats {
        &self.stats
    }

    /// The highest encoding not above `rate_bytes_per_s` (the lowest if none fits).
    fn pick(&self, rate_bytes_per_s: f64) -> usize {
        let rate_bps = rate_bytes_per_s * 8.0;
        self.config
            .encodings_bps
            .iter()
            .rposition(|b| *b as f64 <= rate_bps)
            .unwrap_or(0)
    }

    fn interval(&self) -> Duration {
        let bits = u64::from(self.config.packet_bytes) * 8;
        Duration::from_secs_f64(bits as f64 / self.encoding_bps() as f64)
    }

    /// Starts sending at `now`, with the rate from `cm_query` (None: not yet known — the
    /// lowest encoding, as RFC 3124 §5.1.3 suggests for invalid estimates).
    pub fn start(&mut self, now: Time, rate_bytes_per_s: Option<f64>) {
        self.encoding = rate_bytes_per_s.map_or(0, |r| self.pick(r));
        self.next_send = Some(now);
    }

    /// Stops sending.
    pub fn stop(&mut self) {
        self.next_send = None;
    }

    /// `change_rate(newrate)`: switches to the best encoding for the flow's new rate.
    pub fn handle_change_rate(&mut self, now: Time, rate_bytes_per_s: f64) {
        let idx = self.pick(rate_bytes_per_s);
        if idx == self.encoding {
            return;
        }
        self.encoding = idx;
        self.stats.switches += 1;
        if self.next_send.is_some() {
            let next = self.last_sent.map_or(now, |t| t + self.interval());
            self.next_send = Some(next.max(now));
        }
    }

    /// The next packet, if one is due.
    pub fn poll_transmit(&mut self, now: Time) -> Option<AudioPacket> {
        let due = self.next_send?;
        if due > now {
            return None;
        }
        let p = AudioPacket {
            seq: self.seq,
            bytes: u64::from(self.config.packet_bytes),
            encoding_bps: self.encoding_bps(),
        };
        self.seq = self.seq.wrapping_add(1);
        self.stats.packets += 1;
        self.stats.bytes += p.bytes;
        if let Some(n) = self.stats.packets_per_encoding.get_mut(self.encoding) {
            *n += 1;
        }
        self.last_sent = Some(due);
        // Schedule from the nominal time so the long-run rate is exact.
        self.next_send = Some(due + self.interval());
        Some(p)
    }

    /// When the next packet is due.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.next_send
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_picks_highest_encoding_not_above_rate() {
        let mut a = LayeredAudioSender::new(FlowId(0), AudioConfig::paper());
        a.start(Time::ZERO, Some(12_500.0)); // 100 kbit/s
        assert_eq!(a.encoding_bps(), 80_000);
        a.handle_change_rate(Time::ZERO, 20_000.0); // exactly 160 kbit/s
        assert_eq!(a.encoding_bps(), 160_000);
        a.handle_change_rate(Time::ZERO, 100.0);
        assert_eq!(a.encoding_bps(), 10_000, "lowest when nothing fits");
        a.start(Time::ZERO, None);
        assert_eq!(a.encoding_bps(), 10_000);
    }

    #[test]
    fn test_sends_at_encoding_rate_and_follows_change_rate() {
        let mut a = LayeredAudioSender::new(FlowId(0), AudioConfig::paper());
        a.start(Time::ZERO, Some(10_000.0)); // 80 kbit/s: a 1000-byte packet every 100 ms
        let mut sent = 0;
        while let Some(t) = a.poll_timeout() {
            if t >= Time::from_secs(1) {
                break;
            }
            while a.poll_transmit(t).is_some() {
                sent += 1;
            }
        }
        assert_eq!(sent, 10);
        a.handle_change_rate(Time::from_secs(1), 2_500.0); // 20 kbit/s: every 400 ms
        let t1 = a.poll_timeout().expect("running");
        assert!(a.poll_transmit(t1).is_some());
        assert_eq!(a.poll_timeout(), Some(t1 + Duration::from_millis(400)));
        assert_eq!(a.stats().switches, 1);
    }
}
