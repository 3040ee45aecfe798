//! What both agents share: core's endpoint, the datagrams it writes as simulated packets,
//! and a host's faults.

use super::Faults;
use crate::agent::InterfaceInfo;
use crate::packet::{Addr, NodeId, Packet, Proto};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{ConnectionId, Endpoint, EndpointConfig};
use adaptnet_core::session::wire::is_session;
use adaptnet_core::spp::SppRepr;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// Largest datagram core writes (its `max_datagram_bytes` is at most this).
const BUF_BYTES: usize = 2048;

/// A simulated address as the socket address core sees.
pub fn socket_addr(a: Addr) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(a.node.ipv4()), a.port))
}

/// The simulated address of a socket address from [`socket_addr`]; `None` for any other.
pub fn sim_addr(s: SocketAddr) -> Option<Addr> {
    let SocketAddr::V4(v4) = s else {
        return None;
    };
    let [ten, a, b, c] = v4.ip().octets();
    let n = u32::from_be_bytes([0, a, b, c]).checked_sub(1)?;
    (ten == 10).then_some(Addr {
        node: NodeId(n),
        port: v4.port(),
    })
}

/// One datagram as a UDP packet (see the module docs for the split).
pub(super) fn datagram_packet(src: Addr, dst: Addr, bytes: &[u8]) -> Option<Packet> {
    let split = if is_session(bytes) {
        bytes.len()
    } else {
        SppRepr::parse(bytes).map_or(bytes.len(), |r| r.buffer_len().min(bytes.len()))
    };
    let (head, body) = bytes.split_at(split);
    let body_len = u32::try_from(body.len()).ok()?;
    let mut p = Packet::with_header(src, dst, Proto::Udp, head.len(), body_len, |buf| {
        buf.copy_from_slice(head);
        Ok::<usize, ()>(head.len())
    })
    .ok()?;
    if !body.is_empty() {
        p.set_payload(body);
    }
    Some(p)
}

/// The datagram a packet carries: header then payload (zeros if the payload is virtual, which
/// no endpoint agent sends).
pub(super) fn packet_bytes(p: &Packet) -> Vec<u8> {
    let mut v = Vec::with_capacity(p.header.len() + p.payload_len as usize);
    v.extend_from_slice(&p.header);
    match &p.payload {
        Some(data) => v.extend_from_slice(data),
        None => v.resize(v.len() + p.payload_len as usize, 0),
    }
    v
}

/// What both agents share: the endpoint, its packets and its faults.
pub(super) struct Host {
    local: Addr,
    pub(super) endpoint: Endpoint,
    faults: Faults,
    pub(super) dead: bool,
    closed_all: bool,
    /// Datagrams whose destination is not a simulated address (none expected).
    misaddressed: u64,
}

impl Host {
    pub(super) fn new(local: Addr, config: EndpointConfig, faults: Faults) -> Host {
        Host {
            local,
            endpoint: Endpoint::new(config),
            faults,
            dead: false,
            closed_all: false,
            misaddressed: 0,
        }
    }

    pub(super) fn handle_packet(&mut self, now: Time, packet: &Packet) {
        if !self.dead {
            let bytes = packet_bytes(packet);
            self.endpoint
                .handle_datagram(now, socket_addr(packet.src), &bytes);
        }
    }

    /// Runs faults due by `now`; returns whether the host is alive.
    pub(super) fn handle_faults(&mut self, now: Time) -> bool {
        if self.faults.die_at.is_some_and(|t| t <= now) {
            self.dead = true;
        }
        if !self.dead && !self.closed_all && self.faults.close_at.is_some_and(|t| t <= now) {
            self.close_all(now);
        }
        !self.dead
    }

    pub(super) fn close_all(&mut self, now: Time) {
        self.closed_all = true;
        let linger = self.faults.close_linger;
        let ids: Vec<ConnectionId> = self.endpoint.connection_ids().collect();
        for id in ids {
            self.endpoint.close(now, id, linger);
        }
    }

    pub(super) fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        if self.dead {
            return None;
        }
        let mut buf = [0u8; BUF_BYTES];
        while let Some(t) = self.endpoint.poll_transmit(now, &mut buf) {
            let Some(dst) = sim_addr(t.destination) else {
                self.misaddressed += 1;
                continue;
            };
            if let Some(p) = buf
                .get(..t.len)
                .and_then(|b| datagram_packet(self.local, dst, b))
            {
                return Some(p);
            }
        }
        None
    }

    pub(super) fn poll_timeout(&self) -> Option<Time> {
        if self.dead {
            return None;
        }
        let close = self.faults.close_at.filter(|_| !self.closed_all);
        [self.endpoint.poll_timeout(), close, self.faults.die_at]
            .into_iter()
            .flatten()
            .min()
    }

    pub(super) fn handle_timeout(&mut self, now: Time) {
        if self.handle_faults(now) && self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
        }
    }

    pub(super) fn on_interface(&mut self, now: Time, info: &InterfaceInfo) {
        if !self.dead {
            let queued = u32::try_from(info.queue_packets).unwrap_or(u32::MAX);
            let total = info.tx_bytes.saturating_add(info.rx_bytes);
            self.endpoint.handle_interface(now, total, queued);
        }
    }
}
