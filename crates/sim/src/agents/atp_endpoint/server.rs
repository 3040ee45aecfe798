//! The server agent: accepts clients and logs what each delivers.

use super::host::{Host, sim_addr};
use super::{Ended, Faults};
use crate::agent::{Agent, InterfaceInfo};
use crate::agents::message_bytes::{MessageBytes, PayloadCheck};
use crate::agents::nai_flow::DeliveryLog;
use crate::packet::{Addr, Packet};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{
    ConnEvent, ConnectionId, EndpointConfig, EndpointEvent, EndpointStats,
};
use adaptnet_core::session::wire::is_session;
use adaptnet_core::spp::{Delivery, SppEvent, SppRepr};
use std::collections::BTreeMap;

/// What the server saw of one connection.
#[derive(Clone, Debug)]
pub struct ServerConnection {
    /// The client's address.
    pub peer: Addr,
    /// When the connection was accepted.
    pub accepted_at: Time,
    /// Messages delivered on it.
    log: DeliveryLog,
    /// DATA payload bytes received on it (duplicates included).
    pub payload_bytes: u64,
    /// How it ended, if it has.
    pub ended: Option<Ended>,
}

impl ServerConnection {
    /// Messages delivered, in order of delivery.
    pub fn deliveries(&self) -> &[Delivery] {
        self.log.deliveries()
    }

    /// Every delivery checked against what the client sent.
    pub fn payload_check(&self, sent: &MessageBytes) -> PayloadCheck {
        self.log.payload_check(sent)
    }

    /// Partly received messages dropped on the client's cancel notice.
    pub fn discards(&self) -> u64 {
        self.log.discards()
    }
}

/// The server side: accepts clients (handshake with retry tokens), delivers their messages,
/// and answers: acknowledgements, and its own connections' estimator probes and keep-alive
/// PINGs (it submits no messages of its own).
pub struct AtpServerAgent {
    host: Host,
    conns: BTreeMap<ConnectionId, ServerConnection>,
    delivered_bytes: u64,
}

impl AtpServerAgent {
    /// A server on `local` whose tokens are signed with the key in `config.server`.
    pub fn new(local: Addr, config: EndpointConfig, faults: Faults) -> AtpServerAgent {
        AtpServerAgent {
            host: Host::new(local, config, faults),
            conns: BTreeMap::new(),
            delivered_bytes: 0,
        }
    }

    /// Every connection accepted, by id, in order.
    pub fn connections(&self) -> impl Iterator<Item = &ServerConnection> {
        self.conns.values()
    }

    /// The connection from `peer` (the latest, if it connected more than once).
    pub fn connection_from(&self, peer: Addr) -> Option<&ServerConnection> {
        self.conns.values().rev().find(|c| c.peer == peer)
    }

    /// The endpoint's counters of dropped and statelessly answered datagrams.
    pub fn endpoint_stats(&self) -> &EndpointStats {
        self.host.endpoint.stats()
    }

    fn pump(&mut self, now: Time) {
        while let Some(ev) = self.host.endpoint.poll_event() {
            match ev {
                EndpointEvent::Incoming(id, peer) => {
                    let Some(peer) = sim_addr(peer) else {
                        continue;
                    };
                    self.conns.insert(
                        id,
                        ServerConnection {
                            peer,
                            accepted_at: now,
                            log: DeliveryLog::default(),
                            payload_bytes: 0,
                            ended: None,
                        },
                    );
                }
                EndpointEvent::Connection(id, ev) => {
                    let Some(c) = self.conns.get_mut(&id) else {
                        continue;
                    };
                    match ev {
                        ConnEvent::Delivered(d) => {
                            self.delivered_bytes += d.size_bytes;
                            c.log.record(SppEvent::Delivered(d));
                        }
                        ConnEvent::Discarded(m) => c.log.record(SppEvent::Discarded { id: m }),
                        ConnEvent::Closed(reason) => c.ended = Some(Ended { at: now, reason }),
                        ConnEvent::Nai(_) => {}
                    }
                }
                EndpointEvent::Connected(_) | EndpointEvent::ConnectFailed(_) => {}
            }
        }
    }
}

impl Agent for AtpServerAgent {
    fn handle_packet(&mut self, now: Time, packet: Packet) {
        let data = !is_session(&packet.header)
            && matches!(SppRepr::parse(&packet.header), Ok(SppRepr::Data(_)));
        if data
            && !self.host.dead
            && let Some(c) = self.open_from(packet.src)
        {
            c.payload_bytes += u64::from(packet.payload_len);
        }
        self.host.handle_packet(now, &packet);
        self.pump(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.host.handle_timeout(now);
        self.pump(now);
    }

    fn poll_transmit(&mut self, now: Time) -> Option<Packet> {
        self.host.poll_transmit(now)
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.host.poll_timeout()
    }

    fn delivered_bytes(&self) -> u64 {
        self.delivered_bytes
    }

    fn counters(&self) -> Vec<(&'static str, f64)> {
        let messages: usize = self.conns.values().map(|c| c.deliveries().len()).sum();
        let e = self.endpoint_stats();
        vec![
            ("connections", self.conns.len() as f64),
            ("messages_delivered", messages as f64),
            ("message_bytes_delivered", self.delivered_bytes as f64),
            ("retries_sent", e.retries_sent as f64),
            ("endpoint_malformed", e.malformed as f64),
        ]
    }

    fn wants_interface_info(&self) -> bool {
        true
    }

    fn on_interface(&mut self, now: Time, info: &InterfaceInfo) {
        self.host.on_interface(now, info);
    }
}

impl AtpServerAgent {
    /// The open connection from `peer`, if any.
    fn open_from(&mut self, peer: Addr) -> Option<&mut ServerConnection> {
        self.conns
            .values_mut()
            .rev()
            .find(|c| c.peer == peer && c.ended.is_none())
    }
}
