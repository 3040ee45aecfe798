//! Wire formats of a TPBA flow (`papers/002… §5.1`: a flow pair — UDP and TCP — plus "another
//! UDP flow … for exchanging RTCP messages"). The layouts are ours; the paper used RTP/RTCP.
//!
//! ```text
//! 0        1        2        3
//! +--------+--------+--------+---------------- fields (big-endian) -----------------------
//! |version |  type  |
//! FRAGMENT on UDP (1), 22 bytes: dgram_seq u32 | sent_at_us u32 | adu_seq u32 | adu_len u32
//!               | offset u32                    then the rest of the datagram: ADU bytes
//! FRAGMENT on TCP (3), 10 bytes: adu_seq u32 | adu_len u32      then the whole ADU
//! REPORT (2):   highest_seq u32 | cumulative_lost u32 | fraction_lost u8 | jitter_us u32
//!               | echo_sent_at_ns u64 | delay_us u32 | received_bytes u64
//!               | bottleneck_bytes_per_s u64
//! ```
//!
//! A fragment carries bytes `offset..offset+len` of ADU number `adu_seq` (ADUs are numbered
//! from 0 per flow, across both paths). On UDP each datagram is one fragment, its length
//! implied by the datagram's, and `dgram_seq` numbers the datagrams (for loss and jitter); on
//! TCP each ADU is one fragment written to the stream (offset 0, `len = adu_len`).
//!
//! Size (version 2): RTP's fixed header, which the paper's flows carried, is 12 bytes; ours
//! was 35, which cost §6.1's 64-byte ADU1 a third of its goodput (64 of every 99 paced bytes).
//! Version 2 keeps what a receiver needs without per-flow state in the parser — ADU number,
//! length and offset (RTP leaves those to a payload format), a datagram number for loss and a
//! send stamp for jitter and RTT — in 22 bytes on UDP (64 of 86: 0.74), and drops what the
//! TCP path never used (10 bytes). Like RTP's, the numbers and the stamp are 32 bits: the
//! receiver extends `adu_seq` against the next ADU it expects (so a flow may carry more than
//! 2^32 ADUs), and `sent_at_us` is the send time in microseconds modulo 2^32 (it wraps every
//! 71.6 minutes; jitter uses differences and the sender unwraps the echo against its clock,
//! as RFC 3550 §6.4.1 does with RTP timestamps).
//!
//! The report is RTCP's receiver report block (RFC 3550 §6.4.1) reduced to one source:
//! extended highest sequence number, cumulative and fractional loss, interarrival jitter, and
//! an echo of the last datagram's send stamp with the delay since its arrival (the sender's
//! RTT is `now − echo − delay`), plus the bytes received and, for LDA, a packet-pair
//! estimate of the bottleneck (0 when unknown). The echo carries the fragment's 32-bit
//! microsecond stamp as a time (`Time::from_micros`); [`unwrap_stamp`] recovers the full time.
//!
//! Contract (as for every adaptnet format): `parse` never panics on any input; `emit` never
//! panics and fails cleanly on a buffer shorter than `buffer_len()`.

use crate::time::Time;
use crate::wire::{Reader, WireError, Writer};
use std::time::Duration;

/// The version this build speaks (2: the compact fragment header).
pub const VERSION: u8 = 2;
const T_FRAGMENT: u8 = 1;
const T_REPORT: u8 = 2;
const T_FRAGMENT_TCP: u8 = 3;

/// The low 32 bits of `x` (what travels of a 64-bit counter).
pub fn low32(x: u64) -> u32 {
    // The mask makes the conversion exact.
    u32::try_from(x & u64::from(u32::MAX)).unwrap_or(u32::MAX)
}

/// A fragment's 32-bit send stamp: microseconds since the flow's clock origin, modulo 2^32.
pub fn stamp_us(t: Time) -> u32 {
    low32(t.as_nanos() / 1_000)
}

/// The latest time at or before `now` whose stamp is `stamp` (an echoed stamp is always from
/// the past; correct while the round trip is shorter than the 71.6-minute wrap).
pub fn unwrap_stamp(now: Time, stamp: u32) -> Time {
    let back_us = stamp_us(now).wrapping_sub(stamp);
    now.saturating_sub(Duration::from_micros(u64::from(back_us)))
}

/// The ADU number whose low 32 bits are `low`, nearest to `expected` (RFC 3550 Appendix A.1's
/// sequence number extension, with 32-bit numbers).
pub fn extend_adu_seq(expected: u64, low: u32) -> u64 {
    const CYCLE: u64 = 1 << 32;
    let candidate = (expected & !(CYCLE - 1)) | u64::from(low);
    if candidate > expected && candidate - expected > CYCLE / 2 && candidate >= CYCLE {
        candidate - CYCLE
    } else if candidate < expected && expected - candidate > CYCLE / 2 {
        candidate.saturating_add(CYCLE)
    } else {
        candidate
    }
}

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
        T_FRAGMENT | T_FRAGMENT_TCP => Ok(PacketKind::Fragment),
        T_REPORT => Ok(PacketKind::Report),
        other => Err(WireError::UnknownKind {
            field: "tpba type",
            value: u32::from(other),
        }),
    }
}

fn expect_kind(r: &mut Reader<'_>, kinds: &[u8]) -> Result<u8, WireError> {
    let version = r.u8()?;
    if version != VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    let t = r.u8()?;
    if !kinds.contains(&t) {
        return Err(WireError::UnknownKind {
            field: "tpba type",
            value: u32::from(t),
        });
    }
    Ok(t)
}

fn micros_u32(d: Duration) -> u32 {
    crate::convert::u32_sat(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The header in front of every piece of ADU data, on either path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentHeader {
    /// Carried on TCP.
    pub tcp: bool,
    /// ADU number, from 0 per flow. Only its low 32 bits travel: [`FragmentHeader::parse`]
    /// returns them, and the receiver extends them with [`extend_adu_seq`].
    pub adu_seq: u64,
    /// Length of the whole ADU.
    pub adu_len: u32,
    /// First ADU byte carried (0 on TCP).
    pub offset: u32,
    /// Bytes carried (they follow the header): implied by the datagram on UDP, `adu_len` on
    /// TCP. [`FragmentHeader::parse`] of a UDP header alone, without its datagram, gives 0.
    pub len: u32,
    /// UDP datagram number, from 0 per flow (0 on TCP, where it does not travel).
    pub dgram_seq: u32,
    /// Send stamp ([`stamp_us`]; 0 on TCP, where it does not travel).
    pub sent_at_us: u32,
}

impl FragmentHeader {
    /// Encoded length on UDP.
    pub const UDP_LEN: usize = 22;
    /// Encoded length on TCP.
    pub const TCP_LEN: usize = 10;

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        if self.tcp {
            Self::TCP_LEN
        } else {
            Self::UDP_LEN
        }
    }

    /// Parses a header; never panics. Rejects a fragment that reaches past its ADU. On UDP
    /// `len` is left 0 (only the datagram knows it: [`FragmentHeader::parse_datagram`]).
    pub fn parse(buf: &[u8]) -> Result<FragmentHeader, WireError> {
        let mut r = Reader::new(buf);
        let t = expect_kind(&mut r, &[T_FRAGMENT, T_FRAGMENT_TCP])?;
        let h = if t == T_FRAGMENT_TCP {
            let adu_seq = u64::from(r.u32()?);
            let adu_len = r.u32()?;
            FragmentHeader {
                tcp: true,
                adu_seq,
                adu_len,
                offset: 0,
                len: adu_len,
                dgram_seq: 0,
                sent_at_us: 0,
            }
        } else {
            let dgram_seq = r.u32()?;
            let sent_at_us = r.u32()?;
            FragmentHeader {
                tcp: false,
                dgram_seq,
                sent_at_us,
                adu_seq: u64::from(r.u32()?),
                adu_len: r.u32()?,
                offset: r.u32()?,
                len: 0,
            }
        };
        h.check_range()?;
        Ok(h)
    }

    fn check_range(&self) -> Result<(), WireError> {
        match self.offset.checked_add(self.len) {
            Some(end) if end <= self.adu_len => Ok(()),
            _ => Err(WireError::Malformed("tpba fragment range")),
        }
    }

    /// Parses a whole UDP datagram: the header and the ADU bytes after it (on the TCP layout,
    /// exactly `adu_len` of them).
    pub fn parse_datagram(buf: &[u8]) -> Result<(FragmentHeader, &[u8]), WireError> {
        let mut h = FragmentHeader::parse(buf)?;
        let payload = buf.get(h.buffer_len()..).unwrap_or_default();
        if h.tcp {
            if payload.len() != h.len as usize {
                return Err(WireError::Malformed("tpba fragment length"));
            }
        } else {
            h.len = u32::try_from(payload.len())
                .map_err(|_| WireError::Malformed("tpba fragment length"))?;
            h.check_range()?;
        }
        Ok((h, payload))
    }

    /// Writes the header. A TCP fragment must carry a whole ADU (offset 0, `len = adu_len`).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        w.u8(VERSION)?;
        // Only the low 32 bits of the ADU number travel (see the module documentation).
        let seq = low32(self.adu_seq);
        if self.tcp {
            if self.offset != 0 || self.len != self.adu_len {
                return Err(WireError::Malformed(
                    "tpba tcp fragment must carry a whole ADU",
                ));
            }
            w.u8(T_FRAGMENT_TCP)?;
            w.u32(seq)?;
            w.u32(self.adu_len)?;
        } else {
            w.u8(T_FRAGMENT)?;
            w.u32(self.dgram_seq)?;
            w.u32(self.sent_at_us)?;
            w.u32(seq)?;
            w.u32(self.adu_len)?;
            w.u32(self.offset)?;
        }
        Ok(w.position())
    }

    /// The header followed by `payload`, as one buffer.
    pub fn to_bytes(&self, payload: &[u8]) -> Vec<u8> {
        let n = self.buffer_len();
        let mut out = vec![0u8; n + payload.len()];
        // The buffer has room for the header; a TCP header that is not a whole ADU is left
        // zero (never produced by the fsocket, which writes whole ADUs).
        let _ = self.emit(&mut out);
        if let Some(rest) = out.get_mut(n..) {
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
    /// Send stamp of the most recent datagram received, as a time ([`stamp_us`] as
    /// microseconds; the sender recovers the full time with [`unwrap_stamp`]).
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
        expect_kind(&mut r, &[T_REPORT])?;
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
        sent_at_us: 1_234_000,
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
        let tcp = FragmentHeader {
            tcp: true,
            offset: 0,
            len: 5120,
            dgram_seq: 0,
            sent_at_us: 0,
            ..FRAG
        };
        let bytes = tcp.to_bytes(&[1u8; 5120]);
        assert_eq!(bytes.len(), FragmentHeader::TCP_LEN + 5120);
        assert_eq!(FragmentHeader::parse(&bytes), Ok(tcp));
        assert_eq!(FragmentHeader::parse_datagram(&bytes).map(|x| x.0), Ok(tcp));
        // A TCP fragment is a whole ADU.
        let part = FragmentHeader { len: 10, ..tcp };
        assert!(part.emit(&mut [0u8; 32]).is_err());
    }

    #[test]
    fn test_fragment_header_is_22_bytes_on_udp_and_10_on_tcp() {
        // §6.1's ADU1: 64 bytes of payload now cost 86 paced bytes, not 99.
        let udp = FRAG.to_bytes(&[0u8; 64]);
        assert_eq!(udp.len(), 86);
        let mut buf = [0u8; 64];
        assert_eq!(FRAG.emit(&mut buf), Ok(22));
        let tcp = FragmentHeader {
            tcp: true,
            offset: 0,
            len: 64,
            adu_len: 64,
            ..FRAG
        };
        assert_eq!(tcp.emit(&mut buf), Ok(10));
    }

    #[test]
    fn test_adu_seq_extends_across_the_32_bit_wrap() {
        let c = 1u64 << 32;
        assert_eq!(extend_adu_seq(5, 7), 7);
        assert_eq!(extend_adu_seq(c - 2, 1), c + 1);
        assert_eq!(extend_adu_seq(c + 1, u32::MAX), c - 1);
        assert_eq!(extend_adu_seq(0, u32::MAX), u64::from(u32::MAX));
        let seq = 3 * c + 17;
        let h = FragmentHeader {
            adu_seq: seq,
            ..FRAG
        };
        let (back, _) = FragmentHeader::parse_datagram(&h.to_bytes(&[0u8; 512])).unwrap();
        assert_eq!(extend_adu_seq(seq - 3, back.adu_seq as u32), seq);
    }

    #[test]
    fn test_stamp_unwraps_against_the_clock() {
        let sent = Time::from_secs(5000); // past the first 71.6-minute wrap
        let now = sent + Duration::from_millis(250);
        assert_eq!(unwrap_stamp(now, stamp_us(sent)), sent);
        let early = Time::from_millis(3);
        assert_eq!(unwrap_stamp(early, stamp_us(early)), early);
    }

    #[test]
    fn test_fragment_rejects_bad_ranges_lengths_and_flags() {
        let past_end = FragmentHeader {
            offset: 5121,
            ..FRAG
        };
        assert!(FragmentHeader::parse(&past_end.to_bytes(&[])).is_err());
        let overflow = FragmentHeader {
            offset: u32::MAX,
            ..FRAG
        };
        assert!(FragmentHeader::parse_datagram(&overflow.to_bytes(&[0u8; 2])).is_err());
        // A datagram whose payload reaches past the ADU.
        let near_end = FragmentHeader {
            offset: 5000,
            len: 100,
            ..FRAG
        };
        assert!(FragmentHeader::parse_datagram(&near_end.to_bytes(&[0u8; 121])).is_err());
        assert!(FragmentHeader::parse_datagram(&near_end.to_bytes(&[0u8; 120])).is_ok());
        let bytes = FRAG.to_bytes(&[0u8; 512]);
        let mut bad_type = bytes.clone();
        if let Some(f) = bad_type.get_mut(1) {
            *f = 0x80;
        }
        assert!(FragmentHeader::parse(&bad_type).is_err());
        // A TCP fragment in a datagram must carry exactly its ADU.
        let tcp = FragmentHeader {
            tcp: true,
            offset: 0,
            len: 20,
            adu_len: 20,
            ..FRAG
        };
        assert!(FragmentHeader::parse_datagram(&tcp.to_bytes(&[0u8; 19])).is_err());
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
