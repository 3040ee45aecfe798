//! Wire formats of a TPBA flow (`papers/002… §5.1`: a flow pair — UDP and TCP — plus "another
//! UDP flow … for exchanging RTCP messages"). The layouts are ours; the paper used RTP/RTCP.
//!
//! ```text
//! 0        1        2        3
//! +--------+--------+--------+---------------- fields (big-endian) -----------------------
//! |version |  type  |
//! FRAGMENT (1): flags u8 | adu_seq u64 | adu_len u32 | offset u32 | len u32 | dgram_seq u32
//!               | sent_at_ns u64                       then `len` bytes of the ADU
//! REPORT (2):   highest_seq u32 | cumulative_lost u32 | fraction_lost u8 | jitter_us u32
//!               | echo_sent_at_ns u64 | delay_us u32 | received_bytes u64
//!               | bottleneck_bytes_per_s u64
//! ```
//!
//! A fragment carries bytes `offset..offset+len` of ADU number `adu_seq` (ADUs are numbered
//! from 0 per flow, across both paths). On UDP each datagram is one fragment and `dgram_seq`
//! numbers the datagrams (for loss and jitter); on TCP each ADU is one fragment written to
//! the stream, flag [`FLAG_TCP`] set and `dgram_seq` 0.
//!
//! The report is RTCP's receiver report block (RFC 3550 §6.4.1) reduced to one source:
//! extended highest sequence number, cumulative and fractional loss, interarrival jitter, and
//! an echo of the last datagram's send time with the delay since its arrival (the sender's
//! RTT is `now − echo − delay`), plus the bytes received and, for LDA, a packet-pair
//! estimate of the bottleneck (0 when unknown).
//!
//! Contract (as for every adaptnet format): `parse` never panics on any input; `emit` never
//! panics and fails cleanly on a buffer shorter than `buffer_len()`.

use crate::time::Time;
use crate::wire::{Reader, WireError, Writer};
use std::time::Duration;

/// The version this build speaks.
pub const VERSION: u8 = 1;
const T_FRAGMENT: u8 = 1;
const T_REPORT: u8 = 2;
/// Fragment flag: carried on the TCP path.
pub const FLAG_TCP: u8 = 0x01;
const FLAGS_KNOWN: u8 = FLAG_TCP;

/// Which kind of packet a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// A [`FragmentHeader`] and its bytes.
    Fragment,
    /// A [`ReceiverReport`].
    Report,
}

/// Reads the version and type of a packet.
pub fn packet_kind(buf: &[u8]) -> Result<PacketKind, WireError> {
    let mut r = Reader::new(buf);
    let version = r.u8()?;
    if version != VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    match r.u8()? {
        T_FRAGMENT => Ok(PacketKind::Fragment),
        T_REPORT => Ok(PacketKind::Report),
        other => Err(WireError::UnknownKind {
            field: "tpba type",
            value: u32::from(other),
        }),
    }
}

fn expect_kind(r: &mut Reader<'_>, kind: u8) -> Result<(), WireError> {
    let version = r.u8()?;
    if version != VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    let t = r.u8()?;
    if t != kind {
        return Err(WireError::UnknownKind {
            field: "tpba type",
            value: u32::from(t),
        });
    }
    Ok(())
}

fn micros_u32(d: Duration) -> u32 {
    crate::convert::u32_sat(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The header in front of every piece of ADU data, on either path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentHeader {
    /// Carried on TCP.
    pub tcp: bool,
    /// ADU number, from 0 per flow.
    pub adu_seq: u64,
    /// Length of the whole ADU.
    pub adu_len: u32,
    /// First ADU byte carried.
    pub offset: u32,
    /// Bytes carried (they follow the header).
    pub len: u32,
    /// UDP datagram number, from 0 per flow (0 on TCP).
    pub dgram_seq: u32,
    /// Send time.
    pub sent_at: Time,
}

impl FragmentHeader {
    /// Encoded length.
    pub const LEN: usize = 35;

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Parses a header; never panics. Rejects a fragment that reaches past its ADU.
    pub fn parse(buf: &[u8]) -> Result<FragmentHeader, WireError> {
        let mut r = Reader::new(buf);
        expect_kind(&mut r, T_FRAGMENT)?;
        let flags = r.u8()?;
        if flags & !FLAGS_KNOWN != 0 {
            return Err(WireError::Malformed("tpba fragment flags"));
        }
        let h = FragmentHeader {
            tcp: flags & FLAG_TCP != 0,
            adu_seq: r.u64()?,
            adu_len: r.u32()?,
            offset: r.u32()?,
            len: r.u32()?,
            dgram_seq: r.u32()?,
            sent_at: Time::from_nanos(r.u64()?),
        };
        match h.offset.checked_add(h.len) {
            Some(end) if end <= h.adu_len => Ok(h),
            _ => Err(WireError::Malformed("tpba fragment range")),
        }
    }

    /// Parses a whole UDP datagram: the header and exactly `len` bytes after it.
    pub fn parse_datagram(buf: &[u8]) -> Result<(FragmentHeader, &[u8]), WireError> {
        let h = FragmentHeader::parse(buf)?;
        let payload = buf.get(Self::LEN..).unwrap_or_default();
        if payload.len() != h.len as usize {
            return Err(WireError::Malformed("tpba fragment length"));
        }
        Ok((h, payload))
    }

    /// Writes the header.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        w.u8(VERSION)?;
        w.u8(T_FRAGMENT)?;
        w.u8(if self.tcp { FLAG_TCP } else { 0 })?;
        w.u64(self.adu_seq)?;
        w.u32(self.adu_len)?;
        w.u32(self.offset)?;
        w.u32(self.len)?;
        w.u32(self.dgram_seq)?;
        w.u64(self.sent_at.as_nanos())?;
        Ok(w.position())
    }

    /// The header followed by `payload`, as one buffer.
    pub fn to_bytes(&self, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; Self::LEN + payload.len()];
        // The buffer has LEN bytes for the header: emit cannot fail.
        let _ = self.emit(&mut out);
        if let Some(rest) = out.get_mut(Self::LEN..) {
            rest.copy_from_slice(payload);
        }
        out
    }
}

/// The RTCP-like receiver report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiverReport {
    /// Highest UDP datagram number received (`expected = highest_seq + 1`).
    pub highest_seq: u32,
    /// Datagrams lost since the flow began (expected − received, never negative).
    pub cumulative_lost: u32,
    /// RFC 3550's "fraction lost" since the previous report, in 1/256.
    pub fraction_lost: u8,
    /// Interarrival jitter (RFC 3550 §6.4.1), microseconds.
    pub jitter_us: u32,
    /// Send time of the most recent datagram received.
    pub echo_sent_at: Time,
    /// Time between that datagram's arrival and this report, microseconds.
    pub delay_us: u32,
    /// Data bytes received on both paths since the flow began.
    pub received_bytes: u64,
    /// Packet-pair bottleneck estimate, bytes/s; 0 when unknown.
    pub bottleneck_bytes_per_s: u64,
}

impl ReceiverReport {
    /// Encoded length.
    pub const LEN: usize = 43;

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Parses a report; never panics.
    pub fn parse(buf: &[u8]) -> Result<ReceiverReport, WireError> {
        let mut r = Reader::new(buf);
        expect_kind(&mut r, T_REPORT)?;
        Ok(ReceiverReport {
            highest_seq: r.u32()?,
            cumulative_lost: r.u32()?,
            fraction_lost: r.u8()?,
            jitter_us: r.u32()?,
            echo_sent_at: Time::from_nanos(r.u64()?),
            delay_us: r.u32()?,
            received_bytes: r.u64()?,
            bottleneck_bytes_per_s: r.u64()?,
        })
    }

    /// Writes the report.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        w.u8(VERSION)?;
        w.u8(T_REPORT)?;
        w.u32(self.highest_seq)?;
        w.u32(self.cumulative_lost)?;
        w.u8(self.fraction_lost)?;
        w.u32(self.jitter_us)?;
        w.u64(self.echo_sent_at.as_nanos())?;
        w.u32(self.delay_us)?;
        w.u64(self.received_bytes)?;
        w.u64(self.bottleneck_bytes_per_s)?;
        Ok(w.position())
    }

    /// The report as one buffer.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; Self::LEN];
        let _ = self.emit(&mut out);
        out
    }

    /// The delay since the echoed datagram arrived.
    pub fn delay(&self) -> Duration {
        Duration::from_micros(u64::from(self.delay_us))
    }

    /// Builds the delay field from a duration (saturating).
    pub fn delay_field(d: Duration) -> u32 {
        micros_u32(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAG: FragmentHeader = FragmentHeader {
        tcp: false,
        adu_seq: 9,
        adu_len: 5120,
        offset: 512,
        len: 512,
        dgram_seq: 77,
        sent_at: Time::from_millis(1234),
    };

    const RR: ReceiverReport = ReceiverReport {
        highest_seq: 1000,
        cumulative_lost: 12,
        fraction_lost: 3,
        jitter_us: 450,
        echo_sent_at: Time::from_millis(99),
        delay_us: 2500,
        received_bytes: 1 << 33,
        bottleneck_bytes_per_s: 150_000,
    };

    #[test]
    fn test_fragment_round_trips() {
        let bytes = FRAG.to_bytes(&[7u8; 512]);
        assert_eq!(packet_kind(&bytes), Ok(PacketKind::Fragment));
        let (h, payload) = FragmentHeader::parse_datagram(&bytes).unwrap();
        assert_eq!(h, FRAG);
        assert_eq!(payload, &[7u8; 512][..]);
        let tcp = FragmentHeader { tcp: true, ..FRAG };
        assert_eq!(FragmentHeader::parse(&tcp.to_bytes(&[])), Ok(tcp));
    }

    #[test]
    fn test_fragment_rejects_bad_ranges_lengths_and_flags() {
        let past_end = FragmentHeader {
            offset: 5000,
            ..FRAG
        };
        assert!(FragmentHeader::parse(&past_end.to_bytes(&[])).is_err());
        let overflow = FragmentHeader {
            offset: u32::MAX,
            len: 2,
            ..FRAG
        };
        assert!(FragmentHeader::parse(&overflow.to_bytes(&[])).is_err());
        // Payload shorter than `len`.
        let bytes = FRAG.to_bytes(&[0u8; 512]);
        assert!(FragmentHeader::parse_datagram(&bytes[..500]).is_err());
        let mut bad_flags = bytes.clone();
        if let Some(f) = bad_flags.get_mut(2) {
            *f = 0x80;
        }
        assert!(FragmentHeader::parse(&bad_flags).is_err());
        let mut bad_version = bytes;
        if let Some(v) = bad_version.get_mut(0) {
            *v = 9;
        }
        assert_eq!(
            FragmentHeader::parse(&bad_version),
            Err(WireError::UnsupportedVersion(9))
        );
    }

    #[test]
    fn test_report_round_trips_and_truncation_errors() {
        let bytes = RR.to_bytes();
        assert_eq!(bytes.len(), ReceiverReport::LEN);
        assert_eq!(packet_kind(&bytes), Ok(PacketKind::Report));
        assert_eq!(ReceiverReport::parse(&bytes), Ok(RR));
        for n in 0..ReceiverReport::LEN {
            assert!(ReceiverReport::parse(&bytes[..n]).is_err());
        }
        assert!(FragmentHeader::parse(&bytes).is_err());
        let mut small = [0u8; 10];
        assert!(RR.emit(&mut small).is_err());
    }

    proptest::proptest! {
        #[test]
        fn prop_parsers_never_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let _ = packet_kind(&data);
            let _ = FragmentHeader::parse_datagram(&data);
            let _ = ReceiverReport::parse(&data);
        }
    }
}
