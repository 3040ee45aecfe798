//! The ATP endpoint's [`Protocol`]: core's [`Endpoint`] over one UDP socket. Datagrams in
//! (a few `recvmmsg` batches per wake-up, each at its kernel arrival time), datagrams out
//! (in batches, stopping where the socket is full), interface counters to the estimator,
//! and core's events to each connection's [`Port`]. No protocol decision is made here.

use super::state::{SharedState, State};
use super::{AtpEndpointStats, AtpOptions, InterfaceChoice, app};
use crate::driver::{self, Protocol, Timekeeper};
use crate::error::{ConnectError, ConnectionError};
use crate::iface::{InterfaceCounters, send_queue_bytes};
use crate::message::command::Command;
use crate::message::port::{Handles, Port};
use crate::message::{Connection, EndpointOptions, EndpointStats, TransportOptions};
use crate::udp::{Datagram, UdpIo, UdpIoConfig};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{ConnectionId, Endpoint, EndpointError, EndpointEvent};
use rand::RngExt;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Batches (`recvmmsg` calls) read per wake-up before the loop attends to timers and
/// commands again.
const RECV_BATCHES: usize = 4;
/// Datagrams sent per wake-up before the loop attends to commands, input and timers again
/// (a fast path and a fast sender would otherwise keep one flush going for tens of
/// milliseconds, and an urgent message would wait for it).
const FLUSH_DATAGRAMS: usize = 256;

type ConnectReply = oneshot::Sender<Result<Connection, ConnectError>>;

pub(super) struct AtpDriver {
    io: UdpIo,
    /// Core's endpoint and the ports, shared with the connections' send path.
    shared: Arc<SharedState>,
    atp: AtpOptions,
    incoming: mpsc::Sender<Connection>,
    handles: Handles,
    connecting: HashMap<u64, (SocketAddr, ConnectReply)>,
    counters: Option<InterfaceCounters>,
    counters_tried: bool,
    next_interface_read: Time,
    /// The endpoint is closing: incoming connections are refused.
    stopping: bool,
    /// The last flush stopped at its budget: core may have more to send now.
    more_output: bool,
    refused: u64,
}

impl AtpDriver {
    pub(super) fn new(
        socket: tokio::net::UdpSocket,
        options: EndpointOptions,
        incoming: mpsc::Sender<Connection>,
        mut handles: Handles,
    ) -> io::Result<AtpDriver> {
        let TransportOptions::Atp(mut atp) = options.transport else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "ATP options expected",
            ));
        };
        // Receiver flow control: the window is at most the bytes the inbox holds unread, so
        // a message core reports delivered always fits it. (Its bound in messages is kept by
        // staging: see `State::connection_event`.)
        let window_bytes = atp
            .core
            .atp
            .spp
            .receive_window_bytes
            .unwrap_or(adaptnet_core::atp::endpoint::DEFAULT_RECEIVE_WINDOW_BYTES)
            .min(options.unread_bytes_max)
            .max(1);
        atp.core.atp.spp.receive_window_bytes = Some(window_bytes);
        atp.core.server = options.server.then(|| {
            let key: [u8; 32] = rand::rng().random();
            adaptnet_core::session::token::TokenConfig::new(key)
        });
        // GSO for the DATA core marks coalescable (never for its probes: see `udp`), and
        // on loopback receive GRO, which keeps every probe's own timestamp there.
        let mut io = UdpIo::new(
            socket,
            UdpIoConfig {
                buffer_bytes: atp.socket_buffer_bytes,
                gso: true,
                max_datagram_bytes: usize::from(atp.core.atp.spp.max_datagram_bytes)
                    .max(crate::udp::MAX_DATAGRAM_BYTES),
            },
        )?;
        io.gro_on_loopback();
        let shared = Arc::new(SharedState::new(
            Endpoint::new(atp.core.clone()),
            window_bytes,
            handles.clock,
            handles.driver.clone(),
        ));
        // Every connection's handles send straight into the shared state.
        handles.direct = Some(shared.clone());
        Ok(AtpDriver {
            io,
            shared,
            atp,
            incoming,
            handles,
            connecting: HashMap::new(),
            counters: None,
            counters_tried: false,
            next_interface_read: Time::ZERO,
            stopping: false,
            more_output: false,
            refused: 0,
        })
    }

    /// Feeds the estimator the interface counters, at most every `interface_poll`. Called
    /// after every wake-up, not only at timers: the estimator reacts between ticks to the
    /// interface queue (a rate it cannot sustain shows there within milliseconds), and a
    /// sender limited by its window rather than its pacing may not see a timer for a tick.
    fn read_interface(&mut self, now: Time) {
        if now < self.next_interface_read {
            return;
        }
        self.next_interface_read = now + self.atp.interface_poll;
        let Some(counters) = self.counters.as_ref() else {
            return;
        };
        let Ok(total) = counters.total_bytes() else {
            return;
        };
        let queued = send_queue_bytes(self.io.socket().as_raw_fd()).unwrap_or(0);
        let datagram = u64::from(self.atp.core.atp.spp.max_datagram_bytes.max(1));
        let packets = u32::try_from(queued / datagram).unwrap_or(u32::MAX);
        let mut state = self.shared.lock();
        let now = state.at(now);
        state.endpoint.handle_interface(now, total, packets);
    }

    /// A new connection's port (kept in `state`) and handle.
    fn open(&mut self, state: &mut State, id: ConnectionId, peer: SocketAddr) -> Connection {
        let (port, conn) = self.handles.open(id.0, peer);
        state.ports.insert(id.0, port);
        self.choose_interface(peer);
        conn
    }

    /// Picks the interface once the first peer is known.
    fn choose_interface(&mut self, peer: SocketAddr) {
        if self.counters_tried {
            return;
        }
        self.counters_tried = true;
        self.counters = match &self.atp.interface {
            InterfaceChoice::Off => None,
            InterfaceChoice::Named(name) => InterfaceCounters::new(name).ok(),
            InterfaceChoice::Auto => InterfaceCounters::for_peer(peer).ok(),
        };
        if self.counters.is_none() && self.atp.interface != InterfaceChoice::Off {
            tracing::warn!("interface counters unavailable; ATP counts its own datagrams");
        }
    }
}

impl Protocol for AtpDriver {
    type Command = Command;

    fn io_ready(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_ {
        let (more, io) = (self.more_output, &self.io);
        async move { if more { Ok(()) } else { io.ready().await } }
    }

    fn handle_io(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let shared = &self.shared;
        // Locked per datagram, not across the `recvmmsg` calls: a send waits at most one
        // datagram's processing.
        driver::udp::receive(&mut self.io, time, RECV_BATCHES, |now, peer, data| {
            let mut state = shared.lock();
            let now = state.at(now);
            state.endpoint.handle_datagram(now, peer, data);
        });
        Ok(())
    }

    fn handle_command(&mut self, now: Time, command: Command) {
        let mut state = self.shared.lock();
        let now = state.at(now);
        match command {
            Command::Connect { peer, reply } => {
                let client_id: u64 = rand::rng().random();
                match state.endpoint.connect(now, peer, client_id) {
                    Ok(id) => {
                        self.connecting.insert(id.0, (peer, reply));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(match e {
                            EndpointError::AlreadyConnected(a) => ConnectError::AlreadyConnected(a),
                            EndpointError::TooManyConnections(n) => {
                                ConnectError::TooManyConnections(n)
                            }
                        }));
                    }
                }
            }
            Command::Adopt { peer, reply, .. } => {
                let source = io::Error::new(io::ErrorKind::Unsupported, "ATP opens no TCP");
                let _ = reply.send(Err(ConnectError::Io { peer, source }));
            }
            Command::Stats { reply } => {
                let _ = reply.send(EndpointStats {
                    connections: state.endpoint.connection_count(),
                    refused: self.refused,
                    atp: Some(AtpEndpointStats {
                        core: state.endpoint.stats().clone(),
                        interface: self.counters.as_ref().map(|c| c.name().to_owned()),
                    }),
                });
            }
            Command::Conn { id, op } => state.connection_op(now, id, op),
        }
    }

    fn handle_dropped(&mut self, now: Time, id: u64) {
        let mut state = self.shared.lock();
        let now = state.at(now);
        state.close(now, id, ConnectionError::LocallyClosed, Duration::ZERO);
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.shared.lock().endpoint.poll_timeout()
    }

    fn handle_timeout(&mut self, now: Time) {
        let mut state = self.shared.lock();
        let now = state.at(now);
        state.endpoint.handle_timeout(now);
    }

    fn flush(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        let now = time.now();
        self.read_interface(now);
        let shared = &self.shared;
        // Locked per datagram, not across the `sendmsg` calls.
        self.more_output = driver::udp::flush(&mut self.io, time, FLUSH_DATAGRAMS, |now, buf| {
            let mut state = shared.lock();
            let now = state.at(now);
            state.endpoint.poll_transmit(now, buf).map(|t| Datagram {
                to: t.destination,
                len: t.len,
                coalesce: t.coalesce,
            })
        })?;
        Ok(())
    }

    fn dispatch(&mut self, now: Time) {
        let shared = self.shared.clone();
        let mut guard = shared.lock();
        let state = &mut *guard;
        let now = state.at(now);
        state.return_window();
        while let Some(ev) = state.endpoint.poll_event() {
            match ev {
                EndpointEvent::Connected(id) => {
                    if let Some((peer, reply)) = self.connecting.remove(&id.0) {
                        let conn = self.open(state, id, peer);
                        // A caller that gave up drops `conn`, whose drop closes it.
                        let _ = reply.send(Ok(conn));
                    }
                }
                EndpointEvent::ConnectFailed(id) => {
                    if let Some((peer, reply)) = self.connecting.remove(&id.0) {
                        let e = if self.stopping {
                            ConnectError::EndpointClosed
                        } else {
                            ConnectError::HandshakeFailed(peer)
                        };
                        let _ = reply.send(Err(e));
                    }
                }
                EndpointEvent::Incoming(id, peer) => {
                    let conn = self.open(state, id, peer);
                    if self.stopping || self.incoming.try_send(conn).is_err() {
                        // Accept queue full, nobody accepts, or closing: refuse by closing.
                        self.refused += 1;
                        state.close(now, id.0, ConnectionError::LocallyClosed, Duration::ZERO);
                    }
                }
                EndpointEvent::Connection(id, ev) => state.connection_event(now, id, ev),
            }
        }
        for (id, port) in &state.ports {
            if let Some(c) = state.endpoint.connection(ConnectionId(*id)) {
                port.set_estimate(app::planning_rate(c));
            }
        }
    }

    fn close_all(&mut self, now: Time) {
        self.stopping = true;
        let mut state = self.shared.lock();
        let now = state.at(now);
        let ids: Vec<u64> = state
            .ports
            .keys()
            .chain(self.connecting.keys())
            .copied()
            .collect();
        for id in ids {
            if let Some(port) = state.ports.get_mut(&id) {
                port.close_locally(ConnectionError::EndpointClosed);
            }
            state.endpoint.close(now, ConnectionId(id), Duration::ZERO);
        }
    }

    fn is_idle(&self) -> bool {
        self.shared.lock().endpoint.connection_count() == 0 && !self.io.stalled()
    }

    fn finish(&mut self, why: ConnectionError) {
        let ports: Vec<Port> = self.shared.lock().ports.drain().map(|(_, p)| p).collect();
        for mut port in ports {
            port.end(why.clone());
        }
        for (_, (_, reply)) in self.connecting.drain() {
            let _ = reply.send(Err(ConnectError::EndpointClosed));
        }
    }
}
