//! The CM handle's daemon backend: [`super::Cm`] and [`super::CmFlow`] calls become requests
//! of the host daemon's local protocol ([`crate::daemon_client`]), and the daemon's grants,
//! expiries and rate changes are routed to each flow's notice queue and rate watch — the same
//! channels the in-process backend fills, so a flow reads them the same way.

use super::{Error, NOTICE_QUEUE, Notice, RateChange};
use crate::daemon_client::{ClientError, DaemonClient, process_name};
use adaptnet_core::cm::{FlowId, FlowKey, FlowOptions, PeerAddr, Request};
use adaptnet_core::daemon::Message;
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::{mpsc, watch};

/// Where one flow's events go.
struct FlowRoute {
    notices: mpsc::Sender<Notice>,
    rates: watch::Sender<Option<RateChange>>,
}

type Routes = Arc<Mutex<HashMap<FlowId, FlowRoute>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One connection to the daemon with the task that routes its events to the flows.
pub(crate) struct DaemonCm {
    pub(crate) client: DaemonClient,
    routes: Routes,
    router: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for DaemonCm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DaemonCm")
            .field("client", &self.client.client_id())
            .finish_non_exhaustive()
    }
}

impl Drop for DaemonCm {
    fn drop(&mut self) {
        // The router holds a clone of the client: stopping it closes the connection, and the
        // daemon frees every flow this process still held.
        self.router.abort();
    }
}

impl DaemonCm {
    /// Connects at once (see [`DaemonClient::connect_now`]) and starts the router.
    pub(crate) fn connect_now(path: &Path) -> Result<DaemonCm, ClientError> {
        Ok(Self::with_client(DaemonClient::connect_now(
            path,
            &process_name(),
        )?))
    }

    fn with_client(client: DaemonClient) -> DaemonCm {
        let routes: Routes = Arc::new(Mutex::new(HashMap::new()));
        let (c, r) = (client.clone(), routes.clone());
        let router = tokio::spawn(async move {
            while let Some(m) = c.next_event().await {
                let (flow, notice) = match m {
                    Message::Grant { flow, bytes } => (flow, Notice::Grant(bytes)),
                    Message::RequestExpired { flow, bytes } => {
                        (flow, Notice::RequestExpired(bytes))
                    }
                    Message::RateChange {
                        flow,
                        rate_bytes_per_s,
                        srtt,
                        rttvar,
                    } => {
                        if let Some(route) = lock(&r).get(&flow) {
                            route.rates.send_replace(Some(RateChange {
                                rate_bytes_per_s,
                                srtt,
                                rttvar,
                            }));
                        }
                        continue;
                    }
                    _ => continue,
                };
                let full = match lock(&r).get(&flow) {
                    Some(route) => route.notices.try_send(notice).is_err(),
                    None => false,
                };
                // As in process: a grant the application has no room for goes back to the
                // macroflow (cm_notify(0)) and its bytes back into the flow's request.
                if let (true, Notice::Grant(bytes)) = (full, notice) {
                    let _ = c.notify(flow, 0).await;
                    let _ = c.request(flow, Request::bytes(bytes)).await;
                }
            }
            // The daemon went away: every flow's notice queue closes.
            lock(&r).clear();
        });
        DaemonCm {
            client,
            routes,
            router,
        }
    }

    /// Whether the connection still serves (the daemon has not gone away).
    pub(crate) fn is_running(&self) -> bool {
        !self.router.is_finished()
    }

    /// `cm_open` at the daemon, with the options' thresholds.
    pub(crate) async fn open(
        &self,
        dest: IpAddr,
        key: FlowKey,
        options: FlowOptions,
    ) -> Result<super::Opened, Error> {
        let (flow, _) = self
            .client
            .open(PeerAddr::from(dest), key, options.weight, options.feedback)
            .await?;
        let (notices_tx, notices) = mpsc::channel(NOTICE_QUEUE);
        let (rates_tx, rates) = watch::channel(None);
        lock(&self.routes).insert(
            flow,
            FlowRoute {
                notices: notices_tx,
                rates: rates_tx,
            },
        );
        if let Err(e) = self.client.thresh(flow, options.thresholds).await {
            self.close(flow).await;
            return Err(e.into());
        }
        Ok((flow, notices, rates))
    }

    /// `cm_close` at the daemon.
    pub(crate) async fn close(&self, flow: FlowId) {
        lock(&self.routes).remove(&flow);
        let _ = self.client.close(flow).await;
    }

    /// `cm_close` without waiting (a dropped flow).
    pub(crate) fn close_later(self: &Arc<Self>, flow: FlowId) {
        lock(&self.routes).remove(&flow);
        let client = self.client.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = client.close(flow).await;
            });
        }
    }
}
