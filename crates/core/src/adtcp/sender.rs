//! The ADTCP sender (papers/004 §4, Figure 5 "modified TCP state machine at the ADTCP
//! sender") as a congestion-control policy on our one TCP, not a fork of it.
//!
//! "The sender maintains the current state from the feedback received in ACK packets. It
//! proceeds with normal TCP operations until an interruption is triggered by a retransmission
//! timeout or a third duplicate ACK; then it takes control actions according to the
//! receiver's network state estimation." The stream keeps doing loss detection, fast
//! retransmit and go-back-N after a timeout; this controller decides what happens to the
//! window at those two events:
//!
//! | event | state reported | action |
//! |---|---|---|
//! | third duplicate ACK | congestion, normal, none | NewReno fast retransmit/recovery (RFC 5681, RFC 6582) |
//! | third duplicate ACK | channel error | retransmit; recovery inflates as NewReno's would, then `cwnd` and `ssthresh` are what they were |
//! | third duplicate ACK | route change | retransmit; then `ssthresh = cwnd` (the old `cwnd`, at least 2 SMSS): continue in congestion avoidance |
//! | RTO | congestion, or no report ever | NewReno: `ssthresh = FlightSize/2`, `cwnd = 1 SMSS` |
//! | RTO | anything else: disconnection | freeze `cwnd`/`ssthresh`, enter **probing** |
//! | RTO while probing | — | the probe failed; another follows after the same, frozen RTO; after `max_probe_failures` the connection closes |
//! | new ACK while probing | — | reconnected: leave probing with the frozen state |
//!
//! Probing: "the sender caches the current transmission state and begins sending small packets
//! to probe the receiver"; "after leaving the probing state the previous transmission state is
//! restored". The probe is the stream's own timeout retransmission, cut down to
//! [`SenderConfig::probe_bytes`] (through [`CongestionController::max_segment_bytes`]), one at
//! a time. Its spacing is the RTO in force when the disconnection was identified, frozen
//! ([`CongestionController::freezes_rto`]): "the sender should freeze its current state
//! (congestion window and retransmission timeout) and perform periodic probing until the
//! connection is re-established" (§2.1) — periodic, as TCP-ELFN's probes, not backed off as
//! a conventional sender's retransmissions are (§1: "backing off exponentially … does not make
//! sense" in a disconnection).
//!
//! A route change rarely causes a timeout ("disconnections are short-term and do not cause
//! TCP timeouts"), and when it does the timeout reads as a disconnection, as Table 2 says.
//! ECN echoes are congestion.

use super::identify::{self, NetworkState, StateReport};
use crate::cc::{AckInfo, CongestionController, CongestionSignal, NewReno, SendPermit};
use crate::time::Time;

/// Sender parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SenderConfig {
    /// Payload bytes of a probe while disconnected. Default 1, as TCP's zero-window probe
    /// (RFC 9293 §3.8.6.1): a probe only has to draw an ACK, and it carries the first
    /// unacknowledged byte, so nothing is wasted when it arrives. (The paper's value was
    /// lost from its text: "small packets of N bytes payload".)
    pub probe_bytes: u64,
    /// Failed probes (retransmission timeouts while probing) after which the connection is
    /// closed ("the probing timed out and the TCP connection is closed", §4; the paper's
    /// count was lost from its text). Default 120: probes are periodic at the frozen RTO, so
    /// at the 1 s minimum RTO two minutes of probing — the order of the stream's own give-up
    /// (15 backed-off timeouts) and far longer than the disconnections node mobility causes
    /// in the paper's scenarios. The stream's limit counts backoffs, which a frozen RTO does
    /// not add, so this one decides.
    pub max_probe_failures: u32,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            probe_bytes: 1,
            max_probe_failures: 120,
        }
    }
}

/// Where the sender is in Figure 5's state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Phase {
    /// Normal operation (including fast recovery).
    Established,
    /// Disconnected: window frozen, probing.
    Probing {
        /// Probes that timed out so far.
        failures: u32,
    },
    /// Gave up after too many failed probes.
    Closed,
}

/// How often each reaction was taken (for reports and identification experiments).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Reactions {
    /// Congestion control (NewReno) on a third duplicate ACK, RTO or ECN echo.
    pub congestion: u64,
    /// Retransmission without window reduction.
    pub channel_error: u64,
    /// Retransmission with `ssthresh = cwnd`.
    pub route_change: u64,
    /// Timeouts read as disconnections (entries into probing).
    pub disconnection: u64,
    /// Probes that timed out.
    pub probe_failures: u64,
    /// Exits from probing on a new ACK.
    pub reconnections: u64,
}

/// The window to restore when a non-congestion recovery ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Restore {
    cwnd: u64,
    ssthresh: u64,
}

/// The ADTCP sender's congestion controller. See the module docs.
#[derive(Clone, Debug)]
pub struct AdtcpSender {
    config: SenderConfig,
    /// The window arithmetic: NewReno's, saved and restored around non-congestion events.
    cc: NewReno,
    /// The latest state report from the receiver (none from a conventional receiver, or
    /// when the receiver said it cannot judge).
    report: Option<StateReport>,
    /// Set while in a channel-error or route-change recovery.
    restore: Option<Restore>,
    phase: Phase,
    last_reaction: Option<(Time, NetworkState)>,
    reactions: Reactions,
}

impl AdtcpSender {
    /// A sender with an initial window of `iw_bytes` and an unbounded ssthresh.
    pub fn new(iw_bytes: u64, config: SenderConfig) -> AdtcpSender {
        AdtcpSender::with_state(iw_bytes, u64::MAX, config)
    }

    /// A sender in a given window state (for tests and for resuming a path's state).
    pub fn with_state(cwnd: u64, ssthresh: u64, config: SenderConfig) -> AdtcpSender {
        AdtcpSender {
            config,
            cc: NewReno::with_state(cwnd, ssthresh),
            report: None,
            restore: None,
            phase: Phase::Established,
            last_reaction: None,
            reactions: Reactions::default(),
        }
    }

    /// An ADTCP controller sized for a stream configuration, boxed for
    /// [`crate::tcp::Connection::connect`] (the counterpart of `Connection::newreno`).
    pub fn for_tcp(
        tcp: &crate::tcp::TcpConfig,
        config: SenderConfig,
    ) -> Box<dyn CongestionController> {
        let iw = tcp.initial_window.bytes(u64::from(tcp.mss));
        Box::new(AdtcpSender::new(iw, config))
    }

    /// The configuration.
    pub fn config(&self) -> &SenderConfig {
        &self.config
    }

    /// The state machine's phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The latest report received.
    pub fn report(&self) -> Option<StateReport> {
        self.report
    }

    /// The latest reaction and when it was taken.
    pub fn last_reaction(&self) -> Option<(Time, NetworkState)> {
        self.last_reaction
    }

    /// Counts of reactions.
    pub fn reactions(&self) -> &Reactions {
        &self.reactions
    }

    fn react(&mut self, now: Time, state: NetworkState) {
        self.last_reaction = Some((now, state));
        let r = &mut self.reactions;
        let counter = match state {
            NetworkState::Congestion | NetworkState::Normal => &mut r.congestion,
            NetworkState::ChannelError => &mut r.channel_error,
            NetworkState::RouteChange => &mut r.route_change,
            NetworkState::Disconnection => &mut r.disconnection,
        };
        *counter = counter.saturating_add(1);
    }

    /// The window to keep: the one saved by a recovery in progress, else the current one.
    fn current_restore(&self) -> Restore {
        self.restore.unwrap_or(Restore {
            cwnd: self.cc.window(),
            ssthresh: self.cc.ssthresh().unwrap_or(u64::MAX),
        })
    }

    fn on_timeout(&mut self, now: Time, bytes_in_flight: u64, smss: u64) {
        if let Phase::Probing { failures } = self.phase {
            let failures = failures.saturating_add(1);
            self.reactions.probe_failures = self.reactions.probe_failures.saturating_add(1);
            self.phase = if failures >= self.config.max_probe_failures {
                Phase::Closed
            } else {
                Phase::Probing { failures }
            };
            return;
        }
        match identify::on_retransmission_timeout(self.report) {
            NetworkState::Disconnection => {
                // Freeze: keep the window of before the loss (the saved one if the timeout
                // interrupted a non-congestion recovery).
                let keep = self.current_restore();
                self.restore = None;
                self.cc = NewReno::with_state(keep.cwnd, keep.ssthresh);
                self.phase = Phase::Probing { failures: 0 };
                self.react(now, NetworkState::Disconnection);
            }
            state => {
                self.restore = None;
                self.cc
                    .on_congestion_event(now, CongestionSignal::Timeout, bytes_in_flight, smss);
                self.react(now, state);
            }
        }
    }

    fn on_third_dup_ack(&mut self, now: Time, bytes_in_flight: u64, smss: u64) {
        let state = identify::on_third_dup_ack(self.report);
        match state {
            NetworkState::ChannelError | NetworkState::RouteChange => {
                let before = self.current_restore();
                // RFC 5681 §3.1 eq. (4) keeps ssthresh at two segments or more.
                let cwnd_floor = before.cwnd.max(2 * smss);
                self.restore = Some(Restore {
                    cwnd: before.cwnd,
                    ssthresh: if state == NetworkState::RouteChange {
                        cwnd_floor
                    } else {
                        before.ssthresh
                    },
                });
                // Recover as NewReno would with ssthresh = cwnd: the window is not halved, and
                // it inflates by the segments that left the network (RFC 6582 §3.2 step 2).
                self.cc = NewReno::with_state(before.cwnd.saturating_add(3 * smss), cwnd_floor);
            }
            _ => {
                self.restore = None;
                self.cc.on_congestion_event(
                    now,
                    CongestionSignal::DuplicateAcks,
                    bytes_in_flight,
                    smss,
                );
            }
        }
        self.react(now, state);
    }
}

impl CongestionController for AdtcpSender {
    fn on_sent(&mut self, now: Time, bytes: u64, retransmission: bool) {
        self.cc.on_sent(now, bytes, retransmission);
    }

    fn on_ack(&mut self, now: Time, ack: &AckInfo) {
        match self.phase {
            Phase::Probing { .. } => {
                // Reconnected: leave probing with the frozen window (the ACK of the probe
                // does not also grow it).
                self.phase = Phase::Established;
                self.reactions.reconnections = self.reactions.reconnections.saturating_add(1);
            }
            Phase::Established => self.cc.on_ack(now, ack),
            Phase::Closed => {}
        }
    }

    fn on_congestion_event(
        &mut self,
        now: Time,
        signal: CongestionSignal,
        bytes_in_flight: u64,
        smss: u64,
    ) {
        if self.phase == Phase::Closed {
            return;
        }
        match signal {
            CongestionSignal::Timeout => self.on_timeout(now, bytes_in_flight, smss),
            CongestionSignal::DuplicateAcks => self.on_third_dup_ack(now, bytes_in_flight, smss),
            CongestionSignal::Ecn => {
                self.restore = None;
                self.cc
                    .on_congestion_event(now, signal, bytes_in_flight, smss);
                self.react(now, NetworkState::Congestion);
            }
        }
    }

    fn on_recovery_dup_ack(&mut self, now: Time, smss: u64) {
        self.cc.on_recovery_dup_ack(now, smss);
    }

    fn on_partial_ack(&mut self, now: Time, ack: &AckInfo) {
        self.cc.on_partial_ack(now, ack);
    }

    fn on_recovery_end(&mut self, now: Time, ack: &AckInfo) {
        match self.restore.take() {
            Some(r) => self.cc = NewReno::with_state(r.cwnd, r.ssthresh),
            None => self.cc.on_recovery_end(now, ack),
        }
    }

    fn on_pipe_recovery_start(&mut self, now: Time, smss: u64) {
        self.cc.on_pipe_recovery_start(now, smss);
    }

    fn send_permit(&mut self, now: Time, bytes_in_flight: u64, bytes: u64) -> SendPermit {
        match self.phase {
            Phase::Established => self.cc.send_permit(now, bytes_in_flight, bytes),
            // One probe at a time.
            Phase::Probing { .. } if bytes_in_flight == 0 => SendPermit::Now,
            Phase::Probing { .. } | Phase::Closed => SendPermit::Blocked,
        }
    }

    fn on_network_state(&mut self, _now: Time, report: Option<StateReport>) {
        self.report = report;
    }

    fn max_segment_bytes(&self) -> Option<u64> {
        matches!(self.phase, Phase::Probing { .. }).then_some(self.config.probe_bytes.max(1))
    }

    /// Probing keeps the RTO of the moment the disconnection was identified (§2.1).
    fn freezes_rto(&self) -> bool {
        matches!(self.phase, Phase::Probing { .. })
    }

    fn close_requested(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// `phase` (0 established, 1 probing, 2 closed), then the [`Reactions`] counters.
    fn policy_counters(&self) -> Vec<(&'static str, u64)> {
        let phase = match self.phase {
            Phase::Established => 0,
            Phase::Probing { .. } => 1,
            Phase::Closed => 2,
        };
        let r = &self.reactions;
        vec![
            ("phase", phase),
            ("congestion", r.congestion),
            ("channel_error", r.channel_error),
            ("route_change", r.route_change),
            ("disconnection", r.disconnection),
            ("probe_failures", r.probe_failures),
            ("reconnections", r.reconnections),
        ]
    }

    fn window(&self) -> u64 {
        self.cc.window()
    }

    /// During a channel-error or route-change recovery, the ssthresh it will restore.
    fn ssthresh(&self) -> Option<u64> {
        match self.restore {
            Some(r) => Some(r.ssthresh),
            None => self.cc.ssthresh(),
        }
    }

    fn name(&self) -> &'static str {
        "adtcp"
    }
}

#[cfg(test)]
mod tests;
