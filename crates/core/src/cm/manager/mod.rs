//! The host-wide [`CongestionManager`]: the API of papers/003 Figure 8 and RFC 3124 §3, timers,
//! events and probe traffic. Algorithms live in the submodules; this file routes calls.

use super::cache::TemporalCache;
use super::macroflow::Macroflow;
use super::probe::CmPacket;
use super::probe::sender::ProbeSession;
use super::scheduler::PendingRequest;
use super::{
    CmConfig, CmError, CmStats, Feedback, FeedbackSource, FlowId, FlowKey, FlowOptions, FlowQuery,
    LossMode, MacroflowId, PeerAddr, Request, Thresholds,
};
use crate::time::Time;
use grant_queue::GrantQueue;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

mod feedback_and_timers;
mod grant_queue;
mod grants;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TimerKey {
    Macroflow(MacroflowId),
    Probe(PeerAddr),
}

/// The last rate/RTT told to a flow (RFC 3124 `lastrate`).
#[derive(Clone, Copy, Debug)]
struct Notified {
    rate: f64,
    srtt: Duration,
    rttvar: Duration,
}

#[derive(Clone, Debug)]
struct Flow {
    key: FlowKey,
    dest: PeerAddr,
    macroflow: MacroflowId,
    weight: f64,
    /// Receiver hint multiplier (1 without hints).
    hint: f64,
    thresholds: Thresholds,
    feedback: FeedbackSource,
    /// Granted bytes not yet used, grant by grant.
    grants: GrantQueue,
    notified: Option<Notified>,
    rate_event_queued: bool,
    loss_rate: Option<f64>,
    probe_sent_bytes: u64,
    probe_lost_bytes: u64,
    /// Bytes the receiver counted ahead of the interval they were sent in, not yet matched by
    /// that interval's shortfall (see `handle_response`).
    probe_early_bytes: u64,
    /// Bytes notified and not yet reported received or lost by `update` (RFC 3124 §5.2
    /// `ownd`, kept per flow so that one flow's `CM_NO_FEEDBACK` writes off only its own
    /// data). Kept for window-limited flows (`FeedbackSource::Acks`) only.
    ownd_bytes: u64,
    /// The issue time under which the flow's oldest grant sits in its macroflow's
    /// `grant_lapses` index.
    lapse_indexed: Option<Time>,
}

impl Flow {
    /// Puts the flow's oldest grant, and only it, in `mf`'s lapse index (after any change to
    /// its grants or its macroflow).
    fn sync_lapse(&mut self, id: FlowId, mf: &mut Macroflow) {
        let oldest = self.grants.oldest_at();
        if oldest == self.lapse_indexed {
            return;
        }
        if let Some(t) = self.lapse_indexed.take() {
            mf.grant_lapses.remove(&(t, id));
        }
        if let Some(t) = oldest {
            mf.grant_lapses.insert((t, id));
            self.lapse_indexed = Some(t);
        }
    }

    /// Takes the flow out of `mf`'s lapse index (it leaves the macroflow).
    fn unindex_lapse(&mut self, id: FlowId, mf: &mut Macroflow) {
        if let Some(t) = self.lapse_indexed.take() {
            mf.grant_lapses.remove(&(t, id));
        }
    }

    fn effective_weight(&self) -> f64 {
        self.weight * self.hint
    }

    /// Whether the flow's grants need room in the macroflow's window (see `macroflow.rs`).
    fn window_limited(&self) -> bool {
        self.feedback == FeedbackSource::Acks
    }

    /// What the flow counts against its macroflow's window: outstanding plus granted bytes.
    fn window_bytes(&self) -> u64 {
        if self.window_limited() {
            self.ownd_bytes.saturating_add(self.grants.total_bytes())
        } else {
            0
        }
    }
}

/// A probe to send: `packet` goes to the receiver CM at `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmTransmit {
    /// Destination host.
    pub to: PeerAddr,
    /// The packet (emit it with [`CmPacket::emit`]).
    pub packet: CmPacket,
}

/// Information about a macroflow, for traces and tests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MacroflowInfo {
    /// Rate, bytes/s.
    pub rate_bytes_per_s: f64,
    /// Window equivalent (rate × srtt), bytes.
    pub cwnd_bytes: f64,
    /// Slow-start threshold, bytes (infinite before the first loss).
    pub ssthresh_bytes: f64,
    /// Smoothed RTT, if measured.
    pub srtt: Option<Duration>,
    /// Minimum RTT, if measured (or cached).
    pub min_rtt: Option<Duration>,
    /// Exponential aging is in progress.
    pub aging: bool,
    /// Tokens in the pacing bucket, bytes (negative: debt).
    pub tokens_bytes: f64,
    /// Burst allowance, bytes.
    pub burst_bytes: f64,
    /// Bytes of window-limited flows counted against `cwnd_bytes`: outstanding (RFC 3124
    /// `ownd`) plus granted and not yet sent.
    pub window_used_bytes: u64,
    /// Open flows.
    pub flows: usize,
}

/// The Congestion Manager of one host. See the [module docs](super) for the calling pattern.
///
/// Call order: feed inputs (`open`/`request`/`notify`/`update`/`handle_packet`/
/// `handle_timeout`), then drain `poll_transmit(now)` and `poll_event()`, then arm a timer at
/// `poll_timeout()`. Inputs must carry non-decreasing `now`.
///
/// An application sending 10 kB to one destination, with its own feedback (no probes), driving
/// time by hand:
///
/// ```
/// use adaptnet_core::Time;
/// use adaptnet_core::cm::{
///     CmConfig, CmEvent, CongestionManager, Feedback, FlowKey, FlowOptions, PeerAddr, Request,
/// };
/// use std::time::Duration;
///
/// let mut cm = CongestionManager::new(CmConfig { mtu_bytes: 1000, ..CmConfig::default() });
/// let dest = PeerAddr(1);
/// let flow = cm.open(Time::ZERO, dest, FlowKey(1), FlowOptions::implicit())?;
/// // The first feedback (e.g. a handshake) gives the CM an RTT: a rate of cwnd / srtt.
/// cm.update(Time::ZERO, flow, Feedback::received(0, Some(Duration::from_millis(100))))?;
/// // cm_request(id, nbytes, minbytes, latency): 10 kB, in grants of 2 kB, useful for 2 s.
/// let req = Request { bytes: 10_000, min_bytes: 2_000, latency: Some(Duration::from_secs(2)) };
/// cm.request_with(Time::ZERO, flow, req)?;
/// let (mut now, mut sent) = (Time::ZERO, 0);
/// loop {
///     while let Some(ev) = cm.poll_event() {
///         if let CmEvent::Grant { bytes, .. } = ev {
///             // app_notify(nallowed): send `bytes` now, then cm_notify what was sent.
///             sent += bytes;
///             cm.notify(now, flow, bytes)?;
///             // Feedback from the receiver, one RTT later in a real application.
///             cm.update(now, flow, Feedback::received(bytes, None))?;
///         }
///     }
///     if sent >= 10_000 {
///         break;
///     }
///     // Sleep until the CM's next deadline (a grant, here).
///     now = cm.poll_timeout().expect("a grant is due");
///     cm.handle_timeout(now);
/// }
/// let q = cm.query(flow)?; // cm_query: the flow's share of the rate and the path's srtt
/// assert!(q.rate_bytes_per_s.is_some() && q.srtt == Some(Duration::from_millis(100)));
/// assert_eq!(cm.stats().ungranted_bytes, 0);
/// cm.close(now, flow)?;
/// # Ok::<(), adaptnet_core::cm::CmError>(())
/// ```
#[derive(Debug)]
pub struct CongestionManager {
    config: CmConfig,
    flows: BTreeMap<FlowId, Flow>,
    macroflows: BTreeMap<MacroflowId, Macroflow>,
    by_dest: BTreeMap<PeerAddr, MacroflowId>,
    by_key: BTreeMap<(PeerAddr, FlowKey), FlowId>,
    cache: TemporalCache,
    timers: BTreeSet<(Time, TimerKey)>,
    probes: BTreeMap<PeerAddr, ProbeSession>,
    grants: VecDeque<(FlowId, u64)>,
    rate_events: VecDeque<FlowId>,
    /// Requests withdrawn at their deadline: (flow, bytes not granted).
    expired_requests: VecDeque<(FlowId, u64)>,
    transmits: VecDeque<CmTransmit>,
    next_flow: u32,
    next_macroflow: u32,
    stats: CmStats,
}

impl CongestionManager {
    /// A CM with no flows.
    pub fn new(config: CmConfig) -> CongestionManager {
        let cache = TemporalCache::new(config.temporal);
        CongestionManager {
            config,
            flows: BTreeMap::new(),
            macroflows: BTreeMap::new(),
            by_dest: BTreeMap::new(),
            by_key: BTreeMap::new(),
            cache,
            timers: BTreeSet::new(),
            probes: BTreeMap::new(),
            grants: VecDeque::new(),
            rate_events: VecDeque::new(),
            expired_requests: VecDeque::new(),
            transmits: VecDeque::new(),
            next_flow: 0,
            next_macroflow: 0,
            stats: CmStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CmConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &CmStats {
        &self.stats
    }

    fn flow(&self, id: FlowId) -> Result<&Flow, CmError> {
        self.flows.get(&id).ok_or(CmError::UnknownFlow(id))
    }

    fn flow_mut(&mut self, id: FlowId) -> Result<&mut Flow, CmError> {
        self.flows.get_mut(&id).ok_or(CmError::UnknownFlow(id))
    }

    fn check_weight(weight: f64) -> Result<(), CmError> {
        if weight.is_finite() && (1e-6..=1e6).contains(&weight) {
            Ok(())
        } else {
            Err(CmError::InvalidArgument(
                "weight must be within [1e-6, 1e6]",
            ))
        }
    }

    // ----- state maintenance (RFC 3124 §3.1) -----

    /// `cm_open`: a new flow to `dest`, in the destination's macroflow (created, from the
    /// temporal cache if possible, when it is the first).
    pub fn open(
        &mut self,
        now: Time,
        dest: PeerAddr,
        key: FlowKey,
        options: FlowOptions,
    ) -> Result<FlowId, CmError> {
        Self::check_weight(options.weight)?;
        if !options.thresholds.is_valid() {
            return Err(CmError::InvalidArgument(
                "thresholds: down in [0,1], up >= 1",
            ));
        }
        if self.flows.len() >= self.config.max_flows {
            return Err(CmError::TooManyFlows(self.config.max_flows));
        }
        if options.feedback == FeedbackSource::Probe && self.by_key.contains_key(&(dest, key)) {
            return Err(CmError::InvalidArgument(
                "a probe-fed flow with this key is open",
            ));
        }
        let id = FlowId(self.next_flow);
        self.next_flow = self.next_flow.wrapping_add(1);
        let mf = match self.by_dest.get(&dest) {
            Some(mf) => *mf,
            None => {
                let mf = self.new_macroflow(now, Some(dest));
                self.by_dest.insert(dest, mf);
                mf
            }
        };
        self.flows.insert(
            id,
            Flow {
                key,
                dest,
                macroflow: mf,
                weight: options.weight,
                hint: 1.0,
                thresholds: options.thresholds,
                feedback: options.feedback,
                grants: GrantQueue::default(),
                notified: None,
                rate_event_queued: false,
                loss_rate: None,
                probe_sent_bytes: 0,
                probe_lost_bytes: 0,
                probe_early_bytes: 0,
                ownd_bytes: 0,
                lapse_indexed: None,
            },
        );
        if options.feedback == FeedbackSource::Probe {
            self.by_key.insert((dest, key), id);
        }
        self.attach(now, id, mf);
        Ok(id)
    }

    fn new_macroflow(&mut self, now: Time, dest: Option<PeerAddr>) -> MacroflowId {
        let id = MacroflowId(self.next_macroflow);
        self.next_macroflow = self.next_macroflow.wrapping_add(1);
        let mut mf = Macroflow::new(dest, &self.config, now);
        // RFC 9040 §6: a new macroflow to a recently seen destination starts from its cache.
        if let Some(hit) = dest.and_then(|d| self.cache.lookup(now, d)) {
            mf.rate.restore(&hit.snap, hit.with_rate);
        }
        self.macroflows.insert(id, mf);
        id
    }

    /// Puts a flow (already in `flows`, with `macroflow == mf`) into macroflow `mf`.
    fn attach(&mut self, now: Time, id: FlowId, mf_id: MacroflowId) {
        let Some(flow) = self.flows.get_mut(&id) else {
            return;
        };
        if let Some(mf) = self.macroflows.get_mut(&mf_id) {
            flow.sync_lapse(id, mf);
        }
        let (w, window, limited) = (
            flow.effective_weight(),
            flow.window_bytes(),
            flow.window_limited(),
        );
        if let Some(mf) = self.macroflows.get_mut(&mf_id) {
            mf.advance(now);
            mf.window_used_bytes = mf.window_used_bytes.saturating_add(window);
            mf.window_flows += usize::from(limited);
            mf.flows.insert(id);
            mf.unnotified.insert(id);
            mf.weight_sum += w;
            mf.sched.add(id, w);
        }
        self.after_change(now, mf_id);
    }

    /// Takes a flow out of its macroflow; returns its pending request bytes. Removes the
    /// macroflow (caching it) when it becomes empty.
    fn detach(&mut self, now: Time, id: FlowId) -> u64 {
        let Some(flow) = self.flows.get_mut(&id) else {
            return 0;
        };
        let (mf_id, w) = (flow.macroflow, flow.effective_weight());
        let (window, limited) = (flow.window_bytes(), flow.window_limited());
        let Some(mf) = self.macroflows.get_mut(&mf_id) else {
            return 0;
        };
        flow.unindex_lapse(id, mf);
        mf.advance(now);
        mf.window_used_bytes = mf.window_used_bytes.saturating_sub(window);
        mf.window_flows = mf.window_flows.saturating_sub(usize::from(limited));
        mf.flows.remove(&id);
        mf.unnotified.remove(&id);
        mf.thresh.remove(id);
        mf.weight_sum = (mf.weight_sum - w).max(0.0);
        let pending = mf.sched.remove(id);
        if mf.flows.is_empty() {
            mf.weight_sum = 0.0;
            if let Some(mf) = self.macroflows.remove(&mf_id) {
                if let Some(t) = mf.armed {
                    self.timers.remove(&(t, TimerKey::Macroflow(mf_id)));
                }
                if let Some(dest) = mf.dest {
                    if let Some(snap) = mf.rate.snapshot() {
                        self.cache.store(now, dest, snap);
                    }
                    if self.by_dest.get(&dest) == Some(&mf_id) {
                        self.by_dest.remove(&dest);
                    }
                }
            }
        } else {
            self.after_change(now, mf_id);
        }
        pending
    }

    /// `cm_close`: the flow ends; its share is repartitioned among the others.
    pub fn close(&mut self, now: Time, flow: FlowId) -> Result<(), CmError> {
        let (key, dest, feedback) = {
            let f = self.flow(flow)?;
            (f.key, f.dest, f.feedback)
        };
        self.detach(now, flow);
        self.flows.remove(&flow);
        if feedback == FeedbackSource::Probe {
            self.by_key.remove(&(dest, key));
            if let Some(p) = self.probes.get_mut(&dest) {
                p.forget(key);
            }
            // The session lives while probe-fed flows to `dest` are open (responses to its
            // last probes may still be in flight after the data stopped).
            let others = self
                .by_key
                .range((dest, FlowKey(0))..)
                .next()
                .is_some_and(|((d, _), _)| *d == dest);
            if !others
                && let Some(p) = self.probes.remove(&dest)
                && let Some(t) = p.armed
            {
                self.timers.remove(&(t, TimerKey::Probe(dest)));
            }
        }
        Ok(())
    }

    /// `cm_mtu`: the path MTU (statically configured).
    pub fn mtu(&self, flow: FlowId) -> Result<u64, CmError> {
        self.flow(flow)?;
        Ok(self.config.mtu_bytes.max(1))
    }

    // ----- sharing granularity (RFC 3124 §3.5) -----

    /// `cm_getmacroflow`.
    pub fn getmacroflow(&self, flow: FlowId) -> Result<MacroflowId, CmError> {
        Ok(self.flow(flow)?.macroflow)
    }

    /// `cm_setmacroflow`: moves the flow to macroflow `target`, or to a new macroflow (with
    /// fresh congestion state) when `target` is `None` (RFC's -1). Returns the macroflow.
    /// The flow's outstanding request moves with it.
    pub fn setmacroflow(
        &mut self,
        now: Time,
        flow: FlowId,
        target: Option<MacroflowId>,
    ) -> Result<MacroflowId, CmError> {
        let current = self.flow(flow)?.macroflow;
        if let Some(t) = target {
            if !self.macroflows.contains_key(&t) {
                return Err(CmError::UnknownMacroflow(t));
            }
            if t == current {
                return Ok(t);
            }
        }
        let pending = self.detach(now, flow);
        let target = match target {
            Some(t) if self.macroflows.contains_key(&t) => t,
            // The target was the flow's old macroflow's sibling; `detach` never removes
            // another macroflow, so only `None` lands here.
            _ => self.new_macroflow(now, None),
        };
        if let Ok(f) = self.flow_mut(flow) {
            f.macroflow = target;
            f.notified = None;
        }
        self.attach(now, flow, target);
        if pending > 0 {
            self.request(now, flow, pending)?;
        }
        Ok(target)
    }

    // ----- data transmission (RFC 3124 §3.2, §3.3) -----

    /// `cm_request(nbytes)`: asks to send `nbytes`; grants of at most one MTU follow as
    /// [`CmEvent::Grant`](crate::cm::CmEvent::Grant)s, paced at the macroflow's rate and shared by weight.
    pub fn request(&mut self, now: Time, flow: FlowId, nbytes: u64) -> Result<(), CmError> {
        self.request_with(now, flow, Request::bytes(nbytes))
    }

    /// `cm_request(id, nbytes, minbytes, latency)` (papers/003 Figure 8).
    ///
    /// * `min_bytes`: the scheduler "notifies the application at a future point in time based
    ///   on the minimum number of bytes requested by the application, and the sending rate"
    ///   (§2.4): the flow's grants are then at least `min_bytes` (or what is left of its
    ///   request), issued when the tokens for all of them have accrued — one grant, not a
    ///   trickle of MTUs. `min_bytes` above the macroflow's burst allowance is capped to it:
    ///   the CM never releases more than its burst at once.
    /// * `latency`: how long the request stays useful. The paper's scheduler "does not use
    ///   delay bounds"; ours does not reorder flows by it either (SCFQ shares stay by weight),
    ///   but bytes still not granted `latency` after the request are withdrawn and reported
    ///   as [`CmEvent::RequestExpired`](crate::cm::CmEvent::RequestExpired), so a real-time
    ///   sender is never granted stale data. `None`: until granted or cancelled.
    ///
    /// A new request's `min_bytes` and `latency` apply to all the flow's pending bytes.
    pub fn request_with(&mut self, now: Time, flow: FlowId, req: Request) -> Result<(), CmError> {
        let mf_id = self.flow(flow)?.macroflow;
        let (max_pending, mtu) = (self.config.max_pending_bytes, self.config.mtu_bytes.max(1));
        if let Some(mf) = self.macroflows.get_mut(&mf_id) {
            mf.advance(now);
            let pending = PendingRequest {
                bytes: req.bytes,
                min_bytes: req
                    .min_bytes
                    .min(crate::convert::f64_u64_sat(mf.capacity())),
                deadline: req.latency.map(|l| now.saturating_add(l)),
            };
            mf.sched.request(flow, pending, max_pending, mtu);
        }
        self.after_change(now, mf_id);
        Ok(())
    }

    /// Withdraws the flow's outstanding request (bytes not yet granted).
    pub fn cancel_request(&mut self, now: Time, flow: FlowId) -> Result<(), CmError> {
        let mf_id = self.flow(flow)?.macroflow;
        if let Some(mf) = self.macroflows.get_mut(&mf_id) {
            mf.sched.cancel(flow);
        }
        self.after_change(now, mf_id);
        Ok(())
    }

    /// Bytes requested and not yet granted.
    pub fn pending_request(&self, flow: FlowId) -> Result<u64, CmError> {
        let f = self.flow(flow)?;
        Ok(self
            .macroflows
            .get(&f.macroflow)
            .map_or(0, |mf| mf.sched.pending(flow)))
    }

    /// Lapses the flow's grants older than the grant lifetime (RFC 3124 §3.3: valid for
    /// max(RTT, threshold)); their bytes leave the macroflow's window.
    fn expire_balance(&mut self, now: Time, flow: FlowId) {
        let Some(f) = self.flows.get_mut(&flow) else {
            return;
        };
        if f.grants.total_bytes() == 0 {
            return;
        }
        let Some(mf) = self.macroflows.get_mut(&f.macroflow) else {
            return;
        };
        let window_before = f.window_bytes();
        let expired = f.grants.expire(now, mf.grant_lifetime());
        self.stats.expired_bytes = self.stats.expired_bytes.saturating_add(expired);
        let freed = window_before - f.window_bytes();
        mf.window_used_bytes = mf.window_used_bytes.saturating_sub(freed);
        f.sync_lapse(flow, mf);
    }

    /// Lapses every grant of macroflow `mf_id` past its lifetime by `now`, whether or not its
    /// flow ever comes back (the CM's own timer, see `Macroflow::grant_lapses`).
    pub(super) fn lapse_grants(&mut self, now: Time, mf_id: MacroflowId) {
        loop {
            let Some(mf) = self.macroflows.get(&mf_id) else {
                return;
            };
            let Some(&(issued, flow)) = mf.grant_lapses.first() else {
                return;
            };
            if now <= issued + mf.grant_lifetime() {
                return;
            }
            self.expire_balance(now, flow);
            // `expire_balance` re-indexes the flow under a younger grant or none; a stale
            // entry (never expected) must not stop the loop.
            if let Some(mf) = self.macroflows.get_mut(&mf_id)
                && mf.grant_lapses.remove(&(issued, flow))
                && let Some(f) = self.flows.get_mut(&flow)
                && f.lapse_indexed == Some(issued)
            {
                f.lapse_indexed = None;
            }
        }
    }

    /// Granted bytes the flow may still send (lapsed grants excluded).
    pub fn grant_balance(&mut self, now: Time, flow: FlowId) -> Result<u64, CmError> {
        self.flow(flow)?;
        self.expire_balance(now, flow);
        Ok(self.flow(flow)?.grants.total_bytes())
    }

    /// `cm_notify(nsent)`: the flow just transmitted `nsent` bytes. They are counted against
    /// the flow's outstanding grants, oldest first, so any number of calls in any order add
    /// up (one call per grant, one per packet, or one for several grants); bytes beyond the
    /// grants are charged to the macroflow's rate. A grant not used up stays valid until it
    /// lapses (RFC 3124 §3.3). `notify(0)` declines the oldest outstanding grant: its unused
    /// bytes return to the macroflow.
    pub fn notify(&mut self, now: Time, flow: FlowId, nsent: u64) -> Result<(), CmError> {
        self.expire_balance(now, flow);
        let f = self
            .flows
            .get_mut(&flow)
            .ok_or(CmError::UnknownFlow(flow))?;
        let window_before = f.window_bytes();
        let (used, unused) = if nsent == 0 {
            (0, f.grants.decline_oldest())
        } else {
            (f.grants.consume(nsent), 0)
        };
        if let Some(mf) = self.macroflows.get_mut(&f.macroflow) {
            f.sync_lapse(flow, mf);
        }
        let excess = nsent - used;
        if f.window_limited() {
            // RFC 3124 §5.2: "notify(): AIMD_CC adds the number of bytes sent to its
            // outstanding data window (ownd)".
            f.ownd_bytes = f.ownd_bytes.saturating_add(nsent);
        }
        let (window_after, window_limited) = (f.window_bytes(), f.window_limited());
        let (mf_id, probe, dest, key) = (
            f.macroflow,
            f.feedback == FeedbackSource::Probe,
            f.dest,
            f.key,
        );
        let s = &mut self.stats;
        s.refunded_bytes = s.refunded_bytes.saturating_add(unused);
        s.ungranted_bytes = s.ungranted_bytes.saturating_add(excess);
        if let Some(mf) = self.macroflows.get_mut(&mf_id) {
            self.stats.aging_halvings += mf.advance(now);
            mf.refund(unused);
            mf.charge(excess);
            if !window_limited {
                mf.rate.on_sent(now, nsent);
            }
            mf.window_used_bytes = mf
                .window_used_bytes
                .saturating_add(window_after)
                .saturating_sub(window_before);
        }
        if probe && nsent > 0 {
            let (initial_rtt, per_rtt, floor) = (
                self.config.initial_rtt,
                self.config.probes_per_rtt,
                self.config.feedback_floor,
            );
            let session = self
                .probes
                .entry(dest)
                .or_insert_with(|| ProbeSession::new(initial_rtt, per_rtt, floor));
            session.on_sent(now, key, nsent);
            self.rearm_probe(dest);
        }
        self.after_change(now, mf_id);
        Ok(())
    }

    /// `cm_update(nrecd, nlost, lossmode, rtt)`: feedback about the flow's transmissions.
    pub fn update(&mut self, now: Time, flow: FlowId, feedback: Feedback) -> Result<(), CmError> {
        let f = self.flow_mut(flow)?;
        let (mf_id, window_limited) = (f.macroflow, f.window_limited());
        if window_limited {
            // RFC 3124 §5.2: "update(): AIMD_CC subtracts nsent from ownd" (nsent = bytes
            // received + lost). CM_NO_FEEDBACK (a TCP timeout) means no feedback will come
            // for any of the flow's outstanding data: it is all written off, as the rate
            // controller does for the macroflow.
            let reported = if feedback.mode == LossMode::NoFeedback {
                f.ownd_bytes
            } else {
                feedback
                    .nrecd_bytes
                    .saturating_add(feedback.nlost_bytes)
                    .min(f.ownd_bytes)
            };
            f.ownd_bytes -= reported;
            if let Some(mf) = self.macroflows.get_mut(&mf_id) {
                mf.window_used_bytes = mf.window_used_bytes.saturating_sub(reported);
            }
        }
        self.update_macroflow(now, mf_id, &feedback, !window_limited);
        Ok(())
    }

    /// Bytes the flow has notified and not yet reported received or lost (RFC 3124 §5.2
    /// `ownd`; window-limited flows only, 0 for others).
    pub fn outstanding_bytes(&self, flow: FlowId) -> Result<u64, CmError> {
        Ok(self.flow(flow)?.ownd_bytes)
    }

    /// Applies feedback to a macroflow's rate; `open_loop` is false for reports from
    /// window-limited flows (see `RateController::on_window_feedback`).
    fn update_macroflow(&mut self, now: Time, mf_id: MacroflowId, fb: &Feedback, open_loop: bool) {
        if let Some(mf) = self.macroflows.get_mut(&mf_id) {
            self.stats.aging_halvings += mf.advance(now);
            let action = if open_loop {
                mf.rate.on_feedback(now, fb)
            } else {
                mf.rate.on_window_feedback(now, fb)
            };
            match action {
                super::rate::RateAction::Decrease => self.stats.decreases += 1,
                super::rate::RateAction::Restart => self.stats.restarts += 1,
                super::rate::RateAction::None => {}
            }
        }
        self.after_change(now, mf_id);
    }

    // ----- querying and tuning -----

    /// `cm_query`: the flow's share of the rate and the macroflow's RTT estimates.
    pub fn query(&self, flow: FlowId) -> Result<FlowQuery, CmError> {
        let f = self.flow(flow)?;
        let mf = self
            .macroflows
            .get(&f.macroflow)
            .ok_or(CmError::UnknownMacroflow(f.macroflow))?;
        let valid = mf.rate.is_valid();
        Ok(FlowQuery {
            rate_bytes_per_s: valid.then(|| mf.flow_rate(f.effective_weight())),
            srtt: mf.rate.srtt(),
            rttvar: mf.rate.rttvar(),
            min_rtt: mf.rate.min_rtt(),
            macroflow_rate_bytes_per_s: mf.rate.rate_bytes_per_s(),
            loss_rate: f.loss_rate,
            probe_sent_bytes: f.probe_sent_bytes,
            probe_lost_bytes: f.probe_lost_bytes,
        })
    }

    /// A macroflow's state, for traces.
    pub fn macroflow_info(&self, id: MacroflowId) -> Result<MacroflowInfo, CmError> {
        let mf = self
            .macroflows
            .get(&id)
            .ok_or(CmError::UnknownMacroflow(id))?;
        Ok(MacroflowInfo {
            rate_bytes_per_s: mf.rate.rate_bytes_per_s(),
            cwnd_bytes: mf.rate.cwnd_bytes(),
            ssthresh_bytes: mf.rate.ssthresh_bytes(),
            srtt: mf.rate.srtt(),
            min_rtt: mf.rate.min_rtt(),
            aging: mf.rate.is_aging(),
            tokens_bytes: mf.tokens(),
            burst_bytes: mf.capacity(),
            window_used_bytes: mf.window_used_bytes,
            flows: mf.flows.len(),
        })
    }

    /// `cm_thresh`: sets the flow's change_rate thresholds.
    pub fn thresh(&mut self, now: Time, flow: FlowId, th: Thresholds) -> Result<(), CmError> {
        if !th.is_valid() {
            return Err(CmError::InvalidArgument(
                "thresholds: down in [0,1], up >= 1",
            ));
        }
        let f = self.flow_mut(flow)?;
        f.thresholds = th;
        let mf = f.macroflow;
        self.rearm_thresholds(flow);
        self.after_change(now, mf);
        Ok(())
    }

    /// Sets the flow's configured scheduler weight.
    pub fn set_weight(&mut self, now: Time, flow: FlowId, weight: f64) -> Result<(), CmError> {
        Self::check_weight(weight)?;
        self.reweight(now, flow, |f| f.weight = weight)
    }

    /// Sets the receiver's hint for this flow (papers/003 §3.2.1: the client's relative
    /// interest `r_i`), a multiplier of the configured weight; probe responses set it too.
    pub fn set_receiver_hint(&mut self, now: Time, flow: FlowId, hint: f64) -> Result<(), CmError> {
        Self::check_weight(hint)?;
        self.reweight(now, flow, |f| f.hint = hint)
    }

    fn reweight(
        &mut self,
        now: Time,
        flow: FlowId,
        change: impl FnOnce(&mut Flow),
    ) -> Result<(), CmError> {
        let f = self.flow_mut(flow)?;
        let old = f.effective_weight();
        change(f);
        let (new, mf_id) = (f.effective_weight(), f.macroflow);
        if let Some(mf) = self.macroflows.get_mut(&mf_id) {
            mf.weight_sum = (mf.weight_sum - old + new).max(0.0);
            mf.sched.set_weight(flow, new);
        }
        self.rearm_thresholds(flow);
        self.after_change(now, mf_id);
        Ok(())
    }
}
