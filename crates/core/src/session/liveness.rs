//! Liveness of an established connection: keep-alive, probing a silent peer, and deciding
//! that it is gone.
//!
//! ATP sends nothing while the application is quiet, so without keep-alives a healthy idle
//! connection could not be told from a dead one. Each side sends a PING when it has sent
//! nothing for [`LivenessConfig::keepalive`]; a PING asks the peer for an acknowledgement.
//!
//! **What liveness means.** A peer is alive if it answers. Every datagram that expects an
//! answer (DATA, CANCEL, PROBE, PING) starts a wait, unless one is running already; anything
//! heard from the peer ends it. A wait longer than the retransmission timeout (capped at 1 s
//! by the connection) makes the peer *silent*: the connection then sends no data, retransmissions or probe trains — only
//! PINGs, the smallest datagram it has, at intervals that double from one RTO up to
//! [`LivenessConfig::probe_interval_max`] — and ATP's callback timers keep running. A peer
//! silent for [`LivenessConfig::silent_timeout`] is gone and the connection ends (`Idle`),
//! which gives every live message its outcome. A connection that expects nothing (both sides
//! quiet) is also closed after [`LivenessConfig::idle_timeout`] without hearing anything,
//! though its keep-alive PING normally finds a dead peer sooner. A side that only receives
//! (it sends acknowledgements, which expect nothing) would not notice its sender's death
//! until then, so when the peer's traffic stops it sends one PING after
//! [`LivenessConfig::quiet_probe`]: a live peer answers and both stay quiet; a dead one
//! leaves it waiting, and it ends the connection `silent_timeout` later.
//!
//! A dead peer and a link that carries nothing cannot be told apart: a path that is up but
//! silent for longer than `silent_timeout` (a trace with zero rate for 30 s) ends the
//! connection like a dead peer, and the application reconnects. An outage shorter than
//! `silent_timeout` (8 s by default) is ridden out: the PINGs find the peer again, within
//! `probe_interval_max` of the path's return, and sending resumes. Raise `silent_timeout` to
//! ride out longer outages, at the price of noticing a dead peer later.

use crate::time::Time;
use std::time::Duration;

/// Shortest interval between PINGs to a silent peer (an RTO below it is not believed).
const MIN_PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// Keep-alive, probing and timeout periods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LivenessConfig {
    /// Silence from the peer after which the connection is closed as dead, even when this
    /// side expects nothing.
    pub idle_timeout: Duration,
    /// Own silence after which a PING is sent.
    pub keepalive: Duration,
    /// Longest interval between PINGs to a silent peer.
    pub probe_interval_max: Duration,
    /// How long a peer may leave this side waiting for an answer before the connection
    /// ends: the longest outage ridden out.
    pub silent_timeout: Duration,
    /// Quiet after the peer's last own traffic (data, cancels, probes) before one PING
    /// checks that it is still there.
    pub quiet_probe: Duration,
}

impl Default for LivenessConfig {
    fn default() -> Self {
        LivenessConfig {
            idle_timeout: Duration::from_secs(30),
            keepalive: Duration::from_secs(10),
            probe_interval_max: Duration::from_secs(1),
            silent_timeout: Duration::from_secs(8),
            quiet_probe: Duration::from_secs(1),
        }
    }
}

/// Tracks when the peer was last heard, when this side last sent, and a silent peer's
/// probing.
#[derive(Clone, Debug)]
pub struct Liveness {
    config: LivenessConfig,
    last_heard: Time,
    last_sent: Time,
    /// The first datagram that expects an answer, sent since the peer was last heard.
    waiting_since: Option<Time>,
    /// While the peer is silent: when the next PING is due and the interval after it.
    probe: Option<(Time, Duration)>,
    probes_sent: u64,
    /// When the peer last sent traffic of its own (not an answer), and whether the quiet
    /// PING after it was sent.
    last_activity: Option<Time>,
    quiet_checked: bool,
}

impl Liveness {
    /// Starts both clocks at `now`.
    pub fn new(config: LivenessConfig, now: Time) -> Liveness {
        Liveness {
            config,
            last_heard: now,
            last_sent: now,
            waiting_since: None,
            probe: None,
            probes_sent: 0,
            last_activity: None,
            quiet_checked: false,
        }
    }

    /// The peer sent traffic of its own (DATA, CANCEL, PROBE), not an answer or a PING: once
    /// it stops, one quiet PING checks it is still there.
    pub fn on_activity(&mut self, now: Time) {
        self.last_activity = Some(self.last_activity.map_or(now, |t| t.max(now)));
        self.quiet_checked = false;
    }

    /// Whether the quiet PING is due (the peer's traffic stopped `quiet_probe` ago and this
    /// side is not already waiting for an answer).
    pub fn quiet_ping_due(&self, now: Time) -> bool {
        !self.quiet_checked
            && self.waiting_since.is_none()
            && self
                .last_activity
                .is_some_and(|t| now >= t + self.config.quiet_probe)
    }

    /// The quiet PING went out.
    pub fn on_quiet_ping(&mut self, now: Time) {
        self.quiet_checked = true;
        self.on_sent(now, true);
    }

    /// Something arrived from the peer: the wait (and any probing) is over.
    pub fn on_heard(&mut self, now: Time) {
        self.last_heard = self.last_heard.max(now);
        self.waiting_since = None;
        self.probe = None;
    }

    /// Something was sent to the peer; `expects_answer` for DATA, CANCEL, PROBE and PING.
    pub fn on_sent(&mut self, now: Time, expects_answer: bool) {
        self.last_sent = self.last_sent.max(now);
        if expects_answer && self.waiting_since.is_none() {
            self.waiting_since = Some(now);
        }
    }

    /// Whether a keep-alive PING is due.
    pub fn ping_due(&self, now: Time) -> bool {
        now >= self.last_sent + self.config.keepalive
    }

    /// Whether the peer has left this side waiting longer than `rto`: only PINGs go out.
    pub fn is_silent(&self, now: Time, rto: Duration) -> bool {
        self.waiting_since.is_some_and(|t| now >= t + rto)
    }

    /// Whether a PING to the silent peer is due now.
    pub fn probe_due(&self, now: Time, rto: Duration) -> bool {
        self.is_silent(now, rto) && self.probe.is_none_or(|(at, _)| now >= at)
    }

    /// A PING went to the silent peer: the next one after twice the interval (the first
    /// after one RTO), at most `probe_interval_max`.
    pub fn on_probe_sent(&mut self, now: Time, rto: Duration) {
        let max = self.config.probe_interval_max.max(MIN_PROBE_INTERVAL);
        let interval = match self.probe {
            None => rto.clamp(MIN_PROBE_INTERVAL, max),
            Some((_, i)) => i.saturating_mul(2).min(max),
        };
        self.probe = Some((now + interval, interval));
        self.probes_sent += 1;
        self.on_sent(now, true);
    }

    /// The periods in use.
    pub fn config(&self) -> &LivenessConfig {
        &self.config
    }

    /// PINGs sent to a silent peer so far.
    pub fn probes_sent(&self) -> u64 {
        self.probes_sent
    }

    /// When the peer was last heard.
    pub fn last_heard(&self) -> Time {
        self.last_heard
    }

    /// Whether the peer is gone: silent for `silent_timeout` while this side waited for an
    /// answer, or unheard for `idle_timeout`.
    pub fn is_dead(&self, now: Time) -> bool {
        now >= self.last_heard + self.config.idle_timeout
            || self
                .waiting_since
                .is_some_and(|t| now >= t + self.config.silent_timeout)
    }

    /// The next time something is due: a keep-alive, the peer turning silent (after `rto`),
    /// a PING to a silent peer, or a deadline of the peer's death.
    pub fn poll_timeout(&self, rto: Duration) -> Time {
        let mut t = (self.last_sent + self.config.keepalive)
            .min(self.last_heard + self.config.idle_timeout);
        if !self.quiet_checked
            && self.waiting_since.is_none()
            && let Some(a) = self.last_activity
        {
            t = t.min(a + self.config.quiet_probe);
        }
        if let Some(w) = self.waiting_since {
            t = t.min(w + self.config.silent_timeout);
            t = t.min(match self.probe {
                Some((at, _)) => at,
                None => w + rto,
            });
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTO: Duration = Duration::from_millis(200);

    #[test]
    fn pings_when_quiet_and_dies_when_unheard() {
        let mut l = Liveness::new(LivenessConfig::default(), Time::ZERO);
        assert_eq!(l.poll_timeout(RTO), Time::from_secs(10));
        assert!(l.ping_due(Time::from_secs(10)));
        l.on_sent(Time::from_secs(10), false);
        assert!(!l.ping_due(Time::from_secs(19)));
        l.on_heard(Time::from_secs(25));
        assert!(!l.is_dead(Time::from_secs(54)));
        assert!(l.is_dead(Time::from_secs(55)));
    }

    #[test]
    fn test_waiting_peer_turns_silent_is_probed_with_backoff_and_dies() {
        let mut l = Liveness::new(LivenessConfig::default(), Time::ZERO);
        let t0 = Time::from_secs(1);
        l.on_sent(t0, true);
        l.on_sent(t0 + Duration::from_millis(50), true); // the wait started at t0
        assert!(!l.is_silent(t0 + Duration::from_millis(199), RTO));
        assert_eq!(l.poll_timeout(RTO), t0 + RTO);
        let mut now = t0 + RTO;
        let mut gaps = Vec::new();
        let mut last = now;
        while !l.is_dead(now) {
            if l.probe_due(now, RTO) {
                gaps.push(now - last);
                last = now;
                l.on_probe_sent(now, RTO);
            }
            now = l.poll_timeout(RTO);
        }
        assert_eq!(
            now,
            t0 + Duration::from_secs(8),
            "dead at the silent timeout"
        );
        let ms: Vec<u128> = gaps.iter().map(|g| g.as_millis()).collect();
        assert_eq!(ms[..5], [0, 200, 400, 800, 1000], "doubling up to the cap");
        assert!(l.probes_sent() <= 12, "a handful of small probes: {ms:?}");
    }

    #[test]
    fn test_one_quiet_ping_after_the_peers_traffic_stops() {
        let mut l = Liveness::new(LivenessConfig::default(), Time::ZERO);
        l.on_activity(Time::from_millis(500));
        l.on_heard(Time::from_millis(500));
        assert!(!l.quiet_ping_due(Time::from_millis(1499)));
        assert_eq!(l.poll_timeout(RTO), Time::from_millis(1500));
        assert!(l.quiet_ping_due(Time::from_millis(1500)));
        l.on_quiet_ping(Time::from_millis(1500));
        // Answered: quiet until the keep-alive, no second quiet PING.
        l.on_heard(Time::from_millis(1510));
        assert!(!l.quiet_ping_due(Time::from_secs(5)));
        // Not answered (a dead sender): silent, then dead 8 s after the PING.
        let mut dead = Liveness::new(LivenessConfig::default(), Time::ZERO);
        dead.on_activity(Time::from_millis(500));
        dead.on_quiet_ping(Time::from_millis(1500));
        assert!(dead.is_silent(Time::from_millis(1700), RTO));
        assert!(dead.is_dead(Time::from_millis(9500)));
    }

    #[test]
    fn test_answer_ends_the_wait_and_the_probing() {
        let mut l = Liveness::new(LivenessConfig::default(), Time::ZERO);
        l.on_sent(Time::ZERO, true);
        l.on_probe_sent(Time::from_millis(300), RTO);
        l.on_heard(Time::from_millis(350));
        assert!(!l.is_silent(Time::from_secs(5), RTO));
        assert!(!l.is_dead(Time::from_secs(20)));
        // Sends that expect no answer (acknowledgements) start no wait.
        l.on_sent(Time::from_secs(20), false);
        assert!(!l.is_silent(Time::from_secs(25), RTO));
    }
}
