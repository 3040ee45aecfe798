//! TFRC tests: the equation, loss-interval weighting, receiver loss events and the sender's
//! receive-rate limit and nofeedback timer, each against RFC 5348's definitions.

use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-12)
}

#[test]
fn test_equation_matches_hand_computed_values() {
    // s = 1460, R = 100 ms, p = 0.01, t_RTO = 4R, b = 1:
    // R*sqrt(2p/3) = 0.1 × 0.0816497 = 0.00816497;
    // t_RTO × 3 sqrt(3p/8) × p × (1 + 32p²) = 0.4 × 0.1837117 × 0.01 × 1.0032 = 0.00073720;
    // X = 1460 / 0.00890217 = 164 005 B/s.
    let x = throughput_rfc(1460.0, ms(100), 0.01);
    assert!(close(x, 164_005.062_169_969_75, 1e-9), "{x}");
    assert!(close(
        throughput_bytes_per_s(1000.0, ms(50), 0.1, ms(200), 1.0),
        35_402.041_555_826_47,
        1e-9
    ));
    assert!(close(
        throughput_bytes_per_s(512.0, ms(200), 0.001, ms(800), 1.0),
        98_263.969_636_161_16,
        1e-9
    ));
    assert_eq!(throughput_rfc(1460.0, ms(100), 0.0), f64::INFINITY);
}

#[test]
fn test_equation_reduces_to_sqrt_law_for_small_p() {
    // §3.1's equation tends to X = s / (R sqrt(2p/3)) as p → 0 (the timeout term vanishes).
    let p = 1e-7;
    let simple = 1460.0 / (0.1 * (2.0 * p / 3.0_f64).sqrt());
    assert!(close(throughput_rfc(1460.0, ms(100), p), simple, 1e-3));
    // And it is decreasing in p.
    let mut last = f64::INFINITY;
    for i in 1..100 {
        let x = throughput_rfc(1000.0, ms(80), f64::from(i) / 100.0);
        assert!(x < last);
        last = x;
    }
}

#[test]
fn test_inverse_equation_round_trips() {
    for p in [1e-6, 1e-4, 0.01, 0.1, 0.5] {
        let x = throughput_rfc(1000.0, ms(60), p);
        let back = loss_event_rate_for(1000.0, ms(60), x);
        assert!(close(back, p, 1e-6), "{p} -> {back}");
    }
}

#[test]
fn test_weights_are_rfc_5348_section_5_4_values() {
    // "if n=8, the values of w_0 to w_7 are: 1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2".
    let w: Vec<f64> = (0..8).map(|i| loss_interval_weight(i, 8)).collect();
    let want = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
    for (a, b) in w.iter().zip(want) {
        assert!(close(*a, b, 1e-12));
    }
}

#[test]
fn test_average_interval_weights_eight_closed_intervals() {
    let mut h = LossHistory::new();
    // Closed intervals I_8 … I_1 = 80, 70, …, 10 (I_1 = 10 most recent).
    for len in [80u64, 70, 60, 50, 40, 30, 20, 10] {
        h.close_interval(len);
    }
    h.set_open(5);
    // W_tot = 6. I_tot1 = 10+20+30+40 + 0.8×50 + 0.6×60 + 0.4×70 + 0.2×80 = 220;
    // I_tot0 = 5+10+20+30 + 0.8×40 + 0.6×50 + 0.4×60 + 0.2×70 = 165. I_mean = 220/6.
    let mean = h.average_interval().unwrap();
    assert!(close(mean, 220.0 / 6.0, 1e-12), "{mean}");
    assert!(close(h.loss_event_rate(), 6.0 / 220.0, 1e-12));
    // A long open interval raises the average: I_0 = 1000 gives I_tot0 = 1000+10+20+30+32+30+24+14.
    h.set_open(1000);
    assert!(close(
        h.average_interval().unwrap(),
        (1000.0 + 10.0 + 20.0 + 30.0 + 32.0 + 30.0 + 24.0 + 14.0) / 6.0,
        1e-12
    ));
    // Only eight closed intervals are kept: a ninth pushes out the oldest (80).
    h.close_interval(90);
    assert_eq!(h.closed().count(), 8);
    assert_eq!(h.closed().last(), Some(70));
}

#[test]
fn test_no_loss_gives_zero_p() {
    let h = LossHistory::new();
    assert_eq!(h.average_interval(), None);
    assert_eq!(h.loss_event_rate(), 0.0);
}

fn data(seq: u64, sent_ms: u64, rtt: Duration) -> TfrcData {
    TfrcData {
        seq,
        sent_at: Time::from_millis(sent_ms),
        rtt,
    }
}

#[test]
fn test_receiver_declares_loss_after_three_later_packets() {
    let mut rx = TfrcReceiver::new();
    let rtt = ms(100);
    // 0..=9 sent every 10 ms; 5 is missing.
    for seq in [0u64, 1, 2, 3, 4, 6, 7] {
        rx.handle_data(
            Time::from_millis(seq * 10 + 50),
            &data(seq, seq * 10, rtt),
            1000,
        );
    }
    assert_eq!(
        rx.losses(),
        0,
        "two later packets are not enough (NDUPACK = 3)"
    );
    rx.handle_data(Time::from_millis(130), &data(8, 80, rtt), 1000);
    assert_eq!(rx.losses(), 1);
    assert!(rx.loss_event_rate() > 0.0);
    // A late copy of 5 is now ignored (already declared lost), as is a duplicate.
    rx.handle_data(Time::from_millis(140), &data(5, 50, rtt), 1000);
    rx.handle_data(Time::from_millis(140), &data(8, 80, rtt), 1000);
    assert_eq!(rx.packets(), 8);
}

#[test]
fn test_losses_within_one_rtt_are_one_event() {
    let mut rx = TfrcReceiver::new();
    let rtt = ms(100);
    let mut now = 0;
    // Packets every 10 ms; losses at 100, 102, 105 (within 50 ms: one event), then 300
    // (2 s later: a new event).
    for seq in 0..400u64 {
        if [100, 102, 105, 300].contains(&seq) {
            continue;
        }
        now = seq * 10 + 50;
        rx.handle_data(Time::from_millis(now), &data(seq, seq * 10, rtt), 1000);
    }
    let _ = now;
    assert_eq!(rx.losses(), 4);
    let closed: Vec<u64> = rx.history().closed().collect();
    // Most recent first: 300 − 100 = 200 packets, then the synthesized first interval.
    assert_eq!(closed.len(), 2);
    assert_eq!(closed.first(), Some(&200));
}

#[test]
fn test_first_interval_is_synthesized_from_receive_rate() {
    // §6.3.1: after the first loss event, p is the rate the equation needs to give X_recv.
    let mut rx = TfrcReceiver::new();
    let rtt = ms(100);
    for seq in 0..104u64 {
        if seq == 100 {
            continue;
        }
        rx.handle_data(Time::from_millis(seq * 10), &data(seq, seq * 10, rtt), 1000);
    }
    // 100 000 B/s received (1000 B every 10 ms).
    let synth = *rx.history().closed().collect::<Vec<_>>().first().unwrap();
    let p_want = loss_event_rate_for(1000.0, rtt, 100_000.0);
    assert!(close(synth as f64, (1.0 / p_want).round(), 0.02), "{synth}");
}

#[test]
fn test_receiver_feedback_once_per_rtt_and_at_once_on_loss() {
    let mut rx = TfrcReceiver::new();
    let rtt = ms(100);
    rx.handle_data(Time::from_millis(0), &data(0, 0, rtt), 1000);
    let fb = rx.poll_feedback(Time::from_millis(1)).unwrap();
    assert_eq!(fb.echo_sent_at, Time::ZERO);
    assert_eq!(fb.delay, ms(1));
    assert_eq!(fb.p, 0.0);
    rx.handle_data(Time::from_millis(10), &data(1, 10, rtt), 1000);
    assert!(rx.poll_feedback(Time::from_millis(50)).is_none());
    assert_eq!(rx.poll_timeout(), Some(Time::from_millis(101)));
    assert!(rx.poll_feedback(Time::from_millis(101)).is_some());
    // A loss event triggers feedback before the RTT is up.
    for seq in [3u64, 4, 5] {
        rx.handle_data(Time::from_millis(110), &data(seq, 100, rtt), 1000);
    }
    let fb = rx.poll_feedback(Time::from_millis(111)).unwrap();
    assert!(fb.p > 0.0);
}

fn feedback(echo_ms: u64, x_recv: f64, p: f64) -> TfrcFeedback {
    TfrcFeedback {
        echo_sent_at: Time::from_millis(echo_ms),
        delay: Duration::ZERO,
        x_recv_bytes_per_s: x_recv,
        p,
    }
}

#[test]
fn test_sender_starts_at_one_packet_per_second_then_initial_window() {
    let mut tx = TfrcSender::new(Time::ZERO, TfrcConfig::default());
    assert_eq!(tx.rate_bytes_per_s(), 512.0);
    assert!(tx.poll_transmit(Time::ZERO).is_some());
    assert!(tx.poll_transmit(Time::from_millis(500)).is_none());
    // First feedback at 100 ms: R = 100 ms, W_init = min(4s, max(2s, 4380)) = 2048,
    // initial_rate = 20 480 B/s.
    tx.handle_feedback(Time::from_millis(100), &feedback(0, 512.0, 0.0), false);
    assert_eq!(tx.rtt(), Some(ms(100)));
    assert!(close(tx.rate_bytes_per_s(), 20_480.0, 1e-9));
}

#[test]
fn test_sender_slow_start_is_limited_by_twice_receive_rate() {
    let mut tx = TfrcSender::new(Time::ZERO, TfrcConfig::default());
    tx.handle_feedback(Time::from_millis(100), &feedback(0, 10_000.0, 0.0), false);
    // Doubling (at most once per R) capped at recv_limit = 2 × max(X_recv_set) = 2 × 15 000
    // once the initial infinite entry is more than two RTTs old.
    tx.handle_feedback(Time::from_millis(250), &feedback(150, 15_000.0, 0.0), false);
    assert!(close(tx.rate_bytes_per_s(), 30_000.0, 1e-9));
    assert!(close(tx.recv_limit_bytes_per_s(), 30_000.0, 1e-9));
    // Within one RTT of the last doubling: no increase.
    tx.handle_feedback(Time::from_millis(300), &feedback(200, 40_000.0, 0.0), false);
    assert!(close(tx.rate_bytes_per_s(), 30_000.0, 1e-9));
}

#[test]
fn test_sender_uses_equation_once_p_is_positive() {
    let mut tx = TfrcSender::new(Time::ZERO, TfrcConfig::default());
    tx.handle_feedback(Time::from_millis(100), &feedback(0, 1e9, 0.0), false);
    tx.handle_feedback(Time::from_millis(200), &feedback(100, 1e9, 0.01), false);
    let want = throughput_rfc(512.0, ms(100), 0.01);
    assert!(close(tx.rate_bytes_per_s(), want, 1e-9));
    // ... limited by 2 × X_recv when the receiver sees less.
    tx.handle_feedback(Time::from_millis(300), &feedback(200, 100.0, 0.01), false);
    // X_recv_set still holds the 1e9 sample from within two RTTs.
    assert!(close(tx.rate_bytes_per_s(), want, 1e-9));
    tx.handle_feedback(Time::from_millis(600), &feedback(500, 1_000.0, 0.01), false);
    assert!(close(tx.rate_bytes_per_s(), 2_000.0, 1e-9));
}

#[test]
fn test_nofeedback_timer_halves_rate() {
    let mut tx = TfrcSender::new(Time::ZERO, TfrcConfig::default());
    tx.handle_feedback(Time::from_millis(100), &feedback(0, 1e9, 0.0), false);
    let x = tx.rate_bytes_per_s();
    // Timer = max(4R, 2s/X) = 400 ms.
    assert_eq!(tx.nofeedback_deadline(), Time::from_millis(500));
    let _ = tx.poll_transmit(Time::from_millis(300)); // not idle
    tx.handle_timeout(Time::from_millis(499));
    assert_eq!(tx.rate_bytes_per_s(), x);
    tx.handle_timeout(Time::from_millis(500));
    assert!(close(tx.rate_bytes_per_s(), x / 2.0, 1e-12));
    // With p > 0 the limit becomes min(X_recv, X_Bps/2) and X follows it.
    let mut tx = TfrcSender::new(Time::ZERO, TfrcConfig::default());
    tx.handle_feedback(Time::from_millis(100), &feedback(0, 1e9, 0.01), false);
    let x_bps = throughput_rfc(512.0, ms(100), 0.01);
    let _ = tx.poll_transmit(Time::from_millis(200));
    tx.handle_timeout(tx.nofeedback_deadline());
    assert!(close(tx.rate_bytes_per_s(), x_bps / 2.0, 1e-9));
}

#[test]
fn test_nofeedback_before_any_feedback_halves_only_when_sending() {
    let mut tx = TfrcSender::new(Time::ZERO, TfrcConfig::default());
    tx.handle_timeout(Time::from_secs(2)); // idle: unchanged
    assert_eq!(tx.rate_bytes_per_s(), 512.0);
    let _ = tx.poll_transmit(Time::from_secs(3));
    tx.handle_timeout(Time::from_secs(4));
    assert_eq!(tx.rate_bytes_per_s(), 256.0);
    // Never below s / t_mbi.
    for i in 0..40 {
        let _ = tx.poll_transmit(Time::from_secs(10 + 2 * i));
        tx.handle_timeout(Time::from_secs(11 + 2 * i));
    }
    assert!(close(tx.rate_bytes_per_s(), 512.0 / 64.0, 1e-12));
}

#[test]
fn test_wire_round_trips_and_rejects_garbage() {
    let d = data(7, 1234, ms(80));
    let mut buf = [0u8; TfrcData::LEN];
    assert_eq!(d.emit(&mut buf), Ok(TfrcData::LEN));
    assert_eq!(TfrcData::parse(&buf), Ok(d));
    let fb = TfrcFeedback {
        echo_sent_at: Time::from_millis(3),
        delay: Duration::from_micros(250),
        x_recv_bytes_per_s: 12_345.0,
        p: 0.25,
    };
    let mut buf = [0u8; TfrcFeedback::LEN];
    assert_eq!(fb.emit(&mut buf), Ok(TfrcFeedback::LEN));
    assert_eq!(TfrcFeedback::parse(&buf), Ok(fb));
    assert!(TfrcData::parse(&buf).is_err(), "type mismatch");
    assert!(TfrcFeedback::parse(&buf[..10]).is_err());
    // p above 1 is malformed.
    let mut bad = buf;
    if let Some(last4) = bad.get_mut(TfrcFeedback::LEN - 4..) {
        last4.copy_from_slice(&u32::MAX.to_be_bytes());
    }
    assert!(TfrcFeedback::parse(&bad).is_err());
}

#[test]
fn test_loopback_converges_to_equation_rate() {
    // Sender and receiver joined by a 100 ms RTT path that drops every 100th packet: the
    // sender ends near the equation's rate for the loss event rate the receiver computes.
    let mut tx = TfrcSender::new(Time::ZERO, TfrcConfig::default());
    let mut rx = TfrcReceiver::new();
    let one_way = ms(50);
    let mut in_flight: VecDeque<(Time, TfrcData)> = VecDeque::new();
    let mut fb_flight: VecDeque<(Time, TfrcFeedback)> = VecDeque::new();
    let mut now = Time::ZERO;
    let step = ms(1);
    let mut sent = 0u64;
    while now < Time::from_secs(120) {
        while let Some(h) = tx.poll_transmit(now) {
            sent += 1;
            if !sent.is_multiple_of(100) {
                in_flight.push_back((now + one_way, h));
            }
        }
        while in_flight.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, h)) = in_flight.pop_front() {
                rx.handle_data(now, &h, 512);
            }
        }
        while let Some(fb) = rx.poll_feedback(now) {
            fb_flight.push_back((now + one_way, fb));
        }
        while fb_flight.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, fb)) = fb_flight.pop_front() {
                tx.handle_feedback(now, &fb, false);
            }
        }
        tx.handle_timeout(now);
        now += step;
    }
    let p = rx.loss_event_rate();
    assert!(p > 0.005 && p < 0.02, "p = {p}");
    let want = throughput_rfc(512.0, ms(100), p);
    assert!(
        close(tx.rate_bytes_per_s(), want, 0.1),
        "{} vs {want}",
        tx.rate_bytes_per_s()
    );
}
