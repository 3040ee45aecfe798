//! Idle timeout and keep-alive for an established connection.
//!
//! ATP sends nothing while the application is quiet, so without keep-alives a healthy idle
//! connection could not be told from a dead one. Each side sends a PING when it has sent
//! nothing for [`LivenessConfig::keepalive`]; a connection that has heard nothing for
//! [`LivenessConfig::idle_timeout`] is dead. The keep-alive must be well below the timeout
//! (a third by default, so two PINGs may be lost).

use crate::time::Time;
use std::time::Duration;

/// Idle and keep-alive periods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LivenessConfig {
    /// Silence from the peer after which the connection is closed as dead.
    pub idle_timeout: Duration,
    /// Own silence after which a PING is sent.
    pub keepalive: Duration,
}

impl Default for LivenessConfig {
    fn default() -> Self {
        LivenessConfig {
            idle_timeout: Duration::from_secs(30),
            keepalive: Duration::from_secs(10),
        }
    }
}

/// Tracks when the peer was last heard and when this side last sent.
#[derive(Clone, Debug)]
pub struct Liveness {
    config: LivenessConfig,
    last_heard: Time,
    last_sent: Time,
}

impl Liveness {
    /// Starts both clocks at `now`.
    pub fn new(config: LivenessConfig, now: Time) -> Liveness {
        Liveness {
            config,
            last_heard: now,
            last_sent: now,
        }
    }

    /// Something arrived from the peer.
    pub fn on_heard(&mut self, now: Time) {
        self.last_heard = self.last_heard.max(now);
    }

    /// Something was sent to the peer.
    pub fn on_sent(&mut self, now: Time) {
        self.last_sent = self.last_sent.max(now);
    }

    /// Whether a PING is due.
    pub fn ping_due(&self, now: Time) -> bool {
        now >= self.last_sent + self.config.keepalive
    }

    /// Whether the peer has been silent for the idle timeout.
    pub fn is_dead(&self, now: Time) -> bool {
        now >= self.last_heard + self.config.idle_timeout
    }

    /// The next time something is due (a PING or the idle deadline).
    pub fn poll_timeout(&self) -> Time {
        (self.last_sent + self.config.keepalive).min(self.last_heard + self.config.idle_timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_when_quiet_and_dies_when_unheard() {
        let mut l = Liveness::new(LivenessConfig::default(), Time::ZERO);
        assert_eq!(l.poll_timeout(), Time::from_secs(10));
        assert!(l.ping_due(Time::from_secs(10)));
        l.on_sent(Time::from_secs(10));
        assert!(!l.ping_due(Time::from_secs(19)));
        l.on_heard(Time::from_secs(25));
        assert!(!l.is_dead(Time::from_secs(54)));
        assert!(l.is_dead(Time::from_secs(55)));
    }
}
