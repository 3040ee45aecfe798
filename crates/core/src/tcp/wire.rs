//! The TCP header (RFC 9293 §3.1), so that simulated traffic is real TCP on a capture.
//!
//! Only what the stream uses is interpreted: ports, sequence and acknowledgement numbers,
//! the SYN/ACK/FIN/RST/PSH/ECE/CWR flags, the window, and the MSS, window-scale, SACK-permitted,
//! SACK and timestamp options (RFC 9293 §3.2, RFC 7323 §2–3, RFC 2018 §2–3), and the ADTCP
//! option (papers/004, [`crate::adtcp::option`]). Unknown options are skipped, so new ones can
//! be added without breaking older peers.
//!
//! No-panic contract: `parse` returns `Err` for any byte string it cannot read; `emit` never
//! panics and writes exactly `buffer_len()` bytes (at most 60, the largest data offset). The checksum is emitted as zero:
//! adaptnet's engines carry segments in their own framing, and capture tools do not verify
//! TCP checksums by default. Payload bytes are not part of the `Repr`.

use super::options::{MAX_SACK_BLOCKS, SackBlock, SackBlocks, Timestamps};
use crate::adtcp::option::{self as adtcp_option, AdtcpOption};
use crate::wire::{Reader, WireError, Writer};

/// Header flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// Synchronise sequence numbers.
    pub syn: bool,
    /// The acknowledgement field is significant.
    pub ack: bool,
    /// No more data from sender.
    pub fin: bool,
    /// Reset the connection.
    pub rst: bool,
    /// Push function.
    pub psh: bool,
    /// ECN echo (RFC 3168).
    pub ece: bool,
    /// Congestion window reduced (RFC 3168).
    pub cwr: bool,
}

impl Flags {
    fn to_bits(self) -> u8 {
        (self.fin as u8)
            | (self.syn as u8) << 1
            | (self.rst as u8) << 2
            | (self.psh as u8) << 3
            | (self.ack as u8) << 4
            | (self.ece as u8) << 6
            | (self.cwr as u8) << 7
    }

    fn from_bits(b: u8) -> Flags {
        Flags {
            fin: b & 1 != 0,
            syn: b & 2 != 0,
            rst: b & 4 != 0,
            psh: b & 8 != 0,
            ack: b & 16 != 0,
            ece: b & 64 != 0,
            cwr: b & 128 != 0,
        }
    }
}

/// A parsed TCP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number of the first byte (or of the SYN/FIN).
    pub seq: u32,
    /// Acknowledgement number (meaningful when `flags.ack`).
    pub ack: u32,
    /// Flags.
    pub flags: Flags,
    /// Raw window field (to be shifted by the peer's window scale).
    pub window: u16,
    /// MSS option (SYN only).
    pub mss: Option<u16>,
    /// Window-scale option (SYN only), RFC 7323 §2.
    pub window_scale: Option<u8>,
    /// SACK-permitted option (SYN only), RFC 2018 §2.
    pub sack_permitted: bool,
    /// SACK blocks, RFC 2018 §3 (at most three are emitted when `timestamps` is present).
    pub sack: SackBlocks,
    /// Timestamp option, RFC 7323 §3.
    pub timestamps: Option<Timestamps>,
    /// ADTCP option (papers/004): a state report and/or a sending time.
    pub adtcp: Option<AdtcpOption>,
}

/// Fixed header length without options.
pub const HEADER_LEN: usize = 20;
/// Largest header `emit` writes: the fixed part and 40 bytes of options.
pub const MAX_HEADER_LEN: usize = 60;
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;
const OPT_WSCALE: u8 = 3;
const OPT_SACK_PERMITTED: u8 = 4;
const OPT_SACK: u8 = 5;
const OPT_TIMESTAMPS: u8 = 8;
/// RFC 9293 §3.1: options fill at most 40 bytes (data offset of 15 words).
const MAX_OPTIONS_LEN: usize = 40;

impl TcpRepr {
    /// A header without options or payload (an ACK, FIN or reset of its own): ports,
    /// numbers, flags, and a zero window.
    pub fn control(src_port: u16, dst_port: u16, seq: u32, ack: u32, flags: Flags) -> TcpRepr {
        TcpRepr {
            src_port,
            dst_port,
            seq,
            ack,
            flags,
            window: 0,
            mss: None,
            window_scale: None,
            sack_permitted: false,
            sack: SackBlocks::EMPTY,
            timestamps: None,
            adtcp: None,
        }
    }

    /// Bytes `emit` writes: the fixed header plus options padded to 32 bits.
    pub fn buffer_len(&self) -> usize {
        let blocks = self.emitted_sack().len();
        let sack = if blocks > 0 { 2 + 8 * blocks } else { 0 };
        HEADER_LEN + (self.non_sack_options_len() + sack).div_ceil(4) * 4
    }

    /// Bytes of the options other than SACK.
    fn non_sack_options_len(&self) -> usize {
        let mut len = 0;
        if self.mss.is_some() {
            len += 4;
        }
        if self.window_scale.is_some() {
            len += 3;
        }
        if self.sack_permitted {
            len += 2;
        }
        if self.timestamps.is_some() {
            len += 10;
        }
        if let Some(o) = self.adtcp {
            len += o.buffer_len();
        }
        len
    }

    /// The SACK blocks `emit` writes: as many as fit beside the other options (RFC 2018 §3:
    /// three with timestamps, four without).
    fn emitted_sack(&self) -> SackBlocks {
        let room = MAX_OPTIONS_LEN
            .saturating_sub(self.non_sack_options_len())
            .saturating_sub(2)
            / 8;
        self.sack.truncated(room.min(MAX_SACK_BLOCKS))
    }

    /// Parses a header; the bytes after the header (payload) are ignored.
    pub fn parse(buf: &[u8]) -> Result<TcpRepr, WireError> {
        TcpRepr::parse_segment(buf).map(|(repr, _)| repr)
    }

    /// Parses a whole segment: the header, and the payload after it (the data offset says
    /// where it starts, RFC 9293 §3.1).
    pub fn parse_segment(buf: &[u8]) -> Result<(TcpRepr, &[u8]), WireError> {
        let mut r = Reader::new(buf);
        let src_port = r.u16()?;
        let dst_port = r.u16()?;
        let seq = r.u32()?;
        let ack = r.u32()?;
        let offset_words = r.u8()? >> 4;
        let flags = Flags::from_bits(r.u8()?);
        let window = r.u16()?;
        let _checksum = r.u16()?;
        let _urgent = r.u16()?;
        let header_len = usize::from(offset_words) * 4;
        if header_len < HEADER_LEN {
            return Err(WireError::Malformed("tcp data offset"));
        }
        let mut opts = Reader::new(r.bytes(header_len - HEADER_LEN)?);
        let mut mss = None;
        let mut window_scale = None;
        let mut sack_permitted = false;
        let mut sack = SackBlocks::EMPTY;
        let mut timestamps = None;
        let mut adtcp = None;
        while opts.remaining() > 0 {
            match opts.u8()? {
                OPT_END => break,
                OPT_NOP => {}
                kind => {
                    let len = usize::from(opts.u8()?);
                    if len < 2 {
                        return Err(WireError::Malformed("tcp option length"));
                    }
                    let body = opts.bytes(len - 2)?;
                    match (kind, body) {
                        (OPT_MSS, [a, b]) => mss = Some(u16::from_be_bytes([*a, *b])),
                        (OPT_WSCALE, [s]) => window_scale = Some((*s).min(14)),
                        (OPT_SACK_PERMITTED, []) => sack_permitted = true,
                        (OPT_SACK, body) if !body.is_empty() && body.len() % 8 == 0 => {
                            sack = parse_sack(body)?;
                        }
                        (OPT_TIMESTAMPS, body) if body.len() == 8 => {
                            let mut t = Reader::new(body);
                            timestamps = Some(Timestamps {
                                value: t.u32()?,
                                echo: t.u32()?,
                            });
                        }
                        (adtcp_option::KIND, body) => {
                            if let Some(o) = AdtcpOption::parse_body(body)? {
                                adtcp = Some(o);
                            }
                        }
                        (
                            OPT_MSS | OPT_WSCALE | OPT_SACK_PERMITTED | OPT_SACK | OPT_TIMESTAMPS,
                            _,
                        ) => {
                            return Err(WireError::Malformed("tcp option length"));
                        }
                        _ => {}
                    }
                }
            }
        }
        let repr = TcpRepr {
            src_port,
            dst_port,
            seq,
            ack,
            flags,
            window,
            mss,
            window_scale,
            sack_permitted,
            sack,
            timestamps,
            adtcp,
        };
        // The reader consumed exactly `header_len` bytes above.
        Ok((repr, buf.get(header_len..).unwrap_or_default()))
    }

    /// Writes the header into `buf`, which must hold `buffer_len()` bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(WireError::BufferTooSmall {
                needed: len,
                available: buf.len(),
            });
        }
        let too_small = WireError::BufferTooSmall {
            needed: len,
            available: buf.len(),
        };
        let mut w = Writer::new(buf.get_mut(..len).ok_or(too_small)?);
        w.u16(self.src_port)?;
        w.u16(self.dst_port)?;
        w.u32(self.seq)?;
        w.u32(self.ack)?;
        // `len` is at most 60 (options are capped at 40 bytes), so the word count fits the
        // 4-bit data offset.
        let words = u8::try_from(len / 4).map_err(|_| WireError::Malformed("tcp header length"))?;
        w.u8(words << 4)?;
        w.u8(self.flags.to_bits())?;
        w.u16(self.window)?;
        w.u16(0)?; // checksum: see module docs
        w.u16(0)?; // urgent pointer
        if let Some(mss) = self.mss {
            w.u8(OPT_MSS)?;
            w.u8(4)?;
            w.u16(mss)?;
        }
        if let Some(shift) = self.window_scale {
            w.u8(OPT_WSCALE)?;
            w.u8(3)?;
            w.u8(shift)?;
        }
        if self.sack_permitted {
            w.u8(OPT_SACK_PERMITTED)?;
            w.u8(2)?;
        }
        if let Some(ts) = self.timestamps {
            w.u8(OPT_TIMESTAMPS)?;
            w.u8(10)?;
            w.u32(ts.value)?;
            w.u32(ts.echo)?;
        }
        if let Some(o) = self.adtcp {
            o.write(&mut w)?;
        }
        let sack = self.emitted_sack();
        if !sack.is_empty() {
            w.u8(OPT_SACK)?;
            // At most four blocks: 2 + 32 bytes.
            w.u8(u8::try_from(2 + 8 * sack.len()).unwrap_or(u8::MAX))?;
            for b in sack.as_slice() {
                w.u32(b.left)?;
                w.u32(b.right)?;
            }
        }
        while w.position() < len {
            w.u8(OPT_NOP)?;
        }
        Ok(len)
    }
}

/// The blocks of a SACK option body (8 bytes each). More than four cannot fit 40 bytes of
/// options, so a body claiming more is malformed.
fn parse_sack(body: &[u8]) -> Result<SackBlocks, WireError> {
    let mut r = Reader::new(body);
    let mut blocks = SackBlocks::EMPTY;
    while r.remaining() > 0 {
        let block = SackBlock {
            left: r.u32()?,
            right: r.u32()?,
        };
        if !blocks.push(block) {
            return Err(WireError::Malformed("tcp sack option length"));
        }
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TEMPLATE: TcpRepr = TcpRepr {
        src_port: 5001,
        dst_port: 80,
        seq: 0xdead_beef,
        ack: 42,
        flags: Flags {
            syn: false,
            ack: true,
            fin: false,
            rst: false,
            psh: false,
            ece: false,
            cwr: false,
        },
        window: 65535,
        mss: None,
        window_scale: None,
        sack_permitted: false,
        sack: SackBlocks::EMPTY,
        timestamps: None,
        adtcp: None,
    };

    fn round_trip(repr: TcpRepr) -> TcpRepr {
        let mut buf = vec![0u8; repr.buffer_len()];
        assert_eq!(repr.emit(&mut buf), Ok(repr.buffer_len()));
        TcpRepr::parse(&buf).expect("emitted header parses")
    }

    #[test]
    fn test_plain_ack_round_trips() {
        assert_eq!(TEMPLATE.buffer_len(), 20);
        assert_eq!(round_trip(TEMPLATE), TEMPLATE);
    }

    #[test]
    fn test_syn_with_options_round_trips() {
        let syn = TcpRepr {
            flags: Flags {
                syn: true,
                ..Flags::default()
            },
            mss: Some(1460),
            window_scale: Some(7),
            ..TEMPLATE
        };
        assert_eq!(syn.buffer_len(), 28);
        assert_eq!(round_trip(syn), syn);
    }

    fn blocks(ranges: &[(u32, u32)]) -> SackBlocks {
        let mut b = SackBlocks::EMPTY;
        for &(left, right) in ranges {
            assert!(b.push(SackBlock { left, right }));
        }
        b
    }

    #[test]
    fn test_syn_with_sack_permitted_and_timestamps_round_trips() {
        let syn = TcpRepr {
            flags: Flags {
                syn: true,
                ..Flags::default()
            },
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            timestamps: Some(Timestamps { value: 7, echo: 0 }),
            ..TEMPLATE
        };
        assert_eq!(syn.buffer_len(), 40);
        assert_eq!(round_trip(syn), syn);
    }

    #[test]
    fn test_ack_with_four_sack_blocks_round_trips() {
        let ack = TcpRepr {
            sack: blocks(&[(100, 200), (300, 400), (500, 600), (u32::MAX - 5, 3)]),
            ..TEMPLATE
        };
        assert_eq!(ack.buffer_len(), 20 + 36);
        assert_eq!(round_trip(ack), ack);
    }

    #[test]
    fn test_timestamps_leave_room_for_three_sack_blocks() {
        let ack = TcpRepr {
            sack: blocks(&[(1, 2), (3, 4), (5, 6), (7, 8)]),
            timestamps: Some(Timestamps { value: 1, echo: 2 }),
            ..TEMPLATE
        };
        assert_eq!(ack.buffer_len(), 20 + 36);
        let back = round_trip(ack);
        assert_eq!(back.sack, blocks(&[(1, 2), (3, 4), (5, 6)]));
        assert_eq!(back.timestamps, ack.timestamps);
    }

    #[test]
    fn test_malformed_sack_and_timestamp_options_are_errors() {
        let mut buf = [0u8; 28];
        TEMPLATE.emit(&mut buf[..20]).expect("fits");
        buf[12] = 0x70; // 28-byte header
        // A SACK option with a 6-byte body (not a multiple of 8).
        buf[20..28].copy_from_slice(&[OPT_SACK, 8, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            TcpRepr::parse(&buf),
            Err(WireError::Malformed("tcp option length"))
        );
        // A timestamp option that is too short.
        buf[20..28].copy_from_slice(&[OPT_TIMESTAMPS, 6, 0, 0, 0, 0, OPT_NOP, OPT_NOP]);
        assert_eq!(
            TcpRepr::parse(&buf),
            Err(WireError::Malformed("tcp option length"))
        );
    }

    #[test]
    fn test_unknown_options_are_skipped() {
        let mut buf = [0u8; 28];
        TEMPLATE.emit(&mut buf[..20]).expect("fits");
        buf[12] = 0x70;
        buf[20..28].copy_from_slice(&[99, 4, 1, 2, OPT_NOP, OPT_NOP, OPT_NOP, OPT_END]);
        assert_eq!(TcpRepr::parse(&buf), Ok(TEMPLATE));
    }

    #[test]
    fn test_bad_data_offset_is_an_error() {
        let mut buf = [0u8; 20];
        TEMPLATE.emit(&mut buf).expect("fits");
        buf[12] = 0x30; // 12-byte header
        assert_eq!(
            TcpRepr::parse(&buf),
            Err(WireError::Malformed("tcp data offset"))
        );
    }

    #[test]
    fn test_emit_into_short_buffer_is_an_error() {
        let mut buf = [0u8; 10];
        assert!(TEMPLATE.emit(&mut buf).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = TcpRepr::parse(&bytes);
        }

        #[test]
        fn any_header_round_trips(
            seq in any::<u32>(), ack in any::<u32>(), bits in any::<u8>(), window in any::<u16>(),
            mss in proptest::option::of(any::<u16>()), ws in proptest::option::of(0u8..=14),
            sack_permitted in any::<bool>(),
            ts in proptest::option::of((any::<u32>(), any::<u32>())),
            ranges in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..=4),
        ) {
            let repr = TcpRepr { seq, ack, flags: Flags::from_bits(bits & !0x20), window, mss,
                                 window_scale: ws, sack_permitted,
                                 timestamps: ts.map(|(value, echo)| Timestamps { value, echo }),
                                 sack: blocks(&ranges), ..TEMPLATE };
            let back = round_trip(repr);
            prop_assert!(repr.buffer_len() <= 60);
            // Whatever did not fit is dropped from the end, never reordered or corrupted.
            prop_assert_eq!(back.sack, repr.emitted_sack());
            prop_assert_eq!(TcpRepr { sack: repr.emitted_sack(), ..repr }, back);
        }
    }
}
