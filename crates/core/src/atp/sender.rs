//! The ATP sender over SPP: NAI scheduling + SPP reliability + Figure 3 estimation + pacing.

use super::control::RateControl;
use super::estimator::{BandwidthEstimator, Estimate, EstimatorClock, EstimatorMode};
use super::start::StartWindow;
use super::{AtpConfig, Pacing, RateSource};
use crate::nai::payloads::PayloadStore;
use crate::nai::{
    MessageId, NaiError, NaiEvent, Outcome, QueueId, RejectReason, Scheduler, SendOptions,
};
use crate::spp::wire::DataHeader;
use crate::spp::{SppDatagram, SppOutcome, SppRepr, SppSender, SppStats};
use crate::time::Time;
use bytes::Bytes;

/// A token bucket that may go into debt by one datagram: send while tokens >= 0.
#[derive(Clone, Debug)]
struct Pacer {
    rate_bytes_per_s: f64,
    tokens: f64,
    burst_bytes: f64,
    /// Seconds of the rate added to the burst (the engine's timer granularity).
    granularity_s: f64,
    last: Time,
}

impl Pacer {
    fn refill(&mut self, now: Time) {
        let dt = (now - self.last).as_secs_f64();
        let depth = self.burst_bytes + self.granularity_s * self.rate_bytes_per_s;
        self.tokens = (self.tokens + dt * self.rate_bytes_per_s).min(depth);
        self.last = self.last.max(now);
    }

    fn set_rate(&mut self, now: Time, rate_bytes_per_s: f64) {
        self.refill(now);
        self.rate_bytes_per_s = rate_bytes_per_s;
    }

    fn ready(&self) -> bool {
        self.rate_bytes_per_s > 0.0 && self.tokens >= 0.0
    }

    fn next_ready(&self) -> Option<Time> {
        if self.rate_bytes_per_s <= 0.0 {
            None
        } else if self.tokens >= 0.0 {
            Some(self.last)
        } else {
            // A tiny rate gives a wait beyond what a Duration holds: saturate, never panic.
            let wait = std::time::Duration::try_from_secs_f64(-self.tokens / self.rate_bytes_per_s)
                .unwrap_or(std::time::Duration::MAX);
            Some(self.last + wait + std::time::Duration::from_nanos(1))
        }
    }
}

/// An ATP sender over SPP.
///
/// # Calling pattern
///
/// ```text
/// let mut s = AtpSender::new(config, RateSource::Estimated, now);
/// application: s.nai_mut().submit(now, queue, bytes, opts) / cancel / defer / resume / …
/// arrivals:    s.handle_datagram(now, &repr, payload_len)     // ACKs and probe reports
/// interface:   s.handle_queue_len(now, packets)               // send-queue length (§4.2)
///              s.handle_interface_bytes(now, total_bytes)     // cumulative tx+rx counter
/// timers:      s.handle_timeout(now) once poll_timeout() has passed
/// after every call: drain poll_transmit(now) (each datagram to the interface), then
///              poll_event() (NAI events: timer expiry, outcomes, bandwidth notifications)
/// ```
///
/// `poll_transmit` sends, in order: CANCEL notices, packet-pair probes, then paced DATA.
///
/// A sender and a receiver joined by a perfect 10 ms wire, driven the way both engines drive
/// them (the runtime does the same with sockets and wall-clock time):
///
/// ```
/// use adaptnet_core::Time;
/// use adaptnet_core::atp::{AtpConfig, AtpReceiver, AtpSender, RateSource};
/// use adaptnet_core::nai::{NaiEvent, Outcome, QueueId, SendOptions};
/// use adaptnet_core::spp::SppEvent;
/// use std::time::Duration;
///
/// let config = AtpConfig::default();
/// let mut now = Time::ZERO;
/// let mut tx = AtpSender::new(config.clone(), RateSource::External, now);
/// let mut rx = AtpReceiver::new(config.spp.clone());
/// tx.set_external_rate(now, 1_000_000.0); // an oracle rate; the estimator needs a real path
/// let id = tx.submit_bytes(now, QueueId(0), vec![7; 10_000], SendOptions::default()).unwrap();
/// let mut delivered = None;
/// let mut outcome = None;
/// while outcome.is_none() && now < Time::from_secs(5) {
///     // Sender → receiver: each datagram as bytes, header then payload.
///     while let Some(d) = tx.poll_transmit(now) {
///         let payload = match &d.repr {
///             adaptnet_core::spp::SppRepr::Data(h) => tx.payload(h).unwrap().to_vec(),
///             _ => vec![0; d.payload_len as usize],
///         };
///         rx.handle_datagram_payload(now + Duration::from_millis(10), &d.repr, &payload);
///     }
///     while let Some(SppEvent::Delivered(d)) = rx.poll_event() {
///         delivered = d.data;
///     }
///     // Receiver → sender: acknowledgements.
///     while let Some(a) = rx.poll_transmit(now) {
///         tx.handle_datagram(now + Duration::from_millis(20), &a.repr, a.payload_len);
///     }
///     while let Some(ev) = tx.poll_event() {
///         if let NaiEvent::Outcome { id: done, outcome: o } = ev {
///             assert_eq!(done, id);
///             outcome = Some(o);
///         }
///     }
///     // One timer: the earliest of pacing, retransmission and callback timers.
///     now = tx.poll_timeout().map_or(now + Duration::from_millis(1), |t| t.max(now));
///     tx.handle_timeout(now);
/// }
/// assert!(matches!(outcome, Some(Outcome::Delivered { .. })));
/// assert_eq!(delivered, Some(vec![7; 10_000]));
/// ```
#[derive(Debug)]
pub struct AtpSender {
    config: AtpConfig,
    nai: Scheduler,
    spp: SppSender,
    /// The estimator, its tick and its packet pairs (used with [`RateSource::Estimated`]).
    clock: EstimatorClock,
    source: RateSource,
    pacer: Pacer,
    /// The bytes of live messages submitted with [`AtpSender::submit_bytes`], until their
    /// outcome is polled.
    payloads: PayloadStore,
    /// The first flight's window ([`EstimatorMode::Bounded`] only).
    start: StartWindow,
    /// The rate control ([`EstimatorMode::Control`], the default, with
    /// [`RateSource::Estimated`]); Figure 3's clock does not run then.
    control: Option<RateControl>,
    /// The last estimate handed to NAI and when (with the control).
    nai_rate: Option<(Time, f64)>,
}

/// Relative change of the control's estimate that is handed to NAI at once (smaller changes
/// wait for [`NAI_RATE_REFRESH`]): NAI's rate update re-checks every scheduled message.
const NAI_RATE_STEP: f64 = 0.05;
/// Longest a changed estimate waits before NAI gets it.
const NAI_RATE_REFRESH: std::time::Duration = std::time::Duration::from_millis(100);

impl AtpSender {
    /// A sender starting at `now`. With [`RateSource::Estimated`] the estimate starts at zero,
    /// so a packet pair is sent at once (§4.2).
    pub fn new(config: AtpConfig, source: RateSource, now: Time) -> AtpSender {
        let nai = Scheduler::new(config.nai.clone());
        let config_max = config.max_buffered_bytes;
        let spp = SppSender::new(config.spp.clone());
        let controlled =
            source == RateSource::Estimated && config.estimator.mode == EstimatorMode::Control;
        let clock = EstimatorClock::new(
            config.estimator.clone(),
            now,
            config.spp.max_datagram_bytes,
            source == RateSource::Estimated && !controlled,
        );
        let control = controlled.then(|| {
            RateControl::new(
                config.estimator.control.clone(),
                config.spp.max_datagram_bytes,
                now,
            )
        });
        let start = StartWindow::new(
            source == RateSource::Estimated
                && config.estimator.mode == EstimatorMode::Bounded
                && config.initial_window_packets > 0,
            config.initial_window_packets,
        );
        let pacer = Pacer {
            rate_bytes_per_s: control.as_ref().map_or(0.0, RateControl::pacing_rate),
            tokens: 0.0,
            burst_bytes: f64::from(config.pacing_burst_bytes.max(1)),
            granularity_s: config.timer_granularity.as_secs_f64(),
            last: now,
        };
        AtpSender {
            config,
            nai,
            spp,
            clock,
            source,
            pacer,
            payloads: PayloadStore::new(config_max),
            start,
            control,
            nai_rate: None,
        }
    }

    /// Submits a message that carries its bytes (the real engine): like
    /// [`Scheduler::submit`] with `data.len()` as the size, and the bytes are kept until the
    /// message's outcome is polled, so [`AtpSender::payload`] can fill every DATA piece,
    /// retransmissions included. At most [`AtpConfig::max_buffered_bytes`] are held; beyond,
    /// the call fails with [`NaiError::BufferFull`] and nothing is allocated.
    pub fn submit_bytes(
        &mut self,
        now: Time,
        queue: QueueId,
        data: impl Into<Bytes>,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        self.payloads
            .submit(&mut self.nai, now, queue, data.into(), opts)
    }

    /// The bytes of the DATA piece `header` describes, for a message submitted with
    /// [`AtpSender::submit_bytes`]; call it right after `poll_transmit` returned the piece.
    /// `None` for a message submitted by size only.
    pub fn payload(&self, header: &DataHeader) -> Option<&[u8]> {
        self.payloads.get(
            MessageId(header.msg_id),
            u64::from(header.offset),
            u64::from(header.len),
        )
    }

    /// Bytes held for messages submitted with [`AtpSender::submit_bytes`].
    pub fn buffered_bytes(&self) -> u64 {
        self.payloads.buffered_bytes()
    }

    /// The NAI scheduler (queries).
    pub fn nai(&self) -> &Scheduler {
        &self.nai
    }

    /// The NAI scheduler, for application calls (submit, cancel, defer, resume, …). Do not call
    /// its transport methods (`next_chunk`, `handle_acked`, …, `set_rate`): the sender does.
    pub fn nai_mut(&mut self) -> &mut Scheduler {
        &mut self.nai
    }

    /// The peer answered again after a silence: SPP's retransmission backoff starts over
    /// ([`SppSender::on_peer_back`]).
    pub fn on_peer_back(&mut self) {
        self.spp.on_peer_back();
    }

    /// SPP sender state (statistics, RTT).
    pub fn spp(&self) -> &SppSender {
        &self.spp
    }

    /// SPP counters.
    pub fn stats(&self) -> &SppStats {
        self.spp.stats()
    }

    /// The estimator's latest output. With the rate control, `curbw` is the bottleneck rate
    /// measured and `available` the estimate NAI plans with (0 until there is evidence).
    pub fn estimate(&self) -> Estimate {
        match &self.control {
            Some(c) => Estimate {
                curbw_bytes_per_s: c.bottleneck_bytes_per_s(),
                available_bytes_per_s: c.estimate().unwrap_or(0.0),
            },
            None => self.clock.estimator().estimate(),
        }
    }

    /// The rate control, with [`EstimatorMode::Control`].
    pub fn control(&self) -> Option<&RateControl> {
        self.control.as_ref()
    }

    /// The estimator (branch, staleness).
    pub fn estimator(&self) -> &BandwidthEstimator {
        self.clock.estimator()
    }

    /// Packet pairs sent so far.
    pub fn packet_pairs(&self) -> u64 {
        self.clock.packet_pairs()
    }

    /// The rate SPP is paced at.
    pub fn pacing_rate_bytes_per_s(&self) -> f64 {
        self.pacer.rate_bytes_per_s
    }

    /// Current interface send-queue length in packets (the simulator's interface queue).
    pub fn handle_queue_len(&mut self, _now: Time, packets: u32) {
        self.clock.handle_queue_len(packets);
        if let Some(c) = self.control.as_mut() {
            c.on_queue(packets);
        }
    }

    /// Cumulative bytes sent plus received by the interface ("polling the network card for the
    /// amount of data sent and received", §4.2), read at `now` with the queue length last
    /// given. Without it, ATP counts its own datagrams. With the default estimator a queue
    /// that keeps growing lowers the estimate at once (see
    /// [`EstimatorClock::handle_interface_bytes`]).
    pub fn handle_interface_bytes(&mut self, now: Time, total_bytes: u64) {
        if self.control.is_some() {
            // The control measures delivery from acknowledgements; the counter is Figure 3's.
            return;
        }
        if let Some(e) = self.clock.handle_interface_bytes(now, total_bytes)
            && self.source == RateSource::Estimated
        {
            // A drain sample: the path's rate was measured on ATP's own queued datagrams.
            self.start.end();
            self.apply_estimate(now, e);
        }
    }

    /// The queue length and the cumulative counter read together at `now`.
    pub fn handle_interface(&mut self, now: Time, total_bytes: u64, queue_packets: u32) {
        self.handle_queue_len(now, queue_packets);
        self.handle_interface_bytes(now, total_bytes);
    }

    /// Sets the bandwidth with [`RateSource::External`]; ignored otherwise.
    pub fn set_external_rate(&mut self, now: Time, rate_bytes_per_s: f64) {
        if self.source == RateSource::External {
            self.apply_rate(now, rate_bytes_per_s);
        }
    }

    /// Handles a datagram from the receiver.
    pub fn handle_datagram(&mut self, now: Time, repr: &SppRepr, payload_len: u32) {
        self.clock
            .handle_own_bytes((repr.buffer_len() + payload_len as usize) as u64);
        match repr {
            SppRepr::Ack(ack) if self.control.is_some() => {
                let samples = self.spp.rtt().samples();
                let outcomes = self.spp.handle_ack(now, ack);
                let rtt = (self.spp.rtt().samples() > samples)
                    .then(|| self.spp.rtt().latest())
                    .flatten();
                let header = u64::from(self.config.spp.max_datagram_bytes)
                    .saturating_sub(u64::from(self.spp.max_payload()));
                let acked: u64 = outcomes
                    .iter()
                    .map(|o| match o {
                        SppOutcome::Acked { len, .. } => len + header,
                        _ => 0,
                    })
                    .sum();
                if let Some(c) = self.control.as_mut() {
                    c.on_ack(now, acked, rtt);
                }
                self.apply(now, outcomes);
                self.sync_control(now);
            }
            SppRepr::Ack(ack) => {
                let outcomes = self.spp.handle_ack(now, ack);
                self.apply(now, outcomes);
            }
            SppRepr::Report(r) if self.control.is_some() => {
                if let Some(c) = self.control.as_mut() {
                    c.on_report(now, r);
                }
                self.sync_control(now);
            }
            SppRepr::Report(r) if self.source == RateSource::Estimated => {
                if let Some(e) = self.clock.handle_report(r) {
                    self.apply_estimate(now, e);
                }
            }
            _ => {}
        }
    }

    fn apply_rate(&mut self, now: Time, rate_bytes_per_s: f64) {
        self.apply_rates(now, rate_bytes_per_s, rate_bytes_per_s);
    }

    /// A new estimate: `available` is advertised, and paces unless the configuration asks
    /// for the paper's `curbw` ([`Pacing`]).
    fn apply_estimate(&mut self, now: Time, e: Estimate) {
        let pace = match self.config.pacing {
            Pacing::Available => e.available_bytes_per_s,
            Pacing::Curbw => e.curbw_bytes_per_s,
        };
        self.apply_rates(now, e.available_bytes_per_s, pace);
    }

    /// Hands the control's rates to the pacer (always) and to NAI (once there is an estimate;
    /// at once when it moved by more than [`NAI_RATE_STEP`], else at most every
    /// [`NAI_RATE_REFRESH`]).
    fn sync_control(&mut self, now: Time) {
        let in_flight = self.spp.in_flight_packets();
        let Some(c) = self.control.as_mut() else {
            return;
        };
        c.set_in_flight(in_flight);
        let pace = c.pacing_rate();
        let estimate = c.estimate();
        let unsettled = c.rate_unsettled(now);
        self.pacer.set_rate(now, pace);
        if unsettled {
            // The halvings of an outage are no evidence about the rate the path will have
            // when it returns, nor are the first trains after it, until one meets the
            // bottleneck: NAI holds messages instead of refusing or expiring them on it.
            if self.nai_rate.take().is_some() {
                self.nai.set_rate_unknown();
            }
            return;
        }
        let Some(e) = estimate else {
            return;
        };
        let due = match self.nai_rate {
            None => true,
            Some((at, last)) => {
                (e - last).abs() > NAI_RATE_STEP * last
                    || (e != last && now.saturating_since(at) >= NAI_RATE_REFRESH)
            }
        };
        if due {
            self.nai_rate = Some((now, e));
            let share = self.payload_share();
            self.nai.set_rate(now, e * share);
        }
    }

    /// NAI plans message bytes; the estimate counts datagram bytes.
    fn payload_share(&self) -> f64 {
        (f64::from(self.spp.max_payload()) / f64::from(self.config.spp.max_datagram_bytes.max(1)))
            .clamp(0.0, 1.0)
    }

    fn apply_rates(&mut self, now: Time, advertised: f64, pace: f64) {
        // The advertised value drives admission, early expiry and notifications, and by
        // default pacing; see docs/design/nai.md ("which estimate paces"). It counts datagram
        // bytes (the estimator measures the interface), while NAI plans message bytes: NAI
        // gets the payload share of it, so a message admitted "just in time" is not late by
        // SPP's header overhead.
        let clean = |r: f64| {
            if r == f64::INFINITY {
                f64::MAX
            } else if r.is_finite() && r > 0.0 {
                r
            } else {
                0.0
            }
        };
        let share = f64::from(self.spp.max_payload())
            / f64::from(self.config.spp.max_datagram_bytes.max(1));
        self.nai
            .set_rate(now, clean(advertised) * share.clamp(0.0, 1.0));
        self.pacer.set_rate(now, clean(pace));
    }

    /// Applies what SPP learned to the scheduler, in SPP's order.
    fn apply(&mut self, now: Time, outcomes: Vec<SppOutcome>) {
        for o in outcomes {
            match o {
                SppOutcome::CancelResolved { id, delivered } => {
                    self.nai.resolve_cancel(now, id, delivered);
                }
                SppOutcome::Acked {
                    id,
                    wire_seq,
                    offset,
                    len,
                } => {
                    self.start.on_acked(1);
                    if self.nai.handle_acked(now, id, offset, len) {
                        self.spp.on_message_acked(wire_seq);
                    }
                }
                SppOutcome::Lost { id, offset, len } => {
                    self.start.end();
                    self.nai.handle_lost(now, id, offset, len);
                }
            }
        }
    }

    /// The rate NAI plans with is the payload share of the datagram rate ATP paces at.
    pub fn planning_rate_bytes_per_s(&self) -> f64 {
        self.nai.rate_bytes_per_s()
    }

    /// The next datagram to hand to the interface.
    pub fn poll_transmit(&mut self, now: Time) -> Option<SppDatagram> {
        while let Some(n) = self.nai.poll_transmit() {
            self.spp.on_notice(n);
        }
        if let Some(c) = self.spp.poll_transmit(now) {
            return Some(self.count(SppDatagram {
                repr: SppRepr::Cancel(c),
                payload_len: 0,
            }));
        }
        if self.control.is_none()
            && let Some(probe) = self.clock.poll_transmit()
        {
            return Some(self.count(probe));
        }
        self.pacer.refill(now);
        if !self.pacer.ready() {
            return None;
        }
        if let Some(probe) = self.poll_finding(now) {
            return Some(probe);
        }
        if !self.can_send_data() {
            return None;
        }
        let Some(chunk) =
            self.nai
                .next_chunk_within(now, self.spp.max_payload(), self.spp.new_message_max_len())
        else {
            return self.poll_filler(now);
        };
        let header: DataHeader = self.spp.on_data_sent(now, &chunk);
        let d = SppDatagram {
            repr: SppRepr::Data(header),
            payload_len: u32::from(header.len),
        };
        self.pacer.tokens -= d.wire_len() as f64;
        let dry = !self.nai.has_sendable();
        if let Some(c) = self.control.as_mut() {
            c.on_sent(now, d.wire_len() as u64);
            if dry {
                // The application's queue ran dry with this datagram (Linux marks a flow
                // application-limited the same way, at the write that finds its send queue
                // empty: `tcp_rate_check_app_limited`). Without it the mark was refreshed
                // only when a filler datagram happened to be due, and a light application's
                // samples that spanned its own idle gaps passed for the path's.
                c.on_app_limited();
            }
            self.sync_control(now);
        }
        Some(self.count(d))
    }

    /// The filler's datagram while it finds a path that went silent (a ping, or a train after
    /// an answered ping), when one is due: before data and whatever caps data. The cap on
    /// bytes in flight counts the DATA lost in the outage, which is not given up until the
    /// retransmission timer fires — tens of seconds after a long outage, with its backoff —
    /// so a filler that waited for data to be allowed waited for that: in core's model of a
    /// 30-s link-down the estimate stayed at zero for 31 s after the link came back, each
    /// answered ping's train blocked and the next stall silencing the filler again (the
    /// emulated Table 2 on `synthetic-5min` showed 40–60 s). Pings are two unpadded PROBE
    /// datagrams; the trains are bounded in time while the estimate is collapsed
    /// (`filler_outage_interval`).
    fn poll_finding(&mut self, now: Time) -> Option<SppDatagram> {
        if !self.control.as_ref()?.finding_path() {
            return None;
        }
        self.take_filler(now)
    }

    /// The pacer allows a datagram and the application has none (the control's filler).
    fn poll_filler(&mut self, now: Time) -> Option<SppDatagram> {
        if self.nai.has_sendable() {
            // Held back by SPP's bounds, not idle.
            return None;
        }
        self.control.as_mut()?.on_app_limited();
        self.take_filler(now)
    }

    /// The control's next filler datagram, if one is due, paced like data.
    fn take_filler(&mut self, now: Time) -> Option<SppDatagram> {
        let c = self.control.as_mut()?;
        if !c.wants_filler(now) {
            return None;
        }
        if !c.filler_sending() {
            // A new train is paced from its first datagram, not sent in a saved-up burst.
            self.pacer.tokens = self.pacer.tokens.min(0.0);
        }
        let d = c.poll_filler(now)?;
        self.pacer.tokens -= d.wire_len() as f64;
        self.sync_control(now);
        Some(self.count(d))
    }

    /// Whether SPP's bound, the first flight's window and the control's cap on bytes in
    /// flight all allow another DATA packet.
    fn can_send_data(&self) -> bool {
        let in_flight = self.spp.in_flight_packets();
        let capped = self.control.as_ref().is_some_and(|c| {
            let bytes =
                (in_flight as u64).saturating_mul(u64::from(self.config.spp.max_datagram_bytes));
            bytes >= c.cwnd_bytes()
        });
        !capped && self.spp.can_send_data() && self.start.allows(in_flight)
    }

    fn count(&mut self, d: SppDatagram) -> SppDatagram {
        self.clock.handle_own_bytes(d.wire_len() as u64);
        d
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut t: Option<Time> = None;
        let mut take = |x: Option<Time>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |y| y.min(x)));
            }
        };
        if let Some(c) = &self.control {
            take(c.poll_timeout());
            // Only when `poll_transmit` would send it: a timer it cannot act on would fire
            // at once, again and again, without time passing.
            // (While it finds a silent path, whatever the application or the cap on data says.)
            if (c.finding_path() || (!self.nai.has_sendable() && self.can_send_data()))
                && let (Some(due), Some(ready)) = (c.filler_due(), self.pacer.next_ready())
            {
                take(Some(due.max(ready)));
            }
        } else if self.source == RateSource::Estimated {
            take(Some(self.clock.poll_timeout()));
        }
        take(self.nai.poll_timeout());
        take(self.spp.poll_timeout());
        if self.nai.has_sendable_within(self.spp.new_message_max_len()) && self.can_send_data() {
            take(self.pacer.next_ready());
        }
        t
    }

    /// Runs the estimator tick, callback timers and the retransmission timer due by `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        if let Some(c) = self.control.as_mut() {
            c.set_in_flight(self.spp.in_flight_packets());
            c.handle_timeout(now);
            self.sync_control(now);
        } else if self.source == RateSource::Estimated
            && let Some(e) = self.clock.handle_timeout(now)
        {
            // A tick: usage measured over a whole period.
            self.start.end();
            self.apply_estimate(now, e);
            // Backlogged: more is queued than one tick at the estimate sends.
            let tick = self.clock.estimator().config().tick.as_secs_f64();
            if self.nai.sendable_bytes() as f64 > self.nai.rate_bytes_per_s() * tick {
                self.clock.request_train();
            }
        }
        self.nai.handle_timeout(now);
        let lost = self.spp.handle_timeout(now);
        self.apply(now, lost);
        self.sync_control(now);
    }

    /// The next application event. A message's bytes are released when its outcome passes
    /// here.
    pub fn poll_event(&mut self) -> Option<NaiEvent> {
        let ev = self.nai.poll_event()?;
        if let NaiEvent::Outcome { id, outcome } = ev {
            self.payloads.release(id);
            // Refused for bandwidth: the estimate may merely be low; measure (default mode).
            if self.source == RateSource::Estimated
                && self.control.is_none()
                && matches!(
                    outcome,
                    Outcome::Rejected(
                        RejectReason::CannotMeetDeadline | RejectReason::WouldJeopardize(_)
                    )
                )
            {
                self.clock.request_train();
            }
        }
        Some(ev)
    }
}
