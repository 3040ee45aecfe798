//! The rate control alone, fed acknowledgements by hand.

use super::*;
use crate::spp::SppRepr;

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
    use crate::spp::wire::ProbeReport;
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
    let size = sent[0].1.wire_len() as u32;
    // Arrived at 600 kB/s: the bottleneck (it left at 1.25 MB/s).
    let report = ProbeReport {
        probe_id: first.probe_id,
        bytes: 7 * size,
        gap_ns: (7.0 * f64::from(size) / 6e5 * 1e9) as u64,
    };
    c.on_report(t, &report);
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
