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

    /// Issues the next grant if the tokens allow it.
    pub(crate) fn try_grant(&mut self) -> Option<(FlowId, u64)> {
        let (_, chunk) = self.sched.peek(self.mtu)?;
        if self.tokens + TOKEN_EPSILON < chunk as f64 {
            return None;
        }
        let granted = self.sched.grant_head(self.mtu)?;
        self.tokens -= granted.1 as f64;
        Some(granted)
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
        Some(self.refilled_at + Duration::from_nanos(wait_ns as u64))
    }

    /// This macroflow's next deadline: a grant or an aging halving.
    pub(crate) fn next_deadline(&mut self) -> Option<Time> {
        match (self.next_grant_at(), self.rate.next_aging_at()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
