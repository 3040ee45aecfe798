//! The host's environment events with one API whether the daemon runs or not (issue 20,
//! item 3): the daemon's event service when its socket exists (or when told to), this
//! process's own monitor ([`EnvMonitor`]) otherwise — the same choice, by the same
//! [`CmBackend`] and `ADAPTNET_CM`, as the CM handle [`crate::cm::Cm`] makes.
//!
//! ```text
//! let events = HostEvents::connect(CmBackend::from_env(), EnvOptions::default()).await?;
//! events.set_watermarks("wlan0", Param::Bandwidth, marks).await?;
//! let mut sub = events.subscribe("wlan0", Param::Bandwidth, levels).await?;
//! while let Some(ev) = sub.recv().await { adapt(ev); }
//! ```

use crate::cm::CmBackend;
use crate::daemon_client::{ClientError, DaemonClient, process_name, socket_path};
use crate::env::{EnvMonitor, EnvMonitorError, EnvOptions, EventStream};
use adaptnet_core::daemon::Message;
use adaptnet_core::env::{LevelMask, Name, Param, Watermarks};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Events queued per subscription before the subscriber takes them.
const FLOW_QUEUE: usize = 1024;

/// Why the host's event service could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The daemon refused or could not be reached.
    #[error(transparent)]
    Daemon(#[from] ClientError),
    /// The in-process CM failed.
    #[error("in-process CM: {0}")]
    InProcess(#[from] crate::cm::Error),
    /// The in-process environment monitor failed.
    #[error("in-process environment monitor: {0}")]
    Env(#[from] EnvMonitorError),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
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

/// The event-routing task of a daemon connection, stopped when dropped.
#[derive(Debug)]
pub struct Router(tokio::task::JoinHandle<()>);

impl Drop for Router {
    fn drop(&mut self) {
        self.0.abort();
    }
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
        /// Stops the task that routes the connection's events when the last clone goes
        /// (the task holds a clone of the client: without this the connection would stay
        /// open).
        router: Arc<Router>,
    },
    /// This process's monitor.
    InProcess(Arc<EnvMonitor>),
}

impl HostEvents {
    /// Connects as `backend` says; in process, `options` start the monitor.
    pub async fn connect(backend: CmBackend, options: EnvOptions) -> Result<HostEvents, HostError> {
        let in_process = |options| -> Result<HostEvents, HostError> {
            Ok(HostEvents::InProcess(Arc::new(EnvMonitor::start(options)?)))
        };
        match backend {
            CmBackend::InProcess => in_process(options),
            CmBackend::Daemon(path) => {
                let path = path.unwrap_or_else(socket_path);
                Ok(HostEvents::daemon(
                    DaemonClient::connect(&path, &process_name()).await?,
                ))
            }
            CmBackend::Auto => {
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
        let router = tokio::spawn(async move {
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
        HostEvents::Daemon {
            client,
            routes,
            router: Arc::new(Router(router)),
        }
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
            HostEvents::Daemon { client, routes, .. } => {
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
