//! The endpoint's task: one loop that waits on (socket readable, the earliest
//! `poll_timeout`, an application command), feeds core, then drains `poll_transmit` to the
//! socket and `poll_event` to the application's channels. No protocol decision is made here.

use super::{
    Command, Connection, ConnectionEvent, ConnectionStats, Control, EndpointOptions, Error,
    InterfaceChoice, Message, MessageHandle,
};
use crate::clock::Clock;
use crate::iface::{InterfaceCounters, send_queue_bytes};
use crate::udp::{Datagram, UdpIo};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{
    ConnEvent, ConnectionId, Endpoint, EndpointEvent, EndpointStats,
};
use adaptnet_core::nai::{MessageId, NaiEvent, Outcome};
use rand::RngExt;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// Batches (`recvmmsg` calls) read per wake-up before the loop attends to timers and
/// commands again.
const RECV_BATCHES: usize = 4;

/// The endpoint's counters and connection count, as of the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointStatsSnapshot {
    /// Core's counters of dropped and statelessly answered datagrams.
    pub core: EndpointStats,
    /// Connections open or connecting.
    pub connections: usize,
    /// The interface whose counters feed the estimator, if any.
    pub interface: Option<String>,
}

struct Pending {
    outcome: oneshot::Sender<Outcome>,
    taken: Option<oneshot::Sender<()>>,
}

/// The driver's side of one connection's channels.
struct Slot {
    messages: mpsc::UnboundedSender<Message>,
    events: mpsc::UnboundedSender<ConnectionEvent>,
    unread: Arc<AtomicU64>,
    estimate: watch::Sender<f64>,
    pending: HashMap<MessageId, Pending>,
    close_waiters: Vec<oneshot::Sender<()>>,
}

pub(super) struct Driver {
    io: UdpIo,
    /// The latest time handed to core (arrival times are kept at or after it).
    last_now: Time,
    options: EndpointOptions,
    clock: Clock,
    endpoint: Endpoint,
    cmd: mpsc::Sender<Command>,
    incoming: mpsc::Sender<Connection>,
    slots: HashMap<ConnectionId, Slot>,
    connecting: HashMap<ConnectionId, (SocketAddr, oneshot::Sender<Result<Connection, Error>>)>,
    counters: Option<InterfaceCounters>,
    counters_tried: bool,
    next_interface_read: Time,
}

impl Driver {
    pub(super) fn new(
        io: UdpIo,
        mut options: EndpointOptions,
        cmd: mpsc::Sender<Command>,
        incoming: mpsc::Sender<Connection>,
    ) -> Driver {
        if options.server && options.core.server.is_none() {
            let key: [u8; 32] = rand::rng().random();
            options.core.server = Some(adaptnet_core::session::token::TokenConfig::new(key));
        }
        if !options.server {
            options.core.server = None;
        }
        let endpoint = Endpoint::new(options.core.clone());
        Driver {
            io,
            last_now: Time::ZERO,
            options,
            clock: Clock::new(),
            endpoint,
            cmd,
            incoming,
            slots: HashMap::new(),
            connecting: HashMap::new(),
            counters: None,
            counters_tried: false,
            next_interface_read: Time::ZERO,
        }
    }

    pub(super) async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        loop {
            let deadline = self.endpoint.poll_timeout();
            let sleep = async {
                match deadline {
                    Some(t) => tokio::time::sleep_until(self.clock.instant_of(t).into()).await,
                    None => std::future::pending().await,
                }
            };
            let stalled = self.io.stalled();
            tokio::select! {
                readable = self.io.readable() => {
                    if readable.is_err() || self.receive().is_err() {
                        break;
                    }
                }
                // The socket took the last batch only in part: send the rest when it can.
                writable = self.io.writable(), if stalled => {
                    if writable.is_err() {
                        break;
                    }
                }
                cmd = commands.recv() => {
                    match cmd {
                        Some(cmd) => self.handle_command(cmd),
                        // Every handle is gone (the endpoint included): stop.
                        None => break,
                    }
                }
                () = sleep => {
                    let now = self.now();
                    self.read_interface(now);
                    self.endpoint.handle_timeout(now);
                }
            }
            // The estimator reacts between ticks to the interface queue (a rate it cannot
            // sustain shows there within milliseconds), so the interface is read after every
            // wake-up, not only at timers: a sender limited by its window rather than its
            // pacing may not see a timer for a whole tick. `read_interface` limits itself to
            // one read per `interface_poll`.
            let now = self.now();
            self.read_interface(now);
            if self.flush().is_err() {
                break;
            }
            self.dispatch_events();
        }
        self.shutdown();
    }

    /// The current time, remembered as the floor for the next arrival time.
    fn now(&mut self) -> Time {
        self.last_now = self.clock.now().max(self.last_now);
        self.last_now
    }

    /// Reads up to [`RECV_BATCHES`] batches of datagrams, each handed to core at its kernel
    /// arrival time.
    fn receive(&mut self) -> std::io::Result<()> {
        for _ in 0..RECV_BATCHES {
            let (endpoint, clock, last_now) = (&mut self.endpoint, &self.clock, &mut self.last_now);
            let n = self.io.recv_batch(|peer, at, data| {
                let now = clock.arrival(at, *last_now);
                *last_now = now;
                endpoint.handle_datagram(now, peer, data);
            });
            match n {
                Ok(0) => break,
                Ok(_) => {}
                // ICMP errors (port unreachable) surface here on Linux: not fatal.
                Err(e) if e.kind() != std::io::ErrorKind::WouldBlock => {
                    tracing::debug!(error = %e, "receive error");
                    break;
                }
                Err(_) => break,
            }
        }
        Ok(())
    }

    /// Closes every connection at once and sends the CLOSEs (best effort: what the socket
    /// does not take at once is lost, as the peer's idle timeout allows).
    fn shutdown(&mut self) {
        let now = self.now();
        let ids: Vec<ConnectionId> = self.slots.keys().copied().collect();
        for id in ids {
            self.endpoint.close(now, id, Duration::ZERO);
        }
        let _ = self.flush();
        self.dispatch_events();
    }

    /// Feeds the estimator the interface counters, at most every `interface_poll`.
    fn read_interface(&mut self, now: Time) {
        if now < self.next_interface_read {
            return;
        }
        self.next_interface_read = now + self.options.interface_poll;
        let Some(counters) = self.counters.as_ref() else {
            return;
        };
        let Ok(total) = counters.total_bytes() else {
            return;
        };
        let queued = send_queue_bytes(self.io.socket().as_raw_fd()).unwrap_or(0);
        let datagram = u64::from(self.options.core.atp.spp.max_datagram_bytes.max(1));
        let packets = u32::try_from(queued / datagram).unwrap_or(u32::MAX);
        self.endpoint.handle_interface(now, total, packets);
    }

    /// Picks the interface once the first peer is known.
    fn choose_interface(&mut self, peer: SocketAddr) {
        if self.counters_tried {
            return;
        }
        self.counters_tried = true;
        self.counters = match &self.options.interface {
            InterfaceChoice::Off => None,
            InterfaceChoice::Named(name) => InterfaceCounters::new(name).ok(),
            InterfaceChoice::Auto => InterfaceCounters::for_peer(peer).ok(),
        };
        if self.counters.is_none() && self.options.interface != InterfaceChoice::Off {
            tracing::warn!("interface counters unavailable; ATP counts its own datagrams");
        }
    }

    /// Sends what core has to send now, in batches, each datagram stamped with the time it
    /// was taken; stops early (the rest waits in [`UdpIo`]) when the socket is full, so the
    /// loop keeps reading acknowledgements instead of blocking on a full buffer.
    fn flush(&mut self) -> std::io::Result<()> {
        let (endpoint, clock, last_now) = (&mut self.endpoint, &self.clock, &mut self.last_now);
        self.io.send_from(|buf| {
            *last_now = clock.now().max(*last_now);
            endpoint.poll_transmit(*last_now, buf).map(|t| Datagram {
                to: t.destination,
                len: t.len,
                coalesce: t.coalesce,
            })
        })
    }

    fn new_connection(&mut self, id: ConnectionId, peer: SocketAddr) -> Connection {
        let (msg_tx, msg_rx) = mpsc::unbounded_channel();
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        let (est_tx, est_rx) = watch::channel(0.0);
        let unread = Arc::new(AtomicU64::new(0));
        self.slots.insert(
            id,
            Slot {
                messages: msg_tx,
                events: ev_tx,
                unread: unread.clone(),
                estimate: est_tx,
                pending: HashMap::new(),
                close_waiters: Vec::new(),
            },
        );
        self.choose_interface(peer);
        Connection {
            id,
            peer,
            cmd: self.cmd.clone(),
            messages: msg_rx,
            events: ev_rx,
            unread,
            estimate: est_rx,
        }
    }

    fn handle_command(&mut self, cmd: Command) {
        let now = self.now();
        match cmd {
            Command::Connect { peer, reply } => {
                let client_id: u64 = rand::rng().random();
                match self.endpoint.connect(now, peer, client_id) {
                    Ok(id) => {
                        self.connecting.insert(id, (peer, reply));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e.into()));
                    }
                }
            }
            Command::Send {
                conn,
                queue,
                data,
                opts,
                reply,
            } => {
                let result = match self.endpoint.connection_mut(conn) {
                    None => Err(Error::Closed),
                    Some(c) => c
                        .sender_mut()
                        .submit_bytes(now, queue, data, opts)
                        .map_err(Error::from),
                };
                let result = result.and_then(|id| {
                    let slot = self.slots.get_mut(&conn).ok_or(Error::Closed)?;
                    let (out_tx, out_rx) = oneshot::channel();
                    let (taken_tx, taken_rx) = oneshot::channel();
                    slot.pending.insert(
                        id,
                        Pending {
                            outcome: out_tx,
                            taken: Some(taken_tx),
                        },
                    );
                    Ok(MessageHandle {
                        id,
                        conn,
                        cmd: self.cmd.clone(),
                        outcome: out_rx,
                        taken: Some(taken_rx),
                    })
                });
                let _ = reply.send(result);
            }
            Command::Control {
                conn,
                id,
                op,
                reply,
            } => {
                let result = match self.endpoint.connection_mut(conn) {
                    None => Err(Error::Closed),
                    Some(c) => {
                        let nai = c.sender_mut().nai_mut();
                        match op {
                            Control::Cancel => nai.cancel(now, id),
                            Control::Defer => nai.defer(now, id),
                            Control::Resume => nai.resume(now, id),
                            Control::Priority(p) => nai.set_priority(now, id, p),
                            Control::Deadline(t) => {
                                nai.set_deadline(now, id, t.map(|t| now.saturating_add(t)))
                            }
                        }
                        .map_err(Error::from)
                    }
                };
                let _ = reply.send(result);
            }
            Command::CreateQueue { conn, reply } => {
                let result = match self.endpoint.connection_mut(conn) {
                    None => Err(Error::Closed),
                    Some(c) => c.sender_mut().nai_mut().create_queue().map_err(Error::from),
                };
                let _ = reply.send(result);
            }
            Command::Notify {
                conn,
                low,
                high,
                reply,
            } => {
                let result = match self.endpoint.connection_mut(conn) {
                    None => Err(Error::Closed),
                    Some(c) => c
                        .sender_mut()
                        .nai_mut()
                        .register_bandwidth_range(low, high)
                        .map_err(Error::from),
                };
                let _ = reply.send(result);
            }
            Command::Close {
                conn,
                linger,
                reply,
            } => match self.slots.get_mut(&conn) {
                Some(slot) => {
                    slot.close_waiters.push(reply);
                    self.endpoint.close(now, conn, linger);
                }
                None => {
                    let _ = reply.send(());
                }
            },
            Command::ConnStats { conn, reply } => {
                let result = self
                    .endpoint
                    .connection(conn)
                    .map(|c| {
                        let tx = c.sender();
                        ConnectionStats {
                            spp: *tx.stats(),
                            srtt: tx.spp().rtt().srtt(),
                            pacing_bytes_per_s: tx.pacing_rate_bytes_per_s(),
                            packet_pairs: tx.packet_pairs(),
                            malformed: c.malformed(),
                        }
                    })
                    .ok_or(Error::Closed);
                let _ = reply.send(result);
            }
            Command::Stats { reply } => {
                let _ = reply.send(EndpointStatsSnapshot {
                    core: self.endpoint.stats().clone(),
                    connections: self.endpoint.connection_count(),
                    interface: self.counters.as_ref().map(|c| c.name().to_owned()),
                });
            }
        }
    }

    fn dispatch_events(&mut self) {
        let now = self.now();
        while let Some(ev) = self.endpoint.poll_event() {
            match ev {
                EndpointEvent::Connected(id) => {
                    if let Some((peer, reply)) = self.connecting.remove(&id) {
                        let conn = self.new_connection(id, peer);
                        if reply.send(Ok(conn)).is_err() {
                            // The caller gave up waiting: nobody will use the connection.
                            self.endpoint.close(now, id, Duration::ZERO);
                        }
                    }
                }
                EndpointEvent::ConnectFailed(id) => {
                    if let Some((peer, reply)) = self.connecting.remove(&id) {
                        let _ = reply.send(Err(Error::ConnectFailed(peer)));
                    }
                }
                EndpointEvent::Incoming(id, peer) => {
                    let conn = self.new_connection(id, peer);
                    if self.incoming.try_send(conn).is_err() {
                        // Accept queue full (or nobody accepts): refuse by closing.
                        self.endpoint.close(now, id, Duration::ZERO);
                    }
                }
                EndpointEvent::Connection(id, ev) => self.connection_event(now, id, ev),
            }
        }
        for (id, slot) in &self.slots {
            if let Some(c) = self.endpoint.connection(*id) {
                let rate = c.sender().planning_rate_bytes_per_s();
                slot.estimate.send_if_modified(|r| {
                    let changed = *r != rate;
                    *r = rate;
                    changed
                });
            }
        }
    }

    fn connection_event(&mut self, now: Time, id: ConnectionId, ev: ConnEvent) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        match ev {
            ConnEvent::Nai(NaiEvent::Outcome { id: msg, outcome }) => {
                if let Some(p) = slot.pending.remove(&msg) {
                    let _ = p.outcome.send(outcome);
                }
            }
            ConnEvent::Nai(NaiEvent::Taken { id: msg }) => {
                if let Some(tx) = slot.pending.get_mut(&msg).and_then(|p| p.taken.take()) {
                    let _ = tx.send(());
                }
            }
            ConnEvent::Nai(NaiEvent::TimerExpired {
                id: msg,
                early,
                bytes_remaining,
            }) => {
                let _ = slot.events.send(ConnectionEvent::TimerExpired {
                    id: msg,
                    early,
                    bytes_remaining,
                });
            }
            ConnEvent::Nai(NaiEvent::Bandwidth {
                id: n,
                available_bytes_per_s,
            }) => {
                let _ = slot.events.send(ConnectionEvent::Bandwidth {
                    id: n,
                    available_bytes_per_s,
                });
            }
            ConnEvent::Delivered(d) => {
                let data = d.data.unwrap_or_default();
                let len = data.len() as u64;
                let unread = slot.unread.fetch_add(len, Ordering::Relaxed) + len;
                let _ = slot.messages.send(Message {
                    id: d.id,
                    priority: d.priority,
                    data,
                });
                if unread > self.options.max_unread_bytes {
                    tracing::warn!(?id, unread, "application does not read: closing");
                    self.endpoint.close(now, id, Duration::ZERO);
                }
            }
            ConnEvent::Discarded(msg) => {
                let _ = slot.events.send(ConnectionEvent::Discarded(msg));
            }
            ConnEvent::Closed(reason) => {
                let _ = slot.events.send(ConnectionEvent::Closed(reason));
                if let Some(slot) = self.slots.remove(&id) {
                    for w in slot.close_waiters {
                        let _ = w.send(());
                    }
                    // Outcomes were all reported before Closed; any left is abandoned.
                    for (_, p) in slot.pending {
                        let _ = p.outcome.send(Outcome::Abandoned);
                    }
                }
            }
        }
    }
}
