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
/// that writes only while few bytes are unacknowledged). Its storage is given back when
/// the engine trims an emptied buffer ([`SendBuffer::trim`]).
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

    /// Gives back storage if nothing is held ([`trim_when_empty`]).
    pub fn trim(&mut self) {
        trim_when_empty(&mut self.buf);
    }

    /// Bytes of storage held (what the buffer costs in memory).
    pub fn storage_bytes(&self) -> usize {
        self.buf.capacity()
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

/// Storage an emptied buffer keeps after a trim, bytes: none, as an idle connection should
/// hold nothing for bytes it does not buffer (an endpoint may hold thousands). Trims happen
/// when a connection has gone quiet, so regrowing costs a busy flow nothing.
pub const KEEP_WHEN_EMPTY_BYTES: usize = 0;

/// Gives back the storage of an emptied queue beyond [`KEEP_WHEN_EMPTY_BYTES`], so what an
/// idle connection holds follows what it buffers rather than the most it ever buffered.
/// Call it when the connection has gone quiet, not at every read: a queue that a busy flow
/// empties and refills many times a millisecond would be given back and grown again each
/// time (trimming at every read cost the loopback benchmark 45 % of its throughput).
pub fn trim_when_empty(q: &mut VecDeque<u8>) {
    if q.is_empty() && q.capacity() > KEEP_WHEN_EMPTY_BYTES {
        q.shrink_to(KEEP_WHEN_EMPTY_BYTES);
    }
}

/// The receive reassembly buffer: bytes by stream offset from the first one not yet handed
/// on, at most as many as the TCP receive buffer. Core's receiver accepts only bytes below
/// `read + recv_buffer` (its window is the buffer minus what is delivered and unread), and
/// the buffer's base is exactly what has been read from core, so every byte core accepts has
/// a place.
///
/// Storage grows with the span of bytes held (from the base to the furthest byte stored,
/// holes included) and is given back by [`ReceiveRing::trim`] once they are handed on: a
/// connection holds memory for what it buffers, not for its whole window (issue 17: a ring allocated at the window's
/// size held 4 MiB per connection once the stream had wrapped it).
#[derive(Clone, Debug)]
pub struct ReceiveRing {
    /// The bytes at offsets `base .. base + buf.len()` (zero where nothing arrived yet).
    buf: VecDeque<u8>,
    /// The offset of the first byte not yet handed on.
    base: u64,
    /// The most bytes held: the receive window.
    capacity: usize,
}

impl ReceiveRing {
    /// A buffer of at most `capacity` bytes (at least 1) starting at offset 0. Give it the
    /// connection's `recv_buffer`. Allocates nothing until bytes arrive.
    pub fn new(capacity: usize) -> ReceiveRing {
        ReceiveRing {
            buf: VecDeque::new(),
            base: 0,
            capacity: capacity.max(1),
        }
    }

    /// The offset of the next byte to hand on.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Bytes of storage held (what the buffer costs in memory).
    pub fn storage_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// Stores `data` found at stream `offset`; bytes outside `[base, base + capacity)` are
    /// ignored (old duplicates, or beyond the window core will not accept either).
    pub fn store(&mut self, offset: u64, data: &[u8]) {
        let start = offset.max(self.base);
        let end = offset
            .saturating_add(data.len() as u64)
            .min(self.base.saturating_add(self.capacity as u64));
        if start >= end {
            return;
        }
        // All below `capacity`, a usize.
        let (Ok(from), Ok(to), Ok(skip)) = (
            usize::try_from(start - self.base),
            usize::try_from(end - self.base),
            usize::try_from(start - offset),
        ) else {
            return;
        };
        let Some(src) = data.get(skip..skip + (to - from)) else {
            return;
        };
        if from == self.buf.len() {
            // In order (the common case): append.
            self.buf.extend(src);
            return;
        }
        if to > self.buf.len() {
            self.buf.resize(to, 0);
        }
        let (a, b) = self.buf.as_mut_slices();
        let in_a = a.len().saturating_sub(from).min(src.len());
        if let (Some(dst), Some(part)) = (a.get_mut(from..from + in_a), src.get(..in_a)) {
            dst.copy_from_slice(part);
        }
        let b_from = (from + in_a).saturating_sub(a.len());
        let rest = src.get(in_a..).unwrap_or_default();
        if let Some(dst) = b.get_mut(b_from..b_from + rest.len()) {
            dst.copy_from_slice(rest);
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
    /// connection delivered them; bytes it never stored come out as zeros) and advances.
    pub fn take(&mut self, n: u64, out: &mut impl Extend<u8>) {
        let n = usize::try_from(n).unwrap_or(usize::MAX).min(self.capacity);
        let held = n.min(self.buf.len());
        let (a, b) = self.buf.as_slices();
        let from_a = held.min(a.len());
        out.extend(a.get(..from_a).unwrap_or_default().iter().copied());
        out.extend(b.get(..held - from_a).unwrap_or_default().iter().copied());
        self.buf.drain(..held);
        out.extend(std::iter::repeat_n(0, n - held));
        self.base += n as u64;
    }

    /// Gives back storage if nothing is held ([`trim_when_empty`]).
    pub fn trim(&mut self) {
        trim_when_empty(&mut self.buf);
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
    fn test_storage_follows_what_is_buffered() {
        let mut r = ReceiveRing::new(4 << 20);
        assert_eq!(
            r.storage_bytes(),
            0,
            "nothing allocated before bytes arrive"
        );
        let chunk = vec![7u8; 1000];
        for i in 0..1000u64 {
            r.store(i * 1000, &chunk);
        }
        assert!(r.storage_bytes() >= 1_000_000);
        let mut out = Vec::new();
        r.take(1_000_000, &mut out);
        assert_eq!(out.len(), 1_000_000);
        r.trim();
        assert_eq!(r.storage_bytes(), KEEP_WHEN_EMPTY_BYTES);
        // A byte far ahead holds the span up to it, no more.
        r.store(1_000_000 + 50_000, b"x");
        assert!(r.storage_bytes() < 64 * 1024);
        let mut s = SendBuffer::new();
        s.push(&vec![1u8; 1 << 20]);
        assert!(s.storage_bytes() >= 1 << 20);
        s.release_through(1 << 20);
        s.trim();
        assert_eq!(s.storage_bytes(), KEEP_WHEN_EMPTY_BYTES);
    }

    #[test]
    fn test_bytes_never_stored_come_out_as_zeros() {
        let mut r = ReceiveRing::new(16);
        r.store(4, b"ef");
        let mut out = Vec::new();
        r.take(6, &mut out);
        assert_eq!(out, b"\0\0\0\0ef");
        r.take(2, &mut out);
        assert_eq!(r.base(), 8);
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

    proptest::proptest! {
        /// Pieces of a stream stored in any order, overlapping, duplicated or outside the
        /// window, and taken as they become contiguous, come out as the stream; storage
        /// never exceeds what the window spans (with the queue's growth slack).
        #[test]
        fn prop_any_arrival_order_reassembles_the_stream(
            cap in 1usize..3000,
            pieces in proptest::collection::vec((0u64..6000, 1usize..700), 1..200),
        ) {
            let stream: Vec<u8> = (0..7000u32).map(|i| (i * 31 % 251) as u8).collect();
            let mut r = ReceiveRing::new(cap);
            let mut have = vec![false; stream.len()];
            let mut out = Vec::new();
            for (offset, len) in pieces {
                let end = (offset as usize + len).min(stream.len());
                let o = offset as usize;
                r.store(offset, &stream[o..end]);
                let window_end = (r.base() as usize + cap).min(stream.len());
                for (i, h) in have.iter_mut().enumerate().take(window_end.min(end)).skip(o.max(r.base() as usize)) {
                    let _ = i;
                    *h = true;
                }
                let ready = have[r.base() as usize..].iter().take_while(|h| **h).count();
                r.take(ready as u64, &mut out);
                r.trim();
                proptest::prop_assert!(r.storage_bytes() <= 2 * cap + KEEP_WHEN_EMPTY_BYTES);
            }
            proptest::prop_assert_eq!(&out[..], &stream[..out.len()]);
        }
    }
}
