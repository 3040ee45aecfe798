//! The TPBA decision logic (`papers/002_ef8b8f60f6080824.txt` §4): when to probe on TCP,
//! what rate to run at on UDP, when to go back.
//!
//! ```text
//!            3 samples agree (ε or z %)              T_running passed, or successive
//!  Probing ───────────────────────────▶ (switch) ──▶ Running ── large decreases ──┐
//!     ▲   samples r[i] from snd_una every T_TCP      rate rs, r ← r(1 − p_loss R_f) │
//!     └───────────────────────────────── (switch, cwnd_new) ◀────────────────────────┘
//! ```
//!
//! The controller only decides. Switching happens when its owner (the flow sender of
//! [`super::fsocket`]) reaches an ADU boundary and, towards the running period, has
//! evacuated the TCP send buffer; the owner then calls [`Controller::commit_switch`].
//! Until then [`Controller::switch_wanted`] says where the controller wants to go, and the
//! current period's transport keeps carrying data.
//!
//! # Calling pattern
//!
//! ```text
//! ctl.handle_tcp_progress(now, conn.bytes_acked())     // after every TCP input (probing)
//! ctl.handle_cwnd_reduction(now)                       // when cwnd shrinks (§7 sampling)
//! ctl.handle_report(now, expected, lost)               // each receiver report (running)
//! ctl.handle_timeout(now) at ctl.poll_timeout()
//! if ctl.switch_wanted().is_some() && at ADU boundary && (evacuated or going to probe) {
//!     if let Some(cwnd) = ctl.commit_switch(now, cwnd, smss) { set TCP cwnd }
//! }
//! drain ctl.poll_event()
//! ```

use super::config::{Sampling, TpbaConfig};
use crate::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Which period the flow is in, i.e. which transport carries its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Period {
    /// Rate probing: data on TCP.
    Probing,
    /// Running: data on UDP at a fixed (never increased) rate.
    Running,
}

/// Why a running period ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum RunningEnd {
    /// `T_running` passed.
    Elapsed,
    /// Successive large decreases (§4).
    LargeDecreases,
}

/// What the controller did, for traces and metrics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TpbaEvent {
    /// A probing sample `r[i]` (bytes/s), `index` = i.
    Sample {
        /// i, from 0 at the start of the probing period.
        index: u32,
        /// The rate.
        rate_bytes_per_s: f64,
    },
    /// Probing found its rate `rs`; a switch to running is wanted.
    ProbingDone {
        /// `rs`, bytes/s.
        rate_bytes_per_s: f64,
    },
    /// The running rate was decreased at an adaptation point.
    Decreased {
        /// Rate before.
        from_bytes_per_s: f64,
        /// Rate after.
        to_bytes_per_s: f64,
        /// The loss ratio that caused it.
        loss_ratio: f64,
    },
    /// The running period wants to end.
    RunningDone {
        /// Why.
        reason: RunningEnd,
    },
    /// The switch was made.
    Switched {
        /// The period now in force.
        to: Period,
        /// The congestion window handed to TCP (switches to probing after a running period).
        cwnd_new_bytes: Option<u64>,
    },
}

#[derive(Clone, Debug)]
enum Phase {
    Probing {
        /// The last three samples, oldest first.
        samples: VecDeque<f64>,
        count: u32,
        last_sample_at: Time,
        last_acked: u64,
        next_sample_at: Time,
        /// Probing has found `rs`; waiting for the switch.
        done: Option<f64>,
    },
    Running {
        rate: f64,
        rs: f64,
        started_at: Time,
        next_adapt_at: Time,
        /// Receiver-reported (expected, lost) since the last adaptation point.
        expected: u64,
        lost: u64,
        large_decreases: u32,
        /// The running period has ended; waiting for the switch.
        done: Option<RunningEnd>,
    },
}

/// The TPBA controller. See the module docs.
#[derive(Clone, Debug)]
pub struct Controller {
    config: TpbaConfig,
    phase: Phase,
    /// `cwnd_old`: TCP's cwnd when the last running period began.
    cwnd_old: Option<u64>,
    bytes_acked: u64,
    events: VecDeque<TpbaEvent>,
}

/// Bound on queued events.
const MAX_EVENTS: usize = 256;

/// §4's hand-over window when probing resumes:
/// `cwnd_new = max(cwnd_old × r_f / (t_maxseg × r_s), 1) × t_maxseg`, in bytes, with the
/// segment count rounded down as the kernel's integer arithmetic would.
pub fn cwnd_new(cwnd_old_bytes: u64, rf: f64, rs: f64, tmaxseg_bytes: u64) -> u64 {
    let mss = tmaxseg_bytes.max(1);
    let segments = if rs > 0.0 && rf.is_finite() && rf >= 0.0 {
        crate::convert::f64_u64_sat((cwnd_old_bytes as f64 * rf / (mss as f64 * rs)).floor())
    } else {
        0
    };
    segments.max(1).saturating_mul(mss)
}

impl Controller {
    /// A controller that starts with a rate-probing period at `now` (§4: "The TPBA sender
    /// starts transmission with the rate-probing period").
    pub fn new(now: Time, config: TpbaConfig) -> Controller {
        let mut c = Controller {
            phase: Phase::Running {
                rate: 0.0,
                rs: 0.0,
                started_at: now,
                next_adapt_at: now,
                expected: 0,
                lost: 0,
                large_decreases: 0,
                done: None,
            },
            config,
            cwnd_old: None,
            bytes_acked: 0,
            events: VecDeque::new(),
        };
        c.start_probing(now);
        c
    }

    /// The configuration.
    pub fn config(&self) -> &TpbaConfig {
        &self.config
    }

    /// The period in force (whose transport carries data).
    pub fn period(&self) -> Period {
        match self.phase {
            Phase::Probing { .. } => Period::Probing,
            Phase::Running { .. } => Period::Running,
        }
    }

    /// The UDP sending rate of the running period, bytes/s.
    pub fn rate_bytes_per_s(&self) -> Option<f64> {
        match self.phase {
            Phase::Running { rate, .. } => Some(rate),
            Phase::Probing { .. } => None,
        }
    }

    /// The period the controller wants to switch to, if any.
    pub fn switch_wanted(&self) -> Option<Period> {
        match self.phase {
            Phase::Probing { done: Some(_), .. } => Some(Period::Running),
            Phase::Running { done: Some(_), .. } => Some(Period::Probing),
            _ => None,
        }
    }

    /// The probing samples of the current period, oldest first (at most three).
    pub fn samples(&self) -> Vec<f64> {
        match &self.phase {
            Phase::Probing { samples, .. } => samples.iter().copied().collect(),
            Phase::Running { .. } => Vec::new(),
        }
    }

    fn push_event(&mut self, e: TpbaEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    fn start_probing(&mut self, now: Time) {
        let first = match self.config.sampling {
            Sampling::Fixed => self.config.t_tcp,
            Sampling::CwndReductions { max_period, .. } => max_period,
        };
        self.phase = Phase::Probing {
            samples: VecDeque::with_capacity(3),
            count: 0,
            last_sample_at: now,
            last_acked: self.bytes_acked,
            next_sample_at: now + first,
            done: None,
        };
    }

    /// TCP's cumulative acknowledged bytes (snd_una's movement). Call after every TCP input.
    pub fn handle_tcp_progress(&mut self, _now: Time, bytes_acked: u64) {
        self.bytes_acked = self.bytes_acked.max(bytes_acked);
    }

    /// TCP reduced its congestion window (fast retransmit or timeout). Used by
    /// [`Sampling::CwndReductions`]; ignored otherwise.
    pub fn handle_cwnd_reduction(&mut self, now: Time) {
        let Sampling::CwndReductions { min_period, .. } = self.config.sampling else {
            return;
        };
        if let Phase::Probing {
            last_sample_at,
            done: None,
            ..
        } = self.phase
            && now.saturating_since(last_sample_at) >= min_period
        {
            self.take_sample(now);
        }
    }

    /// A receiver report: of `expected` datagrams since the previous report, `lost` were
    /// lost. Counted towards the next adaptation point of the running period.
    pub fn handle_report(&mut self, _now: Time, expected: u64, lost: u64) {
        if let Phase::Running {
            expected: e,
            lost: l,
            ..
        } = &mut self.phase
        {
            *e = e.saturating_add(expected);
            *l = l.saturating_add(lost.min(expected));
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        match self.phase {
            Phase::Probing {
                next_sample_at,
                done: None,
                ..
            } => Some(next_sample_at),
            Phase::Running {
                started_at,
                next_adapt_at,
                done: None,
                ..
            } => Some(next_adapt_at.min(started_at + self.config.t_running)),
            _ => None,
        }
    }

    /// Takes samples, runs adaptation points and ends the running period when due.
    pub fn handle_timeout(&mut self, now: Time) {
        match self.phase {
            Phase::Probing {
                next_sample_at,
                done: None,
                ..
            } if now >= next_sample_at => self.take_sample(now),
            Phase::Running {
                started_at,
                next_adapt_at,
                done: None,
                ..
            } => {
                if now >= next_adapt_at {
                    self.adapt(now);
                }
                if now >= started_at + self.config.t_running {
                    self.end_running(RunningEnd::Elapsed);
                }
            }
            _ => {}
        }
    }

    fn take_sample(&mut self, now: Time) {
        let bytes_acked = self.bytes_acked;
        let period_len = match self.config.sampling {
            Sampling::Fixed => self.config.t_tcp,
            Sampling::CwndReductions { max_period, .. } => max_period,
        };
        let agreement = self.config.agreement;
        let max_samples = self.config.max_probe_samples;
        let Phase::Probing {
            samples,
            count,
            last_sample_at,
            last_acked,
            next_sample_at,
            done,
        } = &mut self.phase
        else {
            return;
        };
        let elapsed = now.saturating_since(*last_sample_at).as_secs_f64();
        if elapsed <= 0.0 {
            return;
        }
        let rate = bytes_acked.saturating_sub(*last_acked) as f64 / elapsed;
        let index = *count;
        *count = count.saturating_add(1);
        *last_sample_at = now;
        *last_acked = bytes_acked;
        // Fixed sampling keeps its grid; cwnd-driven sampling restarts its fallback.
        *next_sample_at = match self.config.sampling {
            Sampling::Fixed => (*next_sample_at + period_len).max(now),
            Sampling::CwndReductions { .. } => now + period_len,
        };
        if samples.len() == 3 {
            samples.pop_front();
        }
        samples.push_back(rate);
        let mut finished = None;
        if let (Some(&a), Some(&b), Some(&c)) = (samples.front(), samples.get(1), samples.get(2)) {
            // §4: |r[i−2] − r[i]| < ε and |r[i−1] − r[i]| < ε.
            let tol = agreement.tolerance(c);
            if (a - c).abs() < tol && (b - c).abs() < tol {
                finished = Some(c);
            } else if max_samples.is_some_and(|m| *count >= m) {
                finished = Some((a + b + c) / 3.0);
            }
        }
        if let Some(rs) = finished {
            *done = Some(rs);
        }
        self.push_event(TpbaEvent::Sample {
            index,
            rate_bytes_per_s: rate,
        });
        if let Some(rs) = finished {
            self.push_event(TpbaEvent::ProbingDone {
                rate_bytes_per_s: rs,
            });
        }
    }

    /// An adaptation point of the running period (§4): "If packet loss is reported, the rate
    /// is reduced: r[i] = r[i − 1] × (1 − p_loss R_f)". The rate is never increased.
    fn adapt(&mut self, now: Time) {
        let r_f = self.config.r_f;
        let r_min = self.config.r_min_bytes_per_s;
        let t_adapt = self.config.t_adapt;
        let large = self.config.large_decrease;
        let Phase::Running {
            rate,
            next_adapt_at,
            expected,
            lost,
            large_decreases,
            ..
        } = &mut self.phase
        else {
            return;
        };
        *next_adapt_at = (*next_adapt_at + t_adapt).max(now + Duration::from_nanos(1));
        let p_loss = if *expected == 0 {
            0.0
        } else {
            *lost as f64 / *expected as f64
        };
        *expected = 0;
        *lost = 0;
        if p_loss <= 0.0 {
            *large_decreases = 0;
            return;
        }
        let from = *rate;
        let cut = (p_loss * r_f).min(1.0);
        *rate = (from * (1.0 - cut)).max(r_min);
        let mut end = false;
        if let Some(l) = large {
            if cut >= l.fraction {
                *large_decreases += 1;
                end = *large_decreases >= l.successive.max(1);
            } else {
                *large_decreases = 0;
            }
        }
        let to = *rate;
        self.push_event(TpbaEvent::Decreased {
            from_bytes_per_s: from,
            to_bytes_per_s: to,
            loss_ratio: p_loss,
        });
        if end {
            self.end_running(RunningEnd::LargeDecreases);
        }
    }

    fn end_running(&mut self, reason: RunningEnd) {
        if let Phase::Running { done, .. } = &mut self.phase
            && done.is_none()
        {
            *done = Some(reason);
            self.push_event(TpbaEvent::RunningDone { reason });
        }
    }

    /// Makes the wanted switch. Call at an ADU boundary, and towards the running period only
    /// once the TCP send buffer is evacuated. `cwnd_bytes` is TCP's current congestion window
    /// and `smss` its maximum segment size (`t_maxseg`).
    ///
    /// Returns the congestion window to hand to TCP when probing resumes after a running
    /// period (§4's `cwnd_new`); `None` otherwise (also when no switch was wanted).
    pub fn commit_switch(&mut self, now: Time, cwnd_bytes: u64, smss: u64) -> Option<u64> {
        match self.phase {
            Phase::Probing { done: Some(rs), .. } => {
                // §4: "Before the transition to the running period, r[i] is stored as rs."
                self.cwnd_old = Some(cwnd_bytes);
                self.phase = Phase::Running {
                    rate: rs.max(self.config.r_min_bytes_per_s),
                    rs,
                    started_at: now,
                    next_adapt_at: now + self.config.t_adapt,
                    expected: 0,
                    lost: 0,
                    large_decreases: 0,
                    done: None,
                };
                self.push_event(TpbaEvent::Switched {
                    to: Period::Running,
                    cwnd_new_bytes: None,
                });
                None
            }
            Phase::Running {
                rate,
                rs,
                done: Some(_),
                ..
            } => {
                let cwnd = self
                    .cwnd_old
                    .map(|old| cwnd_new(old, rate, rs, smss))
                    .unwrap_or(cwnd_bytes);
                self.start_probing(now);
                self.push_event(TpbaEvent::Switched {
                    to: Period::Probing,
                    cwnd_new_bytes: Some(cwnd),
                });
                Some(cwnd)
            }
            _ => None,
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<TpbaEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ratectl::kbps;
    use crate::tpba::config::{Agreement, LargeDecrease};

    fn secs(s: u64) -> Time {
        Time::from_secs(s)
    }

    /// Feeds one sample per second at the given rates (bytes/s); returns the controller.
    fn probe(ctl: &mut Controller, start: u64, rates: &[f64]) -> u64 {
        let mut acked = ctl.bytes_acked;
        let mut t = start;
        for r in rates {
            acked += crate::convert::f64_u64_sat(*r);
            t += 1;
            ctl.handle_tcp_progress(secs(t), acked);
            assert_eq!(ctl.poll_timeout(), Some(secs(t)));
            ctl.handle_timeout(secs(t));
        }
        t
    }

    #[test]
    fn test_probing_ends_when_three_samples_agree_within_epsilon() {
        // ε = 30 kbit/s = 3750 B/s.
        let mut ctl = Controller::new(Time::ZERO, TpbaConfig::default());
        assert_eq!(ctl.period(), Period::Probing);
        probe(&mut ctl, 0, &[10_000.0, 40_000.0, 50_000.0, 52_000.0]);
        // 40 000 / 50 000 / 52 000: |40 000 − 52 000| ≥ ε → still probing.
        assert_eq!(ctl.switch_wanted(), None);
        probe(&mut ctl, 4, &[50_500.0]);
        // 50 000, 52 000, 50 500: both differences < 3750 → done, rs = r[i] = 50 500.
        assert_eq!(ctl.switch_wanted(), Some(Period::Running));
        assert_eq!(
            ctl.period(),
            Period::Probing,
            "switching waits for the owner"
        );
        let events: Vec<_> = std::iter::from_fn(|| ctl.poll_event()).collect();
        assert!(events.contains(&TpbaEvent::ProbingDone {
            rate_bytes_per_s: 50_500.0
        }));
        assert_eq!(ctl.commit_switch(secs(5), 20_000, 1000), None);
        assert_eq!(ctl.period(), Period::Running);
        assert_eq!(ctl.rate_bytes_per_s(), Some(50_500.0));
    }

    #[test]
    fn test_difference_equal_to_epsilon_does_not_agree() {
        let eps = kbps(30.0);
        let mut ctl = Controller::new(Time::ZERO, TpbaConfig::default());
        probe(&mut ctl, 0, &[100_000.0, 100_000.0 + eps, 100_000.0]);
        assert_eq!(ctl.switch_wanted(), None, "the test is strict: < ε");
    }

    #[test]
    fn test_relative_criterion_scales_with_rate() {
        let config = TpbaConfig {
            agreement: Agreement::Relative { z: 0.05 },
            ..TpbaConfig::default()
        };
        // At 1 MB/s, ±20 kB/s is within 5 % although it exceeds ε = 3750 B/s.
        let mut ctl = Controller::new(Time::ZERO, config.clone());
        probe(&mut ctl, 0, &[1_000_000.0, 1_020_000.0, 1_000_000.0]);
        assert_eq!(ctl.switch_wanted(), Some(Period::Running));
        // At 20 kB/s, ±3 kB/s (15 %) is not, although it is within ε.
        let mut ctl = Controller::new(Time::ZERO, config);
        probe(&mut ctl, 0, &[20_000.0, 23_000.0, 20_000.0]);
        assert_eq!(ctl.switch_wanted(), None);
    }

    #[test]
    fn test_cwnd_reduction_sampling_uses_the_interval_between_reductions() {
        let config = TpbaConfig {
            sampling: Sampling::CwndReductions {
                min_period: Duration::from_millis(100),
                max_period: Duration::from_secs(10),
            },
            ..TpbaConfig::default()
        };
        let mut ctl = Controller::new(Time::ZERO, config);
        assert_eq!(ctl.poll_timeout(), Some(secs(10)));
        // Reductions at 2 s, 2.05 s (same episode: ignored), 5 s, 8 s with 100 kB/s acked.
        ctl.handle_tcp_progress(secs(2), 200_000);
        ctl.handle_cwnd_reduction(secs(2));
        ctl.handle_cwnd_reduction(Time::from_millis(2050));
        ctl.handle_tcp_progress(secs(5), 500_000);
        ctl.handle_cwnd_reduction(secs(5));
        ctl.handle_tcp_progress(secs(8), 800_000);
        ctl.handle_cwnd_reduction(secs(8));
        assert_eq!(ctl.samples(), vec![100_000.0; 3]);
        assert_eq!(ctl.switch_wanted(), Some(Period::Running));
    }

    #[test]
    fn test_max_probe_samples_ends_with_the_mean() {
        let config = TpbaConfig {
            max_probe_samples: Some(4),
            ..TpbaConfig::default()
        };
        let mut ctl = Controller::new(Time::ZERO, config);
        probe(&mut ctl, 0, &[10_000.0, 90_000.0, 10_000.0, 50_000.0]);
        assert_eq!(ctl.switch_wanted(), Some(Period::Running));
        ctl.commit_switch(secs(4), 10_000, 1000);
        assert_eq!(ctl.rate_bytes_per_s(), Some(50_000.0));
    }

    fn running(rate: f64, config: TpbaConfig) -> Controller {
        let mut ctl = Controller::new(Time::ZERO, config);
        probe(&mut ctl, 0, &[rate, rate, rate]);
        assert_eq!(ctl.commit_switch(secs(3), 30_000, 1000), None);
        ctl
    }

    #[test]
    fn test_running_decreases_multiplicatively_and_never_increases() {
        let mut ctl = running(100_000.0, TpbaConfig::default());
        // Adaptation points every T_adapt = 3 s from 3 s: 6 s, 9 s, 12 s.
        assert_eq!(ctl.poll_timeout(), Some(secs(6)));
        ctl.handle_report(secs(4), 100, 0);
        ctl.handle_report(secs(5), 100, 4);
        ctl.handle_timeout(secs(6));
        // p_loss = 4/200 = 0.02: r = 100 000 × (1 − 0.02 × 3) = 94 000.
        let r = ctl.rate_bytes_per_s().unwrap();
        assert!((r - 94_000.0).abs() < 1e-6, "{r}");
        // A loss-free adaptation point does not raise it.
        ctl.handle_report(secs(7), 100, 0);
        ctl.handle_timeout(secs(9));
        assert_eq!(ctl.rate_bytes_per_s(), Some(r));
        // Heavy loss cannot go below r_min.
        ctl.handle_report(secs(10), 10, 9);
        ctl.handle_timeout(secs(12));
        assert_eq!(ctl.rate_bytes_per_s(), Some(512.0));
    }

    #[test]
    fn test_running_returns_to_probing_after_t_running_with_cwnd_new() {
        let mut ctl = running(100_000.0, TpbaConfig::default());
        ctl.handle_report(secs(5), 100, 5); // p = 0.05 → r_f = 85 000
        ctl.handle_timeout(secs(6));
        for t in [9, 12, 13] {
            ctl.handle_timeout(secs(t));
        }
        assert_eq!(ctl.switch_wanted(), Some(Period::Probing));
        assert_eq!(ctl.poll_timeout(), None);
        // Data keeps flowing on UDP until the owner reaches an ADU boundary.
        assert_eq!(ctl.period(), Period::Running);
        // cwnd_new = max(⌊30 000 × 85 000 / (1000 × 100 000)⌋, 1) × 1000 = 25 000.
        assert_eq!(
            ctl.commit_switch(Time::from_millis(13_200), 99_999, 1000),
            Some(25_000)
        );
        assert_eq!(ctl.period(), Period::Probing);
        assert_eq!(ctl.poll_timeout(), Some(Time::from_millis(14_200)));
    }

    #[test]
    fn test_successive_large_decreases_end_running_early() {
        let config = TpbaConfig {
            large_decrease: Some(LargeDecrease {
                fraction: 0.25,
                successive: 2,
            }),
            ..TpbaConfig::default()
        };
        let mut ctl = running(100_000.0, config);
        ctl.handle_report(secs(4), 100, 10); // cut 0.3: large (1)
        ctl.handle_timeout(secs(6));
        ctl.handle_report(secs(7), 100, 1); // cut 0.03: small → reset
        ctl.handle_timeout(secs(9));
        assert_eq!(ctl.switch_wanted(), None);
        ctl.handle_report(secs(10), 100, 10);
        ctl.handle_timeout(secs(12));
        assert_eq!(ctl.switch_wanted(), None);
        ctl.handle_report(secs(13), 100, 10);
        ctl.handle_timeout(Time::from_millis(12_500)); // not an adaptation point yet
        assert_eq!(ctl.switch_wanted(), None);
        // T_running = 10 s from 3 s is at 13 s; make it longer to isolate the rule.
        let _ = ctl;
        let config = TpbaConfig {
            t_running: Duration::from_secs(100),
            large_decrease: Some(LargeDecrease {
                fraction: 0.25,
                successive: 2,
            }),
            ..TpbaConfig::default()
        };
        let mut ctl = running(100_000.0, config);
        ctl.handle_report(secs(4), 100, 10);
        ctl.handle_timeout(secs(6));
        ctl.handle_report(secs(7), 100, 10);
        ctl.handle_timeout(secs(9));
        assert_eq!(ctl.switch_wanted(), Some(Period::Probing));
        let events: Vec<_> = std::iter::from_fn(|| ctl.poll_event()).collect();
        assert!(events.contains(&TpbaEvent::RunningDone {
            reason: RunningEnd::LargeDecreases
        }));
    }

    #[test]
    fn test_cwnd_new_formula() {
        // Same rate: same window. Halved rate: half the window, in whole segments.
        assert_eq!(cwnd_new(20_000, 50_000.0, 50_000.0, 1000), 20_000);
        assert_eq!(cwnd_new(20_000, 25_000.0, 50_000.0, 1000), 10_000);
        assert_eq!(cwnd_new(20_500, 25_000.0, 50_000.0, 1000), 10_000);
        // Never below one segment.
        assert_eq!(cwnd_new(20_000, 1.0, 50_000.0, 1000), 1000);
        assert_eq!(cwnd_new(20_000, 1.0, 0.0, 1000), 1000);
    }
}
