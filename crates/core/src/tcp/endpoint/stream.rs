//! One connection of an [`Endpoint`](super::Endpoint): core's [`Connection`] (which counts
//! bytes and positions) with what the endpoint keeps beside it — the wire numbers that map
//! sequence numbers to stream offsets (ISS, IRS), the real bytes when the engine carries them
//! ([`SendBuffer`], [`ReceiveRing`]), the application's close and release, its CM flow, and
//! when it finished (for the linger).

use crate::cm::FlowId;
use crate::tcp::bytes::{ReceiveRing, SendBuffer, data_offset};
use crate::tcp::{Connection, Flags, Segment, State, TcpRepr};
use crate::time::Time;

/// One connection and its byte bookkeeping. Read it through
/// [`Endpoint::stream`](super::Endpoint::stream); change it through the endpoint.
#[derive(Debug)]
pub struct Stream<A> {
    pub(super) remote: A,
    pub(super) local_port: u16,
    pub(super) remote_port: u16,
    /// The connection: `None` for a passive open that has not seen its SYN yet. Public for
    /// engines that drive it directly between the endpoint's calls (the simulator's
    /// virtual-byte framings write counts with `Connection::write` and read with
    /// `Connection::read`); the endpoint sees the effects at its next call. Never replace
    /// it.
    pub conn: Option<Connection>,
    /// Our initial sequence number: data offset `o` travels as `iss + 1 + o`.
    pub(super) iss: u32,
    /// The peer's initial sequence number, once its SYN is seen.
    pub(super) irs: Option<u32>,
    /// Written and not yet acknowledged bytes (engines that carry bytes).
    pub(super) send: Option<SendBuffer>,
    /// Arriving bytes by offset (engines that carry bytes).
    pub(super) recv: Option<ReceiveRing>,
    /// Stream bytes written so far: [`Stream::write_bytes`] counts them; an engine that
    /// writes counts straight to `conn` adds them here.
    pub written: u64,
    /// The application closed its direction (the FIN follows the data).
    pub(super) close_requested: bool,
    /// The application let go: what arrives is read and discarded, and the state goes after
    /// the linger once both directions are closed.
    pub(super) released: bool,
    /// The process CM's flow this connection's controller speaks for.
    pub(super) flow: Option<FlowId>,
    /// Opened by a peer's SYN (announced as `Incoming`), not by `connect`.
    pub(super) passive: bool,
    /// `Connected` / `Incoming` was announced.
    pub(super) announced: bool,
    /// When the connection finished (both directions closed and read, or aborted).
    pub(super) done_at: Option<Time>,
}

impl<A: Copy> Stream<A> {
    pub(super) fn new(remote: A, local_port: u16, remote_port: u16, iss: u32) -> Stream<A> {
        Stream {
            remote,
            local_port,
            remote_port,
            conn: None,
            iss,
            irs: None,
            send: None,
            recv: None,
            written: 0,
            close_requested: false,
            released: false,
            flow: None,
            passive: false,
            announced: false,
            done_at: None,
        }
    }

    /// The peer's address.
    pub fn remote(&self) -> A {
        self.remote
    }

    /// Our TCP port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The peer's TCP port.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    /// The connection (`None` for a passive open still waiting for its SYN).
    pub fn conn(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }

    /// Writes `data` to the stream: its bytes when the endpoint carries them (kept until
    /// acknowledged), else only their count. Nothing before the connection exists, or
    /// after this side closed.
    pub fn write_bytes(&mut self, data: &[u8]) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if self.close_requested {
            return;
        }
        let n = data.len() as u64;
        conn.write(n);
        self.written = self.written.saturating_add(n);
        if let Some(b) = self.send.as_mut() {
            b.push(data);
        }
    }

    /// Reads every delivered byte not yet read: appends them to `out` when the endpoint
    /// carries bytes. Returns how many.
    pub fn read_stream(&mut self, out: &mut impl Extend<u8>) -> u64 {
        self.read_at_most(u64::MAX, out)
    }

    /// Reads up to `max` delivered bytes (see [`Stream::read_stream`]).
    pub fn read_at_most(&mut self, max: u64, out: &mut impl Extend<u8>) -> u64 {
        let Some(conn) = self.conn.as_mut() else {
            return 0;
        };
        let n = conn.bytes_unread().min(max);
        if let Some(ring) = self.recv.as_mut() {
            ring.take(n, out);
        }
        conn.read(n);
        n
    }

    /// Our initial sequence number.
    pub fn iss(&self) -> u32 {
        self.iss
    }

    /// The peer's initial sequence number, once its SYN was seen.
    pub fn irs(&self) -> Option<u32> {
        self.irs
    }

    /// The CM flow of the connection's controller, if it runs under the CM.
    pub fn flow(&self) -> Option<FlowId> {
        self.flow
    }

    /// Bytes written and not yet acknowledged that the endpoint holds (bytes mode).
    pub fn unacked_bytes(&self) -> u64 {
        self.send.as_ref().map_or(0, |b| b.len() as u64)
    }

    /// Bytes of storage the connection's byte buffers hold (see
    /// [`Endpoint::storage_bytes`](super::Endpoint::storage_bytes)).
    pub fn storage_bytes(&self) -> usize {
        self.send.as_ref().map_or(0, SendBuffer::storage_bytes)
            + self.recv.as_ref().map_or(0, ReceiveRing::storage_bytes)
    }

    /// Gives back the storage of emptied byte buffers (see [`Endpoint::trim_storage`]).
    ///
    /// [`Endpoint::trim_storage`]: super::Endpoint::trim_storage
    pub fn trim_storage(&mut self) {
        if let Some(b) = self.send.as_mut() {
            b.trim();
        }
        if let Some(r) = self.recv.as_mut() {
            r.trim();
        }
    }

    /// Delivered in-order bytes the application has not read yet.
    pub fn readable_bytes(&self) -> u64 {
        self.conn.as_ref().map_or(0, Connection::bytes_unread)
    }

    /// The peer's FIN arrived and every byte before it was read: the application's end of
    /// stream.
    pub fn at_eof(&self) -> bool {
        self.conn
            .as_ref()
            .is_some_and(|c| c.peer_closed() && c.bytes_unread() == 0)
    }

    /// Our FIN and every byte before it were acknowledged.
    pub fn send_closed(&self) -> bool {
        self.conn
            .as_ref()
            .is_some_and(|c| c.send_complete() && self.close_requested)
    }

    /// The connection was reset or gave up after its retransmission timeouts.
    pub fn aborted(&self) -> bool {
        self.conn
            .as_ref()
            .is_some_and(|c| c.state() == State::Aborted)
    }

    /// Whether the handshake completed.
    pub fn is_established(&self) -> bool {
        self.conn.as_ref().is_some_and(Connection::is_established)
    }

    /// Starts carrying real bytes out (a stream with nothing written yet).
    pub(super) fn carry_send_bytes(&mut self) {
        if self.send.is_none() && self.written == 0 {
            self.send = Some(SendBuffer::new());
        }
    }

    /// Starts carrying real bytes in, into a ring of `capacity` bytes (before any arrived).
    pub(super) fn carry_recv_bytes(&mut self, capacity: usize) {
        if self.recv.is_none() && self.conn.as_ref().is_none_or(|c| c.bytes_delivered() == 0) {
            self.recv = Some(ReceiveRing::new(capacity));
        }
    }

    /// Stores an arriving segment's payload by its wire number (before the connection sees
    /// the segment). Returns whether it lies beyond the next expected byte (out of order).
    pub(super) fn store_payload(&mut self, repr: &TcpRepr, payload: Option<&[u8]>) -> bool {
        let (Some(irs), Some(conn)) = (self.irs, self.conn.as_ref()) else {
            return false;
        };
        let delivered = conn.bytes_delivered();
        let beyond = data_offset(irs, repr.seq, delivered).is_some_and(|o| o > delivered);
        if let (Some(ring), Some(data)) = (self.recv.as_mut(), payload) {
            ring.store_segment(irs, repr.seq, delivered, data);
        }
        beyond
    }

    /// Releases acknowledged bytes and, for a released stream, reads away what arrived.
    pub(super) fn settle(&mut self) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        if let Some(buf) = self.send.as_mut() {
            buf.release_through(conn.bytes_acked());
        }
        if self.released {
            let n = conn.bytes_unread();
            if n > 0 {
                if let Some(ring) = self.recv.as_mut() {
                    ring.take(n, &mut Discard);
                }
                conn.read(n);
            }
        }
    }

    /// Whether nothing more can happen on the connection that the application waits for:
    /// aborted, or both directions closed and everything read (or the application let go).
    pub(super) fn finished(&self) -> bool {
        let Some(conn) = self.conn.as_ref() else {
            return false;
        };
        conn.state() == State::Aborted
            || (conn.peer_closed()
                && conn.bytes_unread() == 0
                && conn.send_complete()
                && self.close_requested)
    }
}

impl<A: Copy> Stream<A> {
    /// The reset that aborts this connection at its peer, if it is open and unfinished:
    /// numbered as our next new byte, acknowledging what arrived (RFC 9293 §3.10.7.1).
    pub(super) fn reset_segment(&self) -> Option<(A, Segment)> {
        let conn = self.conn.as_ref()?;
        if self.finished() || conn.state() == State::Aborted {
            return None;
        }
        let irs = self.irs?;
        let acked = u32::try_from(conn.bytes_acked() & u64::from(u32::MAX)).unwrap_or(0);
        let delivered = u32::try_from(conn.bytes_delivered() & u64::from(u32::MAX)).unwrap_or(0);
        let repr = TcpRepr::control(
            self.local_port,
            self.remote_port,
            self.iss.wrapping_add(1).wrapping_add(acked),
            irs.wrapping_add(1).wrapping_add(delivered),
            Flags {
                rst: true,
                ack: true,
                ..Flags::default()
            },
        );
        Some((
            self.remote,
            Segment {
                repr,
                payload_len: 0,
            },
        ))
    }
}

/// Swallows bytes nobody will read.
struct Discard;

impl Extend<u8> for Discard {
    fn extend<T: IntoIterator<Item = u8>>(&mut self, iter: T) {
        iter.into_iter().for_each(drop);
    }
}
