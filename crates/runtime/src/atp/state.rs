//! What an ATP endpoint's driver and its application's send path share: core's endpoint and
//! each connection's [`Port`], under one lock. A send is admitted in the caller's task
//! ([`DirectSend`]) — core decides, as before, but without a command to the driver and a
//! reply back, two thread hand-offs per message — and the driver is only woken to send it
//! (quinn's design: its streams write into the connection's state under a lock and wake the
//! connection's driver). The lock is held for core calls only, never across a syscall.

use super::app;
use crate::clock::Clock;
use crate::driver;
use crate::error::{ConnectionError, SendError};
use crate::message::command::{ConnOp, DirectSend, Submitted};
use crate::message::port::Port;
use crate::message::{ConnectionEvent, ConnectionStats, Message};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{ConnEvent, ConnectionId, Endpoint};
use adaptnet_core::nai::{QueueId, SendOptions};
use adaptnet_core::session::CloseReason;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Core's endpoint, the connections' ports, and the receive side's flow-control bookkeeping.
#[derive(Debug)]
pub(super) struct State {
    pub(super) endpoint: Endpoint,
    pub(super) ports: HashMap<u64, Port>,
    /// Per connection, what its application had read when core was last told (flow
    /// control): messages, bytes.
    taken_told: HashMap<u64, (u64, u64)>,
    /// The receive window every connection advertises, bytes.
    window_bytes: u64,
    /// Per connection, delivered messages waiting for room in the inbox's bound in
    /// messages (the window bounds them with the rest of what the receiver holds).
    staged: HashMap<u64, VecDeque<Message>>,
    /// The latest time either side handed core: core's time never goes back, whichever
    /// side calls (the driver may have read its clock before a send took the lock).
    floor: Time,
}

impl State {
    /// `now`, or the latest time core was given if that is later.
    pub(super) fn at(&mut self, now: Time) -> Time {
        self.floor = self.floor.max(now);
        self.floor
    }

    /// Submits a message on connection `id` (`None`: the connection is gone).
    fn submit(
        &mut self,
        now: Time,
        id: u64,
        queue: QueueId,
        data: bytes::Bytes,
        opts: SendOptions,
    ) -> Option<Result<Submitted, SendError>> {
        let port = self.ports.get_mut(&id)?;
        let conn = self.endpoint.connection_mut(ConnectionId(id))?;
        if let Some(why) = port.closing() {
            return Some(Err(why.clone().into()));
        }
        Some(app::submit(conn, now, queue, data, opts).map(|m| port.submitted(m)))
    }

    /// Hands connection `id`'s staged messages to its inbox while it has room.
    fn unstage(&mut self, id: u64) {
        let (Some(port), Some(staged)) = (self.ports.get_mut(&id), self.staged.get_mut(&id)) else {
            return;
        };
        while port.has_room()
            && let Some(m) = staged.pop_front()
        {
            // Within the window, so within the inbox's bytes: nothing to close for.
            let _ = port.deliver(m);
        }
        if staged.is_empty() {
            self.staged.remove(&id);
        }
    }

    /// Returns to each connection's window what its application read since the last call,
    /// and asks the inbox for a wake-up when the next eighth of the window has been read
    /// (the receiver's threshold for a window update), so a sender waiting on a full window
    /// is not left waiting for an unrelated wake-up.
    pub(super) fn return_window(&mut self) {
        let ids: Vec<u64> = self.staged.keys().copied().collect();
        for id in ids {
            self.unstage(id);
        }
        let step = (self.window_bytes / 8).max(1);
        for (id, port) in &self.ports {
            let Some(conn) = self.endpoint.connection_mut(ConnectionId(*id)) else {
                continue;
            };
            let (messages, bytes) = port.taken();
            let told = self.taken_told.entry(*id).or_default();
            if (messages, bytes) != *told {
                conn.handle_consumed(
                    messages.saturating_sub(told.0),
                    bytes.saturating_sub(told.1),
                );
                *told = (messages, bytes);
            }
            if conn.receiver().held_bytes() > 0 {
                port.wake_when_taken(bytes.saturating_add(step));
            }
        }
    }

    /// Closes connection `id` from this side for `why` (after `linger` for live messages).
    pub(super) fn close(&mut self, now: Time, id: u64, why: ConnectionError, linger: Duration) {
        if let Some(port) = self.ports.get_mut(&id) {
            port.close_locally(why);
            self.endpoint.close(now, ConnectionId(id), linger);
        }
    }

    /// A request about connection `id` from one of its handles.
    pub(super) fn connection_op(&mut self, now: Time, id: u64, op: ConnOp) {
        let op = match op {
            ConnOp::Close { linger } => {
                self.close(now, id, ConnectionError::LocallyClosed, linger);
                return;
            }
            ConnOp::Send {
                queue,
                data,
                opts,
                reply,
            } => {
                // A connection gone drops the reply: the handle reports the connection's end.
                if let Some(r) = self.submit(now, id, queue, data, opts) {
                    let _ = reply.send(r);
                }
                return;
            }
            op => op,
        };
        // A connection the application no longer has a port for is gone to it.
        if !self.ports.contains_key(&id) {
            return;
        }
        let Some(conn) = self.endpoint.connection_mut(ConnectionId(id)) else {
            return;
        };
        match op {
            ConnOp::Control { id, op, reply } => {
                let _ = reply.send(app::control(conn, now, id, op));
            }
            ConnOp::CreateQueue { reply } => {
                let _ = reply.send(app::create_queue(conn));
            }
            ConnOp::RegisterBandwidthRange { low, high, reply } => {
                let _ = reply.send(app::register_bandwidth_range(conn, low, high));
            }
            ConnOp::Stats { reply } => {
                let _ = reply.send(ConnectionStats::Atp(app::stats(conn)));
            }
            ConnOp::Send { .. } | ConnOp::Close { .. } => {}
        }
    }

    /// One event of connection `id`.
    pub(super) fn connection_event(&mut self, now: Time, id: ConnectionId, ev: ConnEvent) {
        let Some(port) = self.ports.get_mut(&id.0) else {
            return;
        };
        match ev {
            ConnEvent::Nai(ev) => port.nai_event(ev),
            ConnEvent::Delivered(d) => {
                let message = Message {
                    id: d.id,
                    priority: d.priority,
                    data: d.data.unwrap_or_default(),
                };
                // Flow control: core's window is at most the bytes the inbox holds, and core
                // refuses a peer that passes it, so the inbox's bytes are never passed. Its
                // bound in messages may be: those wait here (a read makes room and wakes
                // the driver). Should the bytes be passed (a bug), the connection is closed
                // rather than the message dropped: its sender was told it was delivered.
                let staged = self.staged.entry(id.0).or_default();
                if !staged.is_empty() || !port.has_room() {
                    staged.push_back(message);
                } else {
                    self.staged.remove(&id.0);
                    if let Some(too_slow) = port.deliver(message) {
                        tracing::error!(?id, "receive window passed: closing");
                        self.close(now, id.0, too_slow, Duration::ZERO);
                    }
                }
            }
            ConnEvent::Discarded(m) => port.event(ConnectionEvent::Discarded(m)),
            ConnEvent::Closed(reason) => {
                tracing::info!(?id, ?reason, "ATP connection ended");
                self.taken_told.remove(&id.0);
                if let Some(mut port) = self.ports.remove(&id.0) {
                    // What was delivered stays readable after the end, staged or not.
                    for m in self.staged.remove(&id.0).into_iter().flatten() {
                        let _ = port.deliver(m);
                    }
                    let why = port.closing().cloned().unwrap_or_else(|| closed_by(reason));
                    port.end(why);
                }
            }
        }
    }
}

/// Why a connection this side did not close ended: its own idle timeout, or the peer's CLOSE
/// (a peer's `Idle` means the peer timed out hearing nothing from here — a timeout all the
/// same).
fn closed_by(reason: CloseReason) -> ConnectionError {
    match reason {
        CloseReason::Idle => ConnectionError::TimedOut,
        r => ConnectionError::ClosedByPeer(r),
    }
}

/// The [`State`] under its lock, with the endpoint's clock and its driver's wake-up.
#[derive(Debug)]
pub(super) struct SharedState {
    state: Mutex<State>,
    clock: Clock,
    driver: Arc<driver::Shared>,
}

impl SharedState {
    /// Core's `endpoint` with no connection yet; `window_bytes` is the receive window every
    /// connection advertises.
    pub(super) fn new(
        endpoint: Endpoint,
        window_bytes: u64,
        clock: Clock,
        driver: Arc<driver::Shared>,
    ) -> SharedState {
        SharedState {
            state: Mutex::new(State {
                endpoint,
                ports: HashMap::new(),
                taken_told: HashMap::new(),
                window_bytes,
                staged: HashMap::new(),
                floor: Time::ZERO,
            }),
            clock,
            driver,
        }
    }

    /// The state, locked. A panic while it was held (a bug in core) left it as it was;
    /// the driver's task has ended then, and every handle learns the endpoint's end.
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl DirectSend for SharedState {
    fn send(
        &self,
        conn: u64,
        queue: QueueId,
        data: bytes::Bytes,
        opts: SendOptions,
    ) -> Option<Result<Submitted, SendError>> {
        let r = {
            let mut state = self.lock();
            let now = state.at(self.clock.now());
            state.submit(now, conn, queue, data, opts)?
        };
        // The driver sends what was admitted; if it is busy, this only leaves it a permit to
        // look again before it next sleeps.
        self.driver.wake();
        Some(r)
    }
}
