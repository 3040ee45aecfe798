//! The emulated link does what the model says: a saturating UDP flow is delivered at the
//! trace's delivery opportunities, and the per-packet schedule log replays exactly through the
//! simulator's link model.

use adaptnet_core::Time;
use adaptnet_linkemu::EmulatorOptions;
use adaptnet_linkemu::measure::{self, FULL_PAYLOAD_BYTES};
use adaptnet_sim::link::{Link, WireSize};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

mod common;

/// Seconds of the saturating run in the test suite (the 60-s check is `adaptnet bench link`,
/// reported in EXPERIMENTS.md).
const SECONDS: u64 = 10;

#[test]
fn a_saturating_udp_flow_is_delivered_at_the_traces_opportunities_within_1_percent() {
    let _slot = common::serial();
    let dir = common::traces_dir().join("mahimahi");
    if !dir.join("Verizon-LTE-short.down").is_file() {
        common::skip("UDP schedule", &format!("no traces in {}", dir.display()));
        return;
    }
    let table = common::table(
        "trace = { format = \"mahimahi\", path = \"mahimahi/Verizon-LTE-short.down\" }\n\
         delay_ms = 20\nqueue_packets = 200",
        "bandwidth_mbps = 100\ndelay_ms = 20",
    );
    let downlink = table.downlink.clone();
    let Some(link) = common::up("UDP schedule", table, EmulatorOptions::default()) else {
        return;
    };
    let to = SocketAddr::new(link.emulated_addr().into(), 9000);
    let rx = link
        .run_emulated(move || UdpSocket::bind(to).expect("bind emulated side"))
        .expect("emulated side");
    let tx = link
        .run_far(|| UdpSocket::bind("0.0.0.0:0").expect("bind far side"))
        .expect("far side");
    let run = Duration::from_secs(SECONDS);
    // 60 Mbit/s: above the trace's rate in every second, so the queue never runs dry.
    let sender =
        std::thread::spawn(move || measure::paced_udp(&tx, to, 60e6, FULL_PAYLOAD_BYTES, run));
    let started = link.started_at();
    let arrivals = measure::arrivals(&rx, started, run);
    sender.join().expect("sender");
    let report = link.shutdown().expect("report");
    // From 1 s (the queue has filled) to the end.
    let m = measure::schedule_match(&downlink, 1500, &arrivals, Duration::from_secs(1), run);
    eprintln!("{m:?}\nemulator: {:?}", report.downlink);
    assert!(
        m.error.abs() <= 0.01,
        "received {} packets where the trace has {:.0} opportunities ({:+.2} %)",
        m.received,
        m.expected,
        m.error * 100.0
    );
}

#[derive(Clone)]
struct Replayed(u32, u64);

impl WireSize for Replayed {
    fn wire_len(&self) -> u32 {
        self.0
    }
}

/// Runs the model's timeouts up to `until` (all of them for `None`), noting each packet's fate.
fn advance(
    model: &mut Link<Replayed>,
    fates: &mut std::collections::HashMap<u64, String>,
    until: Option<Time>,
) {
    while let Some(next) = model
        .poll_timeout()
        .filter(|&n| until.is_none_or(|u| n <= u))
    {
        model.handle_timeout(next);
        while let Some((at, p)) = model.poll_arrival(next) {
            fates.insert(p.1, format!("delivered,{}", at.as_nanos()));
        }
        while let Some((p, why)) = model.poll_dropped() {
            fates.insert(p.1, format!("{why:?}"));
        }
    }
}

#[test]
fn the_schedule_log_replays_exactly_through_the_simulators_link_model() {
    let _slot = common::serial();
    let log = std::env::temp_dir().join(format!("adaptnet-linkemu-log-{}.csv", std::process::id()));
    // Loss, an outage and a reordering burst, so every fate occurs.
    let text = "bandwidth_mbps = 5\ndelay_ms = 10\nqueue_packets = 20\n\
                loss = { bernoulli = 0.05 }\n\
                outages = [{ at_s = 1.0, duration_s = 0.3 }]\n\
                reorder = [{ at_s = 2.0, duration_s = 0.2, extra_delay_ms = 15 }]";
    let table = common::table(text, "bandwidth_mbps = 100");
    let downlink = table.downlink.clone();
    let seed = table.seed;
    let opts = EmulatorOptions {
        schedule_log: Some(log.clone()),
        ..EmulatorOptions::default()
    };
    let Some(link) = common::up("schedule log", table, opts) else {
        return;
    };
    let to = SocketAddr::new(link.emulated_addr().into(), 9000);
    let rx = link
        .run_emulated(move || UdpSocket::bind(to).expect("bind"))
        .expect("emulated side");
    let tx = link
        .run_far(|| UdpSocket::bind("0.0.0.0:0").expect("bind"))
        .expect("far side");
    let run = Duration::from_secs(3);
    let sender = std::thread::spawn(move || measure::paced_udp(&tx, to, 8e6, 1000, run));
    let arrivals = measure::arrivals(&rx, link.started_at(), run + Duration::from_millis(300));
    sender.join().expect("sender");
    link.shutdown().expect("report");
    let text = std::fs::read_to_string(&log).expect("log written");
    std::fs::remove_file(&log).ok();
    // Replay the downlink's offered packets through a fresh model with the same seed.
    let mut rows: Vec<Vec<String>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .filter(|r: &Vec<String>| r[0] == "downlink")
        .collect();
    rows.sort_by_key(|r| r[1].parse::<u64>().expect("id"));
    let mut model: Link<Replayed> = Link::new(downlink, seed.wrapping_add(1));
    let mut fates = std::collections::HashMap::new();
    let mut offered: Vec<(u64, u32, u64)> = rows
        .iter()
        .map(|r| {
            (
                r[2].parse().expect("offered"),
                r[3].parse().expect("bytes"),
                r[1].parse().expect("id"),
            )
        })
        .collect();
    offered.sort();
    for &(t, bytes, id) in &offered {
        let now = Time::from_nanos(t);
        advance(&mut model, &mut fates, Some(now));
        if let Err((p, _)) = model.enqueue(now, Replayed(bytes, id)) {
            fates.insert(p.1, "QueueFull".to_string());
        }
    }
    advance(&mut model, &mut fates, None);
    let mut counts = std::collections::BTreeMap::new();
    for r in &rows {
        let id: u64 = r[1].parse().expect("id");
        let emulated = match r[4].as_str() {
            "delivered" => format!("delivered,{}", r[5]),
            "queue" => "QueueFull".into(),
            "random" => "RandomLoss".into(),
            "outage" => "Outage".into(),
            other => panic!("unexpected fate {other}"),
        };
        *counts.entry(r[4].clone()).or_insert(0u64) += 1;
        assert_eq!(fates.get(&id), Some(&emulated), "packet {id}: log {r:?}");
    }
    eprintln!("replayed {} packets: {counts:?}", rows.len());
    for fate in ["delivered", "queue", "random", "outage"] {
        assert!(
            counts.get(fate).copied().unwrap_or(0) > 0,
            "no packet {fate}: {counts:?}"
        );
    }
    let delivered = counts.get("delivered").copied().unwrap_or(0);
    assert_eq!(
        arrivals.len() as u64,
        delivered,
        "every logged delivery arrived"
    );
}
