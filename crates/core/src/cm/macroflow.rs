//! One macroflow (RFC 3124 §1): the flows that share congestion state — by default all flows to
//! one destination (papers/003 §2.3). It owns the rate controller, the token bucket that paces
//! grants at the rate, the scheduler that picks which flow is granted, and the change_rate
//! threshold index.
//!
//! Pacing (papers/003 §2.1: rate-based, to "avoid bursts of transmissions"): tokens accrue at
//! the macroflow's rate up to `capacity` (the burst allowance, at least one MTU); a grant of
//! `len ≤ MTU` bytes needs `len` tokens. Bytes sent without a grant (retransmissions that TCP
//! sends at once, synchronous senders such as the audio server) are charged as debt, so every
//! byte on the wire counts against the one rate. Hence, between any two instants, granted
//! minus refunded bytes ≤ ∫ rate dt + capacity — the property test's invariant.
//!
//! Window (RFC 3124 §5.2, the example `AIMD_CC` module): "notify(): AIMD_CC adds the number
//! of bytes sent to its outstanding data window (ownd)"; "update(): AIMD_CC subtracts nsent
//! from ownd"; "When cwnd or ownd are updated and indicate that at least one MTU may be
//! transmitted, AIMD_CC calls the CM to schedule a transmission." Grants to flows that report
//! every byte received or lost through `cm_update` as their acknowledgements arrive
//! (`FeedbackSource::Acks`: TCP/CM) therefore also need room in the window: those flows'
//! outstanding bytes plus their unused grants (`window_used_bytes`) plus the grant may not
//! exceed `cwnd`, unless nothing is outstanding. The pacing above still applies, so their
//! grants are paced *and* window-limited. Other flows are paced only: probe feedback lags
//! by up to 1.5 RTT and stops when probes are lost, and papers/003 §2.2.3 rejects
//! "clamp[ing] sender transmissions" then ("all flows stall") in favour of exponential aging;
//! occasional implicit reports (RTCP-like) would stall a window the same way.

use super::rate::RateController;
use super::scheduler::Scheduler;
use super::thresh::ThresholdIndex;
use super::{CmConfig, FlowId, PeerAddr};
use crate::time::Time;
use std::collections::BTreeSet;
use std::time::Duration;

/// Token slack that absorbs float rounding when a refill was computed to the nanosecond.
const TOKEN_EPSILON: f64 = 1e-6;

/// A macroflow's state.
#[derive(Clone, Debug)]
pub(crate) struct Macroflow {
    /// The destination this macroflow is the default for (None for one made by
    /// `setmacroflow(-1)`); only these are cached for temporal sharing.
    pub dest: Option<PeerAddr>,
    pub rate: RateController,
    tokens: f64,
    refilled_at: Time,
    capacity: f64,
    mtu: u64,
    pub sched: Scheduler,
    pub thresh: ThresholdIndex,
    pub flows: BTreeSet<FlowId>,
    /// Flows not yet told any rate (they get a first RateChange once estimates are valid).
    pub unnotified: BTreeSet<FlowId>,
    pub weight_sum: f64,
    /// The deadline under which this macroflow sits in the manager's timer set.
    pub armed: Option<Time>,
    /// Bytes of window-limited flows that count against the window: notified and not yet
    /// reported received or lost (RFC 3124 `ownd`), plus granted and not yet used.
    pub window_used_bytes: u64,
    /// Open window-limited flows (none: grants skip the per-flow window check).
    pub window_flows: usize,
    /// Each flow's oldest unused grant, by issue time: the CM lapses grants on its own timer
    /// (RFC 3124 §3.3: the CM "MUST be robust to applications forgetting to invoke
    /// cm_notify(stream_info, 0) correctly, or applications that crash or disappear"), so a
    /// grant its flow never uses stops holding the window of the others.
    pub grant_lapses: BTreeSet<(Time, FlowId)>,
    /// The shortest a grant lives (`CmConfig::grant_lifetime_min`).
    grant_lifetime_min: Duration,
}

impl Macroflow {
    pub(crate) fn new(dest: Option<PeerAddr>, config: &CmConfig, now: Time) -> Macroflow {
        let mtu = config.mtu_bytes.max(1);
        let capacity = config.burst_bytes.max(mtu) as f64;
        Macroflow {
            dest,
            rate: RateController::new(config),
            tokens: capacity,
            refilled_at: now,
            capacity,
            mtu,
            sched: Scheduler::default(),
            thresh: ThresholdIndex::default(),
            flows: BTreeSet::new(),
            unnotified: BTreeSet::new(),
            weight_sum: 0.0,
            armed: None,
            window_used_bytes: 0,
            window_flows: 0,
            grant_lapses: BTreeSet::new(),
            grant_lifetime_min: config.grant_lifetime_min,
        }
    }

    /// Tokens now available (may be negative: debt).
    pub(crate) fn tokens(&self) -> f64 {
        self.tokens
    }

    /// The burst allowance in bytes.
    pub(crate) fn capacity(&self) -> f64 {
        self.capacity
    }

    fn accrue(&mut self, to: Time) {
        if to <= self.refilled_at {
            return;
        }
        let dt = (to - self.refilled_at).as_secs_f64();
        self.tokens = (self.tokens + self.rate.rate_bytes_per_s() * dt).min(self.capacity);
        self.refilled_at = to;
    }

    /// Brings the bucket and the aging state up to `now`: each due halving is applied at its
    /// own instant, with tokens accrued at the old rate before it. Returns the halvings done.
    pub(crate) fn advance(&mut self, now: Time) -> u64 {
        let mut halvings = 0;
        while let Some(at) = self.rate.next_aging_at() {
            if at > now {
                break;
            }
            self.accrue(at);
            self.rate.age_once(at);
            halvings += 1;
        }
        self.accrue(now);
        halvings
    }

    /// Charges bytes sent without a grant. Debt is bounded by one window plus the burst
    /// allowance so that a misbehaving sender cannot starve the macroflow forever.
    pub(crate) fn charge(&mut self, bytes: u64) {
        let limit = self.capacity + self.rate.cwnd_bytes();
        self.tokens = (self.tokens - bytes as f64).max(-limit);
    }

    /// Returns unused granted bytes to the bucket (never beyond its capacity).
    pub(crate) fn refund(&mut self, bytes: u64) {
        self.tokens = (self.tokens + bytes as f64).min(self.capacity);
    }

    /// Whether `bytes` more of window-limited data would not fit the window (RFC 3124 §5.2:
    /// transmit when "at least one MTU may be transmitted"; an empty window always may).
    fn window_full(&self, bytes: u64) -> bool {
        self.window_used_bytes > 0
            && self.window_used_bytes.saturating_add(bytes) as f64 > self.rate.cwnd_bytes()
    }

    /// Puts parked (window-limited) flows back into the scheduler if the window has room for
    /// one MTU again.
    pub(crate) fn unpark_if_window_open(&mut self) {
        if self.sched.has_parked() && !self.window_full(self.mtu) {
            self.sched.unpark_all();
        }
    }

    /// Issues the next grant if the tokens allow it. `window_limited(flow)` says whether the
    /// flow's grants also need room in the window; such a flow at the head
    /// while the window is full is parked and the next flow is considered.
    pub(crate) fn try_grant(
        &mut self,
        window_limited: impl Fn(FlowId) -> bool,
    ) -> Option<(FlowId, u64)> {
        loop {
            let (flow, chunk) = self.sched.peek(self.mtu)?;
            let limited = self.window_flows > 0 && window_limited(flow);
            if limited && self.window_full(chunk) {
                self.sched.park_head();
                continue;
            }
            if self.tokens + TOKEN_EPSILON < chunk as f64 {
                return None;
            }
            let granted = self.sched.grant_head(self.mtu)?;
            self.tokens -= granted.1 as f64;
            if limited {
                self.window_used_bytes = self.window_used_bytes.saturating_add(granted.1);
            }
            return Some(granted);
        }
    }

    /// When the head request can be granted, if any request is pending.
    pub(crate) fn next_grant_at(&mut self) -> Option<Time> {
        let (_, chunk) = self.sched.peek(self.mtu)?;
        let missing = chunk as f64 - self.tokens;
        if missing <= TOKEN_EPSILON {
            return Some(self.refilled_at);
        }
        let wait_ns = (missing / self.rate.rate_bytes_per_s() * 1e9)
            .ceil()
            .max(1.0);
        // `as` saturates for huge waits.
        Some(self.refilled_at + Duration::from_nanos(crate::convert::f64_u64_sat(wait_ns)))
    }

    /// How long a grant stays valid: RFC 3124 §3.3, "the larger of the round-trip time and
    /// an implementation-dependent threshold".
    pub(crate) fn grant_lifetime(&self) -> Duration {
        self.rate.srtt_or_initial().max(self.grant_lifetime_min)
    }

    /// When the oldest unused grant of any flow lapses (the first instant past its lifetime).
    pub(crate) fn next_lapse_at(&self) -> Option<Time> {
        let (issued, _) = self.grant_lapses.first()?;
        Some(*issued + self.grant_lifetime() + Duration::from_nanos(1))
    }

    /// This macroflow's next deadline: a grant, an aging halving, a request's latency, or an
    /// unused grant's lapse.
    pub(crate) fn next_deadline(&mut self) -> Option<Time> {
        [
            self.next_grant_at(),
            self.rate.next_aging_at(),
            self.sched.next_deadline(),
            self.next_lapse_at(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Rate per unit of weight, the common axis of the threshold index.
    pub(crate) fn rate_per_weight(&self) -> f64 {
        self.rate.rate_bytes_per_s() / self.weight_sum.max(f64::MIN_POSITIVE)
    }

    /// A flow's share of the rate, bytes/s.
    pub(crate) fn flow_rate(&self, weight: f64) -> f64 {
        if self.weight_sum > 0.0 {
            self.rate.rate_bytes_per_s() * weight / self.weight_sum
        } else {
            self.rate.rate_bytes_per_s()
        }
    }
}
