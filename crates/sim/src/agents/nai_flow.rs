//! What every NAI sender/receiver pair (ATP over SPP, ATP over TCP, NAI-TCP, NAI-MTCPk) shares
//! besides the application host of [`super::nai_app`]: the receiving side's log of the
//! messages it delivered, and the installation of both agents as one flow.

use crate::agent::Agent;
use crate::packet::{Addr, NodeId, Proto};
use crate::world::{AgentId, FlowSpec, World, WorldError};
use adaptnet_core::Time;
use adaptnet_core::spp::{Delivery, SppEvent};

/// The messages a receiving agent handed to its application, from its reassembler's events.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeliveryLog {
    deliveries: Vec<Delivery>,
    message_bytes: u64,
    discards: u64,
}

impl DeliveryLog {
    /// Records one reassembler event: a message delivered whole, or a partly received one
    /// dropped on the sender's cancel (or abort) notice.
    pub(crate) fn record(&mut self, event: SppEvent) {
        match event {
            SppEvent::Delivered(d) => {
                self.message_bytes += d.size_bytes;
                self.deliveries.push(d);
            }
            SppEvent::Discarded { .. } => self.discards += 1,
        }
    }

    /// Messages delivered, in order of delivery.
    pub(crate) fn deliveries(&self) -> &[Delivery] {
        &self.deliveries
    }

    /// Bytes of delivered messages.
    pub(crate) fn message_bytes(&self) -> u64 {
        self.message_bytes
    }

    /// Partly received messages dropped.
    pub(crate) fn discards(&self) -> u64 {
        self.discards
    }
}

/// Where and when an NAI flow runs: the sender on `from`, the receiver on `to`, each bound to
/// `proto` port `port` and to every one of `extra_ports`; both start at `start`, the sender
/// stops at `stop`.
pub(crate) struct NaiFlow<'a> {
    /// Flow name for reports.
    pub(crate) name: &'a str,
    /// Flow type for reports ("atp", "atp-tcp", "nai-tcp").
    pub(crate) kind: &'static str,
    /// The sender's node.
    pub(crate) from: NodeId,
    /// The receiver's node.
    pub(crate) to: NodeId,
    /// The protocol of the main port.
    pub(crate) proto: Proto,
    /// The main port number, the same on both nodes.
    pub(crate) port: u16,
    /// More `(protocol, port)` bindings for both agents (one per extra connection or socket).
    pub(crate) extra_ports: Vec<(Proto, u16)>,
    /// When both agents start.
    pub(crate) start: Time,
    /// When the sender stops.
    pub(crate) stop: Time,
}

impl NaiFlow<'_> {
    /// The sender's and the receiver's main address.
    pub(crate) fn addrs(&self) -> (Addr, Addr) {
        (
            Addr {
                node: self.from,
                port: self.port,
            },
            Addr {
                node: self.to,
                port: self.port,
            },
        )
    }

    /// Binds `sender` and `receiver` to their ports and registers them as one flow. Returns
    /// (sender, receiver).
    pub(crate) fn install(
        self,
        world: &mut World,
        sender: Box<dyn Agent>,
        receiver: Box<dyn Agent>,
    ) -> Result<(AgentId, AgentId), WorldError> {
        let s = world.add_agent(self.from, self.proto, self.port, sender)?;
        let r = world.add_agent(self.to, self.proto, self.port, receiver)?;
        for &(proto, port) in &self.extra_ports {
            world.add_port(s, proto, port)?;
            world.add_port(r, proto, port)?;
        }
        world.add_flow(FlowSpec {
            name: self.name.to_string(),
            kind: self.kind.into(),
            sender: s,
            receiver: r,
            start: self.start,
            stop: self.stop,
        });
        Ok((s, r))
    }
}
