//! Pluggable congestion control for the stream transport.
//!
//! The stream ([`crate::tcp`]) does loss detection, recovery and flow control; *how much* it may
//! send is decided by a [`CongestionController`]. The stream reports what happened (segments
//! sent, ACKs, loss signals) and asks [`CongestionController::send_permit`] before each
//! transmission. This keeps NewReno ([`NewReno`]), CM-delegated control (the CM decides, the
//! stream asks it for grants) and policy-driven controllers (ADTCP) out of the stream's code.
//!
//! Call order, per RFC 5681 / RFC 6582 as implemented by the stream:
//!
//! * every transmission (new data or retransmission): [`on_sent`](CongestionController::on_sent);
//! * a cumulative ACK for new data outside recovery: [`on_ack`](CongestionController::on_ack);
//! * the third duplicate ACK (entering fast recovery) or a retransmission timeout:
//!   [`on_congestion_event`](CongestionController::on_congestion_event);
//! * each further duplicate ACK in fast recovery:
//!   [`on_recovery_dup_ack`](CongestionController::on_recovery_dup_ack);
//! * a partial ACK in fast recovery: [`on_partial_ack`](CongestionController::on_partial_ack);
//! * the ACK that ends fast recovery: [`on_recovery_end`](CongestionController::on_recovery_end).
//!
//! With SACK (RFC 6675), entering recovery is `on_congestion_event` followed by
//! [`on_pipe_recovery_start`](CongestionController::on_pipe_recovery_start), and recovery
//! makes no `on_recovery_dup_ack` / `on_partial_ack` calls.
//!
//! Policy controllers (ADTCP, papers/004) have three more hooks, all no-ops by default: the
//! network-state report (or its absence) in an ACK carrying the ADTCP option is passed to
//! [`on_network_state`](CongestionController::on_network_state) *before* the ACK itself is
//! processed (so the event it triggers sees the report);
//! [`max_segment_bytes`](CongestionController::max_segment_bytes) lets the controller shrink
//! the next segment (small probes); and [`close_requested`](CongestionController::close_requested)
//! lets it give up on the connection, checked after each retransmission timeout.
//!
//! Two more hooks serve baselines and experiments, also no-ops by default:
//! [`on_link_failure`](CongestionController::on_link_failure) delivers an explicit link-failure
//! notification from the network (TCP-ELFN, [`Elfn`]), and
//! [`policy_counters`](CongestionController::policy_counters) exposes a policy controller's
//! own state and counters (ADTCP's phase and reactions) through
//! [`crate::tcp::Connection::cc`], so a driver can read them without knowing the type.

mod elfn;
mod newreno;

pub use elfn::Elfn;
pub use newreno::{InitialWindow, NewReno, initial_window};

use crate::time::Time;
use std::fmt;
use std::time::Duration;

/// Why the sender concluded that the network is congested.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum CongestionSignal {
    /// Three duplicate ACKs (RFC 5681 §3.2 fast retransmit).
    DuplicateAcks,
    /// The retransmission timer expired (RFC 6298 §5).
    Timeout,
    /// An explicit congestion notification echo (RFC 3168).
    Ecn,
}

/// What an acknowledgement told the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckInfo {
    /// Bytes newly acknowledged by this ACK's cumulative acknowledgement.
    pub newly_acked_bytes: u64,
    /// Bytes still outstanding after this ACK was processed.
    pub bytes_in_flight: u64,
    /// A round-trip sample valid under Karn's rule (none if the acked data was retransmitted).
    pub rtt_sample: Option<Duration>,
    /// The sender's maximum segment size, in bytes.
    pub smss: u64,
}

/// The answer to "may I send a segment now?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendPermit {
    /// Send it.
    Now,
    /// Pacing: ask again at this time.
    At(Time),
    /// The window is full (or no grant is available); wait for an ACK or an outside event.
    Blocked,
}

/// A congestion control algorithm driven by the stream transport. See the module docs for when
/// each method is called. `Send`: an engine may run a connection on any thread (the runtime's
/// stream endpoints are tasks on the application's runtime).
pub trait CongestionController: fmt::Debug + Send {
    /// A segment of `bytes` was transmitted; `retransmission` is true for resent data.
    fn on_sent(&mut self, now: Time, bytes: u64, retransmission: bool);

    /// A cumulative ACK acknowledged new data outside fast recovery.
    fn on_ack(&mut self, now: Time, ack: &AckInfo);

    /// Loss or congestion was detected: fast retransmit is starting, or the RTO fired.
    /// `bytes_in_flight` is the FlightSize before any retransmission.
    fn on_congestion_event(
        &mut self,
        now: Time,
        signal: CongestionSignal,
        bytes_in_flight: u64,
        smss: u64,
    );

    /// A further duplicate ACK arrived during fast recovery.
    fn on_recovery_dup_ack(&mut self, now: Time, smss: u64);

    /// A partial ACK (acknowledging some but not all data outstanding when recovery began).
    fn on_partial_ack(&mut self, now: Time, ack: &AckInfo);

    /// The ACK that ends fast recovery (acknowledges everything up to the recovery point).
    fn on_recovery_end(&mut self, now: Time, ack: &AckInfo);

    /// Called right after [`on_congestion_event`](Self::on_congestion_event) when the stream
    /// recovers with SACK (RFC 6675): it then counts what is in the network with `pipe`
    /// instead of inflating the window, and makes no `on_recovery_dup_ack` or
    /// `on_partial_ack` calls until `on_recovery_end`. RFC 6675 §5 step 4.2 sets
    /// `cwnd = ssthresh`. The default does nothing (controllers that never inflate).
    fn on_pipe_recovery_start(&mut self, _now: Time, _smss: u64) {}

    /// May a segment of `bytes` be sent now, with `bytes_in_flight` already outstanding?
    fn send_permit(&mut self, now: Time, bytes_in_flight: u64, bytes: u64) -> SendPermit;

    /// The receiver reported the network state it identified (papers/004): called for every
    /// ACK that carries the ADTCP option, before the ACK is processed. `None`: the receiver
    /// cannot judge the state now (too little history, or no sending times), so the sender
    /// should act as standard TCP. The default ignores it.
    fn on_network_state(&mut self, _now: Time, _report: Option<crate::adtcp::StateReport>) {}

    /// The largest segment payload the controller allows now, if smaller than the SMSS (e.g.
    /// ADTCP's small probes while disconnected). The default imposes no limit.
    fn max_segment_bytes(&self) -> Option<u64> {
        None
    }

    /// While true, a retransmission timeout does not back the timer off: the next one fires
    /// after the same RTO, so probes go out periodically (ADTCP while disconnected:
    /// papers/004 §2.1, "the sender should freeze its current state (congestion window and
    /// retransmission timeout) and perform periodic probing"). Asked right after
    /// [`on_congestion_event`](Self::on_congestion_event) for the timeout. The default backs
    /// off (RFC 6298 §5.5).
    fn freezes_rto(&self) -> bool {
        false
    }

    /// The controller gave up on the path (e.g. ADTCP after repeated failed probes): the
    /// stream aborts the connection. Checked after each retransmission timeout.
    fn close_requested(&self) -> bool {
        false
    }

    /// Sets the congestion window to `bytes` from outside the stream, for hand-overs such as
    /// TPBA's `cwnd_new` when a rate-probing period resumes on an idle connection
    /// (papers/002 §4: "cwnd is set to the following value, cwnd_new, when the rate-probing
    /// period starts", instead of a slow-start restart). `ssthresh` is left alone. Returns
    /// whether the controller honoured it; the default ignores it and returns `false`
    /// (controllers whose window is not theirs to set, such as CM-delegated ones).
    fn set_window(&mut self, _now: Time, _bytes: u64) -> bool {
        false
    }

    /// The network told the sender that a link on the path failed (an explicit link-failure
    /// notification, TCP-ELFN: Holland and Vaidya, MobiCom '99, papers/004 §1 and §6). Only an
    /// engine that emulates such a network calls it. The default ignores it.
    fn on_link_failure(&mut self, _now: Time) {}

    /// The policy's own state and counters as `(name, value)` pairs, in a fixed order (e.g.
    /// ADTCP's phase and how often it took each reaction), for reports and experiments. The
    /// default has none.
    fn policy_counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// The current congestion window in bytes (for metrics and traces).
    fn window(&self) -> u64;

    /// The slow-start threshold in bytes, if the algorithm has one.
    fn ssthresh(&self) -> Option<u64> {
        None
    }

    /// A short name for reports ("newreno", "cm", ...).
    fn name(&self) -> &'static str;
}
