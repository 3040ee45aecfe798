//! TCP Friendly Rate Control, RFC 5348 (which obsoletes RFC 3448), sans-IO.
//!
//! Read in this order: [`throughput_bytes_per_s`] (§3.1, the equation), [`LossHistory`]
//! (§5.4, the average loss interval over eight weighted intervals), [`TfrcReceiver`] (§5.1–5.3
//! loss detection and loss events, §6 feedback, §6.3.1 the first loss interval), then
//! [`TfrcSender`] (§4.2–4.4: initial rate, the receive-rate limit, the nofeedback timer).
//!
//! The sender paces fixed-size packets of `s` bytes at the allowed rate `X`:
//!
//! ```text
//! sender:   while let Some(h) = tx.poll_transmit(now) { send h + (s − header) bytes }
//!           tx.handle_feedback(now, &fb, data_limited) for each feedback packet
//!           tx.handle_timeout(now) at tx.poll_timeout()
//! receiver: rx.handle_data(now, &h, bytes) for each data packet
//!           while let Some(fb) = rx.poll_feedback(now) { send fb }   (after every input
//!           and at rx.poll_timeout())
//! ```
//!
//! Simplifications, each said where it is made: the loss-interval discounting of §5.5 is not
//! implemented (it is optional, "MAY"); ECN is not used; a data gap longer than
//! [`MAX_GAP_PACKETS`] (a corrupt or hostile sequence number) counts as one loss.

use crate::time::Time;
use crate::wire::{Reader, WireError, Writer};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// RFC 5348 §4.3: "t_mbi is 64 seconds", the maximum back-off interval; the rate never drops
/// below `s / t_mbi`.
pub const T_MBI: Duration = Duration::from_secs(64);
/// RFC 5348 §5.1: a packet is lost once `NDUPACK` (3) packets with higher sequence numbers
/// have arrived.
pub const NDUPACK: usize = 3;
/// RFC 5348 §5.4: the average is taken over the last `n = 8` loss intervals.
pub const N_LOSS_INTERVALS: usize = 8;
/// RFC 5348 §4.3 step 2: "q = 0.9" in the RTT filter `R = q*R + (1-q)*R_sample`.
pub const RTT_FILTER_Q: f64 = 0.9;
/// RFC 5348 §4.2: before the first feedback the nofeedback timer is set to two seconds.
pub const INITIAL_NOFEEDBACK: Duration = Duration::from_secs(2);
/// A sequence gap longer than this is treated as a single lost packet (bounds the work one
/// packet can cause).
pub const MAX_GAP_PACKETS: u64 = 1 << 16;

/// The TCP throughput equation, RFC 5348 §3.1:
///
/// ```text
///                               s
/// X_Bps = ----------------------------------------------------------
///         R*sqrt(2*b*p/3) + (t_RTO * (3*sqrt(3*b*p/8)*p*(1+32*p^2)))
/// ```
///
/// `s` segment size in bytes, `R` the round-trip time, `p` the loss event rate in `(0, 1]`,
/// `t_RTO` the retransmission timeout (§4.3: "t_RTO = 4*R"), `b` packets acknowledged per ACK
/// (§3.1: "b ... SHOULD be set to 1"). Returns bytes per second; `p <= 0` gives infinity.
pub fn throughput_bytes_per_s(s_bytes: f64, rtt: Duration, p: f64, t_rto: Duration, b: f64) -> f64 {
    if p.is_nan() || p <= 0.0 {
        return f64::INFINITY;
    }
    let p = p.min(1.0);
    let r = rtt.as_secs_f64();
    let t_rto = t_rto.as_secs_f64();
    let denom = r * (2.0 * b * p / 3.0).sqrt()
        + t_rto * (3.0 * (3.0 * b * p / 8.0).sqrt() * p * (1.0 + 32.0 * p * p));
    if denom <= 0.0 {
        f64::INFINITY
    } else {
        s_bytes / denom
    }
}

/// The equation with §4.3's recommended `t_RTO = 4R` and `b = 1`.
pub fn throughput_rfc(s_bytes: f64, rtt: Duration, p: f64) -> f64 {
    throughput_bytes_per_s(s_bytes, rtt, p, rtt.saturating_mul(4), 1.0)
}

/// The loss event rate at which [`throughput_rfc`] gives `x_bytes_per_s` (the inverse used by
/// §6.3.1 to synthesize the first loss interval). Bisection in log space; clamped to
/// `[1e-9, 1]`.
pub fn loss_event_rate_for(s_bytes: f64, rtt: Duration, x_bytes_per_s: f64) -> f64 {
    const P_MIN: f64 = 1e-9;
    if x_bytes_per_s.is_nan()
        || x_bytes_per_s <= 0.0
        || throughput_rfc(s_bytes, rtt, 1.0) >= x_bytes_per_s
    {
        return 1.0;
    }
    if throughput_rfc(s_bytes, rtt, P_MIN) <= x_bytes_per_s {
        return P_MIN;
    }
    // X(p) is decreasing in p: keep X(lo) > x > X(hi).
    let (mut lo, mut hi) = (P_MIN.ln(), 0.0_f64);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if throughput_rfc(s_bytes, rtt, mid.exp()) > x_bytes_per_s {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (0.5 * (lo + hi)).exp()
}

/// RFC 5348 §5.4 weight `w_i` of the `i`-th most recent loss interval among `n`:
/// "If (i < n/2) w_i = 1; else w_i = 2*(n-i)/(n+2)". For n = 8: 1, 1, 1, 1, 0.8, 0.6, 0.4, 0.2.
pub fn loss_interval_weight(i: usize, n: usize) -> f64 {
    if 2 * i < n {
        1.0
    } else {
        2.0 * n.saturating_sub(i) as f64 / (n as f64 + 2.0)
    }
}

/// The receiver's loss history (RFC 5348 §5.4): the open interval `I_0` (packets since the
/// start of the most recent loss event) and up to [`N_LOSS_INTERVALS`] closed ones
/// `I_1 … I_n`, most recent first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LossHistory {
    closed: VecDeque<u64>,
    open: u64,
}

impl LossHistory {
    /// No loss yet.
    pub fn new() -> LossHistory {
        LossHistory::default()
    }

    /// A new loss event started: the open interval, now `len` packets long, is closed.
    pub fn close_interval(&mut self, len: u64) {
        self.closed.push_front(len.max(1));
        self.closed.truncate(N_LOSS_INTERVALS);
        self.open = 0;
    }

    /// Sets the length of the open interval `I_0`.
    pub fn set_open(&mut self, len: u64) {
        self.open = len;
    }

    /// Closed intervals, most recent first.
    pub fn closed(&self) -> impl Iterator<Item = u64> + '_ {
        self.closed.iter().copied()
    }

    /// The average loss interval `I_mean`, or `None` before the first loss event.
    ///
    /// RFC 5348 §5.4:
    ///
    /// ```text
    /// for (i = 0 to n-1) { I_tot0 = I_tot0 + (I_i * w_i); W_tot = W_tot + w_i; }
    /// for (i = 1 to n)   { I_tot1 = I_tot1 + (I_i * w_(i-1)); }
    /// I_tot = max(I_tot0, I_tot1);  I_mean = I_tot/W_tot;
    /// ```
    ///
    /// so the open interval counts only when it raises the average. With `k < n` closed
    /// intervals the sums run over the intervals that exist, each divided by its own weight
    /// total.
    pub fn average_interval(&self) -> Option<f64> {
        let k = self.closed.len();
        if k == 0 {
            return None;
        }
        let n = N_LOSS_INTERVALS;
        let mut tot0 = 0.0;
        let mut w0 = 0.0;
        let intervals = std::iter::once(self.open).chain(self.closed.iter().copied());
        for (i, len) in intervals.clone().take(n.min(k + 1)).enumerate() {
            let w = loss_interval_weight(i, n);
            tot0 += len as f64 * w;
            w0 += w;
        }
        let mut tot1 = 0.0;
        let mut w1 = 0.0;
        for (i, len) in intervals.skip(1).take(n).enumerate() {
            let w = loss_interval_weight(i, n);
            tot1 += len as f64 * w;
            w1 += w;
        }
        Some((tot0 / w0).max(tot1 / w1))
    }

    /// The loss event rate `p = 1 / I_mean` (0 before the first loss event).
    pub fn loss_event_rate(&self) -> f64 {
        self.average_interval().map_or(0.0, |i| 1.0 / i.max(1.0))
    }
}

// ---------------------------------------------------------------------------------------------
// Wire formats (§3.2): data header and feedback.

/// Version of the TFRC headers.
pub const TFRC_VERSION: u8 = 1;
const T_DATA: u8 = 1;
const T_FEEDBACK: u8 = 2;
/// Fixed point of `p` on the wire: `p × P_SCALE` as a u32.
const P_SCALE: f64 = 1e9;

/// RFC 5348 §3.2.1 data packet contents: "A sequence number … A timestamp … The sender's
/// current estimate of the round-trip time."
///
/// ```text
/// version u8 | type u8 (1) | seq u64 | sent_at_ns u64 | rtt_us u32
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TfrcData {
    /// Sequence number, +1 per packet.
    pub seq: u64,
    /// Send time.
    pub sent_at: Time,
    /// The sender's RTT estimate (zero before it has one).
    pub rtt: Duration,
}

impl TfrcData {
    /// Encoded length.
    pub const LEN: usize = 22;

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Parses a header; never panics.
    pub fn parse(buf: &[u8]) -> Result<TfrcData, WireError> {
        let mut r = Reader::new(buf);
        check_version_type(&mut r, T_DATA)?;
        Ok(TfrcData {
            seq: r.u64()?,
            sent_at: Time::from_nanos(r.u64()?),
            rtt: Duration::from_micros(u64::from(r.u32()?)),
        })
    }

    /// Writes the header into `buf` (at least [`TfrcData::LEN`] bytes).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        w.u8(TFRC_VERSION)?;
        w.u8(T_DATA)?;
        w.u64(self.seq)?;
        w.u64(self.sent_at.as_nanos())?;
        w.u32(crate::convert::u32_sat(
            u64::try_from(self.rtt.as_micros()).unwrap_or(u64::MAX),
        ))?;
        Ok(w.position())
    }
}

/// RFC 5348 §3.2.2 feedback packet contents: the timestamp of the last data packet received
/// (`t_recvdata`), the time between its receipt and this feedback (`t_delay`), the rate at
/// which the receiver received data since the last feedback (`X_recv`), and `p`.
///
/// ```text
/// version u8 | type u8 (2) | echo_sent_at_ns u64 | delay_us u32 | x_recv_bytes_per_s u64
/// | p × 1e9 u32 (at most 1e9)
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfrcFeedback {
    /// `t_recvdata`: the send timestamp of the last data packet received.
    pub echo_sent_at: Time,
    /// `t_delay`.
    pub delay: Duration,
    /// `X_recv`, bytes per second.
    pub x_recv_bytes_per_s: f64,
    /// The loss event rate `p`.
    pub p: f64,
}

impl TfrcFeedback {
    /// Encoded length.
    pub const LEN: usize = 26;

    /// Bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Parses a feedback packet; never panics. `p` above 1 is malformed.
    pub fn parse(buf: &[u8]) -> Result<TfrcFeedback, WireError> {
        let mut r = Reader::new(buf);
        check_version_type(&mut r, T_FEEDBACK)?;
        let echo_sent_at = Time::from_nanos(r.u64()?);
        let delay = Duration::from_micros(u64::from(r.u32()?));
        let x_recv = r.u64()? as f64;
        let p_fixed = r.u32()?;
        if f64::from(p_fixed) > P_SCALE {
            return Err(WireError::Malformed("tfrc p"));
        }
        Ok(TfrcFeedback {
            echo_sent_at,
            delay,
            x_recv_bytes_per_s: x_recv,
            p: f64::from(p_fixed) / P_SCALE,
        })
    }

    /// Writes the packet into `buf` (at least [`TfrcFeedback::LEN`] bytes). `p` is rounded up
    /// to the wire's resolution so that a non-zero `p` never becomes zero.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf);
        w.u8(TFRC_VERSION)?;
        w.u8(T_FEEDBACK)?;
        w.u64(self.echo_sent_at.as_nanos())?;
        w.u32(crate::convert::u32_sat(
            u64::try_from(self.delay.as_micros()).unwrap_or(u64::MAX),
        ))?;
        w.u64(crate::convert::f64_u64_sat(self.x_recv_bytes_per_s.round()))?;
        let p = if self.p.is_finite() {
            self.p.clamp(0.0, 1.0)
        } else {
            0.0
        };
        w.u32(crate::convert::u32_sat(crate::convert::f64_u64_sat(
            (p * P_SCALE).ceil(),
        )))?;
        Ok(w.position())
    }
}

fn check_version_type(r: &mut Reader<'_>, want: u8) -> Result<(), WireError> {
    let version = r.u8()?;
    if version != TFRC_VERSION {
        return Err(WireError::UnsupportedVersion(version));
    }
    let kind = r.u8()?;
    if kind != want {
        return Err(WireError::UnknownKind {
            field: "tfrc type",
            value: u32::from(kind),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Receiver (§5, §6).

/// The TFRC receiver: detects losses, groups them into loss events, keeps the loss history
/// and produces feedback about once per RTT (RFC 5348 §6.2) and at once on a new loss event
/// (§6.1: "If … p … increased … the receiver … sends a feedback packet immediately").
#[derive(Clone, Debug, Default)]
pub struct TfrcReceiver {
    history: LossHistory,
    /// Lowest sequence number not yet classified as received or lost.
    next_unseen: Option<u64>,
    /// Received packets above `next_unseen` while it is missing: at most `NDUPACK - 1`.
    above: BTreeMap<u64, Time>,
    /// The last classified packet that was received, and its send time.
    last_received: Option<(u64, Time)>,
    highest: Option<u64>,
    /// First lost packet of the current loss event and its (interpolated) send time.
    event_start: Option<(u64, Time)>,
    rtt: Duration,
    last_data: Option<(Time, Time)>,
    bytes_since_feedback: u64,
    interval_start: Option<Time>,
    last_feedback_at: Option<Time>,
    feedback_now: bool,
    packets: u64,
    bytes: u64,
    losses: u64,
}

impl TfrcReceiver {
    /// A receiver that has seen nothing.
    pub fn new() -> TfrcReceiver {
        TfrcReceiver::default()
    }

    /// The loss history.
    pub fn history(&self) -> &LossHistory {
        &self.history
    }

    /// The current loss event rate `p`.
    pub fn loss_event_rate(&self) -> f64 {
        self.history.loss_event_rate()
    }

    /// Packets detected as lost.
    pub fn losses(&self) -> u64 {
        self.losses
    }

    /// Packets received (duplicates excluded).
    pub fn packets(&self) -> u64 {
        self.packets
    }

    fn mean_packet_bytes(&self) -> f64 {
        if self.packets == 0 {
            1.0
        } else {
            self.bytes as f64 / self.packets as f64
        }
    }

    /// Handles a data packet of `bytes` bytes carrying header `h`.
    pub fn handle_data(&mut self, now: Time, h: &TfrcData, bytes: u32) {
        let next = *self.next_unseen.get_or_insert(h.seq);
        if h.seq < next || self.above.contains_key(&h.seq) {
            return; // duplicate or already declared lost
        }
        if h.rtt > Duration::ZERO {
            self.rtt = h.rtt;
        }
        self.packets += 1;
        self.bytes += u64::from(bytes);
        self.bytes_since_feedback += u64::from(bytes);
        self.interval_start.get_or_insert(now);
        if self.highest.is_none_or(|hi| h.seq > hi) {
            self.highest = Some(h.seq);
            self.last_data = Some((h.sent_at, now));
        }
        self.above.insert(h.seq, h.sent_at);
        self.classify(now);
        if let (Some((start, _)), Some(hi)) = (self.event_start, self.highest) {
            self.history.set_open((hi + 1).saturating_sub(start));
        }
    }

    /// Moves `next_unseen` forward over received packets and declares losses (§5.1).
    fn classify(&mut self, now: Time) {
        while let Some(n) = self.next_unseen {
            if let Some(t) = self.above.remove(&n) {
                self.last_received = Some((n, t));
                self.next_unseen = Some(n + 1);
                continue;
            }
            if self.above.len() < NDUPACK {
                break;
            }
            let Some((&after, &t_after)) = self.above.iter().next() else {
                break;
            };
            // §5.2: the lost packet's send time is interpolated between its neighbours.
            let t_loss = match self.last_received {
                Some((before, t_before)) if after > before => {
                    let frac = (n - before) as f64 / (after - before) as f64;
                    let span = t_after.saturating_since(t_before).as_secs_f64();
                    t_before + Duration::from_secs_f64((span * frac).max(0.0))
                }
                _ => t_after,
            };
            self.on_loss(now, n, t_loss);
            self.next_unseen = Some(if after - n > MAX_GAP_PACKETS {
                after // the whole gap counts as one loss
            } else {
                n + 1
            });
        }
    }

    /// §5.2: a lost packet starts a new loss event if it was sent more than one RTT after the
    /// first lost packet of the current event.
    fn on_loss(&mut self, now: Time, seq: u64, t_loss: Time) {
        self.losses += 1;
        match self.event_start {
            None => {
                // §6.3.1: the first loss interval is the one that, by the equation, gives the
                // receive rate seen so far.
                let x_recv = self.receive_rate(now);
                let p = loss_event_rate_for(self.mean_packet_bytes(), self.rtt, x_recv);
                self.history
                    .close_interval(crate::convert::f64_u64_sat((1.0 / p).round()));
            }
            Some((start, t_start)) if t_loss > t_start + self.rtt => {
                self.history.close_interval(seq.saturating_sub(start));
            }
            Some(_) => return,
        }
        self.event_start = Some((seq, t_loss));
        self.feedback_now = true;
    }

    fn receive_rate(&self, now: Time) -> f64 {
        let start = self.interval_start.unwrap_or(now);
        let elapsed = now
            .saturating_since(start)
            .max(self.rtt)
            .max(Duration::from_millis(1));
        self.bytes_since_feedback as f64 / elapsed.as_secs_f64()
    }

    /// A feedback packet if one is due: data arrived since the last one and either a new loss
    /// event was detected, none was sent yet, or an RTT has passed (§6.2).
    pub fn poll_feedback(&mut self, now: Time) -> Option<TfrcFeedback> {
        let (sent_at, arrived) = self.last_data?;
        if self.bytes_since_feedback == 0 {
            return None;
        }
        let due = self.feedback_now
            || self
                .last_feedback_at
                .is_none_or(|t| now >= t + self.rtt.max(Duration::from_millis(1)));
        if !due {
            return None;
        }
        let fb = TfrcFeedback {
            echo_sent_at: sent_at,
            delay: now.saturating_since(arrived),
            x_recv_bytes_per_s: self.receive_rate(now),
            p: self.loss_event_rate(),
        };
        self.feedback_now = false;
        self.last_feedback_at = Some(now);
        self.interval_start = Some(now);
        self.bytes_since_feedback = 0;
        Some(fb)
    }

    /// When feedback will next be due if data keeps arriving.
    pub fn poll_timeout(&self) -> Option<Time> {
        if self.bytes_since_feedback == 0 {
            return None;
        }
        Some(
            self.last_feedback_at
                .map_or(Time::ZERO, |t| t + self.rtt.max(Duration::from_millis(1))),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Sender (§4).

/// TFRC sender parameters.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TfrcConfig {
    /// `s`: the packet size in bytes (§4.1; headers included, as the paper's flows count).
    pub segment_bytes: u32,
    /// `b` in the equation (§3.1: 1).
    pub b: f64,
    /// `t_mbi` (§4.3: 64 s).
    pub t_mbi: Duration,
}

impl Default for TfrcConfig {
    fn default() -> Self {
        TfrcConfig {
            segment_bytes: 512,
            b: 1.0,
            t_mbi: T_MBI,
        }
    }
}

/// The TFRC sender: the allowed rate `X`, its pacing, and the nofeedback timer.
#[derive(Clone, Debug)]
pub struct TfrcSender {
    config: TfrcConfig,
    /// Allowed sending rate `X`, bytes/s.
    x: f64,
    /// `R`, seconds, once measured.
    rtt: Option<f64>,
    p: f64,
    x_recv: f64,
    /// `X_recv_set`: (time, rate); `f64::INFINITY` is the initial entry.
    x_recv_set: Vec<(Time, f64)>,
    recv_limit: f64,
    /// Time last doubled (initial slow start).
    tld: Option<Time>,
    initial_rate: f64,
    nofeedback_at: Time,
    /// Whether anything was sent since the nofeedback timer was last set.
    sent_since_timer: bool,
    next_send: Time,
    seq: u64,
    sent_bytes: u64,
}

impl TfrcSender {
    /// A sender starting at `now`: §4.2 "the sender initializes the allowed sending rate to
    /// one packet per second", nofeedback timer at two seconds.
    pub fn new(now: Time, config: TfrcConfig) -> TfrcSender {
        let s = f64::from(config.segment_bytes.max(1));
        TfrcSender {
            x: s,
            rtt: None,
            p: 0.0,
            x_recv: 0.0,
            x_recv_set: vec![(now, f64::INFINITY)],
            recv_limit: f64::INFINITY,
            tld: None,
            initial_rate: s,
            nofeedback_at: now + INITIAL_NOFEEDBACK,
            sent_since_timer: false,
            next_send: now,
            seq: 0,
            sent_bytes: 0,
            config,
        }
    }

    fn s(&self) -> f64 {
        f64::from(self.config.segment_bytes.max(1))
    }

    fn min_rate(&self) -> f64 {
        self.s() / self.config.t_mbi.as_secs_f64().max(1e-9)
    }

    /// The allowed sending rate `X`, bytes/s.
    pub fn rate_bytes_per_s(&self) -> f64 {
        self.x
    }

    /// The smoothed RTT `R`, once measured.
    pub fn rtt(&self) -> Option<Duration> {
        self.rtt.map(Duration::from_secs_f64)
    }

    /// The last reported loss event rate.
    pub fn loss_event_rate(&self) -> f64 {
        self.p
    }

    /// The receive-rate limit of §4.3 step 4 (infinite until feedback).
    pub fn recv_limit_bytes_per_s(&self) -> f64 {
        self.recv_limit
    }

    /// Payload bytes sent so far (`s` per packet).
    pub fn sent_bytes(&self) -> u64 {
        self.sent_bytes
    }

    /// When the nofeedback timer expires.
    pub fn nofeedback_deadline(&self) -> Time {
        self.nofeedback_at
    }

    /// The next packet header if one is due at `now` (packets of `s` bytes paced at `X`).
    pub fn poll_transmit(&mut self, now: Time) -> Option<TfrcData> {
        if self.next_send > now {
            return None;
        }
        let ipi = crate::time::transmission_time(u64::from(self.config.segment_bytes), self.x)
            .unwrap_or(self.config.t_mbi);
        // Never bank more than one packet of credit after an idle spell.
        let base = self.next_send.max(now.saturating_sub(ipi));
        self.next_send = base + ipi;
        let h = TfrcData {
            seq: self.seq,
            sent_at: now,
            rtt: self.rtt().unwrap_or(Duration::ZERO),
        };
        self.seq += 1;
        self.sent_bytes += u64::from(self.config.segment_bytes);
        self.sent_since_timer = true;
        Some(h)
    }

    /// Handles a feedback packet (RFC 5348 §4.3). `data_limited` says the whole interval it
    /// covers was data-limited (the application had nothing to send).
    pub fn handle_feedback(&mut self, now: Time, fb: &TfrcFeedback, data_limited: bool) {
        // Step 1: R_sample = (t_now - t_recvdata) - t_delay.
        let r_sample = now
            .saturating_since(fb.echo_sent_at)
            .saturating_sub(fb.delay)
            .as_secs_f64()
            .max(1e-6);
        // Step 2: the RTT filter.
        let r = match self.rtt {
            None => r_sample,
            Some(r) => RTT_FILTER_Q * r + (1.0 - RTT_FILTER_Q) * r_sample,
        };
        let first = self.rtt.is_none();
        self.rtt = Some(r);
        let s = self.s();
        // §4.2: "initial_rate = W_init/R; W_init = min(4*s, max(2*s, 4380))".
        self.initial_rate = (4.0 * s).min((2.0 * s).max(4380.0)) / r;
        if first {
            self.x = self.initial_rate;
            self.tld = Some(now);
        }
        let x_recv = if fb.x_recv_bytes_per_s.is_finite() {
            fb.x_recv_bytes_per_s.max(0.0)
        } else {
            0.0
        };
        let p = if fb.p.is_finite() {
            fb.p.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let p_increased = p > self.p;
        self.x_recv = x_recv;
        self.p = p;
        // Step 4: the receive-rate limit.
        if data_limited {
            if p_increased {
                for e in &mut self.x_recv_set {
                    e.1 /= 2.0;
                }
                self.maximize_x_recv_set(now, 0.85 * x_recv);
                self.recv_limit = self.max_x_recv();
            } else {
                self.maximize_x_recv_set(now, x_recv);
                self.recv_limit = 2.0 * self.max_x_recv();
            }
        } else {
            // Update_X_recv_set: add X_recv, delete values older than two RTTs.
            self.x_recv_set.push((now, x_recv));
            let horizon = now.saturating_sub(Duration::from_secs_f64(2.0 * r));
            self.x_recv_set.retain(|&(t, _)| t >= horizon);
            self.recv_limit = 2.0 * self.max_x_recv();
        }
        // Step 5.
        self.update_rate(now);
        // Step 6: nofeedback timer = max(4*R, 2*s/X).
        self.restart_nofeedback(now);
    }

    fn max_x_recv(&self) -> f64 {
        self.x_recv_set.iter().map(|e| e.1).fold(0.0_f64, f64::max)
    }

    /// Maximize_X_recv_set (§4.3): add `x_recv`, drop the initial infinity, keep only the
    /// largest value, stamped now.
    fn maximize_x_recv_set(&mut self, now: Time, x_recv: f64) {
        self.x_recv_set.push((now, x_recv));
        self.x_recv_set.retain(|e| e.1.is_finite());
        let max = self.max_x_recv();
        self.x_recv_set = vec![(now, max)];
    }

    /// §4.3 step 5:
    /// ```text
    /// If (p > 0) { X = max(min(X_Bps, recv_limit), s/t_mbi); }
    /// Else if (t_now - tld >= R) { X = max(min(2*X, recv_limit), initial_rate); tld = t_now; }
    /// ```
    fn update_rate(&mut self, now: Time) {
        let r = self.rtt.unwrap_or(1.0);
        if self.p > 0.0 {
            let x_bps = self.x_bps();
            self.x = x_bps.min(self.recv_limit).max(self.min_rate());
        } else if self
            .tld
            .is_none_or(|tld| now.saturating_since(tld).as_secs_f64() >= r)
        {
            self.x = (2.0 * self.x).min(self.recv_limit).max(self.initial_rate);
            self.tld = Some(now);
        }
    }

    fn x_bps(&self) -> f64 {
        let r = Duration::from_secs_f64(self.rtt.unwrap_or(1.0));
        throughput_bytes_per_s(self.s(), r, self.p, r.saturating_mul(4), self.config.b)
    }

    fn restart_nofeedback(&mut self, now: Time) {
        let after = match self.rtt {
            Some(r) => (4.0 * r).max(2.0 * self.s() / self.x),
            None => INITIAL_NOFEEDBACK.as_secs_f64(),
        };
        self.nofeedback_at = now + Duration::from_secs_f64(after.min(1e9));
        self.sent_since_timer = false;
    }

    /// The earlier of the next packet's send time and the nofeedback timer.
    pub fn poll_timeout(&self) -> Option<Time> {
        Some(self.next_send.min(self.nofeedback_at))
    }

    /// Fires the nofeedback timer if it has expired (RFC 5348 §4.4; RFC 3448 erratum 270: "If
    /// the sender does not receive a feedback report for four round trip times, it cuts its
    /// sending rate in half"):
    ///
    /// ```text
    /// If (no feedback yet and not idle since the timer was set): X = max(X/2, s/t_mbi)
    /// Else if ((p > 0 && X_recv < recover_rate) or (p == 0 && X < 2*recover_rate))
    ///         and idle since the timer was set: nothing
    /// Else if (p == 0): X = max(X/2, s/t_mbi)
    /// Else if (X_Bps > 2*X_recv): Update_Limits(X_recv)
    /// Else: Update_Limits(X_Bps/2)
    /// Restart the timer: max(4*R, 2*s/X)
    /// ```
    /// with `recover_rate` the initial rate and `Update_Limits(l)` replacing `X_recv_set` by
    /// `max(l, s/t_mbi)/2` and recomputing `X` as in §4.3.
    pub fn handle_timeout(&mut self, now: Time) {
        if now < self.nofeedback_at {
            return;
        }
        let idle = !self.sent_since_timer;
        let recover_rate = self.initial_rate;
        if self.rtt.is_none() {
            if !idle {
                self.x = (self.x / 2.0).max(self.min_rate());
            }
        } else if idle
            && ((self.p > 0.0 && self.x_recv < recover_rate)
                || (self.p == 0.0 && self.x < 2.0 * recover_rate))
        {
            // Idle at a low rate: keep it.
        } else if self.p == 0.0 {
            self.x = (self.x / 2.0).max(self.min_rate());
        } else {
            let x_bps = self.x_bps();
            let limit = if x_bps > 2.0 * self.x_recv {
                self.x_recv
            } else {
                x_bps / 2.0
            };
            let limit = limit.max(self.min_rate());
            self.x_recv_set = vec![(now, limit / 2.0)];
            self.recv_limit = limit;
            self.update_rate(now);
        }
        self.restart_nofeedback(now);
    }
}

#[cfg(test)]
mod tests;
