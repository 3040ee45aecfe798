//! ATP, the Adaptive Transport Protocol (`papers/000_97f7680fd99dd928.txt` §4): the NAI
//! scheduler ([`crate::nai`]) on a reliable transport, with a bandwidth estimator.
//!
//! * [`AtpSender`] / [`AtpReceiver`]: ATP over SPP ([`crate::spp`]), the variant the paper's
//!   experiments use. The sender paces SPP at the estimate and feeds the estimate to NAI's
//!   admission control, early expiry and bandwidth notifications.
//! * [`endpoint`]: the outermost type both engines drive — one socket's worth of ATP
//!   connections with their handshake, keep-alive and CLOSE, and the application's calls
//!   (send, cancel, defer, resume, re-prioritise; receiving and outcomes as events). The
//!   runtime runs it over UDP, the simulator's `atp_endpoint` agents over simulated links.
//! * [`tcp`]: ATP over one TCP connection in fixed-size, padded segments (§4.1).
//! * [`estimator`]: Figure 3 (the paper's, selected with [`EstimatorMode::Paper`]).
//! * [`control`]: the default rate control, short queues on purpose
//!   ([`EstimatorMode::Control`]).
//!
//! The bandwidth source is pluggable ([`RateSource`]): the estimator, or a rate supplied from
//! outside (an oracle that knows the true link rate).

pub mod control;
pub mod endpoint;
pub mod estimator;
#[cfg(test)]
mod payload_tests;
mod sender;
pub mod start;
pub mod tcp;
#[cfg(test)]
mod tcp_payload_tests;
#[cfg(test)]
mod tests;

pub use estimator::{BandwidthEstimator, Estimate, EstimatorClock, EstimatorConfig, EstimatorMode};
pub use sender::AtpSender;

/// The ATP receiver is the SPP receiver: it reassembles and delivers messages.
pub use crate::spp::SppReceiver as AtpReceiver;

use crate::nai::NaiConfig;
use crate::spp::SppConfig;

/// Where the sender's bandwidth figure comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum RateSource {
    /// ATP's estimator (Figure 3), run every tick from interface counters and the send-queue
    /// length, with packet-pair probing when the estimate is zero.
    Estimated,
    /// Supplied by the engine with [`AtpSender::set_external_rate`] (e.g. the true link rate,
    /// for an oracle baseline). The estimator does not run.
    External,
}

/// Which of the estimator's two values paces SPP (§4.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum Pacing {
    /// `available`, the value advertised to NAI (the default). Under backlog it is below the
    /// usage (drains the interface queue); while probing it is above it — the only way the
    /// sending rate can rise without a packet pair. See `docs/design/nai.md` §4 item 2.
    #[default]
    Available,
    /// `curbw`, as §4.2 reads: "the amount of bandwidth which ATP should restrict itself to
    /// using over the next second", while `available` (which may include the probe) is only
    /// advertised. With Figure 3 `curbw` is the measured usage, so the rate rises only through
    /// packet pairs; kept so the paper's behaviour can be measured.
    Curbw,
}

/// Configuration of an ATP sender.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AtpConfig {
    /// NAI scheduler limits.
    pub nai: NaiConfig,
    /// SPP limits.
    pub spp: SppConfig,
    /// Estimator constants.
    pub estimator: EstimatorConfig,
    /// Which estimate paces SPP.
    pub pacing: Pacing,
    /// Pacing burst allowance, in bytes (the token bucket's depth).
    pub pacing_burst_bytes: u32,
    /// The engine's timer granularity: the token bucket also holds what the pacing rate
    /// earns in this span, so an engine whose timers fire late by up to this much (a real
    /// OS: about a millisecond) still sends at the rate instead of capping it at
    /// `pacing_burst_bytes` per wake-up. Zero (the default, and the simulator's: its timers
    /// are exact) adds nothing.
    pub timer_granularity: std::time::Duration,
    /// Most bytes of messages submitted with their data
    /// ([`AtpSender::submit_bytes`]) held at once.
    pub max_buffered_bytes: u64,
    /// The first flight's window, in packets, with the default estimator
    /// ([`start::StartWindow`]; RFC 6928's 10). Zero turns it off. With
    /// [`EstimatorMode::Paper`] there is none.
    pub initial_window_packets: u32,
}

impl Default for AtpConfig {
    fn default() -> Self {
        AtpConfig {
            nai: NaiConfig::default(),
            spp: SppConfig::default(),
            estimator: EstimatorConfig::default(),
            pacing: Pacing::Available,
            pacing_burst_bytes: 2 * 1472,
            timer_granularity: std::time::Duration::ZERO,
            max_buffered_bytes: 64 << 20,
            initial_window_packets: start::INITIAL_WINDOW_PACKETS,
        }
    }
}
