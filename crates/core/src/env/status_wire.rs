//! The status message: a parameter report from a base station or proxy to a host, over UDP
//! (the role of papers/001 §3.1's ICMP_STATUS, Figure 2).
//!
//! > "In some cases, the base station or some other proxy can report events to the mobile
//! > host. … The message contains name of the device for which the event has occurred. … The
//! > message also contains the name of the parameter that caused the event and a list of
//! > watermarks that have been violated." (§3.1)
//!
//! Unlike a local ICMP message, a report that crosses a network must be authenticated, so the
//! format carries a key id, a sequence number against replay and an HMAC-SHA256 tag; see
//! [`crate::env::status_auth`] for the receiver's checks. All integers are big-endian.
//!
//! ```text
//! offset  size  field
//!   0      2    magic "AS" (adaptnet status)
//!   2      1    version, 1
//!   3      1    kind, 1 = parameter report
//!   4      4    key id (which shared key signed this)
//!   8      8    sequence number (>= 1, increasing per key)
//!  16      1    device name length n, 1..=32
//!  17      n    device name, UTF-8
//!   .      1    parameter code (1..=7 well-known, 0 = custom)
//!   .    1+m    custom only: name length m (1..=32), name
//!   .      8    value, IEEE 754 binary64, finite
//!   .     16    levels violated (bit i = level i)
//!   .     16    levels cleared
//!   .     32    HMAC-SHA256 over every byte before it
//! ```
//!
//! `parse` never panics on any byte string and checks structure only — it does not
//! authenticate; `emit` never panics and fails on a buffer shorter than `buffer_len()`.

use super::params::{Name, Param};
use super::watermarks::LevelMask;
use crate::wire::{Reader, WireError, Writer};
use hmac::{KeyInit, Mac};
use std::fmt;

/// HMAC-SHA256, the status message's authenticator.
pub(crate) type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The first two bytes of every status message.
pub const MAGIC: [u8; 2] = *b"AS";
/// The format version this build speaks.
pub const VERSION: u8 = 1;
/// The kind of a parameter report.
pub const KIND_PARAM_REPORT: u8 = 1;
/// Length of the HMAC-SHA256 tag.
pub const MAC_LEN: usize = 32;
/// Length of a message with one-byte names and a well-known parameter (the smallest).
pub const MIN_LEN: usize = 16 + 2 + 1 + 8 + 16 + 16 + MAC_LEN;

/// A shared key for status messages: 16 to 64 bytes. Its `Debug` does not show it.
#[derive(Clone)]
pub struct StatusKey {
    /// HMAC-SHA256 keyed with the key, cloned for each message.
    keyed: HmacSha256,
    len: usize,
}

impl StatusKey {
    /// Shortest accepted key, in bytes.
    pub const MIN_BYTES: usize = 16;
    /// Longest accepted key, in bytes (one HMAC-SHA256 block).
    pub const MAX_BYTES: usize = 64;

    /// Checks the length of `key`.
    pub fn new(key: &[u8]) -> Option<StatusKey> {
        if !(Self::MIN_BYTES..=Self::MAX_BYTES).contains(&key.len()) {
            return None;
        }
        Some(StatusKey {
            keyed: HmacSha256::new_from_slice(key).ok()?,
            len: key.len(),
        })
    }

    /// An HMAC instance keyed with this key.
    pub(crate) fn mac(&self) -> HmacSha256 {
        self.keyed.clone()
    }
}

impl fmt::Debug for StatusKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StatusKey({} bytes)", self.len)
    }
}

/// A parameter report with its authentication header (the tag is computed by `emit` and
/// checked by [`crate::env::StatusVerifier`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StatusMessage {
    /// Which shared key signs the message.
    pub key_id: u32,
    /// Sequence number, increasing per key; 0 is never valid.
    pub seq: u64,
    /// The reporter's name for the device the report is about.
    pub device: Name,
    /// The parameter.
    pub param: Param,
    /// Its value as the reporter measured it.
    pub value: f64,
    /// Levels the reporter saw violated (may be empty when only the value is reported).
    pub violated: LevelMask,
    /// Levels the reporter saw cleared.
    pub cleared: LevelMask,
}

impl StatusMessage {
    /// A report of `event` (key id and sequence number are stamped by
    /// [`crate::env::StatusSigner::seal`]).
    pub fn from_event(event: &super::EnvEvent) -> StatusMessage {
        StatusMessage {
            key_id: 0,
            seq: 0,
            device: event.device.clone(),
            param: event.param.clone(),
            value: event.value,
            violated: event.violated,
            cleared: event.cleared,
        }
    }

    /// Encoded length.
    pub fn buffer_len(&self) -> usize {
        let custom = match &self.param {
            Param::Custom(n) => 1 + n.as_str().len(),
            _ => 0,
        };
        MIN_LEN - 1 + self.device.as_str().len() + custom
    }

    /// Writes the message and its tag under `key`; returns the length written.
    pub fn emit(&self, key: &StatusKey, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(WireError::BufferTooSmall {
                needed: len,
                available: buf.len(),
            });
        }
        if !self.value.is_finite() {
            return Err(WireError::Malformed("value"));
        }
        let body_len = len - MAC_LEN;
        let (body, rest) = buf.split_at_mut(body_len);
        let mut w = Writer::new(body);
        w.bytes(&MAGIC)?;
        w.u8(VERSION)?;
        w.u8(KIND_PARAM_REPORT)?;
        w.u32(self.key_id)?;
        w.u64(self.seq)?;
        write_name(&mut w, &self.device)?;
        w.u8(self.param.code())?;
        if let Param::Custom(n) = &self.param {
            write_name(&mut w, n)?;
        }
        w.u64(self.value.to_bits())?;
        w.bytes(&self.violated.bits().to_be_bytes())?;
        w.bytes(&self.cleared.bits().to_be_bytes())?;
        let tag = key.mac().chain_update(&*body).finalize().into_bytes();
        Writer::new(rest).bytes(&tag)?;
        Ok(len)
    }

    /// Parses a whole datagram's structure. Does not check the tag: use
    /// [`crate::env::StatusVerifier::verify`] on anything received.
    pub fn parse(buf: &[u8]) -> Result<StatusMessage, WireError> {
        Self::parse_parts(buf).map(|(m, _, _)| m)
    }

    /// Parses, and returns the message, the signed bytes and the tag.
    pub(crate) fn parse_parts(buf: &[u8]) -> Result<(StatusMessage, &[u8], &[u8]), WireError> {
        let mut r = Reader::new(buf);
        if r.bytes(2)? != MAGIC {
            return Err(WireError::Malformed("magic"));
        }
        let version = r.u8()?;
        if version != VERSION {
            return Err(WireError::UnsupportedVersion(version));
        }
        let kind = r.u8()?;
        if kind != KIND_PARAM_REPORT {
            return Err(WireError::UnknownKind {
                field: "status kind",
                value: u32::from(kind),
            });
        }
        let key_id = r.u32()?;
        let seq = r.u64()?;
        let device = read_name(&mut r, "device name")?;
        let code = r.u8()?;
        let param = if code == Param::CUSTOM_CODE {
            Param::Custom(read_name(&mut r, "parameter name")?)
        } else {
            Param::from_code(code).ok_or(WireError::UnknownKind {
                field: "parameter code",
                value: u32::from(code),
            })?
        };
        let value = f64::from_bits(r.u64()?);
        if !value.is_finite() {
            return Err(WireError::Malformed("value"));
        }
        let violated = LevelMask::from_bits(read_u128(&mut r)?);
        let cleared = LevelMask::from_bits(read_u128(&mut r)?);
        let body_len = r.position();
        let tag = r.bytes(MAC_LEN)?;
        if r.remaining() != 0 {
            return Err(WireError::Malformed("trailing bytes"));
        }
        let signed = buf.get(..body_len).ok_or(WireError::Malformed("length"))?;
        let msg = StatusMessage {
            key_id,
            seq,
            device,
            param,
            value,
            violated,
            cleared,
        };
        Ok((msg, signed, tag))
    }
}

fn write_name(w: &mut Writer<'_>, name: &Name) -> Result<(), WireError> {
    let bytes = name.as_str().as_bytes();
    w.u8(u8::try_from(bytes.len()).map_err(|_| WireError::Malformed("name length"))?)?;
    w.bytes(bytes)
}

fn read_name(r: &mut Reader<'_>, field: &'static str) -> Result<Name, WireError> {
    let len = r.u8()?;
    let bytes = r.bytes(usize::from(len))?;
    let s = std::str::from_utf8(bytes).map_err(|_| WireError::Malformed(field))?;
    Name::new(s).map_err(|_| WireError::Malformed(field))
}

fn read_u128(r: &mut Reader<'_>) -> Result<u128, WireError> {
    let hi = u128::from(r.u64()?);
    let lo = u128::from(r.u64()?);
    Ok((hi << 64) | lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn key() -> StatusKey {
        StatusKey::new(b"0123456789abcdef0123456789abcdef").unwrap()
    }

    fn template() -> StatusMessage {
        StatusMessage {
            key_id: 7,
            seq: 1,
            device: Name::new("wlan0").unwrap(),
            param: Param::Availability,
            value: 45.0,
            violated: LevelMask::of(&[3]),
            cleared: LevelMask::EMPTY,
        }
    }

    fn emit(m: &StatusMessage) -> Vec<u8> {
        let mut buf = vec![0u8; m.buffer_len()];
        assert_eq!(m.emit(&key(), &mut buf), Ok(buf.len()));
        buf
    }

    #[test]
    fn test_round_trip_well_known_and_custom() {
        let m = template();
        assert_eq!(StatusMessage::parse(&emit(&m)), Ok(m.clone()));
        let custom = StatusMessage {
            param: Param::from_name("location").unwrap(),
            violated: LevelMask::of(&[0, 127]),
            cleared: LevelMask::of(&[64]),
            value: -1.5e300,
            ..m
        };
        let bytes = emit(&custom);
        assert_eq!(bytes.len(), MIN_LEN - 1 + 5 + 1 + 8);
        assert_eq!(StatusMessage::parse(&bytes), Ok(custom));
    }

    #[test]
    fn test_header_layout() {
        let b = emit(&template());
        assert_eq!(&b[..4], b"AS\x01\x01");
        assert_eq!(&b[4..8], &7u32.to_be_bytes());
        assert_eq!(&b[8..16], &1u64.to_be_bytes());
        assert_eq!(b[16], 5);
        assert_eq!(&b[17..22], b"wlan0");
        assert_eq!(b[22], Param::Availability.code());
    }

    #[test]
    fn test_parse_rejects_bad_structure() {
        let good = emit(&template());
        let mut v = good.clone();
        v[2] = 2;
        assert_eq!(
            StatusMessage::parse(&v),
            Err(WireError::UnsupportedVersion(2))
        );
        let mut v = good.clone();
        v[0] = b'X';
        assert_eq!(StatusMessage::parse(&v), Err(WireError::Malformed("magic")));
        let mut v = good.clone();
        v.push(0);
        assert_eq!(
            StatusMessage::parse(&v),
            Err(WireError::Malformed("trailing bytes"))
        );
        assert!(matches!(
            StatusMessage::parse(&good[..good.len() - 1]),
            Err(WireError::Truncated { .. })
        ));
        let mut v = good.clone();
        v[16] = 0; // empty device name
        assert!(StatusMessage::parse(&v).is_err());
        let mut v = good;
        v[22] = 99;
        assert!(matches!(
            StatusMessage::parse(&v),
            Err(WireError::UnknownKind { .. })
        ));
    }

    #[test]
    fn test_emit_refuses_short_buffer_and_non_finite_value() {
        let m = template();
        let mut short = vec![0u8; m.buffer_len() - 1];
        assert!(matches!(
            m.emit(&key(), &mut short),
            Err(WireError::BufferTooSmall { .. })
        ));
        let nan = StatusMessage {
            value: f64::NAN,
            ..m
        };
        let mut buf = vec![0u8; nan.buffer_len()];
        assert_eq!(
            nan.emit(&key(), &mut buf),
            Err(WireError::Malformed("value"))
        );
    }

    #[test]
    fn test_key_length_is_checked_and_not_printed() {
        assert!(StatusKey::new(&[0u8; 15]).is_none());
        assert!(StatusKey::new(&[0u8; 65]).is_none());
        assert_eq!(format!("{:?}", key()), "StatusKey(32 bytes)");
    }

    fn arb_param() -> impl Strategy<Value = Param> {
        prop_oneof![
            (1u8..=7).prop_map(|c| Param::from_code(c).unwrap()),
            "[a-z_]{1,32}".prop_map(|s| Param::from_name(&s).unwrap()),
        ]
    }

    proptest! {
        #[test]
        fn prop_round_trip(
            key_id in any::<u32>(),
            seq in any::<u64>(),
            device in "[a-zA-Z0-9.:-]{1,32}",
            param in arb_param(),
            value in proptest::num::f64::NORMAL | proptest::num::f64::ZERO,
            violated in any::<u128>(),
            cleared in any::<u128>(),
        ) {
            let m = StatusMessage {
                key_id,
                seq,
                device: Name::new(&device).unwrap(),
                param,
                value,
                violated: LevelMask::from_bits(violated),
                cleared: LevelMask::from_bits(cleared),
            };
            prop_assert_eq!(StatusMessage::parse(&emit(&m)), Ok(m));
        }

        #[test]
        fn prop_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = StatusMessage::parse(&bytes);
        }

        #[test]
        fn prop_parse_never_panics_near_valid(pos in 0usize..120, byte in any::<u8>(), cut in 0usize..130) {
            let mut v = emit(&template());
            if let Some(b) = v.get_mut(pos) {
                *b = byte;
            }
            v.truncate(cut);
            let _ = StatusMessage::parse(&v);
        }
    }
}
