//! Where the CM decides a rate: rate-based AIMD (papers/003 §2.1) with exponential aging when
//! feedback stops (§2.2.3).
//!
//! State is kept as a window-equivalent `cwnd_bytes` and the rate is `cwnd / srtt` (RFC 3124
//! §5.2 `AIMD_CC.query`). Transmissions are paced at that rate by the macroflow's token bucket,
//! so this is the paper's rate-based scheme; keeping the window form makes the increase
//! exactly TCP's ("both the number of bytes successfully transferred and the round-trip time
//! estimate are taken into account", §2.1):
//!
//! * slow start: `cwnd += min(nrecd, ssthresh − cwnd)` — doubles the rate per RTT;
//! * congestion avoidance: `cwnd += MTU × nrecd / cwnd` — one MTU per RTT's worth of data;
//! * loss or ECN: `cwnd = max(cwnd / 2, MTU)`, `ssthresh = cwnd`, at most once per srtt;
//! * persistent congestion (`CM_NO_FEEDBACK`): `ssthresh = max(cwnd / 2, 2 MTU)` (kept if
//!   still in the slow start a previous one forced), `cwnd = 1 MTU` (rate = 1 MTU per srtt)
//!   and slow start.
//!
//! The window itself (outstanding bytes ≤ `cwnd` for ACK-fed flows) is enforced where grants
//! are issued, in `macroflow.rs`.
//!
//! Exponential aging: if open-loop data (from flows that are not window-limited) is
//! outstanding and no feedback has arrived for one RTT (srtt, the paper's trigger, or
//! optionally `srtt + max(G, 4·rttvar)`, see [`RateController::feedback_timeout`]), the rate
//! is halved, and halved again every
//! half-life (minimum RTT by default, or srtt) until feedback returns, never below
//! `min_rate_bytes_per_s`.

use super::{AgingHalfLife, AgingTrigger, CmConfig, Feedback, LossMode};
use crate::cc::initial_window;
use crate::rtt::{RtoConfig, RttEstimator};
use crate::time::Time;
use std::time::Duration;

/// Clock granularity G in the aging trigger (as RFC 6298 §2's G).
const FEEDBACK_GRANULARITY: Duration = Duration::from_millis(1);

/// Largest RTT sample accepted from `cm_update`; longer ones are clamped.
const MAX_RTT_SAMPLE: Duration = Duration::from_secs(3600);

/// A snapshot for temporal sharing.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RateSnapshot {
    pub cwnd_bytes: f64,
    pub ssthresh_bytes: f64,
    pub srtt: Duration,
    pub min_rtt: Duration,
}

/// AIMD + aging state of one macroflow.
#[derive(Clone, Debug)]
pub(crate) struct RateController {
    mtu: f64,
    cwnd_bytes: f64,
    ssthresh_bytes: f64,
    rtt: RttEstimator,
    initial_rtt: Duration,
    /// A minimum RTT inherited from the temporal cache (the estimator cannot be seeded with it).
    cached_min_rtt: Option<Duration>,
    min_rate: f64,
    max_rate: f64,
    half_life: AgingHalfLife,
    /// [`CmConfig::feedback_floor`].
    feedback_floor: Duration,
    trigger: AgingTrigger,
    /// No further multiplicative decrease before this time (one reduction per RTT).
    decrease_guard_until: Time,
    /// In the slow start forced by persistent congestion (`CM_NO_FEEDBACK`), not yet back at
    /// ssthresh and without a loss since.
    restarting: bool,
    /// Open-loop bytes notified and not yet reported received or lost (RFC 3124 `ownd`,
    /// without the window-limited flows' bytes, which the manager counts per flow).
    ownd_bytes: u64,
    /// Feedback has been awaited since this time (data is outstanding).
    awaiting_since: Option<Time>,
    /// The first probe sent since the last feedback while open-loop data was outstanding
    /// (the paper's anchor: "a response to a probe message within a round-trip time").
    probe_since: Option<Time>,
    /// While aging: when the next halving is due.
    aging_next: Option<Time>,
}

impl RateController {
    pub(crate) fn new(config: &CmConfig) -> RateController {
        let mtu = config.mtu_bytes.max(1) as f64;
        RateController {
            mtu,
            cwnd_bytes: initial_window(config.mtu_bytes.max(1)) as f64,
            ssthresh_bytes: f64::INFINITY,
            rtt: RttEstimator::new(RtoConfig::default()),
            initial_rtt: config.initial_rtt.max(Duration::from_micros(1)),
            cached_min_rtt: None,
            min_rate: config.min_rate_bytes_per_s.max(1.0),
            max_rate: config
                .max_rate_bytes_per_s
                .max(config.min_rate_bytes_per_s.max(1.0)),
            half_life: config.aging_half_life,
            feedback_floor: config.feedback_floor,
            trigger: config.aging_trigger,
            decrease_guard_until: Time::ZERO,
            restarting: false,
            ownd_bytes: 0,
            awaiting_since: None,
            probe_since: None,
            aging_next: None,
        }
    }

    /// Starts from a cached snapshot (RFC 9040 §6 temporal sharing). `with_rate` reuses the
    /// window and ssthresh as well as the RTTs.
    pub(crate) fn restore(&mut self, snap: &RateSnapshot, with_rate: bool) {
        // The estimator can only be fed samples: one sample of the cached srtt gives
        // srtt = cached, rttvar = srtt/2 (RFC 6298 §2.2's conservative start).
        self.rtt.on_sample(snap.srtt);
        self.cached_min_rtt = Some(snap.min_rtt);
        if with_rate {
            self.cwnd_bytes = snap.cwnd_bytes.max(self.mtu);
            self.ssthresh_bytes = snap.ssthresh_bytes.max(2.0 * self.mtu);
            self.clamp();
        }
    }

    pub(crate) fn snapshot(&self) -> Option<RateSnapshot> {
        Some(RateSnapshot {
            cwnd_bytes: self.cwnd_bytes,
            ssthresh_bytes: self.ssthresh_bytes,
            srtt: self.rtt.srtt()?,
            min_rtt: self.min_rtt()?,
        })
    }

    /// Smoothed RTT, or the configured initial RTT before any sample.
    pub(crate) fn srtt_or_initial(&self) -> Duration {
        self.rtt.srtt().unwrap_or(self.initial_rtt)
    }

    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt()
    }

    pub(crate) fn rttvar(&self) -> Option<Duration> {
        self.rtt.srtt().map(|_| self.rtt.rttvar())
    }

    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        match (self.rtt.min_rtt(), self.cached_min_rtt) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Estimates are valid once an RTT has been measured (RFC 3124 §3.4).
    pub(crate) fn is_valid(&self) -> bool {
        self.rtt.srtt().is_some()
    }

    /// The macroflow's rate, bytes/s.
    pub(crate) fn rate_bytes_per_s(&self) -> f64 {
        let srtt = self.srtt_or_initial().as_secs_f64().max(1e-9);
        (self.cwnd_bytes / srtt).clamp(self.min_rate.min(self.max_rate), self.max_rate)
    }

    /// The window equivalent of the rate, bytes (for traces).
    pub(crate) fn cwnd_bytes(&self) -> f64 {
        self.cwnd_bytes
    }

    pub(crate) fn ssthresh_bytes(&self) -> f64 {
        self.ssthresh_bytes
    }

    pub(crate) fn is_aging(&self) -> bool {
        self.aging_next.is_some()
    }

    fn floor_cwnd(&self) -> f64 {
        self.min_rate * self.srtt_or_initial().as_secs_f64()
    }

    fn clamp(&mut self) {
        let srtt = self.srtt_or_initial().as_secs_f64();
        let max_cwnd = (self.max_rate * srtt).max(self.mtu);
        self.cwnd_bytes = self
            .cwnd_bytes
            .clamp(self.floor_cwnd().min(max_cwnd), max_cwnd);
    }

    fn half_life(&self) -> Duration {
        let d = match self.half_life {
            AgingHalfLife::MinRtt => self.min_rtt().unwrap_or(self.initial_rtt),
            AgingHalfLife::Srtt => self.srtt_or_initial(),
        };
        // Never shorter than the host's feedback floor: on loopback the minimum RTT is tens
        // of microseconds, and halving at that period took an implicit-feedback flow to its
        // floor rate within a millisecond of the application being descheduled.
        d.max(self.feedback_floor).max(Duration::from_micros(1))
    }

    /// `cm_notify`: `bytes` of open-loop data (from flows that are not window-limited, see
    /// [`RateController::on_window_feedback`]) left the host; they arm exponential aging.
    pub(crate) fn on_sent(&mut self, now: Time, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.ownd_bytes = self.ownd_bytes.saturating_add(bytes);
        if self.awaiting_since.is_none() {
            self.awaiting_since = Some(now);
        }
    }

    /// A probe left for this macroflow's destination. With the paper's trigger, aging is
    /// timed from the first probe that stays unanswered while open-loop data is outstanding
    /// (papers/003 §2.2.3), not from the data itself: data sent just after a probe waits for
    /// the next probe, up to 1/`probes_per_rtt` of an RTT, before any response can cover it.
    pub(crate) fn on_probe_sent(&mut self, now: Time) {
        if self.ownd_bytes > 0 && self.probe_since.is_none() {
            self.probe_since = Some(now);
        }
    }

    /// When the next aging halving is due, if feedback stays away.
    pub(crate) fn next_aging_at(&self) -> Option<Time> {
        if self.cwnd_bytes <= self.floor_cwnd() * 1.000_001 {
            return None;
        }
        match self.aging_next {
            Some(t) => Some(t),
            // papers/003 §2.2.3: aging "is triggered when the CM does not receive a response
            // to a probe message within a round-trip time".
            None => {
                let anchor = match self.trigger {
                    // Probe-fed macroflows time from the unanswered probe; flows fed by their
                    // application's own reports (no probes) from the data.
                    AgingTrigger::Srtt => self.probe_since.or(self.awaiting_since),
                    AgingTrigger::Rto => self.awaiting_since,
                };
                anchor.map(|t| t + self.feedback_timeout())
            }
        }
    }

    /// "A round-trip time" for the aging trigger: srtt ([`AgingTrigger::Srtt`], the paper's),
    /// or `srtt + max(G, 4·rttvar)` ([`AgingTrigger::Rto`], RFC 6298's RTO formula without
    /// its 1 s floor and backoff, which absorbs RTT jitter and probe spacing).
    pub(crate) fn feedback_timeout(&self) -> Duration {
        // The round trip is taken as at least the feedback floor (see `CmConfig`).
        match (
            self.rtt.srtt().map(|s| s.max(self.feedback_floor)),
            self.trigger,
        ) {
            // One clock granularity G past srtt: a response arriving exactly one srtt after
            // its probe is in time.
            (Some(srtt), AgingTrigger::Srtt) => srtt + FEEDBACK_GRANULARITY,
            (Some(srtt), AgingTrigger::Rto) => {
                srtt + FEEDBACK_GRANULARITY.max(self.rtt.rttvar() * 4)
            }
            (None, _) => self.initial_rtt,
        }
    }

    /// Applies one aging halving at `at` (the caller checked `next_aging_at() <= now`).
    pub(crate) fn age_once(&mut self, at: Time) {
        if self.aging_next.is_none() {
            // Entering open-loop mode. Like RFC 2861 §3's decay of an idle window, remember
            // 3/4 of the closed-loop window as ssthresh so slow start can regain it once
            // feedback is back; any loss that feedback reports then halves as usual.
            self.ssthresh_bytes = self.ssthresh_bytes.max(0.75 * self.cwnd_bytes);
        }
        // papers/003 §2.2.3: "In each subsequent round-trip period starting from this point,
        // the open-loop transmission rate is halved" — with the minimum RTT as the period.
        self.cwnd_bytes = (self.cwnd_bytes / 2.0).max(self.floor_cwnd());
        self.aging_next = Some(at + self.half_life());
    }

    /// `cm_update` about open-loop data (probe responses, an application's own reports).
    /// Returns what happened, for counters.
    pub(crate) fn on_feedback(&mut self, now: Time, fb: &Feedback) -> RateAction {
        self.feedback(now, fb, true)
    }

    /// `cm_update` from a window-limited flow (TCP/CM: `FeedbackSource::Acks`). Its bytes
    /// never arm exponential aging: papers/003 §2.2.3 ages "the open-loop transmission rate"
    /// when "the CM does not receive a response to a probe message within a round-trip
    /// time", whereas a window-limited flow stops sending by itself when its acknowledgements
    /// stop, and its persistent-congestion signal is the timeout (§2.1: "when persistent
    /// congestion occurs (e.g., a TCP timeout), the rate drops to a small value forcing slow
    /// start"; RFC 3124 §5.1.1 `CM_NO_FEEDBACK`). Aging it as well would cut the window
    /// several times while TCP waits for its RTO (≥ 1 s), and the timeout would then take
    /// ssthresh from the aged window. Its feedback still ends aging: it is news of the path.
    pub(crate) fn on_window_feedback(&mut self, now: Time, fb: &Feedback) -> RateAction {
        self.feedback(now, fb, false)
    }

    fn feedback(&mut self, now: Time, fb: &Feedback, open_loop: bool) -> RateAction {
        if let Some(rtt) = fb.rtt.filter(|r| !r.is_zero()) {
            // Application-supplied samples are bounded so the estimator's Duration arithmetic
            // (`srtt * 7`, `rttvar * 4`) cannot overflow.
            self.rtt.on_sample(rtt.min(MAX_RTT_SAMPLE));
        }
        self.aging_next = None;
        if open_loop {
            self.ownd_bytes = if fb.mode == LossMode::NoFeedback {
                // Everything outstanding is presumed gone.
                0
            } else {
                let reported = fb.nrecd_bytes.saturating_add(fb.nlost_bytes);
                self.ownd_bytes.saturating_sub(reported)
            };
        }
        self.awaiting_since = (self.ownd_bytes > 0).then_some(now);
        self.probe_since = None;
        let action = match fb.mode {
            LossMode::NoFeedback => {
                // papers/003 §2.1: "when persistent congestion occurs (e.g., a TCP timeout),
                // the rate drops to a small value forcing slow start"; RFC 3124 §5.2.
                //
                // A second report during the slow start the first one forced is the same
                // congestion episode: like RFC 5681 §3.1 ("When a TCP sender detects segment
                // loss using the retransmission timer and the given segment has already been
                // retransmitted by way of the retransmission timer at least once, the value
                // of ssthresh is held constant"), ssthresh keeps the pre-timeout half instead
                // of halving the restarted window again (which would leave a TCP/CM flow
                // creeping up linearly from 2 MTU where TCP slow-starts back to half its old
                // flight).
                if !(self.restarting && self.cwnd_bytes < self.ssthresh_bytes) {
                    self.ssthresh_bytes = (self.cwnd_bytes / 2.0).max(2.0 * self.mtu);
                }
                self.restarting = true;
                self.cwnd_bytes = self.mtu;
                self.decrease_guard_until = now + self.srtt_or_initial();
                RateAction::Restart
            }
            LossMode::Loss | LossMode::Ecn => {
                if now < self.decrease_guard_until {
                    RateAction::None
                } else {
                    // papers/003 §2.1: "Upon a loss, the rate reduces by a factor of two".
                    self.restarting = false;
                    self.cwnd_bytes = (self.cwnd_bytes / 2.0).max(self.mtu);
                    self.ssthresh_bytes = self.cwnd_bytes;
                    self.decrease_guard_until = now + self.srtt_or_initial();
                    RateAction::Decrease
                }
            }
            LossMode::NoCongestion => {
                self.increase(fb.nrecd_bytes as f64);
                RateAction::None
            }
        };
        self.clamp();
        action
    }

    /// Additive increase no more aggressive than TCP (papers/003 §2.1; RFC 3124 §5.2).
    fn increase(&mut self, nrecd: f64) {
        if nrecd <= 0.0 {
            return;
        }
        if self.cwnd_bytes < self.ssthresh_bytes {
            self.cwnd_bytes += nrecd.min(self.ssthresh_bytes - self.cwnd_bytes);
            if self.cwnd_bytes >= self.ssthresh_bytes {
                self.restarting = false;
            }
        } else {
            self.cwnd_bytes += self.mtu * nrecd / self.cwnd_bytes.max(self.mtu);
        }
    }
}

/// What a feedback did to the rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RateAction {
    /// Nothing notable (an increase, or a loss inside the once-per-RTT guard).
    None,
    /// Multiplicative decrease.
    Decrease,
    /// Persistent congestion: back to one MTU per RTT and slow start.
    Restart,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn rc() -> RateController {
        let config = CmConfig {
            mtu_bytes: 1000,
            ..CmConfig::default()
        };
        RateController::new(&config)
    }

    #[test]
    fn test_slow_start_doubles_per_rtt_then_avoidance_adds_one_mtu() {
        let mut r = rc();
        r.on_feedback(Time::ZERO, &Feedback::received(0, Some(ms(100))));
        assert_eq!(r.cwnd_bytes(), 4000.0);
        r.on_feedback(Time::ZERO, &Feedback::received(4000, None));
        assert_eq!(r.cwnd_bytes(), 8000.0, "slow start: +nrecd");
        r.ssthresh_bytes = 8000.0;
        r.on_feedback(Time::ZERO, &Feedback::received(8000, None));
        assert_eq!(r.cwnd_bytes(), 9000.0, "avoidance: +1 MTU per window acked");
        assert!((r.rate_bytes_per_s() - 90_000.0).abs() < 1e-6);
    }

    #[test]
    fn test_loss_halves_once_per_rtt() {
        let mut r = rc();
        r.on_feedback(Time::ZERO, &Feedback::received(0, Some(ms(100))));
        r.cwnd_bytes = 16_000.0;
        let t = Time::from_secs(1);
        assert_eq!(
            r.on_feedback(t, &Feedback::loss(0, 1000)),
            RateAction::Decrease
        );
        assert_eq!(r.cwnd_bytes(), 8000.0);
        assert_eq!(r.ssthresh_bytes(), 8000.0);
        assert_eq!(
            r.on_feedback(t + ms(50), &Feedback::loss(0, 1000)),
            RateAction::None
        );
        assert_eq!(r.cwnd_bytes(), 8000.0, "same window: no second halving");
        r.on_feedback(t + ms(101), &Feedback::loss(0, 1000));
        assert_eq!(r.cwnd_bytes(), 4000.0);
    }

    #[test]
    fn test_timeout_restarts_from_one_mtu() {
        let mut r = rc();
        r.on_feedback(Time::ZERO, &Feedback::received(0, Some(ms(100))));
        r.cwnd_bytes = 20_000.0;
        let fb = Feedback {
            mode: LossMode::NoFeedback,
            ..Feedback::loss(0, 1000)
        };
        assert_eq!(r.on_feedback(Time::from_secs(1), &fb), RateAction::Restart);
        assert_eq!(r.cwnd_bytes(), 1000.0);
        assert_eq!(r.ssthresh_bytes(), 10_000.0);
    }

    #[test]
    fn test_repeated_timeout_in_restart_slow_start_holds_ssthresh() {
        let mut r = rc();
        r.on_feedback(Time::ZERO, &Feedback::received(0, Some(ms(100))));
        r.cwnd_bytes = 20_000.0;
        let timeout = Feedback {
            mode: LossMode::NoFeedback,
            ..Feedback::loss(0, 1000)
        };
        r.on_feedback(Time::from_secs(1), &timeout);
        r.on_feedback(Time::from_secs(2), &Feedback::received(3000, None));
        assert_eq!(r.cwnd_bytes(), 4000.0, "slow start after the timeout");
        // The retransmission times out too: same episode, ssthresh held (RFC 5681 §3.1).
        r.on_feedback(Time::from_secs(4), &timeout);
        assert_eq!(r.cwnd_bytes(), 1000.0);
        assert_eq!(r.ssthresh_bytes(), 10_000.0);
        // Back at ssthresh, a new timeout halves again.
        r.on_feedback(Time::from_secs(5), &Feedback::received(9000, None));
        assert_eq!(r.cwnd_bytes(), 10_000.0);
        r.on_feedback(Time::from_secs(6), &timeout);
        assert_eq!(r.ssthresh_bytes(), 5000.0);
    }
}
