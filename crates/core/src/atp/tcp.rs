//! ATP over one TCP connection (`papers/000_97f7680fd99dd928.txt` §4.1): "runs over a single
//! TCP connection, but sends messages in fixed-size segments (1 MTU), rather than sending an
//! entire message at a time. Padding is required for small messages to enable the receiver to
//! detect segment boundaries."
//!
//! Every segment is exactly `segment_bytes` long on the stream: a [`SegHeader`], the message
//! bytes it carries, then padding. Because the framer writes a segment only while the
//! connection holds fewer than `max_unacked_bytes` unacknowledged bytes, a message can still be
//! preempted, deferred or cancelled at segment granularity: what is not yet written is still
//! under NAI's control.
//!
//! # Calling pattern (with a [`crate::tcp::Connection`] `conn`)
//!
//! ```text
//! sender:   while let Some(seg) = atp.poll_transmit(now, conn.bytes_unacked()) {
//!               seg.header.emit(&mut buf)?; conn.write(u64::from(seg.bytes));  // + real bytes
//!           }
//!           atp.handle_acked(now, conn.bytes_acked());   // after every conn input
//!           atp.set_rate(now, estimate)                  // estimator or oracle, per tick
//!           atp.handle_timeout(now) at atp.poll_timeout(); drain atp.poll_event()
//! receiver: rx.handle_bytes(now, &bytes)?  (real bytes)  or  rx.handle_header(now, &h)?
//!           (virtual payload: one header per `segment_bytes` delivered); drain rx.poll_event()
//! ```
//! A cancelled message whose segments are all written cannot be recalled: TCP will deliver it,
//! and its outcome is `Delivered`. Otherwise a CANCEL segment tells the receiver to drop the
//! partial message.

use crate::nai::payloads::PayloadStore;
use crate::nai::{
    MessageId, NaiConfig, NaiError, NaiEvent, Priority, QueueId, RangeSet, Scheduler, SendOptions,
};
use crate::spp::{Delivery, SppEvent};
use crate::time::Time;
use crate::wire::{Reader, WireError, Writer};
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};

/// Version of the segment header.
pub const SEG_VERSION: u8 = 1;
/// Encoded length of a [`SegHeader`].
pub const SEG_HEADER_LEN: usize = 21;
/// [`SEG_HEADER_LEN`] as the `u32` segment sizes are counted in.
const SEG_HEADER_LEN_U32: u32 = 21;

/// What a segment carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegKind {
    /// Message bytes.
    Data,
    /// Drop the partly received message.
    Cancel,
}

/// The header at the start of every fixed-size segment.
///
/// ```text
/// version u8 | kind u8 | msg_id u64 | msg_len u32 | offset u32 | len u16 | priority u8
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegHeader {
    /// Data or cancel.
    pub kind: SegKind,
    /// The sender's message id.
    pub msg_id: u64,
    /// Total message size.
    pub msg_len: u32,
    /// First byte carried.
    pub offset: u32,
    /// Bytes carried (0 for a cancel).
    pub len: u16,
    /// Priority level.
    pub priority: u8,
}

impl SegHeader {
    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        SEG_HEADER_LEN
    }

    /// Parses a header. Never panics.
    pub fn parse(buf: &[u8]) -> Result<SegHeader, WireError> {
        let mut r = Reader::new(buf);
        let version = r.u8()?;
        if version != SEG_VERSION {
            return Err(WireError::UnsupportedVersion(version));
        }
        let kind = match r.u8()? {
            1 => SegKind::Data,
            2 => SegKind::Cancel,
            v => {
                return Err(WireError::UnknownKind {
                    field: "atp segment kind",
                    value: u32::from(v),
                });
            }
        };
        let h = SegHeader {
            kind,
            msg_id: r.u64()?,
            msg_len: r.u32()?,
            offset: r.u32()?,
            len: r.u16()?,
            priority: r.u8()?,
        };
        let fits = u64::from(h.offset) + u64::from(h.len) <= u64::from(h.msg_len);
        match kind {
            SegKind::Data if h.len == 0 || !fits => Err(WireError::Malformed("atp segment range")),
            SegKind::Cancel if h.len != 0 => Err(WireError::Malformed("atp cancel length")),
            _ => Ok(h),
        }
    }

    /// Writes the header; `buf` must hold [`SEG_HEADER_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        w.u8(SEG_VERSION)?;
        w.u8(match self.kind {
            SegKind::Data => 1,
            SegKind::Cancel => 2,
        })?;
        w.u64(self.msg_id)?;
        w.u32(self.msg_len)?;
        w.u32(self.offset)?;
        w.u16(self.len)?;
        w.u8(self.priority)?;
        Ok(w.position())
    }
}

/// Framing parameters.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TcpFramingConfig {
    /// Bytes every segment occupies on the stream: "1 MTU" (one MSS of payload).
    pub segment_bytes: u32,
    /// Most unacknowledged bytes (written to TCP, not yet acknowledged) before the framer waits.
    pub max_unacked_bytes: u64,
    /// Most partial messages a receiver tracks.
    pub max_open_messages: usize,
    /// Most bytes of messages submitted with their data
    /// ([`AtpTcpSender::submit_bytes`]) a sender holds at once.
    pub max_buffered_bytes: u64,
    /// Most bytes a receiver allocates to partly received messages that carry bytes.
    pub max_reassembly_bytes: u64,
}

impl Default for TcpFramingConfig {
    fn default() -> Self {
        TcpFramingConfig {
            segment_bytes: 1460,
            max_unacked_bytes: 8 * 1460,
            max_open_messages: 4096,
            max_buffered_bytes: 64 << 20,
            max_reassembly_bytes: 64 << 20,
        }
    }
}

/// A segment to write to the connection: the header, then `bytes - SEG_HEADER_LEN` bytes of
/// message data and padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramedSegment {
    /// The header.
    pub header: SegHeader,
    /// Stream bytes the segment occupies (always `segment_bytes`).
    pub bytes: u32,
}

/// The sending side of ATP over TCP.
#[derive(Debug)]
pub struct AtpTcpSender {
    config: TcpFramingConfig,
    nai: Scheduler,
    written: u64,
    /// Data segments written and not yet acknowledged: (stream end, message, offset, len).
    segments: VecDeque<(u64, MessageId, u64, u64)>,
    cancels: VecDeque<SegHeader>,
    /// The bytes of live messages submitted with [`AtpTcpSender::submit_bytes`], until their
    /// outcome is polled.
    payloads: PayloadStore,
}

impl AtpTcpSender {
    /// A framer with its own NAI scheduler (rate zero until [`set_rate`](Self::set_rate)).
    pub fn new(config: TcpFramingConfig, nai: NaiConfig) -> AtpTcpSender {
        let config_max = config.max_buffered_bytes;
        AtpTcpSender {
            config,
            nai: Scheduler::new(nai),
            written: 0,
            segments: VecDeque::new(),
            cancels: VecDeque::new(),
            payloads: PayloadStore::new(config_max),
        }
    }

    /// Submits a message that carries its bytes: like [`Scheduler::submit`] with
    /// `data.len()` as the size; the bytes are kept until the message's outcome is polled, so
    /// [`payload`](Self::payload) (or [`poll_transmit_bytes`](Self::poll_transmit_bytes)) can
    /// fill its segments. At most [`TcpFramingConfig::max_buffered_bytes`] are held; beyond,
    /// the call fails with [`NaiError::BufferFull`] and nothing is allocated.
    pub fn submit_bytes(
        &mut self,
        now: Time,
        queue: QueueId,
        data: impl Into<Bytes>,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        self.payloads
            .submit(&mut self.nai, now, queue, data.into(), opts)
    }

    /// The message bytes a DATA segment carries, for a message submitted with
    /// [`submit_bytes`](Self::submit_bytes); call it right after `poll_transmit` returned the
    /// segment. `None` for a cancel segment or a message submitted by size only.
    pub fn payload(&self, header: &SegHeader) -> Option<&[u8]> {
        if header.kind != SegKind::Data {
            return None;
        }
        self.payloads.get(
            MessageId(header.msg_id),
            u64::from(header.offset),
            u64::from(header.len),
        )
    }

    /// Bytes held for messages submitted with [`submit_bytes`](Self::submit_bytes).
    pub fn buffered_bytes(&self) -> u64 {
        self.payloads.buffered_bytes()
    }

    /// [`poll_transmit`](Self::poll_transmit), with the whole segment written to `out` (cleared
    /// first): header, the message bytes (zeros for a message submitted by size only), then
    /// padding — exactly `bytes` long, ready for the stream.
    pub fn poll_transmit_bytes(
        &mut self,
        now: Time,
        tcp_unacked_bytes: u64,
        out: &mut Vec<u8>,
    ) -> Option<FramedSegment> {
        let seg = self.poll_transmit(now, tcp_unacked_bytes)?;
        out.clear();
        out.resize(usize::try_from(seg.bytes).unwrap_or(0), 0);
        if seg.header.emit(out).is_err() {
            // The segment is at least one header long (see `poll_transmit`); unreachable.
            out.clear();
            return Some(seg);
        }
        if let Some(data) = self.payload(&seg.header)
            && let Some(body) = out.get_mut(SEG_HEADER_LEN..SEG_HEADER_LEN + data.len())
        {
            body.copy_from_slice(data);
        }
        Some(seg)
    }

    /// The scheduler (queries).
    pub fn nai(&self) -> &Scheduler {
        &self.nai
    }

    /// The scheduler, for application calls.
    pub fn nai_mut(&mut self) -> &mut Scheduler {
        &mut self.nai
    }

    /// The bandwidth NAI plans with (an estimator's `available`, or the true rate).
    pub fn set_rate(&mut self, now: Time, rate_bytes_per_s: f64) {
        self.nai.set_rate(now, rate_bytes_per_s);
    }

    /// Stream bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// The next segment to write, given the connection's unacknowledged byte count.
    pub fn poll_transmit(&mut self, now: Time, tcp_unacked_bytes: u64) -> Option<FramedSegment> {
        while let Some(n) = self.nai.poll_transmit() {
            // With `confirm`, every byte is already in the stream: TCP will deliver it.
            if !n.confirm {
                self.cancels.push_back(SegHeader {
                    kind: SegKind::Cancel,
                    msg_id: n.id.0,
                    msg_len: 0,
                    offset: 0,
                    len: 0,
                    priority: 0,
                });
            }
        }
        let seg = u64::from(self.config.segment_bytes.max(SEG_HEADER_LEN_U32 + 1));
        if tcp_unacked_bytes + seg > self.config.max_unacked_bytes.max(seg) {
            return None;
        }
        let header = match self.cancels.pop_front() {
            Some(c) => c,
            None => {
                let room = u32::from(crate::convert::u16_sat(seg - u64::from(SEG_HEADER_LEN_U32)));
                let c = self.nai.next_chunk_at(now, room, true)?;
                self.segments
                    .push_back((self.written + seg, c.id, c.offset, u64::from(c.len)));
                SegHeader {
                    kind: SegKind::Data,
                    msg_id: c.id.0,
                    msg_len: crate::convert::u32_sat(c.msg_len),
                    offset: crate::convert::u32_sat(c.offset),
                    len: crate::convert::u16_sat(u64::from(c.len)),
                    priority: c.priority.0,
                }
            }
        };
        self.written += seg;
        Some(FramedSegment {
            header,
            bytes: crate::convert::u32_sat(seg),
        })
    }

    /// The connection has acknowledged `total_acked_bytes` of the stream.
    pub fn handle_acked(&mut self, now: Time, total_acked_bytes: u64) {
        while let Some(&(end, id, offset, len)) = self.segments.front() {
            if end > total_acked_bytes {
                break;
            }
            self.segments.pop_front();
            self.nai.handle_acked_in_stream(now, id, offset, len);
        }
    }

    /// The earliest callback timer.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.nai.poll_timeout()
    }

    /// Fires callback timers.
    pub fn handle_timeout(&mut self, now: Time) {
        self.nai.handle_timeout(now);
    }

    /// The next application event. A message's bytes are released when its outcome passes
    /// here.
    pub fn poll_event(&mut self) -> Option<NaiEvent> {
        let ev = self.nai.poll_event()?;
        if let NaiEvent::Outcome { id, .. } = ev {
            self.payloads.release(id);
        }
        Some(ev)
    }
}

#[derive(Debug)]
struct Partial {
    len: u64,
    priority: u8,
    got: RangeSet,
    /// The message's bytes, when the stream carries them ([`AtpTcpReceiver::handle_bytes`]).
    data: Option<Vec<u8>>,
}

/// The receiving side of ATP over TCP: splits the in-order stream into segments and
/// reassembles messages.
#[derive(Debug)]
pub struct AtpTcpReceiver {
    config: TcpFramingConfig,
    buf: Vec<u8>,
    partial: BTreeMap<u64, Partial>,
    events: VecDeque<SppEvent>,
    /// Bytes allocated to partly received messages (bounded by
    /// [`TcpFramingConfig::max_reassembly_bytes`]).
    reassembly_bytes: u64,
    /// Message bytes carried by the DATA segments handled.
    data_bytes: u64,
}

impl AtpTcpReceiver {
    /// A receiver at the start of the stream.
    pub fn new(config: TcpFramingConfig) -> AtpTcpReceiver {
        AtpTcpReceiver {
            config,
            buf: Vec::new(),
            partial: BTreeMap::new(),
            events: VecDeque::new(),
            reassembly_bytes: 0,
            data_bytes: 0,
        }
    }

    /// Message bytes carried by the DATA segments handled so far (headers and padding
    /// excluded): what the sender's messages used of the stream.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Bytes allocated to partly received messages.
    pub fn reassembly_bytes(&self) -> u64 {
        self.reassembly_bytes
    }

    /// Feeds in-order stream bytes (real payload): every complete segment is parsed and its
    /// message bytes reassembled; a delivered message carries them
    /// ([`Delivery::data`]). An error means the stream is corrupt (or a peer declared more
    /// than [`TcpFramingConfig::max_reassembly_bytes`] of partial messages) and the
    /// connection should be reset.
    pub fn handle_bytes(&mut self, now: Time, data: &[u8]) -> Result<(), WireError> {
        let seg = self.config.segment_bytes.max(SEG_HEADER_LEN_U32 + 1) as usize;
        let mut buf = std::mem::take(&mut self.buf);
        buf.extend_from_slice(data);
        let mut used = 0;
        let mut result = Ok(());
        while let Some(bytes) = buf.get(used..used + seg) {
            used += seg;
            let segment = SegHeader::parse(bytes).and_then(|h| {
                let body = bytes
                    .get(SEG_HEADER_LEN..SEG_HEADER_LEN + usize::from(h.len))
                    .ok_or(WireError::Malformed("atp segment longer than the frame"))?;
                self.handle_segment(now, &h, Some(body))
            });
            if let Err(e) = segment {
                result = Err(e);
                break;
            }
        }
        buf.drain(..used.min(buf.len()));
        self.buf = buf;
        result
    }

    /// Handles one segment's header (virtual payload: call once per `segment_bytes` delivered).
    /// Messages are delivered without their bytes.
    pub fn handle_header(&mut self, now: Time, h: &SegHeader) -> Result<(), WireError> {
        self.handle_segment(now, h, None)
    }

    fn handle_segment(
        &mut self,
        now: Time,
        h: &SegHeader,
        body: Option<&[u8]>,
    ) -> Result<(), WireError> {
        let room = self.config.segment_bytes as usize
            - SEG_HEADER_LEN.min(self.config.segment_bytes as usize);
        if usize::from(h.len) > room {
            return Err(WireError::Malformed("atp segment longer than the frame"));
        }
        match h.kind {
            SegKind::Cancel => {
                if let Some(p) = self.partial.remove(&h.msg_id) {
                    self.release(&p);
                    self.events.push_back(SppEvent::Discarded {
                        id: MessageId(h.msg_id),
                    });
                }
            }
            SegKind::Data => {
                if !self.partial.contains_key(&h.msg_id) {
                    if self.partial.len() >= self.config.max_open_messages {
                        return Err(WireError::Malformed("too many partial messages"));
                    }
                    let len = u64::from(h.msg_len);
                    let data = match body {
                        Some(_) => {
                            if self.reassembly_bytes.saturating_add(len)
                                > self.config.max_reassembly_bytes
                            {
                                return Err(WireError::Malformed("atp reassembly bound"));
                            }
                            self.reassembly_bytes += len;
                            Some(vec![0u8; usize::try_from(len).unwrap_or(0)])
                        }
                        None => None,
                    };
                    self.partial.insert(
                        h.msg_id,
                        Partial {
                            len,
                            priority: h.priority,
                            got: RangeSet::new(),
                            data,
                        },
                    );
                }
                let Some(p) = self.partial.get_mut(&h.msg_id) else {
                    return Ok(());
                };
                if p.len != u64::from(h.msg_len) {
                    return Err(WireError::Malformed("atp message length changed"));
                }
                let start = u64::from(h.offset);
                if let (Some(buf), Some(body)) = (p.data.as_mut(), body) {
                    // `parse` checked offset + len <= msg_len, the buffer's length.
                    let at = usize::try_from(h.offset).unwrap_or(usize::MAX);
                    if let Some(dst) = buf.get_mut(at..at.saturating_add(body.len())) {
                        dst.copy_from_slice(body);
                    }
                }
                p.got.insert(start, start + u64::from(h.len));
                self.data_bytes += u64::from(h.len);
                if p.got.covers(0, p.len)
                    && let Some(p) = self.partial.remove(&h.msg_id)
                {
                    self.release(&p);
                    self.events.push_back(SppEvent::Delivered(Delivery {
                        id: MessageId(h.msg_id),
                        size_bytes: p.len,
                        priority: Priority(p.priority),
                        at: now,
                        data: p.data,
                    }));
                }
            }
        }
        Ok(())
    }

    fn release(&mut self, p: &Partial) {
        if p.data.is_some() {
            self.reassembly_bytes = self.reassembly_bytes.saturating_sub(p.len);
        }
    }

    /// The next event (deliveries and discards).
    pub fn poll_event(&mut self) -> Option<SppEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nai::{NaiEvent, Outcome, QueueId, SendOptions};
    use crate::tcp::{Connection, Segment, TcpConfig};
    use proptest::prelude::*;

    /// Client (ATP sender) and server (ATP receiver) joined back to back, 1 ms per round.
    struct Pair {
        now: Time,
        atp: AtpTcpSender,
        rx: AtpTcpReceiver,
        client: Connection,
        server: Option<Connection>,
        stream: Vec<u8>,
        read: usize,
        deliveries: Vec<Delivery>,
        discards: Vec<MessageId>,
        outcomes: Vec<(MessageId, Outcome)>,
    }

    impl Pair {
        fn new() -> Pair {
            let cfg = TcpConfig::default();
            let client = Connection::connect(cfg.clone(), 1, 2, 100, Connection::newreno(&cfg));
            let mut atp = AtpTcpSender::new(TcpFramingConfig::default(), NaiConfig::default());
            atp.set_rate(Time::ZERO, 1e6);
            Pair {
                now: Time::ZERO,
                atp,
                rx: AtpTcpReceiver::new(TcpFramingConfig::default()),
                client,
                server: None,
                stream: Vec::new(),
                read: 0,
                deliveries: Vec::new(),
                discards: Vec::new(),
                outcomes: Vec::new(),
            }
        }

        fn round(&mut self) {
            self.now += std::time::Duration::from_millis(1);
            let now = self.now;
            if self.client.is_established() {
                while let Some(seg) = self.atp.poll_transmit(now, self.client.bytes_unacked()) {
                    let mut frame = vec![0u8; seg.bytes as usize];
                    seg.header.emit(&mut frame).expect("fits");
                    self.stream.extend_from_slice(&frame);
                    self.client.write(u64::from(seg.bytes));
                }
            }
            let to_server: Vec<Segment> =
                std::iter::from_fn(|| self.client.poll_transmit(now)).collect();
            for s in to_server {
                match self.server.as_mut() {
                    None if s.repr.flags.syn => {
                        let cfg = TcpConfig::default();
                        self.server = Some(Connection::accept(
                            cfg.clone(),
                            &s.repr,
                            7,
                            Connection::newreno(&cfg),
                        ));
                    }
                    Some(srv) => srv.handle_segment(now, &s.repr, s.payload_len),
                    None => {}
                }
            }
            if let Some(srv) = self.server.as_mut() {
                let n = srv.bytes_unread();
                srv.read(n);
                let end = self.read + n as usize;
                self.rx
                    .handle_bytes(now, &self.stream[self.read..end])
                    .expect("valid stream");
                self.read = end;
                let back: Vec<Segment> = std::iter::from_fn(|| srv.poll_transmit(now)).collect();
                for s in back {
                    self.client.handle_segment(now, &s.repr, s.payload_len);
                }
            }
            self.client.handle_timeout(now);
            self.atp.handle_acked(now, self.client.bytes_acked());
            self.atp.handle_timeout(now);
            while let Some(e) = self.atp.poll_event() {
                if let NaiEvent::Outcome { id, outcome } = e {
                    self.outcomes.push((id, outcome));
                }
            }
            while let Some(e) = self.rx.poll_event() {
                match e {
                    SppEvent::Delivered(d) => self.deliveries.push(d),
                    SppEvent::Discarded { id } => self.discards.push(id),
                }
            }
        }
    }

    #[test]
    fn test_priority_preempts_at_segment_granularity_and_cancel_discards() {
        let mut p = Pair::new();
        let q = QueueId(0);
        let low = p
            .atp
            .nai_mut()
            .submit(
                Time::ZERO,
                q,
                60_000,
                SendOptions {
                    priority: crate::nai::Priority::LOW,
                    ..SendOptions::default()
                },
            )
            .unwrap();
        let doomed = p
            .atp
            .nai_mut()
            .submit(
                Time::ZERO,
                q,
                60_000,
                SendOptions {
                    priority: crate::nai::Priority::MEDIUM,
                    ..SendOptions::default()
                },
            )
            .unwrap();
        for _ in 0..5 {
            p.round();
        }
        let high = p
            .atp
            .nai_mut()
            .submit(p.now, q, 100, SendOptions::default())
            .unwrap();
        for _ in 0..3 {
            p.round();
        }
        let now = p.now;
        p.atp.nai_mut().cancel(now, doomed).unwrap();
        for _ in 0..500 {
            p.round();
        }
        let order: Vec<MessageId> = p.deliveries.iter().map(|d| d.id).collect();
        assert_eq!(order, vec![high, low]);
        assert!(!order.contains(&doomed));
        assert_eq!(p.discards, vec![doomed]);
        assert_eq!(p.outcomes.len(), 3);
        assert!(p.outcomes.contains(&(doomed, Outcome::Cancelled)));
        // Fixed-size framing: every segment is 1460 bytes, padding included.
        assert_eq!(p.atp.bytes_written() % 1460, 0);
    }

    #[test]
    fn test_header_round_trips() {
        let h = SegHeader {
            kind: SegKind::Data,
            msg_id: 9,
            msg_len: 5000,
            offset: 1439,
            len: 1439,
            priority: 2,
        };
        let mut buf = [0u8; SEG_HEADER_LEN];
        assert_eq!(h.emit(&mut buf), Ok(SEG_HEADER_LEN));
        assert_eq!(SegHeader::parse(&buf), Ok(h));
        assert!(h.emit(&mut [0u8; 4]).is_err());
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = SegHeader::parse(&bytes);
        }

        #[test]
        fn receiver_never_panics_on_garbage_stream(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
            let mut rx = AtpTcpReceiver::new(TcpFramingConfig::default());
            let _ = rx.handle_bytes(Time::ZERO, &bytes);
        }
    }
}
