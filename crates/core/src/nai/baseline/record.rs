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
//! version u8 | kind u8 (1 data, 2 abort, 3 heartbeat) | priority u8 | msg_id u64 | msg_len u32 | chunk_len u32
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
    /// Nothing: the sender's other connections are busy while this one has had nothing to
    /// carry (see [`BaselineConfig::heartbeat_after`](super::BaselineConfig::heartbeat_after)).
    /// The receiver reads it and does nothing else.
    Heartbeat,
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
            3 => RecordKind::Heartbeat,
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
            RecordKind::Heartbeat if h.chunk_len != 0 || h.msg_len != 0 => {
                Err(WireError::Malformed("baseline heartbeat length"))
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
            RecordKind::Heartbeat => 3,
        })?;
        w.u8(self.priority)?;
        w.u64(self.msg_id)?;
        w.u32(self.msg_len)?;
        w.u32(self.chunk_len)?;
        Ok(w.position())
    }
}

/// Largest message a [`RecordReceiver`] reassembles with its bytes unless told otherwise.
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 64 << 20;

/// The message being received on a connection.
#[derive(Debug)]
struct Partial {
    id: u64,
    len: u64,
    priority: u8,
    got: u64,
    /// Its bytes so far, when the records carry them.
    data: Option<Vec<u8>>,
}

/// One connection's receiving side: reassembles messages from records in stream order,
/// delivers each complete one, and counts the 1-byte acknowledgements to write back.
///
/// Call pattern: `handle_bytes` with the stream bytes as they arrive in order (an engine that
/// carries bytes), or for each record whose bytes have all arrived `handle_record` (virtual
/// payload) or `handle_record_payload` (the record's bytes, already split); then write
/// `take_acks()` bytes on the connection and drain `poll_event`.
#[derive(Debug)]
pub struct RecordReceiver {
    partial: Option<Partial>,
    /// Stream bytes of a record not yet complete ([`RecordReceiver::handle_bytes`]).
    pending: Vec<u8>,
    acks_due: u64,
    events: VecDeque<SppEvent>,
    delivered: u64,
    max_message_bytes: u64,
}

impl Default for RecordReceiver {
    fn default() -> Self {
        RecordReceiver::with_max_message_bytes(DEFAULT_MAX_MESSAGE_BYTES)
    }
}

impl RecordReceiver {
    /// A receiver at the start of a stream.
    pub fn new() -> RecordReceiver {
        RecordReceiver::default()
    }

    /// A receiver that refuses (as malformed) a message with bytes longer than `max` bytes.
    pub fn with_max_message_bytes(max: u64) -> RecordReceiver {
        RecordReceiver {
            partial: None,
            pending: Vec::new(),
            acks_due: 0,
            events: VecDeque::new(),
            delivered: 0,
            max_message_bytes: max,
        }
    }

    /// Handles one complete record. An error means the stream is inconsistent (a record that
    /// overflows its message); the record is ignored.
    pub fn handle_record(&mut self, now: Time, h: &RecordHeader) -> Result<(), WireError> {
        self.handle(now, h, None)
    }

    /// Handles one complete record with the `chunk_len` message bytes that followed its
    /// header: a delivered message carries them ([`Delivery::data`]). Errors as for
    /// [`handle_record`](Self::handle_record), and also when `body` is not `chunk_len` long or
    /// the message is longer than the receiver's bound.
    pub fn handle_record_payload(
        &mut self,
        now: Time,
        h: &RecordHeader,
        body: &[u8],
    ) -> Result<(), WireError> {
        if body.len() as u64 != u64::from(h.chunk_len) {
            return Err(WireError::Malformed("baseline record body length"));
        }
        self.handle(now, h, Some(body))
    }

    /// Feeds stream bytes in order, as read from the connection: every record completed by
    /// them is handled as by [`handle_record_payload`](Self::handle_record_payload), and an
    /// incomplete one is kept for the next call — at most one record, whose header was checked
    /// against the message bound first, so at most `max_message_bytes` plus a header is held
    /// between calls. An error means the stream is corrupt (a header that does not parse, a
    /// record inconsistent with its message, a message over the bound): the stream cannot be
    /// resynchronised, what was buffered is dropped, and the connection should be closed.
    pub fn handle_bytes(&mut self, now: Time, data: &[u8]) -> Result<(), WireError> {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(data);
        let mut used = 0;
        let mut result = Ok(());
        while let Some(head) = buf.get(used..).and_then(|r| r.get(..RECORD_HEADER_LEN)) {
            let h = match RecordHeader::parse(head) {
                Ok(h) if u64::from(h.msg_len) > self.max_message_bytes => {
                    Err(WireError::Malformed("baseline message over the bound"))
                }
                other => other,
            };
            let h = match h {
                Ok(h) => h,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            let start = used + RECORD_HEADER_LEN;
            let end = usize::try_from(h.chunk_len)
                .ok()
                .and_then(|n| start.checked_add(n));
            let Some(body) = end.and_then(|end| buf.get(start..end)) else {
                break; // the rest of the record has not arrived yet
            };
            if let Err(e) = self.handle_record_payload(now, &h, body) {
                result = Err(e);
                break;
            }
            used = start + body.len();
        }
        if result.is_err() {
            buf.clear(); // nothing after a corrupt record can be trusted
        } else {
            buf.drain(..used.min(buf.len()));
        }
        self.pending = buf;
        result
    }

    fn handle(
        &mut self,
        now: Time,
        h: &RecordHeader,
        body: Option<&[u8]>,
    ) -> Result<(), WireError> {
        match h.kind {
            RecordKind::Heartbeat => Ok(()),
            RecordKind::Abort => {
                if self.partial.as_ref().is_some_and(|p| p.id == h.msg_id) {
                    self.partial = None;
                    self.events.push_back(SppEvent::Discarded {
                        id: MessageId(h.msg_id),
                    });
                }
                Ok(())
            }
            RecordKind::Data => {
                let len = u64::from(h.msg_len);
                let chunk = u64::from(h.chunk_len);
                // Checked before anything changes: an inconsistent record is ignored.
                let (known_len, got) = match &self.partial {
                    Some(p) if p.id == h.msg_id => (p.len, p.got),
                    // A new message: the previous one, if any, was abandoned without an abort
                    // record reaching us first, which the sender never does; start afresh.
                    _ => {
                        if body.is_some() && len > self.max_message_bytes {
                            return Err(WireError::Malformed("baseline message over the bound"));
                        }
                        (len, 0)
                    }
                };
                if known_len != len || got + chunk > len {
                    return Err(WireError::Malformed(
                        "baseline record overflows its message",
                    ));
                }
                let mut p = match self.partial.take() {
                    Some(p) if p.id == h.msg_id => p,
                    _ => Partial {
                        id: h.msg_id,
                        len,
                        priority: h.priority,
                        got: 0,
                        data: body.map(|_| Vec::new()),
                    },
                };
                p.got += u64::from(h.chunk_len);
                if let (Some(data), Some(body)) = (p.data.as_mut(), body) {
                    data.extend_from_slice(body);
                }
                if p.got == len {
                    self.acks_due += 1;
                    self.delivered += 1;
                    self.events.push_back(SppEvent::Delivered(Delivery {
                        id: MessageId(h.msg_id),
                        size_bytes: len,
                        priority: Priority(p.priority),
                        at: now,
                        data: p.data,
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

    /// Records of two messages (5000 bytes in two records, then 3 bytes), as stream bytes.
    fn two_messages() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let first: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let second = b"xyz".to_vec();
        let mut stream = Vec::new();
        let mut record = |h: RecordHeader, body: &[u8]| {
            let mut head = [0u8; RECORD_HEADER_LEN];
            h.emit(&mut head).unwrap();
            stream.extend_from_slice(&head);
            stream.extend_from_slice(body);
        };
        record(DATA, &first[..3000]);
        record(
            RecordHeader {
                chunk_len: 2000,
                ..DATA
            },
            &first[3000..],
        );
        record(
            RecordHeader {
                msg_id: 8,
                msg_len: 3,
                chunk_len: 3,
                ..DATA
            },
            &second,
        );
        (stream, first, second)
    }

    fn delivered(rx: &mut RecordReceiver) -> Vec<(u64, Vec<u8>)> {
        std::iter::from_fn(|| rx.poll_event())
            .filter_map(|e| match e {
                SppEvent::Delivered(d) => Some((d.id.0, d.data.unwrap_or_default())),
                SppEvent::Discarded { .. } => None,
            })
            .collect()
    }

    #[test]
    fn test_stream_bytes_in_any_pieces_deliver_each_message_whole() {
        let (stream, first, second) = two_messages();
        for piece in [1, 7, 19, 20, 3019, stream.len()] {
            let mut rx = RecordReceiver::new();
            for chunk in stream.chunks(piece) {
                rx.handle_bytes(Time::ZERO, chunk).unwrap();
            }
            assert_eq!(
                delivered(&mut rx),
                vec![(7, first.clone()), (8, second.clone())],
                "pieces of {piece} bytes"
            );
            assert_eq!(rx.take_acks(), 2);
            assert!(rx.pending.is_empty());
        }
    }

    #[test]
    fn test_stream_with_a_corrupt_header_or_an_oversized_message_is_refused() {
        let (mut stream, _, _) = two_messages();
        stream[0] = 9; // version
        assert!(
            RecordReceiver::new()
                .handle_bytes(Time::ZERO, &stream)
                .is_err()
        );
        let (stream, _, _) = two_messages();
        let mut rx = RecordReceiver::with_max_message_bytes(4999);
        // Refused from the header alone: the 3000-byte body is never buffered.
        let head = stream.get(..RECORD_HEADER_LEN).unwrap();
        assert!(rx.handle_bytes(Time::ZERO, head).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = RecordHeader::parse(&bytes);
        }

        #[test]
        fn receiver_never_panics_on_garbage_stream(
            bytes in proptest::collection::vec(any::<u8>(), 0..2000),
            split in 0usize..2000,
        ) {
            let mut rx = RecordReceiver::with_max_message_bytes(1 << 16);
            let (a, b) = bytes.split_at(split.min(bytes.len()));
            let _ = rx.handle_bytes(Time::ZERO, a);
            let _ = rx.handle_bytes(Time::ZERO, b);
            prop_assert!(rx.pending.len() <= RECORD_HEADER_LEN + (1 << 16));
        }
    }
}
