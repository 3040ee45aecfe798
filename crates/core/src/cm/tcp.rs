//! TCP/CM (papers/003 §3.2.1; RFC 3124 §5.1.1): the existing [`crate::tcp::Connection`] with a
//! congestion controller that delegates to the host's CM. Loss recovery (fast retransmit,
//! NewReno partial ACKs, RTO) and flow control stay in the stream unchanged; only "may I send
//! now?" and the congestion bookkeeping move to the CM.
//!
//! RFC 3124 §5.1.1 gives TCP "its own outstanding window (tcp_ownd) estimate": bytes notified
//! to the CM and not yet reported back through `cm_update`. The CM limits the macroflow's
//! outstanding bytes to its window (RFC 3124 §5.2, see `macroflow.rs`), so every byte TCP
//! sends must eventually be reported as received or lost, exactly once. The mapping
//! (`cm_update(nrecd, nlost, mode, rtt)`, with `MSS` for the RFC's `avg_pkt_size`):
//!
//! | stream event | CM call |
//! |---|---|
//! | `send_permit` with no grant | `cm_request(segment)`; `Blocked` until the grant |
//! | `on_sent` (any segment, retransmissions too) | `cm_notify(nsent)`; `tcp_ownd += nsent` |
//! | `on_ack` / end of recovery | `cm_update(tcp_ownd − in_flight, 0, NO_CONGESTION, rtt)` (input step 3) |
//! | third duplicate ACK | `cm_update(3·MSS, MSS, LOSS_FEEDBACK)` (input step 4) |
//! | further duplicate ACK in recovery | `cm_update(MSS, 0, NO_CONGESTION)` (input step 4) |
//! | partial ACK | `cm_update(MSS, MSS, NO_CONGESTION, rtt)` (input step 5) |
//! | RTO | `cm_update(0, MSS, NO_FEEDBACK)`: the CM writes off the flow's outstanding bytes |
//! | ECN echo | `cm_update(0, 0, EXPLICIT_CONGESTION)` |
//!
//! After an RTO the stream goes back to the first unacknowledged byte, so until the data that
//! was outstanding at the timeout is acknowledged, `in_flight` (highest sent − acknowledged)
//! still counts written-off bytes that were never resent; an ACK then reports the acknowledged
//! bytes it covers, at most `tcp_ownd` (the resent bytes).
//!
//! # How a per-connection controller reaches the host-wide CM
//!
//! Through a [`CmHandle`], an `Arc<Mutex<CongestionManager>>` shared by the engine and every
//! TCP/CM controller of the host, plus the controller's [`FlowId`]. The alternatives were a
//! command queue that the engine forwards (the controller would learn of a grant only after an
//! extra engine round trip, and `send_permit` could never answer `Now` to a grant issued
//! in the same instant) or making the CM own the connections (a second TCP driver). A shared
//! handle keeps the stream's synchronous `send_permit` contract. It is `Send` and `Sync`, so
//! the connections of one host may run on several threads (the runtime's stream endpoints
//! are tasks on the application's multi-threaded runtime); the simulator is single-threaded
//! and never finds the lock taken except by its own borrow (below), so its runs do not change.
//!
//! Discipline for engines: never hold a borrow of the handle while calling into a connection
//! (`poll_transmit`, `handle_segment`, `handle_timeout`); the controller borrows it then. A
//! controller that finds the CM already borrowed — by its own engine, or by another thread —
//! answers `Blocked` (it is polled again) and queues its reports (`cm_notify`, `cm_update`)
//! on the handle; the borrow's [`CmGuard`] applies them, in order, when it ends. No report is
//! lost to a busy CM. (Borrowing the handle twice on one thread is an engine bug: with a
//! `Mutex` it blocks for good, so keep every borrow to one statement or one small block.)
//!
//! After any CM event or timer on a host, the engine re-polls that host's connections: a
//! controller answers `Blocked` until its grant arrives (see `cc::SendPermit::Blocked`).
//! The stream does not pass the handshake's RTT sample to its controller; an engine may seed
//! the CM with it on `TcpEvent::Connected` through [`CmController::seed_rtt`].

use super::{
    CmError, CongestionManager, Feedback, FeedbackSource, FlowId, FlowKey, FlowOptions, LossMode,
    PeerAddr,
};
use crate::cc::{AckInfo, CongestionController, CongestionSignal, SendPermit};
use crate::time::Time;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

/// Most controller reports (`cm_notify`, `cm_update`) waiting for the CM while an engine holds
/// it borrowed. A controller makes at most a few per segment, and the engine's borrows last
/// one call, so this is never reached in practice; past it reports are counted and dropped.
const MAX_DEFERRED_REPORTS: usize = 65_536;

/// A report a controller made while the CM was borrowed: applied, in order, when the borrow
/// ends (see [`CmGuard`]).
#[derive(Clone, Copy, Debug)]
enum Deferred {
    Notify(Time, FlowId, u64),
    Update(Time, FlowId, Feedback),
}

#[derive(Debug)]
struct Shared {
    cm: Mutex<CongestionManager>,
    /// Reports waiting for the CM. Taken only while `cm` is held or in `report`'s fallback,
    /// never the other way round (no lock-order cycle).
    deferred: Mutex<VecDeque<Deferred>>,
    dropped: AtomicU64,
}

/// A panic while the CM was held leaves its state as consistent as the panicking call left
/// it; later calls keep using it rather than poisoning every connection of the host.
fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The lock if nobody holds it (a poisoned lock counts as free, see [`relock`]).
fn try_relock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// A shared handle to a host's [`CongestionManager`].
///
/// A controller's report can never be lost to a busy CM: when the CM is borrowed, the report
/// is queued on the handle and applied, in order, by the [`CmGuard`] of the borrow when it
/// ends (or by the next controller call that finds the CM free).
#[derive(Clone, Debug)]
pub struct CmHandle(Arc<Shared>);

/// A mutable borrow of the CM; on drop it applies the reports controllers queued meanwhile.
#[derive(Debug)]
pub struct CmGuard<'a> {
    cm: MutexGuard<'a, CongestionManager>,
    shared: &'a Shared,
}

impl std::ops::Deref for CmGuard<'_> {
    type Target = CongestionManager;
    fn deref(&self) -> &CongestionManager {
        &self.cm
    }
}

impl std::ops::DerefMut for CmGuard<'_> {
    fn deref_mut(&mut self) -> &mut CongestionManager {
        &mut self.cm
    }
}

impl Drop for CmGuard<'_> {
    fn drop(&mut self) {
        self.shared.apply_deferred(&mut self.cm);
    }
}

impl Shared {
    fn apply_deferred(&self, cm: &mut CongestionManager) {
        // Reports are only queued while the CM is borrowed, and this runs inside the borrow:
        // nothing is queued while the queue is drained.
        let queued: Vec<Deferred> = relock(&self.deferred).drain(..).collect();
        for d in queued {
            // A report for a flow closed meanwhile is moot.
            let _ = match d {
                Deferred::Notify(now, flow, bytes) => cm.notify(now, flow, bytes),
                Deferred::Update(now, flow, fb) => cm.update(now, flow, fb),
            };
        }
    }

    /// Applies `report` now if the CM is free, else queues it. Returns false only if the
    /// CM refused it (unknown flow) or the queue was full.
    fn report(&self, report: Deferred) -> bool {
        match try_relock(&self.cm) {
            Some(mut cm) => {
                self.apply_deferred(&mut cm);
                match report {
                    Deferred::Notify(now, flow, bytes) => cm.notify(now, flow, bytes).is_ok(),
                    Deferred::Update(now, flow, fb) => cm.update(now, flow, fb).is_ok(),
                }
            }
            None => {
                let mut q = relock(&self.deferred);
                if q.len() >= MAX_DEFERRED_REPORTS {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                q.push_back(report);
                true
            }
        }
    }
}

impl CmHandle {
    /// Wraps a CM.
    pub fn new(cm: CongestionManager) -> CmHandle {
        CmHandle(Arc::new(Shared {
            cm: Mutex::new(cm),
            deferred: Mutex::new(VecDeque::new()),
            dropped: AtomicU64::new(0),
        }))
    }

    /// Borrows the CM (to read it). The same guard as [`CmHandle::borrow_mut`]: waits while
    /// another thread holds it; never call it while this thread holds it (see the module
    /// docs).
    pub fn borrow(&self) -> CmGuard<'_> {
        self.borrow_mut()
    }

    /// Borrows the CM mutably, waiting while another thread holds it; never call it while
    /// this thread holds it (an engine bug, see the module docs). Reports queued by
    /// controllers meanwhile are applied now and when the guard is dropped.
    pub fn borrow_mut(&self) -> CmGuard<'_> {
        let mut cm = relock(&self.0.cm);
        self.0.apply_deferred(&mut cm);
        CmGuard {
            cm,
            shared: &self.0,
        }
    }

    /// Reports waiting for the CM (for tests and diagnostics).
    pub fn deferred_reports(&self) -> usize {
        relock(&self.0.deferred).len()
    }

    /// Reports dropped because the wait queue was full (zero unless an engine held the CM
    /// across tens of thousands of controller calls).
    pub fn dropped_reports(&self) -> u64 {
        self.0.dropped.load(Ordering::Relaxed)
    }

    fn try_with<R>(&self, f: impl FnOnce(&mut CongestionManager) -> R) -> Option<R> {
        let mut cm = try_relock(&self.0.cm)?;
        self.0.apply_deferred(&mut cm);
        Some(f(&mut cm))
    }
}

/// A [`CongestionController`] that asks the CM for every transmission.
#[derive(Debug)]
pub struct CmController {
    cm: CmHandle,
    flow: FlowId,
    /// RFC 3124 §5.1.1 `tcp_ownd`: bytes notified and not yet reported by `cm_update`.
    ownd_bytes: u64,
    /// Bytes that were outstanding at the last RTO and are not yet acknowledged (the CM wrote
    /// them off; the stream resends them go-back-N).
    written_off_bytes: u64,
}

impl CmController {
    /// `cm_open` for a TCP connection to `dest` (feedback from its ACKs, weight 1) and its
    /// controller. Keep the [`FlowId`] to `close` the flow when the connection ends.
    pub fn open(
        cm: &CmHandle,
        now: Time,
        dest: PeerAddr,
        key: FlowKey,
    ) -> Result<(Box<dyn CongestionController>, FlowId), CmError> {
        CmController::open_with(cm, now, dest, key, FlowOptions::acked())
    }

    /// Like [`CmController::open`] with explicit options (e.g. a weight). The feedback source
    /// is always [`FeedbackSource::Acks`]: the controller reports every byte it sends.
    pub fn open_with(
        cm: &CmHandle,
        now: Time,
        dest: PeerAddr,
        key: FlowKey,
        options: FlowOptions,
    ) -> Result<(Box<dyn CongestionController>, FlowId), CmError> {
        let options = FlowOptions {
            feedback: FeedbackSource::Acks,
            ..options
        };
        let flow = cm.borrow_mut().open(now, dest, key, options)?;
        Ok((Box::new(CmController::new(cm.clone(), flow)), flow))
    }

    /// A controller for an already open flow.
    pub fn new(cm: CmHandle, flow: FlowId) -> CmController {
        CmController {
            cm,
            flow,
            ownd_bytes: 0,
            written_off_bytes: 0,
        }
    }

    /// The flow this controller speaks for.
    pub fn flow(&self) -> FlowId {
        self.flow
    }

    /// Gives the CM the handshake's RTT sample (e.g. `conn.rtt().latest()` on `Connected`).
    pub fn seed_rtt(cm: &CmHandle, now: Time, flow: FlowId, rtt: Duration) -> Result<(), CmError> {
        cm.borrow_mut()
            .update(now, flow, Feedback::received(0, Some(rtt)))
    }

    /// `cm_update`; `tcp_ownd` follows what the CM accepted.
    fn update(&mut self, now: Time, fb: Feedback) {
        let flow = self.flow;
        if self.cm.0.report(Deferred::Update(now, flow, fb)) {
            self.ownd_bytes = if fb.mode == LossMode::NoFeedback {
                0
            } else {
                self.ownd_bytes
                    .saturating_sub(fb.nrecd_bytes.saturating_add(fb.nlost_bytes))
            };
        }
    }

    /// RFC 3124 §5.1.1 input step 3: on an ACK for new data, "TCP computes the value of
    /// in_flight (the amount of data in flight) as snd_max-ack-1 [...] TCP then calls
    /// cm_update(streamid, tcp_ownd - in_flight, 0, CM_NO_CONGESTION, rtt)". Bytes the
    /// stream's duplicate ACKs already reported are not reported again.
    fn report_cumulative_ack(&mut self, now: Time, ack: &AckInfo) {
        let nrecd = if self.written_off_bytes > 0 {
            // Go-back-N after an RTO: `in_flight` still counts written-off bytes not resent.
            self.written_off_bytes = self.written_off_bytes.saturating_sub(ack.newly_acked_bytes);
            ack.newly_acked_bytes.min(self.ownd_bytes)
        } else {
            self.ownd_bytes.saturating_sub(ack.bytes_in_flight)
        };
        self.update(now, Feedback::received(nrecd, ack.rtt_sample));
    }
}

impl CongestionController for CmController {
    fn on_sent(&mut self, now: Time, bytes: u64, _retransmission: bool) {
        let flow = self.flow;
        if self.cm.0.report(Deferred::Notify(now, flow, bytes)) {
            self.ownd_bytes = self.ownd_bytes.saturating_add(bytes);
        }
    }

    fn on_ack(&mut self, now: Time, ack: &AckInfo) {
        self.report_cumulative_ack(now, ack);
    }

    fn on_congestion_event(
        &mut self,
        now: Time,
        signal: CongestionSignal,
        bytes_in_flight: u64,
        smss: u64,
    ) {
        let fb = match signal {
            // RFC 3124 §5.1.1 input step 4: "If dup_acks == 3, TCP assumes that a packet was
            // lost and that at least 3 packets arrived to generate these duplicate acks."
            CongestionSignal::DuplicateAcks => Feedback {
                nrecd_bytes: 3 * smss,
                nlost_bytes: smss,
                mode: LossMode::Loss,
                rtt: None,
            },
            // RFC 3124 §5.1.1: "cm_update(streamid, avg_pkt_size, 0, CM_NO_FEEDBACK, 0)".
            CongestionSignal::Timeout => {
                self.written_off_bytes = bytes_in_flight;
                Feedback {
                    nrecd_bytes: 0,
                    nlost_bytes: smss,
                    mode: LossMode::NoFeedback,
                    rtt: None,
                }
            }
            CongestionSignal::Ecn => Feedback {
                nrecd_bytes: 0,
                nlost_bytes: 0,
                mode: LossMode::Ecn,
                rtt: None,
            },
        };
        self.update(now, fb);
    }

    fn on_recovery_dup_ack(&mut self, now: Time, smss: u64) {
        // RFC 3124 §5.1.1 input step 4: "If dup_acks > 3, TCP assumes that a packet has
        // reached the other end and caused this ack to be sent."
        self.update(now, Feedback::received(smss, None));
    }

    fn on_partial_ack(&mut self, now: Time, ack: &AckInfo) {
        // RFC 3124 §5.1.1 input step 5: on a partial ACK "TCP assumes that a packet was lost
        // and that the retransmitted packet has reached the recipient. Therefore, it calls
        // cm_update(streamid, 2 * avg_pkt_size, avg_pkt_size, CM_NO_CONGESTION, rtt)" (the
        // RFC's second argument counts bytes received plus lost). The segments between the
        // two holes were reported by their duplicate ACKs.
        self.update(
            now,
            Feedback {
                nrecd_bytes: ack.smss,
                nlost_bytes: ack.smss,
                mode: LossMode::NoCongestion,
                rtt: ack.rtt_sample,
            },
        );
    }

    fn on_recovery_end(&mut self, now: Time, ack: &AckInfo) {
        self.report_cumulative_ack(now, ack);
    }

    fn send_permit(&mut self, now: Time, _bytes_in_flight: u64, bytes: u64) -> SendPermit {
        let flow = self.flow;
        let granted = self.cm.try_with(|cm| {
            let balance = cm.grant_balance(now, flow).ok()?;
            if balance >= bytes {
                return Some(true);
            }
            // Ask once for what is missing; the grant may come at once.
            if cm.pending_request(flow).ok()? == 0 {
                cm.request(now, flow, bytes - balance).ok()?;
            }
            Some(cm.grant_balance(now, flow).ok()? >= bytes)
        });
        match granted.flatten() {
            Some(true) => SendPermit::Now,
            _ => SendPermit::Blocked,
        }
    }

    fn window(&self) -> u64 {
        try_relock(&self.cm.0.cm)
            .and_then(|cm| {
                let q = cm.query(self.flow).ok()?;
                let srtt = q.srtt?.as_secs_f64();
                Some(crate::convert::f64_u64_sat(q.rate_bytes_per_s? * srtt))
            })
            .unwrap_or(0)
    }

    fn name(&self) -> &'static str {
        "cm"
    }
}
