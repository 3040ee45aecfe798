//! The application's endpoint handle, the same for every message transport.

use super::command::Command;
use super::port::Handles;
use super::{Connection, EndpointOptions, EndpointStats, Transport, TransportOptions};
use crate::driver::{self, Protocol, Timekeeper};
use crate::error::{ConnectError, EndpointClosed};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// An endpoint of a message transport: bound to a UDP socket (ATP) or listening and
/// connecting over kernel TCP (the baselines), driven by one task on the caller's tokio
/// runtime. Clones share it; dropping the last clone (or [`Endpoint::close`]) closes every
/// connection and sends their CLOSEs.
#[derive(Clone, Debug)]
pub struct Endpoint(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    cmd: mpsc::Sender<Command>,
    incoming: tokio::sync::Mutex<mpsc::Receiver<Connection>>,
    local_addr: SocketAddr,
    transport: Transport,
    /// A baseline client's TCP connections per peer; `None` for ATP (one handshake).
    tcp_connections: Option<usize>,
    /// A baseline client's kernel congestion control (`None`: the host's default).
    tcp_congestion: Option<String>,
    driver: Arc<driver::Shared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.driver.request_stop();
    }
}

/// What a transport's driver is built from: the receiving ends of the endpoint's channels
/// and what it needs to make connection handles.
pub(crate) struct Wiring {
    pub(crate) commands: mpsc::Receiver<Command>,
    pub(crate) incoming: mpsc::Sender<Connection>,
    pub(crate) handles: Handles,
}

impl Wiring {
    /// Builds the transport's driver from this wiring (`make` gets the accept queue and the
    /// connection-handle factory) and runs it as the endpoint's task on the current runtime.
    pub(crate) fn start<P: Protocol<Command = Command>>(
        self,
        shutdown_timeout: Duration,
        make: impl FnOnce(mpsc::Sender<Connection>, Handles) -> io::Result<P>,
    ) -> io::Result<()> {
        let Wiring {
            commands,
            incoming,
            handles,
        } = self;
        let shared = handles.driver.clone();
        let clock = handles.clock;
        let proto = make(incoming, handles)?;
        let time = Timekeeper::new(clock);
        tokio::spawn(driver::run(proto, time, commands, shared, shutdown_timeout));
        Ok(())
    }
}

fn runtime_required() -> io::Result<()> {
    tokio::runtime::Handle::try_current()
        .map(|_| ())
        .map_err(|_| io::Error::other("an endpoint must be started inside a tokio runtime"))
}

impl Endpoint {
    /// Binds `addr` — a UDP socket for ATP; a TCP listener for a baseline server; for a
    /// baseline client, the address its TCP connections leave from (port 0: any) — and
    /// starts the endpoint's task on the current tokio runtime.
    pub fn bind(addr: SocketAddr, options: EndpointOptions) -> io::Result<Endpoint> {
        match (&options.transport, options.server) {
            (TransportOptions::Atp(_), _) => {
                Endpoint::from_udp_socket(std::net::UdpSocket::bind(addr)?, options)
            }
            (TransportOptions::Baseline(_), true) => {
                Endpoint::from_tcp_listener(std::net::TcpListener::bind(addr)?, options)
            }
            (TransportOptions::Baseline(_), false) => {
                runtime_required()?;
                crate::naitcp::start(None, addr, options)
            }
        }
    }

    /// An ATP endpoint on an already bound socket (e.g. one made inside another network
    /// namespace); it is switched to non-blocking mode. Call inside a tokio runtime.
    pub fn from_udp_socket(
        socket: std::net::UdpSocket,
        options: EndpointOptions,
    ) -> io::Result<Endpoint> {
        runtime_required()?;
        if !matches!(options.transport, TransportOptions::Atp(_)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a UDP socket carries ATP only",
            ));
        }
        socket.set_nonblocking(true)?;
        crate::atp::start(tokio::net::UdpSocket::from_std(socket)?, options)
    }

    /// A baseline server on an already bound listener (e.g. one made inside another network
    /// namespace). Call inside a tokio runtime.
    pub fn from_tcp_listener(
        listener: std::net::TcpListener,
        options: EndpointOptions,
    ) -> io::Result<Endpoint> {
        runtime_required()?;
        if !matches!(options.transport, TransportOptions::Baseline(_)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a TCP listener carries the baselines only",
            ));
        }
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let addr = listener.local_addr()?;
        crate::naitcp::start(Some(listener), addr, options)
    }

    /// A new endpoint's handle and its driver's wiring.
    pub(crate) fn wire(
        options: &EndpointOptions,
        local_addr: SocketAddr,
        tcp_connections: Option<usize>,
    ) -> (Endpoint, Wiring) {
        let (cmd_tx, cmd_rx) = mpsc::channel(options.command_queue_len.max(1));
        let (in_tx, in_rx) = mpsc::channel(options.accept_queue_len.max(1));
        let shared = driver::Shared::new();
        let handles = Handles::new(cmd_tx.clone(), shared.clone(), options);
        let endpoint = Endpoint(Arc::new(Inner {
            cmd: cmd_tx,
            incoming: tokio::sync::Mutex::new(in_rx),
            local_addr,
            transport: options.transport(),
            tcp_connections,
            tcp_congestion: match &options.transport {
                TransportOptions::Baseline(b) => b.congestion.clone(),
                TransportOptions::Atp(_) => None,
            },
            driver: shared,
        }));
        let wiring = Wiring {
            commands: cmd_rx,
            incoming: in_tx,
            handles,
        };
        (endpoint, wiring)
    }

    /// The bound address (a baseline client: the address given to `bind`).
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local_addr
    }

    /// The transport the endpoint runs.
    pub fn transport(&self) -> Transport {
        self.0.transport
    }

    async fn request<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, EndpointClosed> {
        let (tx, rx) = oneshot::channel();
        self.0
            .cmd
            .send(make(tx))
            .await
            .map_err(|_| EndpointClosed)?;
        rx.await.map_err(|_| EndpointClosed)
    }

    /// Opens a connection to the server at `peer`: ATP's handshake (retransmitted; fails
    /// after the handshake's attempts, about 30 s by default), or the baseline's TCP
    /// connections (one, or one per level for NAI-MTCPk).
    pub async fn connect(&self, peer: SocketAddr) -> Result<Connection, ConnectError> {
        if self.0.driver.stop_requested() {
            return Err(ConnectError::EndpointClosed);
        }
        match self.0.tcp_connections {
            None => {
                self.request(|reply| Command::Connect { peer, reply })
                    .await?
            }
            Some(n) => {
                let from = SocketAddr::new(self.0.local_addr.ip(), 0);
                let streams =
                    crate::naitcp::open_streams(from, peer, n, self.0.tcp_congestion.as_deref())
                        .await?;
                self.request(|reply| Command::Adopt {
                    peer,
                    streams,
                    reply,
                })
                .await?
            }
        }
    }

    /// The next incoming connection; `None` once the endpoint has stopped.
    pub async fn accept(&self) -> Option<Connection> {
        self.0.incoming.lock().await.recv().await
    }

    /// The endpoint's counters.
    pub async fn stats(&self) -> Result<EndpointStats, EndpointClosed> {
        self.request(|reply| Command::Stats { reply }).await
    }

    /// Closes every connection at once (peers are told; live messages end `Abandoned`) and
    /// stops the endpoint; [`Endpoint::wait_idle`] waits for the end.
    pub fn close(&self) {
        self.0.driver.request_stop();
    }

    /// Waits until the endpoint has stopped: closed (or dropped) and every CLOSE sent. Call
    /// it after [`Endpoint::close`] before the runtime stops, or the CLOSEs may never leave.
    pub async fn wait_idle(&self) {
        self.0.driver.wait_done().await;
    }

    /// Whether the endpoint has stopped.
    pub fn is_closed(&self) -> bool {
        self.0.driver.is_done()
    }
}

/// An unspecified local address of `peer`'s family (for clients that bind "anywhere").
pub fn unspecified_for(peer: SocketAddr) -> SocketAddr {
    let ip: IpAddr = if peer.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    SocketAddr::new(ip, 0)
}
