//! The rate control in a virtual-time pair: an [`AtpSender`] and an [`AtpReceiver`] joined by
//! a bottleneck (a FIFO queue in front of a link whose rate follows a schedule, a fixed
//! one-way delay each way), driven the way both engines drive them. Checks what the control
//! is for: a short queue while the link is used, a fall followed within an RTT or two, a rise
//! found again by a light application, no estimate above what was delivered, and no message
//! refused before there is evidence.

use crate::atp::{AtpConfig, AtpReceiver, AtpSender, EstimatorMode, RateSource};
use crate::nai::{DeadlineMargin, NaiEvent, OnExpiry, Outcome, Priority, QueueId, SendOptions};
use crate::spp::SppDatagram;
use crate::time::Time;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Bottleneck queue bound, packets (deep, like tbf's `latency 100ms` at these rates: the
/// control, not the queue's size, has to keep it short).
const QUEUE_PACKETS: usize = 400;

struct Pair {
    now: Time,
    tx: AtpSender,
    rx: AtpReceiver,
    /// (from, rate bytes/s), in time order.
    schedule: Vec<(Time, f64)>,
    delay: Duration,
    queue: VecDeque<(Time, SppDatagram)>,
    /// The datagram on the link and when its last bit leaves.
    on_link: Option<(Time, SppDatagram)>,
    fwd: BTreeMap<(Time, u64), SppDatagram>,
    rev: BTreeMap<(Time, u64), SppDatagram>,
    seq: u64,
    drops: u64,
    /// (dequeue time, time spent queued, whether it carried the application's DATA) of every
    /// datagram.
    waits: Vec<(Time, Duration, bool)>,
    /// (time, link busy) transitions, for utilisation.
    busy_ns: BTreeMap<u64, u64>,
    delivered_bytes: u64,
    outcomes: Vec<(Time, Outcome, Priority)>,
    rejected: u64,
    /// (time, estimate) after every step.
    estimates: Vec<(Time, f64)>,
    priorities: BTreeMap<u64, Priority>,
    /// A token bucket in front of the link (`tbf`): (burst bytes, tokens, last refill); the
    /// link itself then runs at 1 Gbit/s.
    bucket: Option<(f64, f64, Time)>,
    /// When the bucket next holds enough for the head of the queue.
    bucket_wait: Option<Time>,
    /// Steps taken without time passing (a timer that never stops firing is a bug).
    same_instant: u64,
    /// The bottleneck queue's bound, packets.
    queue_packets: usize,
    /// A zero rate is a link that is down: what it holds and what is sent into it is lost
    /// (else the queue waits for the rate to return).
    down_loses: bool,
    /// (time, wire bytes, the control's stall count then) of every PROBE datagram the
    /// sender sent (the filler's).
    probes: Vec<(Time, usize, u64)>,
    /// The receiving host reads its socket only at multiples of this (a real host's wake-ups:
    /// every 1–2 ms under load); `None`: each datagram is read as it arrives.
    rx_batch: Option<Duration>,
}

impl Pair {
    fn new(schedule: Vec<(Time, f64)>, delay: Duration) -> Pair {
        let config = AtpConfig {
            estimator: crate::atp::EstimatorConfig {
                mode: EstimatorMode::Control,
                ..Default::default()
            },
            // The real engine's timer slop (the simulator's is zero; a millisecond is
            // harsher on the queue).
            timer_granularity: Duration::from_millis(1),
            ..AtpConfig::default()
        };
        let rx = AtpReceiver::new(config.spp.clone());
        Pair {
            now: Time::ZERO,
            tx: AtpSender::new(config, RateSource::Estimated, Time::ZERO),
            rx,
            schedule,
            delay,
            queue: VecDeque::new(),
            on_link: None,
            fwd: BTreeMap::new(),
            rev: BTreeMap::new(),
            seq: 0,
            drops: 0,
            waits: Vec::new(),
            busy_ns: BTreeMap::new(),
            delivered_bytes: 0,
            outcomes: Vec::new(),
            rejected: 0,
            estimates: Vec::new(),
            priorities: BTreeMap::new(),
            bucket: None,
            bucket_wait: None,
            same_instant: 0,
            queue_packets: QUEUE_PACKETS,
            down_loses: false,
            probes: Vec::new(),
            rx_batch: None,
        }
    }

    /// The receiver reads what arrived only every `every` (see [`Pair::rx_batch`]).
    fn with_rx_batch(mut self, every: Duration) -> Pair {
        self.rx_batch = Some(every);
        self
    }

    /// Bounds the bottleneck queue at `packets` (the link emulator's `--queue-packets`).
    fn with_queue(mut self, packets: usize) -> Pair {
        self.queue_packets = packets;
        self
    }

    /// Puts a token bucket of `burst` bytes in front of the link (a `tbf` shaper).
    fn with_bucket(mut self, burst: f64) -> Pair {
        self.bucket = Some((burst, burst, Time::ZERO));
        self
    }

    fn rate(&self, t: Time) -> f64 {
        self.schedule
            .iter()
            .rev()
            .find(|(from, _)| *from <= t)
            .map_or(0.0, |&(_, r)| r)
    }

    fn start_link(&mut self) {
        if self.on_link.is_some() {
            return;
        }
        if self.rate(self.now) <= 0.0 {
            // An outage: the queue waits for the link to come back.
            return;
        }
        let Some(len) = self.queue.front().map(|(_, d)| d.wire_len() as f64) else {
            return;
        };
        let mut line_rate = self.rate(self.now);
        if let Some((burst, tokens, last)) = self.bucket {
            let t = (tokens + (self.now - last).as_secs_f64() * self.rate(self.now)).min(burst);
            if t + 1e-6 < len {
                self.bucket = Some((burst, t, self.now));
                let wait = (len - t) / self.rate(self.now);
                let wait = Duration::from_secs_f64(wait).max(Duration::from_nanos(1));
                self.bucket_wait = Some(self.now + wait);
                return;
            }
            self.bucket = Some((burst, t - len, self.now));
            self.bucket_wait = None;
            line_rate = 125e6;
        }
        let Some((queued, d)) = self.queue.pop_front() else {
            return;
        };
        let data = matches!(d.repr, crate::spp::SppRepr::Data(_));
        self.waits.push((self.now, self.now - queued, data));
        let secs = d.wire_len() as f64 / line_rate;
        let done = self.now + Duration::from_secs_f64(secs);
        *self.busy_ns.entry(self.now.as_nanos()).or_default() +=
            (done - self.now).as_nanos() as u64;
        self.on_link = Some((done, d));
    }

    fn pump(&mut self) {
        let now = self.now;
        while let Some(d) = self.tx.poll_transmit(now) {
            if matches!(d.repr, crate::spp::SppRepr::Probe(_)) {
                let stalls = self.tx.control().map_or(0, |c| c.stats().stalls);
                self.probes.push((now, d.wire_len(), stalls));
            }
            if self.down_loses && self.rate(now) <= 0.0 {
                self.drops += 1 + self.queue.len() as u64;
                self.queue.clear();
            } else if self.queue.len() >= self.queue_packets {
                self.drops += 1;
            } else {
                self.queue.push_back((now, d));
            }
        }
        self.start_link();
        while let Some(a) = self.rx.poll_transmit(now) {
            self.seq += 1;
            self.rev.insert((now + self.delay, self.seq), a);
        }
        while let Some(e) = self.rx.poll_event() {
            if let crate::spp::SppEvent::Delivered(d) = e {
                self.delivered_bytes += d.size_bytes;
            }
        }
        while let Some(e) = self.tx.poll_event() {
            if let NaiEvent::Outcome { id, outcome } = e {
                let p = self.priorities.get(&id.0).copied().unwrap_or(Priority::LOW);
                self.outcomes.push((now, outcome, p));
            }
        }
        self.estimates
            .push((now, self.tx.estimate().available_bytes_per_s));
    }

    fn step(&mut self, until: Time) -> bool {
        let next = [
            self.on_link.as_ref().map(|(t, _)| *t),
            self.fwd.keys().next().map(|k| k.0),
            self.rev.keys().next().map(|k| k.0),
            self.tx.poll_timeout(),
            self.bucket_wait.filter(|_| self.on_link.is_none()),
            self.schedule
                .iter()
                .map(|(t, _)| *t)
                .find(|t| *t > self.now && !self.queue.is_empty()),
        ]
        .into_iter()
        .flatten()
        .min();
        if next == Some(self.now) {
            self.same_instant += 1;
            assert!(self.same_instant < 100_000, "stuck at {}", self.now);
        } else {
            self.same_instant = 0;
        }
        let Some(t) = next.filter(|t| *t <= until) else {
            self.now = self.now.max(until);
            self.pump();
            return false;
        };
        self.now = self.now.max(t);
        let now = self.now;
        if let Some((done, _)) = &self.on_link
            && *done <= now
            && let Some((_, d)) = self.on_link.take()
        {
            self.seq += 1;
            let mut at = now + self.delay;
            if let Some(b) = self.rx_batch.map(|b| b.as_nanos().max(1) as u64) {
                at = Time::from_nanos(at.as_nanos().div_ceil(b) * b);
            }
            self.fwd.insert((at, self.seq), d);
        }
        while let Some(e) = self.fwd.first_entry() {
            if e.key().0 > now {
                break;
            }
            let d = e.remove();
            self.rx.handle_datagram(now, &d.repr, d.payload_len);
        }
        while let Some(e) = self.rev.first_entry() {
            if e.key().0 > now {
                break;
            }
            let d = e.remove();
            self.tx.handle_datagram(now, &d.repr, d.payload_len);
        }
        if self.tx.poll_timeout().is_some_and(|t| t <= now) {
            self.tx.handle_timeout(now);
        }
        self.start_link();
        self.pump();
        true
    }

    fn run_until(&mut self, until: Time) {
        self.pump();
        while self.step(until) {}
    }

    fn submit(&mut self, bytes: u64, p: Priority, timer: Option<Duration>) {
        let opts = SendOptions {
            priority: p,
            timer,
            on_expiry: OnExpiry::Discard,
        };
        match self.tx.nai_mut().submit(self.now, QueueId(0), bytes, opts) {
            Ok(id) => {
                self.priorities.insert(id.0, p);
            }
            Err(_) => self.rejected += 1,
        }
        self.pump();
    }

    /// Runs to `until`, submitting `bytes` every `every` (a light application).
    fn run_light(&mut self, until: Time, bytes: u64, every: Duration) {
        while self.now < until {
            let next = (self.now + every).min(until);
            self.run_until(next);
            if self.now < until {
                self.submit(bytes, Priority::HIGH, Some(Duration::from_secs(1)));
            }
        }
    }

    /// Queueing delays of datagrams that left the queue within `[from, to)`, sorted.
    fn waits_in(&self, from: Time, to: Time) -> Vec<Duration> {
        self.sorted_waits(from, to, false)
    }

    /// The same, of the application's DATA datagrams only.
    fn data_waits_in(&self, from: Time, to: Time) -> Vec<Duration> {
        self.sorted_waits(from, to, true)
    }

    fn sorted_waits(&self, from: Time, to: Time, data_only: bool) -> Vec<Duration> {
        let mut w: Vec<Duration> = self
            .waits
            .iter()
            .filter(|&&(t, _, data)| t >= from && t < to && (data || !data_only))
            .map(|&(_, d, _)| d)
            .collect();
        w.sort();
        w
    }

    /// Fraction of `[from, to)` the link was sending.
    fn utilisation(&self, from: Time, to: Time) -> f64 {
        let busy: u64 = self
            .busy_ns
            .range(from.as_nanos()..to.as_nanos())
            .map(|(_, b)| *b)
            .sum();
        busy as f64 / (to - from).as_nanos() as f64
    }

    /// The estimate at `t` (the last one recorded at or before it).
    fn estimate_at(&self, t: Time) -> f64 {
        self.estimates
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .map_or(0.0, |&(_, e)| e)
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

const MBIT: f64 = 125_000.0;

/// The 8 → 2 → 8 → 2 Mbit/s link of issue 18's stepped test, one step every 10 s.
const STEPPED_MBIT: [f64; 4] = [8.0, 2.0, 8.0, 2.0];

/// `STEPPED_MBIT` as a link schedule.
fn stepped_schedule() -> Vec<(Time, f64)> {
    STEPPED_MBIT
        .iter()
        .enumerate()
        .map(|(i, r)| (Time::from_secs(10 * i as u64), r * MBIT))
        .collect()
}

/// The stepped test's aim: an estimate `e` within 20 % of the rate `r`.
fn within_20_percent(e: f64, r: f64) -> bool {
    (e / r - 1.0).abs() <= 0.2
}

fn on_time(o: &Outcome) -> bool {
    matches!(
        o,
        Outcome::Delivered {
            margin: None | Some(DeadlineMargin::Early(_)),
            ..
        }
    )
}

/// A bulk sender on a 10 Mbit/s link with a 1 ms one-way delay: after its first half second,
/// the link is at least 90 % busy and 95 % of datagrams wait under 5 ms in the queue (tbf's
/// 100 ms would hold 80 packets).
#[test]
fn test_bulk_keeps_the_queue_short_and_the_link_busy() {
    let mut p = Pair::new(vec![(Time::ZERO, 10.0 * MBIT)], Duration::from_millis(1));
    p.submit(64 << 20, Priority::LOW, None);
    p.run_until(Time::from_secs(4));
    let (from, to) = (Time::from_millis(500), Time::from_secs(4));
    let waits = p.waits_in(from, to);
    let util = p.utilisation(from, to);
    let (p50, p95) = (pct(&waits, 0.5), pct(&waits, 0.95));
    assert!(util > 0.9, "utilisation {util:.3}");
    assert!(p95 < Duration::from_millis(5), "p50 {p50:?} p95 {p95:?}");
    assert_eq!(p.drops, 0);
    let est = p.tx.estimate().available_bytes_per_s;
    assert!((est / (10.0 * MBIT) - 1.0).abs() < 0.2, "estimate {est}");
}

/// An urgent 4 KB message sent during a bulk transfer is delivered within a few packet times
/// of what it takes on an idle link.
#[test]
fn test_urgent_message_under_bulk_waits_for_no_queue() {
    let rtt_idle = {
        let mut p = Pair::new(vec![(Time::ZERO, 10.0 * MBIT)], Duration::from_millis(1));
        p.run_until(Time::from_secs(1));
        p.submit(4096, Priority::HIGH, None);
        let at = p.now;
        p.run_until(Time::from_secs(2));
        p.outcomes[0].0 - at
    };
    let mut p = Pair::new(vec![(Time::ZERO, 10.0 * MBIT)], Duration::from_millis(1));
    p.submit(64 << 20, Priority::LOW, None);
    let mut loaded = Vec::new();
    for i in 0..10u64 {
        p.run_until(Time::from_millis(1_000 + 317 * i));
        let at = p.now;
        let before = p.outcomes.len();
        p.submit(4096, Priority::HIGH, None);
        while p.outcomes.len() == before && p.step(at + Duration::from_secs(1)) {}
        loaded.push(p.outcomes.last().map_or(Duration::MAX, |o| o.0 - at));
    }
    loaded.sort();
    // The aim of the real-link benchmark: within 2 ms and one packet time of idle.
    let bound = rtt_idle + Duration::from_micros(2_000 + 1_200);
    assert!(
        loaded[loaded.len() / 2] <= bound,
        "idle {rtt_idle:?}, loaded {loaded:?}"
    );
}

/// The rate steps 8 → 2 → 8 → 2 Mbit/s every 2 s under a bulk sender: the estimate is within
/// 20 % of the new rate within 1 s of each change (the real-link aim), and a fall is followed
/// within a few round trips.
#[test]
fn test_step_changes_are_tracked_by_a_bulk_sender() {
    let rates = [8.0, 2.0, 8.0, 2.0];
    let schedule: Vec<(Time, f64)> = rates
        .iter()
        .enumerate()
        .map(|(i, r)| (Time::from_secs(2 * i as u64), r * MBIT))
        .collect();
    let mut p = Pair::new(schedule, Duration::from_millis(1));
    p.submit(64 << 20, Priority::LOW, None);
    p.run_until(Time::from_secs(8));
    for (i, r) in rates.iter().enumerate() {
        let t = Time::from_secs(2 * i as u64 + 1);
        let e = p.estimate_at(t) / MBIT;
        assert!(
            (e / r - 1.0).abs() < 0.2,
            "{}s: estimate {e:.2} for {r}",
            2 * i + 1
        );
    }
    // The falls: within 100 ms (tens of round trips here) the estimate is near the new rate.
    for t in [2_100, 6_100] {
        let e = p.estimate_at(Time::from_millis(t)) / MBIT;
        assert!(e < 2.0 * 1.3, "{t} ms: {e:.2}");
    }
    assert_eq!(p.drops, 0, "the queue never overflowed");
}

/// A light application (4 KB every 50 ms, 0.66 Mbit/s) on a link stepped 8 → 2 → 8 Mbit/s:
/// the filler trains find the rise and the fall, each within 1 s, and its messages are on
/// time.
#[test]
fn test_light_application_finds_rise_and_fall() {
    let schedule = vec![
        (Time::ZERO, 8.0 * MBIT),
        (Time::from_secs(3), 2.0 * MBIT),
        (Time::from_secs(6), 8.0 * MBIT),
    ];
    let mut p = Pair::new(schedule, Duration::from_millis(1));
    p.run_light(Time::from_secs(9), 4096, Duration::from_millis(50));
    for (t, r) in [(2_000, 8.0), (4_000, 2.0), (7_000, 8.0)] {
        let e = p.estimate_at(Time::from_millis(t)) / MBIT;
        assert!((e / r - 1.0).abs() < 0.2, "{t} ms: estimate {e:.2} for {r}");
    }
    let late = p.outcomes.iter().filter(|(_, o, _)| !on_time(o)).count();
    assert_eq!(
        (late, p.rejected),
        (0, 0),
        "{:?}",
        &p.outcomes[..5.min(p.outcomes.len())]
    );
    let filler = p.tx.control().map(|c| c.stats()).unwrap_or_default();
    // Filler is bounded: under an eighth of the link's bytes while nothing rises.
    assert!(
        filler.filler_packets < 9 * 1_000_000 / 1472 / 8,
        "{filler:?}"
    );
}

/// After a bulk transfer the link idles for 20 s: the estimate never exceeds what the link
/// delivered (the issue saw 385–2,353 Mbit/s advertised on a 10 Mbit/s link).
#[test]
fn test_idle_estimate_never_exceeds_the_delivered_rate() {
    let mut p = Pair::new(vec![(Time::ZERO, 10.0 * MBIT)], Duration::from_millis(1));
    p.submit(2 << 20, Priority::LOW, None);
    p.run_until(Time::from_secs(22));
    let max = p.estimates.iter().map(|&(_, e)| e).fold(0.0, f64::max);
    assert!(
        max <= 10.0 * MBIT * 1.1,
        "max estimate {:.2} Mbit/s",
        max / MBIT
    );
    let last = p.tx.estimate().available_bytes_per_s;
    assert!(
        last >= 10.0 * MBIT * 0.8,
        "idle estimate {:.2}",
        last / MBIT
    );
}

/// Messages with deadlines submitted the instant the connection starts, on a link 70 times
/// the conservative start rate: none refused or expired for want of an estimate.
#[test]
fn test_no_refusal_or_early_expiry_before_evidence() {
    let mut p = Pair::new(vec![(Time::ZERO, 80.0 * MBIT)], Duration::from_millis(1));
    for _ in 0..20 {
        p.submit(64 * 1024, Priority::HIGH, Some(Duration::from_millis(200)));
    }
    p.run_until(Time::from_secs(2));
    assert_eq!(p.rejected, 0);
    assert_eq!(p.outcomes.len(), 20);
    assert!(
        p.outcomes.iter().all(|(_, o, _)| on_time(o)),
        "{:?}",
        p.outcomes
    );
}

/// The link stops for 2 s under a bulk sender: the estimate falls (the path is stalled), the
/// queue stays bounded by the window, and the rate is found again within a second after.
#[test]
fn test_outage_lowers_the_estimate_and_it_regrows() {
    let schedule = vec![
        (Time::ZERO, 8.0 * MBIT),
        (Time::from_secs(2), 0.0),
        (Time::from_secs(4), 8.0 * MBIT),
    ];
    let mut p = Pair::new(schedule, Duration::from_millis(1));
    p.submit(64 << 20, Priority::LOW, None);
    p.run_until(Time::from_secs(6));
    let during = p.estimate_at(Time::from_millis(3_000)) / MBIT;
    assert!(during < 1.0, "estimate during the outage {during:.3}");
    let after = p.estimate_at(Time::from_millis(5_000)) / MBIT;
    assert!((after / 8.0 - 1.0).abs() < 0.2, "after {after:.2}");
    assert!(
        p.queue.len() < 100 && p.drops == 0,
        "{} {}",
        p.queue.len(),
        p.drops
    );
}

/// Regression (seen on a tbf-shaped veth): a bulk transfer started after a light start on a
/// path of a few tens of microseconds behind a token bucket. The first delivery-rate spans
/// reached back into the idle time before the transfer, counted as the path's, and the
/// estimate ratcheted down to 0.3 Mbit/s. It converges on the shaped rate instead, and the
/// bucket's bursts (which let filler trains through at line rate) are corrected by the queue.
#[test]
fn test_bulk_after_a_light_start_behind_a_token_bucket_converges() {
    let mut p =
        Pair::new(vec![(Time::ZERO, 10.0 * MBIT)], Duration::from_micros(25)).with_bucket(16_384.0);
    for i in 0..5u64 {
        p.run_until(Time::from_millis(100 * i));
        p.submit(4096, Priority::HIGH, None);
    }
    p.run_until(Time::from_millis(600));
    p.submit(64 << 20, Priority::LOW, None);
    p.run_until(Time::from_millis(2_000));
    let e = p.tx.estimate().available_bytes_per_s / MBIT;
    assert!((e / 10.0 - 1.0).abs() < 0.2, "estimate {e:.2}");
    let waits = p.waits_in(Time::from_millis(1_000), Time::from_millis(2_000));
    // Datagrams through the bucket in that second, against its rate.
    let util = waits.len() as f64 * 1472.0 / (10.0 * MBIT);
    assert!(util > 0.85, "utilisation {util:.3}");
    assert!(
        pct(&waits, 0.95) < Duration::from_millis(15),
        "{:?}",
        pct(&waits, 0.95)
    );
}

/// Regression (the emulated synthetic trace's zero-rate stretch, `outage-emulated.sh`): the
/// sender's direction carries nothing for 15 s while the return direction stays up, under a
/// light application with deadlines (4 KB every 50 ms, 1 s timers, on a 200 KB/s link with the
/// emulator's 50-packet queue). The estimate halves at every stall to nearly nothing, every
/// message is then refused, and only filler trains can find the rate again: it is within
/// 20 % of the link's rate within 2 s of the rate's return, and stays there; while the
/// direction is dead the filler sends no more than a few trains a second.
#[test]
fn test_one_way_outage_is_recovered_within_two_seconds() {
    let rate = 200.0 * 1024.0;
    let (down, up) = (Time::from_secs(8), Time::from_secs(23));
    let schedule = vec![(Time::ZERO, rate), (down, 0.0), (up, rate)];
    let mut p = Pair::new(schedule, Duration::from_millis(2)).with_queue(50);
    p.run_light(down, 4096, Duration::from_millis(50));
    let before = p.tx.control().map(|c| c.stats()).unwrap_or_default();
    p.run_light(up, 4096, Duration::from_millis(50));
    let during = p.tx.control().map(|c| c.stats()).unwrap_or_default();
    p.run_light(Time::from_secs(30), 4096, Duration::from_millis(50));
    let low = p.estimate_at(up - Duration::from_millis(1));
    let near = |e: f64| (e / rate - 1.0).abs() < 0.2;
    let back = p
        .estimates
        .iter()
        .find(|&&(t, e)| t >= up && near(e))
        .map(|&(t, _)| t - up);
    eprintln!(
        "estimate at the return {:.1} kB/s; back within 20 % after {back:?}",
        low / 1e3
    );
    assert!(low < 0.2 * rate, "the outage lowered the estimate: {low}");
    let back = back.expect("the rate was found again");
    assert!(back <= Duration::from_secs(2), "back after {back:?}");
    for t in [up + Duration::from_secs(3), Time::from_secs(30)] {
        let e = p.estimate_at(t);
        assert!(near(e), "{t}: {:.1} kB/s", e / 1e3);
    }
    // Into the dead direction: once the first stall of the outage showed the path silent,
    // only pings (two bare PROBE headers at intervals of 0.5 s, then 1 s: at most 2 + 15 of
    // them in 15 s), never a full-size datagram; before it at most the one full train that
    // was under way. Each datagram counted with 48 B of UDP/IPv6 headers.
    let dead: Vec<(Time, usize, u64)> = p
        .probes
        .iter()
        .copied()
        .filter(|&(t, _, _)| t >= down && t < up)
        .collect();
    let silent: Vec<(Time, usize, u64)> = dead
        .iter()
        .copied()
        .filter(|&(_, _, stalls)| stalls > before.stalls)
        .collect();
    let full = dead.len() - silent.len();
    assert!(
        full <= 8,
        "{full} full-size datagrams before the first stall"
    );
    assert!(
        silent.iter().all(|&(_, len, _)| len < 64),
        "a full-size probe after the first stall: {silent:?}"
    );
    let pings = during.filler_pings - before.filler_pings;
    assert!(pings <= 17, "{pings} pings in 15 s");
    let bytes = |v: &[(Time, usize, u64)]| v.iter().map(|&(_, len, _)| len + 48).sum::<usize>();
    let (all_rate, silent_rate) = (bytes(&dead) as f64 / 15.0, bytes(&silent) as f64 / 15.0);
    eprintln!(
        "filler into the dead direction: {all_rate:.0} B/s ({full} full-size datagrams), \
         after the first stall {silent_rate:.0} B/s ({pings} pings)"
    );
    assert!(all_rate < 1_000.0, "{all_rate} B/s");
    assert!(silent_rate < 150.0, "{silent_rate} B/s");
}

/// Regression (the Table 2 workloads on the stepped tbf link: 17–18 Mbit/s advertised on a
/// 2 Mbit/s link): a light application on a link stepped 8 → 2 → 8 Mbit/s behind a 16 KB token
/// bucket (tbf's `burst`), whose filler trains (8 × 1.5 KB) fit the bucket and cross it at
/// line rate. A rise is believed only when a second, longer train sent right after confirms
/// it, and a train is judged by its second half too: the estimate stays within 2× the rate
/// (it reached the bucket's 1 Gbit/s line rate before), and is near it most of the time.
#[test]
fn test_light_application_behind_a_token_bucket_does_not_inflate_the_estimate() {
    for delay in [Duration::from_micros(25), Duration::from_millis(1)] {
        for (bytes, every) in [(4096, 50), (1024, 100)] {
            let schedule = vec![
                (Time::ZERO, 8.0 * MBIT),
                (Time::from_secs(5), 2.0 * MBIT),
                (Time::from_secs(10), 8.0 * MBIT),
            ];
            let mut p = Pair::new(schedule, delay).with_bucket(16_384.0);
            p.run_light(Time::from_secs(15), bytes, Duration::from_millis(every));
            for (from, to, rate) in [
                (1_000, 5_000, 8.0),
                (6_000, 10_000, 2.0),
                (11_000, 15_000, 8.0),
            ] {
                // Every 10 ms of the phase, from a second after its change.
                let mut e: Vec<f64> = (from / 10..to / 10)
                    .map(|t| p.estimate_at(Time::from_millis(10 * t)) / MBIT)
                    .collect();
                e.sort_by(f64::total_cmp);
                let (median, max) = (e[e.len() / 2], e[e.len() - 1]);
                let case = format!("{delay:?}, {bytes} B every {every} ms, {rate} Mbit/s");
                assert!(max <= 2.0 * rate, "{case}: max {max:.2}");
                assert!(
                    (median / rate - 1.0).abs() < 0.3,
                    "{case}: median {median:.2}"
                );
            }
        }
    }
}

/// Regression (Table 2's `filesystem` on a 1 Mbit/s tbf link: the estimate ratcheted 1 → 1.7 →
/// 7.2 → 13.8 Mbit/s over a few 64 KB messages, each built a 140–240 ms queue, and low-priority
/// messages were refused): a 64 KB message every second behind a 16 KB token bucket. The
/// first datagrams of each message cross the bucket at line rate; neither application-limited
/// samples nor a return to STARTUP may take the estimate far beyond what the path was shown to
/// sustain, so the estimate stays near the rate.
#[test]
fn test_bursts_that_fit_a_token_bucket_do_not_ratchet_the_estimate() {
    for delay in [Duration::from_micros(25), Duration::from_millis(2)] {
        let mut p = Pair::new(vec![(Time::ZERO, MBIT)], delay).with_bucket(16_384.0);
        p.run_light(Time::from_secs(20), 65_536, Duration::from_millis(1000));
        let mut e: Vec<f64> = (200..2000)
            .map(|t| p.estimate_at(Time::from_millis(10 * t)) / MBIT)
            .collect();
        e.sort_by(f64::total_cmp);
        let (median, p99) = (e[e.len() / 2], e[e.len() * 99 / 100]);
        // Before: p99 10.75 / 10.88 Mbit/s; after: 2.52 / 2.34. What remains is a 4-packet
        // delivery-rate span that holds the pacer's two-packet burst, until the queue reacts.
        assert!(p99 <= 3.0, "{delay:?}: p99 {p99:.2} Mbit/s");
        assert!((median - 1.0).abs() < 0.2, "{delay:?}: median {median:.2}");
    }
}

/// Regression (the emulated Table 2 on `synthetic-5min`: the estimate stayed near zero for
/// 40–60 s after a 30-s stretch of zero rate): a light application, the rate falling to zero
/// over 10 s and the link down for 30 s (what is sent into it is lost), then back at 410
/// kbit/s. DATA lost in the outage stays counted in flight until the retransmission timer
/// gives it up; the filler's pings and trains must not wait for that, and a train's report
/// must not be followed by a stall that halves what it measured. The estimate is back within
/// 3 s (before: 31 s).
#[test]
fn test_light_application_finds_the_path_again_after_a_long_link_down() {
    let schedule = fall_then_outage(204_800.0, 10, 10, 30, 51_200.0);
    let mut p = Pair::new(schedule, Duration::from_millis(2));
    p.down_loses = true;
    p.run_light(Time::from_secs(80), 2048, Duration::from_millis(100));
    let during = p.estimate_at(Time::from_secs(45));
    assert!(during < 5_000.0, "during the outage {during:.0} B/s");
    p.assert_back_at(Time::from_millis(53_000), Time::from_secs(80), 51_200.0);
}

/// A link at `rate` (bytes/s) that falls linearly to nothing over `fall_s` seconds from
/// `from_s`, carries nothing for `down_s` seconds, and comes back at `back`.
fn fall_then_outage(
    rate: f64,
    from_s: u64,
    fall_s: u64,
    down_s: u64,
    back: f64,
) -> Vec<(Time, f64)> {
    let mut schedule = vec![(Time::ZERO, rate)];
    for i in 0..fall_s {
        schedule.push((
            Time::from_secs(from_s + i),
            rate * (1.0 - i as f64 / fall_s as f64),
        ));
    }
    schedule.push((Time::from_secs(from_s + fall_s), 0.0));
    schedule.push((Time::from_secs(from_s + fall_s + down_s), back));
    schedule
}

impl Pair {
    /// Over `[from, to)` (sampled every 100 ms) the estimate's median is within 20 % of
    /// `rate` and its 10th percentile above 45 % of it.
    fn assert_back_at(&self, from: Time, to: Time, rate: f64) {
        let (from, to) = (from.as_nanos() / 100_000_000, to.as_nanos() / 100_000_000);
        let mut after: Vec<f64> = (from..to)
            .map(|t| self.estimate_at(Time::from_millis(100 * t)) / rate)
            .collect();
        after.sort_by(f64::total_cmp);
        let (p10, median) = (after[after.len() / 10], after[after.len() / 2]);
        assert!((median - 1.0).abs() < 0.2, "median {median:.2} of the rate");
        assert!(p10 > 0.45, "10th percentile {p10:.2} of the rate");
    }
}

/// The emulated Table 2's outage, with the link holding what it had (the emulator's queue
/// waits for the rate to return, as a base station's buffer does): the rate falls from 100 KB/s
/// to nothing over 30 s, stays at nothing for 30 s, and comes back at 50 KB/s. The packets
/// held through the stretch come back with 30-s RTTs; the smoothed RTT built on them reached
/// 22 s, and a lost ping's grace (two smoothed RTTs) kept the filler waiting 44 s with the path
/// back and the estimate at 271 B/s (every message refused) — 70 s in the emulated run. A
/// train's grace is now at most the silent filler's longest ping interval.
#[test]
fn test_light_application_finds_the_path_again_after_an_outage_that_held_its_packets() {
    let schedule = fall_then_outage(102_400.0, 10, 30, 30, 51_200.0);
    let mut p = Pair::new(schedule, Duration::from_millis(2)).with_queue(50);
    p.run_light(Time::from_secs(110), 4096, Duration::from_millis(500));
    let stalls = p.tx.control().map_or(0, |c| c.stats().stalls);
    assert!(stalls > 0, "the stretch of nothing was not noticed");
    p.assert_back_at(Time::from_secs(75), Time::from_secs(110), 51_200.0);
    // The held packets' samples stay in the smoothed RTT (the RTO needs them), and the
    // samples of the returned path bring it back down.
    let srtt = p.tx.control().and_then(|c| c.srtt).unwrap_or_default();
    assert!(
        srtt < Duration::from_secs(1),
        "smoothed RTT {srtt:?} after the outage"
    );
    // From 75 s on, 4 KB every half second fits the returned link: none refused or late.
    let late = p
        .outcomes
        .iter()
        .filter(|(t, o, _)| *t >= Time::from_secs(76) && !on_time(o))
        .count();
    assert_eq!(late, 0);
}

/// Regression (issue 18's stepped link: "within 20 % of the new rate within 1 s of each
/// change" met at 10–13 of 18 changes; behind tbf's 16 KB bucket the filler's trains and its
/// confirmations passed at line rate, and the estimate rode a sawtooth up to +60 % above the
/// rate): light applications on 8 → 2 → 8 → 2 Mbit/s behind the bucket, the receiver reading
/// every 1.5 ms. A confirming train long and fast enough to empty the bucket, judged by its
/// last quarter, measures the rate: after every change the estimate is within 20 % of the new
/// rate before a second has passed, and the median of the next second is too. Not met, and so
/// not asserted, for 16 KB every 200 ms: the application's own messages fill the bucket's
/// size, cross it at line rate, and their samples lift the estimate between confirmations
/// (at 100 µs the second drop is within 20 % only at +1.2 s; `stepped_link_sweep` prints
/// every case, and `EXPERIMENTS.md` has the numbers).
#[test]
fn test_light_application_behind_a_token_bucket_follows_each_step_within_a_second() {
    for delay in [Duration::from_micros(100), Duration::from_millis(1)] {
        for (bytes, every) in [(4096, 50), (1024, 20)] {
            let mut p = Pair::new(stepped_schedule(), delay)
                .with_bucket(16_384.0)
                .with_rx_batch(Duration::from_micros(1500));
            p.run_light(Time::from_secs(32), bytes, Duration::from_millis(every));
            for (i, r) in STEPPED_MBIT.iter().enumerate().skip(1) {
                let change = 10_000 * i as u64;
                let case =
                    format!("{delay:?}, {bytes} B every {every} ms, {r} Mbit/s from {change} ms");
                let first = (change / 10..=(change + 1000) / 10)
                    .map(|t| Time::from_millis(10 * t))
                    .find(|&t| within_20_percent(p.estimate_at(t) / MBIT, *r));
                assert!(first.is_some(), "{case}: not within 20 % by +1 s");
                let mut next: Vec<f64> = ((change + 1000) / 10..(change + 2000) / 10)
                    .map(|t| p.estimate_at(Time::from_millis(10 * t)) / MBIT)
                    .collect();
                next.sort_by(f64::total_cmp);
                let median = next[next.len() / 2];
                assert!(
                    within_20_percent(median, *r),
                    "{case}: median {median:.2} from +1 s to +2 s"
                );
            }
            assert_eq!(p.rejected, 0);
        }
    }
}

/// Not a check: the measurement behind `EXPERIMENTS.md`'s stepped-link table. Light
/// applications on a link stepped 8 → 2 → 8 → 2 Mbit/s every 10 s behind tbf's 16 KB bucket,
/// the receiver reading every 1.5 ms (or at once); per change, whether the estimate is within
/// 20 % of the new rate at +1 s, and the share of 10-ms points from +1 s to the next change
/// within 20 %; with the filler's bytes and the queueing delay it cost.
/// `cargo test -p adaptnet-core --release stepped_link_sweep -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, printed; run by hand"]
fn stepped_link_sweep() {
    let rates = STEPPED_MBIT;
    let apps: [(u64, u64); 6] = [
        (4096, 50),
        (16_384, 200),
        (1024, 20),
        (65_536, 1000),
        (8192, 100),
        (2048, 40),
    ];
    let delays = [Duration::from_micros(100), Duration::from_millis(1)];
    let run = Time::from_secs(40);
    for batch in [None, Some(Duration::from_micros(1500))] {
        let (mut at_1s, mut changes, mut points, mut inside) = (0, 0, 0u64, 0u64);
        let (mut probe_bytes, mut late, mut waits) = (0usize, 0usize, Vec::new());
        let mut stalls = 0u64;
        for delay in delays {
            for (bytes, every) in apps {
                let mut p = Pair::new(stepped_schedule(), delay).with_bucket(16_384.0);
                if let Some(b) = batch {
                    p = p.with_rx_batch(b);
                }
                p.run_light(run, bytes, Duration::from_millis(every));
                let mut row = Vec::new();
                for (i, r) in rates.iter().enumerate().skip(1) {
                    let change = 10_000 * i as u64;
                    let e = p.estimate_at(Time::from_millis(change + 1000)) / MBIT;
                    changes += 1;
                    at_1s += usize::from(within_20_percent(e, *r));
                    row.push(format!("{:+.0} %", (e / r - 1.0) * 100.0));
                    for t in (change + 1000) / 10..(change + 10_000) / 10 {
                        let e = p.estimate_at(Time::from_millis(10 * t)) / MBIT;
                        points += 1;
                        inside += u64::from(within_20_percent(e, *r));
                    }
                }
                probe_bytes += p.probes.iter().map(|&(_, len, _)| len).sum::<usize>();
                stalls += p.tx.control().map_or(0, |c| c.stats().stalls);
                late +=
                    p.outcomes.iter().filter(|(_, o, _)| !on_time(o)).count() + p.rejected as usize;
                let data_waits = p.data_waits_in(Time::from_secs(1), run);
                println!(
                    "  {batch:?} {delay:?} {bytes} B / {every} ms: +1 s {}; DATA's longest wait {:?}",
                    row.join(" / "),
                    data_waits.last().copied().unwrap_or_default(),
                );
                waits.extend(data_waits);
            }
        }
        waits.sort();
        println!(
            "rx batch {batch:?}: within 20 % at +1 s {at_1s} of {changes}; time within 20 % \
             {:.1} %; filler {:.1} kB/s; late or refused {late}; stalls {stalls}; DATA's queue wait p99 {:?}, max {:?}",
            100.0 * inside as f64 / points as f64,
            probe_bytes as f64 / ((delays.len() * apps.len()) as f64 * run.as_secs_f64()) / 1e3,
            pct(&waits, 0.99),
            waits.last().copied().unwrap_or_default(),
        );
    }
}
