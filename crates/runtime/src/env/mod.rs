//! Environment events on a real Linux host (papers/001; issue 10 item 6, real-host part).
//!
//! [`EnvMonitor`] owns a core [`EnvTable`] and [`EventHub`] and feeds the table from two
//! sources, then drains its events into the hub exactly as core's module doc says
//! (`set_dev_param` → `poll_event` → `EventHub::publish`; `handle_timeout` at `poll_timeout`
//! for minimum dwells):
//!
//! * [`netlink`]: the kernel's link notifications (`RTM_NEWLINK` on a `NETLINK_ROUTE`
//!   socket), pushed the moment a link changes: availability, when [`EnvOptions::link_events`]
//!   is on (the default) and the socket opens;
//! * [`linux::LinuxSource`], polled every [`EnvOptions::period`]: bandwidth and signal per
//!   interface, and availability whenever the netlink listener is not running (see [`linux`]
//!   for exactly which files);
//! * [`status`]: the authenticated status message over UDP (core's [`StatusVerifier`]),
//!   when [`EnvOptions::status`] is set;
//! * and [`EnvMonitor::set_dev_param`] for values the host knows otherwise (cost, energy).
//!
//! Applications [`EnvMonitor::subscribe`] to `(device, parameter, levels)` and read
//! [`Delivery`]s from an [`EventStream`]: bounded, a slow reader loses the oldest events and
//! the next delivery says how many (core's `EventHub` semantics; the source never waits).
//!
//! # Lifecycle
//! The monitor's tasks run on the caller's tokio runtime. [`EnvMonitor::close`] (or dropping
//! the monitor) asks them to stop — each finishes what it is doing and returns, none is
//! aborted — and ends every [`EventStream`] once its queued events are read;
//! [`EnvMonitor::wait_idle`] returns when the tasks are gone.
//!
//! Every interface gets papers/001 Table 3's availability levels ([`table3_availability`]:
//! low 10 "unavailable", high 20 "available") unless [`EnvOptions::default_watermarks`] says
//! otherwise, so a link going down or up is an event without further set-up.
//!
//! ```no_run
//! use adaptnet_runtime::env::{EnvOptions, EnvMonitor};
//! use adaptnet_core::env::{LevelMask, Param};
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let monitor = EnvMonitor::start(EnvOptions::default())?;
//! let mut events = monitor.subscribe("eth0", Param::Availability, LevelMask::ALL)?;
//! while let Some(d) = events.recv().await {
//!     println!("{} {} = {} (lost before: {})", d.event.device, d.event.param, d.event.value, d.lost_before);
//! }
//! # Ok(()) }
//! ```

pub mod linux;
pub mod netlink;
pub mod status;

use crate::clock::Clock;
use adaptnet_core::env::{
    Delivery, EnvError, EnvTable, EventHub, Hysteresis, Level, LevelMask, Name, Param,
    ParamReading, StatusError, StatusKey, StatusVerifier, SubscriberId, Watermarks,
};
use linux::{LinuxSource, SourcePaths};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// Shortest poll period accepted.
pub const MIN_PERIOD: Duration = Duration::from_millis(10);
/// Default poll period.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(500);
/// Default subscriber queue, in events.
pub const DEFAULT_QUEUE_EVENTS: usize = 256;

/// Why the monitor refused a request.
#[derive(Debug, Error)]
pub enum EnvMonitorError {
    /// A core table or hub request was refused.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// A status peer could not be configured.
    #[error("status peer: {0}")]
    Status(#[from] StatusError),
    /// A socket could not be bound or configured.
    #[error("status socket {addr}: {source}")]
    Socket {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The poll period is shorter than [`MIN_PERIOD`].
    #[error("poll period {0:?} is shorter than the minimum {MIN_PERIOD:?}")]
    PeriodTooShort(Duration),
    /// `start` was called outside a tokio runtime.
    #[error("the environment monitor must be started inside a tokio runtime")]
    NoRuntime,
}

/// A configured status peer: who may send, under which key.
#[derive(Clone, Debug)]
pub struct StatusPeer {
    /// The peer's source address, exactly as datagrams arrive from it.
    pub addr: SocketAddr,
    /// The key id its messages carry.
    pub key_id: u32,
    /// The shared key.
    pub key: StatusKey,
}

/// The status message receiver's settings.
#[derive(Clone, Debug)]
pub struct StatusConfig {
    /// Address to bind (port 0: any; see [`EnvMonitor::status_addr`]).
    pub listen: SocketAddr,
    /// The peers accepted; messages from anyone else are rejected.
    pub peers: Vec<StatusPeer>,
}

/// How to start an [`EnvMonitor`].
#[derive(Clone, Debug)]
pub struct EnvOptions {
    /// Interfaces to follow; empty: every interface under `paths.sys_class_net`.
    pub interfaces: Vec<String>,
    /// Poll period (at least [`MIN_PERIOD`]).
    pub period: Duration,
    /// Where the Linux source reads.
    pub paths: SourcePaths,
    /// Watermarks set on every followed interface before its first reading.
    pub default_watermarks: Vec<(Param, Watermarks)>,
    /// Hysteresis set on every followed interface, per parameter.
    pub default_hysteresis: Vec<(Param, Hysteresis)>,
    /// Queue of each subscriber, in events.
    pub queue_events: usize,
    /// The status message receiver, if any.
    pub status: Option<StatusConfig>,
    /// Listen for the kernel's link notifications ([`netlink`]) for availability; polling
    /// covers it when off or when the socket cannot be opened.
    pub link_events: bool,
}

/// The options' former name (before every protocol's options were called `…Options`).
pub type EnvConfig = EnvOptions;

/// papers/001 Table 3's availability levels: 0 low 10 ("device is unavailable"), 1 high 20
/// ("device is available").
pub fn table3_availability() -> Watermarks {
    // Two finite increasing levels: cannot fail.
    Watermarks::new(vec![Level::low(10.0), Level::high(20.0)])
        .unwrap_or_else(|_| Watermarks::none())
}

impl Default for EnvOptions {
    fn default() -> Self {
        EnvOptions {
            interfaces: Vec::new(),
            period: DEFAULT_PERIOD,
            paths: SourcePaths::default(),
            default_watermarks: vec![(Param::Availability, table3_availability())],
            default_hysteresis: Vec::new(),
            queue_events: DEFAULT_QUEUE_EVENTS,
            status: None,
            link_events: true,
        }
    }
}

/// Counters of the monitor's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MonitorStats {
    /// Polls of the Linux source done.
    pub polls: u64,
    /// Files that could not be read (missing interface, …).
    pub read_errors: u64,
    /// Status messages accepted and applied.
    pub status_accepted: u64,
    /// Status messages rejected (malformed, unknown peer, wrong key, bad MAC, replay, or a
    /// value the table refused).
    pub status_rejected: u64,
    /// Events the core table dropped before they reached the hub (should stay 0).
    pub table_events_lost: u64,
    /// Whether availability currently comes from the netlink listener (else from polling).
    pub availability_pushed: bool,
    /// Link messages from the kernel applied (followed interfaces only).
    pub link_messages: u64,
    /// Times the kernel dropped link notifications (`ENOBUFS`); each is followed by a dump.
    pub link_overruns: u64,
    /// Netlink messages that did not parse (counted and skipped).
    pub link_malformed: u64,
}

/// What the tasks and the handles share.
struct State {
    clock: Clock,
    table: EnvTable,
    hub: EventHub,
    wakers: BTreeMap<SubscriberId, Arc<Notify>>,
    /// Interfaces that already got the default watermarks.
    configured: std::collections::BTreeSet<Name>,
    defaults_wms: Vec<(Param, Watermarks)>,
    defaults_hyst: Vec<(Param, Hysteresis)>,
    stats: MonitorStats,
    /// Availability is the netlink listener's: the poller does not report it.
    availability_pushed: bool,
    stopped: bool,
}

impl State {
    /// Gives a device seen for the first time the default watermarks and hysteresis.
    fn configure(&mut self, device: &Name) -> Result<(), EnvError> {
        if !self.configured.contains(device) {
            for (p, w) in &self.defaults_wms {
                self.table.set_dev_param_wms(device, p, w.clone())?;
            }
            for (p, h) in &self.defaults_hyst {
                self.table.set_hysteresis(device, p, *h)?;
            }
            self.configured.insert(device.clone());
        }
        Ok(())
    }

    /// Sets one value (applying the defaults to a device seen for the first time).
    fn set(&mut self, device: &Name, param: &Param, value: f64) -> Result<(), EnvError> {
        self.configure(device)?;
        let now = self.clock.now();
        self.table.set_dev_param(now, device, param, value)
    }

    /// Moves the table's events to the hub and wakes the subscribers.
    fn drain(&mut self) {
        let mut any = false;
        while let Some(ev) = self.table.poll_event() {
            self.hub.publish(&ev);
            any = true;
        }
        self.stats.table_events_lost = self.table.events_lost();
        if any {
            for w in self.wakers.values() {
                w.notify_one();
            }
        }
    }
}

/// The shared state and the driver's wake-up.
struct Shared {
    state: Mutex<State>,
    /// Wakes the driver to re-read `poll_timeout` (a dwell started outside the driver).
    kick: Notify,
}

impl Shared {
    /// The state; a poisoned lock (a panic elsewhere) is taken over, the state is still valid
    /// (every method leaves it consistent between calls).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Environment events on this host: a Linux source and a status receiver feeding a core
/// [`EnvTable`], events to subscribers. Closes (tasks stop, streams end) when dropped.
pub struct EnvMonitor {
    shared: Arc<Shared>,
    /// Tells the tasks to stop.
    stop: watch::Sender<bool>,
    /// The tasks, until [`EnvMonitor::wait_idle`] has seen them end.
    tasks: Mutex<Vec<JoinHandle<()>>>,
    status_addr: Option<SocketAddr>,
    queue_events: usize,
}

impl EnvMonitor {
    /// Starts the poller (and the status receiver if configured). Must be called inside a
    /// tokio runtime; the first poll happens at once.
    pub fn start(config: EnvOptions) -> Result<EnvMonitor, EnvMonitorError> {
        let (stop, stopped) = watch::channel(false);
        let handle =
            tokio::runtime::Handle::try_current().map_err(|_| EnvMonitorError::NoRuntime)?;
        if config.period < MIN_PERIOD {
            return Err(EnvMonitorError::PeriodTooShort(config.period));
        }
        for (_, h) in &config.default_hysteresis {
            h.validate()?;
        }
        if config.queue_events == 0 {
            return Err(EnvError::ZeroCapacity("subscriber queue").into());
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                clock: Clock::new(),
                table: EnvTable::new(),
                hub: EventHub::new(),
                wakers: BTreeMap::new(),
                configured: Default::default(),
                defaults_wms: config.default_watermarks.clone(),
                defaults_hyst: config.default_hysteresis.clone(),
                stats: MonitorStats::default(),
                availability_pushed: false,
                stopped: false,
            }),
            kick: Notify::new(),
        });
        let mut tasks = Vec::new();
        let mut status_addr = None;
        if let Some(sc) = &config.status {
            let mut verifier = StatusVerifier::new();
            for p in &sc.peers {
                verifier.add_peer(p.addr, p.key_id, p.key.clone())?;
            }
            let socket = status::bind(sc.listen, &handle)?;
            status_addr = socket.local_addr().ok();
            tasks.push(handle.spawn(status::receive(
                shared.clone(),
                socket,
                verifier,
                stopped.clone(),
            )));
        }
        if config.link_events {
            let opened = {
                let _guard = handle.enter();
                netlink::LinkSocket::open().and_then(|mut s| s.request_dump().map(|()| s))
            };
            match opened {
                Ok(socket) => {
                    shared.lock().availability_pushed = true;
                    tasks.push(handle.spawn(netlink::listen(
                        shared.clone(),
                        socket,
                        config.interfaces.clone(),
                        stopped.clone(),
                    )));
                }
                Err(e) => tracing::warn!("rtnetlink unavailable ({e}); availability is polled"),
            }
        }
        let source = LinuxSource::new(config.paths.clone(), config.interfaces.clone());
        tasks.push(handle.spawn(drive(shared.clone(), source, config.period, stopped)));
        Ok(EnvMonitor {
            shared,
            stop,
            tasks: Mutex::new(tasks),
            status_addr,
            queue_events: config.queue_events,
        })
    }

    /// The address the status receiver is bound to, if it runs.
    pub fn status_addr(&self) -> Option<SocketAddr> {
        self.status_addr
    }

    /// A stream of the events of `param` on `device` that violate one of `levels`
    /// ([`LevelMask::ALL`] for all). More requests can be added with [`EventStream::also`].
    pub fn subscribe(
        &self,
        device: &str,
        param: Param,
        levels: LevelMask,
    ) -> Result<EventStream, EnvMonitorError> {
        let device = Name::new(device)?;
        let mut st = self.shared.lock();
        let id = st.hub.subscribe(self.queue_events)?;
        if let Err(e) = st.hub.request_event(id, &device, &param, levels) {
            let _ = st.hub.unsubscribe(id);
            return Err(e.into());
        }
        let waker = Arc::new(Notify::new());
        st.wakers.insert(id, waker.clone());
        Ok(EventStream {
            id,
            shared: self.shared.clone(),
            waker,
        })
    }

    /// Sets the levels of `param` on `device` (core's `set_dev_param_wms`: the current value
    /// becomes the baseline, no event).
    pub fn set_watermarks(
        &self,
        device: &str,
        param: Param,
        watermarks: Watermarks,
    ) -> Result<(), EnvMonitorError> {
        let device = Name::new(device)?;
        let mut st = self.shared.lock();
        // The defaults first, so levels set for one parameter do not leave the others without
        // theirs.
        st.configure(&device)?;
        st.table.set_dev_param_wms(&device, &param, watermarks)?;
        Ok(())
    }

    /// Sets the hysteresis (smoothing, dead band, minimum dwell) of `param` on `device`.
    pub fn set_hysteresis(
        &self,
        device: &str,
        param: Param,
        hysteresis: Hysteresis,
    ) -> Result<(), EnvMonitorError> {
        let device = Name::new(device)?;
        let mut st = self.shared.lock();
        st.configure(&device)?;
        st.table.set_hysteresis(&device, &param, hysteresis)?;
        drop(st);
        self.shared.kick.notify_one();
        Ok(())
    }

    /// Sets a value the host knows by other means (cost, energy, …) now; events are published
    /// before this returns.
    pub fn set_dev_param(
        &self,
        device: &str,
        param: Param,
        value: f64,
    ) -> Result<(), EnvMonitorError> {
        let device = Name::new(device)?;
        let mut st = self.shared.lock();
        st.set(&device, &param, value)?;
        st.drain();
        drop(st);
        self.shared.kick.notify_one();
        Ok(())
    }

    /// Every parameter of `device` that has a value.
    pub fn get_dev_params(&self, device: &str) -> Result<Vec<ParamReading>, EnvMonitorError> {
        let device = Name::new(device)?;
        Ok(self.shared.lock().table.get_dev_params(&device))
    }

    /// The monitor's counters.
    pub fn stats(&self) -> MonitorStats {
        let st = self.shared.lock();
        MonitorStats {
            availability_pushed: st.availability_pushed,
            ..st.stats
        }
    }
}

impl EnvMonitor {
    /// Stops the monitor: its tasks return, and every stream ends once its queued events
    /// are read. [`EnvMonitor::wait_idle`] waits for the tasks.
    pub fn close(&self) {
        self.stop.send_replace(true);
        let mut st = self.shared.lock();
        st.stopped = true;
        for w in st.wakers.values() {
            w.notify_one();
        }
    }

    /// Waits until every task of the monitor has returned (after [`EnvMonitor::close`]).
    pub async fn wait_idle(&self) {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            // A task that panicked has ended all the same.
            let _ = t.await;
        }
    }
}

impl Drop for EnvMonitor {
    fn drop(&mut self) {
        self.close();
    }
}

/// `f`'s output, or `None` once `stop` says the monitor is closing (or is gone).
async fn until_stopped<F: std::future::Future>(
    stop: &mut watch::Receiver<bool>,
    f: F,
) -> Option<F::Output> {
    tokio::select! {
        r = f => Some(r),
        _ = stop.wait_for(|s| *s) => None,
    }
}

/// The poller: reads the Linux source every `period`, commits dwells at the table's
/// `poll_timeout`, publishes events.
async fn drive(
    shared: Arc<Shared>,
    mut source: LinuxSource,
    period: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut next_poll = Instant::now();
    loop {
        let now = Instant::now();
        if now >= next_poll {
            // File reads are a few small sysfs files: done inline, without the lock.
            let (samples, errors) = source.poll(now);
            let mut st = shared.lock();
            st.stats.polls += 1;
            st.stats.read_errors += errors.len() as u64;
            for e in &errors {
                tracing::debug!("environment source: {e}");
            }
            for s in samples {
                if st.availability_pushed && s.param == Param::Availability {
                    continue; // the netlink listener's (see `netlink`)
                }
                if let Err(e) = st.set(&s.device, &s.param, s.value) {
                    tracing::debug!("environment source: {} {}: {e}", s.device, s.param);
                }
            }
            st.drain();
            next_poll += period;
            if next_poll < now {
                next_poll = now + period;
            }
        }
        let deadline = {
            let mut st = shared.lock();
            let t = st.clock.now();
            st.table.handle_timeout(t);
            st.drain();
            st.table
                .poll_timeout()
                .map_or(next_poll, |t| st.clock.instant_of(t).min(next_poll))
        };
        let wait = async {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline.into()) => {}
                _ = shared.kick.notified() => {}
            }
        };
        if until_stopped(&mut stop, wait).await.is_none() {
            return;
        }
    }
}

/// A subscriber's events; ends (`recv` returns `None`) when the monitor is dropped.
/// Dropping it unsubscribes.
pub struct EventStream {
    id: SubscriberId,
    shared: Arc<Shared>,
    waker: Arc<Notify>,
}

impl EventStream {
    /// Adds (or replaces) the request for `param` on `device`.
    pub fn also(
        &self,
        device: &str,
        param: Param,
        levels: LevelMask,
    ) -> Result<(), EnvMonitorError> {
        let device = Name::new(device)?;
        self.shared
            .lock()
            .hub
            .request_event(self.id, &device, &param, levels)?;
        Ok(())
    }

    /// The next delivery, waiting for it; `None` once the monitor has stopped and the queue
    /// is empty.
    pub async fn recv(&mut self) -> Option<Delivery> {
        loop {
            {
                let mut st = self.shared.lock();
                if let Ok(Some(d)) = st.hub.poll(self.id) {
                    return Some(d);
                }
                if st.stopped {
                    return None;
                }
            }
            self.waker.notified().await;
        }
    }

    /// The next delivery if one is queued.
    pub fn try_recv(&mut self) -> Option<Delivery> {
        self.shared.lock().hub.poll(self.id).ok().flatten()
    }

    /// Events this subscriber lost in all (its queue was full).
    pub fn lost_total(&self) -> u64 {
        self.shared.lock().hub.lost_total(self.id).unwrap_or(0)
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        let _ = st.hub.unsubscribe(self.id);
        st.wakers.remove(&self.id);
    }
}

#[cfg(test)]
mod tests;
