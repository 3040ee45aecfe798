//! The receive reassembly buffer: bytes by stream offset in a ring as large as the TCP
//! receive buffer. Core's receiver accepts only bytes below `read + recv_buffer` (its window
//! is the buffer minus what is delivered and unread), and the ring's base is exactly what has
//! been read from core, so every byte core accepts has a slot and none overwrites a live one.

/// Bytes at stream offsets `[base, base + capacity)`.
#[derive(Debug)]
pub(super) struct Ring {
    buf: Vec<u8>,
    /// The offset of the first byte not yet handed on.
    base: u64,
}

impl Ring {
    /// A ring of `capacity` bytes (at least 1) starting at offset 0.
    pub(super) fn new(capacity: usize) -> Ring {
        Ring {
            buf: vec![0; capacity.max(1)],
            base: 0,
        }
    }

    /// The offset of the next byte to hand on.
    pub(super) fn base(&self) -> u64 {
        self.base
    }

    fn slot(&self, offset: u64) -> usize {
        // The remainder is below the capacity, a usize.
        usize::try_from(offset % self.buf.len() as u64).unwrap_or(0)
    }

    /// Stores `data` found at stream `offset`; bytes outside `[base, base + capacity)` are
    /// ignored (old duplicates, or beyond the window core will not accept either).
    pub(super) fn store(&mut self, offset: u64, data: &[u8]) {
        let cap = self.buf.len() as u64;
        let start = offset.max(self.base);
        let end = (offset + data.len() as u64).min(self.base + cap);
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

    /// Hands on the `n` bytes at the base (the caller knows they are complete) and advances.
    pub(super) fn take(&mut self, n: u64, out: &mut impl Extend<u8>) {
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
        let mut r = Ring::new(8);
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
        let mut r = Ring::new(4);
        r.store(0, b"abcdefgh"); // only abcd fits
        let mut out = Vec::new();
        r.take(4, &mut out);
        r.store(2, b"XXYZ"); // XX is old
        r.take(2, &mut out);
        assert_eq!(out, b"abcdYZ");
    }
}
