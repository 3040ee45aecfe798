//! The stream framing of the TCP baselines (`papers/000_97f7680fd99dd928.txt` §5.2) and their
//! receiver.
//!
//! A baseline writes each message to its TCP connection as one or more *records*: a
//! [`RecordHeader`] followed by `chunk_len` message bytes. The last data record of a message
//! completes it at the receiver, which then writes one byte back on the same connection — the
//! paper's "1-byte user-level acknowledgement … upon receipt of each message". An ABORT record
//! tells the receiver to drop a partly received message whose sender stopped writing it
//! (NAI-MTCP's early termination on timer expiry).
//!
//! ```text
//! version u8 | kind u8 (1 data, 2 abort) | priority u8 | msg_id u64 | msg_len u32 | chunk_len u32
//! ```
//! (the layout is ours: the paper gives no wire format for its baselines).

use crate::nai::{MessageId, Priority};
use crate::spp::{Delivery, SppEvent};
use crate::time::Time;
use crate::wire::{Reader, WireError, Writer};
use std::collections::VecDeque;

/// Version of the record header.
pub const RECORD_VERSION: u8 = 1;
/// Encoded length of a [`RecordHeader`].
pub const RECORD_HEADER_LEN: usize = 19;

/// What a record carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// `chunk_len` bytes of the message follow.
    Data,
    /// The sender stopped writing this message; drop what arrived of it.
    Abort,
}

/// The header at the start of every record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Data or abort.
    pub kind: RecordKind,
    /// Priority level of the message.
    pub priority: u8,
    /// The sender's message id.
    pub msg_id: u64,
    /// Total message size.
    pub msg_len: u32,
    /// Message bytes following this header (0 for an abort).
    pub chunk_len: u32,
}

impl RecordHeader {
    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        RECORD_HEADER_LEN
    }

    /// Stream bytes the record occupies: header plus chunk.
    pub fn stream_len(&self) -> u64 {
        RECORD_HEADER_LEN as u64 + u64::from(self.chunk_len)
    }

    /// Parses a header. Never panics.
    pub fn parse(buf: &[u8]) -> Result<RecordHeader, WireError> {
        let mut r = Reader::new(buf);
        let version = r.u8()?;
        if version != RECORD_VERSION {
            return Err(WireError::UnsupportedVersion(version));
        }
        let kind = match r.u8()? {
            1 => RecordKind::Data,
            2 => RecordKind::Abort,
            v => {
                return Err(WireError::UnknownKind {
                    field: "baseline record kind",
                    value: u32::from(v),
                });
            }
        };
        let h = RecordHeader {
            kind,
            priority: r.u8()?,
            msg_id: r.u64()?,
            msg_len: r.u32()?,
            chunk_len: r.u32()?,
        };
        match kind {
            RecordKind::Data if h.chunk_len == 0 || h.chunk_len > h.msg_len => {
                Err(WireError::Malformed("baseline record chunk length"))
            }
            RecordKind::Abort if h.chunk_len != 0 => {
                Err(WireError::Malformed("baseline abort length"))
            }
            _ => Ok(h),
        }
    }

    /// Writes the header; `buf` must hold [`RECORD_HEADER_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        w.u8(RECORD_VERSION)?;
        w.u8(match self.kind {
            RecordKind::Data => 1,
            RecordKind::Abort => 2,
        })?;
        w.u8(self.priority)?;
        w.u64(self.msg_id)?;
        w.u32(self.msg_len)?;
        w.u32(self.chunk_len)?;
        Ok(w.position())
    }
}

/// One connection's receiving side: reassembles messages from records in stream order,
/// delivers each complete one, and counts the 1-byte acknowledgements to write back.
///
/// Call pattern: `handle_record` for each record whose bytes have all arrived (in stream
/// order), then write `take_acks()` bytes on the connection and drain `poll_event`.
#[derive(Debug, Default)]
pub struct RecordReceiver {
    /// The message being received: id, size, priority, bytes so far.
    partial: Option<(u64, u64, u8, u64)>,
    acks_due: u64,
    events: VecDeque<SppEvent>,
    delivered: u64,
}

impl RecordReceiver {
    /// A receiver at the start of a stream.
    pub fn new() -> RecordReceiver {
        RecordReceiver::default()
    }

    /// Handles one complete record. An error means the stream is inconsistent (a record that
    /// overflows its message); the record is ignored.
    pub fn handle_record(&mut self, now: Time, h: &RecordHeader) -> Result<(), WireError> {
        match h.kind {
            RecordKind::Abort => {
                if self.partial.is_some_and(|p| p.0 == h.msg_id) {
                    self.partial = None;
                    self.events.push_back(SppEvent::Discarded {
                        id: MessageId(h.msg_id),
                    });
                }
                Ok(())
            }
            RecordKind::Data => {
                let len = u64::from(h.msg_len);
                let mut p = match self.partial {
                    Some(p) if p.0 == h.msg_id => p,
                    // A new message: the previous one, if any, was abandoned without an abort
                    // record reaching us first, which the sender never does; start afresh.
                    _ => (h.msg_id, len, h.priority, 0),
                };
                if p.1 != len || p.3 + u64::from(h.chunk_len) > len {
                    return Err(WireError::Malformed(
                        "baseline record overflows its message",
                    ));
                }
                p.3 += u64::from(h.chunk_len);
                if p.3 == len {
                    self.partial = None;
                    self.acks_due += 1;
                    self.delivered += 1;
                    self.events.push_back(SppEvent::Delivered(Delivery {
                        id: MessageId(h.msg_id),
                        size_bytes: len,
                        priority: Priority(p.2),
                        at: now,
                        // Sizes only: this transport does not carry message bytes yet.
                        data: None,
                    }));
                } else {
                    self.partial = Some(p);
                }
                Ok(())
            }
        }
    }

    /// Acknowledgement bytes to write back (one per delivered message) since the last call.
    pub fn take_acks(&mut self) -> u64 {
        std::mem::take(&mut self.acks_due)
    }

    /// The next event: deliveries and discards.
    pub fn poll_event(&mut self) -> Option<SppEvent> {
        self.events.pop_front()
    }

    /// Messages delivered so far.
    pub fn delivered_count(&self) -> u64 {
        self.delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DATA: RecordHeader = RecordHeader {
        kind: RecordKind::Data,
        priority: 1,
        msg_id: 7,
        msg_len: 5000,
        chunk_len: 3000,
    };

    #[test]
    fn test_header_round_trips_and_rejects_bad_lengths() {
        let mut buf = [0u8; RECORD_HEADER_LEN];
        assert_eq!(DATA.emit(&mut buf), Ok(RECORD_HEADER_LEN));
        assert_eq!(RecordHeader::parse(&buf), Ok(DATA));
        let bad = RecordHeader {
            chunk_len: 6000,
            ..DATA
        };
        bad.emit(&mut buf).unwrap();
        assert!(RecordHeader::parse(&buf).is_err());
        assert!(DATA.emit(&mut [0u8; 3]).is_err());
    }

    #[test]
    fn test_receiver_delivers_after_last_chunk_and_acks_once() {
        let mut rx = RecordReceiver::new();
        rx.handle_record(Time::ZERO, &DATA).unwrap();
        assert_eq!(rx.take_acks(), 0);
        let last = RecordHeader {
            chunk_len: 2000,
            ..DATA
        };
        rx.handle_record(Time::from_millis(5), &last).unwrap();
        assert_eq!(rx.take_acks(), 1);
        assert!(matches!(rx.poll_event(), Some(SppEvent::Delivered(d)) if d.id == MessageId(7)));
        assert!(rx.handle_record(Time::ZERO, &DATA).is_ok());
        assert!(rx.handle_record(Time::ZERO, &DATA).is_err(), "overflow");
    }

    #[test]
    fn test_receiver_abort_discards_partial() {
        let mut rx = RecordReceiver::new();
        rx.handle_record(Time::ZERO, &DATA).unwrap();
        let abort = RecordHeader {
            kind: RecordKind::Abort,
            chunk_len: 0,
            ..DATA
        };
        rx.handle_record(Time::ZERO, &abort).unwrap();
        assert_eq!(
            rx.poll_event(),
            Some(SppEvent::Discarded { id: MessageId(7) })
        );
        assert_eq!(rx.take_acks(), 0);
        assert_eq!(rx.delivered_count(), 0);
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = RecordHeader::parse(&bytes);
        }
    }
}
