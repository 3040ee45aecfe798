//! The plain delay line: without a rate or loss the link only delays, each way.

use adaptnet_linkemu::EmulatorOptions;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

mod common;

#[test]
fn a_20_ms_delay_line_gives_a_40_ms_round_trip_and_leaves_nothing_behind() {
    let _slot = common::serial();
    let table = common::links("[link]\nbandwidth_mbps = 1000000\ndelay_ms = 20\n");
    let Some(link) = common::up("delay line", table, EmulatorOptions::default()) else {
        return;
    };
    let name = link.emulated_ns().to_string();
    let far = SocketAddr::new(link.far_addr().into(), 7);
    let echo = link
        .run_far(move || UdpSocket::bind(far).expect("bind far side"))
        .expect("far side");
    let echo_thread = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        echo.set_read_timeout(Some(Duration::from_secs(5))).ok();
        for _ in 0..20 {
            let Ok((n, from)) = echo.recv_from(&mut buf) else {
                return;
            };
            echo.send_to(&buf[..n], from).expect("echo");
        }
    });
    let rtts = link
        .run_emulated(move || {
            let s = UdpSocket::bind("0.0.0.0:0").expect("bind emulated side");
            s.set_read_timeout(Some(Duration::from_secs(2))).ok();
            let mut rtts = Vec::new();
            let mut buf = [0u8; 2048];
            for i in 0..20u8 {
                let t0 = Instant::now();
                s.send_to(&[i; 100], far).expect("send");
                let n = s.recv(&mut buf).expect("echo back");
                assert_eq!(&buf[..n], &[i; 100]);
                rtts.push(t0.elapsed());
                std::thread::sleep(Duration::from_millis(10));
            }
            rtts
        })
        .expect("emulated side");
    echo_thread.join().expect("echo thread");
    let report = link.shutdown().expect("report");
    let mut sorted = rtts.clone();
    sorted.sort();
    let median = sorted[sorted.len() / 2];
    eprintln!("RTTs {rtts:?}; report {report:?}");
    assert!(
        median >= Duration::from_millis(40) && median < Duration::from_millis(42),
        "median RTT {median:?} should be 40 ms plus the hosts' own time"
    );
    assert_eq!(report.uplink.link.delivered_packets, 20);
    assert_eq!(report.downlink.link.delivered_packets, 20);
    assert!(
        common::namespaces_named(&name).is_empty(),
        "namespaces left behind"
    );
}
