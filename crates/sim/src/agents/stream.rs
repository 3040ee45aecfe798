//! Plumbing for agents that run an application framing over simulated TCP connections.
//!
//! The simulator's TCP carries *virtual* payload: byte counts, not contents. An application
//! framing (ATP's fixed-size segments, the baselines' records) puts real headers into the
//! stream; here the sender hands each header, emitted to bytes, to a [`StreamTags`] shared with
//! the receiving agent, keyed by the stream offset where its record ends. The receiver takes a
//! header back — and parses it — only once TCP has delivered every byte of the record, in
//! order, exactly as it would find it in a real byte stream. The header bytes are counted in
//! the stream, so the framing's overhead is simulated.
//!
//! When a flow carries message bytes, the stream bytes travel in the packets instead: the
//! sender's [`ConnSet`] keeps each connection's unacknowledged bytes and fills every data
//! segment (retransmissions included) from them, the receiver's places arriving payloads in a
//! reassembly ring by sequence number and reads them back in order once TCP has delivered
//! them ([`ConnSet::enable_send_bytes`], [`ConnSet::enable_recv_bytes`]; core's
//! [`adaptnet_core::tcp::bytes`] buffers, which the runtime's stream transport uses too). A
//! lost or reordered segment then really loses or reorders bytes.
//!
//! [`ConnSet`] holds the TCP connections of one agent (one port each).

use crate::packet::{Addr, Header, Packet};
use adaptnet_core::Time;
use adaptnet_core::tcp::bytes::{ReceiveRing, SendBuffer, data_offset};
use adaptnet_core::tcp::{Connection, TcpConfig, TcpRepr};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use super::tcp::segment_packet;

/// Framing headers travelling beside one TCP byte stream (see the module docs). Clones share
/// the same queue: give one to the sender and one to the receiver.
#[derive(Clone, Debug, Default)]
pub struct StreamTags(Rc<RefCell<VecDeque<(u64, Header)>>>);

impl StreamTags {
    /// An empty stream.
    pub fn new() -> StreamTags {
        StreamTags::default()
    }

    /// The sender wrote a record whose last byte is at stream offset `end` (exclusive).
    pub fn push(&self, end: u64, header: &[u8]) {
        self.0
            .borrow_mut()
            .push_back((end, Header::from_slice(header)));
    }

    /// Headers of the records wholly within the first `delivered` stream bytes, in order;
    /// they are removed.
    pub fn take_through(&self, delivered: u64) -> Vec<Header> {
        let mut q = self.0.borrow_mut();
        let mut out = Vec::new();
        while q.front().is_some_and(|(end, _)| *end <= delivered) {
            if let Some((_, h)) = q.pop_front() {
                out.push(h);
            }
        }
        out
    }

    /// Records written and not yet taken.
    pub fn len(&self) -> usize {
        self.0.borrow().len()
    }

    /// Whether no record is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One TCP connection of a [`ConnSet`].
#[derive(Debug)]
pub struct ConnSlot {
    /// Our endpoint.
    pub local: Addr,
    /// The peer's endpoint.
    pub remote: Addr,
    /// The connection (`None` until opened or accepted).
    pub conn: Option<Connection>,
    /// Stream bytes written so far.
    pub written: u64,
    /// Our initial sequence number.
    iss: u32,
    /// The peer's initial sequence number, once its SYN is seen.
    irs: Option<u32>,
    /// Unacknowledged stream bytes, when this side sends real bytes.
    send_bytes: Option<SendBuffer>,
    /// Received stream bytes by offset, when this side receives real bytes.
    recv_bytes: Option<ReceiveRing>,
}

impl ConnSlot {
    /// Writes `data` to the stream: its bytes when this side carries them
    /// ([`ConnSet::enable_send_bytes`]), else only their count. Nothing before the connection
    /// exists.
    pub fn write_bytes(&mut self, data: &[u8]) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let n = data.len() as u64;
        conn.write(n);
        self.written += n;
        if let Some(b) = self.send_bytes.as_mut() {
            b.push(data);
        }
    }

    /// Reads every byte the connection has delivered and not yet handed on: appends them to
    /// `out` when this side carries bytes ([`ConnSet::enable_recv_bytes`]). Returns how many.
    pub fn read_stream(&mut self, out: &mut Vec<u8>) -> u64 {
        let Some(conn) = self.conn.as_mut() else {
            return 0;
        };
        let n = conn.bytes_unread();
        if let Some(ring) = self.recv_bytes.as_mut() {
            ring.take(n, out);
        }
        conn.read(n);
        n
    }
}

/// The TCP connections of one agent, told apart by local port.
#[derive(Debug)]
pub struct ConnSet {
    config: TcpConfig,
    slots: Vec<ConnSlot>,
    /// Rotates the first connection polled for transmission, so none is always first.
    turn: usize,
    /// Packets whose TCP header did not parse.
    pub malformed: u64,
    /// Data segments that left without their bytes although this side carries them (the
    /// send buffer lacked them: an engine bug).
    pub unmaterialised: u64,
    /// Data segments that arrived without bytes although this side expects them (a peer
    /// that sends sizes only).
    pub missing_payload: u64,
    /// Data segments that arrived beyond a hole in the stream (after a loss, or overtaking
    /// an earlier segment), which the receiver had to hold until the hole was filled.
    pub out_of_order: u64,
}

impl ConnSet {
    /// Connections between each `(local, remote)` pair, not yet opened.
    pub fn new(config: TcpConfig, pairs: Vec<(Addr, Addr)>) -> ConnSet {
        ConnSet {
            config,
            slots: pairs
                .into_iter()
                .map(|(local, remote)| ConnSlot {
                    local,
                    remote,
                    conn: None,
                    written: 0,
                    iss: 0,
                    irs: None,
                    send_bytes: None,
                    recv_bytes: None,
                })
                .collect(),
            turn: 0,
            malformed: 0,
            unmaterialised: 0,
            missing_payload: 0,
            out_of_order: 0,
        }
    }

    /// Every connection sends real bytes: what is written with [`ConnSlot::write_bytes`] is
    /// kept until acknowledged and travels in the packets. Call before writing.
    pub fn enable_send_bytes(&mut self) {
        for s in &mut self.slots {
            s.send_bytes = Some(SendBuffer::new());
        }
    }

    /// Every connection receives real bytes into a ring of `recv_buffer` bytes (core's
    /// receiver accepts nothing beyond it), read with [`ConnSlot::read_stream`]. Call before
    /// any packet arrives.
    pub fn enable_recv_bytes(&mut self) {
        let cap = usize::try_from(self.config.recv_buffer).unwrap_or(usize::MAX >> 1);
        for s in &mut self.slots {
            s.recv_bytes = Some(ReceiveRing::new(cap));
        }
    }

    /// Active open of every connection (NewReno), with initial sequence numbers from `isn`.
    pub fn connect_all(&mut self, isn: u32) {
        for (i, s) in self.slots.iter_mut().enumerate() {
            let cc = Connection::newreno(&self.config);
            s.iss = isn
                .wrapping_add(adaptnet_core::convert::usize_u32_sat(i).wrapping_mul(0x3c6e_f372));
            s.conn = Some(Connection::connect(
                self.config.clone(),
                s.local.port,
                s.remote.port,
                s.iss,
                cc,
            ));
        }
    }

    /// Number of connections.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Connection `i`.
    pub fn slot(&self, i: usize) -> Option<&ConnSlot> {
        self.slots.get(i)
    }

    /// Connection `i`, mutably.
    pub fn slot_mut(&mut self, i: usize) -> Option<&mut ConnSlot> {
        self.slots.get_mut(i)
    }

    /// Feeds a packet to the connection it is addressed to; on the passive side a SYN
    /// accepts the connection (with `isn`). Returns the connection's index, or `None` for a
    /// packet that belongs to none (malformed ones are counted).
    pub fn handle_packet(&mut self, now: Time, packet: &Packet, isn: u32) -> Option<usize> {
        let Ok(repr) = TcpRepr::parse(&packet.header) else {
            self.malformed += 1;
            return None;
        };
        let i = self
            .slots
            .iter()
            .position(|s| s.local.port == packet.dst.port && s.remote == packet.src)?;
        let slot = self.slots.get_mut(i)?;
        if repr.flags.syn {
            slot.irs = Some(repr.seq);
        }
        if let (Some(irs), Some(conn)) = (slot.irs, slot.conn.as_ref())
            && packet.payload_len > 0
            && !repr.flags.syn
        {
            let delivered = conn.bytes_delivered();
            if data_offset(irs, repr.seq, delivered).is_some_and(|o| o > delivered) {
                self.out_of_order += 1;
            }
            if let Some(ring) = slot.recv_bytes.as_mut() {
                match &packet.payload {
                    Some(data) => ring.store_segment(irs, repr.seq, delivered, data),
                    None => self.missing_payload += 1,
                }
            }
        }
        match slot.conn.as_mut() {
            Some(c) => c.handle_segment(now, &repr, packet.payload_len),
            None if repr.flags.syn && !repr.flags.ack => {
                let cc = Connection::newreno(&self.config);
                slot.iss = isn;
                slot.conn = Some(Connection::accept(self.config.clone(), &repr, isn, cc));
            }
            None => return None,
        }
        if let (Some(buf), Some(conn)) = (slot.send_bytes.as_mut(), slot.conn.as_ref()) {
            buf.release_through(conn.bytes_acked());
        }
        if let Some(c) = slot.conn.as_mut() {
            while c.poll_event().is_some() {}
        }
        Some(i)
    }

    /// The next segment of any connection, connections taking turns.
    pub fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        let n = self.slots.len();
        for k in 0..n {
            let i = (self.turn + k) % n;
            let Some(s) = self.slots.get_mut(i) else {
                continue;
            };
            let Some(c) = s.conn.as_mut() else {
                continue;
            };
            if let Some(seg) = c.poll_transmit(now) {
                self.turn = (i + 1) % n;
                if let Some(mut p) = segment_packet(s.local, s.remote, &seg) {
                    if let Some(buf) = s.send_bytes.as_ref()
                        && seg.payload_len > 0
                    {
                        let mut data = vec![0u8; seg.payload_len as usize];
                        if !(buf.copy_segment(s.iss, seg.repr.seq, &mut data)
                            && p.set_payload(&data))
                        {
                            self.unmaterialised += 1;
                        }
                    }
                    return Some(p);
                }
            }
        }
        None
    }

    /// The earliest timer of any connection.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.slots
            .iter()
            .filter_map(|s| s.conn.as_ref().and_then(Connection::poll_timeout))
            .min()
    }

    /// Fires the connections' timers.
    pub fn handle_timeout(&mut self, now: Time) {
        for s in &mut self.slots {
            if let Some(c) = s.conn.as_mut() {
                c.handle_timeout(now);
                while c.poll_event().is_some() {}
            }
        }
    }
}
