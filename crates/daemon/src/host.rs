//! The host's CM and environment events with one API whether the daemon runs or not (issue
//! 20, item 3): the daemon's when its socket exists (or when told to), the process's own
//! engines (`adaptnet_runtime::cm::Cm`, `adaptnet_runtime::env::EnvMonitor`) otherwise.
//!
//! ```text
//! let cm = HostCm::connect(Backend::from_env()).await?;   // ADAPTNET_CM=auto|daemon|in-process
//! let mut flow = cm.open(dest_ip, key, FlowOptions::implicit()).await?;
//! flow.request(10_000).await?;
//! while let Some(bytes) = flow.next_grant().await { send; flow.notify(bytes).await?; }
//! ```
//!
//! This is a facade beside the runtime's `Cm` rather than a backend inside it: the runtime's
//! CM handle is being reworked (shared driver skeleton, `Send` handles), and the backend
//! switch moves into it once that lands. The flow API here is the runtime's.

use crate::client::{ClientError, DaemonClient, socket_path};
use adaptnet_core::cm::{Feedback, FlowId, FlowKey, FlowOptions, FlowQuery, PeerAddr, Request};
use adaptnet_core::daemon::Message;
use adaptnet_core::env::{LevelMask, Name, Param, Watermarks};
use adaptnet_runtime::cm::{Cm, CmFlow, Notice};
use adaptnet_runtime::env::{EnvMonitor, EnvMonitorError, EnvOptions, EventStream};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// The environment variable that chooses the backend: `auto` (default), `daemon`,
/// `in-process`.
pub const BACKEND_ENV: &str = "ADAPTNET_CM";

/// Grants and expiries queued per flow before the flow's reader takes them.
const FLOW_QUEUE: usize = 1024;

/// Which CM to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The daemon if its socket exists and answers, else in process.
    Auto,
    /// The daemon at this socket (the standard path if `None`); an error if it is not there.
    Daemon(Option<PathBuf>),
    /// The process's own CM, even if a daemon runs.
    InProcess,
}

impl Backend {
    /// From [`BACKEND_ENV`] (unset or unknown: [`Backend::Auto`]).
    pub fn from_env() -> Backend {
        match std::env::var(BACKEND_ENV).as_deref() {
            Ok("daemon") => Backend::Daemon(None),
            Ok("in-process") | Ok("inprocess") => Backend::InProcess,
            _ => Backend::Auto,
        }
    }
}

/// Why the host CM could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The daemon refused or could not be reached.
    #[error(transparent)]
    Daemon(#[from] ClientError),
    /// The in-process CM failed.
    #[error("in-process CM: {0}")]
    InProcess(#[from] adaptnet_runtime::cm::Error),
    /// The in-process environment monitor failed.
    #[error("in-process environment monitor: {0}")]
    Env(#[from] EnvMonitorError),
}

type Routes = Arc<Mutex<HashMap<FlowId, mpsc::Sender<Message>>>>;

/// The host's CM: the daemon's or this process's.
#[derive(Clone)]
pub enum HostCm {
    /// Through the daemon.
    Daemon {
        /// The connection.
        client: DaemonClient,
        /// Each flow's event queue (grants and expiries).
        routes: Routes,
    },
    /// This process's CM.
    InProcess(Cm),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl HostCm {
    /// Connects as `backend` says.
    pub async fn connect(backend: Backend) -> Result<HostCm, HostError> {
        match backend {
            Backend::InProcess => Ok(HostCm::InProcess(Cm::global()?)),
            Backend::Daemon(path) => {
                let path = path.unwrap_or_else(socket_path);
                Ok(HostCm::daemon(
                    DaemonClient::connect(&path, &process_name()).await?,
                ))
            }
            Backend::Auto => {
                let path = socket_path();
                if path.exists()
                    && let Ok(c) = DaemonClient::connect(&path, &process_name()).await
                {
                    return Ok(HostCm::daemon(c));
                }
                Ok(HostCm::InProcess(Cm::global()?))
            }
        }
    }

    /// Uses this daemon connection: starts the task that hands each flow its events.
    pub fn daemon(client: DaemonClient) -> HostCm {
        let routes: Routes = Arc::new(Mutex::new(HashMap::new()));
        let (c, r) = (client.clone(), routes.clone());
        tokio::spawn(async move {
            while let Some(m) = c.next_event().await {
                let flow = match &m {
                    Message::Grant { flow, .. } | Message::RequestExpired { flow, .. } => *flow,
                    _ => continue,
                };
                let tx = lock(&r).get(&flow).cloned();
                if let Some(tx) = tx {
                    // A flow that does not read its grants loses them (they lapse in the CM).
                    let _ = tx.try_send(m);
                }
            }
            // The daemon went away: every flow's queue closes.
            lock(&r).clear();
        });
        HostCm::Daemon { client, routes }
    }

    /// Whether this goes through the daemon.
    pub fn is_daemon(&self) -> bool {
        matches!(self, HostCm::Daemon { .. })
    }

    /// `cm_open`: a flow to `dest`.
    pub async fn open(
        &self,
        dest: IpAddr,
        key: FlowKey,
        options: FlowOptions,
    ) -> Result<HostFlow, HostError> {
        match self {
            HostCm::InProcess(cm) => {
                Ok(HostFlow::InProcess(cm.open_with(dest, key, options).await?))
            }
            HostCm::Daemon { client, routes } => {
                let (flow, _) = client
                    .open(PeerAddr::from(dest), key, options.weight, options.feedback)
                    .await?;
                client.thresh(flow, options.thresholds).await?;
                let (tx, rx) = mpsc::channel(FLOW_QUEUE);
                lock(routes).insert(flow, tx);
                Ok(HostFlow::Daemon {
                    client: client.clone(),
                    routes: routes.clone(),
                    flow,
                    events: rx,
                })
            }
        }
    }
}

fn process_name() -> String {
    let exe = std::env::current_exe().ok();
    let name = exe
        .as_deref()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("app");
    format!("{name}[{}]", std::process::id())
        .chars()
        .take(64)
        .collect()
}

/// One flow of the host CM.
pub enum HostFlow {
    /// Through the daemon.
    Daemon {
        /// The connection.
        client: DaemonClient,
        /// The connection's event routes (this flow's is removed on close).
        routes: Routes,
        /// The flow at the daemon.
        flow: FlowId,
        /// Its grants and expiries.
        events: mpsc::Receiver<Message>,
    },
    /// This process's CM.
    InProcess(CmFlow),
}

impl HostFlow {
    /// `cm_request`.
    pub async fn request(&self, bytes: u64) -> Result<(), HostError> {
        match self {
            HostFlow::InProcess(f) => Ok(f.request(bytes).await?),
            HostFlow::Daemon { client, flow, .. } => {
                Ok(client.request(*flow, Request::bytes(bytes)).await?)
            }
        }
    }

    /// The next grant (bytes that may be sent now); `None` once the CM is gone. Expired
    /// requests are skipped.
    pub async fn next_grant(&mut self) -> Option<u64> {
        loop {
            match self {
                HostFlow::InProcess(f) => match f.next_notice().await? {
                    Notice::Grant(b) => return Some(b),
                    Notice::RequestExpired(_) => {}
                },
                HostFlow::Daemon { events, .. } => {
                    if let Message::Grant { bytes, .. } = events.recv().await? {
                        return Some(bytes);
                    }
                }
            }
        }
    }

    /// `cm_notify`.
    pub async fn notify(&self, nsent: u64) -> Result<(), HostError> {
        match self {
            HostFlow::InProcess(f) => Ok(f.notify(nsent).await?),
            HostFlow::Daemon { client, flow, .. } => Ok(client.notify(*flow, nsent).await?),
        }
    }

    /// `cm_update`.
    pub async fn update(&self, feedback: Feedback) -> Result<(), HostError> {
        match self {
            HostFlow::InProcess(f) => Ok(f.update(feedback).await?),
            HostFlow::Daemon { client, flow, .. } => Ok(client.update(*flow, feedback).await?),
        }
    }

    /// `cm_query`.
    pub async fn query(&self) -> Result<FlowQuery, HostError> {
        match self {
            HostFlow::InProcess(f) => Ok(f.query().await?),
            HostFlow::Daemon { client, flow, .. } => Ok(client.query(*flow).await?),
        }
    }

    /// `cm_close`.
    pub async fn close(self) {
        match self {
            HostFlow::InProcess(f) => f.close().await,
            HostFlow::Daemon {
                client,
                routes,
                flow,
                ..
            } => {
                lock(&routes).remove(&flow);
                let _ = client.close(flow).await;
            }
        }
    }
}

/// One environment event as a subscriber sees it (papers/001 §3), from either backend.
#[derive(Clone, Debug, PartialEq)]
pub struct HostEvent {
    /// Device.
    pub device: Name,
    /// Parameter.
    pub param: Param,
    /// The value checked against the levels.
    pub value: f64,
    /// Levels violated (restricted to the subscriber's).
    pub violated: LevelMask,
    /// Levels cleared.
    pub cleared: LevelMask,
    /// Events this subscriber lost before this one.
    pub lost_before: u64,
}

type EventRoutes = Arc<Mutex<Vec<(Name, Param, mpsc::Sender<HostEvent>)>>>;

/// The host's environment events: the daemon's event service or this process's monitor.
#[derive(Clone)]
pub enum HostEvents {
    /// Through the daemon.
    Daemon {
        /// The connection.
        client: DaemonClient,
        /// Subscriptions by (device, parameter).
        routes: EventRoutes,
    },
    /// This process's monitor.
    InProcess(Arc<EnvMonitor>),
}

impl HostEvents {
    /// Connects as `backend` says; in process, `options` start the monitor.
    pub async fn connect(backend: Backend, options: EnvOptions) -> Result<HostEvents, HostError> {
        let in_process = |options| -> Result<HostEvents, HostError> {
            Ok(HostEvents::InProcess(Arc::new(EnvMonitor::start(options)?)))
        };
        match backend {
            Backend::InProcess => in_process(options),
            Backend::Daemon(path) => {
                let path = path.unwrap_or_else(socket_path);
                Ok(HostEvents::daemon(
                    DaemonClient::connect(&path, &process_name()).await?,
                ))
            }
            Backend::Auto => {
                let path = socket_path();
                if path.exists()
                    && let Ok(c) = DaemonClient::connect(&path, &process_name()).await
                {
                    return Ok(HostEvents::daemon(c));
                }
                in_process(options)
            }
        }
    }

    /// Uses this daemon connection: starts the task that hands each subscription its events.
    pub fn daemon(client: DaemonClient) -> HostEvents {
        let routes: EventRoutes = Arc::new(Mutex::new(Vec::new()));
        let (c, r) = (client.clone(), routes.clone());
        tokio::spawn(async move {
            let mut lost = 0u64;
            while let Some(m) = c.next_event().await {
                let ev = match m {
                    Message::Lost { events } => {
                        lost += events;
                        continue;
                    }
                    Message::EnvEvent {
                        device,
                        param,
                        value,
                        violated,
                        cleared,
                        lost_before,
                        ..
                    } => HostEvent {
                        device,
                        param,
                        value,
                        violated,
                        cleared,
                        lost_before: lost_before + std::mem::take(&mut lost),
                    },
                    _ => continue,
                };
                for (d, p, tx) in lock(&r).iter() {
                    if *d == ev.device && *p == ev.param {
                        let _ = tx.try_send(ev.clone());
                    }
                }
            }
            lock(&r).clear();
        });
        HostEvents::Daemon { client, routes }
    }

    /// Whether this goes through the daemon.
    pub fn is_daemon(&self) -> bool {
        matches!(self, HostEvents::Daemon { .. })
    }

    /// `set_dev_param_wms`: the levels of `param` on `device`.
    pub async fn set_watermarks(
        &self,
        device: &str,
        param: Param,
        watermarks: Watermarks,
    ) -> Result<(), HostError> {
        match self {
            HostEvents::InProcess(m) => Ok(m.set_watermarks(device, param, watermarks)?),
            HostEvents::Daemon { client, .. } => Ok(client
                .set_dev_param_wms(name(device)?, param, watermarks.levels().to_vec())
                .await?),
        }
    }

    /// `set_dev_param`.
    pub async fn set_dev_param(
        &self,
        device: &str,
        param: Param,
        value: f64,
    ) -> Result<(), HostError> {
        match self {
            HostEvents::InProcess(m) => Ok(m.set_dev_param(device, param, value)?),
            HostEvents::Daemon { client, .. } => {
                Ok(client.set_dev_param(name(device)?, param, value).await?)
            }
        }
    }

    /// `request_event`: the events of `param` on `device` that violate one of `levels`.
    pub async fn subscribe(
        &self,
        device: &str,
        param: Param,
        levels: LevelMask,
    ) -> Result<HostSubscription, HostError> {
        match self {
            HostEvents::InProcess(m) => Ok(HostSubscription::InProcess(
                m.subscribe(device, param, levels)?,
            )),
            HostEvents::Daemon { client, routes } => {
                let device = name(device)?;
                client
                    .request_event(device.clone(), param.clone(), levels)
                    .await?;
                let (tx, rx) = mpsc::channel(FLOW_QUEUE);
                lock(routes).push((device, param, tx));
                Ok(HostSubscription::Daemon(rx))
            }
        }
    }
}

fn name(device: &str) -> Result<Name, HostError> {
    Name::new(device).map_err(|e| {
        HostError::Daemon(ClientError::Refused {
            code: adaptnet_core::daemon::ErrorCode::InvalidArgument,
            message: e.to_string(),
        })
    })
}

/// A stream of environment events from either backend.
pub enum HostSubscription {
    /// Through the daemon.
    Daemon(mpsc::Receiver<HostEvent>),
    /// This process's monitor.
    InProcess(EventStream),
}

impl HostSubscription {
    /// The next event; `None` once the source is gone.
    pub async fn recv(&mut self) -> Option<HostEvent> {
        match self {
            HostSubscription::Daemon(rx) => rx.recv().await,
            HostSubscription::InProcess(s) => s.recv().await.map(|d| HostEvent {
                device: d.event.device,
                param: d.event.param,
                value: d.event.value,
                violated: d.event.violated,
                cleared: d.event.cleared,
                lost_before: d.lost_before,
            }),
        }
    }
}
