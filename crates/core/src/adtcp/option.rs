//! The ADTCP TCP option: the receiver's state report in every ACK, and the sender's sending
//! time on every data segment.
//!
//! papers/004 §4 ("Linux implementation"): "we introduce an option field in the TCP header:
//! kind ADTCP, len, and bits of state, set with the corresponding bits in outgoing ACK
//! packets", and "the information of persistent network states is relayed by multiple ACK
//! packets, providing robustness when an ACK is lost". IDD and POR also need each data
//! packet's sending time. The RFC 7323 timestamp option carries one, but in milliseconds (too
//! coarse: one 1500-byte packet takes 1.2 ms at 10 Mbit/s) and only when both ends negotiated
//! it, so this option carries its own, in microseconds.
//!
//! Layout (RFC 6994 shared experimental option: kind 253 followed by a 16-bit experiment ID):
//!
//! ```text
//! +------+-----+------------+-------+----------------------+
//! | 253  | len | ExID 0xAD7C| flags | sent_us (len 9 only) |
//! +------+-----+------------+-------+----------------------+
//!   1      1        2          1            4 bytes
//! flags: 0x80 a state report follows in the low bits; 0x01 congestion,
//!        0x02 channel error, 0x04 route change; 0x08-0x40 reserved (sent as 0, ignored)
//! ```
//!
//! A conventional TCP skips the option (RFC 9293 §3.1: unknown options are ignored), so an
//! ADTCP receiver can answer a conventional sender and vice versa (§4 "backward
//! compatibility"). Kind 253 with another experiment ID, or without room for one, is someone
//! else's option and is skipped too.
//!
//! No-panic contract, as for every wire format ([`crate::wire`]): `parse` returns `Err` on any
//! byte string it cannot read; `emit` writes exactly `buffer_len()` bytes or returns `Err`.

use super::identify::StateReport;
use crate::time::Time;
use crate::wire::{Reader, WireError, Writer};

/// RFC 4727 / RFC 6994 experimental option kind.
pub const KIND: u8 = 253;
/// The experiment ID that marks kind 253 as ADTCP (RFC 6994 §3; not IANA-registered).
pub const EXID: u16 = 0xAD7C;
/// Option length with a state report only.
pub const LEN_SHORT: u8 = 5;
/// Option length with a sending time.
pub const LEN_LONG: u8 = 9;

const FLAG_REPORT: u8 = 0x80;
const FLAG_CONGESTION: u8 = 0x01;
const FLAG_CHANNEL_ERROR: u8 = 0x02;
const FLAG_ROUTE_CHANGE: u8 = 0x04;

/// The contents of one ADTCP option.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AdtcpOption {
    /// The sender of this segment, as a receiver, reports the state it identified; `None`:
    /// no report (it cannot judge now, see [`super::Receiver::report`]).
    pub report: Option<StateReport>,
    /// The sender of this segment stamped it: its clock in microseconds modulo 2^32 (see
    /// [`send_clock_us`]).
    pub sent_us: Option<u32>,
}

/// The sending clock carried in the option: microseconds since the engine's epoch, wrapping
/// modulo 2^32 (about 71 minutes; the receiver only compares nearby values).
pub fn send_clock_us(now: Time) -> u32 {
    u32::try_from((now.as_nanos() / 1_000) & u64::from(u32::MAX)).unwrap_or(0)
}

impl AdtcpOption {
    /// Bytes `emit` writes, kind and length included.
    pub fn buffer_len(&self) -> usize {
        usize::from(if self.sent_us.is_some() {
            LEN_LONG
        } else {
            LEN_SHORT
        })
    }

    fn flags(&self) -> u8 {
        match self.report {
            None => 0,
            Some(r) => {
                FLAG_REPORT
                    | if r.congestion { FLAG_CONGESTION } else { 0 }
                    | if r.channel_error {
                        FLAG_CHANNEL_ERROR
                    } else {
                        0
                    }
                    | if r.route_change { FLAG_ROUTE_CHANGE } else { 0 }
            }
        }
    }

    /// Parses a whole option (kind, length, body). Kind 253 with another experiment ID is
    /// [`WireError::UnknownKind`].
    pub fn parse(buf: &[u8]) -> Result<AdtcpOption, WireError> {
        let mut r = Reader::new(buf);
        let kind = r.u8()?;
        if kind != KIND {
            return Err(WireError::UnknownKind {
                field: "tcp option kind",
                value: u32::from(kind),
            });
        }
        let len = usize::from(r.u8()?);
        let body = r.bytes(
            len.checked_sub(2)
                .ok_or(WireError::Malformed("adtcp option length"))?,
        )?;
        AdtcpOption::parse_body(body)?.ok_or(WireError::UnknownKind {
            field: "tcp experiment id",
            value: u32::from(body.first().copied().unwrap_or(0)) << 8
                | u32::from(body.get(1).copied().unwrap_or(0)),
        })
    }

    /// Parses the body of a kind-253 option (what follows kind and length). `Ok(None)` means
    /// the option belongs to another experiment and should be skipped.
    pub fn parse_body(body: &[u8]) -> Result<Option<AdtcpOption>, WireError> {
        let mut r = Reader::new(body);
        let Ok(exid) = r.u16() else {
            return Ok(None);
        };
        if exid != EXID {
            return Ok(None);
        }
        let flags = r.u8()?;
        let sent_us = match r.remaining() {
            0 => None,
            4 => Some(r.u32()?),
            _ => return Err(WireError::Malformed("adtcp option length")),
        };
        let report = (flags & FLAG_REPORT != 0).then_some(StateReport {
            congestion: flags & FLAG_CONGESTION != 0,
            channel_error: flags & FLAG_CHANNEL_ERROR != 0,
            route_change: flags & FLAG_ROUTE_CHANGE != 0,
        });
        Ok(Some(AdtcpOption { report, sent_us }))
    }

    /// Writes the option (kind, length, body) into `buf`, which must hold `buffer_len()`
    /// bytes; returns the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        self.write(&mut w)?;
        Ok(w.position())
    }

    /// Appends the option to a header being written.
    pub(crate) fn write(&self, w: &mut Writer<'_>) -> Result<(), WireError> {
        w.u8(KIND)?;
        w.u8(if self.sent_us.is_some() {
            LEN_LONG
        } else {
            LEN_SHORT
        })?;
        w.u16(EXID)?;
        w.u8(self.flags())?;
        if let Some(t) = self.sent_us {
            w.u32(t)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{Flags, SackBlock, SackBlocks, TcpRepr, Timestamps};
    use proptest::prelude::*;

    const CONGESTED: StateReport = StateReport {
        congestion: true,
        channel_error: false,
        route_change: false,
    };

    fn round_trip(o: AdtcpOption) -> AdtcpOption {
        let mut buf = vec![0u8; o.buffer_len()];
        assert_eq!(o.emit(&mut buf), Ok(o.buffer_len()));
        AdtcpOption::parse(&buf).expect("emitted option parses")
    }

    #[test]
    fn test_report_only_is_five_bytes() {
        let o = AdtcpOption {
            report: Some(CONGESTED),
            sent_us: None,
        };
        let mut buf = [0u8; 5];
        assert_eq!(o.emit(&mut buf), Ok(5));
        assert_eq!(buf, [253, 5, 0xAD, 0x7C, 0x81]);
        assert_eq!(round_trip(o), o);
    }

    #[test]
    fn test_stamp_and_report_is_nine_bytes() {
        let o = AdtcpOption {
            report: Some(StateReport {
                channel_error: true,
                route_change: true,
                ..StateReport::NORMAL
            }),
            sent_us: Some(0x0102_0304),
        };
        let mut buf = [0u8; 9];
        assert_eq!(o.emit(&mut buf), Ok(9));
        assert_eq!(buf, [253, 9, 0xAD, 0x7C, 0x86, 1, 2, 3, 4]);
        assert_eq!(round_trip(o), o);
        let stamp_only = AdtcpOption {
            report: None,
            sent_us: Some(7),
        };
        assert_eq!(round_trip(stamp_only), stamp_only);
    }

    #[test]
    fn test_reserved_bits_are_ignored() {
        let body = [0xAD, 0x7C, 0xF9];
        assert_eq!(
            AdtcpOption::parse_body(&body),
            Ok(Some(AdtcpOption {
                report: Some(CONGESTED),
                sent_us: None
            }))
        );
    }

    #[test]
    fn test_other_experiments_are_skipped_and_bad_lengths_rejected() {
        assert_eq!(AdtcpOption::parse_body(&[0x12, 0x34, 0x81]), Ok(None));
        assert_eq!(AdtcpOption::parse_body(&[0xAD]), Ok(None));
        assert_eq!(AdtcpOption::parse_body(&[]), Ok(None));
        assert!(AdtcpOption::parse(&[253, 5, 0x12, 0x34, 0x81]).is_err());
        assert!(AdtcpOption::parse(&[253, 1]).is_err());
        assert!(AdtcpOption::parse(&[8, 5, 0xAD, 0x7C, 0x81]).is_err());
        assert_eq!(
            AdtcpOption::parse_body(&[0xAD, 0x7C]),
            Err(WireError::Truncated {
                needed: 1,
                available: 0
            })
        );
        assert_eq!(
            AdtcpOption::parse_body(&[0xAD, 0x7C, 0x80, 1, 2]),
            Err(WireError::Malformed("adtcp option length"))
        );
    }

    #[test]
    fn test_emit_into_short_buffer_is_an_error() {
        let o = AdtcpOption {
            report: None,
            sent_us: Some(1),
        };
        assert!(o.emit(&mut [0u8; 8]).is_err());
    }

    #[test]
    fn test_send_clock_wraps_in_microseconds() {
        assert_eq!(send_clock_us(Time::from_micros(1234)), 1234);
        assert_eq!(send_clock_us(Time::from_micros(1 << 32)), 0);
        assert_eq!(send_clock_us(Time::from_nanos(1999)), 1);
    }

    #[test]
    fn test_header_with_adtcp_timestamps_and_sack_fits_40_bytes() {
        let mut sack = SackBlocks::EMPTY;
        for i in 0..4 {
            sack.push(SackBlock {
                left: i * 10,
                right: i * 10 + 5,
            });
        }
        let repr = TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq: 3,
            ack: 4,
            flags: Flags {
                ack: true,
                ..Flags::default()
            },
            window: 5,
            mss: None,
            window_scale: None,
            sack_permitted: false,
            sack,
            timestamps: Some(Timestamps { value: 1, echo: 2 }),
            adtcp: Some(AdtcpOption {
                report: Some(CONGESTED),
                sent_us: Some(99),
            }),
        };
        // 10 (timestamps) + 9 (ADTCP) leave room for two SACK blocks (18 bytes).
        assert_eq!(repr.buffer_len(), 60);
        let mut buf = [0u8; 60];
        assert_eq!(repr.emit(&mut buf), Ok(60));
        let back = TcpRepr::parse(&buf).expect("parses");
        assert_eq!(back.adtcp, repr.adtcp);
        assert_eq!(back.timestamps, repr.timestamps);
        assert_eq!(back.sack.as_slice(), &repr.sack.as_slice()[..2]);
    }

    fn report() -> impl Strategy<Value = Option<StateReport>> {
        proptest::option::of((any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
            |(congestion, channel_error, route_change)| StateReport {
                congestion,
                channel_error,
                route_change,
            },
        ))
    }

    proptest! {
        #[test]
        fn any_option_round_trips(report in report(), sent in proptest::option::of(any::<u32>())) {
            let o = AdtcpOption { report, sent_us: sent };
            prop_assert_eq!(round_trip(o), o);
        }

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = AdtcpOption::parse(&bytes);
            let _ = AdtcpOption::parse_body(&bytes);
        }

        #[test]
        fn any_header_with_the_option_round_trips(
            report in report(), sent in proptest::option::of(any::<u32>()),
            ts in proptest::option::of((any::<u32>(), any::<u32>())), syn in any::<bool>(),
        ) {
            let repr = TcpRepr {
                src_port: 9, dst_port: 10, seq: 11, ack: 12,
                flags: Flags { ack: true, syn, ..Flags::default() },
                window: 13, mss: syn.then_some(1460), window_scale: syn.then_some(7),
                sack_permitted: syn, sack: SackBlocks::EMPTY,
                timestamps: ts.map(|(value, echo)| Timestamps { value, echo }),
                adtcp: Some(AdtcpOption { report, sent_us: sent }),
            };
            let mut buf = [0u8; 60];
            let n = repr.emit(&mut buf).expect("fits");
            prop_assert_eq!(TcpRepr::parse(&buf[..n]), Ok(repr));
        }
    }
}
