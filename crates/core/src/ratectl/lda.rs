//! LDA, the Loss-Delay based Adjustment algorithm, as `papers/002_ef8b8f60f6080824.txt` §3
//! Figure 2 prints it for a single receiver, and LDAF ("LDA with a Fixed AIR", §6.2).
//!
//! Figure 2, with Table 1's symbols (`r` rate, `b` bottleneck bandwidth from packet pairs,
//! `ploss` the loss ratio of the last RTCP receiver report, `τ` the RTT):
//!
//! ```text
//! Initialization: r = r0; AIR = AIR0;
//! At each adaptation point:
//! if (ploss == 0) {
//!     if (r < b) {                                                   (A)
//!         AIR = AIR × (1 − r/b);                                     (B)
//!         AIR = min(AIR, packet_size/(2τ) × (T_adapt/τ + 1));        (C)
//!         r = r + AIR;
//!     }                                                              (A)
//!     if (r >= b) r = b;                                             (A)
//! } else {
//!     AIR = AIR0;
//!     r = r × (1 − ploss × R_f);
//!     if (r < r_min) r = r_min;
//! }
//! ```
//!
//! Line (C) is garbled in the extracted paper text ("packet size Tadapt … ( τ + 1)) … 2τ");
//! the reading above is the one that matches §3's sentence "AIR is limited by the rate at
//! which TCP would increase until the next adaptation point": a TCP in congestion avoidance
//! opens one packet per RTT, so over `T_adapt` it sends `T_adapt/(2τ) × (T_adapt/τ + 1)`
//! packets more than at a constant window, which averaged over `T_adapt` is
//! `packet_size/(2τ) × (T_adapt/τ + 1)` bytes per second.
//!
//! LDAF replaces line (B) by `AIR = AIR0 × (1 − r/b)` (§6.2).
//!
//! When no bottleneck estimate exists yet, `b` is taken as unbounded: lines (A) always take
//! the increase branch and (B) leaves AIR unchanged (`r/b = 0`).

use std::time::Duration;

/// Which variant of line (B) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum AirUpdate {
    /// LDA: `AIR = AIR × (1 − r/b)` — AIR shrinks at each loss-free adaptation point.
    Iterated,
    /// LDAF: `AIR = AIR0 × (1 − r/b)` — AIR is recomputed from `AIR0` every time.
    Fixed,
}

/// LDA parameters (Table 1's configurable ones, marked `*` there).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LdaConfig {
    /// `T_adapt`: interval between two adaptation points (§3 uses 3 s).
    pub t_adapt: Duration,
    /// `T_rtcp`: interval between two RTCP receiver reports (§3 uses 1 s).
    pub t_rtcp: Duration,
    /// `r0`: initial rate, bytes/s (§3 starts at 600 kbit/s; §6.2 at 10 kbit/s).
    pub r0_bytes_per_s: f64,
    /// `r_min`: minimum rate, bytes/s.
    pub r_min_bytes_per_s: f64,
    /// `AIR0`: initial additive increase rate, bytes/s per adaptation point (§3: 10 kbit/s).
    pub air0_bytes_per_s: f64,
    /// `R_f`: reduction factor (§3 and Ref. 20: 3.0).
    pub r_f: f64,
    /// Packet size used in line (C), bytes (§3: 512-byte RTP payloads).
    pub packet_bytes: u32,
    /// LDA or LDAF.
    pub air_update: AirUpdate,
}

impl Default for LdaConfig {
    /// §3's experiment: `AIR0 = 10 kbps, R_f = 3.0, T_adapt = 3 s, T_rtcp = 1 s`, started at
    /// 600 kbit/s, 512-byte packets; `r_min` (not given in the paper) one packet per second.
    fn default() -> Self {
        LdaConfig {
            t_adapt: Duration::from_secs(3),
            t_rtcp: Duration::from_secs(1),
            r0_bytes_per_s: super::kbps(600.0),
            r_min_bytes_per_s: 512.0,
            air0_bytes_per_s: super::kbps(10.0),
            r_f: 3.0,
            packet_bytes: 512,
            air_update: AirUpdate::Iterated,
        }
    }
}

/// What one adaptation point saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LdaInput {
    /// `ploss`: loss ratio reported since the last adaptation point, in `[0, 1]`.
    pub loss_ratio: f64,
    /// `τ`: the round-trip time, if measured.
    pub rtt: Option<Duration>,
    /// `b`: the bottleneck bandwidth reported by packet pairs, bytes/s, if known.
    pub bottleneck_bytes_per_s: Option<f64>,
}

/// LDA's state: the rate and the additive increase rate.
#[derive(Clone, Debug)]
pub struct Lda {
    config: LdaConfig,
    rate: f64,
    air: f64,
}

impl Lda {
    /// Figure 2's initialization: `r = r0; AIR = AIR0`.
    pub fn new(config: LdaConfig) -> Lda {
        let rate = config.r0_bytes_per_s.max(config.r_min_bytes_per_s);
        Lda {
            air: config.air0_bytes_per_s,
            rate,
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LdaConfig {
        &self.config
    }

    /// Current sending rate `r`, bytes/s.
    pub fn rate_bytes_per_s(&self) -> f64 {
        self.rate
    }

    /// Current additive increase rate `AIR`, bytes/s.
    pub fn air_bytes_per_s(&self) -> f64 {
        self.air
    }

    /// Line (C)'s bound: the rate increase of a TCP over one adaptation interval.
    pub fn tcp_increase_bound(&self, rtt: Duration) -> f64 {
        let tau = rtt.as_secs_f64();
        if tau <= 0.0 {
            return f64::INFINITY;
        }
        let t = self.config.t_adapt.as_secs_f64();
        f64::from(self.config.packet_bytes) / (2.0 * tau) * (t / tau + 1.0)
    }

    /// One adaptation point (Figure 2); returns the new rate.
    pub fn adapt(&mut self, input: LdaInput) -> f64 {
        let ploss = if input.loss_ratio.is_finite() {
            input.loss_ratio.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let b = input
            .bottleneck_bytes_per_s
            .filter(|b| b.is_finite() && *b > 0.0)
            .unwrap_or(f64::INFINITY);
        if ploss == 0.0 {
            if self.rate < b {
                // (A)
                let headroom = 1.0 - self.rate / b;
                self.air = match self.config.air_update {
                    AirUpdate::Iterated => self.air * headroom, // (B)
                    AirUpdate::Fixed => self.config.air0_bytes_per_s * headroom, // (B), LDAF
                };
                if let Some(rtt) = input.rtt {
                    self.air = self.air.min(self.tcp_increase_bound(rtt)); // (C)
                }
                self.rate += self.air;
            }
            if self.rate >= b {
                // (A)
                self.rate = b;
            }
        } else {
            self.air = self.config.air0_bytes_per_s;
            self.rate *= 1.0 - ploss * self.config.r_f;
            if self.rate < self.config.r_min_bytes_per_s || !self.rate.is_finite() {
                self.rate = self.config.r_min_bytes_per_s;
            }
        }
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ratectl::kbps;

    fn input(loss: f64, b: Option<f64>) -> LdaInput {
        LdaInput {
            loss_ratio: loss,
            rtt: Some(Duration::from_millis(100)),
            bottleneck_bytes_per_s: b,
        }
    }

    fn config(r0: f64, air0: f64, air_update: AirUpdate) -> LdaConfig {
        LdaConfig {
            r0_bytes_per_s: r0,
            air0_bytes_per_s: air0,
            air_update,
            ..LdaConfig::default()
        }
    }

    #[test]
    fn test_no_loss_increases_by_air_shrunk_by_headroom() {
        // r = 10 000 B/s, b = 100 000 B/s: AIR = 1000 × (1 − 0.1) = 900, r = 10 900.
        let mut lda = Lda::new(config(10_000.0, 1_000.0, AirUpdate::Iterated));
        assert!((lda.adapt(input(0.0, Some(100_000.0))) - 10_900.0).abs() < 1e-9);
        assert!((lda.air_bytes_per_s() - 900.0).abs() < 1e-9);
        // Iterated (B): AIR = 900 × (1 − 0.109) = 801.9.
        lda.adapt(input(0.0, Some(100_000.0)));
        assert!((lda.air_bytes_per_s() - 801.9).abs() < 1e-9);
        assert!((lda.rate_bytes_per_s() - 11_701.9).abs() < 1e-9);
    }

    #[test]
    fn test_ldaf_recomputes_air_from_air0() {
        let mut lda = Lda::new(config(10_000.0, 1_000.0, AirUpdate::Fixed));
        lda.adapt(input(0.0, Some(100_000.0)));
        lda.adapt(input(0.0, Some(100_000.0)));
        // AIR0 × (1 − 10 900/100 000) = 891.
        assert!((lda.air_bytes_per_s() - 891.0).abs() < 1e-9);
        assert!((lda.rate_bytes_per_s() - 11_791.0).abs() < 1e-9);
    }

    #[test]
    fn test_line_c_caps_air_at_tcp_increase() {
        // τ = 100 ms, T_adapt = 3 s, 512-byte packets: 512/0.2 × (30 + 1) = 79 360 B/s.
        let mut lda = Lda::new(config(10_000.0, 1e9, AirUpdate::Iterated));
        let bound = lda.tcp_increase_bound(Duration::from_millis(100));
        assert!((bound - 79_360.0).abs() < 1e-6);
        lda.adapt(input(0.0, None));
        assert!((lda.air_bytes_per_s() - bound).abs() < 1e-6);
        assert!((lda.rate_bytes_per_s() - (10_000.0 + bound)).abs() < 1e-6);
    }

    #[test]
    fn test_lines_a_clamp_rate_to_bottleneck_and_keep_air_non_negative() {
        // Above the bottleneck without a loss report: r = b, AIR untouched (not negative).
        let mut lda = Lda::new(config(kbps(600.0), kbps(10.0), AirUpdate::Iterated));
        let b = kbps(400.0);
        assert_eq!(lda.adapt(input(0.0, Some(b))), b);
        assert_eq!(lda.air_bytes_per_s(), kbps(10.0));
        // At the bottleneck: no increase.
        assert_eq!(lda.adapt(input(0.0, Some(b))), b);
        assert!(lda.air_bytes_per_s() >= 0.0);
    }

    #[test]
    fn test_loss_decreases_multiplicatively_and_resets_air() {
        let mut lda = Lda::new(config(100_000.0, 1_000.0, AirUpdate::Iterated));
        lda.adapt(input(0.0, Some(1e6)));
        assert!(lda.air_bytes_per_s() < 1_000.0);
        let before = lda.rate_bytes_per_s();
        // r × (1 − 0.05 × 3) = 0.85 r.
        let after = lda.adapt(input(0.05, Some(1e6)));
        assert!((after - before * 0.85).abs() < 1e-6);
        assert_eq!(lda.air_bytes_per_s(), 1_000.0);
        // A huge loss cannot push the rate below r_min.
        assert_eq!(lda.adapt(input(0.9, Some(1e6))), 512.0);
    }
}
