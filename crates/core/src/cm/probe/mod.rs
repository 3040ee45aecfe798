//! The CM's probe/response protocol (papers/003 §2.2.2, Figure 5): wire format here, the
//! sender's bookkeeping in `sender.rs`, the receiver in [`crate::cm::receiver`].
//!
//! The sender CM probes each destination twice per RTT while probe-fed flows send to it. Each
//! probe carries an incrementing sequence number. The receiver answers with `thisprobe` (the
//! probe just received), `lastprobe` (the probe it last answered) and what it received per flow
//! in between. From what it sent per flow between those probes, the sender computes per-flow
//! and total loss, and the probe's round trip gives an RTT sample. Because the sender keeps
//! every probe since the last answered one, lost probes or responses only widen the next
//! interval.
//!
//! # Wire format (version 1, big-endian)
//!
//! ```text
//! common header   version u8 (=1) | kind u8 (1 probe, 2 response) | flags u8 | reserved u8
//! probe           seq u32                                                   (8 bytes total)
//! response        thisprobe u32 | lastprobe u32 | ce_packets u32 | count u16
//!                 count × { key u64 | recd_bytes u64 | recd_packets u32 | hint u16 }
//! response flags  bit 0: lastprobe is valid; bit 1: the flow list was truncated
//! ```
//! `count` ≤ [`MAX_REPORTS`], so a response fits in 1,426 bytes.
//!
//! Contract (as for every adaptnet `Repr`): [`parse`] never panics on any byte string;
//! `emit` never panics and fails with `BufferTooSmall` if given less than `buffer_len()` bytes.
//! `parse` is a free function over `&[u8]` so a `cargo fuzz` target can call it directly.

pub(crate) mod sender;

use super::FlowKey;
use crate::wire::{Reader, WireError, Writer};

/// The version this build speaks.
pub const VERSION: u8 = 1;
/// Most per-flow reports in one response.
pub const MAX_REPORTS: usize = 64;
/// Bytes of the common header.
pub const HEADER_LEN: usize = 4;
const KIND_PROBE: u8 = 1;
const KIND_RESPONSE: u8 = 2;
const FLAG_HAS_LAST: u8 = 1;
const FLAG_TRUNCATED: u8 = 2;
const REPORT_LEN: usize = 22;
const RESPONSE_FIXED_LEN: usize = HEADER_LEN + 14;

/// `<probe, probeseqnum>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeRepr {
    /// The probe's sequence number.
    pub seq: u32,
}

/// What the receiver got from one flow since it last answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowReport {
    /// The flow.
    pub key: FlowKey,
    /// Bytes received.
    pub recd_bytes: u64,
    /// Packets received.
    pub recd_packets: u32,
    /// The receiver's relative interest in this flow (papers/003 §3.2.1 "receiver hints");
    /// 0 means no hint.
    pub hint: u16,
}

/// `<response, thisprobe, lastprobe, nrecd>` with `nrecd` per flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseRepr {
    /// The probe being answered.
    pub this_probe: u32,
    /// The probe answered before (none for the first response).
    pub last_probe: Option<u32>,
    /// ECN-marked packets received in the interval.
    pub ce_packets: u32,
    /// More flows had data than fit: flows absent from `reports` are unknown, not zero.
    pub truncated: bool,
    /// Per-flow receptions, at most [`MAX_REPORTS`].
    pub reports: Vec<FlowReport>,
}

/// A CM control packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmPacket {
    /// Sender → receiver.
    Probe(ProbeRepr),
    /// Receiver → sender.
    Response(ResponseRepr),
}

/// Parses a CM control packet. Never panics; trailing bytes are an error.
pub fn parse(buf: &[u8]) -> Result<CmPacket, WireError> {
    let mut r = Reader::new(buf);
    let version = r.u8()?;
    if version != VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    let kind = r.u8()?;
    let flags = r.u8()?;
    let _reserved = r.u8()?;
    let packet = match kind {
        KIND_PROBE => CmPacket::Probe(ProbeRepr { seq: r.u32()? }),
        KIND_RESPONSE => {
            let this_probe = r.u32()?;
            let last = r.u32()?;
            let ce_packets = r.u32()?;
            let count = usize::from(r.u16()?);
            if count > MAX_REPORTS {
                return Err(WireError::Malformed("response report count"));
            }
            let mut reports = Vec::with_capacity(count);
            for _ in 0..count {
                reports.push(FlowReport {
                    key: FlowKey(r.u64()?),
                    recd_bytes: r.u64()?,
                    recd_packets: r.u32()?,
                    hint: r.u16()?,
                });
            }
            let last_probe = (flags & FLAG_HAS_LAST != 0).then_some(last);
            if last_probe.is_some_and(|l| l >= this_probe) {
                return Err(WireError::Malformed("lastprobe not before thisprobe"));
            }
            CmPacket::Response(ResponseRepr {
                this_probe,
                last_probe,
                ce_packets,
                truncated: flags & FLAG_TRUNCATED != 0,
                reports,
            })
        }
        other => {
            return Err(WireError::UnknownKind {
                field: "cm packet kind",
                value: u32::from(other),
            });
        }
    };
    if r.remaining() != 0 {
        return Err(WireError::Malformed("trailing bytes"));
    }
    Ok(packet)
}

impl CmPacket {
    /// Parses a packet (same as [`parse`]).
    pub fn parse(buf: &[u8]) -> Result<CmPacket, WireError> {
        parse(buf)
    }

    /// Encoded length.
    pub fn buffer_len(&self) -> usize {
        match self {
            CmPacket::Probe(_) => HEADER_LEN + 4,
            CmPacket::Response(r) => {
                RESPONSE_FIXED_LEN + REPORT_LEN * r.reports.len().min(MAX_REPORTS)
            }
        }
    }

    /// Writes the packet into `buf`; returns the bytes written. A response with more than
    /// [`MAX_REPORTS`] reports is written with the first ones only and the truncated flag.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let needed = self.buffer_len();
        if buf.len() < needed {
            return Err(WireError::BufferTooSmall {
                needed,
                available: buf.len(),
            });
        }
        let mut w = Writer::new(buf);
        w.u8(VERSION)?;
        match self {
            CmPacket::Probe(p) => {
                w.u8(KIND_PROBE)?;
                w.u8(0)?;
                w.u8(0)?;
                w.u32(p.seq)?;
            }
            CmPacket::Response(r) => {
                let n = r.reports.len().min(MAX_REPORTS);
                let mut flags = 0;
                if r.last_probe.is_some() {
                    flags |= FLAG_HAS_LAST;
                }
                if r.truncated || r.reports.len() > MAX_REPORTS {
                    flags |= FLAG_TRUNCATED;
                }
                w.u8(KIND_RESPONSE)?;
                w.u8(flags)?;
                w.u8(0)?;
                w.u32(r.this_probe)?;
                w.u32(r.last_probe.unwrap_or(0))?;
                w.u32(r.ce_packets)?;
                // n ≤ MAX_REPORTS fits in u16.
                w.u16(u16::try_from(n).map_err(|_| WireError::Malformed("cm report count"))?)?;
                for rep in r.reports.iter().take(n) {
                    w.u64(rep.key.0)?;
                    w.u64(rep.recd_bytes)?;
                    w.u32(rep.recd_packets)?;
                    w.u16(rep.hint)?;
                }
            }
        }
        Ok(w.position())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TEMPLATE: ResponseRepr = ResponseRepr {
        this_probe: 7,
        last_probe: Some(5),
        ce_packets: 1,
        truncated: false,
        reports: Vec::new(),
    };

    fn round_trip(p: &CmPacket) -> CmPacket {
        let mut buf = vec![0u8; p.buffer_len()];
        let n = p.emit(&mut buf).expect("fits");
        assert_eq!(n, p.buffer_len());
        parse(&buf).expect("parses")
    }

    #[test]
    fn test_probe_round_trips() {
        let p = CmPacket::Probe(ProbeRepr { seq: 0xdead_beef });
        assert_eq!(round_trip(&p), p);
        assert_eq!(p.buffer_len(), 8);
    }

    #[test]
    fn test_response_round_trips() {
        let p = CmPacket::Response(ResponseRepr {
            reports: vec![
                FlowReport {
                    key: FlowKey(9),
                    recd_bytes: 12_000,
                    recd_packets: 12,
                    hint: 3,
                },
                FlowReport {
                    key: FlowKey(u64::MAX),
                    recd_bytes: 0,
                    recd_packets: 0,
                    hint: 0,
                },
            ],
            ..TEMPLATE
        });
        assert_eq!(round_trip(&p), p);
        let first = CmPacket::Response(ResponseRepr {
            last_probe: None,
            truncated: true,
            ..TEMPLATE
        });
        assert_eq!(round_trip(&first), first);
    }

    #[test]
    fn test_emit_refuses_small_buffer_and_parse_rejects_garbage() {
        let p = CmPacket::Probe(ProbeRepr { seq: 1 });
        let mut small = [0u8; 7];
        assert!(matches!(
            p.emit(&mut small),
            Err(WireError::BufferTooSmall { .. })
        ));
        assert_eq!(
            parse(&[2, 1, 0, 0, 0, 0, 0, 1]),
            Err(WireError::UnsupportedVersion(2))
        );
        assert!(matches!(
            parse(&[1, 9, 0, 0]),
            Err(WireError::UnknownKind { .. })
        ));
        assert!(
            parse(&[1, 1, 0, 0, 0, 0, 0, 1, 0]).is_err(),
            "trailing byte"
        );
        // A response claiming 65535 reports is refused before any allocation of that size.
        let mut huge = vec![1, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
        huge.extend(std::iter::repeat_n(0, 64));
        assert_eq!(
            parse(&huge),
            Err(WireError::Malformed("response report count"))
        );
        // lastprobe must precede thisprobe.
        let bad = [1, 2, 1, 0, 0, 0, 0, 5, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0];
        assert!(parse(&bad).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1600)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn parse_never_panics_on_plausible_headers(
            kind in 0u8..4,
            flags in any::<u8>(),
            rest in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut bytes = vec![VERSION, kind, flags, 0];
            bytes.extend(rest);
            if let Ok(p) = parse(&bytes) {
                // Whatever parses re-emits to the same bytes (modulo ignored fields).
                let again = round_trip(&p);
                prop_assert_eq!(again, p);
            }
        }

        #[test]
        fn responses_round_trip(
            this in 1u32..,
            gap in 1u32..100,
            has_last in any::<bool>(),
            ce in any::<u32>(),
            truncated in any::<bool>(),
            reports in proptest::collection::vec(
                (any::<u64>(), any::<u64>(), any::<u32>(), any::<u16>()), 0..MAX_REPORTS),
        ) {
            let p = CmPacket::Response(ResponseRepr {
                this_probe: this,
                last_probe: has_last.then(|| this.saturating_sub(gap)).filter(|l| *l < this),
                ce_packets: ce,
                truncated,
                reports: reports
                    .into_iter()
                    .map(|(k, b, n, h)| FlowReport {
                        key: FlowKey(k),
                        recd_bytes: b,
                        recd_packets: n,
                        hint: h,
                    })
                    .collect(),
            });
            prop_assert_eq!(round_trip(&p), p);
        }
    }
}
