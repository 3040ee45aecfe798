//! The CM host: core's [`CongestionManager`] (through a [`CmHandle`], `Send`), the
//! receiver-side [`CmReceiver`] and the UDP socket of the probe protocol, run as a
//! [`Protocol`] on the crate's one driver loop — a task on the caller's tokio runtime that
//! stops when the last [`Cm`](super::Cm) handle (application flows and CM-delegated stream
//! endpoints hold one) is gone. CM-delegated stream endpoints call the CM synchronously from
//! their own tasks through the shared handle, as core's `cm::tcp` requires.
//!
//! Whoever pumps the CM ([`HostShared::pump`]: this driver at the CM's deadlines, a stream
//! driver after servicing its connections) routes its events: `Grant`s and `RequestExpired`s
//! to the flow's owner — an application flow's bounded notice channel, or the stream
//! endpoint that runs the flow (woken) — and `RateChange`s to the flow's `watch`.

use super::{Command, Notice, RateChange};
use crate::clock::Clock;
use crate::driver::{self, Protocol, Timekeeper};
use crate::error::ConnectionError;
use adaptnet_core::Time;
use adaptnet_core::cm::probe::CmPacket;
use adaptnet_core::cm::receiver::CmReceiver;
use adaptnet_core::cm::{CmEvent, CmHandle, CmTransmit, FlowId, PeerAddr};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::{mpsc, watch};

/// Largest CM control datagram read.
const MAX_PACKET: usize = 2048;
/// Most probes and responses waiting to be sent; beyond, they are dropped as a congested
/// network would drop them (the protocol tolerates lost probes, papers/003 §2.2.3).
const MAX_OUT: usize = 1024;
/// Datagrams read per wake-up before the loop attends to timers and commands again.
const RECV_PER_WAKE: usize = 64;

/// Where a flow's events go.
pub(crate) enum Route {
    /// An application flow: grants and expiries to its notice channel, rate changes to its
    /// watch.
    App {
        notices: mpsc::Sender<Notice>,
        rates: watch::Sender<Option<RateChange>>,
    },
    /// A TCP/CM stream: its endpoint's driver is woken to poll its connections again.
    Stream(Arc<driver::Shared>),
}

/// Plain maps and queues: a panic while one was held leaves them usable.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The host's state, shared by its driver, the [`super::Cm`] handles and the stream drivers
/// that run CM flows.
pub(crate) struct HostShared {
    pub(crate) cm: CmHandle,
    pub(crate) clock: Clock,
    /// The receiving application's reports ([`super::Cm::received`]) are counted at once, on
    /// its own task, not queued behind commands — a count that reached the receiver CM after
    /// the next probe would be read as a loss by the sender.
    pub(crate) receiver: Mutex<CmReceiver>,
    routes: Mutex<HashMap<FlowId, Route>>,
    /// CM control packets to send: (destination host, packet).
    out: Mutex<VecDeque<(PeerAddr, CmPacket)>>,
    /// The host driver's wake-ups (a deadline or the out queue changed).
    pub(crate) driver: Arc<driver::Shared>,
    /// The port the probe protocol's packets are sent to on every peer host.
    peer_port: u16,
    /// Where each sender host's latest probe came from: its responses go there (a sender
    /// whose CM could not bind the well-known port still hears back).
    probe_sources: Mutex<HashMap<PeerAddr, SocketAddr>>,
}

impl std::fmt::Debug for HostShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostShared")
            .field("peer_port", &self.peer_port)
            .finish_non_exhaustive()
    }
}

impl HostShared {
    pub(crate) fn new(
        cm: CmHandle,
        clock: Clock,
        driver: Arc<driver::Shared>,
        peer_port: u16,
    ) -> HostShared {
        HostShared {
            cm,
            clock,
            receiver: Mutex::new(CmReceiver::new()),
            routes: Mutex::new(HashMap::new()),
            out: Mutex::new(VecDeque::new()),
            driver,
            peer_port,
            probe_sources: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn route(&self, flow: FlowId, route: Route) {
        lock(&self.routes).insert(flow, route);
    }

    pub(crate) fn unroute(&self, flow: FlowId) {
        lock(&self.routes).remove(&flow);
    }

    /// Runs the CM's due timers, queues its probes and routes its events. Returns whether a
    /// grant went to the stream endpoint whose driver is `own` (it should poll its
    /// connections again at once). Never call it while holding a borrow of the CM.
    pub(crate) fn pump(&self, now: Time, own: Option<&Arc<driver::Shared>>) -> bool {
        let mut events = Vec::new();
        let mut queued = false;
        {
            let mut cm = self.cm.borrow_mut();
            if cm.poll_timeout().is_some_and(|t| t <= now) {
                cm.handle_timeout(now);
            }
            while let Some(CmTransmit { to, packet }) = cm.poll_transmit(now) {
                queued |= self.queue(to, packet);
            }
            while let Some(ev) = cm.poll_event() {
                events.push(ev);
            }
        }
        if queued && !own.is_some_and(|o| Arc::ptr_eq(o, &self.driver)) {
            self.driver.wake();
        }
        let mut own_granted = false;
        let mut declined = Vec::new();
        {
            let routes = lock(&self.routes);
            for ev in events {
                let (flow, notice) = match ev {
                    CmEvent::Grant { flow, bytes } => (flow, Notice::Grant(bytes)),
                    CmEvent::RequestExpired { flow, bytes } => {
                        (flow, Notice::RequestExpired(bytes))
                    }
                    CmEvent::RateChange {
                        flow,
                        rate_bytes_per_s,
                        srtt,
                        rttvar,
                    } => {
                        if let Some(Route::App { rates, .. }) = routes.get(&flow) {
                            rates.send_replace(Some(RateChange {
                                rate_bytes_per_s,
                                srtt,
                                rttvar,
                            }));
                        }
                        continue;
                    }
                };
                match routes.get(&flow) {
                    Some(Route::App { notices, .. }) => {
                        // A full notice queue: the application is slower than its grants. The
                        // grant goes back to the macroflow (RFC 3124 §3.3 cm_notify(0)) and its
                        // bytes back into the flow's request, to be granted again later.
                        if let (Err(_), Notice::Grant(bytes)) = (notices.try_send(notice), notice) {
                            declined.push((flow, bytes));
                        }
                    }
                    Some(Route::Stream(driver)) => {
                        if own.is_some_and(|o| Arc::ptr_eq(o, driver)) {
                            own_granted |= matches!(notice, Notice::Grant(_));
                        } else {
                            driver.wake();
                        }
                    }
                    None => {}
                }
            }
        }
        if !declined.is_empty() {
            let mut cm = self.cm.borrow_mut();
            for (flow, bytes) in declined {
                let _ = cm.notify(now, flow, 0);
                let _ = cm.request(now, flow, bytes);
            }
        }
        own_granted
    }

    /// Queues a control packet; returns whether it was queued (not dropped at the bound).
    fn queue(&self, to: PeerAddr, packet: CmPacket) -> bool {
        let mut out = lock(&self.out);
        if out.len() < MAX_OUT {
            out.push_back((to, packet));
            return true;
        }
        false
    }

    fn handle_packet(&self, now: Time, from: SocketAddr, data: &[u8]) {
        let Ok(packet) = CmPacket::parse(data) else {
            return;
        };
        let peer = PeerAddr::from(from.ip());
        match &packet {
            CmPacket::Probe(_) => {
                {
                    let mut sources = lock(&self.probe_sources);
                    if sources.len() < adaptnet_core::cm::receiver::MAX_PEERS
                        || sources.contains_key(&peer)
                    {
                        sources.insert(peer, from);
                    }
                }
                let mut rx = lock(&self.receiver);
                rx.handle_packet(now, peer, &packet);
                while let Some(t) = rx.poll_transmit(now) {
                    self.queue(t.to, t.packet);
                }
            }
            CmPacket::Response(_) => self.cm.borrow_mut().handle_packet(now, peer, &packet),
        }
    }

    fn socket_addr(&self, peer: PeerAddr) -> SocketAddr {
        if let Some(a) = lock(&self.probe_sources).get(&peer) {
            return *a;
        }
        let v6 = Ipv6Addr::from(peer.0);
        let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
        SocketAddr::new(ip, self.peer_port)
    }
}

/// The CM host on the driver loop: the probe socket is its I/O, the application flows'
/// calls its commands, the CM's deadlines its timers.
pub(crate) struct CmDriver {
    pub(crate) host: Arc<HostShared>,
    pub(crate) socket: tokio::net::UdpSocket,
    buf: Vec<u8>,
}

impl CmDriver {
    pub(crate) fn new(host: Arc<HostShared>, socket: tokio::net::UdpSocket) -> CmDriver {
        CmDriver {
            host,
            socket,
            buf: vec![0; MAX_PACKET],
        }
    }
}

impl Protocol for CmDriver {
    type Command = Command;

    fn io_ready(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_ {
        self.socket.readable()
    }

    fn handle_io(&mut self, time: &mut Timekeeper) -> io::Result<()> {
        for _ in 0..RECV_PER_WAKE {
            match self.socket.try_recv_from(&mut self.buf) {
                Ok((n, from)) => {
                    let now = time.now();
                    let data = self.buf.get(..n).unwrap_or_default();
                    self.host.handle_packet(now, from, data);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // An ICMP error for an earlier probe: the probe protocol tolerates loss.
                Err(e) => {
                    tracing::debug!(error = %e, "cm: receive error");
                    break;
                }
            }
        }
        Ok(())
    }

    fn handle_command(&mut self, now: Time, command: Command) {
        super::handle_command(&self.host, now, command);
    }

    fn handle_dropped(&mut self, _now: Time, _id: u64) {
        // Flows close through `Command::Close`; the CM host has no connection handles.
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.host.cm.borrow().poll_timeout()
    }

    fn handle_timeout(&mut self, now: Time) {
        self.host.pump(now, Some(&self.host.driver));
    }

    fn flush(&mut self, _time: &mut Timekeeper) -> io::Result<()> {
        loop {
            let Some((to, packet)) = lock(&self.host.out).pop_front() else {
                return Ok(());
            };
            let mut buf = vec![0u8; packet.buffer_len()];
            let Ok(n) = packet.emit(&mut buf) else {
                continue;
            };
            // A probe or response lost to a full socket buffer is lost as the network would
            // lose it; the protocol recovers (papers/003 §2.2.3).
            let _ = self
                .socket
                .try_send_to(buf.get(..n).unwrap_or_default(), self.host.socket_addr(to));
        }
    }

    fn dispatch(&mut self, now: Time) {
        self.host.pump(now, Some(&self.host.driver));
    }

    fn close_all(&mut self, _now: Time) {}

    fn is_idle(&self) -> bool {
        lock(&self.host.out).is_empty()
    }

    fn finish(&mut self, _why: ConnectionError) {
        // Application flows learn the end from their closed notice channels.
        lock(&self.host.routes).retain(|_, r| matches!(r, Route::Stream(_)));
    }
}
