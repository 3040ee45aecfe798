//! Tests of `[env]`: validation messages, and the behaviour of environment-aware sockets in
//! runs (UDP sleep/buffer/discard/fail across handoffs, TCP_RST_TIMERS on a signal trace,
//! TCP_DUPACKS after handoffs, hysteresis against a flapping signal).

use super::super::{Scenario, ScenarioError};
use crate::metrics::FlowResult;
use std::path::Path;

const TOPOLOGY: &str = r#"
[topology]
kind = "custom"
nodes = ["mh", "bs", "ch"]
[[topology.links]]
name = "wireless"
a = "mh"
b = "bs"
link = { bandwidth_mbps = 1.2, delay_ms = 2, queue_packets = 8 }
reverse = { bandwidth_mbps = 1.4, delay_ms = 2, queue_packets = 8 }
[[topology.links]]
name = "wired"
a = "bs"
b = "ch"
link = { bandwidth_mbps = 10, delay_ms = 1, queue_packets = 100 }
"#;

fn parse(body: &str) -> Result<Scenario, ScenarioError> {
    let text = format!("duration_s = 60\n{TOPOLOGY}\n{body}");
    Scenario::parse(&text, "env-test.toml", Path::new("."), "env-test")
}

fn udp(actions: &str, times: &str, beacon_s: f64) -> String {
    format!(
        r#"
[[flows]]
name = "cbr0"
type = "cbr"
from = "mh"
to = "ch"
rate_kbps = 952
packet_bytes = 1400
[env]
host = "mh"
[env.handoffs]
link = "wireless"
times_s = {times}
beacon_interval_s = {beacon_s}
[[env.sockets]]
flow = "cbr0"
packets = 4000
actions = {actions}
"#
    )
}

const SLEEP: &str = r#"[{ param = "avail", level = 3, action = "udp-sleep" },
  { param = "avail", level = 4, action = "udp-wakeup" }]"#;

fn run(s: &Scenario, seed: u64) -> FlowResult {
    let out = s.run(seed, &mut |_| {});
    let Ok(out) = out else {
        panic!("run failed: {out:?}");
    };
    out.results.flows.into_iter().next().expect("one flow")
}

fn c(f: &FlowResult, k: &str) -> f64 {
    f.counters.get(k).copied().unwrap_or(f64::NAN)
}

fn invalid(body: &str) -> (String, String) {
    match parse(body) {
        Err(ScenarioError::Invalid { file, field, .. }) => {
            assert_eq!(file, "env-test.toml");
            let msg = parse(body).map(|_| ()).unwrap_err().to_string();
            (field, msg)
        }
        other => panic!("expected an invalid field, got {other:?}"),
    }
}

#[test]
fn test_errors_name_the_field_and_the_fix() {
    let (field, msg) = invalid(
        &udp(SLEEP, "[10]", 1.0).replace("flow = \"cbr0\"\npackets", "flow = \"nope\"\npackets"),
    );
    assert_eq!(field, "env.sockets[0].flow");
    assert!(msg.contains("flows are [\"cbr0\"]"), "{msg}");

    let bad_level = SLEEP.replace("level = 4", "level = 7");
    let (field, msg) = invalid(&udp(&bad_level, "[10]", 1.0));
    assert_eq!(field, "env.sockets[0].actions[1].level");
    assert!(msg.contains("5 levels"), "{msg}");

    let tcp_on_udp = r#"[{ param = "avail", level = 3, action = "tcp-rst-timers" }]"#;
    let (field, msg) = invalid(&udp(tcp_on_udp, "[10]", 1.0));
    assert_eq!(field, "env.sockets[0].actions[0].action");
    assert!(msg.contains("use udp-"), "{msg}");

    let (field, msg) = invalid(&udp(SLEEP, "[10, 11]", 1.0));
    assert_eq!(field, "env.handoffs.times_s[1]");
    assert!(msg.contains("at least 3.200 s apart"), "{msg}");

    let (field, _) =
        invalid(&udp(SLEEP, "[10]", 1.0).replace("link = \"wireless\"", "link = \"radio\""));
    assert_eq!(field, "env.handoffs.link");

    let (field, msg) = invalid(
        &udp(SLEEP, "[10]", 1.0).replace("action = \"udp-sleep\"", "action = \"udp-snooze\""),
    );
    assert_eq!(field, "env.sockets[0].actions[0].action");
    assert!(msg.contains("udp-sleep, udp-wakeup"), "{msg}");

    let no_levels = "[env]\nhost = \"mh\"\n[[env.params]]\nname = \"signal\"\npoints = [[0, 1]]\n";
    let (field, msg) = invalid(no_levels);
    assert_eq!(field, "env.params[0].levels");
    assert!(msg.contains("preset = \"handoff\""), "{msg}");

    let (field, _) = invalid("[env]\nhost = \"moon\"\n");
    assert_eq!(field, "env.host");
}

#[test]
fn test_handoff_plan_follows_the_beacon_model() {
    let s = parse(&udp(SLEEP, "[10, 30]", 1.0)).expect("valid");
    let h = s
        .env
        .as_ref()
        .and_then(|e| e.handoffs.as_ref())
        .expect("handoffs");
    for seed in 1..20 {
        for ho in h.plan(seed) {
            let detect = (ho.started - ho.lost).as_secs_f64();
            // Second beacon slot at or after the loss (1..2 s) plus 0.2 s.
            assert!(
                (1.2..=2.2).contains(&detect),
                "seed {seed}: detect {detect}"
            );
            let handoff = (ho.over - ho.started).as_secs_f64();
            assert!(
                (handoff - 1.0).abs() < 1e-9,
                "handoff lasts one beacon: {handoff}"
            );
        }
    }
    assert_ne!(h.plan(1), h.plan(2), "the beacon phase comes from the seed");
    assert_eq!(h.plan(3), h.plan(3));
}

#[test]
fn test_handoff_fade_starts_the_blackout_before_the_cell_is_lost() {
    let plain = parse(&udp(SLEEP, "[10, 30]", 1.0)).expect("valid");
    let body = udp(SLEEP, "[10, 30]", 1.0).replace(
        "beacon_interval_s = 1\n",
        "beacon_interval_s = 1\nfade_max_s = 1.0\n",
    );
    assert!(body.contains("fade_max_s"), "{body}");
    let faded = parse(&body).expect("valid");
    let handoffs = |s: &Scenario| s.env.as_ref().and_then(|e| e.handoffs.clone()).expect("h");
    let (plain, faded) = (handoffs(&plain), handoffs(&faded));
    let mut fades = Vec::new();
    for seed in 1..30 {
        for (p, f) in plain.plan(seed).iter().zip(faded.plan(seed)) {
            // Without a fade the blackout starts when the cell is lost, as before.
            assert_eq!(p.faded, p.lost);
            // The fade moves only the blackout's start: the beacon phase is the same draw.
            assert_eq!((p.lost, p.started, p.over), (f.lost, f.started, f.over));
            let fade = (f.lost - f.faded).as_secs_f64();
            assert!((0.0..1.0).contains(&fade), "seed {seed}: fade {fade}");
            fades.push(fade);
        }
    }
    // Drawn per handoff, spread over the whole range.
    let lo = fades.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = fades.iter().copied().fold(0.0, f64::max);
    assert!(lo < 0.2 && hi > 0.8, "fades {lo}..{hi}");
}

#[test]
fn test_udp_sleep_saves_one_beacon_of_datagrams_per_handoff() {
    let times = "[10, 25, 40]";
    let sleep = parse(&udp(SLEEP, times, 1.0)).expect("valid");
    let plain = parse(&udp("[]", times, 1.0)).expect("valid");
    let (mut saved, mut lost_sleep) = (0.0, 0.0);
    for seed in 1..=3 {
        let a = run(&sleep, seed);
        let b = run(&plain, seed);
        assert_eq!(c(&a, "datagrams_sent"), 4000.0);
        assert_eq!(c(&b, "datagrams_sent"), 4000.0);
        assert_eq!(c(&a, "env_actions"), 6.0, "sleep and wakeup per handoff");
        assert_eq!(c(&a, "sends_blocked"), 3.0);
        let blocked = c(&a, "blocked_s");
        assert!(
            (blocked - 3.0).abs() < 0.1,
            "blocked {blocked} s ≈ 3 beacons"
        );
        saved += b.packets_lost as f64 - a.packets_lost as f64;
        lost_sleep += a.packets_lost as f64;
    }
    // 85 datagrams/s × 1 s beacon × 3 handoffs × 3 seeds.
    let per_handoff = saved / 9.0;
    assert!(
        (75.0..=95.0).contains(&per_handoff),
        "saved {per_handoff}/handoff"
    );
    assert!(
        lost_sleep > 0.0,
        "datagrams sent before the host notices are still lost"
    );
    // Deterministic: the same seed gives the same losses.
    assert_eq!(run(&sleep, 7).packets_lost, run(&sleep, 7).packets_lost);
}

#[test]
fn test_udp_buffer_never_blocks_and_flushes_on_wakeup() {
    let buffer = r#"[{ param = "avail", level = 3, action = "udp-buffer" },
      { param = "avail", level = 4, action = "udp-wakeup" }]"#;
    let s = parse(&udp(buffer, "[10]", 1.0)).expect("valid");
    let plain = run(&parse(&udp("[]", "[10]", 1.0)).expect("valid"), 1);
    let f = run(&s, 1);
    assert_eq!(c(&f, "blocked_s"), 0.0);
    assert!(
        (80.0..=90.0).contains(&c(&f, "datagrams_buffered")),
        "{f:?}"
    );
    assert_eq!(
        c(&f, "datagrams_sent"),
        4000.0,
        "every buffered datagram is flushed"
    );
    assert!(f.packets_lost < plain.packets_lost);
}

#[test]
fn test_udp_discard_and_fail_drop_at_the_socket() {
    for (action, counter) in [
        ("udp-discard", "datagrams_discarded"),
        ("udp-fail", "sends_failed"),
    ] {
        let acts = format!(
            r#"[{{ param = "avail", level = 3, action = "{action}" }},
              {{ param = "avail", level = 4, action = "udp-normal" }}]"#
        );
        let f = run(&parse(&udp(&acts, "[10]", 2.0)).expect("valid"), 1);
        let n = c(&f, counter);
        assert!((160.0..=180.0).contains(&n), "{action}: {n} ≈ 2 s × 85/s");
        assert_eq!(c(&f, "datagrams_sent") + n, 4000.0);
    }
}

fn tcp_signal(actions: &str, hysteresis: &str) -> String {
    format!(
        r#"
[[flows]]
name = "tcp0"
type = "tcp"
from = "mh"
to = "ch"
mss = 1400
[env]
host = "mh"
[[env.params]]
name = "signal"
levels = [{{ value = 12.5, kind = "low" }}, {{ value = 13.5, kind = "high" }}]
points = [[0, 15], [10, 12], [19, 15], [30, 12], [41, 15]]
outage_below = 13
outage_link = "wireless"
{hysteresis}
[[env.sockets]]
flow = "tcp0"
actions = {actions}
"#
    )
}

#[test]
fn test_tcp_rst_timers_on_signal_recovery_shortens_the_stall() {
    let rst = r#"[{ param = "signal", level = 1, action = "tcp-rst-timers" }]"#;
    let a = run(&parse(&tcp_signal(rst, "")).expect("valid"), 1);
    let b = run(&parse(&tcp_signal("[]", "")).expect("valid"), 1);
    assert_eq!(
        c(&a, "env_rst_timers"),
        2.0,
        "one reset per return of the signal"
    );
    assert_eq!(c(&b, "env_rst_timers"), 0.0);
    assert!(
        a.bytes_delivered as f64 > 1.05 * b.bytes_delivered as f64,
        "reset {} vs plain {}",
        a.bytes_delivered,
        b.bytes_delivered
    );
}

#[test]
fn test_min_dwell_suppresses_a_short_signal_dip() {
    let body = tcp_signal("[]", "").replace(
        "points = [[0, 15], [10, 12], [19, 15], [30, 12], [41, 15]]",
        "points = [[0, 15], [10, 12], [10.2, 15], [30, 12], [41, 15]]",
    );
    let plain = run(&parse(&body).expect("valid"), 1);
    assert_eq!(c(&plain, "env_events"), 4.0);
    let damped = body.replace(
        "outage_link = \"wireless\"",
        "outage_link = \"wireless\"\nmin_dwell_ms = 500",
    );
    let damped = run(&parse(&damped).expect("valid"), 1);
    assert_eq!(
        c(&damped, "env_events"),
        2.0,
        "the 200 ms dip is not an event"
    );
}

fn tcp_handoff(from: &str, to: &str, actions: &str) -> String {
    format!(
        r#"
[[flows]]
name = "tcp0"
type = "tcp"
from = "{from}"
to = "{to}"
mss = 1400
bytes = 2000000
[env]
host = "mh"
[env.handoffs]
link = "wireless"
times_s = [3, 10]
beacon_interval_s = 2.0
[[env.sockets]]
flow = "tcp0"
actions = {actions}
"#
    )
}

#[test]
fn test_tcp_rst_timers_after_handoff_from_the_mobile_sender() {
    let rst = r#"[{ param = "avail", level = 4, action = "tcp-rst-timers" }]"#;
    let a = run(&parse(&tcp_handoff("mh", "ch", rst)).expect("valid"), 1);
    let b = run(&parse(&tcp_handoff("mh", "ch", "[]")).expect("valid"), 1);
    assert_eq!(c(&a, "env_rst_timers"), 2.0);
    let (ta, tb) = (c(&a, "completed_s"), c(&b, "completed_s"));
    assert!(ta + 0.5 < tb, "reset {ta} s vs plain {tb} s");
}

#[test]
fn test_tcp_dupacks_after_handoffs_from_the_mobile_receiver() {
    let dup = r#"[{ param = "avail", level = 4, action = "tcp-dupacks", count = 5 }]"#;
    let a = run(&parse(&tcp_handoff("ch", "mh", dup)).expect("valid"), 1);
    let b = run(&parse(&tcp_handoff("ch", "mh", "[]")).expect("valid"), 1);
    assert_eq!(c(&a, "receiver_env_dup_acks_requested"), 10.0);
    assert_eq!(
        c(&a, "receiver_acks_sent"),
        c(&b, "receiver_acks_sent") + 10.0
    );
    // Our NewReno sender follows RFC 6582: duplicate ACKs for data sent before an RTO do not
    // start a fast retransmit, so after a handoff long enough for an RTO the extra ACKs
    // change nothing (EXPERIMENTS.md, env-table6).
    assert_eq!(c(&a, "completed_s"), c(&b, "completed_s"));
}
