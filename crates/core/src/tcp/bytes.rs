//! The byte buffers of an engine that carries real stream bytes beside a [`Connection`]
//! (which counts bytes and positions only): what was written and is not yet acknowledged, for
//! (re)transmissions, and a reassembly ring for what arrives out of order. The runtime's
//! stream transport and the simulator (when it carries message bytes) both use them, so the
//! mapping between wire sequence numbers and stream offsets is written once.
//!
//! Stream offsets count data bytes from 0; wire position 0 is the SYN, so the byte at offset
//! `o` travels with sequence number `isn + 1 + o` (RFC 9293 §3.4).
//!
//! [`Connection`]: super::Connection

use super::seq;
use std::collections::VecDeque;

/// The stream offset of the first data byte of a segment numbered `seq_wire`, in a direction
/// whose initial sequence number is `isn`, taken nearest to offset `near` (a recent offset
/// the caller knows, e.g. the first unacknowledged or the next undelivered byte). `None` for
/// the SYN's own number.
pub fn data_offset(isn: u32, seq_wire: u32, near: u64) -> Option<u64> {
    seq::from_wire(isn, seq_wire, near.saturating_add(1)).checked_sub(1)
}

/// The bytes written to a connection and not yet acknowledged, by stream offset.
///
/// Unbounded by itself: the engine bounds what it pushes (a socket send buffer, or a framer
/// that writes only while few bytes are unacknowledged).
#[derive(Clone, Debug, Default)]
pub struct SendBuffer {
    buf: VecDeque<u8>,
    /// The stream offset of `buf[0]`: every byte before it is acknowledged.
    base: u64,
}

impl SendBuffer {
    /// An empty buffer at the start of the stream.
    pub fn new() -> SendBuffer {
        SendBuffer::default()
    }

    /// The offset of the first byte held (all before it are acknowledged).
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The offset after the last byte written.
    pub fn end(&self) -> u64 {
        self.base.saturating_add(self.buf.len() as u64)
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no byte is held.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Appends bytes written by the application.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend(data);
    }

    /// The connection has acknowledged the first `acked` stream bytes: frees them. Returns
    /// how many were freed.
    pub fn release_through(&mut self, acked: u64) -> u64 {
        let n = acked.saturating_sub(self.base).min(self.buf.len() as u64);
        self.buf
            .drain(..usize::try_from(n).unwrap_or(self.buf.len()));
        self.base += n;
        n
    }

    /// Copies the payload of the segment numbered `seq_wire` (our initial sequence number
    /// `iss`) into `out`, which is as long as the segment's payload. `false` (and `out`
    /// untouched) when the buffer does not hold those bytes — a bug in the engine, which
    /// must keep every unacknowledged byte.
    pub fn copy_segment(&self, iss: u32, seq_wire: u32, out: &mut [u8]) -> bool {
        let Some(offset) = data_offset(iss, seq_wire, self.base) else {
            return false;
        };
        let Some(start) = offset
            .checked_sub(self.base)
            .and_then(|s| usize::try_from(s).ok())
        else {
            return false;
        };
        let Some(end) = start
            .checked_add(out.len())
            .filter(|&e| e <= self.buf.len())
        else {
            return false;
        };
        for (d, b) in out.iter_mut().zip(self.buf.range(start..end)) {
            *d = *b;
        }
        true
    }
}

/// The receive reassembly buffer: bytes by stream offset in a ring as large as the TCP
/// receive buffer. Core's receiver accepts only bytes below `read + recv_buffer` (its window
/// is the buffer minus what is delivered and unread), and the ring's base is exactly what has
/// been read from core, so every byte core accepts has a slot and none overwrites a live one.
#[derive(Clone, Debug)]
pub struct ReceiveRing {
    buf: Vec<u8>,
    /// The offset of the first byte not yet handed on.
    base: u64,
}

impl ReceiveRing {
    /// A ring of `capacity` bytes (at least 1) starting at offset 0. Give it the connection's
    /// `recv_buffer`.
    pub fn new(capacity: usize) -> ReceiveRing {
        ReceiveRing {
            buf: vec![0; capacity.max(1)],
            base: 0,
        }
    }

    /// The offset of the next byte to hand on.
    pub fn base(&self) -> u64 {
        self.base
    }

    fn slot(&self, offset: u64) -> usize {
        // The remainder is below the capacity, a usize.
        usize::try_from(offset % self.buf.len() as u64).unwrap_or(0)
    }

    /// Stores `data` found at stream `offset`; bytes outside `[base, base + capacity)` are
    /// ignored (old duplicates, or beyond the window core will not accept either).
    pub fn store(&mut self, offset: u64, data: &[u8]) {
        let cap = self.buf.len() as u64;
        let start = offset.max(self.base);
        let end = offset
            .saturating_add(data.len() as u64)
            .min(self.base.saturating_add(cap));
        let mut at = start;
        while at < end {
            let slot = self.slot(at);
            let run = (end - at).min((self.buf.len() - slot) as u64);
            let (Ok(run_len), Ok(skip)) = (usize::try_from(run), usize::try_from(at - offset))
            else {
                return;
            };
            if let (Some(dst), Some(src)) = (
                self.buf.get_mut(slot..slot + run_len),
                data.get(skip..skip + run_len),
            ) {
                dst.copy_from_slice(src);
            }
            at += run;
        }
    }

    /// Stores the payload of an arriving segment numbered `seq_wire` (the peer's initial
    /// sequence number `irs`), placed near offset `near` (e.g. the connection's
    /// `bytes_delivered()`). Call it before handing the segment to the connection.
    pub fn store_segment(&mut self, irs: u32, seq_wire: u32, near: u64, payload: &[u8]) {
        if let Some(offset) = data_offset(irs, seq_wire, near) {
            self.store(offset, payload);
        }
    }

    /// Hands on the `n` bytes at the base (the caller knows they are complete: the
    /// connection delivered them) and advances.
    pub fn take(&mut self, n: u64, out: &mut impl Extend<u8>) {
        let n = n.min(self.buf.len() as u64);
        let mut left = n;
        while left > 0 {
            let slot = self.slot(self.base);
            let run = left.min((self.buf.len() - slot) as u64);
            let run_len = usize::try_from(run).unwrap_or(0);
            if let Some(src) = self.buf.get(slot..slot + run_len) {
                out.extend(src.iter().copied());
            }
            self.base += run;
            left -= run;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_out_of_order_then_in_order_reassembles_across_wrap() {
        let mut r = ReceiveRing::new(8);
        let mut out = Vec::new();
        r.store(0, b"abcdef");
        r.take(6, &mut out);
        // The window now spans offsets 6..14: a later piece first, wrapping around.
        r.store(10, b"klmn");
        r.store(6, b"ghij");
        r.take(8, &mut out);
        assert_eq!(out, b"abcdefghijklmn");
    }

    #[test]
    fn test_bytes_outside_the_window_are_ignored() {
        let mut r = ReceiveRing::new(4);
        r.store(0, b"abcdefgh"); // only abcd fits
        let mut out = Vec::new();
        r.take(4, &mut out);
        r.store(2, b"XXYZ"); // XX is old
        r.take(2, &mut out);
        assert_eq!(out, b"abcdYZ");
    }

    #[test]
    fn test_send_buffer_copies_segments_by_wire_number_and_releases_acked_bytes() {
        let iss = u32::MAX - 2; // the sequence space wraps inside the stream
        let mut s = SendBuffer::new();
        s.push(b"0123456789");
        let mut out = [0u8; 4];
        // Offset 3 travels as iss + 1 + 3.
        assert!(s.copy_segment(iss, iss.wrapping_add(4), &mut out));
        assert_eq!(&out, b"3456");
        assert_eq!(s.release_through(5), 5);
        assert_eq!((s.base(), s.end(), s.len()), (5, 10, 5));
        assert!(!s.copy_segment(iss, iss.wrapping_add(4), &mut out), "freed");
        assert!(s.copy_segment(iss, iss.wrapping_add(7), &mut out));
        assert_eq!(&out, b"6789");
        assert!(
            !s.copy_segment(iss, iss.wrapping_add(8), &mut out),
            "past the end"
        );
        assert!(
            !s.copy_segment(iss, iss, &mut out),
            "the SYN carries no data"
        );
    }

    #[test]
    fn test_ring_places_segments_by_wire_number() {
        let irs = 1000;
        let mut r = ReceiveRing::new(16);
        r.store_segment(irs, irs + 1 + 4, 0, b"efgh");
        r.store_segment(irs, irs + 1, 0, b"abcd");
        r.store_segment(irs, irs, 0, b"SYN?"); // no data offset: ignored
        let mut out = Vec::new();
        r.take(8, &mut out);
        assert_eq!(out, b"abcdefgh");
    }
}
