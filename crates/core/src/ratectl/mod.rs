//! Rate controllers for media flows over UDP: the baselines TPBA is compared against.
//!
//! - [`lda`]: the Loss-Delay based Adjustment algorithm exactly as `papers/002… §3`, Figure 2
//!   prints it (with the paper's lines (A)), and LDAF, its fixed-AIR variant (§6.2);
//! - [`tfrc`]: TCP Friendly Rate Control, RFC 5348 — the throughput equation (§3.1), the
//!   receiver's loss event rate over eight weighted loss intervals (§5), the sender's
//!   receive-rate limit (§4.3) and nofeedback timer (§4.4).
//!
//! Both are sans-IO: time is passed in, and nothing here sends a packet. LDA is a pure
//! decision function called at each adaptation point; TFRC has a sender and a receiver state
//! machine with their own wire formats.
//!
//! Rates are in bytes per second (`f64`), like [`crate::cbr`] and the CM; the paper's tables
//! use kbit/s, so configs convert with [`kbps`].

pub mod lda;
pub mod tfrc;

/// `v` kbit/s (the paper's unit, 1 kbit = 1000 bit) in bytes per second.
pub fn kbps(v: f64) -> f64 {
    v * 1000.0 / 8.0
}

/// `v` bytes per second in kbit/s.
pub fn to_kbps(bytes_per_s: f64) -> f64 {
    bytes_per_s * 8.0 / 1000.0
}
