//! The probe protocol between two daemons across a namespace link (issue 20, item 5; needs
//! root, skipped otherwise): daemon A in the root namespace, daemon B inside a namespace
//! behind a veth shaped with `tbf`. A probe-fed flow sends UDP from A's host to a receiver
//! beside B, which reports every arrival to B; the sender also drops one datagram in ten
//! itself (a deliberately lossy path on top of the shaper's drops). The loss the sender's CM
//! learns from B's probe responses alone is compared with the truth counted at both ends.

use adaptnet_core::cm::{FeedbackSource, FlowKey, PeerAddr, Request};
use adaptnet_core::daemon::Message;
use adaptnet_daemon::{DaemonClient, DaemonConfig};
use adaptnet_testbed::netns::NetnsLink;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const PORT: u16 = 5099;
const MTU: u64 = 1400;
const RUN: Duration = Duration::from_secs(8);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn probe_loss_across_a_namespace_link_matches_the_truth() {
    let link = match NetnsLink::create("dmp", 48) {
        Ok(l) => l,
        Err(e) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must run the namespace tests: {e}"
            );
            println!("skipped: {e}");
            return;
        }
    };
    link.shape("4mbit").expect("tbf");
    let tmp = std::env::temp_dir();
    let id = std::process::id();
    let sock_a = tmp.join(format!("adaptnet-h-daemon-{id}-pa.sock"));
    let sock_b = tmp.join(format!("adaptnet-h-daemon-{id}-pb.sock"));
    let a_ip = link.a_ip.clone();
    let b_ip = link.b_ip.clone();

    // Daemon B and the receiver, inside the namespace, on a runtime of their own.
    let stop = Arc::new(AtomicBool::new(false));
    let received = Arc::new(AtomicU64::new(0));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let inside = {
        let (stop, received, sock_b) = (stop.clone(), received.clone(), sock_b.clone());
        let (b_ip, a_ip) = (b_ip.clone(), a_ip.clone());
        link.spawn_inside(move || {
            let rt = runtime();
            rt.block_on(async move {
                let mut c = DaemonConfig::with_socket(&sock_b);
                c.cm.mtu_bytes = MTU;
                c.cm.probe_bind = Some(format!("{b_ip}:{PORT}").parse().expect("addr"));
                let _d = adaptnet_daemon::start(c).await.expect("daemon B");
                let rx = tokio::net::UdpSocket::bind(format!("{b_ip}:0"))
                    .await
                    .expect("receiver");
                let client = DaemonClient::connect(&sock_b, "receiver").await.expect("B");
                ready_tx
                    .send(rx.local_addr().expect("addr"))
                    .expect("ready");
                let from = PeerAddr::from(a_ip.parse::<std::net::IpAddr>().expect("ip"));
                let mut buf = vec![0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(Ok(n)) =
                        tokio::time::timeout(Duration::from_millis(100), rx.recv(&mut buf)).await
                    else {
                        continue;
                    };
                    received.fetch_add(n as u64, Ordering::Relaxed);
                    let _ = client.received(from, FlowKey(7), n as u64, false).await;
                }
            });
        })
        .expect("inside")
    };
    let to: SocketAddr = ready_rx.recv().expect("receiver address");

    // Daemon A and the sender, outside.
    let rt = runtime();
    let (sent, q) = rt.block_on(async {
        let mut c = DaemonConfig::with_socket(&sock_a);
        c.cm.mtu_bytes = MTU;
        c.cm.probe_bind = Some(format!("{a_ip}:{PORT}").parse().expect("addr"));
        c.cm.probe_peer_port = PORT;
        let _d = adaptnet_daemon::start(c).await.expect("daemon A");
        let client = DaemonClient::connect(&sock_a, "sender").await.expect("A");
        let sock = tokio::net::UdpSocket::bind(format!("{a_ip}:0"))
            .await
            .expect("sender");
        let (flow, _) = client
            .open(
                PeerAddr::from(to.ip()),
                FlowKey(7),
                1.0,
                FeedbackSource::Probe,
            )
            .await
            .expect("open");
        client
            .request(flow, Request::bytes(1 << 38))
            .await
            .expect("request");
        let deadline = tokio::time::Instant::now() + RUN;
        let (mut sent, mut n) = (0u64, 0u64);
        let payload = vec![0u8; MTU as usize];
        while tokio::time::Instant::now() < deadline {
            let Ok(Some(Message::Grant { bytes, .. })) =
                tokio::time::timeout(Duration::from_millis(200), client.next_event()).await
            else {
                continue;
            };
            n += 1;
            let len = usize::try_from(bytes)
                .unwrap_or(payload.len())
                .min(payload.len());
            // One in ten never leaves: a deliberately lossy path.
            if n % 10 != 0 {
                let _ = sock.send_to(&payload[..len], to).await;
            }
            sent += len as u64;
            client.notify(flow, len as u64).await.expect("notify");
        }
        // Let the last probes be answered.
        tokio::time::sleep(Duration::from_millis(300)).await;
        (sent, client.query(flow).await.expect("query"))
    });
    stop.store(true, Ordering::Relaxed);
    inside.join().expect("inside thread");
    let got = received.load(Ordering::Relaxed);
    let truth = 1.0 - got as f64 / sent as f64;
    let measured = q.probe_lost_bytes as f64 / q.probe_sent_bytes.max(1) as f64;
    println!(
        "tbf 4mbit, {} s: sent {sent} B, received {got} B: true loss {truth:.3}; CM from probes {measured:.3} over {} B, srtt {:?}",
        RUN.as_secs(),
        q.probe_sent_bytes,
        q.srtt
    );
    assert!(q.srtt.is_some(), "{q:?}");
    assert!(q.probe_sent_bytes > sent / 2, "{q:?}");
    assert!(truth >= 0.09, "the path lost {truth}");
    assert!(
        (measured - truth).abs() < 0.03,
        "measured {measured} vs true {truth}"
    );
}
