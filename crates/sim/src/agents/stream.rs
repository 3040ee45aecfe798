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
//! [`ConnSet`] holds the TCP connections of one agent (one port each).

use crate::packet::{Addr, Header, Packet};
use adaptnet_core::Time;
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
                })
                .collect(),
            turn: 0,
            malformed: 0,
        }
    }

    /// Active open of every connection (NewReno), with initial sequence numbers from `isn`.
    pub fn connect_all(&mut self, isn: u32) {
        for (i, s) in self.slots.iter_mut().enumerate() {
            let cc = Connection::newreno(&self.config);
            s.conn = Some(Connection::connect(
                self.config.clone(),
                s.local.port,
                s.remote.port,
                isn.wrapping_add(
                    adaptnet_core::convert::usize_u32_sat(i).wrapping_mul(0x3c6e_f372),
                ),
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
        match slot.conn.as_mut() {
            Some(c) => c.handle_segment(now, &repr, packet.payload_len),
            None if repr.flags.syn && !repr.flags.ack => {
                let cc = Connection::newreno(&self.config);
                slot.conn = Some(Connection::accept(self.config.clone(), &repr, isn, cc));
            }
            None => return None,
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
                if let Some(p) = segment_packet(s.local, s.remote, &seg) {
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
