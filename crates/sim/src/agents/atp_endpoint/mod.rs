//! ATP through core's endpoint (`adaptnet_core::atp::endpoint`): the simulator runs exactly
//! what the runtime runs over UDP — the handshake with its retry token, demultiplexing by peer
//! address, keep-alive and idle timeout, CLOSE, and each connection's ATP in both directions
//! with the message bytes in the datagrams — rather than wiring an [`AtpSender`] to an
//! [`AtpReceiver`] as [`super::atp`] does (the mode the paper's reproductions keep).
//!
//! [`AtpClientAgent`] hosts an NAI application: it connects at its start, starts the
//! application once the server accepts, and closes gracefully at its stop. [`AtpServerAgent`]
//! accepts any number of clients and logs what each delivers. Either can be told to close
//! at a time or to die (fall silent, as a crashed host) for fault tests.
//!
//! Each datagram core writes becomes one UDP packet: an SPP datagram's header goes in
//! [`Packet::header`] and its payload in [`Packet::payload`]; a session packet (HELLO,
//! RETRY, ACCEPT, PING, CLOSE) is all header. Link sizes are those of the direct mode for the
//! same datagrams. Hosts' addresses are their capture addresses ([`NodeId::ipv4`]).
//!
//! Compared with the direct mode, a run pays the handshake (two round trips, the first HELLO
//! padded to [`MIN_HELLO_BYTES`](adaptnet_core::session::wire::MIN_HELLO_BYTES)) before the
//! application starts, the server's own estimator probes the return path, and PINGs flow
//! when a side is quiet.
//!
//! [`AtpSender`]: adaptnet_core::atp::AtpSender
//! [`Packet::header`]: crate::packet::Packet::header
//! [`Packet::payload`]: crate::packet::Packet::payload
//! [`AtpReceiver`]: adaptnet_core::atp::AtpReceiver

mod client;
mod host;
mod port;
mod server;
#[cfg(test)]
mod tests;

pub use client::AtpClientAgent;
pub use host::{sim_addr, socket_addr};
pub use server::{AtpServerAgent, ServerConnection};

use crate::agents::message_bytes::{MessageBytes, MessageData};
use crate::agents::nai_app::NaiApp;
use crate::agents::nai_flow::NaiFlow;
use crate::packet::{Addr, NodeId, Proto};
use crate::world::{AgentId, FlowSpec, World, WorldError};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::EndpointConfig;
use adaptnet_core::session::CloseReason;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// Faults and the end of a connection, for either agent.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Close every connection at this time (gracefully, after `close_linger`).
    pub close_at: Option<Time>,
    /// How long a close waits for live messages to become final.
    pub close_linger: Duration,
    /// The host dies at this time: from then on it neither sends nor hears anything.
    pub die_at: Option<Time>,
}

/// A connection's end, as one side saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// When the `Closed` event came.
    pub at: Time,
    /// The reason it carried (the peer's, when the peer closed).
    pub reason: CloseReason,
}

/// A server's endpoint configuration: `config` with a token key drawn from the world's seed.
pub fn server_config(world: &World, mut config: EndpointConfig, tag: u64) -> EndpointConfig {
    let mut rng = ChaCha8Rng::seed_from_u64(world.derive_seed(0x7365_7276_6572 ^ tag));
    let mut key = [0u8; 32];
    rng.fill_bytes(&mut key);
    config.server = Some(adaptnet_core::session::token::TokenConfig::new(key));
    config
}

/// A client id drawn from the world's seed for the client at `local`.
pub fn client_id(world: &World, local: Addr) -> u64 {
    world.derive_seed(0x636c_6965_6e74 ^ (u64::from(local.node.0) << 16) ^ u64::from(local.port))
}

/// Installs an ATP client (running `app`) on `from` and a server on `to`, both on UDP `port`,
/// as one flow active over `[start, stop)`: the client connects at `start` and closes at
/// `stop`, waiting `faults.close_linger` for live messages. Messages always carry bytes
/// (the endpoint has no sizes-only path). Returns (client, server).
#[allow(clippy::too_many_arguments)]
pub fn install(
    world: &mut World,
    name: &str,
    config: EndpointConfig,
    from: NodeId,
    to: NodeId,
    port: u16,
    app: Box<dyn NaiApp>,
    start: Time,
    stop: Time,
    client_faults: Faults,
    server_faults: Faults,
) -> Result<(AgentId, AgentId), WorldError> {
    let flow = NaiFlow {
        name,
        kind: "atp-endpoint",
        from,
        to,
        proto: Proto::Udp,
        port,
        extra_ports: Vec::new(),
        start,
        stop,
        data: MessageData::Bytes,
    };
    let (local, remote) = flow.addrs();
    let max = config.atp.max_buffered_bytes;
    let bytes = flow
        .message_bytes(world, max)
        .unwrap_or_else(|| MessageBytes::new(world.derive_seed(u64::from(port)), max));
    let server = AtpServerAgent::new(
        remote,
        server_config(world, config.clone(), u64::from(port)),
        server_faults,
    );
    let id = client_id(world, local);
    let client = AtpClientAgent::new(local, remote, config, id, app, bytes, client_faults);
    flow.install(world, Box::new(client), Box::new(server))
}

/// Adds one more client (running `app`) on `from`, UDP `port`, for the server `server` at
/// `server_addr`, as its own flow over `[start, stop)`: several clients demultiplexed by one
/// server endpoint. Returns the client.
#[allow(clippy::too_many_arguments)]
pub fn add_client(
    world: &mut World,
    name: &str,
    config: EndpointConfig,
    from: NodeId,
    port: u16,
    server: AgentId,
    server_addr: Addr,
    app: Box<dyn NaiApp>,
    start: Time,
    stop: Time,
    faults: Faults,
) -> Result<AgentId, WorldError> {
    let local = Addr { node: from, port };
    let max = config.atp.max_buffered_bytes;
    let seed =
        world.derive_seed(0x6d73_6762_7974_6573 ^ (u64::from(from.0) << 16) ^ u64::from(port));
    let bytes = MessageBytes::new(seed, max);
    let id = client_id(world, local);
    let client = AtpClientAgent::new(local, server_addr, config, id, app, bytes, faults);
    let c = world.add_agent(from, Proto::Udp, port, Box::new(client))?;
    world.add_flow(FlowSpec {
        name: name.to_string(),
        kind: "atp-endpoint".into(),
        sender: c,
        receiver: server,
        start,
        stop,
    });
    Ok(c)
}
