//! TPBA over real loopback sockets: kernel TCP for probing, UDP for running, ADUs complete,
//! in order and exactly once across the switches.

use adaptnet_core::tpba::{Agreement, FsConfig, TpbaConfig};
use adaptnet_runtime::tpba::{TpbaReceiver, TpbaSender};
use std::time::{Duration, Instant};

const ADUS: u64 = 1500;

/// ADU `i`: its number in the first 8 bytes, then a pattern; 100 to ~2.9 KB, so large ones
/// need several 512-byte datagrams in the running period.
fn adu(i: u64) -> Vec<u8> {
    let len = 100 + (i * 37 % 2800) as usize;
    let mut v: Vec<u8> = (0..len).map(|k| (k as u64 ^ i) as u8).collect();
    v[..8].copy_from_slice(&i.to_be_bytes());
    v
}

/// Short periods so one run sees probing → running → probing: `T_TCP` 50 ms, at most four
/// samples per probing period, `T_running` 300 ms.
fn config() -> FsConfig {
    FsConfig {
        tpba: TpbaConfig {
            t_running: Duration::from_millis(300),
            t_tcp: Duration::from_millis(50),
            agreement: Agreement::Relative { z: 0.3 },
            max_probe_samples: Some(4),
            t_rtcp: Duration::from_millis(50),
            t_adapt: Duration::from_millis(150),
            ..TpbaConfig::default()
        },
        reorder_timeout: Duration::from_millis(300),
        ..FsConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adus_arrive_complete_in_order_once_across_switches() {
    let mut rx = TpbaReceiver::bind_with("127.0.0.1:0".parse().expect("addr"), config())
        .await
        .expect("bind");
    let tx = TpbaSender::connect(rx.local_addr(), config())
        .await
        .expect("connect");
    let started = Instant::now();
    // An application-limited media source: two writes per ADU, about one ADU per ms.
    let source = tokio::spawn(async move {
        for i in 0..ADUS {
            let a = adu(i);
            let (head, tail) = a.split_at(a.len() / 2);
            tx.send(head.to_vec(), false).await.expect("send head");
            tx.send(tail.to_vec(), true).await.expect("send tail");
            if i % 2 == 1 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        tx.finish().await.expect("finish")
    });
    for i in 0..ADUS {
        let got = tokio::time::timeout(Duration::from_secs(20), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("ADU {i} did not arrive in time"))
            .unwrap_or_else(|| panic!("flow ended before ADU {i}: {:?}", rx.stats()));
        assert_eq!(got, adu(i), "ADU {i} intact and in order");
    }
    let stats = source.await.expect("source task");
    // Nothing more: no duplicate, and the flow ends once the sender is gone.
    let end = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("the receiver ends after the sender finishes");
    assert_eq!(end, None, "no ADU delivered twice");
    let rstats = rx.stats();
    println!(
        "{} ADUs in {:.2} s; sender {stats:?}; receiver {rstats:?}",
        ADUS,
        started.elapsed().as_secs_f64()
    );
    assert!(
        stats.switches_to_running >= 1,
        "probing → running: {stats:?}"
    );
    assert!(
        !stats.probed_rates_bytes_per_s.is_empty()
            && stats.probed_rates_bytes_per_s.iter().all(|&r| r > 0.0),
        "probed rates > 0: {stats:?}"
    );
    assert!(
        rstats.adus_tcp > 0 && rstats.adus_udp > 0,
        "both paths carried ADUs: {rstats:?}"
    );
    assert_eq!(rstats.adus_tcp + rstats.adus_udp, ADUS);
    assert_eq!(rstats.adus_lost, 0);
    assert!(stats.tcp_bytes_acked > 0);
}
