//! With offloads the kernel hands the emulator GSO super-packets, and it writes GRO batches;
//! the model must still see — and queue, drop and deliver — MTU-sized packets one by one,
//! and what arrives must be what was sent.

use adaptnet_linkemu::measure::{self, FULL_PAYLOAD_BYTES};
use adaptnet_linkemu::{EmulatorOptions, LinkReport};
use std::io::{Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

mod common;

/// Options with a namespace name of this test file's own (`emus-offload-WHAT-PID`).
fn named(what: &str, offload: bool) -> EmulatorOptions {
    EmulatorOptions {
        name: Some(format!("emus-offload-{what}-{}", std::process::id())),
        offload,
        ..EmulatorOptions::default()
    }
}

/// The byte at offset `i` of the TCP test's stream: a pattern that a misplaced, repeated or
/// lost segment would break.
fn pattern(i: u64) -> u8 {
    (i % 251) as u8
}

/// Sends `bytes` of the pattern over kernel TCP from the far side to the emulated side and
/// checks every byte; returns the emulator's report.
fn tcp_transfer(what: &str, offload: bool, bytes: u64) -> Option<LinkReport> {
    // 1 Tbit/s: a 1500-byte packet takes 12 ns, the emulator is the bottleneck.
    let unlimited = "bandwidth_mbps = 1000000\nqueue_packets = 1000";
    let table = common::table(unlimited, unlimited);
    let link = common::up(what, table, named(what, offload))?;
    let far = SocketAddr::new(link.far_addr().into(), 5301);
    let listener = link
        .run_far(move || std::net::TcpListener::bind(far).expect("listen"))
        .expect("far side");
    let sender = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut chunk = vec![0u8; 1 << 16];
        let mut sent = 0u64;
        while sent < bytes {
            let n = (bytes - sent).min(chunk.len() as u64) as usize;
            for (k, b) in chunk.iter_mut().take(n).enumerate() {
                *b = pattern(sent + k as u64);
            }
            s.write_all(&chunk[..n]).expect("send");
            sent += n as u64;
        }
    });
    let receiver = link
        .spawn_emulated(move || {
            let mut s = std::net::TcpStream::connect(far).expect("connect across the link");
            s.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut buf = vec![0u8; 1 << 16];
            let mut got = 0u64;
            let t0 = Instant::now();
            while got < bytes && t0.elapsed() < Duration::from_secs(30) {
                let n = s.read(&mut buf).expect("receive");
                if n == 0 {
                    break;
                }
                for (k, &b) in buf[..n].iter().enumerate() {
                    assert_eq!(b, pattern(got + k as u64), "byte {}", got + k as u64);
                }
                got += n as u64;
            }
            got
        })
        .expect("emulated side");
    let got = receiver.join().expect("receiver");
    sender.join().expect("sender");
    let report = link.shutdown().expect("report");
    eprintln!("{what}: {got} bytes; emulator: {:?}", report.downlink);
    assert_eq!(got, bytes, "{what}: the whole stream arrived");
    Some(report)
}

#[test]
fn a_kernel_tcp_stream_crosses_intact_and_its_super_packets_are_read_whole() {
    let _slot = common::serial();
    const BYTES: u64 = 40 << 20;
    let Some(on) = tcp_transfer("tcp-on", true, BYTES) else {
        return;
    };
    let Some(off) = tcp_transfer("tcp-off", false, BYTES) else {
        return;
    };
    assert!(on.offload && !off.offload);
    let per_read =
        |r: &LinkReport| r.downlink.link.offered_packets as f64 / r.downlink.reads as f64;
    // Without offloads each read is one packet; with them TSO bursts arrive whole.
    assert_eq!(off.downlink.reads, off.downlink.link.offered_packets);
    assert!(
        per_read(&on) >= 2.0,
        "with offloads {:.2} packets per read",
        per_read(&on)
    );
    // Either way the model carried MTU-sized packets: no more bytes per packet than 1500.
    for r in [&on, &off] {
        let l = &r.downlink.link;
        assert!(l.delivered_packets >= BYTES / 1448, "{l:?}");
        assert!(l.delivered_bytes <= l.delivered_packets * 1500, "{l:?}");
        assert_eq!(r.downlink.unsplittable, 0);
    }
}

#[test]
fn udp_segment_bursts_are_queued_and_dropped_packet_by_packet() {
    let _slot = common::serial();
    let log = std::env::temp_dir().join(format!("emus-offload-log-{}.csv", std::process::id()));
    // A 5 Mbit/s link offered 10 Mbit/s in bursts of 44 datagrams (one every 53 ms): its
    // 20-packet queue must take the head of each burst and drop the rest, packet by packet.
    let table = common::table(
        "bandwidth_mbps = 5\ndelay_ms = 10\nqueue_packets = 20",
        "bandwidth_mbps = 100",
    );
    let opts = EmulatorOptions {
        schedule_log: Some(log.clone()),
        ..named("udp-gso", true)
    };
    let Some(link) = common::up("UDP_SEGMENT bursts", table, opts) else {
        return;
    };
    let to = SocketAddr::new(link.emulated_addr().into(), 9000);
    let (rx, tx) = (
        link.run_emulated(move || UdpSocket::bind(to)),
        link.run_far(|| UdpSocket::bind("0.0.0.0:0")),
    );
    let (rx, tx) = (
        rx.expect("in").expect("bind"),
        tx.expect("in").expect("bind"),
    );
    let run = Duration::from_secs(2);
    let sender = std::thread::spawn(move || {
        measure::paced_udp_gso(&tx, to, 10e6, FULL_PAYLOAD_BYTES, 44, run).expect("UDP_SEGMENT")
    });
    let arrivals = measure::arrivals(&rx, link.started_at(), run + Duration::from_millis(300));
    let sent = sender.join().expect("sender");
    let report = link.shutdown().expect("report");
    let text = std::fs::read_to_string(&log).expect("log written");
    std::fs::remove_file(&log).ok();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .filter(|r: &Vec<&str>| r.first() == Some(&"downlink"))
        .collect();
    let count = |fate: &str| rows.iter().filter(|r| r.get(4) == Some(&fate)).count() as u64;
    eprintln!(
        "sent {sent}, logged {}, delivered {}, queue drops {}, arrived {}; emulator {:?}",
        rows.len(),
        count("delivered"),
        count("queue"),
        arrivals.len(),
        report.downlink
    );
    // The model saw each datagram as its own 1500-byte packet...
    assert!(
        rows.iter().all(|r| r.get(3) == Some(&"1500")),
        "a packet not of 1500 bytes"
    );
    assert_eq!(
        rows.len() as u64,
        sent,
        "every datagram sent reached the model"
    );
    // ... which arrived in bursts (fewer reads than packets) ...
    assert!(report.downlink.reads * 2 <= report.downlink.link.offered_packets);
    // ... queued and dropped packet by packet: some of each burst delivered, some dropped.
    assert!(count("delivered") > 0 && count("queue") > 0);
    // Every delivery arrived as a datagram of its own.
    assert_eq!(arrivals.len() as u64, count("delivered"));
    // The link drains a burst (25 ms) before the next comes (53 ms): of each, the packet in
    // transmission and the 20 the queue holds get through.
    let bursts = sent / 44;
    let per_burst = count("delivered") as f64 / bursts as f64;
    assert!(
        (20.0..=22.0).contains(&per_burst),
        "{per_burst:.2} packets delivered per burst of 44"
    );
}
