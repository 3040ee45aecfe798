//! The Congestion Manager (CM): host-wide congestion control shared by every flow to a
//! destination. Read `papers/003` (Balakrishnan, Rahul, Seshan, SIGCOMM '99) §2–§3 first, then
//! RFC 3124 §3–§5 for the API details the paper leaves open; `docs/design/cm.md` is the digest.
//!
//! Caution: the RFC 3124 passages quoted in this module's comments were written down without
//! the RFC's text at hand (it is not in the project's offline references); treat them as close
//! paraphrases and check them against the RFC before relying on their exact wording.
//!
//! Where things live:
//! - [`CongestionManager`] (`manager/`): the API facade — `open`, `request`, `notify`,
//!   `update`, `query`, `mtu`, `close`, `getmacroflow`/`setmacroflow`, `thresh` — with
//!   `manager/feedback_and_timers.rs` (probes, timers, events) and `manager/grants.rs` (grants,
//!   thresholds);
//! - `macroflow.rs`: one macroflow = one rate controller + one token bucket (pacing) + the
//!   window of ACK-fed flows (RFC 3124 §5.2 `ownd` ≤ `cwnd`) + one scheduler + the
//!   change_rate threshold index;
//! - `rate.rs`: **where the CM decides a rate** — rate-based AIMD and exponential aging;
//! - `scheduler.rs`: self-clocked weighted fair queueing over the flows of a macroflow;
//! - `thresh.rs`: which flows crossed their `cm_thresh` bounds (O(log n) per change);
//! - `cache.rs`: temporal sharing (RFC 9040) of a closed macroflow's RTT and rate;
//! - [`probe`]: the probe/response wire format and the sender side of Figure 5;
//! - [`receiver`]: the receiver-side CM that answers probes;
//! - [`tcp`]: TCP/CM, a [`CongestionController`](crate::cc::CongestionController) that asks
//!   the CM for grants;
//! - [`audio`]: the layered audio sender of §3.2.2 / §4.2.
//!
//! # Driving a `CongestionManager` (one per host)
//!
//! ```text
//! cm.open(now, dest, key, options)            // cm_open; returns a FlowId
//! cm.request(now, flow, nbytes)               // cm_request: a grant follows as an event
//! cm.notify(now, flow, nsent)                 // cm_notify: after every transmission
//! cm.update(now, flow, feedback)              // cm_update: receiver feedback
//! cm.handle_packet(now, from, &packet)        // probe responses from the receiver CM
//! cm.handle_timeout(now)                      // when poll_timeout() has passed
//! while let Some(p) = cm.poll_transmit(now) { send probe p.packet to p.to }
//! while let Some(ev) = cm.poll_event() { Grant → app_notify, RateChange → change_rate }
//! arm a timer at cm.poll_timeout()
//! ```
//! Drain `poll_transmit` and `poll_event` after *every* input. Grants stop being issued while
//! `max_events` events are waiting, so an engine that never drains events stalls its flows.

mod cache;
mod macroflow;
mod manager;
mod rate;
mod scheduler;
mod thresh;

pub mod audio;
pub mod probe;
pub mod receiver;
pub mod tcp;

#[cfg(test)]
mod tests;

pub use manager::{CmTransmit, CongestionManager, MacroflowInfo};
pub use tcp::{CmController, CmGuard, CmHandle};

use std::time::Duration;
use thiserror::Error;

/// A flow's handle (RFC 3124 `cm_streamid`), unique for the life of one [`CongestionManager`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct FlowId(pub u32);

/// A macroflow's identifier (RFC 3124 §3.5 `cm_macroflowid`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct MacroflowId(pub u32);

/// A destination host address, as the engine names it (an IPv4/IPv6 address or a simulator
/// node number). Flows are grouped into macroflows by this value by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct PeerAddr(pub u128);

impl From<u32> for PeerAddr {
    fn from(v: u32) -> PeerAddr {
        PeerAddr(u128::from(v))
    }
}

impl From<std::net::IpAddr> for PeerAddr {
    fn from(a: std::net::IpAddr) -> PeerAddr {
        match a {
            std::net::IpAddr::V4(v4) => PeerAddr(u128::from(v4.to_ipv6_mapped())),
            std::net::IpAddr::V6(v6) => PeerAddr(u128::from(v6)),
        }
    }
}

/// Names a flow identically at sender and receiver (e.g. a hash of the transport 5-tuple, or
/// the simulator's port pair), so that probe responses can report per-flow receptions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct FlowKey(pub u64);

/// How a loss was detected (RFC 3124 §3.3 `lossmode`; the paper's `loss_occurred` flag is
/// [`LossMode::Loss`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum LossMode {
    /// `CM_NO_CONGESTION`: data arrived; any losses reported are not due to congestion.
    NoCongestion,
    /// `CM_LOSS_FEEDBACK`: some (not all) outstanding data was lost to congestion.
    Loss,
    /// `CM_EXPLICIT_CONGESTION`: the receiver echoed an ECN mark.
    Ecn,
    /// `CM_NO_FEEDBACK`: nothing came back for all outstanding data (e.g. a TCP timeout):
    /// persistent congestion.
    NoFeedback,
}

/// The arguments of `cm_update` (RFC 3124 §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feedback {
    /// Bytes that reached the receiver since the last update.
    pub nrecd_bytes: u64,
    /// Bytes lost since the last update.
    pub nlost_bytes: u64,
    /// How losses (if any) were detected.
    pub mode: LossMode,
    /// A round-trip sample, if the application measured one.
    pub rtt: Option<Duration>,
}

impl Feedback {
    /// `nrecd` bytes arrived without congestion, with an optional RTT sample.
    pub fn received(nrecd_bytes: u64, rtt: Option<Duration>) -> Feedback {
        Feedback {
            nrecd_bytes,
            nlost_bytes: 0,
            mode: LossMode::NoCongestion,
            rtt,
        }
    }

    /// A congestion loss of `nlost` bytes (`nrecd` bytes still arrived).
    pub fn loss(nrecd_bytes: u64, nlost_bytes: u64) -> Feedback {
        Feedback {
            nrecd_bytes,
            nlost_bytes,
            mode: LossMode::Loss,
            rtt: None,
        }
    }
}

/// Where a flow's feedback comes from (papers/003 §2.2.2), and whether its grants are also
/// limited by the macroflow's window (RFC 3124 §5.2 `ownd` ≤ `cwnd`; see `macroflow.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum FeedbackSource {
    /// The application calls `update` itself, as often as it learns something (e.g. from
    /// RTCP-like reports). Grants are paced at the rate only.
    Implicit,
    /// The application calls `update` for every byte it sent, as its acknowledgements arrive
    /// (TCP/CM, RFC 3124 §5.1.1): received, lost (`LOSS_FEEDBACK`) or written off
    /// (`NO_FEEDBACK`). Grants are paced at the rate *and* limited by the window: the flows'
    /// outstanding bytes stay within `cwnd`, as RFC 3124 §5.2's `AIMD_CC` requires.
    Acks,
    /// The CM elicits feedback with its probe protocol (Figure 5); the engine must deliver the
    /// flow's packets to the receiver's [`receiver::CmReceiver`].
    Probe,
}

/// `cm_thresh(rate_downthresh, rate_upthresh, rtt_downthresh, rtt_upthresh)` (RFC 3124 §3.2):
/// a `RateChange` event is raised only when the flow's rate falls below `rate_down × last` or
/// rises above `rate_up × last`, or its srtt crosses the RTT bounds likewise, where `last` is
/// the value last reported to the flow.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Thresholds {
    /// Report when rate < `rate_down` × last reported rate (0 disables).
    pub rate_down: f64,
    /// Report when rate > `rate_up` × last reported rate (infinity disables).
    pub rate_up: f64,
    /// Report when srtt < `rtt_down` × last reported srtt (0 disables).
    pub rtt_down: f64,
    /// Report when srtt > `rtt_up` × last reported srtt (infinity disables).
    pub rtt_up: f64,
}

impl Thresholds {
    /// The default: ±20 % (×0.8, ×1.25). RFC 3124 leaves defaults open; the paper reports
    /// every change ([`Thresholds::EVERY_RATE_CHANGE`]). A CM updates its rate on every ACK
    /// or probe response, so "every change" is an event per feedback for every flow of the
    /// macroflow; an application that only picks among a few encodings or image sizes wants
    /// the changes that matter. Applications reproducing the paper (and the `cm-audio` and
    /// `cm-udp` scenario flows with `change_rate = "every-change"`) choose the paper's rule.
    pub const DEFAULT: Thresholds = Thresholds {
        rate_down: 0.8,
        rate_up: 1.25,
        rtt_down: 0.8,
        rtt_up: 1.25,
    };

    /// papers/003 §2.3: `change_rate(newrate)` is called "whenever a flow's share of the
    /// available rate changes": every rate change, in either direction; no RTT reports.
    pub const EVERY_RATE_CHANGE: Thresholds = Thresholds {
        rate_down: 1.0,
        rate_up: 1.0,
        rtt_down: 0.0,
        rtt_up: f64::INFINITY,
    };

    /// Never report.
    pub const NEVER: Thresholds = Thresholds {
        rate_down: 0.0,
        rate_up: f64::INFINITY,
        rtt_down: 0.0,
        rtt_up: f64::INFINITY,
    };

    fn is_valid(&self) -> bool {
        let ok_down = |v: f64| (0.0..=1.0).contains(&v);
        let ok_up = |v: f64| v >= 1.0 && !v.is_nan();
        ok_down(self.rate_down)
            && ok_down(self.rtt_down)
            && ok_up(self.rate_up)
            && ok_up(self.rtt_up)
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds::DEFAULT
    }
}

/// Options given to `open`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct FlowOptions {
    /// Relative weight in the macroflow's scheduler (papers/003 §2.4 "pre-configured weights").
    pub weight: f64,
    /// Where feedback comes from.
    pub feedback: FeedbackSource,
    /// change_rate gating.
    pub thresholds: Thresholds,
}

impl FlowOptions {
    /// Weight 1, implicit feedback, default thresholds (TCP/CM).
    pub fn implicit() -> FlowOptions {
        FlowOptions {
            weight: 1.0,
            feedback: FeedbackSource::Implicit,
            thresholds: Thresholds::DEFAULT,
        }
    }

    /// Weight 1, feedback for every byte through acknowledgements (window-limited), default
    /// thresholds: what [`CmController`] opens for TCP/CM.
    pub fn acked() -> FlowOptions {
        FlowOptions {
            feedback: FeedbackSource::Acks,
            ..FlowOptions::implicit()
        }
    }

    /// Weight 1, probe feedback, default thresholds (applications without feedback).
    pub fn probed() -> FlowOptions {
        FlowOptions {
            feedback: FeedbackSource::Probe,
            ..FlowOptions::implicit()
        }
    }
}

impl Default for FlowOptions {
    fn default() -> Self {
        FlowOptions::implicit()
    }
}

/// The time constant of exponential aging (papers/003 §2.2.3, Figure 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum AgingHalfLife {
    /// Halve once per minimum RTT — the paper's choice.
    MinRtt,
    /// Halve once per smoothed (mean) RTT — the paper's first, inferior choice, kept for the
    /// Figure 6 comparison.
    Srtt,
}

/// When exponential aging starts once open-loop data is outstanding and no feedback comes
/// (papers/003 §2.2.3: "triggered when the CM does not receive a response to a probe message
/// within a round-trip time").
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum AgingTrigger {
    /// After one smoothed RTT: the paper's trigger, the default.
    Srtt,
    /// After `srtt + max(G, 4·rttvar)` (RFC 6298's RTO formula without its floor and
    /// backoff): fires later on paths with RTT jitter or with probe spacing close to the RTT,
    /// where one srtt without feedback is not yet news. Kept for comparison (Figures 4, 6).
    Rto,
}

/// Temporal sharing (RFC 9040 §6) of a closed macroflow's state with the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TemporalConfig {
    /// Cached RTTs are reused for this long after the macroflow closed.
    pub rtt_ttl: Duration,
    /// The cached rate (window and ssthresh) is reused for this long.
    pub rate_ttl: Duration,
    /// Destinations remembered; the oldest entry is evicted beyond this.
    pub max_entries: usize,
}

impl Default for TemporalConfig {
    fn default() -> Self {
        TemporalConfig {
            rtt_ttl: Duration::from_secs(600),
            rate_ttl: Duration::from_secs(10),
            max_entries: 1024,
        }
    }
}

/// Host-wide CM parameters. Every constant of the algorithms is here or cited next to the code.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CmConfig {
    /// Path MTU in bytes (RFC 3124 `cm_mtu`), statically configured; also the grant size.
    pub mtu_bytes: u64,
    /// RTT assumed before the first sample.
    pub initial_rtt: Duration,
    /// Token-bucket depth in bytes: the largest burst a macroflow may send back to back.
    /// Raised to `mtu_bytes` if smaller.
    pub burst_bytes: u64,
    /// Floor of the rate reached by exponential aging, bytes/s.
    pub min_rate_bytes_per_s: f64,
    /// Ceiling of any macroflow rate, bytes/s.
    pub max_rate_bytes_per_s: f64,
    /// Exponential-aging time constant.
    pub aging_half_life: AgingHalfLife,
    /// When exponential aging starts.
    pub aging_trigger: AgingTrigger,
    /// Probes per smoothed RTT (papers/003 §2.2.1: at least 2; Figure 4 varies it).
    /// Clamped to [0.1, 100].
    pub probes_per_rtt: f64,
    /// The shortest round trip the CM's feedback timing assumes: probes are spaced, aging is
    /// triggered and its half-life taken from `max(RTT, feedback_floor)` rather than the RTT
    /// alone. The paper's ns-2 CM saw feedback as soon as the network delivered it; a CM on a
    /// real host sees it after the receiving application, the scheduler and the local socket
    /// have had their turn, which on a busy host takes longer than a LAN or loopback round
    /// trip (srtt ~0.05 ms on loopback, where 20 halvings fit in one millisecond). Paths whose
    /// RTT exceeds the floor (every scenario in `experiments/cm/`) are unaffected;
    /// `Duration::ZERO` restores the paper's rule exactly.
    pub feedback_floor: Duration,
    /// A grant lapses after max(srtt, this) if not used (RFC 3124 §3.3).
    pub grant_lifetime_min: Duration,
    /// Most application events waiting in the queue; grants pause while it is full.
    pub max_events: usize,
    /// Most open flows.
    pub max_flows: usize,
    /// Most bytes a flow may have requested and not yet been granted.
    pub max_pending_bytes: u64,
    /// Temporal sharing.
    pub temporal: TemporalConfig,
}

/// The default [`CmConfig::feedback_floor`]: about one scheduling period of a loaded Linux
/// host (CFS's `sched_latency` is 6 ms × (1 + log2 CPUs), 12 ms on two CPUs), so that one
/// descheduling of the application or of the CM's own task is not read as a silent network.
pub const DEFAULT_FEEDBACK_FLOOR: Duration = Duration::from_millis(10);

impl Default for CmConfig {
    fn default() -> Self {
        CmConfig {
            mtu_bytes: 1500,
            initial_rtt: Duration::from_secs(1),
            burst_bytes: 3000,
            min_rate_bytes_per_s: 500.0,
            max_rate_bytes_per_s: 1.25e9,
            aging_half_life: AgingHalfLife::MinRtt,
            aging_trigger: AgingTrigger::Srtt,
            probes_per_rtt: 2.0,
            feedback_floor: DEFAULT_FEEDBACK_FLOOR,
            grant_lifetime_min: Duration::from_millis(10),
            max_events: 4096,
            max_flows: 65_536,
            max_pending_bytes: 1 << 40,
            temporal: TemporalConfig::default(),
        }
    }
}

/// The answer of `cm_query` for one flow (RFC 3124 §3.4). `None` where the RFC says
/// "negative values": no RTT sample has been taken on the macroflow yet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowQuery {
    /// The flow's share of its macroflow's rate, bytes/s.
    pub rate_bytes_per_s: Option<f64>,
    /// The macroflow's smoothed RTT.
    pub srtt: Option<Duration>,
    /// The macroflow's RTT variation.
    pub rttvar: Option<Duration>,
    /// The macroflow's minimum RTT.
    pub min_rtt: Option<Duration>,
    /// The macroflow's total rate, bytes/s (valid or not).
    pub macroflow_rate_bytes_per_s: f64,
    /// The flow's loss rate (fraction of bytes) in the latest interval measured by probes.
    pub loss_rate: Option<f64>,
    /// Bytes sent by the flow in all probe-measured intervals.
    pub probe_sent_bytes: u64,
    /// Bytes lost by the flow in all probe-measured intervals (long-run loss rate:
    /// `probe_lost_bytes / probe_sent_bytes`).
    pub probe_lost_bytes: u64,
}

/// The arguments of `cm_request(id, nbytes, minbytes, latency)` (papers/003 Figure 8); see
/// [`CongestionManager::request_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// Bytes the application wants to send.
    pub bytes: u64,
    /// Smallest grant worth having (0: grants of one MTU).
    pub min_bytes: u64,
    /// How long the request stays useful (`None`: until granted or cancelled).
    pub latency: Option<Duration>,
}

impl Request {
    /// `bytes` in grants of one MTU, without a deadline.
    pub fn bytes(bytes: u64) -> Request {
        Request {
            bytes,
            min_bytes: 0,
            latency: None,
        }
    }
}

/// Callbacks of the paper (§3.1), as events.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CmEvent {
    /// `app_notify(nallowed)` / `cmapp_send`: `flow` may send up to `bytes` now.
    Grant {
        /// The flow.
        flow: FlowId,
        /// Bytes allowed (one MTU at most, unless the request's `min_bytes` asked for more).
        bytes: u64,
    },
    /// `change_rate(rate)` / `cmapp_update(newrate, srtt, rttdev)`.
    RateChange {
        /// The flow.
        flow: FlowId,
        /// The flow's new share, bytes/s.
        rate_bytes_per_s: f64,
        /// Smoothed RTT.
        srtt: Duration,
        /// RTT variation.
        rttvar: Duration,
    },
    /// A request's `latency` passed before all of it was granted: `bytes` were withdrawn.
    RequestExpired {
        /// The flow.
        flow: FlowId,
        /// Bytes requested and never granted.
        bytes: u64,
    },
}

/// Why a CM call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Error)]
pub enum CmError {
    /// No open flow has this id.
    #[error("unknown flow {0:?}")]
    UnknownFlow(FlowId),
    /// No macroflow has this id.
    #[error("unknown macroflow {0:?}")]
    UnknownMacroflow(MacroflowId),
    /// `max_flows` flows are already open.
    #[error("too many open flows (limit {0})")]
    TooManyFlows(usize),
    /// An argument is out of range (a weight ≤ 0, thresholds in the wrong direction, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
}

/// Host-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CmStats {
    /// Bytes granted.
    pub granted_bytes: u64,
    /// Granted bytes returned unused through `notify` (and made available again).
    pub refunded_bytes: u64,
    /// Granted bytes that lapsed unused.
    pub expired_bytes: u64,
    /// Bytes notified beyond any grant (charged to the token bucket as debt).
    pub ungranted_bytes: u64,
    /// Requested bytes withdrawn ungranted when their request's latency passed.
    pub expired_request_bytes: u64,
    /// Multiplicative decreases (loss or ECN).
    pub decreases: u64,
    /// Persistent-congestion restarts.
    pub restarts: u64,
    /// Exponential-aging halvings.
    pub aging_halvings: u64,
    /// Probes sent.
    pub probes_sent: u64,
    /// Probe responses accepted.
    pub responses_accepted: u64,
    /// Probe responses ignored (duplicate, stale or for a probe never sent).
    pub responses_ignored: u64,
}
