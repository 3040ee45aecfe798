//! What every NAI sender/receiver pair (ATP over SPP, ATP over TCP, NAI-TCP, NAI-MTCPk) shares
//! besides the application host of [`super::nai_app`]: the receiving side's log of the
//! messages it delivered, and the installation of both agents as one flow.

use super::message_bytes::{Digest, MessageBytes, MessageData, PayloadCheck, digest};
use crate::agent::Agent;
use crate::packet::{Addr, NodeId, Proto};
use crate::world::{AgentId, FlowSpec, World, WorldError};
use adaptnet_core::Time;
use adaptnet_core::spp::{Delivery, SppEvent};

/// The messages a receiving agent handed to its application, from its reassembler's events.
/// A message that came with its bytes is logged with their digest; the bytes are dropped.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeliveryLog {
    deliveries: Vec<Delivery>,
    /// The digest of each delivery's bytes, in the same order (`None`: delivered by size).
    digests: Vec<Option<Digest>>,
    message_bytes: u64,
    discards: u64,
}

impl DeliveryLog {
    /// Records one reassembler event: a message delivered whole, or a partly received one
    /// dropped on the sender's cancel (or abort) notice.
    pub(crate) fn record(&mut self, event: SppEvent) {
        match event {
            SppEvent::Delivered(mut d) => {
                self.message_bytes += d.size_bytes;
                self.digests.push(d.data.take().map(|b| digest(&b)));
                self.deliveries.push(d);
            }
            SppEvent::Discarded { .. } => self.discards += 1,
        }
    }

    /// Messages delivered, in order of delivery (without their bytes: see
    /// [`payload_check`](Self::payload_check)).
    pub(crate) fn deliveries(&self) -> &[Delivery] {
        &self.deliveries
    }

    /// Every delivery checked against what the sender sent.
    pub(crate) fn payload_check(&self, sent: &MessageBytes) -> PayloadCheck {
        PayloadCheck::new(
            sent.sent(),
            self.deliveries
                .iter()
                .zip(&self.digests)
                .map(|(d, g)| (d.id, g.as_ref())),
        )
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
    /// Whether messages carry bytes.
    pub(crate) data: MessageData,
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

    /// The sender's message contents when the flow carries bytes: drawn from a seed derived
    /// from the world's seed and the sender's address, so a run is reproducible from its seed
    /// and two flows get different contents. `max_buffered_bytes` is the sender's bound.
    pub(crate) fn message_bytes(
        &self,
        world: &World,
        max_buffered_bytes: u64,
    ) -> Option<MessageBytes> {
        let tag = 0x6d73_6762_7974_6573 ^ (u64::from(self.from.0) << 16) ^ u64::from(self.port);
        (self.data == MessageData::Bytes)
            .then(|| MessageBytes::new(world.derive_seed(tag), max_buffered_bytes))
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
