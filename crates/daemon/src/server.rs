//! The daemon's I/O on the caller's tokio runtime: the Unix-domain socket and one task per
//! connection, and one driver task for the timers, the probe protocol's UDP socket, the
//! status-message socket and the estimator's counter reads.
//!
//! The [`Engine`] sits behind one mutex that is held for a bounded batch of work and never
//! across an `.await`. A connection task reads frames, serves up to
//! `limits.max_requests_per_batch` of them under one lock, and writes the replies together
//! with any events queued for it (a grant caused by a request leaves in the same write as the
//! request's reply). Events reach a connection through its bounded queue, filled with
//! `try_send` by whoever holds the engine: a client that does not read blocks only its own
//! task, and loses its own events.

use crate::config::{ConfigError, DaemonConfig};
use crate::engine::{Caller, Engine, error};
use crate::estimator::read_counters;
use adaptnet_core::Time;
use adaptnet_core::cm::PeerAddr;
use adaptnet_core::cm::probe::{self, CmPacket};
use adaptnet_core::daemon::{ErrorCode, FrameDecoder, FrameError, encode_frame};
use adaptnet_core::env::StatusVerifier;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UdpSocket, UnixListener, UnixStream};
use tokio::sync::{Notify, mpsc, watch};
use tokio::task::JoinHandle;

/// Bytes read from a client socket at a time.
const READ_CHUNK: usize = 16 * 1024;
/// Largest write assembled from queued events at once.
const MAX_WRITE: usize = 64 * 1024;
/// Largest UDP datagram read.
const MAX_DATAGRAM: usize = 2048;

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Another daemon answers on the socket path.
    #[error("a daemon is already listening on {0}")]
    AlreadyRunning(PathBuf),
    /// A socket could not be set up.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path or address.
        path: String,
        /// Why it failed.
        source: io::Error,
    },
}

fn io_err(
    what: &'static str,
    path: impl std::fmt::Display,
) -> impl FnOnce(io::Error) -> DaemonError {
    let path = path.to_string();
    move |source| DaemonError::Io { what, path, source }
}

pub(crate) struct Shared {
    engine: Mutex<Engine>,
    /// Wakes the driver: a deadline or the outgoing packet queue may have changed.
    kick: Notify,
    start: Instant,
    /// Set when the daemon stops: connection tasks end (their clients see the socket close).
    shutdown: watch::Sender<bool>,
}

impl Shared {
    fn now(&self) -> Time {
        Time::from_nanos(u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn lock(&self) -> MutexGuard<'_, Engine> {
        // A panic while holding the lock would be a bug; keep serving with the state as is.
        self.engine.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A running daemon: its socket path and tasks. Dropping it (or [`RunningDaemon::shutdown`])
/// stops the tasks and removes the socket file.
pub struct RunningDaemon {
    path: PathBuf,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    probe_addr: Option<SocketAddr>,
    status_addr: Option<SocketAddr>,
}

impl RunningDaemon {
    /// The socket path.
    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    /// The probe protocol's bound address, if enabled.
    pub fn probe_addr(&self) -> Option<SocketAddr> {
        self.probe_addr
    }

    /// The status-message socket's bound address, if enabled.
    pub fn status_addr(&self) -> Option<SocketAddr> {
        self.status_addr
    }

    /// Connected clients.
    pub fn client_count(&self) -> usize {
        self.shared.lock().client_count()
    }

    /// Open flows of all clients.
    pub fn flow_count(&self) -> usize {
        self.shared.lock().flow_count()
    }

    /// Waits until the daemon's tasks end (they end only when aborted).
    pub async fn wait(mut self) {
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
    }

    /// Stops the daemon and removes its socket file.
    pub fn shutdown(self) {
        drop(self);
    }
}

impl Drop for RunningDaemon {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.shared.shutdown.send_replace(true);
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the daemon's sockets and starts its tasks on the current tokio runtime.
pub async fn start(config: DaemonConfig) -> Result<RunningDaemon, DaemonError> {
    let path = config.daemon.socket.clone();
    let mode = config.socket_mode()?;
    let listener = bind_socket(&path, mode, config.daemon.socket_gid)?;
    let probe = match config.cm.probe_bind {
        Some(addr) => Some(
            UdpSocket::bind(addr)
                .await
                .map_err(io_err("binding the probe socket", addr))?,
        ),
        None => None,
    };
    let probe_addr = probe.as_ref().and_then(|s| s.local_addr().ok());
    let status = match config.env.status_bind {
        Some(addr) => Some(
            UdpSocket::bind(addr)
                .await
                .map_err(io_err("binding the status socket", addr))?,
        ),
        None => None,
    };
    let status_addr = status.as_ref().and_then(|s| s.local_addr().ok());
    let mut verifier = StatusVerifier::new();
    for (addr, key_id, key) in config.status_peers()? {
        verifier
            .add_peer(addr, key_id, key)
            .map_err(|e| ConfigError::Invalid {
                field: "env.peers",
                message: e.to_string(),
            })?;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let shared = Arc::new(Shared {
        engine: Mutex::new(Engine::new(config, uid)),
        kick: Notify::new(),
        start: Instant::now(),
        shutdown: watch::channel(false).0,
    });
    let tasks = vec![
        tokio::spawn(accept_loop(shared.clone(), listener)),
        tokio::spawn(drive(shared.clone(), probe, status, verifier)),
    ];
    Ok(RunningDaemon {
        path,
        shared,
        tasks,
        probe_addr,
        status_addr,
    })
}

/// Creates the socket file with `mode`, replacing a stale one (no daemon answering).
fn bind_socket(path: &Path, mode: u32, gid: Option<u32>) -> Result<UnixListener, DaemonError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io_err("creating", dir.display()))?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(DaemonError::AlreadyRunning(path.to_owned()));
        }
        std::fs::remove_file(path).map_err(io_err("removing stale socket", path.display()))?;
    }
    let listener = UnixListener::bind(path).map_err(io_err("binding", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io_err("setting permissions of", path.display()))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid))
            .map_err(io_err("changing the group of", path.display()))?;
    }
    Ok(listener)
}

async fn accept_loop(shared: Arc<Shared>, listener: UnixListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(connection(shared.clone(), stream));
            }
            Err(e) => {
                // EMFILE and the like: wait a little rather than spin.
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn connection(shared: Arc<Shared>, stream: UnixStream) {
    let caller = match stream.peer_cred() {
        Ok(c) => Caller {
            uid: c.uid(),
            gid: c.gid(),
            pid: c.pid().unwrap_or(0),
        },
        Err(e) => {
            tracing::debug!("peer credentials: {e}");
            return;
        }
    };
    let capacity = shared.lock().config().limits.max_queued_events;
    let batch = shared.lock().config().limits.max_requests_per_batch;
    let (tx, mut events) = mpsc::channel::<Vec<u8>>(capacity);
    let (mut rd, mut wr) = stream.into_split();
    let Some(id) = shared.lock().connect(caller, tx) else {
        let mut out = Vec::new();
        let _ = encode_frame(
            0,
            &error(ErrorCode::LimitExceeded, "too many clients"),
            &mut out,
        );
        let _ = wr.write_all(&out).await;
        return;
    };
    let mut stop = shared.shutdown.subscribe();
    let mut dec = FrameDecoder::new();
    let mut buf = vec![0u8; READ_CHUNK];
    let mut out: Vec<u8> = Vec::with_capacity(4096);
    'conn: loop {
        tokio::select! {
            biased;
            _ = stop.changed() => break 'conn,
            r = rd.read(&mut buf) => {
                let n = match r {
                    Ok(0) | Err(_) => break 'conn,
                    Ok(n) => n,
                };
                dec.push(buf.get(..n).unwrap_or_default());
                loop {
                    let more = {
                        let mut engine = shared.lock();
                        let now = shared.now();
                        let mut served = 0;
                        while served < batch {
                            let Some(frame) = dec.next_frame() else { break };
                            served += 1;
                            let (req_id, reply) = match frame {
                                Ok((req_id, msg)) if msg.is_request() => {
                                    (req_id, engine.handle(now, id, msg))
                                }
                                Ok((req_id, msg)) => {
                                    engine.stats_mut().errors += 1;
                                    (req_id, error(ErrorCode::NotAllowed,
                                        format!("kind {:#04x} is not a request", msg.kind())))
                                }
                                Err(FrameError::TooLarge { len, max }) => {
                                    engine.stats_mut().errors += 1;
                                    (0, error(ErrorCode::TooLarge,
                                        format!("frame of {len} bytes; at most {max}")))
                                }
                                Err(FrameError::Malformed { req_id, error: e }) => {
                                    engine.stats_mut().errors += 1;
                                    let code = match e {
                                        adaptnet_core::wire::WireError::UnsupportedVersion(_) =>
                                            ErrorCode::UnsupportedVersion,
                                        _ => ErrorCode::Malformed,
                                    };
                                    (req_id.unwrap_or(0), error(code, e.to_string()))
                                }
                            };
                            if encode_frame(req_id, &reply, &mut out).is_err() {
                                let _ = encode_frame(req_id,
                                    &error(ErrorCode::Unavailable, "reply too large"), &mut out);
                            }
                        }
                        served == batch
                    };
                    shared.kick.notify_one();
                    while out.len() < MAX_WRITE {
                        match events.try_recv() {
                            Ok(ev) => out.extend_from_slice(&ev),
                            Err(_) => break,
                        }
                    }
                    if !out.is_empty() {
                        if wr.write_all(&out).await.is_err() {
                            break 'conn;
                        }
                        out.clear();
                    }
                    if !more {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
            }
            ev = events.recv() => {
                let Some(ev) = ev else { break 'conn };
                out.extend_from_slice(&ev);
                while out.len() < MAX_WRITE {
                    match events.try_recv() {
                        Ok(ev) => out.extend_from_slice(&ev),
                        Err(_) => break,
                    }
                }
                if wr.write_all(&out).await.is_err() {
                    break 'conn;
                }
                out.clear();
            }
        }
    }
    let now = shared.now();
    shared.lock().disconnect(now, id);
    shared.kick.notify_one();
}

fn peer_ip(p: PeerAddr) -> IpAddr {
    let v6 = Ipv6Addr::from(p.0);
    v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
}

async fn drive(
    shared: Arc<Shared>,
    probe: Option<UdpSocket>,
    status: Option<UdpSocket>,
    mut verifier: StatusVerifier<SocketAddr>,
) {
    let period = Duration::from_millis(shared.lock().config().estimator.period_ms.max(1));
    let peer_port = shared.lock().config().cm.probe_peer_port;
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pbuf = vec![0u8; MAX_DATAGRAM];
    let mut sbuf = vec![0u8; MAX_DATAGRAM];
    // Where each sender host's probes come from: its responses go back there.
    let mut probe_sources: HashMap<PeerAddr, SocketAddr> = HashMap::new();
    loop {
        let deadline = shared.lock().poll_timeout();
        let sleep_for = deadline.map(|t| t.saturating_since(shared.now()));
        tokio::select! {
            _ = async {
                match sleep_for {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            } => {}
            _ = shared.kick.notified() => {}
            r = async {
                match &probe {
                    Some(s) => s.recv_from(&mut pbuf).await,
                    None => std::future::pending().await,
                }
            } => {
                if let Ok((n, from)) = r
                    && let Ok(packet) = probe::parse(pbuf.get(..n).unwrap_or_default())
                {
                    let peer = PeerAddr::from(from.ip());
                    if matches!(packet, CmPacket::Probe(_))
                        && (probe_sources.len() < 4096 || probe_sources.contains_key(&peer))
                    {
                        probe_sources.insert(peer, from);
                    }
                    let now = shared.now();
                    shared.lock().handle_cm_packet(now, peer, &packet);
                }
            }
            r = async {
                match &status {
                    Some(s) => s.recv_from(&mut sbuf).await,
                    None => std::future::pending().await,
                }
            } => {
                if let Ok((n, from)) = r {
                    let verdict = verifier.verify(&from, sbuf.get(..n).unwrap_or_default());
                    let now = shared.now();
                    let mut engine = shared.lock();
                    let ok = verdict.ok().is_some_and(|m| engine.set_from_status(now, &m).is_ok());
                    if ok {
                        engine.stats_mut().status_accepted += 1;
                    } else {
                        engine.stats_mut().status_rejected += 1;
                    }
                }
            }
            _ = tick.tick() => {
                let ifaces = shared.lock().estimator_ifaces();
                for iface in ifaces {
                    if let Ok(total) = read_counters(&iface) {
                        let now = shared.now();
                        shared.lock().on_iface_counters(now, &iface, total);
                    }
                }
            }
        }
        let now = shared.now();
        let mut sends = Vec::new();
        {
            let mut engine = shared.lock();
            engine.handle_timeout(now);
            while let Some(t) = engine.poll_transmit() {
                sends.push(t);
            }
        }
        if let Some(sock) = &probe {
            for t in sends {
                let to = probe_sources
                    .get(&t.to)
                    .copied()
                    .filter(|_| matches!(t.packet, CmPacket::Response(_)))
                    .unwrap_or_else(|| SocketAddr::new(peer_ip(t.to), peer_port));
                let mut b = vec![0u8; t.packet.buffer_len()];
                if let Ok(n) = t.packet.emit(&mut b) {
                    // Non-blocking: a full socket buffer drops the packet, as a network would.
                    let _ = sock.try_send_to(b.get(..n).unwrap_or_default(), to);
                }
            }
        }
    }
}
