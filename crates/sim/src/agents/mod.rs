//! Agents for the protocols of the foundation: TCP (any congestion controller) and CBR/UDP.
//! Later protocols add their own modules here (TPBA, LDA and TFRC: `tpba`, `lda`, `tfrc`).

pub mod atp;
pub mod atp_endpoint;
pub mod atp_tcp;
pub mod cbr;
pub mod cm;
pub mod env_flows;
pub mod env_host;
pub mod lda;
pub mod message_bytes;
#[cfg(test)]
mod message_bytes_tests;
/// The application side of NAI lives in core, shared by both engines; re-exported here for
/// the simulator's users.
pub mod nai_app {
    pub use adaptnet_core::nai::app::*;
}
mod nai_flow;
pub mod nai_tcp;
pub mod stream;
pub mod tcp;
pub mod tfrc;
pub mod tpba;

use adaptnet_core::Time;
use std::time::Duration;

/// Records RTT samples for reports, at most one per `min_gap`, so long runs stay small.
#[derive(Clone, Debug)]
pub struct RttRecorder {
    min_gap: Duration,
    last: Option<Time>,
    samples: Vec<(Time, Duration)>,
}

impl Default for RttRecorder {
    fn default() -> Self {
        RttRecorder {
            min_gap: Duration::from_millis(10),
            last: None,
            samples: Vec::new(),
        }
    }
}

impl RttRecorder {
    /// Offers a sample taken at `now`.
    pub fn offer(&mut self, now: Time, rtt: Duration) {
        if self.last.is_none_or(|t| now - t >= self.min_gap) {
            self.last = Some(now);
            self.samples.push((now, rtt));
        }
    }

    /// Hands over the recorded samples.
    pub fn take(&mut self) -> Vec<(Time, Duration)> {
        std::mem::take(&mut self.samples)
    }
}
