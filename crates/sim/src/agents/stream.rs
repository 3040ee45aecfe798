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
//! The TCP connections themselves are core's [`Endpoint`], the same the runtime's stream transport runs:
//! demultiplexing, passive opens, initial sequence numbers and the bytes. [`ConnSet`] is the
//! agents' view of one: its connections by index, one per (local, remote) pair, opened as
//! fully specified passive opens in that order (the receiving side) or turned active by
//! [`ConnSet::connect_all`].
//!
//! When a flow carries message bytes, the stream bytes travel in the packets instead: the
//! sender's endpoint keeps each connection's unacknowledged bytes and fills every data
//! segment (retransmissions included) from them, the receiver's places arriving payloads in a
//! reassembly ring by sequence number and reads them back in order once TCP has delivered
//! them ([`ConnSet::enable_send_bytes`], [`ConnSet::enable_recv_bytes`]). A lost or
//! reordered segment then really loses or reorders bytes.

use crate::packet::{Addr, Header, Packet};
use adaptnet_core::Time;
use adaptnet_core::cm::PeerAddr;
use adaptnet_core::tcp::endpoint::{
    ConnectionHandle, Endpoint, EndpointAddr, EndpointConfig, Stream,
};
use adaptnet_core::tcp::{TcpConfig, TcpRepr};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
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

impl EndpointAddr for Addr {
    fn cookie_addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::from(self.node.ipv4()), self.port))
    }

    fn cm_peer(&self) -> PeerAddr {
        super::cm::peer_addr(self.node)
    }
}

/// One TCP connection of a [`ConnSet`]: core's per-connection state (its `conn` and
/// `written`, and the bytes).
pub type ConnSlot = Stream<Addr>;

/// The TCP connections of one agent, told apart by local port: a core endpoint and the
/// (local, remote) pair of each connection, by index.
#[derive(Debug)]
pub struct ConnSet {
    endpoint: Endpoint<Addr>,
    /// Each connection's (local, remote) endpoints and handle, in the order given.
    pairs: Vec<(Addr, Addr, ConnectionHandle)>,
    /// Whether data segments carry their bytes.
    send_bytes: bool,
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
    /// Connections between each `(local, remote)` pair, not yet opened (each waits for its
    /// peer's SYN until [`ConnSet::connect_all`]).
    pub fn new(config: TcpConfig, pairs: Vec<(Addr, Addr)>) -> ConnSet {
        let mut endpoint = Endpoint::new(EndpointConfig {
            max_connections: usize::MAX,
            // Agents read finished connections' counters: nothing is forgotten.
            linger: None,
            send_bytes: false,
            recv_bytes: false,
            // The agents' peers are known; a stray segment is dropped, as it always was.
            reset_unknown: false,
            ..EndpointConfig::client(config)
        });
        let pairs = pairs
            .into_iter()
            .filter_map(|(local, remote)| {
                let h = endpoint
                    .open_passive(remote, local.port, remote.port)
                    .ok()?;
                Some((local, remote, h))
            })
            .collect();
        ConnSet {
            endpoint,
            pairs,
            send_bytes: false,
            malformed: 0,
            unmaterialised: 0,
            missing_payload: 0,
            out_of_order: 0,
        }
    }

    /// Every connection sends real bytes: what is written with [`ConnSlot::write_bytes`] is
    /// kept until acknowledged and travels in the packets. Call before writing.
    pub fn enable_send_bytes(&mut self) {
        self.send_bytes = true;
        self.endpoint.carry_send_bytes();
    }

    /// Every connection receives real bytes into a ring as large as its receive buffer
    /// (core's receiver accepts nothing beyond it), read with [`ConnSlot::read_stream`].
    /// Call before any packet arrives.
    pub fn enable_recv_bytes(&mut self) {
        self.endpoint.carry_recv_bytes();
    }

    /// Active open of every connection (NewReno), with initial sequence numbers from `isn`.
    pub fn connect_all(&mut self, isn: u32) {
        for (i, (_, _, h)) in self.pairs.iter().enumerate() {
            let iss = isn
                .wrapping_add(adaptnet_core::convert::usize_u32_sat(i).wrapping_mul(0x3c6e_f372));
            // NewReno takes no time at its start.
            let _ = self.endpoint.open_active(Time::ZERO, *h, iss);
        }
    }

    /// Number of connections.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Connection `i`.
    pub fn slot(&self, i: usize) -> Option<&ConnSlot> {
        let (_, _, h) = self.pairs.get(i)?;
        self.endpoint.stream(*h)
    }

    /// Connection `i`, mutably.
    pub fn slot_mut(&mut self, i: usize) -> Option<&mut ConnSlot> {
        let (_, _, h) = self.pairs.get(i)?;
        self.endpoint.stream_mut(*h)
    }

    /// Connection `i`'s (local, remote) endpoints.
    pub fn addrs(&self, i: usize) -> Option<(Addr, Addr)> {
        self.pairs.get(i).map(|(l, r, _)| (*l, *r))
    }

    fn index_of(&self, h: ConnectionHandle) -> Option<usize> {
        // Handles are given in the order of the pairs, from 0.
        usize::try_from(h.0)
            .ok()
            .filter(|&i| self.pairs.get(i).is_some_and(|p| p.2 == h))
    }

    /// The endpoint's events are for engines that announce connections; agents poll their
    /// connections instead.
    fn sync(&mut self) {
        while self.endpoint.poll_event().is_some() {}
        let stats = self.endpoint.stats();
        self.missing_payload = stats.missing_payload;
        self.out_of_order = stats.out_of_order;
    }

    /// Feeds a packet to the connection it is addressed to; on the passive side a SYN
    /// accepts the connection (with `isn`). Returns the connection's index, or `None` for a
    /// packet that belongs to none (malformed ones are counted).
    pub fn handle_packet(&mut self, now: Time, packet: &Packet, isn: u32) -> Option<usize> {
        let Ok(repr) = TcpRepr::parse(&packet.header) else {
            self.malformed += 1;
            return None;
        };
        self.endpoint.set_passive_iss(isn);
        let h = self.endpoint.handle_segment(
            now,
            packet.src,
            &repr,
            packet.payload_len,
            packet.payload.as_deref(),
        );
        self.sync();
        self.index_of(h?)
    }

    /// The next segment of any connection, connections taking turns.
    pub fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        loop {
            let out = self.endpoint.poll_segment(now);
            self.sync();
            let out = out?;
            let Some((local, remote)) = out.handle.and_then(|h| self.addrs(self.index_of(h)?))
            else {
                continue;
            };
            let Some(mut p) = segment_packet(local, remote, &out.segment) else {
                continue;
            };
            if self.send_bytes && out.segment.payload_len > 0 {
                let mut data = vec![0u8; out.segment.payload_len as usize];
                if !(self.endpoint.copy_payload(&out, &mut data) && p.set_payload(&data)) {
                    self.unmaterialised += 1;
                }
            }
            return Some(p);
        }
    }

    /// The earliest timer of any connection.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.endpoint.poll_timeout()
    }

    /// Fires the connections' timers.
    pub fn handle_timeout(&mut self, now: Time) {
        self.endpoint.handle_timeout(now);
        self.sync();
    }
}
