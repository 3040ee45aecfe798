//! Packets as the simulator carries them: addresses, a transport header in wire format, and
//! a count of payload bytes — virtual by default, or materialised when an agent carries
//! message bytes ([`Packet::payload`]).
//!
//! Protocols serialise their real headers into [`Packet::header`] with their `emit`, and the
//! receiving agent parses them back with `parse`: every simulated packet exercises the same
//! wire code that runs over real sockets, and packet captures are decodable by Wireshark.

use crate::link::WireSize;
use smallvec::SmallVec;
use std::fmt;
use std::sync::Arc;

/// Index of a node (host or router) in a [`World`](crate::world::World).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The node's IPv4 address in captures: 10.0.0.0/8, numbered from 10.0.0.1.
    pub fn ipv4(self) -> [u8; 4] {
        let n = self.0.wrapping_add(1);
        {
            let [_, a, b, c] = n.to_be_bytes();
            [10, a, b, c]
        }
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.ipv4();
        write!(f, "{a}.{b}.{c}.{d}")
    }
}

/// A transport endpoint: node and port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Addr {
    /// The node.
    pub node: NodeId,
    /// The port.
    pub port: u16,
}

/// The transport protocol (IP protocol number in captures).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Proto {
    /// TCP (6): the header is a TCP header.
    Tcp,
    /// UDP (17): the header is the UDP payload's leading bytes; an 8-byte UDP header is
    /// implied.
    Udp,
}

impl Proto {
    /// IP protocol number.
    pub fn number(self) -> u8 {
        match self {
            Proto::Tcp => 6,
            Proto::Udp => 17,
        }
    }
}

/// Inline storage for transport headers: no allocation for headers up to 64 bytes.
pub type Header = SmallVec<[u8; 64]>;

/// IPv4 header bytes counted in every packet's size.
pub const IPV4_HEADER_LEN: u32 = 20;
/// UDP header bytes counted in every UDP packet's size.
pub const UDP_HEADER_LEN: u32 = 8;

/// Bookkeeping the simulator attaches to a packet; not part of the wire format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// The flow whose agent sent the packet, if it belongs to one.
    pub flow: Option<u32>,
    /// Sent by the flow's receiving side (ACKs, responses).
    pub reverse: bool,
}

/// A simulated packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Source endpoint.
    pub src: Addr,
    /// Destination endpoint.
    pub dst: Addr,
    /// Transport protocol.
    pub proto: Proto,
    /// Transport header (TCP) or leading UDP payload bytes, in wire format.
    pub header: Header,
    /// Payload bytes after the header: their count, which is what the link carries and
    /// times.
    pub payload_len: u32,
    /// The payload bytes themselves, when the sending agent carries them (NAI agents asked to
    /// carry message bytes); `payload_len` of them. `None`: the payload is virtual, the
    /// default, which keeps long runs fast. Shared, so cloning a packet does not copy them.
    pub payload: Option<Arc<[u8]>>,
    /// Simulator bookkeeping.
    pub meta: Meta,
}

impl Packet {
    /// A packet with an empty header.
    pub fn new(src: Addr, dst: Addr, proto: Proto, payload_len: u32) -> Packet {
        Packet {
            src,
            dst,
            proto,
            header: Header::new(),
            payload_len,
            payload: None,
            meta: Meta::default(),
        }
    }

    /// A packet whose header is written by `emit` into `len` bytes.
    pub fn with_header<E>(
        src: Addr,
        dst: Addr,
        proto: Proto,
        len: usize,
        payload_len: u32,
        emit: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Result<Packet, E> {
        let mut p = Packet::new(src, dst, proto, payload_len);
        p.header.resize(len, 0);
        let written = emit(&mut p.header)?;
        p.header.truncate(written);
        Ok(p)
    }

    /// Materialises the payload: a copy of `data`, which must be `payload_len` bytes long
    /// (otherwise the payload stays virtual and `false` is returned).
    pub fn set_payload(&mut self, data: &[u8]) -> bool {
        if u32::try_from(data.len()).ok() != Some(self.payload_len) {
            return false;
        }
        self.payload = Some(Arc::from(data));
        true
    }
}

impl WireSize for Packet {
    fn wire_len(&self) -> u32 {
        let transport = match self.proto {
            Proto::Tcp => 0,
            Proto::Udp => UDP_HEADER_LEN,
        };
        let header = u32::try_from(self.header.len()).unwrap_or(u32::MAX);
        IPV4_HEADER_LEN
            .saturating_add(transport)
            .saturating_add(header)
            .saturating_add(self.payload_len)
    }
}
