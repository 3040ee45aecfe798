//! The one driver loop every endpoint runs (DESIGN.md, "The real engine"): a task on the
//! caller's tokio runtime — no thread of its own — that waits on
//!
//! * its I/O (a socket readable, or writable while output is stalled),
//! * the earliest `poll_timeout` of the state machines it drives,
//! * an application command (bounded channel),
//! * a wake-up from the application's side (a connection's last handle dropped, room made in
//!   a receive queue, the endpoint closed or dropped),
//!
//! then feeds core (`handle_*`), runs the timers that are due, and drains `poll_transmit` to
//! its I/O and `poll_event` to the application. A protocol plugs in by implementing
//! [`Protocol`] — a plain set of functions over its own state; the loop, the shutdown (close
//! every connection, flush what that sends, bounded by a timeout), the drop notices and the
//! "every connection learns why" at the end are written here once.
//!
//! The I/O is the protocol's: a UDP endpoint waits with [`UdpIo::ready`](crate::udp::UdpIo::ready)
//! and reads and writes in batches through [`udp`]; a protocol over kernel TCP waits on its
//! streams' readiness. Either way the loop's shape is this one.
//!
//! # Lifecycle
//! An endpoint's handles share one [`Shared`]: dropping the endpoint's last handle (or
//! calling its `close`) requests a stop; the loop then calls [`Protocol::close_all`], keeps
//! running until [`Protocol::is_idle`] (the CLOSEs are out) or the shutdown timeout, calls
//! [`Protocol::finish`] and marks the endpoint done ([`Shared::wait_done`], the endpoint's
//! `wait_idle`). A connection handle's last drop is a [`Shared::dropped`] notice; the loop
//! hands it to [`Protocol::handle_dropped`], which closes the connection gracefully. Nothing
//! here aborts a task: a stop is always a shutdown the protocol runs.

pub(crate) mod udp;

use crate::clock::Clock;
use crate::error::ConnectionError;
use adaptnet_core::Time;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Notify, mpsc, watch};

/// A protocol's endpoint as the driver loop sees it. Call order per wake-up: one of
/// `handle_io` / `handle_command` / nothing (a timer or a wake-up), then `handle_dropped`
/// for each dropped connection, `handle_timeout` if `poll_timeout` is due, `dispatch`,
/// `flush`, `dispatch` again.
pub(crate) trait Protocol: Send + 'static {
    /// What application handles ask of the endpoint.
    type Command: Send + 'static;

    /// Resolves when the I/O may have input, or may take output that is stalled. It is
    /// dropped unfinished whenever another branch wins, so it must hold no state of its own.
    fn io_ready(&mut self) -> impl Future<Output = io::Result<()>> + Send + '_;

    /// Reads what the I/O holds (a bounded amount: a few batches) and feeds core, each input
    /// at its arrival time. An error stops the endpoint.
    fn handle_io(&mut self, time: &mut Timekeeper) -> io::Result<()>;

    /// One application command.
    fn handle_command(&mut self, now: Time, command: Self::Command);

    /// The last application handle of connection `id` was dropped: close it gracefully.
    fn handle_dropped(&mut self, now: Time, id: u64);

    /// When `handle_timeout` should next run.
    fn poll_timeout(&self) -> Option<Time>;

    /// Runs the timers due at `now`.
    fn handle_timeout(&mut self, now: Time);

    /// Drains core's `poll_transmit` into the I/O (stopping where the I/O is full). An error
    /// stops the endpoint.
    fn flush(&mut self, time: &mut Timekeeper) -> io::Result<()>;

    /// Drains core's `poll_event` to the application: messages, events, outcomes, ends.
    fn dispatch(&mut self, now: Time);

    /// The endpoint is stopping: close every connection (their CLOSEs go out on the next
    /// flushes) and accept no more.
    fn close_all(&mut self, now: Time);

    /// Nothing is left to send or to close: the endpoint may stop.
    fn is_idle(&self) -> bool;

    /// The loop has ended: every connection still known ends with `why`, every live message
    /// gets its outcome, every waiting caller an answer.
    fn finish(&mut self, why: ConnectionError);
}

/// What an endpoint's handles and its driver share: wake-ups, the stop request, the drop
/// notices of connections, and whether the driver has finished.
#[derive(Debug)]
pub(crate) struct Shared {
    wake: Notify,
    stop: AtomicBool,
    /// Connections whose last handle was dropped, not yet seen by the driver. Each live
    /// connection is pushed at most once, so this holds at most as many ids as the endpoint
    /// has connections (a bound by construction).
    dropped: Mutex<Vec<u64>>,
    done: watch::Sender<bool>,
}

impl Shared {
    /// A fresh endpoint's shared state.
    pub(crate) fn new() -> Arc<Shared> {
        Arc::new(Shared {
            wake: Notify::new(),
            stop: AtomicBool::new(false),
            dropped: Mutex::new(Vec::new()),
            done: watch::Sender::new(false),
        })
    }

    /// Wakes the driver (e.g. room was made in a receive queue it waits on).
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Asks the driver to close every connection and stop.
    pub(crate) fn request_stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Whether a stop was asked for (the endpoint closed or dropped).
    pub(crate) fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The last handle of connection `id` was dropped.
    pub(crate) fn dropped(&self, id: u64) {
        self.dropped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(id);
        self.wake.notify_one();
    }

    fn take_dropped(&self) -> Vec<u64> {
        std::mem::take(&mut *self.dropped.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether the driver has finished (every connection ended, the task gone).
    pub(crate) fn is_done(&self) -> bool {
        *self.done.borrow()
    }

    /// Resolves once the driver has finished.
    pub(crate) async fn wait_done(&self) {
        let mut rx = self.done.subscribe();
        // The sender lives in `self`: `wait_for` fails only if it is gone, which it is not.
        let _ = rx.wait_for(|done| *done).await;
    }
}

/// Marks the driver done when the loop ends — also if its task is dropped mid-loop (the
/// runtime shutting down) or panics, so `wait_idle` never waits for a driver that is gone.
struct DoneGuard(Arc<Shared>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        self.0.done.send_replace(true);
    }
}

/// The driver's time: core times from one [`Clock`], never going backwards (a kernel arrival
/// stamp is kept at or after the last time handed to core).
#[derive(Debug)]
pub(crate) struct Timekeeper {
    clock: Clock,
    last: Time,
}

impl Timekeeper {
    /// Time on `clock` (endpoints that share a state machine with others share its clock).
    pub(crate) fn new(clock: Clock) -> Timekeeper {
        Timekeeper {
            clock,
            last: Time::ZERO,
        }
    }

    /// The current time, remembered as the floor for what follows.
    pub(crate) fn now(&mut self) -> Time {
        self.last = self.clock.now().max(self.last);
        self.last
    }

    /// When an input stamped `at` by the kernel arrived (now without a stamp), kept between
    /// the last time handed to core and now.
    pub(crate) fn arrival(&mut self, at: Option<SystemTime>) -> Time {
        self.last = self.clock.arrival(at, self.last).max(self.last);
        self.last
    }

    /// A core time as an `Instant`, for the timer.
    pub(crate) fn instant_of(&self, t: Time) -> Instant {
        self.clock.instant_of(t)
    }
}

/// Starts `proto`'s loop ([`run`]) as a task on the current tokio runtime, on `clock`'s time.
pub(crate) fn spawn<P: Protocol>(
    proto: P,
    clock: Clock,
    commands: mpsc::Receiver<P::Command>,
    shared: Arc<Shared>,
    shutdown_timeout: Duration,
) {
    let time = Timekeeper::new(clock);
    tokio::spawn(run(proto, time, commands, shared, shutdown_timeout));
}

/// Runs `proto` until the endpoint stops: the loop of the module docs. `shutdown_timeout`
/// bounds how long a stopping endpoint waits for its CLOSEs to leave.
pub(crate) async fn run<P: Protocol>(
    mut proto: P,
    mut time: Timekeeper,
    mut commands: mpsc::Receiver<P::Command>,
    shared: Arc<Shared>,
    shutdown_timeout: Duration,
) {
    let _done = DoneGuard(shared.clone());
    // When stopping: the time by which the endpoint stops even if CLOSEs are still queued.
    let mut stopping_until: Option<Time> = None;
    let why = loop {
        let now = time.now();
        if stopping_until.is_none() && shared.stop_requested() {
            proto.close_all(now);
            stopping_until = Some(now + shutdown_timeout);
        }
        for id in shared.take_dropped() {
            proto.handle_dropped(now, id);
        }
        // Timers fire at their deadlines whatever else keeps the loop busy.
        if proto.poll_timeout().is_some_and(|t| t <= now) {
            proto.handle_timeout(now);
        }
        // Events first: a message core delivered reaches the application before the
        // acknowledgement that tells its sender so leaves; then again for what sending did.
        proto.dispatch(time.now());
        if let Err(e) = proto.flush(&mut time) {
            tracing::warn!(error = %e, "endpoint stopped: sending failed");
            break ConnectionError::from_io(e);
        }
        proto.dispatch(time.now());
        if let Some(until) = stopping_until {
            if proto.is_idle() {
                break ConnectionError::EndpointClosed;
            }
            if time.now() >= until {
                tracing::warn!("endpoint stopped before everything it had to send was sent");
                break ConnectionError::EndpointClosed;
            }
        }
        let timer = match (proto.poll_timeout(), stopping_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let wake_at = timer.map(|t| time.instant_of(t));
        let sleep = async {
            match wake_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            ready = proto.io_ready() => {
                if let Err(e) = ready.and_then(|()| proto.handle_io(&mut time)) {
                    tracing::warn!(error = %e, "endpoint stopped: receiving failed");
                    break ConnectionError::from_io(e);
                }
            }
            // A stopping endpoint takes no new work; what waits is answered "closed" when the
            // channel is dropped with the loop.
            command = commands.recv(), if stopping_until.is_none() => match command {
                Some(c) => proto.handle_command(time.now(), c),
                // Unreachable while the endpoint handle holds a sender; a stop all the same.
                None => shared.request_stop(),
            },
            () = shared.wake.notified() => {}
            () = sleep => {}
        }
    };
    proto.finish(why);
    // Everything the endpoint held goes before it is marked done: waiting callers have their
    // answers by the time `wait_idle` returns.
    drop(proto);
    drop(commands);
}
