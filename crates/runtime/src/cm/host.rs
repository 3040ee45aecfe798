//! The process's CM host: one thread with a current-thread tokio runtime and a `LocalSet`
//! that owns core's [`CongestionManager`] (through a [`CmHandle`]), the receiver-side
//! [`CmReceiver`] and the UDP socket of the probe protocol. Applications reach it through a
//! bounded command channel; CM-delegated stream endpoints run their drivers as local tasks on
//! this thread, so their TCP/CM controllers call the one CM synchronously, as core's
//! `cm::tcp` requires.
//!
//! The host is the only consumer of the CM's events: `Grant`s and `RequestExpired`s go to the
//! flow's owner — an application flow's bounded notice channel, or the stream driver that
//! runs the flow (woken through its `Notify`) — and `RateChange`s to the flow's `watch`.

use super::{CmOptions, Command, Notice, RateChange};
use crate::clock::Clock;
use adaptnet_core::Time;
use adaptnet_core::cm::probe::CmPacket;
use adaptnet_core::cm::receiver::CmReceiver;
use adaptnet_core::cm::{CmEvent, CmHandle, CmTransmit, CongestionManager, FlowId, PeerAddr};
use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, mpsc, watch};

/// Largest CM control datagram read.
const MAX_PACKET: usize = 2048;
/// Most probes and responses waiting to be sent; beyond, they are dropped as a congested
/// network would drop them (the protocol tolerates lost probes, papers/003 §2.2.3).
const MAX_OUT: usize = 1024;

/// Where a flow's events go.
pub(crate) enum Route {
    /// An application flow: grants and expiries to its notice channel, rate changes to its
    /// watch.
    App {
        notices: mpsc::Sender<Notice>,
        rates: watch::Sender<Option<RateChange>>,
    },
    /// A TCP/CM stream: its driver is woken to poll the connection again.
    Stream(Arc<Notify>),
}

/// The host's state, shared by its own task and the stream drivers on its thread.
pub(crate) struct HostShared {
    pub(crate) cm: CmHandle,
    pub(crate) clock: Clock,
    /// Shared with the [`super::Cm`] handles: the receiving application's reports
    /// ([`super::Cm::received`]) are counted at once, on its own thread, not queued behind
    /// other commands — a count that reached the receiver CM after the next probe would be
    /// read as a loss by the sender.
    receiver: Arc<Mutex<CmReceiver>>,
    routes: RefCell<HashMap<FlowId, Route>>,
    /// CM control packets to send: (destination host, packet).
    out: RefCell<VecDeque<(PeerAddr, CmPacket)>>,
    /// Wakes the host task (a deadline or the out queue changed).
    pub(crate) wake: Notify,
    /// The port the probe protocol's packets are sent to on every peer host.
    peer_port: u16,
    /// Where each sender host's latest probe came from: its responses go there (a sender
    /// whose CM could not bind the well-known port still hears back).
    probe_sources: RefCell<HashMap<PeerAddr, SocketAddr>>,
}

impl HostShared {
    pub(crate) fn route(&self, flow: FlowId, route: Route) {
        self.routes.borrow_mut().insert(flow, route);
    }

    pub(crate) fn unroute(&self, flow: FlowId) {
        self.routes.borrow_mut().remove(&flow);
    }

    /// Runs the CM's due timers, queues its probes and routes its events. Returns whether a
    /// grant went to the stream driver woken by `own` (it should poll its streams again at
    /// once). Never call it while holding a borrow of the CM.
    pub(crate) fn pump(&self, now: Time, own: Option<&Arc<Notify>>) -> bool {
        let mut events = Vec::new();
        {
            let mut cm = self.cm.borrow_mut();
            if cm.poll_timeout().is_some_and(|t| t <= now) {
                cm.handle_timeout(now);
            }
            while let Some(CmTransmit { to, packet }) = cm.poll_transmit(now) {
                self.queue(to, packet);
            }
            while let Some(ev) = cm.poll_event() {
                events.push(ev);
            }
        }
        let mut own_granted = false;
        let mut declined = Vec::new();
        {
            let routes = self.routes.borrow();
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
                    Some(Route::Stream(kick)) => {
                        if own.is_some_and(|o| Arc::ptr_eq(o, kick)) {
                            own_granted |= matches!(notice, Notice::Grant(_));
                        } else {
                            kick.notify_one();
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

    fn queue(&self, to: PeerAddr, packet: CmPacket) {
        let mut out = self.out.borrow_mut();
        if out.len() < MAX_OUT {
            out.push_back((to, packet));
        }
    }

    fn handle_packet(&self, now: Time, from: SocketAddr, data: &[u8]) {
        let Ok(packet) = CmPacket::parse(data) else {
            return;
        };
        let peer = PeerAddr::from(from.ip());
        match &packet {
            CmPacket::Probe(_) => {
                let mut sources = self.probe_sources.borrow_mut();
                if sources.len() < adaptnet_core::cm::receiver::MAX_PEERS
                    || sources.contains_key(&peer)
                {
                    sources.insert(peer, from);
                }
                drop(sources);
                let mut rx = super::lock(&self.receiver);
                rx.handle_packet(now, peer, &packet);
                while let Some(t) = rx.poll_transmit(now) {
                    self.queue(t.to, t.packet);
                }
            }
            CmPacket::Response(_) => self.cm.borrow_mut().handle_packet(now, peer, &packet),
        }
    }

    fn socket_addr(&self, peer: PeerAddr) -> SocketAddr {
        if let Some(a) = self.probe_sources.borrow().get(&peer) {
            return *a;
        }
        let v6 = Ipv6Addr::from(peer.0);
        let ip = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
        SocketAddr::new(ip, self.peer_port)
    }
}

/// Builds the host's state and runs its task until every handle is gone. Runs on the host
/// thread; `ready` receives the shared state's address once the socket is bound.
pub(crate) async fn run(
    options: CmOptions,
    clock: Clock,
    receiver: Arc<Mutex<CmReceiver>>,
    mut commands: mpsc::Receiver<Command>,
    ready: std::sync::mpsc::SyncSender<std::io::Result<SocketAddr>>,
) {
    let socket = match bind(&options) {
        Ok(s) => s,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let local = match socket.local_addr() {
        Ok(a) => a,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let host = Rc::new(HostShared {
        cm: CmHandle::new(CongestionManager::new(options.config.clone())),
        clock,
        receiver,
        routes: RefCell::new(HashMap::new()),
        out: RefCell::new(VecDeque::new()),
        wake: Notify::new(),
        peer_port: options.peer_port.unwrap_or(local.port()),
        probe_sources: RefCell::new(HashMap::new()),
    });
    let _ = ready.send(Ok(local));
    let mut buf = vec![0u8; MAX_PACKET];
    loop {
        let now = host.clock.now();
        host.pump(now, None);
        flush(&host, &socket).await;
        let deadline = host
            .cm
            .borrow()
            .poll_timeout()
            .map(|t| host.clock.instant_of(t));
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = socket.recv_from(&mut buf) => {
                if let Ok((n, from)) = r {
                    host.handle_packet(host.clock.now(), from, buf.get(..n).unwrap_or_default());
                }
            }
            c = commands.recv() => match c {
                Some(c) => super::handle_command(&host, c),
                None => break,
            },
            () = host.wake.notified() => {}
            () = sleep => {}
        }
    }
}

fn bind(options: &CmOptions) -> std::io::Result<tokio::net::UdpSocket> {
    let socket = std::net::UdpSocket::bind(options.bind)?;
    socket.set_nonblocking(true)?;
    tokio::net::UdpSocket::from_std(socket)
}

async fn flush(host: &HostShared, socket: &tokio::net::UdpSocket) {
    loop {
        let Some((to, packet)) = host.out.borrow_mut().pop_front() else {
            return;
        };
        let mut buf = vec![0u8; packet.buffer_len()];
        let Ok(n) = packet.emit(&mut buf) else {
            continue;
        };
        // A probe or response lost to a full socket buffer is lost as the network would
        // lose it; the protocol recovers (papers/003 §2.2.3).
        let _ = socket
            .send_to(buf.get(..n).unwrap_or_default(), host.socket_addr(to))
            .await;
    }
}
