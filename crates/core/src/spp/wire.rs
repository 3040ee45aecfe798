//! SPP wire format: one versioned header per UDP payload (`papers/000_97f7680fd99dd928.txt`
//! §4.1 describes SPP only as "a reliable datagram protocol on top of UDP"; the layout is ours).
//!
//! ```text
//! 0        1        2
//! +--------+--------+---------------- type-specific fields (big-endian) ----------------
//! |version |  type  |
//! +--------+--------+
//! DATA (1):    pn u64 | msg_floor u64 | wire_seq u64 | msg_id u64 | msg_len u32 | offset u32
//!              | len u16 | priority u8            then `len` payload bytes
//! CANCEL (2):  pn u64 | msg_floor u64 | wire_seq u64 | msg_id u64
//! ACK (3):     range_count u8 | verdict_count u8 | ranges: (start u64, end u64)* highest first
//!              | verdicts: (wire_seq u64, verdict u8)*
//! PROBE (4):   probe_id u32 | index u8              then padding
//! REPORT (5):  probe_id u32 | gap_ns u64 | bytes u32
//! ACK_WINDOW (6): range_count u8 | verdict_count u8 | limit u64 | size u64 | ranges | verdicts
//! ```
//!
//! A verdict byte is 0 (discarded), 1 (already delivered) or 2 (discarded, and the receiver
//! never held any of it: its window credit is returned to the sender).
//!
//! Version 2 added receiver flow control: ACK_WINDOW carries the receiver's window as an
//! absolute limit on the message bytes the sender may have started, and the window's size
//! (see [`super::window`]); a receiver without flow control (the simulator's) sends plain ACKs,
//! which leave the sender unlimited, so its packets are the same size as in version 1.
//!
//! Packet numbers (`pn`) are never reused: a retransmission carries the same bytes under a new
//! number, so acknowledgements are unambiguous. ACK ranges are half-open `[start, end)`,
//! strictly descending and disjoint, at most [`MAX_ACK_RANGES`]; verdicts at most
//! [`MAX_VERDICTS`].
//!
//! Contract (as for every adaptnet format): `parse` never panics on any input; `emit` never
//! panics and fails cleanly on a buffer shorter than `buffer_len()`.

use crate::wire::{Reader, WireError, Writer};

/// The version this build speaks.
pub const VERSION: u8 = 2;
/// Bound on ACK ranges per packet.
pub const MAX_ACK_RANGES: usize = 16;
/// Bound on cancellation verdicts per ACK.
pub const MAX_VERDICTS: usize = 16;

const T_DATA: u8 = 1;
const T_CANCEL: u8 = 2;
const T_ACK: u8 = 3;
const T_PROBE: u8 = 4;
const T_REPORT: u8 = 5;
const T_ACK_WINDOW: u8 = 6;

/// A piece of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataHeader {
    /// Packet number.
    pub pn: u64,
    /// Lowest message number the sender still has open; the receiver may forget below it.
    pub msg_floor: u64,
    /// Message number (order of first transmission).
    pub wire_seq: u64,
    /// The application's message id, reported at delivery.
    pub msg_id: u64,
    /// Total message size.
    pub msg_len: u32,
    /// First byte of this piece.
    pub offset: u32,
    /// Bytes in this piece (the payload that follows).
    pub len: u16,
    /// Priority level, reported at delivery.
    pub priority: u8,
}

/// Tells the receiver to discard a message; answered by a verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CancelHeader {
    /// Packet number.
    pub pn: u64,
    /// As in [`DataHeader::msg_floor`].
    pub msg_floor: u64,
    /// The message to discard.
    pub wire_seq: u64,
    /// Its application id.
    pub msg_id: u64,
}

/// What the receiver did with a cancelled message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The message.
    pub wire_seq: u64,
    /// It had already been delivered (so it was not discarded).
    pub delivered: bool,
    /// It was discarded and the receiver never held any of its bytes (its window credit
    /// goes back to the sender). Never set together with `delivered`.
    pub unseen: bool,
}

impl Verdict {
    fn code(self) -> u8 {
        match (self.delivered, self.unseen) {
            (true, _) => 1,
            (false, true) => 2,
            (false, false) => 0,
        }
    }
}

/// Selective acknowledgement of packet numbers plus cancellation verdicts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckFrame {
    /// Half-open ranges `[start, end)` of received packet numbers, highest first.
    pub ranges: Vec<(u64, u64)>,
    /// Verdicts on cancel notices.
    pub verdicts: Vec<Verdict>,
    /// The receiver's window; `None`: the receiver does not limit the sender (a plain ACK).
    pub window: Option<AckWindow>,
}

/// A receiver's flow-control window, as an ACK_WINDOW carries it ([`super::window`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckWindow {
    /// The most charged message bytes ([`super::window::charge`]) the sender may have
    /// started in total, counted from the connection's start.
    pub limit: u64,
    /// The window's size: `limit - size` is what the receiver has credited back, so a
    /// sender whose started bytes are at most that has nothing held at the receiver.
    pub size: u64,
}

/// Most datagrams in one probe train (a packet pair is a train of two). The rate control's
/// confirming trains are the longest (20 by default: long enough to empty a token bucket
/// before their last quarter, see `ControlConfig::filler_confirm_packets`).
pub const MAX_PROBE_TRAIN: u8 = 32;

/// One packet of a packet-pair or packet-train measurement (§4.2, used when the estimate is
/// zero; the default estimator also sends short trains, see
/// [`EstimatorMode::Bounded`](crate::atp::EstimatorMode::Bounded)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeHeader {
    /// Identifies the pair or train.
    pub probe_id: u32,
    /// Position in the train, `0..MAX_PROBE_TRAIN` (a pair: 0 or 1).
    pub index: u8,
}

/// The receiver's measurement of a packet pair or train: the dispersion of the packets that
/// arrived after the first one (for a pair, the arrival gap and the second packet's size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeReport {
    /// The pair or train.
    pub probe_id: u32,
    /// Time from the first packet's arrival to the latest one's, in nanoseconds.
    pub gap_ns: u64,
    /// Bytes of the datagrams that arrived after the first one, up to the latest.
    pub bytes: u32,
}

/// A parsed SPP header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SppRepr {
    /// DATA.
    Data(DataHeader),
    /// CANCEL.
    Cancel(CancelHeader),
    /// ACK.
    Ack(AckFrame),
    /// PROBE.
    Probe(ProbeHeader),
    /// REPORT.
    Report(ProbeReport),
}

/// A datagram to send: header plus (virtual) payload bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SppDatagram {
    /// The header.
    pub repr: SppRepr,
    /// Payload bytes after the header (message data or probe padding).
    pub payload_len: u32,
}

impl SppDatagram {
    /// UDP payload size: header plus payload.
    pub fn wire_len(&self) -> usize {
        self.repr.buffer_len() + self.payload_len as usize
    }
}

impl SppRepr {
    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        2 + match self {
            SppRepr::Data(_) => 8 * 4 + 4 + 4 + 2 + 1,
            SppRepr::Cancel(_) => 8 * 4,
            SppRepr::Ack(a) => {
                2 + a.ranges.len() * 16
                    + a.verdicts.len() * 9
                    + 16 * usize::from(a.window.is_some())
            }
            SppRepr::Probe(_) => 5,
            SppRepr::Report(_) => 16,
        }
    }

    /// Parses a header; bytes after it (payload) are ignored. Never panics.
    pub fn parse(buf: &[u8]) -> Result<SppRepr, WireError> {
        let mut r = Reader::new(buf);
        let version = r.u8()?;
        if version != VERSION {
            return Err(WireError::UnsupportedVersion(version));
        }
        match r.u8()? {
            T_DATA => {
                let h = DataHeader {
                    pn: r.u64()?,
                    msg_floor: r.u64()?,
                    wire_seq: r.u64()?,
                    msg_id: r.u64()?,
                    msg_len: r.u32()?,
                    offset: r.u32()?,
                    len: r.u16()?,
                    priority: r.u8()?,
                };
                if h.len == 0 || u64::from(h.offset) + u64::from(h.len) > u64::from(h.msg_len) {
                    return Err(WireError::Malformed("spp data range"));
                }
                Ok(SppRepr::Data(h))
            }
            T_CANCEL => Ok(SppRepr::Cancel(CancelHeader {
                pn: r.u64()?,
                msg_floor: r.u64()?,
                wire_seq: r.u64()?,
                msg_id: r.u64()?,
            })),
            kind @ (T_ACK | T_ACK_WINDOW) => {
                let nr = usize::from(r.u8()?);
                let nv = usize::from(r.u8()?);
                if nr > MAX_ACK_RANGES || nv > MAX_VERDICTS {
                    return Err(WireError::Malformed("spp ack count"));
                }
                let window = if kind == T_ACK_WINDOW {
                    let limit = r.u64()?;
                    let size = r.u64()?;
                    Some(AckWindow { limit, size })
                } else {
                    None
                };
                let mut ranges = Vec::with_capacity(nr);
                let mut below = u64::MAX;
                for i in 0..nr {
                    let (s, e) = (r.u64()?, r.u64()?);
                    if s >= e || (i > 0 && e >= below) {
                        return Err(WireError::Malformed("spp ack range"));
                    }
                    below = s;
                    ranges.push((s, e));
                }
                let mut verdicts = Vec::with_capacity(nv);
                for _ in 0..nv {
                    let wire_seq = r.u64()?;
                    let (delivered, unseen) = match r.u8()? {
                        0 => (false, false),
                        1 => (true, false),
                        2 => (false, true),
                        _ => return Err(WireError::Malformed("spp verdict")),
                    };
                    verdicts.push(Verdict {
                        wire_seq,
                        delivered,
                        unseen,
                    });
                }
                Ok(SppRepr::Ack(AckFrame {
                    ranges,
                    verdicts,
                    window,
                }))
            }
            T_PROBE => {
                let probe_id = r.u32()?;
                let index = r.u8()?;
                if index >= MAX_PROBE_TRAIN {
                    return Err(WireError::Malformed("spp probe index"));
                }
                Ok(SppRepr::Probe(ProbeHeader { probe_id, index }))
            }
            T_REPORT => Ok(SppRepr::Report(ProbeReport {
                probe_id: r.u32()?,
                gap_ns: r.u64()?,
                bytes: r.u32()?,
            })),
            other => Err(WireError::UnknownKind {
                field: "spp type",
                value: u32::from(other),
            }),
        }
    }

    /// Writes the header into `buf`; returns the bytes written. Refuses (without panicking) a
    /// short buffer or an ACK over its bounds.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(WireError::BufferTooSmall {
                needed: len,
                available: buf.len(),
            });
        }
        let mut w = Writer::new(buf);
        w.u8(VERSION)?;
        match self {
            SppRepr::Data(h) => {
                w.u8(T_DATA)?;
                w.u64(h.pn)?;
                w.u64(h.msg_floor)?;
                w.u64(h.wire_seq)?;
                w.u64(h.msg_id)?;
                w.u32(h.msg_len)?;
                w.u32(h.offset)?;
                w.u16(h.len)?;
                w.u8(h.priority)?;
            }
            SppRepr::Cancel(h) => {
                w.u8(T_CANCEL)?;
                w.u64(h.pn)?;
                w.u64(h.msg_floor)?;
                w.u64(h.wire_seq)?;
                w.u64(h.msg_id)?;
            }
            SppRepr::Ack(a) => {
                if a.ranges.len() > MAX_ACK_RANGES || a.verdicts.len() > MAX_VERDICTS {
                    return Err(WireError::Malformed("spp ack count"));
                }
                w.u8(if a.window.is_some() {
                    T_ACK_WINDOW
                } else {
                    T_ACK
                })?;
                let count =
                    |n: usize| u8::try_from(n).map_err(|_| WireError::Malformed("spp ack count"));
                w.u8(count(a.ranges.len())?)?;
                w.u8(count(a.verdicts.len())?)?;
                if let Some(win) = a.window {
                    w.u64(win.limit)?;
                    w.u64(win.size)?;
                }
                for &(s, e) in &a.ranges {
                    w.u64(s)?;
                    w.u64(e)?;
                }
                for v in &a.verdicts {
                    w.u64(v.wire_seq)?;
                    w.u8(v.code())?;
                }
            }
            SppRepr::Probe(p) => {
                w.u8(T_PROBE)?;
                w.u32(p.probe_id)?;
                w.u8(p.index)?;
            }
            SppRepr::Report(p) => {
                w.u8(T_REPORT)?;
                w.u32(p.probe_id)?;
                w.u64(p.gap_ns)?;
                w.u32(p.bytes)?;
            }
        }
        Ok(w.position())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(repr: &SppRepr) -> SppRepr {
        let mut buf = vec![0u8; repr.buffer_len()];
        let n = repr.emit(&mut buf).expect("fits");
        assert_eq!(n, repr.buffer_len());
        SppRepr::parse(&buf).expect("parses")
    }

    const DATA: DataHeader = DataHeader {
        pn: 7,
        msg_floor: 2,
        wire_seq: 3,
        msg_id: 99,
        msg_len: 4096,
        offset: 1400,
        len: 1400,
        priority: 1,
    };

    #[test]
    fn test_data_round_trips_and_rejects_bad_range() {
        let r = SppRepr::Data(DATA);
        assert_eq!(round_trip(&r), r);
        let bad = SppRepr::Data(DataHeader {
            offset: 4000,
            ..DATA
        });
        let mut buf = vec![0u8; bad.buffer_len()];
        bad.emit(&mut buf).unwrap();
        assert_eq!(
            SppRepr::parse(&buf),
            Err(WireError::Malformed("spp data range"))
        );
    }

    #[test]
    fn test_ack_round_trips_and_bounds_are_enforced() {
        let a = SppRepr::Ack(AckFrame {
            ranges: vec![(10, 20), (3, 5)],
            verdicts: vec![
                Verdict {
                    wire_seq: 4,
                    delivered: true,
                    unseen: false,
                },
                Verdict {
                    wire_seq: 5,
                    delivered: false,
                    unseen: true,
                },
            ],
            window: None,
        });
        assert_eq!(round_trip(&a), a);
        let windowed = SppRepr::Ack(AckFrame {
            ranges: vec![(10, 20)],
            verdicts: vec![],
            window: Some(AckWindow {
                limit: 80 << 20,
                size: 64 << 20,
            }),
        });
        assert_eq!(round_trip(&windowed), windowed);
        assert_eq!(windowed.buffer_len(), 4 + 16 + 16);
        let overlapping = SppRepr::Ack(AckFrame {
            ranges: vec![(10, 20), (3, 12)],
            verdicts: vec![],
            window: None,
        });
        let mut buf = vec![0u8; overlapping.buffer_len()];
        overlapping.emit(&mut buf).unwrap();
        assert!(SppRepr::parse(&buf).is_err());
        let too_many = SppRepr::Ack(AckFrame {
            ranges: (0..17).map(|i| (100 - 2 * i, 101 - 2 * i)).collect(),
            verdicts: vec![],
            window: None,
        });
        let mut buf = vec![0u8; too_many.buffer_len()];
        assert!(too_many.emit(&mut buf).is_err());
    }

    #[test]
    fn test_version_and_truncation_are_errors() {
        let r = SppRepr::Cancel(CancelHeader {
            pn: 1,
            msg_floor: 0,
            wire_seq: 1,
            msg_id: 1,
        });
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf).unwrap();
        assert!(matches!(
            SppRepr::parse(&buf[..buf.len() - 1]),
            Err(WireError::Truncated { .. })
        ));
        buf[0] = 1; // version 1 had no flow control: refused, not misread
        assert_eq!(SppRepr::parse(&buf), Err(WireError::UnsupportedVersion(1)));
        assert!(r.emit(&mut [0u8; 3]).is_err());
    }

    fn any_repr() -> impl Strategy<Value = SppRepr> {
        prop_oneof![
            (any::<[u64; 4]>(), 1u32..u32::MAX, any::<u8>()).prop_map(|(v, msg_len, priority)| {
                let len = msg_len.min(1400) as u16;
                SppRepr::Data(DataHeader {
                    pn: v[0],
                    msg_floor: v[1],
                    wire_seq: v[2],
                    msg_id: v[3],
                    msg_len,
                    offset: msg_len - u32::from(len),
                    len,
                    priority,
                })
            }),
            any::<[u64; 4]>().prop_map(|v| SppRepr::Cancel(CancelHeader {
                pn: v[0],
                msg_floor: v[1],
                wire_seq: v[2],
                msg_id: v[3],
            })),
            (
                proptest::collection::btree_set(0u64..1_000_000, 0..MAX_ACK_RANGES),
                proptest::collection::vec((any::<u64>(), 0u8..3), 0..MAX_VERDICTS),
                proptest::option::of((any::<u64>(), any::<u64>()))
            )
                .prop_map(|(starts, vs, window)| {
                    // Ranges [10k, 10k + 5), highest first: disjoint and descending.
                    let ranges = starts.iter().rev().map(|s| (s * 10, s * 10 + 5)).collect();
                    let verdicts = vs
                        .into_iter()
                        .map(|(wire_seq, code)| Verdict {
                            wire_seq,
                            delivered: code == 1,
                            unseen: code == 2,
                        })
                        .collect();
                    SppRepr::Ack(AckFrame {
                        ranges,
                        verdicts,
                        window: window.map(|(limit, size)| AckWindow { limit, size }),
                    })
                }),
            (any::<u32>(), 0u8..2)
                .prop_map(|(probe_id, index)| SppRepr::Probe(ProbeHeader { probe_id, index })),
            (any::<u32>(), any::<u64>(), any::<u32>()).prop_map(|(probe_id, gap_ns, bytes)| {
                SppRepr::Report(ProbeReport {
                    probe_id,
                    gap_ns,
                    bytes,
                })
            }),
        ]
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = SppRepr::parse(&bytes);
        }

        #[test]
        fn parse_never_panics_on_valid_prefix(kind in 1u8..7, rest in proptest::collection::vec(any::<u8>(), 0..400)) {
            let mut bytes = vec![VERSION, kind];
            bytes.extend(rest);
            let _ = SppRepr::parse(&bytes);
        }

        #[test]
        fn emit_then_parse_round_trips(repr in any_repr()) {
            prop_assert_eq!(round_trip(&repr), repr);
        }
    }
}
