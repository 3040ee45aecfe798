//! Framing of the local protocol over a byte stream (a Unix stream socket).
//!
//! Every frame is `len u32 | body`. The decoder buffers at most one frame: bytes are pushed
//! as they are read, whole frames are pulled out. A frame announcing more than
//! [`MAX_FRAME_LEN`] bytes is not buffered: its bytes are skipped as they arrive and the
//! decoder reports [`FrameError::TooLarge`] once, so the daemon can answer with an error and
//! go on reading that client's next frame. A body that does not parse is reported as
//! [`FrameError::Malformed`] with its `req_id` when the header was readable, and the stream
//! stays in step (the length prefix delimits it).

use super::msg::{Message, parse_body};
use super::{LEN_PREFIX, MAX_FRAME_LEN};
use crate::wire::WireError;

/// Why a frame was not a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The length prefix announced `len` bytes, more than [`MAX_FRAME_LEN`]; they are skipped.
    #[error("frame of {len} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Announced length.
        len: u32,
        /// The limit.
        max: usize,
    },
    /// The body did not parse; `req_id` is the request's number when the header was readable.
    #[error("malformed frame (request {req_id:?}): {error}")]
    Malformed {
        /// The request number, if the header was readable.
        req_id: Option<u32>,
        /// What was wrong.
        error: WireError,
    },
}

/// Splits a byte stream into frames, holding at most one frame's bytes.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Bytes of an oversized frame still to be thrown away.
    skipping: u64,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// Bytes buffered (never more than `LEN_PREFIX + MAX_FRAME_LEN`).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn announced(&self) -> Option<usize> {
        let p: [u8; 4] = self.buf.get(..LEN_PREFIX)?.try_into().ok()?;
        usize::try_from(u32::from_be_bytes(p)).ok()
    }

    /// Feeds bytes read from the stream. Bytes beyond one frame are kept for the next call
    /// of [`FrameDecoder::next_frame`]; draining every frame after each push keeps the buffer
    /// below one frame plus one read.
    pub fn push(&mut self, mut data: &[u8]) {
        if self.skipping > 0 {
            let n = usize::try_from(self.skipping)
                .unwrap_or(usize::MAX)
                .min(data.len());
            self.skipping -= n as u64;
            data = data.get(n..).unwrap_or(&[]);
        }
        self.buf.extend_from_slice(data);
    }

    /// The next whole frame, if one is buffered: `Ok((req_id, message))` or the reason it is
    /// not a message (the decoder has already moved past it).
    pub fn next_frame(&mut self) -> Option<Result<(u32, Message), FrameError>> {
        if self.skipping > 0 {
            return None;
        }
        let len = self.announced()?;
        if len > MAX_FRAME_LEN {
            let have = self.buf.len() - LEN_PREFIX;
            let skip_now = have.min(len);
            self.buf.drain(..LEN_PREFIX + skip_now);
            self.skipping = (len - skip_now) as u64;
            return Some(Err(FrameError::TooLarge {
                len: u32::try_from(len).unwrap_or(u32::MAX),
                max: MAX_FRAME_LEN,
            }));
        }
        if self.buf.len() < LEN_PREFIX + len {
            return None;
        }
        let body = self.buf.get(LEN_PREFIX..LEN_PREFIX + len)?;
        let out = parse_body(body).map_err(|error| FrameError::Malformed {
            req_id: body
                .get(2..6)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_be_bytes),
            error,
        });
        self.buf.drain(..LEN_PREFIX + len);
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::FlowId;
    use crate::daemon::encode_frame;

    fn frame(id: u32, m: &Message) -> Vec<u8> {
        let mut v = Vec::new();
        encode_frame(id, m, &mut v).expect("encodes");
        v
    }

    #[test]
    fn test_frames_split_anywhere_come_out_whole() {
        let mut stream = frame(1, &Message::Close { flow: FlowId(4) });
        stream.extend(frame(2, &Message::StatusRequest));
        for cut in 0..stream.len() {
            let mut d = FrameDecoder::new();
            let mut got = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                d.push(part);
                while let Some(f) = d.next_frame() {
                    got.push(f.expect("valid"));
                }
            }
            assert_eq!(
                got,
                vec![
                    (1, Message::Close { flow: FlowId(4) }),
                    (2, Message::StatusRequest)
                ]
            );
        }
    }

    #[test]
    fn test_oversized_frame_is_skipped_and_the_next_one_read() {
        let big = (MAX_FRAME_LEN + 10) as u32;
        let mut stream = big.to_be_bytes().to_vec();
        stream.extend(std::iter::repeat_n(0xab, MAX_FRAME_LEN + 10));
        stream.extend(frame(7, &Message::StatusRequest));
        let mut d = FrameDecoder::new();
        let mut got = Vec::new();
        for chunk in stream.chunks(1000) {
            d.push(chunk);
            assert!(d.buffered() <= LEN_PREFIX + MAX_FRAME_LEN + 1000);
            while let Some(f) = d.next_frame() {
                got.push(f);
            }
        }
        assert!(matches!(got[0], Err(FrameError::TooLarge { .. })));
        assert_eq!(got[1], Ok((7, Message::StatusRequest)));
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn test_malformed_body_reports_its_request_number() {
        let mut d = FrameDecoder::new();
        d.push(&[0, 0, 0, 7, 1, 0x3f, 0, 0, 0, 9, 0]);
        d.push(&frame(10, &Message::Ok));
        assert!(matches!(
            d.next_frame(),
            Some(Err(FrameError::Malformed {
                req_id: Some(9),
                ..
            }))
        ));
        assert_eq!(d.next_frame(), Some(Ok((10, Message::Ok))));
        assert_eq!(d.next_frame(), None);
    }

    proptest::proptest! {
        /// Any byte stream, fed in any chunks: never panics, buffer stays bounded.
        #[test]
        fn decoder_never_panics_and_stays_bounded(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3000),
            chunk in 1usize..500,
        ) {
            let mut d = FrameDecoder::new();
            for c in bytes.chunks(chunk) {
                d.push(c);
                while d.next_frame().is_some() {}
                proptest::prop_assert!(d.buffered() <= LEN_PREFIX + MAX_FRAME_LEN + chunk);
            }
        }
    }
}
