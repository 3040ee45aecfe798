//! ATP's default rate control: short queues on purpose, and an estimate from the first packet
//! to the last ([`EstimatorMode::Control`](super::EstimatorMode::Control)).
//!
//! The paper's ATP paces at Figure 3's estimate, run once a second from interface counters
//! (`papers/000_97f7680fd99dd928.txt` §4.2). On a real link that keeps the bottleneck queue
//! full (its probe is advertised and sent above what was used), follows a fall a second late
//! and through a five-second filter, and knows nothing before its first packet pair — which a
//! token-bucket shaper passes at line rate. This control keeps the paper's interface (one
//! rate that paces SPP and one that NAI plans with, §4.2–§4.3) and measures the path the way
//! today's delay-aware controllers do, on every acknowledgement:
//!
//! * **From BBR** (Cardwell, Cheng, Gunn, Hassas Yeganeh and Jacobson, "BBR:
//!   Congestion-Based Congestion Control", ACM Queue 14(5), 2016, and the IETF draft
//!   "BBR Congestion Control", sections "Startup", "Drain", "ProbeBW" and "BBR.max_bw"):
//!   the path model — the bottleneck rate is the windowed maximum of delivery-rate samples
//!   (samples taken while the application left the pipe idle may only raise it) and the
//!   propagation delay is the windowed minimum RTT (10 s); pacing at a gain times the rate;
//!   STARTUP at 2/ln 2 per round until the rate stops growing by a quarter for three rounds;
//!   DRAIN below the rate to remove what startup queued; and the PROBE_BW gain cycle — one
//!   phase at 1.25 (probe for more, a short bounded burst), one at 0.75 (drain what the probe
//!   built), six at 1.0 — each phase one minimum RTT. And the safety net: packets in flight
//!   are capped at twice the bandwidth-delay product (plus RFC 6928's ten packets), so an
//!   outage cannot fill the queue — with the draft's two allowances for hosts that batch
//!   (its "BBRUpdateACKAggregation" and "BBRQuantizationBudget"): the bytes acknowledged
//!   beyond what the measured rate explains (`extra_acked`, a windowed maximum over ten
//!   rounds) are added to the cap, and the cap is never below three *send quanta* (a
//!   millisecond at the pacing rate, at most 64 KB: what an engine with segmentation
//!   offload hands the kernel at once). On a path whose round trip is a few microseconds
//!   of propagation and hundreds of microseconds of the hosts' batching (loopback), a cap
//!   of two propagation BDPs would otherwise hold the sender to a window per batch.
//! * **From Copa** (Arun and Balakrishnan, "Copa: Practical Delay-Based Congestion Control for
//!   the Internet", NSDI 2018, §2 "Copa target rate" and §2.1 on `RTTstanding`): queueing
//!   delay is the *standing* RTT — the smallest RTT of the last half smoothed RTT, which
//!   ignores the jitter of one packet and of acknowledgement batching — minus the minimum RTT.
//! * **From LEDBAT** (RFC 6817, sections "Base delay" / "Target" of its design, and the
//!   "Queuing delay estimate" in its sender algorithm): a small fixed *target* for that
//!   queueing delay, with the base delay kept over a long history that ages out (here BBR's
//!   10 s window), so a route change is eventually forgotten. LEDBAT targets 100 ms because it
//!   yields to TCP; ATP's aim is an urgent message that waits for nothing, so the target here
//!   is `queue_target` (1 ms) or `queue_target_packets` (2) datagram times at the estimated
//!   rate, whichever is longer.
//!
//! What is ATP's own: when the standing queueing delay passes the target (or, where the engine
//! reports it, the interface send queue holds more than that many bytes: §4.2's own signal),
//! the queue stands, so the bottleneck was busy and the delivery rate just measured *is* its
//! rate — the estimate is reset to it at once (a fall is followed within one or two RTTs, not
//! at the next one-second tick), and the sender drains below it for as long as the queue
//! takes to empty. And when the application leaves the link idle, the control probes with
//! **filler trains**: short paced trains of SPP PROBE datagrams (the paper's packet-pair
//! mechanism, §4.2, sent at a chosen rate instead of back to back) at a gain above the
//! estimate. A train the receiver saw arrive as fast as it was sent shows the link takes at
//! least that rate (the estimate rises, and the next train follows at once with a higher
//! gain); one that arrived slower measured the bottleneck. A token bucket (tbf's `burst`, a
//! cellular grant) passes a train that fits it at line rate whatever rate it sustains, so a
//! rise is believed only once a **confirming train** — longer, sent right after the first at
//! four times the estimate, so that it empties such a bucket before its last quarter — shows
//! it in that quarter (a quarter that read more than the train's pace can vouch for, under a
//! head the bucket passed whole, is checked by one more train paced from that reading);
//! what the quarter measures is the rate, up or down (behind a bucket, a
//! light application's trains and messages show no fall at all: this train is what finds
//! one). An ordinary train that reads a fall to below half the estimate, over an arrival
//! spread a host's scheduling could have made (`filler_host_delay`), is believed once the
//! next, sent at once, reads one too: a host off the CPU makes a train arrive late, never
//! early, so the higher of the two readings is the rate. A refuted rise holds the next ones
//! for `filler_rise_hold`, doubling to `filler_rise_hold_max`, so the confirmations' cost
//! stays bounded; a rise a train shows during the hold is confirmed when it ends, with no
//! short train first. A train is not given up while its partial reports keep arriving (a
//! confirming train that finds a fall arrives at the lower rate, later than a grace counted
//! at the estimate). A rise is found
//! without a heavy sender, a fall without one, and the filler is bounded to `filler_share`
//! of the estimate (at most one train every `filler_min_interval`) while nothing rises.
//!
//! When acknowledgements stop while data is in flight (an outage), the estimate halves every
//! `stall` period — the Congestion Manager's exponential aging of an idle rate
//! (`papers/003_e14495e0957e2bee.txt` §2.2.3), here for a path that went silent — and the
//! control returns to STARTUP, so it regrows within a few rounds once the path answers.
//! If nothing the application sends can pass at the halved estimate (every message refused),
//! only filler trains can find the path again: until a train measures it, they go at least
//! every `filler_outage_interval` whatever the estimate, paced from the rate the outage
//! started from, so a path that returns is found within a second or two, not the minute a
//! share of the collapsed estimate would space them by. But a path that answers nothing gets
//! no full-size datagrams (issue 18 item 4: "a silent peer is probed with small packets on a
//! backed-off schedule"): a stall, or a train with no report at all, makes the filler
//! *silent*, and it sends only pings — two unpadded PROBE datagrams — at intervals doubling
//! from `filler_outage_interval` to `filler_silent_max_interval`, as TCP backs off its
//! retransmission timer (RFC 6298 §5.5). A ping's report ends the silence and the full
//! train, paced from the rate before the outage, follows at once: recovery costs one round
//! trip more. A one-way outage needs this: the peer's own traffic still arrives, so the
//! session never calls the peer silent, and the filler would otherwise send full trains into
//! the dead direction for as long as the outage lasts.
//!
//! Two rates come out, as in the paper: SPP is paced at a gain times the bottleneck filter
//! (short samples, which a token bucket's tokens lift for as long as they last), and NAI plans
//! with that filter only up to what the path was shown to *sustain* — a standing queue's
//! rate, a confirming train, or a backlogged stretch long enough to outlast such a bucket
//! ([`RateControl::estimate`]).
//!
//! Until the first evidence of the path's rate (STARTUP ends: the queue formed, the rate
//! stopped growing, or a filler train measured the bottleneck) there is no estimate
//! ([`RateControl::estimate`] is `None`) and NAI admits every message, checking them against
//! the first estimate: a deadline is never reported unmeetable on no evidence.
//!
//! Call pattern (the [`AtpSender`](super::AtpSender) does this): `on_sent` for every DATA
//! datagram, `on_app_limited` when the pacer allows a datagram and the application has none,
//! `on_ack` for every acknowledgement, `on_report` for PROBE reports, `on_queue` with the
//! interface send queue, `handle_timeout` at `poll_timeout`; then read `pacing_rate`,
//! `cwnd_bytes` and `estimate`, and send `poll_filler`'s datagram when `wants_filler` says so
//! and the application has nothing to send.

mod filler;
mod filters;
#[cfg(test)]
mod pair_tests;
#[cfg(test)]
mod tests;

use crate::spp::SppDatagram;
use crate::spp::wire::ProbeReport;
use crate::time::Time;
use filler::{Filler, TrainVerdict};
use filters::{DeliveryRate, WindowedMax, WindowedMin};
use std::time::Duration;

/// The control's constants. Each cites where it comes from.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ControlConfig {
    /// The rate assumed before anything is measured, bytes/s: RFC 6928's ten packets per
    /// 100 ms. Only paces the first round (STARTUP doubles it per round); never advertised.
    pub initial_rate_bytes_per_s: f64,
    /// STARTUP's pacing and window gain: 2/ln 2 (BBR), doubling the delivery rate per round.
    pub startup_gain: f64,
    /// The probe phase's gain in the cruise cycle (BBR's PROBE_BW: 1.25).
    pub probe_gain: f64,
    /// The drain phase's gain, in the cruise cycle and after a queue reaction (BBR: 0.75).
    pub drain_gain: f64,
    /// Phases in one cruise cycle (BBR: 8 — probe, drain, six at 1.0).
    pub cycle_phases: u32,
    /// Packets in flight are capped at this many bandwidth-delay products (BBR: 2) ...
    pub cwnd_gain: f64,
    /// ... plus this many packets (RFC 6928's initial window; also the cap before any RTT).
    pub min_cwnd_packets: u32,
    /// Queueing delay tolerated before the control reacts: at least this long ...
    pub queue_target: Duration,
    /// ... and at least this many datagram times at the estimated rate (a queue shorter than
    /// one packet cannot be seen on a slow link).
    pub queue_target_packets: u32,
    /// How long a minimum RTT holds before a newer sample replaces it (BBR, LEDBAT's base
    /// delay history: 10 s).
    pub min_rtt_window: Duration,
    /// The bandwidth filter's window, in smoothed RTTs (BBR: 10 rounds).
    pub bw_window_rtts: u32,
    /// The shortest phase, and the shortest span a delivery rate is measured over: the
    /// engine's timer granularity (a real OS: about a millisecond).
    pub min_phase: Duration,
    /// A delivery rate is measured over at least this many datagrams.
    pub sample_packets: u32,
    /// Datagrams per filler train (at most [`MAX_PROBE_TRAIN`](crate::spp::wire::MAX_PROBE_TRAIN);
    /// 0 turns filler off).
    pub filler_train_packets: u8,
    /// Fraction of the estimate filler may use while nothing rises.
    pub filler_share: f64,
    /// Shortest time between filler trains while nothing rises.
    pub filler_min_interval: Duration,
    /// Longest time between filler trains while the estimate is collapsed by stalls (see
    /// [`RateControl::handle_timeout`]), and the first interval between the pings of a
    /// silent filler (no report, or a stall: see the module documentation).
    pub filler_outage_interval: Duration,
    /// The cap on a silent filler's ping interval, which doubles per unanswered ping from
    /// `filler_outage_interval`: a path that returns is found within about this long plus a
    /// round trip.
    pub filler_silent_max_interval: Duration,
    /// A train that arrived slower than this fraction of the rate it was sent at measured the
    /// bottleneck; faster, the link took it.
    pub filler_taken_fraction: f64,
    /// A train's verdict above this multiple of the estimate is a rise, believed only once
    /// the next train confirms it (see [`RateControl::on_report`]); below, it applies at
    /// once (a bottleneck's samples scatter around its rate).
    pub filler_rise_band: f64,
    /// A train's bottleneck reading below this fraction of the estimate, over an arrival
    /// spread no longer than [`filler_host_delay`](Self::filler_host_delay), is believed
    /// only once the next train, sent at once, reads a fall too (see
    /// [`RateControl::on_report`]); otherwise it applies at once. Half, as a queue reaction
    /// lowers the estimate by at most half (`max_decrease`): a deeper fall is confirmed by a
    /// second measurement either way.
    pub filler_fall_band: f64,
    /// The longest a host's scheduling plausibly delays a train's arrival (a receiver off
    /// the CPU): a train that arrived over no longer than this may read a fall the path did
    /// not make. 10 ms, a few scheduler time slices. A deep fall on a link slower than
    /// about 9 Mbit/s spreads an 8-datagram train over longer, and applies at once.
    pub filler_host_delay: Duration,
    /// After an outage, how long the estimate may stay unmeasured before NAI plans with it
    /// anyway (see [`RateControl::rate_unsettled`]). The trains that find a returning path
    /// are paced from the rate the outage started from and double while taken whole, so a
    /// path ten times faster than that is met within a few trains; 5 s bounds an unlucky
    /// climb.
    pub filler_return_hold: Duration,
    /// Datagrams in a confirming train (at most
    /// [`MAX_PROBE_TRAIN`](crate::spp::wire::MAX_PROBE_TRAIN)). It is judged by its last
    /// quarter: long enough, at [`filler_confirm_gain`](Self::filler_confirm_gain), that a
    /// token bucket which passed the first train at line rate is empty before its last
    /// quarter, which then arrives at the rate the bucket sustains. Every datagram after
    /// the bucket empties queues: a quarter of the train is the least that still measures
    /// (about a third of the bucket's bytes of queue, against its whole for a half).
    pub filler_confirm_packets: u8,
    /// A confirming train is paced at this multiple of the estimate. A train at `g` times a
    /// bucket's rate drains `1 − 1/g` of its bytes from the bucket, so it empties a bucket of
    /// `B` bytes after `B·g/(g − 1)`: at 4, tbf's 16 KB bucket within the first 15 of 20
    /// datagrams. A rise leaves the estimate below the bucket's rate, so a last quarter that
    /// read a rise above the train's pace divided by `filler_taken_fraction · g` is checked
    /// once more, by a train paced from that reading (see [`RateControl::on_report`]).
    pub filler_confirm_gain: f64,
    /// A confirming train that refutes its rise (its last quarter arrived at no more than
    /// `filler_rise_band` times the estimate) holds further rises this long, doubling per
    /// refuted rise up to [`filler_rise_hold_max`](Self::filler_rise_hold_max): behind a token
    /// bucket every short train is taken whole, and a confirmation for each would spend a
    /// large share of the link on probing.
    pub filler_rise_hold: Duration,
    /// The longest hold (see [`filler_rise_hold`](Self::filler_rise_hold)): a real rise, and
    /// a fall a token bucket hides, is found within about this long plus a train interval.
    pub filler_rise_hold_max: Duration,
    /// Acknowledgements missing for this many smoothed RTTs (and at least 4 datagram times
    /// and `stall_min`) while data is in flight: the path is stalled and the estimate halves.
    pub stall_rtts: u32,
    /// The shortest stall: longer than a real host's scheduling hiccups (a loaded machine
    /// can leave a process off the CPU for tens of milliseconds).
    pub stall_min: Duration,
    /// A backlogged stretch shows what the path sustains once it spans the bandwidth window
    /// and at least this many datagrams: a token bucket of `B` bytes adds at most `B` to a
    /// stretch's bytes, so at 128 datagrams (188 KB) tbf's usual 16 KB bucket inflates its
    /// average by under a tenth. Shorter stretches only pace (see [`RateControl::estimate`]).
    pub sustained_packets: u32,
    /// A queue reaction lowers the estimate to at least this fraction of what it was.
    pub max_decrease: f64,
    /// The send quantum is this long at the pacing rate (BBR: 1 ms) ...
    pub send_quantum: Duration,
    /// ... and at most this many bytes (BBR: 64 KB, one segmentation-offload burst).
    pub max_send_quantum_bytes: u32,
    /// Packets in flight are never capped below this many send quanta (BBR's offload budget:
    /// 3), so a host that sends and acknowledges in batches keeps a batch in each stage.
    pub offload_quanta: u32,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            initial_rate_bytes_per_s: 10.0 * 1472.0 / 0.1,
            startup_gain: 2.0 / std::f64::consts::LN_2,
            probe_gain: 1.25,
            drain_gain: 0.75,
            cycle_phases: 8,
            cwnd_gain: 2.0,
            min_cwnd_packets: 10,
            queue_target: Duration::from_millis(1),
            queue_target_packets: 2,
            min_rtt_window: Duration::from_secs(10),
            bw_window_rtts: 10,
            min_phase: Duration::from_millis(1),
            sample_packets: 4,
            filler_train_packets: 8,
            filler_share: 0.125,
            filler_min_interval: Duration::from_millis(100),
            // Two 8-datagram trains a second at most: ~24 KB/s into a dead direction, and a
            // returning one found within a second or two (RFC 6298's one-second initial RTO
            // is the same bargain between a dead path's cost and a live one's delay).
            filler_outage_interval: Duration::from_millis(500),
            // The session's liveness backs off its PINGs to a silent peer to the same 1 s
            // (`LivenessConfig::probe_interval_max`, RFC 6298's initial RTO): a ping is two
            // 7-byte PROBE headers, ~100 B with UDP/IP, so a second costs ~100 B/s into a dead
            // direction, and a longer cap would save almost nothing while delaying the
            // recovery from an outage by up to the cap.
            filler_silent_max_interval: Duration::from_secs(1),
            filler_taken_fraction: 0.9,
            // Above the samples' scatter on a FIFO bottleneck, below the 1.25 of a probe
            // train taken whole: every rise a train shows is confirmed.
            filler_rise_band: 1.1,
            filler_fall_band: 0.5,
            filler_host_delay: Duration::from_millis(10),
            filler_return_hold: Duration::from_secs(5),
            filler_confirm_packets: 20,
            filler_confirm_gain: 4.0,
            filler_rise_hold: Duration::from_millis(250),
            filler_rise_hold_max: Duration::from_millis(500),
            stall_rtts: 4,
            stall_min: Duration::from_millis(50),
            sustained_packets: 128,
            max_decrease: 0.5,
            send_quantum: Duration::from_millis(1),
            max_send_quantum_bytes: 64 * 1024,
            offload_quanta: 3,
        }
    }
}

/// Where the control is in its cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Phase {
    /// Looking for the path's rate, doubling per round.
    Startup,
    /// Sending below the rate until the queue it found is gone.
    Drain,
    /// At the rate, with a short probe and a drain once per cycle.
    Cruise,
}

/// Counters, for traces and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ControlStats {
    /// Times a standing queue reset the estimate to the delivery rate.
    pub queue_reactions: u64,
    /// Times acknowledgements stopped and the estimate halved.
    pub stalls: u64,
    /// Filler trains sent.
    pub filler_trains: u64,
    /// Filler datagrams sent (pings' included).
    pub filler_packets: u64,
    /// Ping trains (two unpadded datagrams) a silent filler sent.
    pub filler_pings: u64,
    /// Filler trains that measured the bottleneck (arrived slower than sent).
    pub filler_capacity_samples: u64,
}

/// A rise a filler train showed, awaiting a confirming train (see
/// [`RateControl::on_report`]).
#[derive(Clone, Copy, Debug)]
struct PendingRise {
    /// The rate the train showed (bytes/s).
    rate: f64,
    /// A confirming train read `rate` but left too slowly to have emptied a token bucket
    /// sustaining less; the next one is paced from `rate`, not from the estimate.
    recheck: bool,
}

impl PendingRise {
    /// A rise a train showed, to be confirmed by a train paced from the estimate.
    fn shown(rate: f64) -> Self {
        PendingRise {
            rate,
            recheck: false,
        }
    }
}

/// What one filler train showed that the next must confirm before the estimate moves: a
/// train shows a rise or a fall, never both, and the next train's report settles it.
#[derive(Clone, Copy, Debug, Default)]
enum Pending {
    /// Nothing awaits a second train.
    #[default]
    Nothing,
    /// A rise, awaiting a confirming train.
    Rise(PendingRise),
    /// A fall deeper than `filler_fall_band` (the rate it read, bytes/s), awaiting the next
    /// train's (see [`ControlConfig::filler_fall_band`]).
    Fall(f64),
}

/// The rate control's state (see the module documentation).
#[derive(Clone, Debug)]
pub struct RateControl {
    config: ControlConfig,
    /// Bytes of a full datagram.
    mtu: f64,
    phase: Phase,
    /// Drain ends at this time (or earlier, once a sample shows the queue gone).
    drain_until: Time,
    cycle_start: Time,
    cycle_index: u32,
    /// The estimate when the current probe phase began.
    probe_base: f64,
    bw: WindowedMax,
    /// The pacing rates DATA was sent at, over the bandwidth filter's window: no delivery
    /// rate can honestly exceed them (by more than the pacer's burst), so samples are capped
    /// there — acknowledgements bunched by a descheduled receiver or sender (a loaded host)
    /// would otherwise pass for a path several times faster.
    paced: WindowedMax,
    min_rtt: Option<(Duration, Time)>,
    latest_rtt: Option<Duration>,
    standing: WindowedMin,
    srtt: Option<Duration>,
    delivery: DeliveryRate,
    /// Bytes acknowledged, in all.
    delivered: u64,
    /// DATA bytes sent, in all.
    sent: u64,
    /// `sent` when the application last left the pacer idle: rate samples whose span starts
    /// below it were limited by the application, not the path.
    app_limited_mark: u64,
    last_ack_at: Option<Time>,
    /// The first DATA sent since the last acknowledgement (a stall is timed from the later of
    /// the two).
    first_unacked_send: Option<Time>,
    in_flight_packets: usize,
    next_reaction: Time,
    calibrated: bool,
    full_bw: f64,
    full_bw_rounds: u32,
    round_mark: u64,
    iface_queue_packets: Option<u32>,
    /// The estimate the stalls of an outage started from, until the path is measured again
    /// (a filler train's verdict, or the estimate back at it): see `handle_timeout`.
    collapsed_from: Option<f64>,
    /// When the path answered after an outage (a train's report, or the application's data
    /// acknowledged back up to the collapse's rate), until a train or the application's
    /// data meets the bottleneck: meanwhile the estimate is what the path took, a lower
    /// bound on its rate (see [`RateControl::rate_unsettled`]).
    returned_at: Option<Time>,
    /// Bytes acknowledged beyond what the bottleneck rate explains (BBR's `extra_acked`),
    /// windowed maximum over the bandwidth filter's window.
    extra_acked: WindowedMax,
    /// When the current aggregation interval began, and the bytes acknowledged since.
    agg_start: Time,
    agg_delivered: u64,
    filler: Filler,
    /// A rise or a fall a train showed, awaiting the next train's.
    pending: Pending,
    /// Rises shown by a single train are not followed up until then, while the estimate is
    /// no higher than the rate (bytes/s) the refuting train measured (see
    /// [`ControlConfig::filler_rise_hold`]); and the hold the next refuted rise sets.
    rise_hold_until: Option<(Time, f64)>,
    rise_hold: Duration,
    /// The rate the path was last shown to sustain: set where the bottleneck was measured
    /// busy (a standing queue's reaction, a filler train that arrived slower than sent),
    /// raised by a confirmed filler train and by two cruise probes in a row taken whole.
    /// Application-limited samples may raise the estimate at most `filler_rise_band` above
    /// it (see `on_ack`).
    sustained: Option<f64>,
    /// Cruise probes in a row taken whole beyond `sustained` (see `advance`).
    whole_probes: u32,
    /// Where the current backlogged stretch began (time, bytes acknowledged): the first
    /// acknowledgement whose delivery-rate sample the application did not limit. Its average
    /// rate, once it spans a bandwidth window and `sustained_packets`, raises `sustained`
    /// (see `note_backlog`).
    backlog_from: Option<(Time, u64)>,
    stats: ControlStats,
}

impl RateControl {
    /// A control starting at `now` for datagrams of at most `mtu_bytes`.
    pub fn new(config: ControlConfig, mtu_bytes: u16, now: Time) -> RateControl {
        let backoff = filler::PingBackoff {
            first: config.filler_outage_interval,
            max: config.filler_silent_max_interval,
        };
        let filler = Filler::new(now, mtu_bytes, backoff);
        let rise_hold = config.filler_rise_hold;
        RateControl {
            config,
            mtu: f64::from(mtu_bytes.max(1)),
            phase: Phase::Startup,
            drain_until: now,
            cycle_start: now,
            cycle_index: 2,
            probe_base: 0.0,
            bw: WindowedMax::default(),
            paced: WindowedMax::default(),
            min_rtt: None,
            latest_rtt: None,
            standing: WindowedMin::default(),
            srtt: None,
            delivery: DeliveryRate::default(),
            delivered: 0,
            sent: 0,
            app_limited_mark: 0,
            last_ack_at: None,
            first_unacked_send: None,
            in_flight_packets: 0,
            next_reaction: now,
            calibrated: false,
            full_bw: 0.0,
            full_bw_rounds: 0,
            round_mark: 0,
            iface_queue_packets: None,
            collapsed_from: None,
            returned_at: None,
            extra_acked: WindowedMax::default(),
            agg_start: now,
            agg_delivered: 0,
            filler,
            pending: Pending::Nothing,
            rise_hold_until: None,
            rise_hold,
            sustained: None,
            whole_probes: 0,
            backlog_from: None,
            stats: ControlStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ControlConfig {
        &self.config
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Counters.
    pub fn stats(&self) -> ControlStats {
        let mut s = self.stats;
        s.filler_trains = self.filler.trains();
        s.filler_packets = self.filler.packets();
        s.filler_pings = self.filler.pings();
        s
    }

    /// The bottleneck rate measured (datagram bytes/s), whether or not it is advertised yet.
    pub fn bottleneck_bytes_per_s(&self) -> f64 {
        self.bw.get().unwrap_or(0.0)
    }

    /// The estimate NAI plans with (datagram bytes/s): the path's measured delivery rate, never
    /// above what was delivered, and no higher than the path was shown to *sustain*; `None`
    /// until there is evidence of it.
    ///
    /// The bottleneck filter ([`bottleneck_bytes_per_s`](Self::bottleneck_bytes_per_s)) paces
    /// and probes: it takes the windowed maximum of short delivery-rate samples, as BBR's does,
    /// and a token bucket's tokens lift those for as long as they last (a 32 KB message through
    /// tbf's 16 KB bucket read 1.4 times a 2 Mbit/s link for a few hundred milliseconds). NAI
    /// plans deadlines seconds ahead with the rate the path keeps up, which only a standing
    /// queue's rate, a confirming filler train, or a backlogged stretch long enough to outlast
    /// such a bucket (`sustained_packets`) shows — the paper's split, too: one rate paces SPP
    /// and one is what NAI plans with (§4.2–§4.3).
    pub fn estimate(&self) -> Option<f64> {
        let planned = self.bottleneck_bytes_per_s().min(self.sustained_bound());
        self.calibrated.then_some(planned)
    }

    /// What the path was shown to sustain, or no bound before it was measured busy.
    fn sustained_bound(&self) -> f64 {
        self.sustained.unwrap_or(f64::INFINITY)
    }

    /// The minimum RTT (the path's propagation delay), once measured.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(|(d, _)| d)
    }

    /// The latest queueing-delay estimate: the standing RTT above the minimum.
    pub fn queue_delay(&mut self, now: Time) -> Duration {
        self.rtt_queue_delay(now)
    }

    /// Whether the path is in an outage: acknowledgements stopped with data in flight and the
    /// path has not been measured since (the estimate is then the stalls' halvings, not a
    /// measurement).
    pub fn in_outage(&self) -> bool {
        self.collapsed_from.is_some()
    }

    /// Whether the estimate is no evidence of what the path can carry: in an outage (the
    /// stalls' halvings), or since the path answered again until a reading met the
    /// bottleneck (at most [`ControlConfig::filler_return_hold`]). After an outage the first
    /// trains are paced from the rate the outage started from — near nothing when a link
    /// faded into it — and a train taken whole, or the application's data acknowledged back
    /// up to that rate, says only that the path carries at least that much. NAI planned with
    /// it and expired, the moment a faded link returned at ten times that rate, messages it
    /// then had seconds to spare for.
    pub fn rate_unsettled(&self, now: Time) -> bool {
        self.in_outage()
            || self
                .returned_at
                .is_some_and(|t| now.saturating_since(t) < self.config.filler_return_hold)
    }

    /// The rate pacing uses before anything is measured, and as a floor after an outage.
    fn pacing_bw(&self) -> f64 {
        let bw = self.bottleneck_bytes_per_s();
        if self.calibrated {
            // At least one datagram per `min_rtt_window`/10 (a second): the retransmission
            // timer probes a silent path, this only keeps the pacer alive.
            bw.max(self.mtu)
        } else {
            bw.max(self.config.initial_rate_bytes_per_s)
        }
    }

    /// The gain of the current cruise phase.
    fn cruise_gain(&self) -> f64 {
        match self.cycle_index {
            0 => self.config.probe_gain,
            1 => self.config.drain_gain,
            _ => 1.0,
        }
    }

    /// The rate to pace SPP at, datagram bytes/s.
    pub fn pacing_rate(&self) -> f64 {
        if let Some(rate) = self.filler.sending_rate() {
            return rate;
        }
        let gain = match self.phase {
            Phase::Startup => self.config.startup_gain,
            Phase::Drain => self.config.drain_gain,
            Phase::Cruise => self.cruise_gain(),
        };
        gain * self.pacing_bw()
    }

    /// Most bytes in flight: `cwnd_gain` bandwidth-delay products plus `min_cwnd_packets`
    /// plus the acknowledgement aggregation measured, and at least `offload_quanta` send
    /// quanta (see the module documentation).
    pub fn cwnd_bytes(&self) -> u64 {
        let extra = self.extra_acked.get().unwrap_or(0.0);
        let budget = f64::from(self.config.offload_quanta) * self.send_quantum();
        crate::convert::f64_u64_sat((self.base_cwnd() + extra).max(budget))
    }

    /// The cap before the allowances for batching: `cwnd_gain` bandwidth-delay products plus
    /// `min_cwnd_packets`.
    fn base_cwnd(&self) -> f64 {
        let floor = f64::from(self.config.min_cwnd_packets.max(1)) * self.mtu;
        let gain = if self.phase == Phase::Startup {
            self.config.startup_gain
        } else {
            self.config.cwnd_gain
        };
        let bdp = self
            .min_rtt()
            .map_or(0.0, |r| self.pacing_bw() * r.as_secs_f64());
        gain * bdp + floor
    }

    /// BBR's send quantum: `send_quantum` at the pacing rate, between two datagrams and
    /// `max_send_quantum_bytes`.
    fn send_quantum(&self) -> f64 {
        let max = f64::from(self.config.max_send_quantum_bytes).max(2.0 * self.mtu);
        (self.pacing_rate() * self.config.send_quantum.as_secs_f64()).clamp(2.0 * self.mtu, max)
    }

    /// BBR's "BBRUpdateACKAggregation": within an interval that starts whenever the
    /// acknowledgements fall behind the bottleneck rate, the bytes acknowledged beyond that
    /// rate's share of the interval are the aggregation a batch of acknowledgements (or of
    /// sends) brought; its windowed maximum widens the cap.
    fn update_ack_aggregation(&mut self, now: Time, acked_bytes: u64) {
        let bw = self.pacing_bw();
        let mut expected = bw * now.saturating_since(self.agg_start).as_secs_f64();
        if self.agg_delivered as f64 <= expected {
            self.agg_delivered = 0;
            self.agg_start = now;
            expected = 0.0;
        }
        self.agg_delivered = self.agg_delivered.saturating_add(acked_bytes);
        // At most the cap as it stands (the draft's `min(extra, cwnd)`): the allowance can
        // at most double the cap per window, never run away.
        let extra = (self.agg_delivered as f64 - expected).min(self.cwnd_bytes() as f64);
        let window = self.bw_window();
        self.extra_acked.update(now, extra.max(0.0));
        self.extra_acked.expire(now, window);
    }

    /// The smoothed RTT, or the minimum phase before any sample.
    fn srtt(&self) -> Duration {
        self.srtt.unwrap_or(self.config.min_phase)
    }

    /// One datagram's time at the estimated rate.
    fn packet_time(&self) -> Duration {
        Duration::try_from_secs_f64(self.mtu / self.pacing_bw()).unwrap_or(Duration::MAX)
    }

    /// The queueing delay the control tolerates.
    pub fn queue_target(&self) -> Duration {
        let packets = self
            .packet_time()
            .saturating_mul(self.config.queue_target_packets);
        self.config.queue_target.max(packets)
    }

    /// Copa's window for the standing RTT: half a smoothed RTT.
    fn standing_window(&self) -> Duration {
        (self.srtt() / 2).max(self.config.min_phase)
    }

    fn rtt_queue_delay(&mut self, now: Time) -> Duration {
        let window = self.standing_window();
        match (self.standing.get(now, window), self.min_rtt()) {
            (Some(s), Some(m)) => s.saturating_sub(m),
            _ => Duration::ZERO,
        }
    }

    /// Queueing delay from the interface send queue (§4.2's backlog), where reported.
    fn iface_queue_delay(&self) -> Duration {
        let Some(packets) = self.iface_queue_packets else {
            return Duration::ZERO;
        };
        self.packet_time().saturating_mul(packets)
    }

    /// A DATA datagram of `bytes` went out at `now`.
    pub fn on_sent(&mut self, now: Time, bytes: u64) {
        self.sent = self.sent.saturating_add(bytes);
        self.paced.update(now, self.pacing_rate());
        self.first_unacked_send.get_or_insert(now);
        let interval = self.train_interval();
        if self.filler.on_data_sent(now, bytes, interval) {
            // The application uses the link: its own samples judge it now, and a rise a
            // train showed is moot (its confirmation would wait behind the application), and
            // so is a fall (a standing queue shows a real one).
            self.pending = Pending::Nothing;
        }
    }

    /// The pacer allowed a datagram and the application had none: rate samples taken until
    /// what is in flight now is acknowledged are the application's, not the path's.
    pub fn on_app_limited(&mut self) {
        self.app_limited_mark = self.sent;
    }

    /// The engine's interface send queue holds `packets` (§4.2).
    pub fn on_queue(&mut self, packets: u32) {
        self.iface_queue_packets = Some(packets);
    }

    /// The sender now has `packets` DATA datagrams in flight.
    pub fn set_in_flight(&mut self, packets: usize) {
        self.in_flight_packets = packets;
        if packets == 0 {
            self.first_unacked_send = None;
        }
    }

    /// An acknowledgement at `now` acknowledged `acked_bytes` of DATA datagrams; `rtt` is its
    /// RTT sample, if it gave one.
    pub fn on_ack(&mut self, now: Time, acked_bytes: u64, rtt: Option<Duration>) {
        if let Some(rtt) = rtt {
            self.on_rtt(now, rtt);
        }
        if acked_bytes == 0 {
            return;
        }
        self.delivered = self.delivered.saturating_add(acked_bytes);
        self.delivery.on_ack(now, self.delivered);
        self.filler.on_acked(now);
        self.update_ack_aggregation(now, acked_bytes);
        self.last_ack_at = Some(now);
        self.first_unacked_send = None;
        let round_start = self.delivered >= self.round_mark;
        if round_start {
            // A round is a round trip of data — and at least `sample_packets`, the span a
            // delivery rate is measured over: on a path whose RTT is shorter than a few
            // packet times (a veth, 50 µs) a round of one packet would end before the rate
            // it sent at could show, and STARTUP would see a plateau that is not there.
            let span =
                crate::convert::f64_u64_sat(f64::from(self.config.sample_packets) * self.mtu);
            self.round_mark = self.sent.max(self.delivered.saturating_add(span));
        }
        let span = self
            .min_rtt()
            .unwrap_or(self.config.min_phase)
            .max(self.config.min_phase);
        let min_bytes =
            crate::convert::f64_u64_sat(f64::from(self.config.sample_packets) * self.mtu);
        let window = self.bw_window();
        self.paced.expire(now, window);
        let cap = self.sample_cap();
        let sample = self
            .delivery
            .sample(now, self.delivered, span, min_bytes)
            .map(|(r, start)| (r.min(cap), start));
        let mut app_limited = true;
        if let Some((rate, start)) = sample {
            // A span that starts at or before the moment the application left the pacer idle
            // includes idle time: it says what the application sent, not what the path takes.
            app_limited = start <= self.app_limited_mark;
            if !app_limited {
                // Not `sustained`: a backlogged sender's burst through a token bucket's
                // tokens is as fast as an idle one's.
                self.bw.update(now, rate);
            } else if rate > self.bottleneck_bytes_per_s() {
                // Such a sample is the application's burst after idle, and a burst that fits
                // a token bucket (tbf's `burst`, a cellular grant) crosses at line rate
                // whatever the bucket sustains; the pacer's own burst after idle and the
                // sample cap (1.25 × the paced rate) would let each burst raise the next one's
                // pacing, so a light application ratcheted the estimate 1 → 14 Mbit/s on a
                // 1 Mbit/s tbf link, message by message, and the queue it then built took
                // reactions to undo. Beyond what the path was shown to sustain, a rise is the
                // filler's to confirm (two trains back to back) or a backlogged sender's.
                let cap = self
                    .sustained
                    .map_or(f64::INFINITY, |s| self.config.filler_rise_band * s);
                let rate = rate.min(cap);
                if rate > self.bottleneck_bytes_per_s() {
                    self.bw.update(now, rate);
                }
            }
        }
        self.note_backlog(now, app_limited);
        self.bw.expire(now, window);
        self.end_collapse_if_back(now);
        if self.check_queue(now) {
            return;
        }
        if self.phase == Phase::Startup
            && round_start
            && !app_limited
            && self.startup_round_ends_it(self.bottleneck_bytes_per_s())
        {
            // BBR: the rate stopped growing; what startup queued is drained.
            self.calibrated = true;
            let q = self.rtt_queue_delay(now);
            self.enter_drain(now, q);
        }
        self.advance(now);
    }

    fn on_rtt(&mut self, now: Time, rtt: Duration) {
        self.latest_rtt = Some(rtt);
        self.srtt = Some(match self.srtt {
            None => rtt,
            Some(s) => (s * 7 + rtt) / 8,
        });
        let expired = self.min_rtt.is_none_or(|(m, at)| {
            rtt <= m || now.saturating_since(at) > self.config.min_rtt_window
        });
        if expired {
            self.min_rtt = Some((rtt, now));
        }
        self.standing.update(now, rtt);
    }

    /// A standing queue above the target: every packet acknowledged within the standing
    /// window had queued, so the bottleneck was busy throughout and the rate of those
    /// acknowledgements is its rate — whether or not the application kept the pacer busy. The
    /// estimate is reset to it and the sender drains. Returns whether it reacted.
    fn check_queue(&mut self, now: Time) -> bool {
        if now < self.next_reaction {
            return false;
        }
        let q = self.rtt_queue_delay(now).max(self.iface_queue_delay());
        if q <= self.queue_target() {
            return false;
        }
        let window = self.standing_window();
        // At least half a full datagram acknowledged after the window's first
        // acknowledgement (one datagram of a message's data): a queue that small messages only
        // waited in (64-byte messages ten a second behind a filler train, which is not counted
        // as delivered) says nothing of the bottleneck's rate — their acknowledgements' rate
        // was the application's (95 kbit/s on a 1 Mbit/s link, and the estimate was halved on
        // it at once).
        let min_bytes = crate::convert::f64_u64_sat(self.mtu / 2.0);
        let Some(rate) = self
            .delivery
            .rate_since(now.saturating_sub(window), self.delivered, min_bytes)
            .map(|r| r.min(self.sample_cap()))
            .filter(|r| r.is_finite() && *r > 0.0)
        else {
            return false;
        };
        self.stats.queue_reactions += 1;
        // At most halved per reaction: the acknowledgement spacing of a few packets can be
        // stretched by the hosts' own scheduling; a real fall (8 → 2) takes two reactions,
        // a round trip or two apart.
        // But never above what the path was shown to sustain: a fall to it is known good (a
        // token bucket's burst ending, on a path measured before), and taken in one step.
        let floor =
            (self.config.max_decrease * self.bottleneck_bytes_per_s()).min(self.sustained_bound());
        let rate = rate.max(floor);
        self.bw.reset(now, rate);
        self.measured_sustained(rate);
        self.whole_probes = 0;
        self.calibrated = true;
        self.enter_drain(now, q);
        true
    }

    /// Tracks the backlogged stretch: each bandwidth window of it (and at least
    /// `sustained_packets`), its average delivery rate is what the path sustained, and the
    /// next one is measured afresh.
    fn note_backlog(&mut self, now: Time, app_limited: bool) {
        if app_limited {
            self.backlog_from = None;
            return;
        }
        let (t0, d0) = *self.backlog_from.get_or_insert((now, self.delivered));
        let span = now.saturating_since(t0);
        let bytes = self.delivered.saturating_sub(d0);
        let enough =
            crate::convert::f64_u64_sat(f64::from(self.config.sustained_packets) * self.mtu);
        if span >= self.bw_window() && bytes >= enough {
            let avg = bytes as f64 / span.as_secs_f64();
            self.raise_sustained(avg);
            self.backlog_from = Some((now, self.delivered));
        }
    }

    /// The bottleneck was measured busy at `rate`: that is what the path sustains now, and a
    /// backlogged stretch's average is measured from here (one that began before would
    /// average in the rate before a fall).
    fn measured_sustained(&mut self, rate: f64) {
        self.sustained = Some(rate);
        self.backlog_from = None;
    }

    /// What the path sustains is at least `rate`.
    fn raise_sustained(&mut self, rate: f64) {
        if self.sustained.is_some_and(|s| s < rate) {
            self.sustained = Some(rate);
        }
    }

    /// Drains a queue of `queue` (as delay) at the drain gain, then cruises.
    fn enter_drain(&mut self, now: Time, queue: Duration) {
        let spare = (1.0 - self.config.drain_gain).max(0.05);
        let drain = Duration::try_from_secs_f64(queue.as_secs_f64() / spare)
            .unwrap_or(Duration::MAX)
            .max(self.config.min_phase);
        self.phase = Phase::Drain;
        self.drain_until = now.saturating_add(drain);
        // The bottleneck was just measured busy: no rise or fall is pending, and after an
        // outage the estimate is a measurement again.
        self.pending = Pending::Nothing;
        self.returned_at = None;
        // The queue seen within the next round trip is still the one just measured; after
        // it, a queue that still stands (a fall deeper than one reaction's halving) is
        // reacted to again.
        self.next_reaction = now.saturating_add(self.srtt());
    }

    /// Moves through drain and the cruise cycle by time.
    fn advance(&mut self, now: Time) {
        if self.phase == Phase::Drain {
            let gone = self
                .latest_rtt
                .zip(self.min_rtt())
                .is_some_and(|(l, m)| l.saturating_sub(m) <= self.queue_target() / 2);
            if now >= self.drain_until || gone {
                self.enter_cruise(now);
            }
            return;
        }
        if self.phase != Phase::Cruise {
            return;
        }
        let phase_len = self.phase_len();
        let phases = self.config.cycle_phases.max(3);
        while now.saturating_since(self.cycle_start) >= phase_len {
            self.cycle_start = self.cycle_start.saturating_add(phase_len);
            self.cycle_index = (self.cycle_index + 1) % phases;
            match self.cycle_index {
                0 => self.probe_base = self.bottleneck_bytes_per_s(),
                1 if self.bottleneck_bytes_per_s() >= 1.2 * self.probe_base
                    && self.probe_base > 0.0 =>
                {
                    // The probe was taken whole and the rate rose with it: there may be much
                    // more (the path recovered, or the estimate was low). Look for it the way
                    // STARTUP does, doubling per round until a queue forms or the rate stops
                    // growing (BBRv2's exponential PROBE_UP has the same aim), instead of a
                    // quarter more per cycle. Beyond what the path was shown to sustain, only
                    // when the next cycle's probe is taken whole too: one probe may be a token
                    // bucket's burst (a message after idle finds tbf's bucket full, and a
                    // 16 KB bucket takes a 1.25 probe half a second to empty at 1 Mbit/s), and
                    // doubling from there built a 100–240 ms queue per message on a 1 Mbit/s
                    // link. Two in a row, as the filler's two trains, confirm the rise.
                    let beyond = self.sustained.is_some_and(|s| self.probe_base >= s);
                    if beyond && self.whole_probes == 0 {
                        self.whole_probes = 1;
                    } else {
                        // `sustained` is not raised here: the estimate the probes raised
                        // includes whatever a bucket's tokens added to them (on the stepped
                        // namespace link it was 2.5 times what the path then sustained). What
                        // STARTUP finds next (a standing queue's rate), a confirming filler
                        // train, or a backlogged stretch long enough shows what it sustains.
                        self.whole_probes = 0;
                        self.phase = Phase::Startup;
                        self.full_bw = 0.0;
                        self.full_bw_rounds = 0;
                        return;
                    }
                }
                1 => self.whole_probes = 0,
                _ => {}
            }
            if now.saturating_since(self.cycle_start) > phase_len.saturating_mul(phases) {
                // Idle for cycles: restart the cycle at a cruise phase, not in a burst.
                self.cycle_start = now;
                self.cycle_index = 2;
            }
        }
    }

    /// The highest delivery rate a sample may show: 1.25 times the fastest pacing rate of the
    /// bandwidth window (the pacer's burst allows a little above the rate).
    fn sample_cap(&self) -> f64 {
        self.paced.get().map_or(f64::INFINITY, |p| 1.25 * p)
    }

    /// A cruise phase lasts a minimum RTT (BBR), and long enough for `sample_packets` to go
    /// out, so that the probe's rate shows in the delivery rate.
    fn phase_len(&self) -> Duration {
        self.min_rtt()
            .unwrap_or(self.config.min_phase)
            .max(self.config.min_phase)
            .max(
                self.packet_time()
                    .saturating_mul(self.config.sample_packets),
            )
    }

    /// The bandwidth filter's window: `bw_window_rtts` smoothed RTTs (BBR's ten rounds), and
    /// at least two cruise cycles, so that it always holds a probe phase's samples. (On a
    /// path whose RTT is a few packet times, ten RTTs hold only samples taken at the rate
    /// already paced, and a sender that paces a little slower than asked — timers fire late —
    /// would ratchet its own estimate down.)
    fn bw_window(&self) -> Duration {
        let cycle = self
            .phase_len()
            .saturating_mul(2 * self.config.cycle_phases.max(3));
        self.srtt()
            .max(self.config.min_phase)
            .saturating_mul(self.config.bw_window_rtts)
            .max(cycle)
    }

    /// A PROBE report from the receiver (filler trains).
    pub fn on_report(&mut self, now: Time, report: &ProbeReport) {
        // The path answers: a stall is timed from here, as from an acknowledgement. DATA sent
        // into an outage stays in flight, unacknowledged, until the retransmission timer
        // gives it up; timed from the last acknowledgement, the stall fired again right after
        // the first train measured the returned path and halved what it had just measured
        // (core's model of a 30-s link-down: 410 → 205 kbit/s, again and again).
        if self.last_ack_at.is_some_and(|t| t < now) {
            self.last_ack_at = Some(now);
        }
        let interval = self.train_interval();
        let verdict =
            self.filler
                .on_report(now, report, self.config.filler_taken_fraction, interval);
        let Some(filler::Judged {
            verdict,
            tail,
            as_asked,
            left,
            head_taken,
        }) = verdict
        else {
            return;
        };
        // A train measured the path: the estimate is evidence again, not a stall's guess.
        // Up to the rate an outage started from, a rise needs no confirmation: the path was
        // measured there before.
        let measured = self.end_collapse(now).unwrap_or(0.0);
        let bw = self.bottleneck_bytes_per_s();
        let rate = match verdict {
            TrainVerdict::Taken(r) | TrainVerdict::Bottleneck(r) => r,
        };
        // A rise is believed only when a second train, sent right after the first, shows it
        // too: a token bucket (tbf's `burst`, a cellular scheduler's grant) passes a train
        // that fits it at line rate whatever the rate it sustains. BBR's policer detection
        // likewise trusts a rate only when consecutive intervals agree (Cardwell et al.,
        // Linux `tcp_bbr.c`, "long-term bandwidth" sampling). The confirming train is long
        // and fast enough to empty such a bucket before its last quarter, and is judged by
        // that quarter (`filler_confirm_packets`, `filler_confirm_gain`): its verdict is the
        // rate, whichever way it goes. A confirmation judged on the whole train (no report
        // of its first three quarters came) is trusted no further than the rise it confirms.
        // It may leave whenever it is due: it empties a full bucket by itself, so it needs
        // no bucket left short by the first train.
        let (confirmed, fell_to) = match std::mem::take(&mut self.pending) {
            Pending::Nothing => (None, None),
            Pending::Rise(p) => (Some(p), None),
            Pending::Fall(rate) => (None, Some(rate)),
        };
        // A train that met the bottleneck sets what NAI plans with (`sustained`). Where its
        // head arrived as fast as it left (a token bucket's signature, see `head_taken`),
        // its rise is counted from that, not from the bottleneck filter: the application's
        // DATA can lift the filter above it with the bucket's tokens, and an 8-datagram train
        // whose tail mixed tokens and rate read 10.6 Mbit/s on the 8 Mbit/s tbf link — below
        // the filter's 14.1, so no rise — and was planned with unconfirmed. A FIFO bottleneck
        // spaces the head too, and its reading is the rate.
        let ceiling = match verdict {
            TrainVerdict::Bottleneck(_) if head_taken => bw.min(self.sustained_bound()),
            _ => bw,
        };
        let rises =
            rate > (self.config.filler_rise_band * ceiling).max(measured) || !self.calibrated;
        // The estimate can rise by other means meanwhile (the application's DATA taken
        // whole by the same bucket); then the hold ends, so that a confirmation checks it.
        let holding = self
            .rise_hold_until
            .filter(|&(t, r)| self.calibrated && now < t && bw <= self.config.filler_rise_band * r)
            .map(|(t, _)| t);
        let rate = match (rises, confirmed, holding) {
            (true, None, Some(until)) if measured <= bw => {
                // A rise right after a refuted one: most likely the same bucket again, so not
                // believed — but it is the rise the hold's end confirms: the confirming train
                // goes then, with no short train first. Behind a bucket a short train is taken
                // whole whatever the link does, so another says nothing, and waiting for one
                // held a light application's rise a train interval longer (390 ms at 2 Mbit/s).
                self.pending = Pending::Rise(PendingRise::shown(rate));
                self.filler.restart_at(until);
                return;
            }
            (true, None, _) => {
                self.pending = Pending::Rise(PendingRise::shown(rate));
                self.filler.follow_at_once(now);
                if measured > bw {
                    // Back to the rate before the outage at once; beyond it, confirmed.
                    self.bw.update(now, measured.min(rate));
                }
                return;
            }
            (_, Some(p), _) => {
                // A confirming train empties a bucket before its last quarter only if it left
                // at about `filler_confirm_gain` times the rate the bucket sustains (see
                // `ControlConfig::filler_confirm_gain`), and it was paced from the estimate,
                // which a rise leaves below the link: at 2.4 times (an estimate of 4.8 Mbit/s
                // on an 8 Mbit/s tbf link) a 16 KB bucket lasts to the train's 19th datagram,
                // and the last quarter read 11.1 Mbit/s. A head that arrived as fast as it
                // left over a tail that read a rise faster than the train can vouch for is
                // a bucket's signature, and the reading an upper bound on the link, not its
                // rate: the next confirming train goes at once, paced from that reading —
                // the link sustains no more, so it empties the bucket. Once only, and only
                // where the train left as asked (a host that cannot pace faster would read
                // the same). A FIFO bottleneck spaces the head too, and its tail is its rate
                // at any gain above it: trusted, as a recheck would cost the application's
                // messages a train's queue for nothing.
                if rises
                    && tail
                    && head_taken
                    && as_asked
                    && !p.recheck
                    && matches!(verdict, TrainVerdict::Bottleneck(_))
                    && left
                        < self.config.filler_taken_fraction * self.config.filler_confirm_gain * rate
                {
                    self.pending = Pending::Rise(PendingRise {
                        rate,
                        recheck: true,
                    });
                    self.filler.follow_at_once(now);
                    return;
                }
                let p = p.rate;
                let shown = tail || matches!(verdict, TrainVerdict::Taken(_));
                if rises && shown {
                    self.rise_hold = self.config.filler_rise_hold;
                    self.rise_hold_until = None;
                } else {
                    // Refuted: rises wait, a little longer each time in a row.
                    self.rise_hold_until = Some((now.saturating_add(self.rise_hold), rate));
                    let max = self
                        .config
                        .filler_rise_hold_max
                        .max(self.config.filler_rise_hold);
                    self.rise_hold = self.rise_hold.saturating_mul(2).min(max);
                }
                match verdict {
                    // A bottleneck measured by the tail is the rate, up or down.
                    TrainVerdict::Bottleneck(_) if tail => rate,
                    // Taken whole: the path took the train's rate, unless a bucket larger
                    // than the train held it; a rise is trusted to twice what the first
                    // train showed (the next confirmation can take it further).
                    TrainVerdict::Taken(_) if tail => rate.min(2.0 * p),
                    // Judged on the whole train, which a bucket's head inflates: it
                    // confirms no more than the first train showed, and no rise at all where
                    // it met the bottleneck.
                    TrainVerdict::Taken(_) => rate.min(p),
                    TrainVerdict::Bottleneck(_) => rate.min(bw),
                }
            }
            (false, None, _) => match verdict {
                // A train that read the bottleneck far below the estimate, over a spread a
                // host's scheduling could have made, is believed once the next one, sent at
                // once, reads a fall too; then the higher reading is the rate. A host can
                // only make a train arrive later than the path would (the receiver off the
                // CPU for a millisecond spreads an 8-datagram train over it: 88 Mbit/s read
                // on loopback, which carries 13 Gbit/s, and a bulk run paced there), so of
                // two readings the higher is the path's. A real fall on a fast path costs one
                // more train and a round trip; on a slow one its train spreads over longer
                // than any hiccup and applies at once (a cellular link's falls, which a
                // check held half a second at its rate).
                TrainVerdict::Bottleneck(_)
                    if self.calibrated
                        && rate < self.config.filler_fall_band * bw
                        && Duration::from_nanos(report.gap_ns) <= self.config.filler_host_delay =>
                {
                    match fell_to {
                        Some(first) => rate.max(first),
                        None => {
                            self.pending = Pending::Fall(rate);
                            self.filler.follow_at_once(now);
                            return;
                        }
                    }
                }
                _ => rate,
            },
        };
        // A train taken whole counts as a round of STARTUP. Without it, a path faster than this
        // host can pace a train (loopback: trains left at 45 MB/s whatever rate they were asked
        // for) never gives a train that arrives slower than it left, and an application that
        // sent less than STARTUP needs to end (100 KB) left the estimate unknown for seconds.
        if self.phase == Phase::Startup
            && matches!(verdict, TrainVerdict::Taken(_))
            && self.startup_round_ends_it(rate)
        {
            // The trains passed without a queue: nothing to drain.
            self.calibrated = true;
            self.enter_cruise(now);
        }
        match verdict {
            TrainVerdict::Taken(_) if rate > bw => {
                self.bw.update(now, rate);
                self.raise_sustained(rate);
            }
            TrainVerdict::Bottleneck(_) => {
                self.stats.filler_capacity_samples += 1;
                // The path's rate, measured: the estimate is evidence again after an outage.
                self.returned_at = None;
                self.bw.reset(now, rate);
                self.measured_sustained(rate);
                self.calibrated = true;
                if self.phase == Phase::Startup {
                    self.enter_cruise(now);
                }
            }
            TrainVerdict::Taken(_) if !as_asked => {
                // Taken, but no faster than the estimate, and the train could not leave at
                // the rate asked (this host's pacing is the limit, as on loopback), so
                // another one at once would show the same. The next goes at the usual
                // interval: following at once here sent a train about every millisecond, for
                // as long as the path stayed that fast, whatever `filler_share` allows.
                let interval = self.train_interval();
                self.filler.wait(now, interval);
            }
            TrainVerdict::Taken(_) => {
                // Taken at the rate asked, but the estimate rose past it meanwhile (the
                // application's DATA measured more while the train was out): the next train
                // follows at once, at the next gain above the new estimate. Waiting the
                // usual interval here (390 ms at 2 Mbit/s) held a light application's rise
                // 2 → 8 Mbit/s a second behind the link.
            }
        }
    }

    /// One round of STARTUP that showed `rate`: whether it ends STARTUP — BBR's full-bandwidth
    /// rule, three rounds in a row that do not raise the rate by a quarter. A round is a round
    /// trip of DATA (`on_ack`) or a confirmed filler train the link took whole (`on_report`).
    fn startup_round_ends_it(&mut self, rate: f64) -> bool {
        if rate >= 1.25 * self.full_bw {
            self.full_bw = rate;
            self.full_bw_rounds = 0;
            return false;
        }
        self.full_bw_rounds += 1;
        self.full_bw_rounds >= 3
    }

    /// Starts the cruise cycle at one of its phases at 1.0 (not at the probe).
    fn enter_cruise(&mut self, now: Time) {
        self.phase = Phase::Cruise;
        self.cycle_start = now;
        self.cycle_index = 2;
    }

    /// Time between filler trains while nothing rises: the train's bytes at `filler_share`
    /// of the estimate, and at least `filler_min_interval` — and, while the estimate is
    /// collapsed by an outage, at most `filler_outage_interval`.
    fn train_interval(&self) -> Duration {
        let bytes = f64::from(self.config.filler_train_packets) * self.mtu;
        let share = self.config.filler_share.max(1e-3);
        let interval = Duration::try_from_secs_f64(bytes / (share * self.pacing_bw()))
            .unwrap_or(Duration::MAX)
            .max(self.config.filler_min_interval);
        if self.collapsed_from.is_some() {
            // The estimate after an outage is the stalls' halvings, not a measurement: a
            // share of it would space trains by a minute (64 s at the one-datagram floor)
            // and leave a returning path unfound — with every message refused at that
            // estimate, a light application never finds it either. Trains are bounded in
            // time instead (a few datagrams a second), as TCP's retransmission timer probes
            // a silent path on its own clock, not the rate it last had.
            let cap = self
                .config
                .filler_outage_interval
                .max(self.config.filler_min_interval);
            return interval.min(cap);
        }
        interval
    }

    /// The rate a filler train is paced from (times its gain) and expected to cross the
    /// bottleneck at (for its grace): the estimate, or the rate an outage started from.
    fn filler_base_rate(&self) -> f64 {
        self.pacing_bw().max(self.collapsed_from.unwrap_or(0.0))
    }

    /// Ends the collapse once the estimate is back where the stalls started. What brought it
    /// back is the application's data acknowledged as the path returned — on a link that
    /// held it queued through the outage, that queue draining — at a pace that started from
    /// the collapse: a lower bound on the returned path's rate, as a train taken whole is, so
    /// the return hold starts here too. Without it NAI planned with the rate a fading link
    /// had before its outage (44 kbit/s on the emulated synthetic trace, whose link returns
    /// at 400) and expired, as the path returned, messages it then had seconds to spare for.
    fn end_collapse_if_back(&mut self, now: Time) {
        if self
            .collapsed_from
            .is_some_and(|from| self.bottleneck_bytes_per_s() >= from)
        {
            self.end_collapse(now);
        }
    }

    /// The path answered after an outage (a train's report, or the estimate back at the
    /// rate the outage started from): the collapse ends and the return hold starts. Returns
    /// that rate, if the estimate was collapsed.
    fn end_collapse(&mut self, now: Time) -> Option<f64> {
        let from = self.collapsed_from.take()?;
        self.returned_at = Some(now);
        Some(from)
    }

    /// Whether the filler runs at all: it is configured, and this side has sent the
    /// application's data. The filler keeps an estimate for a sender between its messages; a
    /// side that never sent any (a server that only receives) needs none — its first message
    /// is admitted with no estimate, as a new connection's are — and its trains would take
    /// `filler_share` of the path for nothing for as long as the connection lasts (the
    /// emulated Table 2's receiving server: 60–78 KB/s of PROBE datagrams for 300 s).
    fn filler_enabled(&self) -> bool {
        self.config.filler_train_packets >= 2 && self.sent > 0
    }

    /// Whether a filler datagram is due now, for an application with nothing to send.
    pub fn wants_filler(&self, now: Time) -> bool {
        self.filler_enabled() && self.filler.due(now)
    }

    /// When the next filler datagram may go, for an application with nothing to send (the
    /// pacer still spaces a train's datagrams); `None` while a train awaits its report.
    pub fn filler_due(&self) -> Option<Time> {
        if !self.filler_enabled() {
            return None;
        }
        self.filler.next_due()
    }

    /// Whether the filler is finding a path that went silent: pinging it (two unpadded PROBE
    /// datagrams, until one is answered), or measuring it again after the stalls of an
    /// outage. Its datagrams then go whatever caps the application's data (see
    /// [`AtpSender`](super::AtpSender)): DATA sent before the outage stays counted in flight
    /// until the retransmission timer gives it up, which after a long outage is tens of
    /// seconds away.
    pub fn finding_path(&self) -> bool {
        self.filler_enabled() && (self.filler.silent() || self.collapsed_from.is_some())
    }

    /// Whether a filler train is being sent (its first datagram went, its last has not).
    pub fn filler_sending(&self) -> bool {
        self.filler.sending_rate().is_some()
    }

    /// The next filler datagram (call when [`wants_filler`](Self::wants_filler) and the
    /// pacer allow one). The first of a train fixes the rate the train is paced at.
    pub fn poll_filler(&mut self, now: Time) -> Option<SppDatagram> {
        if !self.wants_filler(now) {
            return None;
        }
        let confirming = matches!(self.pending, Pending::Rise(_));
        let gain = if confirming {
            self.config.filler_confirm_gain
        } else if self.phase == Phase::Startup {
            self.config.startup_gain
        } else {
            // Each train the link took in a row raises the next one's gain: 1.25, 1.5, 2.
            match self.filler.successes() {
                0 => self.config.probe_gain,
                1 => 1.5,
                _ => 2.0,
            }
        };
        // After an outage the first train is paced from the rate the path had before it
        // (BBR keeps its bandwidth estimate across an RTO and sends at it once the path
        // answers): a path that returns at that rate is measured by one train — a report
        // slower than sent is the bottleneck, as fast is taken — instead of regrowing from
        // the halvings' floor, several trains of seconds each.
        let base = match self.pending {
            // A recheck is paced from the rate the last confirming train read (see
            // `on_report`).
            Pending::Rise(PendingRise {
                rate,
                recheck: true,
            }) => rate.max(self.filler_base_rate()),
            _ => self.filler_base_rate(),
        };
        let rate = gain * base;
        // A confirming train is long enough to outlast what a token bucket can hold (see
        // `on_report`).
        let n = if confirming {
            self.config.filler_confirm_packets
        } else {
            self.config.filler_train_packets
        }
        .min(crate::spp::wire::MAX_PROBE_TRAIN);
        self.filler.poll(now, rate, n, confirming)
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next run: a stall check while
    /// data is in flight, the end of a drain, a lost filler train, the next train.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut t = self
            .filler
            .poll_timeout(self.srtt(), self.filler_base_rate());
        let mut take = |x: Time| t = Some(t.map_or(x, |y: Time| y.min(x)));
        if let Some(s) = self.stall_deadline() {
            take(s);
        }
        if self.phase == Phase::Drain {
            take(self.drain_until);
        }
        t
    }

    fn stall_after(&self) -> Duration {
        self.srtt()
            .saturating_mul(self.config.stall_rtts)
            .max(self.packet_time().saturating_mul(4))
            .max(self.config.stall_min)
    }

    fn stall_deadline(&self) -> Option<Time> {
        if self.in_flight_packets == 0 {
            return None;
        }
        let from = match (self.last_ack_at, self.first_unacked_send) {
            (Some(a), Some(s)) => a.max(s),
            (a, s) => a.or(s)?,
        };
        Some(from.saturating_add(self.stall_after()))
    }

    /// Timers: a stalled path halves the estimate (once per stall period), a drain ends, a lost
    /// filler train is given up.
    pub fn handle_timeout(&mut self, now: Time) {
        if let Some(deadline) = self.stall_deadline()
            && now >= deadline
        {
            self.stats.stalls += 1;
            let before = self.bottleneck_bytes_per_s();
            if self.calibrated && before > 0.0 {
                // The first stall of an outage keeps the rate it started from.
                self.collapsed_from.get_or_insert(before);
            }
            let halved = 0.5 * before;
            self.bw.reset(now, halved);
            // The path answers nothing: a full train would go into the same silence (and
            // at a collapsed estimate, every `filler_outage_interval`); pings find it.
            self.filler.enter_silence(now);
            // A fall a train showed is the outage's now; a rise still awaits its train.
            if matches!(self.pending, Pending::Fall(_)) {
                self.pending = Pending::Nothing;
            }
            // Time the next halving from now; regrow by STARTUP once the path answers.
            self.last_ack_at = Some(now);
            self.first_unacked_send = None;
            if self.calibrated {
                self.phase = Phase::Startup;
                self.full_bw = 0.0;
                self.full_bw_rounds = 0;
            }
        }
        let interval = self.train_interval();
        let drain = self.filler_base_rate();
        self.filler
            .handle_timeout(now, self.srtt(), drain, interval);
        self.advance(now);
    }
}
