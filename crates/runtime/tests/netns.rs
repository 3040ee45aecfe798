//! Two hosts on one machine: the test runs the ATP sender in the root network namespace and
//! the receiver in a new namespace joined by a veth pair, with the sender's side shaped by a
//! `tbf` qdisc. Needs root, `ip` and `tc`; where they are missing the tests say so loudly and
//! pass — except under `CI=true`, where a skip is a failure (CI runs as root).

use adaptnet_core::nai::{OnExpiry, Outcome, Priority, SendOptions};
use adaptnet_runtime::atp::InterfaceChoice;
use adaptnet_runtime::message::{Connection, Endpoint, EndpointOptions, Transport};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::time::timeout;

mod common;
use common::Link;
/// Environment events inside a namespace (papers/001): in this binary to save a link of the
/// runtime in CI.
mod env;

/// ATP options with the estimator's interface set.
fn atp_options(server: bool, interface: InterfaceChoice) -> EndpointOptions {
    let mut options = if server {
        EndpointOptions::server(Transport::Atp)
    } else {
        EndpointOptions::client(Transport::Atp)
    };
    options.atp_mut().expect("ATP").interface = interface;
    options
}

async fn connect(link: &Link) -> (Endpoint, Endpoint, Connection, Connection) {
    let server_opts = atp_options(true, InterfaceChoice::Off);
    let server = Endpoint::from_udp_socket(link.socket_inside(), server_opts).expect("server");
    let client_opts = atp_options(false, InterfaceChoice::Named(link.host.clone()));
    let bind: SocketAddr = format!("{}:0", link.a_ip).parse().expect("address");
    let client = Endpoint::bind(bind, client_opts).expect("client");
    let c = timeout(Duration::from_secs(10), client.connect(server.local_addr()))
        .await
        .expect("in time")
        .expect("connected");
    let s = timeout(Duration::from_secs(10), server.accept())
        .await
        .expect("in time")
        .expect("accepted");
    (server, client, c, s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_over_a_shaped_link_gives_every_message_one_outcome() {
    let Some(link) = Link::new("w", 77) else {
        return;
    };
    link.shape("8mbit");
    let (server, _client, c, s) = connect(&link).await;
    let receiver = tokio::spawn(async move {
        let mut n = 0u64;
        while let Ok(Ok(_)) = timeout(Duration::from_secs(5), s.recv()).await {
            n += 1;
        }
        n
    });
    // Five seconds of urgent 4 KB messages (timer 500 ms) every 50 ms over 128 KB bulk
    // messages (timer 4 s) every 200 ms: 0.16 + 5.2 Mbit/s offered on 8 Mbit/s.
    let mut handles = Vec::new();
    let mut rejected = 0;
    let start = Instant::now();
    for i in 0..100u32 {
        tokio::time::sleep_until((start + Duration::from_millis(50) * i).into()).await;
        // An expired message is discarded (its outcome `Expired`): with the default,
        // `Suspend`, it would wait for an answer this test does not give.
        let urgent = SendOptions {
            priority: Priority(0),
            timer: Some(Duration::from_millis(500)),
            on_expiry: OnExpiry::Discard,
        };
        match c.send(vec![1; 4096], urgent).await {
            Ok(h) => handles.push((0, h)),
            Err(_) => rejected += 1,
        }
        if i % 4 == 0 {
            let bulk = SendOptions {
                priority: Priority(1),
                timer: Some(Duration::from_secs(4)),
                on_expiry: OnExpiry::Discard,
            };
            match c.send(vec![2; 128 << 10], bulk).await {
                Ok(h) => handles.push((1, h)),
                Err(_) => rejected += 1,
            }
        }
    }
    let mut on_time = [0u32; 2];
    let mut total = [0u32; 2];
    let mut delivered = 0u64;
    for (level, h) in handles {
        let o = timeout(Duration::from_secs(30), h.outcome())
            .await
            .expect("every message gets an outcome");
        total[level] += 1;
        if let Outcome::Delivered { margin, .. } = o {
            delivered += 1;
            if !matches!(margin, Some(adaptnet_core::nai::DeadlineMargin::Late(_))) {
                on_time[level] += 1;
            }
        }
    }
    let received = receiver.await.expect("receiver");
    eprintln!(
        "netns workload: high {}/{} on time, low {}/{}, rejected {rejected}, delivered {delivered}, received {received}",
        on_time[0], total[0], on_time[1], total[1]
    );
    assert_eq!(
        received, delivered,
        "the receiver got exactly the delivered messages"
    );
    assert!(
        on_time[0] * 10 >= total[0] * 9,
        "high priority on time: {on_time:?} of {total:?}"
    );
    let stats = server.stats().await.expect("stats");
    assert_eq!(stats.atp.expect("ATP").core.malformed, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimate_follows_a_tbf_rate_change() {
    let Some(link) = Link::new("e", 78) else {
        return;
    };
    link.shape("8mbit");
    let (_server, _client, c, s) = connect(&link).await;
    tokio::spawn(async move { while s.recv().await.is_ok() {} });
    // Keep the sender backlogged: bulk messages without timers, topped up as they complete.
    let conn = std::sync::Arc::new(c);
    let feeder = {
        let conn = conn.clone();
        tokio::spawn(async move {
            loop {
                let h = match conn.send(vec![3; 256 << 10], SendOptions::default()).await {
                    Ok(h) => h,
                    Err(_) => return,
                };
                let _ = conn.send(vec![3; 256 << 10], SendOptions::default()).await;
                let _ = h.outcome().await;
            }
        })
    };
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut changed_down = false;
    let mut changed_up = false;
    while start.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let t = start.elapsed().as_secs_f64();
        if t >= 10.0 && !changed_down {
            link.shape("2mbit");
            changed_down = true;
        }
        if t >= 20.0 && !changed_up {
            link.shape("8mbit");
            changed_up = true;
        }
        samples.push((t, conn.bandwidth() * 8.0 / 1e6));
    }
    feeder.abort();
    let mean = |a: f64, b: f64| {
        let v: Vec<f64> = samples
            .iter()
            .filter(|(t, _)| *t >= a && *t < b)
            .map(|s| s.1)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (first, low, high) = (mean(6.0, 10.0), mean(15.0, 20.0), mean(25.0, 30.0));
    eprintln!(
        "netns estimate (Mbit/s of message bytes): 8 Mbit/s link {first:.2}, 2 Mbit/s {low:.2}, 8 Mbit/s again {high:.2}"
    );
    eprintln!("samples: {samples:?}");
    assert!((4.0..=12.0).contains(&first), "8 Mbit/s link: {first:.2}");
    assert!(
        (1.0..=3.0).contains(&low),
        "within 5 s of the drop to 2 Mbit/s: {low:.2}"
    );
    assert!(
        (4.0..=12.0).contains(&high),
        "within 5 s of the return to 8 Mbit/s: {high:.2}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nai_tcp_over_kernel_tcp_completes_a_workload() {
    let Some(link) = Link::new("t", 79) else {
        return;
    };
    link.shape("8mbit");
    let listener = link.inside(|addr| std::net::TcpListener::bind(addr).expect("listen inside"));
    let server = Endpoint::from_tcp_listener(listener, EndpointOptions::server(Transport::NaiTcp))
        .expect("server");
    let peer = server.local_addr();
    let mut messages = common::messages_of(server);
    let receiver = tokio::spawn(async move {
        let mut n = 0u64;
        while let Ok(Some(_)) = timeout(Duration::from_secs(5), messages.recv()).await {
            n += 1;
        }
        n
    });
    let mut total_delivered = 0;
    for transport in [Transport::NaiTcp, Transport::NaiMtcp(1)] {
        let name = transport.to_string();
        let client = Endpoint::bind(
            format!("{}:0", link.a_ip).parse().expect("address"),
            EndpointOptions::client(transport).with_levels(2),
        )
        .expect("client");
        let conn = client.connect(peer).await.expect("connected");
        let mut handles = Vec::new();
        for i in 0..40u32 {
            let opts = SendOptions {
                priority: Priority(u8::from(i % 4 == 0)),
                timer: Some(Duration::from_secs(3)),
                ..SendOptions::default()
            };
            let size = if i % 4 == 0 { 64 << 10 } else { 4096 };
            handles.push(conn.send(vec![5; size], opts).await.expect("queued"));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut delivered = 0;
        for h in handles {
            let o = timeout(Duration::from_secs(30), h.outcome())
                .await
                .expect("every message gets an outcome");
            delivered += u32::from(matches!(o, Outcome::Delivered { .. }));
        }
        eprintln!("netns {name}: {delivered}/40 delivered");
        total_delivered += u64::from(delivered);
        assert!(
            delivered >= 36,
            "{name}: {delivered}/40 delivered on an 8 Mbit/s link"
        );
    }
    let received = receiver.await.expect("receiver");
    // A message MTCP gave up on after writing it all may still arrive: at least every
    // delivered one did.
    assert!(
        received >= total_delivered,
        "received {received} < delivered {total_delivered}"
    );
}

/// NAI's reason to exist on a real link: a 4 KB high-priority message sent while a 64 MB
/// low-priority transfer is in flight on the same sender, over a tbf-shaped 10 Mbit/s veth.
/// Prints time to delivery for ATP, NAI-TCP and NAI-MTCP1 (NAI-TCP's is a lower bound when
/// it hits the 15 s cap: its one FIFO connection delivers the urgent message after the bulk,
/// about 54 s at this rate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urgent_message_latency_under_a_bulk_transfer() {
    let Some(link) = Link::new("l", 80) else {
        return;
    };
    link.shape("10mbit");
    const BULK: usize = 64 << 20;
    const URGENT: usize = 4096;
    const CAP: Duration = Duration::from_secs(15);
    let low = SendOptions {
        priority: Priority(1),
        ..SendOptions::default()
    };
    let high = SendOptions {
        priority: Priority(0),
        ..SendOptions::default()
    };
    // Each run: a server inside the namespace and the client's options.
    let mut runs: Vec<(&str, Endpoint, EndpointOptions)> = Vec::new();
    // ATP (its send buffer raised to hold the 64 MB message), pacing at `available` (the
    // default) and at `curbw` (§4.2 as printed).
    for (pacing, name) in [
        (adaptnet_core::atp::Pacing::Available, "ATP"),
        (adaptnet_core::atp::Pacing::Curbw, "ATP/curbw"),
    ] {
        let mut server_opts = atp_options(true, InterfaceChoice::Off);
        // Room at the receiver for the bulk message and newer ones beside it.
        server_opts
            .atp_mut()
            .expect("ATP")
            .core
            .atp
            .spp
            .max_reassembly_bytes = 4 * BULK as u64;
        let server = Endpoint::from_udp_socket(link.socket_inside(), server_opts).expect("server");
        let mut client_opts = atp_options(false, InterfaceChoice::Named(link.host.clone()));
        let atp = client_opts.atp_mut().expect("ATP");
        atp.core.atp.max_buffered_bytes = 2 * BULK as u64;
        atp.core.atp.pacing = pacing;
        runs.push((name, server, client_opts));
    }
    // NAI-TCP and NAI-MTCP1 over kernel TCP, with room for the bulk message and the urgent
    // one (the sender's bound, as for ATP).
    for (transport, name) in [
        (Transport::NaiTcp, "NAI-TCP"),
        (Transport::NaiMtcp(1), "NAI-MTCP1"),
    ] {
        let listener =
            link.inside(|addr| std::net::TcpListener::bind(addr).expect("listen inside"));
        let server = Endpoint::from_tcp_listener(listener, EndpointOptions::server(transport))
            .expect("server");
        let mut client_opts = EndpointOptions::client(transport).with_levels(2);
        client_opts
            .baseline_mut()
            .expect("baseline")
            .config
            .max_buffered_bytes = 2 * BULK as u64;
        runs.push((name, server, client_opts));
    }
    // The same measurement on every transport.
    let mut rows = Vec::new();
    for (name, server, client_opts) in runs {
        let bind: SocketAddr = format!("{}:0", link.a_ip).parse().expect("address");
        let client = Endpoint::bind(bind, client_opts).expect("client");
        let c = client
            .connect(server.local_addr())
            .await
            .expect("connected");
        let mut messages = common::messages_of(server);
        let _bulk = c.send(vec![1; BULK], low).await.expect("admitted");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let sent = Instant::now();
        c.send(vec![7; URGENT], high).await.expect("admitted");
        let latency = loop {
            match timeout(CAP.saturating_sub(sent.elapsed()), messages.recv()).await {
                Ok(Some(m)) if m.data.len() == URGENT => break Some(sent.elapsed()),
                Ok(Some(_)) => continue,
                _ => break None,
            }
        };
        if std::env::var("ADAPTNET_DEBUG").is_ok() {
            eprintln!(
                "{name} stats: {:?}, bandwidth {:.2} Mbit/s",
                c.stats().await,
                c.bandwidth() * 8e-6
            );
        }
        rows.push((name, latency));
    }
    eprintln!("\nurgent 4 KB message under a 64 MB bulk transfer, tbf 10 Mbit/s veth:");
    eprintln!("transport   time to delivery");
    for (name, l) in &rows {
        match l {
            Some(d) => eprintln!("{name:<11} {:.1} ms", d.as_secs_f64() * 1e3),
            None => eprintln!(
                "{name:<11} > {} s (not delivered within the cap)",
                CAP.as_secs()
            ),
        }
    }
    let atp = rows[0].1.expect("ATP delivers the urgent message");
    assert!(rows[1].1.is_some(), "ATP pacing at curbw delivers it too");
    // ATP overtakes the bulk at once but keeps the tbf queue full (it paces at `available`),
    // so its urgent datagrams queue and may be dropped, and dropped again when resent:
    // 18 ms to 3.3 s measured (EXPERIMENTS.md). What holds every time is that it does not
    // wait for the bulk, as NAI-TCP does.
    assert!(atp < CAP, "ATP: {atp:?}");
    assert!(
        rows[2].1.is_none_or(|d| d > Duration::from_secs(10)),
        "NAI-TCP waits behind the bulk"
    );
    let mtcp = rows[3].1.expect("MTCP delivers it on its own connection");
    assert!(mtcp < Duration::from_secs(5), "NAI-MTCP1: {mtcp:?}");
}
