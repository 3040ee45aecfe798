//! Checked reading and writing of wire formats.
//!
//! Every packet type in adaptnet has a `Repr` with `parse(&[u8]) -> Result<Repr, WireError>`,
//! `buffer_len()` and `emit(&mut [u8])`. The contract, as in smoltcp:
//!
//! * `parse` never panics, on any byte string; malformed input is a [`WireError`];
//! * `emit` never panics when given a buffer of at least `buffer_len()` bytes.
//!
//! [`Reader`] and [`Writer`] are the bounds-checked cursors those implementations share.

use thiserror::Error;

/// Why a byte string is not a valid packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum WireError {
    /// Fewer bytes than the format requires.
    #[error("truncated packet: needed {needed} bytes, had {available}")]
    Truncated {
        /// Bytes required to continue parsing.
        needed: usize,
        /// Bytes that were left.
        available: usize,
    },
    /// The version field names a version this build does not speak.
    #[error("unsupported wire version {0}")]
    UnsupportedVersion(u8),
    /// A type or kind field has an unknown value.
    #[error("unknown {field} {value}")]
    UnknownKind {
        /// Which field.
        field: &'static str,
        /// The value found.
        value: u32,
    },
    /// A field holds a value that violates the format (e.g. a length pointing past the end).
    #[error("malformed field {0}")]
    Malformed(&'static str),
    /// The buffer handed to `emit` is smaller than `buffer_len()`.
    #[error("emit buffer too small: need {needed}, have {available}")]
    BufferTooSmall {
        /// Bytes required.
        needed: usize,
        /// Bytes provided.
        available: usize,
    },
}

/// A bounds-checked big-endian reader over a byte slice.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let truncated = WireError::Truncated {
            needed: n,
            available: self.remaining(),
        };
        let end = self.pos.checked_add(n).ok_or(truncated)?;
        let out = self.buf.get(self.pos..end).ok_or(truncated)?;
        self.pos = end;
        Ok(out)
    }

    /// Takes the next `N` bytes as an array.
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    /// Takes the next byte.
    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    /// Takes a big-endian u16.
    pub fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// Takes a big-endian u32.
    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// Takes a big-endian u64.
    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
}

/// A bounds-checked big-endian writer into a byte slice.
#[derive(Debug)]
pub struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    /// Starts writing at the beginning of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Writer<'a> {
        Writer { buf, pos: 0 }
    }

    /// Bytes written so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, data: &[u8]) -> Result<(), WireError> {
        let too_small = WireError::BufferTooSmall {
            needed: self.pos.saturating_add(data.len()),
            available: self.buf.len(),
        };
        let end = self.pos.checked_add(data.len()).ok_or(too_small)?;
        self.buf
            .get_mut(self.pos..end)
            .ok_or(too_small)?
            .copy_from_slice(data);
        self.pos = end;
        Ok(())
    }

    /// Appends a byte.
    pub fn u8(&mut self, v: u8) -> Result<(), WireError> {
        self.bytes(&[v])
    }

    /// Appends a big-endian u16.
    pub fn u16(&mut self, v: u16) -> Result<(), WireError> {
        self.bytes(&v.to_be_bytes())
    }

    /// Appends a big-endian u32.
    pub fn u32(&mut self, v: u32) -> Result<(), WireError> {
        self.bytes(&v.to_be_bytes())
    }

    /// Appends a big-endian u64.
    pub fn u64(&mut self, v: u64) -> Result<(), WireError> {
        self.bytes(&v.to_be_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_reports_truncation_instead_of_panicking() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16(), Ok(0x0102));
        assert_eq!(
            r.u32(),
            Err(WireError::Truncated {
                needed: 4,
                available: 1
            })
        );
        assert_eq!(r.u8(), Ok(3));
        assert!(r.u8().is_err());
    }

    #[test]
    fn writer_refuses_overflow() {
        let mut buf = [0u8; 3];
        let mut w = Writer::new(&mut buf);
        assert!(w.u16(7).is_ok());
        assert!(w.u16(7).is_err());
        assert_eq!(w.position(), 2);
    }
}
