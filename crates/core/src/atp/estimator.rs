//! ATP's bandwidth estimator, Figure 3 of `papers/000_97f7680fd99dd928.txt` (§4.2).
//!
//! ```text
//! bandwidth_estimate(used, backlog) {
//!   used = maximum(used, filter(used));
//!   if (backlog > MAXIMUM_BACKLOG) { curbw = used; staleness = 0;
//!                                    return (used, used - backlog*MTU); }
//!   else if (used < curbw) { int probe = PROBE_SIZE; staleness++;
//!                            probe *= staleness / polldelay; curbw = used;
//!                            return (curbw, curbw + probe); }
//!   else { staleness = 0; return (curbw, curbw + PROBE_SIZE); }
//! }
//! ```
//! "Every second, ATP invokes the bandwidth estimator … The bandwidth used over the preceding
//! second is averaged with the values for the four preceding seconds … MAXIMUM BACKLOG is set
//! high enough to avoid transient backlogs (10 in our implementation), and PROBE SIZE is half
//! the minimum of the send queue capacity and the current estimate."
//!
//! The tuple is `(curbw, available)`: "the internal estimate and the estimate advertised to the
//! application". Where the paper is silent or inconsistent (see `docs/design/nai.md`):
//! * the third branch sets `curbw = used` — as printed, `curbw` could never rise;
//! * the third branch ("usage rose") needs `used > curbw + MTU`; usage within one datagram of
//!   `curbw` counts as unchanged and takes the staleness branch (see `on_tick`);
//! * `staleness / polldelay` is integer division, as printed; a poll delay of 0 acts as 1;
//! * "current estimate" in PROBE_SIZE is `curbw` before this update;
//! * `available` is clamped at 0 in the backlog branch;
//! * a packet-pair measurement replaces both values (§4.2, §4.3 "the estimate jumps sharply
//!   due to a packet-pair measurement").

use crate::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Estimator constants (§4.2, Figure 3).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct EstimatorConfig {
    /// How often the estimator runs: "every second".
    pub tick: Duration,
    /// Averaging filter window, in ticks: "a window size of 5".
    pub window: usize,
    /// MAXIMUM_BACKLOG, in packets: "10 in our implementation".
    pub max_backlog_packets: u32,
    /// Interface send-queue capacity, in packets: "the maximum length allowed is 50 in
    /// FreeBSD".
    pub send_queue_capacity_packets: u32,
    /// MTU in bytes, used for `backlog * MTU` and the queue capacity in bytes.
    pub mtu_bytes: u32,
    /// `polldelay`, in seconds (§4.4 uses 1 and 3).
    pub poll_delay_s: u32,
    /// Figure 3 as printed, or with `available` bounded by what was seen deliverable.
    pub mode: EstimatorMode,
    /// How many ticks of measured usage the bound remembers (with [`EstimatorMode::Bounded`]).
    pub peak_window_ticks: usize,
    /// Datagrams per probe train with [`EstimatorMode::Bounded`] (2 = a packet pair; at most
    /// [`MAX_PROBE_TRAIN`](crate::spp::wire::MAX_PROBE_TRAIN)). [`EstimatorMode::Paper`] always
    /// sends pairs.
    pub train_packets: u8,
    /// Ticks a capacity sample (train, pair or drain rate) stays the floor of `available`
    /// with [`EstimatorMode::Bounded`]: the filter's window, the paper's horizon for "recent".
    pub capacity_fresh_ticks: u32,
    /// The rate control's constants (with [`EstimatorMode::Control`]).
    pub control: super::control::ControlConfig,
}

/// Which estimator runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum EstimatorMode {
    /// Figure 3 as printed (for the paper's reproductions). Under a light load its stale
    /// branch grows `available` by PROBE_SIZE every `polldelay` seconds without limit: with a
    /// 10 kB/s application on a 100 kB/s link the advertised estimate passes the link's rate
    /// after a few minutes and keeps climbing.
    Paper,
    /// Figure 3, plus four things it lacks, each from §4.2's own inputs (usage,
    /// the interface send queue, packet dispersion):
    ///
    /// 1. **Bounded above**: `available` is at most one PROBE_SIZE above the highest rate
    ///    observed deliverable — the last capacity sample or the largest one-tick usage within
    ///    `peak_window_ticks`. Probing above what was seen still happens, one step at a time,
    ///    but an idle application no longer advertises bandwidth nobody has seen.
    /// 2. **Re-measured after a collapse**: while `available` is below half of that rate (after
    ///    an outage), the sender measures the path with a packet train every tick
    ///    ([`BandwidthEstimator::wants_packet_pair`]) instead of regrowing by PROBE_SIZE per
    ///    second.
    /// 3. **Probed on demand**: when admission refuses a message for bandwidth or the
    ///    application has more queued than one tick at the estimate sends, a short packet
    ///    train measures the capacity at once ([`EstimatorClock::request_train`]); the sample
    ///    is the floor of `available` for `capacity_fresh_ticks` ticks — regrowth to the
    ///    measured capacity in one round trip, not PROBE_SIZE per tick. Packet-pair and
    ///    packet-train dispersion measure the bottleneck's capacity (Keshav, "A
    ///    control-theoretic approach to flow control", SIGCOMM 1991; Dovrolis, Ramanathan and
    ///    Moore, "What do packet dispersion techniques measure?", INFOCOM 2001, and
    ///    "Packet-dispersion techniques and a capacity-estimation methodology", IEEE/ACM ToN
    ///    2004); under §4.2's assumption that the wireless hop limits the path and carries
    ///    mostly ATP's traffic, capacity is what ATP can use.
    /// 4. **Falls within a tick**: when the interface queue grows past MAXIMUM_BACKLOG while
    ///    the link has been busy, the bytes it sent over that busy span are its capacity (a
    ///    train made of ATP's own queued datagrams), and Figure 3's backlog branch is applied
    ///    at once ([`EstimatorClock::handle_interface_bytes`]), instead of at the next tick
    ///    and through a five-second filter that still remembers the faster past.
    ///
    /// The default before [`EstimatorMode::Control`]; kept for comparison.
    Bounded,
    /// The default: not Figure 3 but a delay-bounded rate control measured on every
    /// acknowledgement ([`super::control`]): it keeps the bottleneck queue near empty while
    /// using the link, follows a fall within an RTT or two, finds a rise with filler trains
    /// when the application is light, and gives NAI no estimate until there is evidence.
    #[default]
    Control,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        EstimatorConfig {
            tick: Duration::from_secs(1),
            window: 5,
            max_backlog_packets: 10,
            send_queue_capacity_packets: 50,
            mtu_bytes: 1500,
            poll_delay_s: 1,
            mode: EstimatorMode::Control,
            peak_window_ticks: 60,
            train_packets: 4,
            capacity_fresh_ticks: 5,
            control: super::control::ControlConfig::default(),
        }
    }
}

/// The estimator's output.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// `curbw`: the internal estimate.
    pub curbw_bytes_per_s: f64,
    /// `available`: the estimate advertised to the application.
    pub available_bytes_per_s: f64,
}

/// Which branch of Figure 3 produced the last estimate (for traces and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Branch {
    /// No estimate yet.
    Initial,
    /// Send-queue backlog above MAXIMUM_BACKLOG: a genuine decrease.
    Backlog,
    /// Usage fell below `curbw`: stale, probe grows with staleness.
    Probe,
    /// Usage reached `curbw`: probe by PROBE_SIZE.
    Steady,
    /// A packet-pair measurement.
    PacketPair,
}

/// Figure 3's state: `curbw`, `staleness`, and the filter's history.
#[derive(Clone, Debug)]
pub struct BandwidthEstimator {
    config: EstimatorConfig,
    history: VecDeque<f64>,
    curbw: f64,
    staleness: u32,
    estimate: Estimate,
    branch: Branch,
    /// The last packet-pair measurement, bytes/s.
    packet_pair: f64,
    /// Raw per-tick usage over the last `peak_window_ticks` ticks.
    recent_used: VecDeque<f64>,
    /// A drain-rate sample taken since the last tick (with [`EstimatorMode::Bounded`]): it
    /// bounds the next tick's usage, which still averages the time before the sample.
    fresh_capacity: Option<f64>,
    /// The latest capacity sample and the ticks it stays the floor of `available` (with
    /// [`EstimatorMode::Bounded`]).
    capacity: Option<(f64, u32)>,
}

impl BandwidthEstimator {
    /// An estimator whose estimate is zero.
    pub fn new(config: EstimatorConfig) -> BandwidthEstimator {
        BandwidthEstimator {
            config,
            history: VecDeque::new(),
            curbw: 0.0,
            staleness: 0,
            estimate: Estimate::default(),
            branch: Branch::Initial,
            packet_pair: 0.0,
            recent_used: VecDeque::new(),
            fresh_capacity: None,
            capacity: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EstimatorConfig {
        &self.config
    }

    /// One run of Figure 3: `used_bytes` went through the interface during the last tick, and
    /// the interface send queue holds `backlog_packets`.
    pub fn on_tick(&mut self, used_bytes: u64, backlog_packets: u32) -> Estimate {
        let secs = self.config.tick.as_secs_f64();
        let raw = if secs > 0.0 {
            used_bytes as f64 / secs
        } else {
            0.0
        };
        self.history.push_back(raw);
        while self.history.len() > self.config.window.max(1) {
            self.history.pop_front();
        }
        let mean = self.history.iter().sum::<f64>() / self.history.len() as f64;
        let mut used = raw.max(mean);
        if let Some(c) = self.fresh_capacity
            && self.config.mode == EstimatorMode::Bounded
        {
            used = used.min(c);
        }
        let mtu = f64::from(self.config.mtu_bytes);
        let queue_bytes = f64::from(self.config.send_queue_capacity_packets) * mtu;
        let probe_size = 0.5 * queue_bytes.min(self.curbw);
        let (curbw, available, branch) = if backlog_packets > self.config.max_backlog_packets {
            self.staleness = 0;
            let available = (used - f64::from(backlog_packets) * mtu).max(0.0);
            (used, available, Branch::Backlog)
        } else if used <= self.curbw + mtu {
            // "Staleness measures the number of seconds since the last point at which the
            // estimate changed" (§4.2): usage within one datagram of `curbw` is no change, so
            // the estimate grows stale and the probe grows. (As printed, `used < curbw`, a
            // perfectly steady light load — exact ties, common in a deterministic simulator —
            // resets staleness every second and the estimate sticks at 1.5x the usage.)
            self.staleness = self.staleness.saturating_add(1);
            let steps = self.staleness / self.config.poll_delay_s.max(1);
            (used, used + probe_size * f64::from(steps), Branch::Probe)
        } else {
            self.staleness = 0;
            (used, used + probe_size, Branch::Steady)
        };
        self.recent_used.push_back(raw);
        while self.recent_used.len() > self.config.peak_window_ticks.max(1) {
            self.recent_used.pop_front();
        }
        let available = match self.config.mode {
            // The control does not run Figure 3 (a clock built for it never ticks).
            EstimatorMode::Paper | EstimatorMode::Control => available,
            EstimatorMode::Bounded => {
                let drained = self.fresh_capacity.is_some();
                self.fresh_capacity = None;
                if branch == Branch::Backlog && !drained {
                    // A genuine decrease: an older capacity sample no longer holds.
                    self.capacity = None;
                }
                let seen = self
                    .recent_used
                    .iter()
                    .copied()
                    .fold(self.packet_pair, f64::max)
                    .max(curbw);
                let floor = match self.capacity {
                    Some((c, left)) if left > 0 && branch != Branch::Backlog => {
                        self.capacity = Some((c, left - 1));
                        c
                    }
                    _ => 0.0,
                };
                available.max(floor).min(seen + probe_size.max(mtu))
            }
        };
        self.curbw = curbw;
        self.branch = branch;
        self.estimate = Estimate {
            curbw_bytes_per_s: curbw,
            available_bytes_per_s: available,
        };
        self.estimate
    }

    /// A packet-pair (or packet-train) measurement (§4.2): replaces the estimate. With
    /// [`EstimatorMode::Bounded`] it also stays the floor of `available` for
    /// `capacity_fresh_ticks` ticks.
    pub fn on_packet_pair(&mut self, rate_bytes_per_s: f64) -> Estimate {
        let rate = if rate_bytes_per_s.is_finite() && rate_bytes_per_s > 0.0 {
            rate_bytes_per_s
        } else {
            0.0
        };
        self.curbw = rate;
        self.packet_pair = rate;
        self.staleness = 0;
        self.branch = Branch::PacketPair;
        if self.config.mode == EstimatorMode::Bounded {
            self.capacity = Some((rate, self.config.capacity_fresh_ticks));
        }
        self.estimate = Estimate {
            curbw_bytes_per_s: rate,
            available_bytes_per_s: rate,
        };
        self.estimate
    }

    /// A drain-rate sample from within a tick (with [`EstimatorMode::Bounded`]): the
    /// interface queue stayed non-empty while it sent `rate_bytes_per_s`, so that is the
    /// link's capacity, and it now holds `backlog_packets`, more than MAXIMUM_BACKLOG — a
    /// genuine decrease (§4.2) seen as it happens rather than at the next tick. Figure 3's
    /// backlog branch applies at once: `curbw` is the capacity, `available` is what is left
    /// after draining the backlog within one tick; the filter forgets the faster past.
    pub fn on_drain_sample(&mut self, rate_bytes_per_s: f64, backlog_packets: u32) -> Estimate {
        let rate = if rate_bytes_per_s.is_finite() && rate_bytes_per_s > 0.0 {
            rate_bytes_per_s
        } else {
            0.0
        };
        let secs = self.config.tick.as_secs_f64().max(1e-3);
        let backlog = f64::from(backlog_packets) * f64::from(self.config.mtu_bytes);
        let available = (rate - backlog / secs).max(0.0);
        self.curbw = rate;
        self.staleness = 0;
        self.history.clear();
        self.history.push_back(rate);
        self.fresh_capacity = Some(rate);
        self.capacity = Some((rate, self.config.capacity_fresh_ticks));
        self.packet_pair = rate;
        self.branch = Branch::Backlog;
        self.estimate = Estimate {
            curbw_bytes_per_s: rate,
            available_bytes_per_s: available,
        };
        self.estimate
    }

    /// Whether the sender should measure the path with a packet pair now: with
    /// [`EstimatorMode::Bounded`], while `available` is below half of the highest rate seen
    /// deliverable within the window (the estimate collapsed, e.g. during or after an outage).
    pub fn wants_packet_pair(&self) -> bool {
        if self.config.mode != EstimatorMode::Bounded {
            return false;
        }
        let seen = self
            .recent_used
            .iter()
            .copied()
            .fold(self.packet_pair, f64::max);
        seen > 0.0 && self.estimate.available_bytes_per_s < 0.5 * seen
    }

    /// The latest estimate.
    pub fn estimate(&self) -> Estimate {
        self.estimate
    }

    /// The branch that produced it.
    pub fn branch(&self) -> Branch {
        self.branch
    }

    /// Seconds since the estimate last changed or genuinely decreased.
    pub fn staleness(&self) -> u32 {
        self.staleness
    }
}

/// Runs the estimator "every second" (§4.2) from cumulative interface counters, and the
/// packet pairs that seed and re-seed it: the one clock of ATP's estimation, used by the SPP
/// sender ([`super::AtpSender`]) and by ATP over one TCP connection alike. It polls the
/// receiver with a packet pair (SPP PROBE datagrams, answered by an
/// [`SppReceiver`](crate::spp::SppReceiver)'s REPORT) at start, whenever the estimate is zero,
/// and — with [`EstimatorMode::Bounded`] — whenever the estimator asks for one
/// ([`BandwidthEstimator::wants_packet_pair`]).
///
/// Call pattern: `handle_interface` whenever fresh counters are available (without them the
/// clock counts the transport's own datagrams, fed with `handle_own_bytes`) — with
/// [`EstimatorMode::Bounded`] it may return a new estimate between ticks; `request_train`
/// when the application wants more than the estimate gives; at
/// `poll_timeout()`, `handle_timeout(now)` returns the new estimate to hand to NAI; send what
/// `poll_transmit` returns as datagrams to the receiver; feed REPORTs to `handle_report`, which
/// may return a new estimate too.
#[derive(Clone, Debug)]
pub struct EstimatorClock {
    estimator: BandwidthEstimator,
    next_tick: Time,
    iface_total: Option<u64>,
    iface_at_tick: Option<u64>,
    own_total: u64,
    own_at_tick: u64,
    queue_packets: u32,
    probe_id: u32,
    probes_due: u8,
    /// Datagrams in the current train.
    train_len: u8,
    probe_bytes: u16,
    packet_pairs: u64,
    /// A train was started since the last tick (demand-driven trains: one per tick).
    trained_this_tick: bool,
    /// Observations (time, interface total) since the send queue was last seen empty: the
    /// link was busy all along, so bytes over time between two of them is its capacity.
    /// Bounded: older entries than one backlog's worth of bytes are dropped.
    busy: VecDeque<(Time, u64)>,
    /// The queue length and interface total at the last drain-rate reaction in this busy
    /// period.
    reacted: Option<(u32, u64)>,
}

impl EstimatorClock {
    /// A clock whose first tick is one period after `now`. With `start_with_pair`, a packet
    /// pair of `probe_bytes`-byte datagrams is due at once (the estimate starts at zero).
    pub fn new(
        config: EstimatorConfig,
        now: Time,
        probe_bytes: u16,
        start_with_pair: bool,
    ) -> EstimatorClock {
        let next_tick = now + config.tick.max(Duration::from_millis(1));
        let mut c = EstimatorClock {
            estimator: BandwidthEstimator::new(config),
            next_tick,
            iface_total: None,
            iface_at_tick: None,
            own_total: 0,
            own_at_tick: 0,
            queue_packets: 0,
            probe_id: 0,
            probes_due: 0,
            train_len: 2,
            probe_bytes,
            packet_pairs: 0,
            trained_this_tick: false,
            busy: VecDeque::new(),
            reacted: None,
        };
        if start_with_pair {
            c.start_packet_pair();
        }
        c
    }

    fn start_packet_pair(&mut self) {
        let config = self.estimator.config();
        self.train_len = match config.mode {
            EstimatorMode::Paper | EstimatorMode::Control => 2,
            EstimatorMode::Bounded => config
                .train_packets
                .clamp(2, crate::spp::wire::MAX_PROBE_TRAIN),
        };
        self.probe_id = self.probe_id.wrapping_add(1);
        self.probes_due = self.train_len;
        self.packet_pairs += 1;
        self.trained_this_tick = true;
    }

    /// The application wants more than the estimate gives (a message was refused for
    /// bandwidth, or more is queued than one tick at the estimate sends): with
    /// [`EstimatorMode::Bounded`], measure the path with a packet train now, at most once per
    /// tick and not while one is being sent. Figure 3 learns of spare capacity only through
    /// usage, which a refused message never creates; the train's dispersion is a capacity
    /// sample in one round trip (packet-train dispersion: Keshav, SIGCOMM 1991; Dovrolis,
    /// Ramanathan and Moore, INFOCOM 2001 and IEEE/ACM ToN 2004 — a train averages over more
    /// of a discretely scheduled link than a pair), and the estimate regrows to it at once
    /// instead of by PROBE_SIZE per tick. Returns whether a train was started.
    pub fn request_train(&mut self) -> bool {
        if self.estimator.config().mode != EstimatorMode::Bounded
            || self.trained_this_tick
            || self.probes_due > 0
        {
            return false;
        }
        self.start_packet_pair();
        true
    }

    /// Packet pairs and trains started so far.
    pub fn packet_pairs(&self) -> u64 {
        self.packet_pairs
    }

    fn probe_datagram(&self, index: u8) -> crate::spp::SppDatagram {
        let repr = crate::spp::SppRepr::Probe(crate::spp::wire::ProbeHeader {
            probe_id: self.probe_id,
            index,
        });
        let pad = usize::from(self.probe_bytes).saturating_sub(repr.buffer_len());
        crate::spp::SppDatagram {
            repr,
            payload_len: crate::convert::usize_u32_sat(pad),
        }
    }

    /// The next packet-pair or train datagram to send, if one is due.
    pub fn poll_transmit(&mut self) -> Option<crate::spp::SppDatagram> {
        if self.probes_due == 0 {
            return None;
        }
        let d = self.probe_datagram(self.train_len.saturating_sub(self.probes_due));
        self.probes_due -= 1;
        Some(d)
    }

    /// A packet-pair or train measurement came back; returns the new estimate if it answers
    /// the current probe and spans the whole of it (a train with a lost datagram is not
    /// used: the next tick may probe again).
    pub fn handle_report(&mut self, report: &crate::spp::wire::ProbeReport) -> Option<Estimate> {
        if report.probe_id != self.probe_id || report.gap_ns == 0 {
            return None;
        }
        let size = self.probe_datagram(0).wire_len() as u64;
        let whole = u64::from(self.train_len.saturating_sub(1)) * size;
        if u64::from(report.bytes) < whole {
            return None;
        }
        let rate = f64::from(report.bytes) * 1e9 / report.gap_ns as f64;
        Some(self.estimator.on_packet_pair(rate))
    }

    /// Cumulative bytes sent plus received by the interface ("polling the network card for
    /// the amount of data sent and received", §4.2), observed at `now` together with the
    /// queue length last given to [`handle_queue_len`](Self::handle_queue_len).
    ///
    /// With [`EstimatorMode::Bounded`] this may return a new estimate between ticks: when the
    /// interface queue has stayed non-empty since an earlier observation (so the link was busy
    /// throughout and the bytes it sent over that span are its capacity) and now holds more
    /// than MAXIMUM_BACKLOG packets, the rate ATP sends at exceeds the link's: the backlog
    /// branch of Figure 3 is applied at once with that capacity
    /// ([`BandwidthEstimator::on_drain_sample`]), instead of at the next tick after up to a
    /// second more of queueing (which delays every later message, high priority included,
    /// behind low-priority datagrams: §4.2's priority inversion). The capacity is measured
    /// over the last MAXIMUM_BACKLOG datagrams' worth of bytes the link sent; it reacts again
    /// in the same busy period once as many more were sent if the queue has not shrunk.
    pub fn handle_interface_bytes(&mut self, now: Time, total_bytes: u64) -> Option<Estimate> {
        self.iface_total = Some(total_bytes);
        self.iface_at_tick.get_or_insert(total_bytes);
        if self.estimator.config().mode != EstimatorMode::Bounded {
            return None;
        }
        let queue = self.queue_packets;
        if queue == 0 {
            self.busy.clear();
            self.reacted = None;
            return None;
        }
        let config = self.estimator.config();
        let threshold = config.max_backlog_packets;
        // The drain rate is measured over the last MAXIMUM_BACKLOG datagrams' worth of bytes:
        // a train of ATP's own queued datagrams, recent enough that a rate change within the
        // busy period shows.
        let span_bytes = u64::from(threshold.max(2)) * u64::from(config.mtu_bytes);
        self.busy.push_back((now, total_bytes));
        while self
            .busy
            .get(1)
            .is_some_and(|&(_, b)| total_bytes.saturating_sub(b) >= span_bytes)
        {
            self.busy.pop_front();
        }
        if queue <= threshold {
            return None;
        }
        // Once reacted, again only after another backlog's worth was sent and the queue has
        // not shrunk since.
        if let Some((q, at)) = self.reacted
            && (queue < q || total_bytes.saturating_sub(at) < span_bytes)
        {
            return None;
        }
        let &(since, at) = self.busy.front()?;
        let span = now.saturating_since(since).as_secs_f64();
        let sent = total_bytes.saturating_sub(at);
        if span <= 0.0 || sent < span_bytes {
            return None;
        }
        self.reacted = Some((queue, total_bytes));
        Some(self.estimator.on_drain_sample(sent as f64 / span, queue))
    }

    /// The interface send-queue length, in packets.
    pub fn handle_queue_len(&mut self, packets: u32) {
        self.queue_packets = packets;
    }

    /// The queue length and the cumulative counter observed together at `now` (see
    /// [`handle_interface_bytes`](Self::handle_interface_bytes)).
    pub fn handle_interface(
        &mut self,
        now: Time,
        total_bytes: u64,
        queue_packets: u32,
    ) -> Option<Estimate> {
        self.handle_queue_len(queue_packets);
        self.handle_interface_bytes(now, total_bytes)
    }

    /// The transport sent or received a datagram of `bytes`: counted as the interface's use
    /// while no interface counters have been given.
    pub fn handle_own_bytes(&mut self, bytes: u64) {
        self.own_total = self.own_total.saturating_add(bytes);
    }

    /// When the next tick is due.
    pub fn poll_timeout(&self) -> Time {
        self.next_tick
    }

    /// Runs the ticks due by `now` (at most one estimate: missed ticks are not replayed).
    pub fn handle_timeout(&mut self, now: Time) -> Option<Estimate> {
        if now < self.next_tick {
            return None;
        }
        let tick = self.estimator.config().tick.max(Duration::from_millis(1));
        while self.next_tick <= now {
            self.next_tick += tick;
        }
        let used = match (self.iface_total, self.iface_at_tick) {
            (Some(total), Some(prev)) => {
                self.iface_at_tick = Some(total);
                total.saturating_sub(prev)
            }
            _ => {
                let used = self.own_total - self.own_at_tick;
                self.own_at_tick = self.own_total;
                used
            }
        };
        let e = self.estimator.on_tick(used, self.queue_packets);
        self.trained_this_tick = false;
        if e.available_bytes_per_s <= 0.0 || self.estimator.wants_packet_pair() {
            self.start_packet_pair();
        }
        Some(e)
    }

    /// The estimator.
    pub fn estimator(&self) -> &BandwidthEstimator {
        &self.estimator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figure 3 as printed (these tests check the paper's algorithm).
    fn est(poll_delay_s: u32) -> BandwidthEstimator {
        BandwidthEstimator::new(EstimatorConfig {
            poll_delay_s,
            mode: EstimatorMode::Paper,
            ..EstimatorConfig::default()
        })
    }

    #[test]
    fn test_initial_zero_usage_stays_zero() {
        let mut e = est(1);
        let out = e.on_tick(0, 0);
        assert_eq!(out, Estimate::default());
        assert_eq!(e.branch(), Branch::Probe);
    }

    #[test]
    fn test_steady_probes_by_half_min_of_queue_and_estimate() {
        let mut e = est(1);
        e.on_packet_pair(40_000.0);
        // used 40 kB >= curbw: probe = 0.5 * min(75 kB, 40 kB) = 20 kB.
        let out = e.on_tick(40_000, 0);
        assert_eq!(out.curbw_bytes_per_s, 40_000.0);
        assert_eq!(out.available_bytes_per_s, 60_000.0);
        // Saturated: usage follows the pace, the probe is capped at half the queue (37.5 kB).
        let out = e.on_tick(200_000, 0);
        assert_eq!(out.available_bytes_per_s, 200_000.0 + 20_000.0);
        let out = e.on_tick(300_000, 0);
        assert_eq!(out.available_bytes_per_s, 300_000.0 + 37_500.0);
    }

    #[test]
    fn test_backlog_is_a_genuine_decrease() {
        let mut e = est(1);
        e.on_packet_pair(100_000.0);
        let out = e.on_tick(100_000, 20);
        assert_eq!(e.branch(), Branch::Backlog);
        assert_eq!(out.curbw_bytes_per_s, 100_000.0);
        assert_eq!(out.available_bytes_per_s, 100_000.0 - 20.0 * 1500.0);
        assert_eq!(e.staleness(), 0);
        // At the threshold itself (10) the backlog is transient.
        e.on_tick(100_000, 10);
        assert_ne!(e.branch(), Branch::Backlog);
    }

    #[test]
    fn test_probe_grows_with_staleness_over_poll_delay() {
        let mut e = est(3);
        e.on_packet_pair(200_000.0);
        // Usage drops to 50 kB/s: the filter (max of raw and 5-sample mean) keeps it at 50k here
        // because the history holds only this sample.
        let out = e.on_tick(50_000, 0);
        assert_eq!(e.branch(), Branch::Probe);
        assert_eq!(e.staleness(), 1);
        assert_eq!(out.available_bytes_per_s, 50_000.0, "1/3 = 0 probes");
        e.on_tick(40_000, 0); // mean 45k < curbw 50k: staleness 2
        let out = e.on_tick(30_000, 0); // mean 40k < 45k: staleness 3 -> one probe
        assert_eq!(e.staleness(), 3);
        let probe = 0.5 * 45_000.0;
        assert_eq!(out.curbw_bytes_per_s, 40_000.0);
        assert_eq!(out.available_bytes_per_s, 40_000.0 + probe);
    }

    #[test]
    fn test_filter_averages_five_ticks() {
        let mut e = est(1);
        for _ in 0..5 {
            e.on_tick(100_000, 0);
        }
        // One bad second: max(raw 0, mean of (4 * 100k + 0) / 5) = 80k.
        let out = e.on_tick(0, 0);
        assert_eq!(out.curbw_bytes_per_s, 80_000.0);
    }

    #[test]
    fn test_clock_ticks_on_interface_byte_deltas() {
        let paper = EstimatorConfig {
            mode: EstimatorMode::Paper,
            ..EstimatorConfig::default()
        };
        let mut c = EstimatorClock::new(paper, Time::ZERO, 1472, true);
        assert!(c.poll_transmit().is_some() && c.poll_transmit().is_some());
        assert!(c.poll_transmit().is_none());
        let report = crate::spp::wire::ProbeReport {
            probe_id: 1,
            gap_ns: 3_000_000,
            bytes: 1500,
        };
        let e = c.handle_report(&report).unwrap();
        assert_eq!(e.available_bytes_per_s, 500_000.0);
        let stale = crate::spp::wire::ProbeReport {
            probe_id: 9,
            ..report
        };
        assert_eq!(c.handle_report(&stale), None);
        c.handle_interface(Time::ZERO, 1_000, 0);
        assert_eq!(c.handle_timeout(Time::from_millis(500)), None);
        c.handle_interface(Time::from_millis(900), 51_000, 0);
        let e = c.handle_timeout(Time::from_secs(1)).unwrap();
        assert_eq!(e.curbw_bytes_per_s, 50_000.0);
        assert_eq!(c.poll_timeout(), Time::from_secs(2));
        // Two periods late: one estimate, the next tick realigned.
        let e = c.handle_timeout(Time::from_millis(3_500)).unwrap();
        assert_eq!(e.curbw_bytes_per_s, 25_000.0, "max(0, mean of 50k and 0)");
        assert_eq!(c.poll_timeout(), Time::from_secs(4));
    }

    #[test]
    fn test_steady_light_load_grows_stale_and_probe_grows() {
        let mut e = est(1);
        e.on_packet_pair(200_000.0);
        let mut last = 0.0;
        for i in 0..6 {
            let out = e.on_tick(8_000, 0);
            if i >= 2 {
                assert!(out.available_bytes_per_s > last, "tick {i}: {out:?}");
            }
            last = out.available_bytes_per_s;
        }
        assert_eq!(e.branch(), Branch::Probe);
        assert_eq!(e.staleness(), 6);
        // Usage rising by more than a datagram resets staleness.
        e.on_tick(20_000, 0);
        assert_eq!((e.branch(), e.staleness()), (Branch::Steady, 0));
    }
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    fn light_load(mode: EstimatorMode) -> f64 {
        let mut e = BandwidthEstimator::new(EstimatorConfig {
            mode,
            ..EstimatorConfig::default()
        });
        e.on_packet_pair(100_000.0);
        let mut out = Estimate::default();
        // Ten minutes of a 10 kB/s application on a 100 kB/s link.
        for _ in 0..600 {
            out = e.on_tick(10_000, 0);
        }
        out.available_bytes_per_s
    }

    /// Regression: under a light load `available` climbed without bound (6.5x a trace's
    /// maximum was observed); the default bounds it by what was seen deliverable.
    #[test]
    fn test_light_load_does_not_run_away_upward() {
        let paper = light_load(EstimatorMode::Paper);
        assert!(
            paper > 1_000_000.0,
            "Figure 3 as printed runs away: {paper}"
        );
        let bounded = light_load(EstimatorMode::Bounded);
        // The packet pair saw 100 kB/s: at most one probe step (half the 10 kB/s estimate,
        // at least one MTU) above it.
        assert!(bounded <= 100_000.0 + 5_000.0 + 1.0, "{bounded}");
        assert!(
            bounded >= 100_000.0,
            "still advertises what was measured: {bounded}"
        );
    }
}

#[cfg(test)]
mod recovery_tests {
    use super::*;

    /// After an outage the bounded estimator asks for a packet pair (and the pair restores the
    /// estimate at once); the paper's never does and regrows step by step.
    #[test]
    fn test_collapse_asks_for_a_packet_pair_and_the_pair_restores_the_estimate() {
        for mode in [EstimatorMode::Paper, EstimatorMode::Bounded] {
            let mut e = BandwidthEstimator::new(EstimatorConfig {
                mode,
                ..EstimatorConfig::default()
            });
            e.on_packet_pair(100_000.0);
            for _ in 0..10 {
                e.on_tick(100_000, 0);
            }
            assert!(!e.wants_packet_pair(), "{mode:?}: estimate healthy");
            // A ten-second outage: nothing gets through, the interface queue backs up.
            for _ in 0..10 {
                e.on_tick(0, 40);
            }
            assert_eq!(
                e.wants_packet_pair(),
                mode == EstimatorMode::Bounded,
                "{mode:?}"
            );
        }
        let mut e = BandwidthEstimator::new(EstimatorConfig {
            mode: EstimatorMode::Bounded,
            ..EstimatorConfig::default()
        });
        e.on_packet_pair(100_000.0);
        for _ in 0..10 {
            e.on_tick(0, 40);
        }
        let restored = e.on_packet_pair(95_000.0);
        assert_eq!(restored.available_bytes_per_s, 95_000.0);
        assert!(!e.wants_packet_pair());
    }
}

#[cfg(test)]
mod train_tests {
    use super::*;
    use crate::spp::{SppConfig, SppReceiver, SppRepr};

    fn clock(mode: EstimatorMode) -> EstimatorClock {
        let config = EstimatorConfig {
            mode,
            ..EstimatorConfig::default()
        };
        EstimatorClock::new(config, Time::ZERO, 1472, false)
    }

    /// A demand-driven train: only with the default estimator, one per tick, measured by the
    /// receiver over the whole train (one coalesced report), and used only if whole.
    #[test]
    fn test_train_on_demand_once_per_tick_measured_end_to_end() {
        assert!(!clock(EstimatorMode::Paper).request_train());
        let mut c = clock(EstimatorMode::Bounded);
        assert!(c.request_train());
        assert!(!c.request_train(), "one per tick");
        let mut rx = SppReceiver::new(SppConfig::default());
        // Four datagrams leave a 100 kB/s bottleneck 14.72 ms apart.
        let mut n = 0u64;
        while let Some(d) = c.poll_transmit() {
            let at = Time::from_micros(14_720 * n);
            rx.handle_datagram(at, &d.repr, d.payload_len);
            n += 1;
        }
        assert_eq!(n, 4);
        let reports: Vec<SppRepr> = std::iter::from_fn(|| rx.poll_transmit(Time::ZERO))
            .map(|d| d.repr)
            .collect();
        let [SppRepr::Report(r)] = reports.as_slice() else {
            panic!("one coalesced report: {reports:?}");
        };
        assert_eq!((r.bytes, r.gap_ns), (3 * 1472, 3 * 14_720_000));
        let partial = crate::spp::wire::ProbeReport {
            bytes: 1472,
            gap_ns: 14_720_000,
            ..*r
        };
        assert_eq!(
            c.handle_report(&partial),
            None,
            "a partial train is not used"
        );
        let e = c.handle_report(r).unwrap();
        assert!((e.available_bytes_per_s - 100_000.0).abs() < 1.0, "{e:?}");
        c.handle_timeout(Time::from_secs(1));
        assert!(c.request_train(), "the next tick allows another");
    }

    /// The default's capacity sample is the floor of `available` for `capacity_fresh_ticks`
    /// ticks, then Figure 3's usage-based value applies again.
    #[test]
    fn test_capacity_sample_is_a_floor_while_fresh() {
        let mut e = BandwidthEstimator::new(EstimatorConfig {
            mode: EstimatorMode::Bounded,
            ..EstimatorConfig::default()
        });
        e.on_packet_pair(100_000.0);
        for tick in 0..5 {
            let out = e.on_tick(10_000, 0);
            assert!(
                out.available_bytes_per_s >= 100_000.0,
                "tick {tick}: {out:?}"
            );
        }
        let out = e.on_tick(10_000, 0);
        assert!(out.available_bytes_per_s < 100_000.0, "{out:?}");
    }

    /// A drain sample (the queue grew past MAXIMUM_BACKLOG on a busy link) applies the
    /// backlog branch at once; the paper's estimator waits for its tick.
    #[test]
    fn test_growing_queue_lowers_the_estimate_between_ticks() {
        for mode in [EstimatorMode::Paper, EstimatorMode::Bounded] {
            let mut c = clock(mode);
            c.handle_report(&crate::spp::wire::ProbeReport {
                probe_id: 0,
                gap_ns: 1,
                bytes: 0,
            });
            // The link sends 50 kB/s while the queue grows by one packet every 20 ms.
            let mut out = None;
            for i in 0..40u32 {
                let now = Time::from_millis(20 * u64::from(i));
                out = out.or(c.handle_interface(now, u64::from(i) * 1_000, 1 + i / 2));
            }
            match mode {
                EstimatorMode::Paper | EstimatorMode::Control => assert_eq!(out, None),
                EstimatorMode::Bounded => {
                    let e = out.expect("reacted before the tick");
                    assert!((e.curbw_bytes_per_s - 50_000.0).abs() < 1.0, "{e:?}");
                    assert!(e.available_bytes_per_s < 50_000.0 - 10.0 * 1500.0, "{e:?}");
                }
            }
        }
    }

    #[test]
    fn test_probe_index_up_to_the_train_bound_parses() {
        let max = crate::spp::wire::MAX_PROBE_TRAIN;
        for (index, ok) in [(1u8, true), (max - 1, true), (max, false)] {
            let repr = SppRepr::Probe(crate::spp::wire::ProbeHeader { probe_id: 3, index });
            let mut buf = vec![0u8; repr.buffer_len()];
            repr.emit(&mut buf).unwrap();
            assert_eq!(SppRepr::parse(&buf).is_ok(), ok, "index {index}");
        }
    }
}
