//! The rate control alone, fed acknowledgements by hand.

use super::*;
use crate::spp::SppRepr;
use crate::spp::wire::ProbeHeader;

const MTU: u16 = 1472;

fn control() -> RateControl {
    RateControl::new(ControlConfig::default(), MTU, Time::ZERO)
}

/// Feeds `c` a path of `rate` bytes/s and `rtt` from `from` for `span`: one datagram sent and
/// one acknowledged per datagram time, each acknowledgement an RTT after its send, plus
/// `queue` of extra delay.
fn drive(
    c: &mut RateControl,
    from: Time,
    span: Duration,
    rate: f64,
    rtt: Duration,
    queue: Duration,
) -> Time {
    let step = Duration::from_secs_f64(f64::from(MTU) / rate);
    let mut now = from;
    while now < from + span {
        c.on_sent(now, u64::from(MTU));
        c.set_in_flight(4);
        c.on_ack(now, u64::from(MTU), Some(rtt + queue));
        now += step;
    }
    now
}

/// A control that has run a second on a 1 MB/s path of RTT `rtt`, and the time then.
fn at_one_megabyte(rtt: Duration) -> (RateControl, Time) {
    let mut c = control();
    let one_second = Duration::from_secs(1);
    let now = drive(&mut c, Time::ZERO, one_second, 1e6, rtt, Duration::ZERO);
    (c, now)
}

#[test]
fn test_no_estimate_before_evidence_and_startup_paces_above_the_start_rate() {
    let c = control();
    assert_eq!(c.estimate(), None);
    assert_eq!(c.phase(), Phase::Startup);
    let start = ControlConfig::default().initial_rate_bytes_per_s;
    assert!(c.pacing_rate() > 2.0 * start);
    assert_eq!(
        c.cwnd_bytes(),
        10 * u64::from(MTU),
        "RFC 6928's window before any RTT"
    );
}

#[test]
fn test_a_standing_queue_resets_the_estimate_to_the_delivery_rate_and_drains() {
    let rtt = Duration::from_millis(10);
    let (mut c, now) = at_one_megabyte(rtt);
    let before = c.bottleneck_bytes_per_s();
    assert!((before / 1e6 - 1.0).abs() < 0.05, "{before}");
    // The path halves and a queue of 20 ms stands.
    drive(
        &mut c,
        now,
        Duration::from_millis(200),
        5e5,
        rtt,
        Duration::from_millis(20),
    );
    let after = c.estimate().expect("evidence");
    assert!((after / 5e5 - 1.0).abs() < 0.1, "{after}");
    assert!(c.stats().queue_reactions >= 1);
}

#[test]
fn test_application_limited_samples_do_not_lower_the_estimate() {
    let rtt = Duration::from_millis(10);
    let (mut c, now) = at_one_megabyte(rtt);
    let full = c.bottleneck_bytes_per_s();
    // The application now sends a tenth of that, leaving the pacer idle each time.
    let mut t = now;
    for _ in 0..200 {
        c.on_app_limited();
        c.on_sent(t, u64::from(MTU));
        c.on_ack(t, u64::from(MTU), Some(rtt));
        t += Duration::from_secs_f64(f64::from(MTU) / 1e5);
    }
    assert_eq!(c.bottleneck_bytes_per_s(), full);
}

#[test]
fn test_stalled_path_halves_the_estimate_per_period() {
    let rtt = Duration::from_millis(10);
    let (mut c, now) = at_one_megabyte(rtt);
    c.on_sent(now, u64::from(MTU));
    c.set_in_flight(10);
    let full = c.bottleneck_bytes_per_s();
    let mut t = now;
    for _ in 0..3 {
        t = c.poll_timeout().expect("a stall check");
        c.handle_timeout(t);
    }
    let left = c.bottleneck_bytes_per_s();
    assert!((left - full / 8.0).abs() < 1.0, "{full} -> {left}");
    assert_eq!(c.stats().stalls, 3);
    assert_eq!(c.phase(), Phase::Startup, "regrows by startup");
    assert!(t < now + Duration::from_secs(1));
}

#[test]
fn test_filler_train_verdicts() {
    let rtt = Duration::from_millis(10);
    let (mut c, now) = at_one_megabyte(rtt);
    assert!(c.wants_filler(now));
    let mut t = now;
    let mut sent = Vec::new();
    while let Some(d) = c.poll_filler(t) {
        let len = d.wire_len() as f64;
        sent.push((t, d));
        t += Duration::from_secs_f64(len / c.pacing_rate());
    }
    assert_eq!(sent.len(), 8);
    let SppRepr::Probe(first) = sent[0].1.repr else {
        panic!("a probe")
    };
    // Arrived at 600 kB/s: the bottleneck (it left at 1.25 MB/s).
    c.on_report(t, &report_at(first.probe_id, 6e5));
    let e = c.estimate().expect("calibrated");
    assert!((e / 6e5 - 1.0).abs() < 0.01, "{e}");
    assert!(!c.wants_filler(t), "the next train waits an interval");
    assert_eq!(c.stats().filler_capacity_samples, 1);
}

/// Regression (a loaded host): acknowledgements held back and then read in one batch look
/// like a path tens of times faster. Samples are capped at 1.25 times the fastest pacing
/// rate of the window, so the estimate does not jump with them.
#[test]
fn test_bunched_acknowledgements_do_not_inflate_the_estimate() {
    let rtt = Duration::from_millis(10);
    let (mut c, now) = at_one_megabyte(rtt);
    let before = c.bottleneck_bytes_per_s();
    // 40 datagrams sent at the pace, then all acknowledged within 100 µs.
    let mut t = now;
    for _ in 0..40 {
        c.on_sent(t, u64::from(MTU));
        t += Duration::from_secs_f64(f64::from(MTU) / c.pacing_rate());
    }
    for i in 0..40u64 {
        c.on_ack(t + Duration::from_micros(2 * i), u64::from(MTU), Some(rtt));
    }
    let after = c.bottleneck_bytes_per_s();
    assert!(after <= 1.25 * 1.25 * before, "{before} -> {after}");
}

/// Collapses `c`'s estimate with twelve stalls (an outage under data in flight) and returns
/// the time after them.
fn collapse(c: &mut RateControl, now: Time) -> Time {
    c.on_sent(now, u64::from(MTU));
    c.set_in_flight(10);
    let mut t = now;
    for _ in 0..12 {
        t = c.poll_timeout().expect("a stall check");
        c.handle_timeout(t);
    }
    t
}

/// Runs `c`'s timers and filler (no report ever arrives) from `from` to `to`; every filler
/// datagram with its time. Datagrams of a train go 10 µs apart.
fn run_unanswered(c: &mut RateControl, from: Time, to: Time) -> Vec<(Time, SppDatagram)> {
    let mut t = from;
    let mut sent = Vec::new();
    loop {
        while let Some(d) = c.poll_filler(t) {
            sent.push((t, d));
            t += Duration::from_micros(10);
        }
        let next = [c.poll_timeout(), c.filler_due()]
            .into_iter()
            .flatten()
            .min()
            .expect("a timer");
        if next >= to {
            return sent;
        }
        t = t.max(next);
        c.handle_timeout(t);
    }
}

/// Answers the last of the pings `sent` (by [`run_unanswered`] from `from`) `late` after the
/// filler is next due; returns when.
fn answer_last_ping(
    c: &mut RateControl,
    sent: &[(Time, SppDatagram)],
    from: Time,
    late: Duration,
) -> Time {
    let (_, id, _) = *trains(sent).last().expect("pings");
    let last_sent = sent.last().expect("pings").0;
    let t = c.filler_due().map_or(last_sent, |d| d.max(from)) + late;
    c.handle_timeout(t);
    c.on_report(
        t,
        &ProbeReport {
            probe_id: id,
            gap_ns: 1_000,
            bytes: 7,
        },
    );
    t
}

/// The probe id and index of a filler datagram.
fn probe(d: &SppDatagram) -> ProbeHeader {
    let SppRepr::Probe(h) = d.repr else {
        panic!("a probe: {d:?}")
    };
    h
}

/// The first datagram's time and the probe id of each train in `sent`.
fn trains(sent: &[(Time, SppDatagram)]) -> Vec<(Time, u32, usize)> {
    let mut out: Vec<(Time, u32, usize)> = Vec::new();
    for (t, d) in sent {
        let h = probe(d);
        match out.last_mut() {
            Some(last) if last.1 == h.probe_id => last.2 += 1,
            _ => out.push((*t, h.probe_id, 1)),
        }
    }
    out
}

/// After an outage's stalls collapse the estimate, the filler is silent: it sends only pings
/// (two PROBE datagrams without padding) at intervals doubling from
/// `filler_outage_interval` up to `filler_silent_max_interval`, never a full-size datagram.
/// A ping's report ends the silence: a full train follows at once, paced from the rate
/// before the outage, and its verdict measures the path.
#[test]
fn test_collapsed_filler_pings_small_and_backed_off_then_a_full_train_measures() {
    let rtt = Duration::from_millis(10);
    let (mut c, now) = at_one_megabyte(rtt);
    let full = c.bottleneck_bytes_per_s();
    let t = collapse(&mut c, now);
    assert!(c.bottleneck_bytes_per_s() < full / 1000.0);
    let config = ControlConfig::default();
    let sent = run_unanswered(&mut c, t, t + Duration::from_secs(10));
    assert!(
        sent.iter().all(|(_, d)| d.payload_len == 0),
        "only unpadded pings"
    );
    let pings = trains(&sent);
    assert!(pings.iter().all(|p| p.2 == 2), "{pings:?}");
    let gaps: Vec<Duration> = pings.windows(2).map(|w| w[1].0 - w[0].0).collect();
    let mut want = config.filler_outage_interval;
    for g in &gaps {
        assert!(g.abs_diff(want) < Duration::from_millis(1), "gaps {gaps:?}");
        want = (want * 2).min(config.filler_silent_max_interval);
    }
    // 0.5 s, then the 1 s cap: about ten pings in 10 s (plus the first, at the stall).
    assert!((9..=12).contains(&pings.len()), "{pings:?}");
    assert_eq!(c.stats().filler_pings, pings.len() as u64);
    // The last ping is answered (late, past its grace): the full train goes at once.
    let mut t = answer_last_ping(&mut c, &sent, t, Duration::from_millis(300));
    assert_eq!(c.filler_due(), Some(t), "a full train at once");
    let mut first = None;
    let mut n = 0;
    while let Some(d) = c.poll_filler(t) {
        assert_eq!(d.wire_len(), usize::from(MTU));
        if first.is_none() {
            // The train's first datagram fixed its pace: the rate before the outage.
            assert!(c.pacing_rate() >= full, "{} < {full}", c.pacing_rate());
        }
        first.get_or_insert(d);
        n += 1;
        t += Duration::from_micros(100);
    }
    assert_eq!(n, 8);
    let h = probe(&first.expect("a train"));
    c.on_report(t, &report_at(h.probe_id, 6e5));
    let e = c.estimate().expect("calibrated");
    assert!((e / 6e5 - 1.0).abs() < 0.01, "{e}");
    assert_eq!(c.stats().filler_capacity_samples, 1);
}

/// An idle sender whose full train gets no report at all goes silent: pings only, backed
/// off, until the path answers — here an acknowledgement of DATA — and then a full train
/// at once.
#[test]
fn test_unanswered_train_turns_the_idle_filler_to_pings_until_the_path_answers() {
    let rtt = Duration::from_millis(10);
    let (mut c, now) = at_one_megabyte(rtt);
    c.set_in_flight(0);
    let sent = run_unanswered(&mut c, now, now + Duration::from_secs(4));
    let all = trains(&sent);
    assert_eq!(all[0].2, 8, "a full train first: {all:?}");
    assert!(
        sent[..8]
            .iter()
            .all(|(_, d)| d.wire_len() == usize::from(MTU))
    );
    assert!(all.len() >= 4, "{all:?}");
    assert!(all[1..].iter().all(|p| p.2 == 2), "then pings: {all:?}");
    assert!(sent[8..].iter().all(|(_, d)| d.payload_len == 0));
    // The first ping within the outage interval of the train's grace; then 0.5 s, 1 s, 1 s.
    let outage = ControlConfig::default().filler_outage_interval;
    assert!(
        all[1].0 - all[0].0 <= outage + Duration::from_millis(30),
        "{all:?}"
    );
    assert!((all[2].0 - all[1].0).abs_diff(outage) < Duration::from_millis(1));
    for w in all[2..].windows(2) {
        assert!((w[1].0 - w[0].0).abs_diff(2 * outage) < Duration::from_millis(1));
    }
    // DATA goes out and is acknowledged: the path answers, a full train is due at once.
    let mut t = sent[sent.len() - 1].0 + Duration::from_millis(50);
    c.handle_timeout(t);
    c.on_sent(t, u64::from(MTU));
    t += rtt;
    c.on_ack(t, u64::from(MTU), Some(rtt));
    c.set_in_flight(0);
    assert_eq!(c.filler_due(), Some(t));
    let d = c.poll_filler(t).expect("a full train");
    assert_eq!(d.wire_len(), usize::from(MTU));
}

/// A lossy path answers: a train that lost its last datagram gets a partial report, gives
/// no verdict, and the filler stays with full trains at their usual interval.
#[test]
fn test_a_partial_report_does_not_silence_the_filler() {
    let rtt = Duration::from_millis(10);
    let (mut c, now) = at_one_megabyte(rtt);
    c.set_in_flight(0);
    let mut t = now;
    for _ in 0..3 {
        let next = c.filler_due().expect("a train is due");
        t = t.max(next);
        let mut sent = Vec::new();
        while let Some(d) = c.poll_filler(t) {
            sent.push(d);
            t += Duration::from_micros(100);
        }
        assert_eq!(sent.len(), 8, "a full train");
        assert!(sent.iter().all(|d| d.wire_len() == usize::from(MTU)));
        // Datagram 7 was lost: the receiver's last report covers 1..=6.
        let mut r = report_at(probe(&sent[0]).probe_id, 6e5);
        r.bytes = r.bytes / 7 * 6;
        c.on_report(t + rtt, &r);
        t = c.poll_timeout().expect("the report is overdue");
        c.handle_timeout(t);
    }
    assert_eq!(c.stats().filler_pings, 0);
    assert_eq!(c.stats().filler_capacity_samples, 0);
}

/// The receiver's report of a whole 8-datagram train that arrived at `rate` bytes/s.
fn report_at(probe_id: u32, rate: f64) -> ProbeReport {
    // A train's datagrams are full-size.
    let size = u32::from(MTU);
    ProbeReport {
        probe_id,
        bytes: 7 * size,
        gap_ns: (7.0 * f64::from(size) / rate * 1e9) as u64,
    }
}

/// On a path whose acknowledgements come in batches (a host that reads and sends a batch
/// per wake-up: loopback's round trip is microseconds of propagation and hundreds of
/// batching), the cap on bytes in flight covers a batch (BBR's `extra_acked`), and at a
/// gigabyte a second it is never below three 64 KB send quanta.
#[test]
fn test_the_cap_in_flight_covers_batched_acknowledgements() {
    let mut c = control();
    let rate = 1e9; // bytes/s
    let min_rtt = Duration::from_micros(10);
    // Prime the path at the rate with a 10 µs RTT, one acknowledgement per datagram.
    let now = drive(
        &mut c,
        Time::ZERO,
        Duration::from_millis(20),
        rate,
        min_rtt,
        Duration::ZERO,
    );
    let bdp = rate * min_rtt.as_secs_f64();
    let plain = 2.0 * bdp + 10.0 * f64::from(MTU);
    assert!(
        c.cwnd_bytes() as f64 >= 3.0 * 65_536.0 - 1.0,
        "three send quanta: {} (two BDPs and ten packets would be {plain})",
        c.cwnd_bytes()
    );
    // Then every 400 µs one batch acknowledges 270 datagrams (the rate over the batch's
    // period) within 20 µs.
    let mut t = now;
    for _ in 0..50 {
        for i in 0..270u64 {
            c.on_sent(t, u64::from(MTU));
            c.on_ack(
                t + Duration::from_nanos(75 * i),
                u64::from(MTU),
                Some(min_rtt),
            );
        }
        t += Duration::from_micros(400);
    }
    let cap = c.cwnd_bytes() as f64;
    assert!(cap >= 200.0 * f64::from(MTU), "cap {cap} below a batch");
    assert!(
        cap <= 2.0 * (270.0 * f64::from(MTU)) + 3.0 * 65_536.0,
        "cap {cap}"
    );
}

/// On a slow path with acknowledgements at the bottleneck's pace (a 10 Mbit/s link), the
/// allowances add at most a datagram or two to the cap: short queues stay short.
#[test]
fn test_the_allowances_leave_a_slow_paths_cap_alone() {
    let rtt = Duration::from_millis(2);
    let mut c = control();
    let rate = 1.25e6;
    drive(
        &mut c,
        Time::ZERO,
        Duration::from_secs(2),
        rate,
        rtt,
        Duration::ZERO,
    );
    let bw = c.bottleneck_bytes_per_s();
    let plain = 2.0 * bw * rtt.as_secs_f64() + 10.0 * f64::from(MTU);
    let cap = c.cwnd_bytes() as f64;
    assert!(
        cap <= plain + 2.0 * f64::from(MTU),
        "cap {cap} against {plain}"
    );
}

/// A side that never sent the application's data (a server that only receives) sends no
/// filler: it needs no estimate, and trains would take a share of the path for as long as
/// the connection lasts. Its first DATA starts the filler.
#[test]
fn test_no_filler_before_the_application_sends() {
    let mut c = control();
    let mut t = Time::ZERO;
    while t < Time::from_secs(10) {
        assert!(
            c.poll_filler(t).is_none(),
            "filler at {t} with nothing sent"
        );
        assert!(c.filler_due().is_none());
        t += Duration::from_millis(50);
    }
    one_datagram_acked(&mut c, t, Duration::from_millis(10));
    assert!(c.filler_due().is_some());
    assert!(c.poll_filler(t + Duration::from_millis(10)).is_some());
}

/// A train the link took, but no faster than the estimate (this host could not pace it
/// faster: loopback): the next train waits the usual interval instead of following at once,
/// and it does go then.
#[test]
fn test_a_train_taken_at_the_estimate_is_not_followed_at_once() {
    let rtt = Duration::from_millis(10);
    let (mut c, now) = at_one_megabyte(rtt);
    let mut t = now;
    for round in 0..3 {
        // Asked for 1.25 times the estimate, it left at the estimate.
        let estimate = c.bottleneck_bytes_per_s();
        let sent;
        (sent, t) = send_train_at(&mut c, t, estimate);
        assert_eq!(sent.len(), 8, "round {round}: a full train");
        // Arrived as fast as it left, and it left at the estimate.
        c.on_report(
            t,
            &report_at(probe(&sent[0]).probe_id, c.bottleneck_bytes_per_s()),
        );
        assert!(!c.wants_filler(t), "round {round}: followed at once");
        let due = c.filler_due().expect("a next train is due");
        assert!(due > t, "round {round}");
        t = due;
    }
}

/// STARTUP on a path faster than this host can pace a train (loopback): every train arrives
/// as fast as it left, none shows a bottleneck, yet three confirmed trains that do not raise
/// the rate end STARTUP with the rate they showed (before: no estimate for seconds, and a
/// confirming train about every millisecond).
#[test]
fn test_startup_ends_on_trains_the_host_cannot_pace_faster() {
    let mut c = control();
    let mut t = Time::ZERO;
    one_datagram_acked(&mut c, t, Duration::from_micros(50));
    // The fastest this host sends a train: 40 MB/s, whatever it is asked for.
    let host = 40e6;
    let mut trains = 0;
    while c.estimate().is_none() {
        trains += 1;
        assert!(trains <= 12, "no estimate after {trains} trains");
        t = c.filler_due().expect("a train is due").max(t);
        let sent;
        (sent, t) = send_train_at(&mut c, t, host);
        let n = sent.len() as u32;
        let report = ProbeReport {
            probe_id: probe(&sent[0]).probe_id,
            bytes: (n - 1) * u32::from(MTU),
            gap_ns: (f64::from((n - 1) * u32::from(MTU)) / host * 1e9) as u64,
        };
        t += Duration::from_micros(50);
        c.on_report(t, &report);
    }
    let e = c.estimate().unwrap_or_default();
    assert!((e / host - 1.0).abs() < 0.1, "estimate {e:.0}");
}

/// `c` sends one full datagram at `t`, acknowledged `rtt` later: the application has sent
/// data, so the filler runs.
fn one_datagram_acked(c: &mut RateControl, t: Time, rtt: Duration) {
    c.on_sent(t, u64::from(MTU));
    c.on_ack(t + rtt, u64::from(MTU), Some(rtt));
    c.set_in_flight(0);
}

/// Sends `c`'s due filler train from `t`, its datagrams leaving at `rate` bytes/s (whatever
/// rate the control asked for); returns them and the time after the last.
fn send_train_at(c: &mut RateControl, mut t: Time, rate: f64) -> (Vec<SppDatagram>, Time) {
    let mut sent = Vec::new();
    while let Some(d) = c.poll_filler(t) {
        t += Duration::from_secs_f64(d.wire_len() as f64 / rate);
        sent.push(d);
    }
    (sent, t)
}

/// A control that has run a second on a 1 MB/s path of RTT `rtt`, its application now idle,
/// and the time its first filler train is due.
fn idle_at_one_megabyte(rtt: Duration) -> (RateControl, Time) {
    let (c, now) = at_one_megabyte(rtt);
    go_idle(c, now)
}

/// `c`, whose application has just left the link idle at `now`, and the time its first
/// filler train is due.
fn go_idle(mut c: RateControl, now: Time) -> (RateControl, Time) {
    c.set_in_flight(0);
    let t = c.filler_due().expect("a train is due").max(now);
    (c, t)
}

/// Sends `c`'s due short train from `t` at 1.25 MB/s, the rate it asks, and reports it taken
/// whole `rtt` after its last datagram (a token bucket's burst: a rise to confirm); returns
/// the train and the time of its report.
fn short_train_taken_whole(
    c: &mut RateControl,
    t: Time,
    rtt: Duration,
) -> (Vec<SppDatagram>, Time) {
    let (sent, end) = send_train_at(c, t, 1.25e6);
    let at = end + rtt;
    c.on_report(at, &report_at(probe(&sent[0]).probe_id, 1.25e6));
    (sent, at)
}

/// Regression (the namespace link stepped 8 → 2 Mbit/s under a light application): a
/// confirming train sent at four times the estimate into a link that fell to a quarter of
/// it takes four times longer to arrive than its grace allowed, which counts its bytes at the
/// estimate. It was given up with its tail still arriving, every time, and the fall went
/// unseen for two seconds. A train whose partial reports keep coming is not overdue.
#[test]
fn test_a_confirming_train_whose_reports_still_arrive_measures_the_fall() {
    let rtt = Duration::from_millis(10);
    let (mut c, t) = idle_at_one_megabyte(rtt);
    let (sent, t) = short_train_taken_whole(&mut c, t, rtt);
    assert_eq!(sent.len(), 8);
    assert!(c.wants_filler(t), "the confirming train follows at once");
    // The confirming train leaves at four times the estimate; the link now takes 250 kB/s.
    let (sent, end) = send_train_at(&mut c, t, 4e6);
    assert_eq!(sent.len(), 20);
    let id = probe(&sent[0]).probe_id;
    let link = 2.5e5;
    let spacing = Duration::from_secs_f64(f64::from(MTU) / link);
    let first_arrival = t + rtt / 2;
    let mut given_up = 0;
    for i in 1..sent.len() {
        let report_at = first_arrival + spacing * i as u32 + rtt / 2;
        // The engine runs the control's timers as they fall due between reports.
        while let Some(due) = c.poll_timeout().filter(|&d| d <= report_at) {
            let trains = c.stats().filler_trains;
            c.handle_timeout(due.max(end));
            if c.filler_due().is_some() && c.stats().filler_trains == trains {
                given_up += 1;
            }
            if due <= end {
                break;
            }
        }
        let bytes = u32::try_from(i).unwrap_or(u32::MAX) * u32::from(MTU);
        c.on_report(
            report_at,
            &ProbeReport {
                probe_id: id,
                bytes,
                gap_ns: (spacing * i as u32).as_nanos() as u64,
            },
        );
    }
    assert_eq!(given_up, 0, "the train was given up while its reports came");
    let e = c.estimate().expect("calibrated");
    assert!(
        (e / link - 1.0).abs() < 0.05,
        "estimate {e:.0}, link {link:.0}"
    );
}

/// Regression (the namespace link stepped 2 → 8 Mbit/s under a light application): a train
/// taken whole at the rate it was asked, when the application's DATA raised the estimate past
/// that rate while the train was out, is followed at once at the next gain above the new
/// estimate. It used to wait the usual interval (390 ms at 2 Mbit/s), as a train the host
/// could not pace faster does (see the test above).
#[test]
fn test_a_train_taken_as_asked_below_a_risen_estimate_is_followed_at_once() {
    let rtt = Duration::from_millis(10);
    let (mut c, t) = idle_at_one_megabyte(rtt);
    // The first train of a cycle asks the probe gain times the estimate.
    let asked = c.config().probe_gain * c.bottleneck_bytes_per_s();
    let (sent, end) = send_train_at(&mut c, t, asked);
    assert_eq!(sent.len(), 8);
    // Backlogged DATA raises the estimate past what the train asked.
    let t = drive(
        &mut c,
        end,
        Duration::from_millis(100),
        2e6,
        rtt,
        Duration::ZERO,
    );
    let e = c.bottleneck_bytes_per_s();
    assert!(
        e > 1.1 * asked,
        "estimate {e:.0}, the train asked {asked:.0}"
    );
    c.set_in_flight(0);
    c.on_report(t, &report_at(probe(&sent[0]).probe_id, asked));
    assert!(c.wants_filler(t), "the next train follows at once");
}

/// Behind a token bucket every short train is taken whole: after a confirming train refuted
/// a rise, a short train that shows one during the hold is confirmed when the hold ends, by a
/// confirming train with no short train first (one more short train says nothing, and
/// waiting for it held a light application's rise 2 → 8 Mbit/s a train interval longer).
#[test]
fn test_a_rise_shown_during_the_hold_is_confirmed_when_it_ends() {
    let rtt = Duration::from_millis(10);
    let (mut c, t) = idle_at_one_megabyte(rtt);
    // A short train taken whole, and its confirming train arriving at the estimate: refuted.
    let (_, t) = short_train_taken_whole(&mut c, t, rtt);
    let (sent, end) = send_train_at(&mut c, t, 4e6);
    assert_eq!(sent.len(), 20, "a confirming train");
    let whole = ProbeReport {
        probe_id: probe(&sent[0]).probe_id,
        bytes: 19 * u32::from(MTU),
        gap_ns: (19.0 * f64::from(MTU) / 1e6 * 1e9) as u64,
    };
    let refuted = end + rtt;
    c.on_report(refuted, &whole);
    let hold_end = refuted + ControlConfig::default().filler_rise_hold;
    // The next short train, within the hold, is taken whole too.
    let t = c.filler_due().expect("a train is due").max(refuted);
    assert!(t < hold_end, "a short train goes within the hold");
    let (sent, _) = short_train_taken_whole(&mut c, t, rtt);
    assert_eq!(sent.len(), 8, "a short train");
    assert_eq!(
        c.filler_due(),
        Some(hold_end),
        "the next train waits for the hold's end"
    );
    let (sent, _) = send_train_at(&mut c, hold_end, 4e6);
    assert_eq!(sent.len(), 20, "and confirms the rise");
}

/// A control whose estimate a standing queue reset to 0.5 MB/s (what the path then sustained),
/// and the time its drain is over.
fn measured_busy_at_half_a_megabyte(rtt: Duration) -> (RateControl, Time) {
    let (mut c, now) = at_one_megabyte(rtt);
    let queue = Duration::from_millis(20);
    let now = drive(&mut c, now, Duration::from_millis(200), 5e5, rtt, queue);
    let now = drive(
        &mut c,
        now,
        Duration::from_millis(200),
        5e5,
        rtt,
        Duration::ZERO,
    );
    let planned = c.estimate().expect("evidence");
    assert!((planned / 5e5 - 1.0).abs() < 0.1, "{planned}");
    (c, now)
}

#[test]
fn test_a_burst_above_the_sustained_rate_paces_but_is_not_planned_with() {
    // A token bucket's tokens pass a stretch of DATA at 1.5 times the rate the path was
    // measured to sustain, 150 KB: shorter than `sustained_packets`, though longer than the
    // bandwidth window. The bottleneck filter takes it (pacing probes with it), NAI does not
    // plan with it.
    let rtt = Duration::from_millis(10);
    let (mut c, now) = measured_busy_at_half_a_megabyte(rtt);
    // The application paused (the stretch before, at the sustained rate, ends here).
    c.on_app_limited();
    let burst = Duration::from_millis(200);
    drive(&mut c, now, burst, 7.5e5, rtt, Duration::ZERO);
    let measured = c.bottleneck_bytes_per_s();
    let planned = c.estimate().expect("evidence");
    assert!(measured > 1.3 * 5e5, "the burst is measured: {measured}");
    assert!(planned < 1.1 * 5e5, "but not planned with: {planned}");
}

#[test]
fn test_a_backlogged_stretch_longer_than_the_bandwidth_window_is_planned_with() {
    // The path now sustains 0.75 MB/s for longer than any token bucket's tokens last at
    // that excess: a backlogged stretch a bandwidth window long shows it.
    let rtt = Duration::from_millis(10);
    let (mut c, now) = measured_busy_at_half_a_megabyte(rtt);
    let window = c.bw_window();
    drive(&mut c, now, 3 * window, 7.5e5, rtt, Duration::ZERO);
    let planned = c.estimate().expect("evidence");
    assert!((planned / 7.5e5 - 1.0).abs() < 0.1, "{planned}");
}

/// When each datagram of `sent` (sent at the times given) leaves a token bucket of `depth`
/// bytes filling at `rate` bytes/s, full when the first arrives, behind a line too fast to
/// matter: tbf's shaping as a receiver sees it.
fn through_bucket(sent: &[(Time, usize)], rate: f64, depth: f64) -> Vec<Time> {
    let mut tokens = depth;
    let mut at = sent.first().map_or(Time::ZERO, |&(t, _)| t);
    let mut out = Vec::with_capacity(sent.len());
    for &(t, len) in sent {
        let len = len as f64;
        let arrive = t.max(at);
        tokens = (tokens + rate * arrive.saturating_since(at).as_secs_f64()).min(depth);
        let wait = Duration::from_secs_f64(((len - tokens) / rate).max(0.0));
        at = arrive + wait;
        tokens = (tokens + rate * wait.as_secs_f64()).min(depth) - len;
        out.push(at);
    }
    out
}

/// Sends `c`'s due train from `t` at the rate it asks through `through_bucket`, reporting
/// each datagram as it arrives (the receiver's partial reports, then the whole), `rtt / 2`
/// after it; returns the rate the train asked and the time of the last report.
fn train_through_bucket(
    c: &mut RateControl,
    mut t: Time,
    rtt: Duration,
    rate: f64,
    depth: f64,
) -> (f64, Time) {
    let mut sent = Vec::new();
    let mut asked = 0.0;
    while let Some(d) = c.poll_filler(t) {
        if asked == 0.0 {
            // The first datagram fixed the train's rate, which the pacer now follows.
            asked = c.pacing_rate();
        }
        let len = d.wire_len();
        sent.push((t, d));
        t += Duration::from_secs_f64(len as f64 / asked);
    }
    let id = probe(&sent[0].1).probe_id;
    let lens: Vec<(Time, usize)> = sent.iter().map(|(t, d)| (*t, d.wire_len())).collect();
    let arrivals = through_bucket(&lens, rate, depth);
    let mut last = t;
    for (i, &a) in arrivals.iter().enumerate().skip(1) {
        last = a + rtt / 2;
        let bytes = u32::try_from(i).unwrap_or(u32::MAX) * u32::from(MTU);
        let gap_ns = u64::try_from(a.saturating_since(arrivals[0]).as_nanos()).unwrap_or(0);
        c.on_report(
            last,
            &ProbeReport {
                probe_id: id,
                bytes,
                gap_ns,
            },
        );
    }
    (asked, last)
}

/// Regression (the namespace link stepped 2 → 8 Mbit/s under a light application: 11.1
/// Mbit/s planned with at +1 s): a confirming train is paced at four times the estimate, and
/// a rise leaves the estimate below the link, so the train can leave too slowly to empty the
/// bucket before its last quarter, which then reads a mix of the bucket's tokens and its
/// rate. Such a reading is not the rate: a second confirming train goes at once, paced from
/// it, and measures the link.
#[test]
fn test_a_confirming_train_too_slow_to_empty_the_bucket_is_checked_again() {
    let rtt = Duration::from_millis(2);
    let (mut c, t) = idle_at_one_megabyte(rtt);
    let (link, depth) = (1.45e6, 16_384.0);
    let (_, t) = train_through_bucket(&mut c, t, rtt, link, depth);
    assert!(
        c.wants_filler(t),
        "a rise: the confirming train follows at once"
    );
    let (asked, t) = train_through_bucket(&mut c, t, rtt, link, depth);
    assert!((asked / 4e6 - 1.0).abs() < 0.05, "confirming at {asked:.0}");
    let e = c.estimate().expect("calibrated");
    assert!(e < 1.2 * link, "planned with {e:.0} on a {link:.0} link");
    assert!(c.wants_filler(t), "the reading is checked at once");
    let (asked, _) = train_through_bucket(&mut c, t, rtt, link, depth);
    assert!(asked > 4.0 * link, "checking at {asked:.0}");
    let e = c.estimate().expect("calibrated");
    assert!(
        (e / link - 1.0).abs() < 0.1,
        "planned with {e:.0} on a {link:.0} link"
    );
}

/// A FIFO bottleneck spaces a confirming train from its head on: its last quarter is the
/// link's rate whatever the train's pace, and is taken at once, with no second train.
#[test]
fn test_a_confirming_train_a_fifo_link_spaced_from_its_head_reads_the_rate() {
    let rtt = Duration::from_millis(2);
    let (mut c, t) = idle_at_one_megabyte(rtt);
    // A bucket of one datagram is a FIFO link of its rate.
    let (link, depth) = (2.3e6, f64::from(MTU));
    let (_, t) = train_through_bucket(&mut c, t, rtt, link, depth);
    assert!(c.wants_filler(t), "a rise: the confirming train follows");
    let (asked, t) = train_through_bucket(&mut c, t, rtt, link, depth);
    assert!(asked < 0.9 * 4.0 * link, "paced below what vouches for it");
    let e = c.estimate().expect("calibrated");
    assert!(
        (e / link - 1.0).abs() < 0.1,
        "planned with {e:.0} on a {link:.0} link"
    );
    assert!(!c.wants_filler(t), "no second confirmation");
}

/// Regression (the namespace link stepped 2 → 8 Mbit/s under a light application: 10.6
/// Mbit/s planned with at +1 s): the application's DATA, passed by a token bucket's tokens,
/// lifts the bottleneck filter above what the path was shown to sustain, and a short train
/// whose head the bucket passed whole and whose tail mixed its tokens with its rate reads
/// between the two. That reading is a rise of what NAI plans with: it is confirmed, by a
/// train that follows at once, before it is planned with.
#[test]
fn test_a_short_train_reading_above_the_sustained_rate_is_confirmed_first() {
    let rtt = Duration::from_millis(2);
    let (mut c, now) = measured_busy_at_half_a_megabyte(rtt);
    c.on_app_limited();
    let now = drive(
        &mut c,
        now,
        Duration::from_millis(200),
        7.5e5,
        rtt,
        Duration::ZERO,
    );
    c.on_app_limited();
    c.set_in_flight(0);
    let link = 5e5;
    let (sustained, paced) = (c.estimate().expect("evidence"), c.bottleneck_bytes_per_s());
    assert!(
        sustained < 1.1 * link && paced > 1.3 * link,
        "{sustained} {paced}"
    );
    let t = c.filler_due().expect("a train is due").max(now);
    let (asked, t) = train_through_bucket(&mut c, t, rtt, link, 4096.0);
    let e = c.estimate().expect("evidence");
    assert!(asked > 1.5 * link, "the train asked {asked:.0}");
    assert!(e < 1.1 * link, "planned with {e:.0} on a {link:.0} link");
    assert!(c.wants_filler(t), "the confirming train follows at once");
}

/// Sends `c`'s due train from `t` at the rate it asks and reports it arrived at `arrived`
/// bytes/s, `rtt` after its last datagram; returns the time of the report.
fn train_arriving_at(c: &mut RateControl, t: Time, rtt: Duration, arrived: f64) -> Time {
    let asked = c.config().probe_gain * c.bottleneck_bytes_per_s();
    let (sent, end) = send_train_at(c, t, asked);
    assert_eq!(sent.len(), 8);
    let at = end + rtt;
    c.on_report(at, &report_at(probe(&sent[0]).probe_id, arrived));
    at
}

/// A control that has run 100 ms on a 100 MB/s path of RTT `rtt`, its application now idle,
/// and the time its first filler train is due.
fn idle_at_100_megabytes(rtt: Duration) -> (RateControl, Time) {
    let mut c = control();
    let span = Duration::from_millis(100);
    let now = drive(&mut c, Time::ZERO, span, 1e8, rtt, Duration::ZERO);
    go_idle(c, now)
}

/// Regression (loopback bulk, one run in eight at 9 instead of 13 Gbit/s): a train that one
/// of the hosts delayed — the receiver off the CPU for a millisecond — read the bottleneck at
/// 88 Mbit/s on a path carrying 13 Gbit/s, the estimate was reset to it, and the run was
/// paced far below the path for seconds. A reading below half the estimate, over a spread a
/// host could have made, now waits for the next train, sent at once; one that arrives as
/// fast as it left refutes it.
#[test]
fn test_one_train_read_far_below_the_estimate_is_checked_by_the_next() {
    let rtt = Duration::from_micros(200);
    let (mut c, t) = idle_at_100_megabytes(rtt);
    let before = c.bottleneck_bytes_per_s();
    // 8 datagrams read at a tenth of 100 MB/s arrive over about a millisecond.
    let t = train_arriving_at(&mut c, t, rtt, 0.1 * before);
    assert_eq!(
        c.bottleneck_bytes_per_s(),
        before,
        "one late train is not a fall"
    );
    assert!(c.wants_filler(t), "the checking train follows at once");
    let asked = c.config().probe_gain * before;
    train_arriving_at(&mut c, t, rtt, asked);
    let after = c.estimate().expect("calibrated");
    assert!(
        (after / before - 1.0).abs() < 0.05,
        "estimate {after:.0}, before {before:.0}"
    );
}

/// A fall two trains in a row read is the path's: the higher of the two readings (a host can
/// only make a train late) becomes the estimate, one train and a round trip after the first.
#[test]
fn test_a_fall_two_trains_read_is_believed_at_the_higher_reading() {
    let rtt = Duration::from_micros(200);
    let (mut c, t) = idle_at_100_megabytes(rtt);
    let before = c.bottleneck_bytes_per_s();
    let t = train_arriving_at(&mut c, t, rtt, 0.2 * before);
    assert!(c.wants_filler(t));
    train_arriving_at(&mut c, t, rtt, 0.25 * before);
    let after = c.estimate().expect("calibrated");
    assert!(
        (after / (0.25 * before) - 1.0).abs() < 0.05,
        "estimate {after:.0}, the readings {:.0} and {:.0}",
        0.2 * before,
        0.25 * before
    );
}

/// What still applies at once, as every bottleneck reading did: a fall to above half the
/// estimate (the samples of a FIFO bottleneck scatter around its rate), and a deep fall whose
/// train arrived over longer than a host's hiccup (on a 1 MB/s path, a tenth of the rate
/// spreads the train over 100 ms).
#[test]
fn test_a_shallow_fall_and_a_slow_paths_deep_fall_apply_at_once() {
    let rtt = Duration::from_millis(10);
    for share in [0.7, 0.1] {
        let (mut c, t) = idle_at_one_megabyte(rtt);
        let before = c.bottleneck_bytes_per_s();
        train_arriving_at(&mut c, t, rtt, share * before);
        let after = c.bottleneck_bytes_per_s();
        assert!(
            (after / (share * before) - 1.0).abs() < 0.05,
            "a fall to {share} of the estimate: {after:.0} of {before:.0}"
        );
    }
}

/// A control that ran a second on a 1 MB/s path of RTT `rtt` and then stalled into an
/// outage; its estimate before the outage and the time the outage was declared.
fn collapsed_from_one_megabyte(rtt: Duration) -> (RateControl, f64, Time) {
    let (mut c, now) = at_one_megabyte(rtt);
    let full = c.bottleneck_bytes_per_s();
    let t = collapse(&mut c, now);
    (c, full, t)
}

/// Regression (the emulated synthetic trace, whose link fades to nothing into a 30-s outage
/// and returns at 50 KB/s): the first train after an outage is paced from the rate the
/// outage started from, and one taken whole says only that the path carries at least that
/// much. NAI planned with it and expired, the moment the path answered, messages the
/// returned link carried with seconds to spare. The estimate is unsettled until a train
/// meets the bottleneck, or for at most `filler_return_hold`.
#[test]
fn test_after_an_outage_the_estimate_is_unsettled_until_a_train_meets_the_bottleneck() {
    let rtt = Duration::from_millis(10);
    let (mut c, full, t) = collapsed_from_one_megabyte(rtt);
    assert!(c.rate_unsettled(t), "in the outage");
    // A ping is answered: the path is back, and a full train goes at once.
    let sent = run_unanswered(&mut c, t, t + Duration::from_secs(2));
    let t = answer_last_ping(&mut c, &sent, t, rtt);
    // The train arrives as fast as it left, 1.5 times the rate before the outage.
    let (train, end) = send_train_at(&mut c, t, 1.5 * full);
    let at = end + rtt;
    c.on_report(at, &report_at(probe(&train[0]).probe_id, 1.5 * full));
    assert!(!c.in_outage(), "the path answered");
    assert!(c.estimate().is_some(), "an estimate, a lower bound");
    assert!(c.rate_unsettled(at), "taken whole is no measurement");
    let hold = c.config().filler_return_hold;
    assert!(c.rate_unsettled(at + hold - Duration::from_millis(1)));
    assert!(!c.rate_unsettled(at + hold), "held at most {hold:?}");
    // The confirming train, sent at once, meets the bottleneck: the estimate is evidence.
    assert!(c.wants_filler(at), "the confirming train follows at once");
    let (train, end) = send_train_at(&mut c, at, 3.0 * full);
    let at = end + rtt;
    // The whole train arrived at 0.6 of the rate before the outage.
    let size = u32::from(MTU);
    let n = train.len() as u32 - 1;
    let report = ProbeReport {
        probe_id: probe(&train[0]).probe_id,
        bytes: n * size,
        gap_ns: (f64::from(n * size) / (0.6 * full) * 1e9) as u64,
    };
    c.on_report(at, &report);
    let e = c.estimate().expect("measured");
    assert!((e / (0.6 * full) - 1.0).abs() < 0.01, "{e}");
    assert!(!c.rate_unsettled(at), "measured at {e}");
}

#[test]
fn test_after_an_outage_the_applications_data_back_at_the_old_rate_is_unsettled_too() {
    let rtt = Duration::from_millis(10);
    let (mut c, full, t) = collapsed_from_one_megabyte(rtt);
    assert!(c.rate_unsettled(t), "in the outage");
    // The path returns and acknowledges the application's data, no train first (a link
    // that queued it through the outage drains that queue): the estimate is back where the
    // outage started, which says only that the path carries at least that much.
    let step = Duration::from_secs_f64(f64::from(MTU) / full);
    let mut back = t;
    while c.in_outage() {
        assert!(back < t + Duration::from_secs(1), "the estimate came back");
        back = drive(&mut c, back, step, full, rtt, Duration::ZERO);
    }
    assert!(c.estimate().is_some_and(|e| e >= 0.99 * full));
    assert!(
        c.rate_unsettled(back),
        "back at the old rate is no measurement"
    );
    let hold = c.config().filler_return_hold;
    assert!(
        !c.rate_unsettled(t + hold + Duration::from_millis(100)),
        "held at most {hold:?}"
    );
    // A standing queue under the application's data measures the bottleneck: evidence.
    let reactions = c.stats().queue_reactions;
    let at = drive(&mut c, back, Duration::from_millis(200), full, rtt, 5 * rtt);
    assert!(c.stats().queue_reactions > reactions, "a queue was seen");
    assert!(!c.rate_unsettled(at), "measured by the queue");
}
