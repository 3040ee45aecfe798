//! TPBA parameters: Table 2 of `papers/002_ef8b8f60f6080824.txt` with the paper's defaults,
//! plus the options §4 and §7 propose.

use crate::ratectl::kbps;
use std::time::Duration;

/// How the end of the rate-probing period is decided (§4 and §7).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Agreement {
    /// §4: the last three samples agree within `ε` bytes/s:
    /// `|r[i−2] − r[i]| < ε` and `|r[i−1] − r[i]| < ε`.
    Absolute {
        /// `ε`, bytes/s (Table 2: 30 kbit/s).
        epsilon_bytes_per_s: f64,
    },
    /// §7: "instead of ε, we define an allowable difference of z% (e.g., 5%)": the same test
    /// with `z × r[i]` in place of `ε`.
    Relative {
        /// `z` as a fraction (0.05 for 5 %).
        z: f64,
    },
}

impl Agreement {
    /// The tolerance for samples around `rate`.
    pub fn tolerance(&self, rate: f64) -> f64 {
        match *self {
            Agreement::Absolute {
                epsilon_bytes_per_s,
            } => epsilon_bytes_per_s,
            Agreement::Relative { z } => z * rate.abs(),
        }
    }
}

/// How the rate-probing period samples the TCP rate (§4 and §7).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Sampling {
    /// §4: one sample every `T_TCP`, from the movement of snd_una.
    Fixed,
    /// §7: "the period for calculating the TCP rate can be decided by monitoring the interval
    /// between the time when cwnd is reduced": a sample is taken at each cwnd reduction over
    /// the bytes acknowledged since the previous one. The first sample after probing starts
    /// covers the time since the start; if no reduction comes within `max_period`, a sample
    /// is taken then anyway (a TCP that never loses still gets measured).
    CwndReductions {
        /// Shortest sampling period: reductions closer than this to the previous sample are
        /// ignored (several reductions in one loss episode count once).
        min_period: Duration,
        /// Longest sampling period.
        max_period: Duration,
    },
}

/// §4's escape from a running period whose rate collapsed: "transit immediately to the
/// rate-probing period after successive large reductions in rate". The paper gives no
/// numbers; both are ours.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct LargeDecrease {
    /// A reduction is large when it removes at least this fraction of the rate
    /// (`p_loss × R_f ≥ fraction`).
    pub fraction: f64,
    /// This many large reductions at successive adaptation points end the running period.
    pub successive: u32,
}

/// TPBA configuration. Defaults are the paper's (§4, Table 2, §6.1: `T_running = 10 s`,
/// `T_adapt = 3 s`, `T_rtcp = 1 s`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TpbaConfig {
    /// `T_running`: length of the running period (§6.1: 10 s; Table 4 also 30 s).
    pub t_running: Duration,
    /// `T_TCP`: interval between monitoring actions during the rate-probing period
    /// (Table 2: 1 s).
    pub t_tcp: Duration,
    /// End-of-probing criterion: `ε` (Table 2: 30 kbit/s) or §7's `z %`.
    pub agreement: Agreement,
    /// Sampling during probing: every `T_TCP` (§4) or between cwnd reductions (§7).
    pub sampling: Sampling,
    /// `T_rtcp`: interval between RTCP receiver reports during the running period
    /// (§6.1: 1 s). Used by the receiver.
    pub t_rtcp: Duration,
    /// `T_adapt`: interval between adaptation points in the running period (§6.1: 3 s).
    pub t_adapt: Duration,
    /// `R_f`: reduction factor (Table 2: 3.0).
    pub r_f: f64,
    /// Lowest rate the running period may fall to, bytes/s (not in the paper; one 512-byte
    /// packet per second by default).
    pub r_min_bytes_per_s: f64,
    /// Optional early return to probing after successive large decreases (§4); off by default,
    /// as in the paper's experiments.
    pub large_decrease: Option<LargeDecrease>,
    /// Bound on the samples of one probing period: after this many without agreement, the
    /// period ends with the mean of the last three (§7 warns that a misconfigured `T_TCP`/`ε`
    /// may never end it). `None`: unbounded, as in the paper.
    pub max_probe_samples: Option<u32>,
}

impl Default for TpbaConfig {
    fn default() -> Self {
        TpbaConfig {
            t_running: Duration::from_secs(10),
            t_tcp: Duration::from_secs(1),
            agreement: Agreement::Absolute {
                epsilon_bytes_per_s: kbps(30.0),
            },
            sampling: Sampling::Fixed,
            t_rtcp: Duration::from_secs(1),
            t_adapt: Duration::from_secs(3),
            r_f: 3.0,
            r_min_bytes_per_s: 512.0,
            large_decrease: None,
            max_probe_samples: None,
        }
    }
}
