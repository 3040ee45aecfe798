//! Constant-bit-rate UDP traffic: a source that emits fixed-size datagrams at a fixed rate,
//! and a sink that counts them and infers loss from sequence gaps. Used as cross traffic.
//!
//! Each datagram starts with a 12-byte header: a 4-byte sequence number and the 8-byte
//! send time in nanoseconds (so the sink can measure one-way delay).

use crate::time::Time;
use crate::wire::{Reader, WireError, Writer};
use std::time::Duration;

/// The CBR datagram header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CbrHeader {
    /// Sequence number, from 0.
    pub seq: u32,
    /// Send time.
    pub sent_at: Time,
}

impl CbrHeader {
    /// Encoded length.
    pub const LEN: usize = 12;

    /// Parses a header from the start of a datagram.
    pub fn parse(buf: &[u8]) -> Result<CbrHeader, WireError> {
        let mut r = Reader::new(buf);
        Ok(CbrHeader {
            seq: r.u32()?,
            sent_at: Time::from_nanos(r.u64()?),
        })
    }

    /// Writes the header; `buf` must hold [`CbrHeader::LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        w.u32(self.seq)?;
        w.u64(self.sent_at.as_nanos())?;
        Ok(Self::LEN)
    }
}

/// A datagram to send: header plus virtual payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CbrDatagram {
    /// Header.
    pub header: CbrHeader,
    /// Payload bytes after the header (datagram size minus the header).
    pub payload_len: u32,
}

/// A constant-bit-rate source.
#[derive(Clone, Debug)]
pub struct CbrSource {
    interval: Duration,
    payload_len: u32,
    next_send: Time,
    stop: Time,
    seq: u32,
    sent_bytes: u64,
}

impl CbrSource {
    /// A source sending `datagram_bytes`-byte datagrams (UDP payload, header included) at
    /// `rate_bytes_per_s`, from `start` until `stop`. A zero rate sends nothing.
    pub fn new(rate_bytes_per_s: f64, datagram_bytes: u32, start: Time, stop: Time) -> CbrSource {
        let header = crate::convert::usize_u32_sat(CbrHeader::LEN);
        let size = datagram_bytes.max(header);
        let interval = crate::time::transmission_time(u64::from(size), rate_bytes_per_s)
            .unwrap_or(Duration::MAX);
        CbrSource {
            interval,
            payload_len: size - header,
            next_send: start,
            stop: if interval == Duration::MAX {
                start
            } else {
                stop
            },
            seq: 0,
            sent_bytes: 0,
        }
    }

    /// The next datagram if one is due at `now`.
    pub fn poll_transmit(&mut self, now: Time) -> Option<CbrDatagram> {
        if self.next_send > now || self.next_send >= self.stop {
            return None;
        }
        let d = CbrDatagram {
            header: CbrHeader {
                seq: self.seq,
                sent_at: now,
            },
            payload_len: self.payload_len,
        };
        self.seq = self.seq.wrapping_add(1);
        // Schedule from the nominal time, not `now`, so the long-run rate is exact.
        self.next_send += self.interval;
        self.sent_bytes += u64::from(self.payload_len) + CbrHeader::LEN as u64;
        Some(d)
    }

    /// When the next datagram is due.
    pub fn poll_timeout(&self) -> Option<Time> {
        (self.next_send < self.stop).then_some(self.next_send)
    }

    /// Datagrams sent.
    pub fn sent(&self) -> u32 {
        self.seq
    }

    /// Bytes sent (UDP payload).
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes
    }
}

/// A sink that counts received datagrams and infers losses from sequence gaps.
#[derive(Clone, Debug, Default)]
pub struct CbrSink {
    received: u64,
    received_bytes: u64,
    highest: Option<u32>,
    delay_sum: Duration,
}

impl CbrSink {
    /// A sink that has seen nothing.
    pub fn new() -> CbrSink {
        CbrSink::default()
    }

    /// Counts an arriving datagram of `bytes` (UDP payload, header included).
    pub fn handle_datagram(&mut self, now: Time, header: &CbrHeader, bytes: u64) {
        self.received += 1;
        self.received_bytes += bytes;
        self.highest = Some(self.highest.map_or(header.seq, |h| h.max(header.seq)));
        self.delay_sum += now - header.sent_at;
    }

    /// Datagrams received.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Bytes received.
    pub fn received_bytes(&self) -> u64 {
        self.received_bytes
    }

    /// Datagrams missing below the highest sequence number seen.
    pub fn lost(&self) -> u64 {
        self.highest
            .map_or(0, |h| (u64::from(h) + 1).saturating_sub(self.received))
    }

    /// Mean one-way delay.
    pub fn mean_delay(&self) -> Option<Duration> {
        (self.received > 0).then(|| self.delay_sum / crate::convert::u32_sat(self.received))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_source_sends_at_exact_rate() {
        // 1000-byte datagrams at 10 kB/s: one every 100 ms, 10 per second.
        let mut src = CbrSource::new(10_000.0, 1000, Time::ZERO, Time::from_secs(1));
        let mut sent = 0;
        let mut now = Time::ZERO;
        while let Some(t) = src.poll_timeout() {
            now = t;
            while src.poll_transmit(now).is_some() {
                sent += 1;
            }
        }
        assert_eq!(sent, 10);
        assert_eq!(now, Time::from_millis(900));
        assert_eq!(src.sent_bytes(), 10_000);
    }

    #[test]
    fn test_sink_counts_gaps_as_loss() {
        let mut sink = CbrSink::new();
        for seq in [0u32, 1, 3, 4, 7] {
            let h = CbrHeader {
                seq,
                sent_at: Time::ZERO,
            };
            sink.handle_datagram(Time::from_millis(10), &h, 100);
        }
        assert_eq!(sink.received(), 5);
        assert_eq!(sink.lost(), 3);
        assert_eq!(sink.mean_delay(), Some(Duration::from_millis(10)));
    }

    #[test]
    fn test_header_round_trips_and_truncation_errors() {
        let h = CbrHeader {
            seq: 77,
            sent_at: Time::from_millis(5),
        };
        let mut buf = [0u8; CbrHeader::LEN];
        assert_eq!(h.emit(&mut buf), Ok(CbrHeader::LEN));
        assert_eq!(CbrHeader::parse(&buf), Ok(h));
        assert!(CbrHeader::parse(&buf[..5]).is_err());
    }
}
