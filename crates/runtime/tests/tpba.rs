//! TPBA over real loopback sockets: kernel TCP for probing, UDP for running, ADUs complete,
//! in order and exactly once across the switches.

use adaptnet_core::tpba::{Agreement, FsConfig, TpbaConfig};
use adaptnet_runtime::ConnectionError;
use adaptnet_runtime::tpba::{TpbaOptions, TpbaReceiver, TpbaSender};
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
fn options() -> TpbaOptions {
    TpbaOptions::with_fs(FsConfig {
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
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adus_arrive_complete_in_order_once_across_switches() {
    let mut rx = TpbaReceiver::bind("127.0.0.1:0".parse().expect("addr"), options()).expect("bind");
    let tx = TpbaSender::connect(rx.local_addr(), options())
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
            .unwrap_or_else(|e| panic!("flow ended before ADU {i} ({e}): {:?}", rx.stats()));
        assert_eq!(got, adu(i), "ADU {i} intact and in order");
    }
    let stats = source.await.expect("source task");
    // Nothing more: no duplicate, and the flow ends once the sender is gone.
    let end = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("the receiver ends after the sender finishes");
    assert!(
        matches!(end, Err(ConnectionError::ClosedByPeer(_))),
        "no ADU delivered twice, and the end says why: {end:?}"
    );
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

/// Dropping the sender mid-flow closes it gracefully: the receiver gets every complete ADU,
/// then learns the sender closed, within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_sender_ends_the_flow_at_the_receiver_within_a_second() {
    let mut rx = TpbaReceiver::bind("127.0.0.1:0".parse().expect("addr"), options()).expect("bind");
    let tx = TpbaSender::connect(rx.local_addr(), options())
        .await
        .expect("connect");
    for i in 0..20 {
        tx.send(adu(i), true).await.expect("send");
    }
    tx.send(b"an unterminated ADU".to_vec(), false)
        .await
        .expect("send");
    for i in 0..20 {
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("in time")
            .expect("an ADU");
        assert_eq!(got, adu(i));
    }
    let dropped = Instant::now();
    drop(tx);
    let end = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("the flow ends");
    assert!(
        matches!(end, Err(ConnectionError::ClosedByPeer(_))),
        "{end:?}"
    );
    assert!(
        dropped.elapsed() < Duration::from_secs(1),
        "ended {:?} after the drop",
        dropped.elapsed()
    );
}

/// Dropping the receiver ends the sender's flow: its next sends fail with why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_receiver_fails_the_senders_sends() {
    let rx = TpbaReceiver::bind("127.0.0.1:0".parse().expect("addr"), options()).expect("bind");
    let tx = TpbaSender::connect(rx.local_addr(), options())
        .await
        .expect("connect");
    tx.send(adu(0), true).await.expect("send");
    drop(rx);
    let deadline = Instant::now() + Duration::from_secs(5);
    let err = loop {
        match tx.send(adu(1), true).await {
            Ok(()) => {
                assert!(Instant::now() < deadline, "the sender never learned");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, adaptnet_runtime::tpba::TpbaError::ConnectionLost(_)),
        "{err}"
    );
    tx.wait_idle().await;
}

/// Nobody sends a preamble: the receiver ends with `TimedOut` at its preamble timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_ends_the_receiver_at_the_preamble_timeout() {
    let mut o = options();
    o.preamble_timeout = Duration::from_millis(200);
    let mut rx = TpbaReceiver::bind("127.0.0.1:0".parse().expect("addr"), o).expect("bind");
    let _silent = tokio::net::TcpStream::connect(rx.local_addr())
        .await
        .expect("connect");
    let end = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("ends");
    assert!(matches!(end, Err(ConnectionError::TimedOut)), "{end:?}");
}
