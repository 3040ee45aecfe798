//! The Congestion Manager for applications (papers/003 §2, Figure 8; RFC 3124 §3): one CM per
//! process, shared by every flow the process opens to a destination host — application flows
//! opened here and the CM-delegated streams of [`crate::stream`] alike.
//!
//! [`Cm::global`] starts it lazily: a task on the caller's tokio runtime (the crate's one
//! driver loop, no thread of its own) owning core's
//! [`CongestionManager`] (every CM decision is core's),
//! its receiver-side `CmReceiver` and a UDP socket for the probe/response protocol of
//! papers/003 §2.2.2 between hosts ([`PROBE_PORT`]). Handles are cheap to clone and `Send`;
//! the task stops when the last handle — a [`Cm`], a [`CmFlow`], a CM-delegated
//! [`StreamEndpoint`](crate::stream::StreamEndpoint) — is gone, and the next
//! [`Cm::global`] starts a new one. [`Cm::new`] makes a CM of its own (not the process's),
//! for applications and tests that run several runtimes.
//!
//! **The host daemon** (`adaptnet daemon`, issue 20): when its socket exists
//! ([`socket_path`]: `$ADAPTNET_DAEMON_SOCKET`, else
//! `/run/adaptnet/daemon.sock`), [`Cm::global`] is a handle to the daemon's CM instead — one
//! CM for every application on the host — over the local protocol
//! ([`crate::daemon_client`]); flows read the same notices and rate changes either way.
//! `ADAPTNET_CM=local` keeps the process's own engine, `ADAPTNET_CM=daemon` insists on the
//! daemon (an error if it does not answer); [`CmOptions::backend`] says the same in code
//! ([`CmBackend`]). CM-delegated streams always use an in-process CM (they call it
//! synchronously from their driver). If the daemon goes away, flows see their notices end
//! and calls fail with [`Error::Daemon`]; the next [`Cm::global`] chooses again.
//!
//! | papers/003 Figure 8, RFC 3124 | here |
//! |---|---|
//! | `cm_open(dst)` | [`Cm::open`], [`Cm::open_with`] → [`CmFlow`] |
//! | `cm_request(id, nbytes, …)` | [`CmFlow::request`], [`CmFlow::request_with`] |
//! | `app_notify(nallowed)` / `cmapp_send` | [`CmFlow::next_notice`] → [`Notice::Grant`] |
//! | `cm_notify(id, nsent)` | [`CmFlow::notify`] (`0` declines a grant) |
//! | `cm_update(id, nrecd, nlost, lossmode, rtt)` | [`CmFlow::update`] |
//! | `cm_query(id)` | [`CmFlow::query`] |
//! | `change_rate(rate)` / `cmapp_update` | [`CmFlow::change_rate`] (latest change; [`CmFlow::thresh`] sets `cm_thresh`) |
//! | `cm_close(id)` | [`CmFlow::close`] (or drop) |
//!
//! Feedback: a flow whose application learns what arrived calls [`CmFlow::update`]
//! ([`FeedbackSource::Implicit`](adaptnet_core::cm::FeedbackSource::Implicit)); for one whose
//! application does not, open it with
//! [`FlowOptions::probed`](adaptnet_core::cm::FlowOptions::probed): the CM probes the
//! destination host's CM, whose receiving application reports each arriving packet with
//! [`Cm::received`] under the same [`FlowKey`].
//!
//! ```no_run
//! use adaptnet_runtime::cm::{Cm, Notice};
//! use adaptnet_core::cm::Feedback;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let cm = Cm::global()?;
//! let mut flow = cm.open("192.0.2.7:9000".parse()?).await?;
//! flow.request(64_000).await?;
//! while let Some(Notice::Grant(bytes)) = flow.next_notice().await {
//!     // send up to `bytes` now ...
//!     flow.notify(bytes).await?;
//!     // ... and, when the receiver says so:
//!     flow.update(Feedback::received(bytes, None)).await?;
//! #   break;
//! }
//! println!("{:?}", flow.query().await?.rate_bytes_per_s);
//! flow.close().await;
//! # Ok(()) }
//! ```

mod daemon;
pub(crate) mod host;

use crate::clock::Clock;
use crate::daemon_client::{ClientError, socket_path};
use crate::driver::{self, Timekeeper};
use adaptnet_core::cm::{
    CmConfig, CmError, Feedback, FlowId, FlowKey, FlowOptions, FlowQuery, Request, Thresholds,
};
use adaptnet_core::cm::{CmHandle, CongestionManager};
use adaptnet_core::daemon::Message;
use host::{HostShared, Route};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot, watch};

/// The UDP port of every host's CM control traffic (probes and responses): RFC 3124's number,
/// as in the simulator.
pub const PROBE_PORT: u16 = 3124;
/// Calls of application flows waiting for the CM; callers wait beyond. (A constant, not a
/// [`CmOptions`] field: `CmOptions` is built field by field by its users, and the daemon's
/// CM speaks the same API.)
pub const COMMAND_QUEUE_LEN: usize = 1024;
/// How long a stopping CM host waits for its last probes to leave.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_millis(200);
/// Notices (grants, expiries) waiting for one application flow; beyond, grants are declined
/// back to the macroflow (`cm_notify(0)`).
pub const NOTICE_QUEUE: usize = 256;

/// Why a CM call failed.
#[derive(Debug, Error)]
pub enum Error {
    /// The CM refused the call (unknown flow, bad argument, too many flows).
    #[error("cm: {0}")]
    Cm(#[from] CmError),
    /// The CM host could not start (its socket).
    #[error("cm host: {0}")]
    Io(#[from] std::io::Error),
    /// [`Cm::start`] was called after the process CM had started.
    #[error("the process CM is already running")]
    AlreadyStarted,
    /// The CM host has stopped.
    #[error("cm host stopped")]
    Closed,
    /// The host daemon could not be reached, refused the call, or went away.
    #[error("cm daemon: {0}")]
    Daemon(#[from] ClientError),
}

/// The environment variable that chooses the CM's backend ([`CmBackend::from_env`]):
/// `local` (or `in-process`) for the process's own engine, `daemon` for the host daemon,
/// `auto` or unset for the daemon when its socket exists.
pub const BACKEND_ENV: &str = "ADAPTNET_CM";

/// Which engine a [`Cm`] handle uses (issue 20: one CM for the whole host when the daemon
/// runs, the process's own otherwise).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum CmBackend {
    /// The daemon if its socket ([`socket_path`]) exists and accepts a connection, else the
    /// process's own engine.
    #[default]
    Auto,
    /// The daemon at this socket ([`socket_path`] if `None`); an error if it does not answer.
    Daemon(Option<PathBuf>),
    /// The process's own engine, even if a daemon runs.
    InProcess,
}

impl CmBackend {
    /// From [`BACKEND_ENV`]: `daemon`, `local`/`in-process`, else [`CmBackend::Auto`] (an
    /// unknown value is logged and read as `auto`).
    pub fn from_env() -> CmBackend {
        match std::env::var(BACKEND_ENV).as_deref() {
            Ok("daemon") => CmBackend::Daemon(None),
            Ok("local" | "in-process" | "inprocess") => CmBackend::InProcess,
            Ok("auto" | "") | Err(_) => CmBackend::Auto,
            Ok(other) => {
                tracing::warn!("{BACKEND_ENV}={other:?} is not auto, daemon or local; using auto");
                CmBackend::Auto
            }
        }
    }
}

/// How to start the process CM.
#[derive(Clone, Debug)]
pub struct CmOptions {
    /// Core's CM parameters.
    pub config: CmConfig,
    /// Where the probe protocol's socket is bound (default `0.0.0.0:3124`).
    pub bind: SocketAddr,
    /// The port probes are sent to on peer hosts (default: [`PROBE_PORT`], or the bound port
    /// if `bind` asked for port 0). Responses go back to where each probe came from.
    pub peer_port: Option<u16>,
    /// Which engine: the host daemon or this process's (default: [`CmBackend::from_env`]).
    /// With the daemon, `config`, `bind` and `peer_port` are the daemon's own.
    pub backend: CmBackend,
}

impl Default for CmOptions {
    fn default() -> Self {
        CmOptions {
            config: CmConfig::default(),
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), PROBE_PORT),
            peer_port: Some(PROBE_PORT),
            backend: CmBackend::from_env(),
        }
    }
}

/// An event of one application flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// `app_notify(nallowed)`: send up to this many bytes now, then [`CmFlow::notify`] what
    /// was sent. The grant lapses after max(srtt, threshold) (RFC 3124 §3.3).
    Grant(u64),
    /// A request's latency passed: these requested bytes were withdrawn ungranted.
    RequestExpired(u64),
}

/// `change_rate(newrate)` / `cmapp_update(newrate, srtt, rttdev)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateChange {
    /// The flow's share of its macroflow's rate, bytes/s.
    pub rate_bytes_per_s: f64,
    /// The macroflow's smoothed RTT.
    pub srtt: Duration,
    /// Its RTT variation.
    pub rttvar: Duration,
}

/// What an opened flow needs from the host.
pub(crate) type Opened = (
    FlowId,
    mpsc::Receiver<Notice>,
    watch::Receiver<Option<RateChange>>,
);
/// Requests from handles to the host.
pub(crate) enum Command {
    Open {
        dest: IpAddr,
        key: FlowKey,
        options: FlowOptions,
        reply: oneshot::Sender<Result<Opened, CmError>>,
    },
    Request {
        flow: FlowId,
        request: Request,
        reply: oneshot::Sender<Result<(), CmError>>,
    },
    Notify {
        flow: FlowId,
        nsent: u64,
        reply: oneshot::Sender<Result<(), CmError>>,
    },
    Update {
        flow: FlowId,
        feedback: Feedback,
        reply: oneshot::Sender<Result<(), CmError>>,
    },
    Thresh {
        flow: FlowId,
        thresholds: Thresholds,
        reply: oneshot::Sender<Result<(), CmError>>,
    },
    Query {
        flow: FlowId,
        reply: oneshot::Sender<Result<FlowQuery, CmError>>,
    },
    Close {
        flow: FlowId,
        reply: Option<oneshot::Sender<()>>,
    },
}

/// Runs one command of an application flow.
pub(crate) fn handle_command(host: &HostShared, now: adaptnet_core::Time, cmd: Command) {
    match cmd {
        Command::Open {
            dest,
            key,
            options,
            reply,
        } => {
            let opened = host.cm.borrow_mut().open(
                now,
                adaptnet_core::cm::PeerAddr::from(dest),
                key,
                options,
            );
            let _ = reply.send(opened.map(|flow| {
                let (notices_tx, notices) = mpsc::channel(NOTICE_QUEUE);
                let (rates_tx, rates) = watch::channel(None);
                host.route(
                    flow,
                    Route::App {
                        notices: notices_tx,
                        rates: rates_tx,
                    },
                );
                (flow, notices, rates)
            }));
        }
        Command::Request {
            flow,
            request,
            reply,
        } => {
            let _ = reply.send(host.cm.borrow_mut().request_with(now, flow, request));
        }
        Command::Notify { flow, nsent, reply } => {
            let _ = reply.send(host.cm.borrow_mut().notify(now, flow, nsent));
        }
        Command::Update {
            flow,
            feedback,
            reply,
        } => {
            let _ = reply.send(host.cm.borrow_mut().update(now, flow, feedback));
        }
        Command::Thresh {
            flow,
            thresholds,
            reply,
        } => {
            let _ = reply.send(host.cm.borrow_mut().thresh(now, flow, thresholds));
        }
        Command::Query { flow, reply } => {
            let _ = reply.send(host.cm.borrow().query(flow));
        }
        Command::Close { flow, reply } => {
            host.unroute(flow);
            let _ = host.cm.borrow_mut().close(now, flow);
            if let Some(r) = reply {
                let _ = r.send(());
            }
        }
    }
}

/// A handle to a CM (the process's, [`Cm::global`], or one of its own, [`Cm::new`]): the
/// host daemon's or this process's engine ([`CmBackend`]), with one API. Clones share it; an
/// in-process CM stops, and a daemon connection closes (the daemon frees its flows), when the
/// last handle (flows and CM-delegated stream endpoints hold one) is gone.
#[derive(Clone, Debug)]
pub struct Cm(Engine);

#[derive(Clone, Debug)]
enum Engine {
    InProcess(LocalCm),
    Daemon(Arc<daemon::DaemonCm>),
}

/// The in-process engine: a handle to this process's CM host task. CM-delegated streams
/// hold this (they call the CM synchronously, which only an in-process CM can serve).
#[derive(Clone, Debug)]
pub(crate) struct LocalCm(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    cmd: mpsc::Sender<Command>,
    local_addr: SocketAddr,
    host: Arc<HostShared>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.host.driver.request_stop();
    }
}

/// The process CMs while a handle of them lives: the one [`Cm::global`] chose, and the
/// in-process one CM-delegated streams use.
struct Slot {
    chosen: Option<WeakEngine>,
    local: Weak<Inner>,
}

enum WeakEngine {
    InProcess(Weak<Inner>),
    Daemon(Weak<daemon::DaemonCm>),
}

static GLOBAL: Mutex<Slot> = Mutex::new(Slot {
    chosen: None,
    local: Weak::new(),
});
static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

fn global_slot() -> MutexGuard<'static, Slot> {
    GLOBAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The running in-process CM behind `weak`, if a handle of it lives and its task still runs
/// (the runtime that ran it may have shut down).
fn running_local(weak: &Weak<Inner>) -> Option<LocalCm> {
    weak.upgrade()
        .filter(|inner| !inner.host.driver.is_done())
        .map(LocalCm)
}

impl Slot {
    /// The process CM [`Cm::global`] chose, if it still runs (a daemon connection that
    /// closed does not: the next call connects anew).
    fn running(&self) -> Option<Cm> {
        match self.chosen.as_ref()? {
            WeakEngine::InProcess(w) => running_local(w).map(|l| Cm(Engine::InProcess(l))),
            WeakEngine::Daemon(w) => w
                .upgrade()
                .filter(|d| d.is_running())
                .map(|d| Cm(Engine::Daemon(d))),
        }
    }

    fn remember(&mut self, cm: &Cm) {
        self.chosen = Some(match &cm.0 {
            Engine::InProcess(l) => {
                self.local = Arc::downgrade(&l.0);
                WeakEngine::InProcess(Arc::downgrade(&l.0))
            }
            Engine::Daemon(d) => WeakEngine::Daemon(Arc::downgrade(d)),
        });
    }
}

/// Starts an in-process CM for the process: on the well-known probe port, or, if another CM
/// on this host holds it, on an ephemeral one.
fn start_process_local(options: CmOptions) -> Result<LocalCm, Error> {
    match LocalCm::new(&options) {
        Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::warn!(
                "cm: probe port {} unavailable ({e}); using an ephemeral port",
                options.bind.port()
            );
            LocalCm::new(&CmOptions {
                bind: SocketAddr::new(options.bind.ip(), 0),
                ..options
            })
        }
        r => r,
    }
}

impl Cm {
    /// The process CM. If none runs, one is chosen by [`CmOptions::default`]'s backend
    /// (`ADAPTNET_CM`, [`CmBackend::from_env`]): the host daemon when its socket exists,
    /// else the process's own engine, started on the current tokio runtime. If the probe
    /// port is taken (another CM process on this host), the own engine binds an ephemeral
    /// port instead: its flows still probe their peers, but other hosts' probes cannot reach
    /// it. Call inside a tokio runtime; an in-process CM runs on the runtime that started it,
    /// so a program with one runtime has one CM.
    pub fn global() -> Result<Cm, Error> {
        let mut slot = global_slot();
        if let Some(cm) = slot.running() {
            return Ok(cm);
        }
        let options = CmOptions::default();
        let cm = match Cm::connect_daemon(&options.backend)? {
            Some(d) => d,
            None => match running_local(&slot.local) {
                Some(l) => Cm(Engine::InProcess(l)),
                None => Cm(Engine::InProcess(start_process_local(options)?)),
            },
        };
        slot.remember(&cm);
        Ok(cm)
    }

    /// The process's in-process CM (CM-delegated streams need one even when the
    /// application's flows go through the daemon).
    pub(crate) fn global_in_process() -> Result<LocalCm, Error> {
        let mut slot = global_slot();
        if let Some(l) = running_local(&slot.local) {
            return Ok(l);
        }
        let local = start_process_local(CmOptions {
            backend: CmBackend::InProcess,
            ..CmOptions::default()
        })?;
        slot.local = Arc::downgrade(&local.0);
        Ok(local)
    }

    /// Starts the process CM with `options` (its backend included) on the current tokio
    /// runtime; [`Error::AlreadyStarted`] while one runs.
    pub fn start(options: CmOptions) -> Result<Cm, Error> {
        let mut slot = global_slot();
        if slot.running().is_some() {
            return Err(Error::AlreadyStarted);
        }
        let cm = Cm::new(options)?;
        slot.remember(&cm);
        Ok(cm)
    }

    /// A CM handle of its own (not the process CM) with `options`: a connection of its own to
    /// the daemon, or an in-process CM of its own as a task on the current tokio runtime
    /// (whose flows and streams share it only with each other), as `options.backend` says.
    pub fn new(options: CmOptions) -> Result<Cm, Error> {
        if let Some(cm) = Cm::connect_daemon(&options.backend)? {
            return Ok(cm);
        }
        Ok(Cm(Engine::InProcess(LocalCm::new(&options)?)))
    }

    /// The daemon handle `backend` asks for: `Some` through the daemon, `None` for the
    /// process's own engine (asked for, or `Auto` with no daemon answering).
    fn connect_daemon(backend: &CmBackend) -> Result<Option<Cm>, Error> {
        tokio::runtime::Handle::try_current().map_err(|_| {
            Error::Io(std::io::Error::other(
                "the CM must be started inside a tokio runtime",
            ))
        })?;
        let daemon = |path: &std::path::Path| {
            daemon::DaemonCm::connect_now(path).map(|d| Some(Cm(Engine::Daemon(Arc::new(d)))))
        };
        match backend {
            CmBackend::InProcess => Ok(None),
            CmBackend::Daemon(path) => Ok(daemon(path.as_deref().unwrap_or(&socket_path()))?),
            CmBackend::Auto => {
                let path = socket_path();
                if !path.exists() {
                    return Ok(None);
                }
                // A socket left by a daemon that died refuses the connection: fall back.
                daemon(&path).or_else(|e| {
                    tracing::warn!("cm: {e}; using the process's own CM");
                    Ok(None)
                })
            }
        }
    }

    /// Whether this handle goes through the host daemon.
    pub fn is_daemon(&self) -> bool {
        matches!(self.0, Engine::Daemon(_))
    }

    /// The in-process engine, if this is one.
    pub(crate) fn in_process(&self) -> Option<&LocalCm> {
        match &self.0 {
            Engine::InProcess(l) => Some(l),
            Engine::Daemon(_) => None,
        }
    }

    /// Where the probe protocol's socket is bound; through the daemon, the unspecified
    /// address `0.0.0.0:0` (the probe socket is the daemon's).
    pub fn local_addr(&self) -> SocketAddr {
        match &self.0 {
            Engine::InProcess(l) => l.0.local_addr,
            Engine::Daemon(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        }
    }

    /// `cm_open`: a flow to `dest`'s host with implicit feedback (the application calls
    /// [`CmFlow::update`]) and a process-unique key.
    pub async fn open(&self, dest: SocketAddr) -> Result<CmFlow, Error> {
        let key = FlowKey(NEXT_KEY.fetch_add(1, Ordering::Relaxed));
        self.open_with(dest.ip(), key, FlowOptions::implicit())
            .await
    }

    /// `cm_open` with the flow's key (the name both hosts use for it in probe responses) and
    /// options (weight, feedback source, thresholds).
    pub async fn open_with(
        &self,
        dest: IpAddr,
        key: FlowKey,
        options: FlowOptions,
    ) -> Result<CmFlow, Error> {
        let (id, notices, rates) = match &self.0 {
            Engine::InProcess(l) => {
                l.call(|reply| Command::Open {
                    dest,
                    key,
                    options,
                    reply,
                })
                .await??
            }
            Engine::Daemon(d) => d.open(dest, key, options).await?,
        };
        Ok(CmFlow {
            cm: self.clone(),
            id,
            key,
            notices,
            rates,
            closed: false,
        })
    }

    /// The receiving side of a probe-fed flow: a data packet of `bytes` from flow `key` of
    /// host `from` arrived; the receiver CM reports it in its next probe response. Call it as
    /// each packet arrives: a count made after the sender's next probe reached this host is
    /// reported in the next interval, and the sender reads the interval it missed as loss.
    /// Through the daemon the report is sent without waiting for its reply.
    pub fn received(&self, from: IpAddr, key: FlowKey, bytes: u64) {
        let from = adaptnet_core::cm::PeerAddr::from(from);
        match &self.0 {
            Engine::InProcess(l) => {
                let host = &l.0.host;
                let now = host.clock.now();
                host::lock(&host.receiver).handle_data(now, from, key, bytes, false);
            }
            Engine::Daemon(d) => {
                let client = d.client.clone();
                tokio::spawn(async move {
                    let _ = client.received(from, key, bytes, false).await;
                });
            }
        }
    }
}

impl LocalCm {
    /// An in-process CM with `options` as a task on the current tokio runtime.
    fn new(options: &CmOptions) -> Result<LocalCm, Error> {
        tokio::runtime::Handle::try_current().map_err(|_| {
            Error::Io(std::io::Error::other(
                "the CM must be started inside a tokio runtime",
            ))
        })?;
        let socket = std::net::UdpSocket::bind(options.bind)?;
        socket.set_nonblocking(true)?;
        let socket = tokio::net::UdpSocket::from_std(socket)?;
        let local_addr = socket.local_addr()?;
        let (cmd, commands) = mpsc::channel(COMMAND_QUEUE_LEN);
        let clock = Clock::new();
        let shared = driver::Shared::new();
        let cm = CmHandle::new(CongestionManager::new(options.config.clone()));
        let peer_port = options.peer_port.unwrap_or(local_addr.port());
        let host = Arc::new(HostShared::new(cm, clock, shared.clone(), peer_port));
        let proto = host::CmDriver::new(host.clone(), socket);
        tokio::spawn(driver::run(
            proto,
            Timekeeper::new(clock),
            commands,
            shared,
            SHUTDOWN_TIMEOUT,
        ));
        Ok(LocalCm(Arc::new(Inner {
            cmd,
            local_addr,
            host,
        })))
    }

    /// The CM's host state (stream drivers call the CM through it).
    pub(crate) fn host(&self) -> &Arc<HostShared> {
        &self.0.host
    }

    async fn call<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Command) -> Result<T, Error> {
        let (reply, rx) = oneshot::channel();
        self.0
            .cmd
            .send(make(reply))
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)
    }
}

/// A flow's `change_rate` callbacks ([`CmFlow::rate_changes`]); cheap to clone.
#[derive(Clone, Debug)]
pub struct RateChanges(watch::Receiver<Option<RateChange>>);

impl RateChanges {
    /// The latest rate change, without waiting; `None` before the first.
    pub fn latest(&self) -> Option<RateChange> {
        *self.0.borrow()
    }

    /// Waits for the next rate change (the latest if several came meanwhile); `None` once
    /// the flow is closed.
    pub async fn next(&mut self) -> Option<RateChange> {
        self.0.changed().await.ok()?;
        *self.0.borrow_and_update()
    }
}

/// One application flow of the process CM. Dropping it closes it.
#[derive(Debug)]
pub struct CmFlow {
    cm: Cm,
    id: FlowId,
    key: FlowKey,
    notices: mpsc::Receiver<Notice>,
    rates: watch::Receiver<Option<RateChange>>,
    closed: bool,
}

impl CmFlow {
    /// The CM's id of this flow (`cm_streamid`).
    pub fn id(&self) -> FlowId {
        self.id
    }

    /// The flow's key (what the receiving host reports it under).
    pub fn key(&self) -> FlowKey {
        self.key
    }

    /// Runs one call on the flow's engine: `make` builds the in-process command, `message`
    /// the daemon's request.
    async fn call(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<(), CmError>>) -> Command,
        message: impl FnOnce(FlowId) -> Message,
    ) -> Result<(), Error> {
        match &self.cm.0 {
            Engine::InProcess(l) => Ok(l.call(make).await??),
            Engine::Daemon(d) => match d.client.call(message(self.id)).await? {
                Message::Ok => Ok(()),
                _ => Err(ClientError::Unexpected("expected Ok").into()),
            },
        }
    }

    /// `cm_request(nbytes)`: grants of at most one MTU follow as [`Notice::Grant`]s, paced at
    /// the macroflow's rate and shared by weight.
    pub async fn request(&self, bytes: u64) -> Result<(), Error> {
        self.request_with(Request::bytes(bytes)).await
    }

    /// `cm_request(id, nbytes, minbytes, latency)` (papers/003 Figure 8).
    pub async fn request_with(&self, request: Request) -> Result<(), Error> {
        let flow = self.id;
        self.call(
            |reply| Command::Request {
                flow,
                request,
                reply,
            },
            |flow| Message::Request { flow, request },
        )
        .await
    }

    /// The next grant or request expiry (`app_notify`); `None` once the CM host stopped.
    pub async fn next_notice(&mut self) -> Option<Notice> {
        self.notices.recv().await
    }

    /// A notice already waiting, without waiting.
    pub fn try_next_notice(&mut self) -> Option<Notice> {
        self.notices.try_recv().ok()
    }

    /// `cm_notify(nsent)`: `nsent` bytes were just sent (against the flow's grants, oldest
    /// first); `0` declines the oldest grant.
    pub async fn notify(&self, nsent: u64) -> Result<(), Error> {
        let flow = self.id;
        self.call(
            |reply| Command::Notify { flow, nsent, reply },
            |flow| Message::Notify { flow, nsent },
        )
        .await
    }

    /// `cm_update(nrecd, nlost, lossmode, rtt)`: what the receiver reported.
    pub async fn update(&self, feedback: Feedback) -> Result<(), Error> {
        let flow = self.id;
        self.call(
            |reply| Command::Update {
                flow,
                feedback,
                reply,
            },
            |flow| Message::Update { flow, feedback },
        )
        .await
    }

    /// `cm_thresh`: when [`CmFlow::change_rate`] reports (papers/003 reports every change:
    /// [`Thresholds::EVERY_RATE_CHANGE`]).
    pub async fn thresh(&self, thresholds: Thresholds) -> Result<(), Error> {
        let flow = self.id;
        self.call(
            |reply| Command::Thresh {
                flow,
                thresholds,
                reply,
            },
            |flow| Message::Thresh { flow, thresholds },
        )
        .await
    }

    /// `cm_query`: the flow's share of the rate and the path's RTT estimates.
    pub async fn query(&self) -> Result<FlowQuery, Error> {
        let flow = self.id;
        match &self.cm.0 {
            Engine::InProcess(l) => Ok(l.call(|reply| Command::Query { flow, reply }).await??),
            Engine::Daemon(d) => Ok(d.client.query(flow).await?),
        }
    }

    /// `change_rate`: waits for the flow's next rate change and returns it (the latest one
    /// if several came meanwhile); `None` once the CM host stopped.
    pub async fn change_rate(&mut self) -> Option<RateChange> {
        self.rates.changed().await.ok()?;
        *self.rates.borrow_and_update()
    }

    /// The flow's `change_rate` stream as a separate handle, to await beside
    /// [`CmFlow::next_notice`] (e.g. in one `select!`).
    pub fn rate_changes(&self) -> RateChanges {
        RateChanges(self.rates.clone())
    }

    /// `cm_close`: the flow ends; its share goes to the others.
    pub async fn close(mut self) {
        self.closed = true;
        let flow = self.id;
        match &self.cm.0 {
            Engine::InProcess(l) => {
                let _ = l
                    .call(|reply| Command::Close {
                        flow,
                        reply: Some(reply),
                    })
                    .await;
            }
            Engine::Daemon(d) => d.close(flow).await,
        }
    }
}

impl Drop for CmFlow {
    fn drop(&mut self) {
        if !self.closed {
            // Best effort without waiting; a full queue leaves the flow to be closed when
            // the process ends.
            match &self.cm.0 {
                Engine::InProcess(l) => {
                    let _ = l.0.cmd.try_send(Command::Close {
                        flow: self.id,
                        reply: None,
                    });
                }
                Engine::Daemon(d) => d.close_later(self.id),
            }
        }
    }
}
