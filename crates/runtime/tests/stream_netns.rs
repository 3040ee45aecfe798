//! Two hosts on one machine: the test runs stream senders in the root network namespace and
//! their receivers in a new namespace joined by a veth pair, with the sender's side shaped by a
//! `tbf` qdisc. Needs root, `ip` and `tc`; where they are missing the tests say so loudly and
//! pass — except under `CI=true`, where a skip is a failure (CI runs as root).

use adaptnet_core::Time;
use adaptnet_runtime::stream::{StreamConn, StreamEndpoint, StreamOptions};
use adaptnet_sim::agents::cm::TcpCmSender;
use adaptnet_sim::scenario::Scenario;
use adaptnet_sim::world::FlowId;
use adaptnet_testbed::jain_index;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::Link;

/// Seconds each run lasts.
const SECS: u64 = 6;
/// Seconds left out of the goodput at the start: slow start's overshoot and its repair (a
/// retransmission timeout, 1 s at least, is common) are not what the test measures.
const WARMUP_SECS: u64 = 2;

/// Runs `n` streams from the root namespace to the namespace for `secs` seconds and returns
/// each stream's goodput (bytes/s) measured after [`WARMUP_SECS`].
async fn run_streams(link: &Link, n: usize, client: StreamOptions, secs: u64) -> Vec<f64> {
    let server =
        StreamEndpoint::from_std(link.socket_inside(), StreamOptions::server()).expect("server");
    let bind: SocketAddr = format!("{}:0", link.a_ip).parse().expect("address");
    let client = StreamEndpoint::bind(bind, client).expect("client");
    let mut conns: Vec<StreamConn> = Vec::new();
    for _ in 0..n {
        conns.push(
            tokio::time::timeout(Duration::from_secs(10), client.connect(server.local_addr()))
                .await
                .expect("connect in time")
                .expect("connect"),
        );
    }
    let mut tasks = Vec::new();
    let mut counters = Vec::new();
    for mut c in conns {
        tasks.push(tokio::spawn(async move {
            let chunk = vec![7u8; 64 << 10];
            while c.write_all(&chunk).await.is_ok() {}
        }));
        let mut s = tokio::time::timeout(Duration::from_secs(10), server.accept())
            .await
            .expect("accept in time")
            .expect("accept");
        let count = Arc::new(AtomicU64::new(0));
        counters.push(count.clone());
        tasks.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(k) = s.read(&mut buf).await {
                if k == 0 {
                    break;
                }
                count.fetch_add(k as u64, Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(WARMUP_SECS)).await;
    let start: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    eprintln!("bytes after {WARMUP_SECS} s: {start:?}");
    tokio::time::sleep(Duration::from_secs(secs - WARMUP_SECS)).await;
    let rates = counters
        .iter()
        .zip(start)
        .map(|(c, s)| (c.load(Ordering::Relaxed) - s) as f64 / (secs - WARMUP_SECS) as f64)
        .collect();
    for t in tasks {
        t.abort();
    }
    rates
}

/// Issue 9 item 5. Regression for the "CM streams stall" (EXPERIMENTS.md): the two streams
/// used to stop for good after the first second (a grant the driver never used held the
/// CM's window), and, once that was fixed, to lose 20-35 % of the link to drop-tail lockout
/// of the stream serviced second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cm_streams_share_a_shaped_link_fairly_and_fully() {
    let Some(link) = Link::new("sc", 81) else {
        return;
    };
    link.shape("10mbit");
    // "What one flow alone gets" on the same transport: one CM stream. (A NewReno stream
    // alone varied 8.2-10.3 Mbit/s over these 4-s windows — an occasional timeout after a
    // lost fast retransmission, or a burst of held out-of-order bytes — while one CM stream
    // got 9.58, the link, in every run: see EXPERIMENTS.md.)
    let one = run_streams(&link, 1, StreamOptions::client().with_cm(), SECS).await;
    let r1 = one[0];
    let two = run_streams(&link, 2, StreamOptions::client().with_cm(), SECS).await;
    let (a, b) = (two[0], two[1]);
    let jain = jain_index(&[a, b]);
    let err = ((a + b) - r1).abs() / r1;
    println!(
        "stream over tbf 10 Mbit/s: one CM stream alone R1 = {:.2} Mbit/s; two under one CM: a = {:.2}, \
         b = {:.2}, sum = {:.2} Mbit/s; Jain = {jain:.4}; |a+b-R1|/R1 = {err:.4}",
        r1 * 8e-6,
        a * 8e-6,
        b * 8e-6,
        (a + b) * 8e-6
    );
    assert!(r1 > 0.5e6, "one stream got {r1} B/s");
    assert!(jain >= 0.95, "Jain {jain} < 0.95 (a = {a}, b = {b})");
    assert!(err <= 0.10, "sum {} vs one stream {r1}: {err}", a + b);
}

/// The namespace link's shape, for the simulator's twin of it: `tbf rate 10mbit burst 16kb
/// latency 100ms` queues up to 100 ms of the rate, 125 000 bytes, and the veth adds no delay
/// worth the name.
const RATE_KBPS: u32 = 10_000;
/// tbf's queue: 100 ms of 10 Mbit/s.
const QUEUE_BYTES: u32 = 125_000;

/// The same workload in the simulator: `n` TCP/CM flows from one host to another (one
/// macroflow) over a `RATE_KBPS` bottleneck with `QUEUE_BYTES` of drop-tail queue and a
/// 0.5 ms one-way delay, the runtime's MSS and the CM's default MTU; each flow's goodput
/// (bytes acknowledged per second) after [`WARMUP_SECS`].
fn sim_streams(n: usize, secs: u64) -> Vec<f64> {
    let mut text = format!(
        r#"
duration_s = {secs}
sample_period_s = 0.5
[topology]
kind = "dumbbell"
pairs = 1
[topology.bottleneck]
bandwidth_kbps = {RATE_KBPS}
delay_ms = 0.5
queue_bytes = {QUEUE_BYTES}
[cm]
mtu_bytes = 1500
"#
    );
    for _ in 0..n {
        text += "[[flows]]\ntype = \"tcp-cm\"\nfrom = \"s0\"\nto = \"r0\"\nmss = 1400\n";
    }
    let scenario = Scenario::parse(&text, "sim-vs-netns.toml", std::path::Path::new("."), "cmp")
        .unwrap_or_else(|e| panic!("{e}"));
    let mut world = scenario.build(1).expect("builds");
    let acked = |world: &adaptnet_sim::world::World| -> Vec<u64> {
        (0..n)
            .map(|i| {
                let flow = FlowId(u32::try_from(i).expect("few flows"));
                let (s, _) = world.flow_agents(flow).expect("flow");
                let sender = world.agent::<TcpCmSender>(s).expect("a TCP/CM sender");
                sender.tcp().connection().map_or(0, |c| c.bytes_acked())
            })
            .collect()
    };
    world.run_until(Time::from_secs(WARMUP_SECS), &mut |_| {});
    let start = acked(&world);
    world.run_until(Time::from_secs(secs), &mut |_| {});
    acked(&world)
        .into_iter()
        .zip(start)
        .map(|(end, start)| (end - start) as f64 / (secs - WARMUP_SECS) as f64)
        .collect()
}

/// Issue 17 item 5 (DESIGN.md, "the same workload runs in the simulator and on the namespace
/// link"): two CM streams sharing a 10 Mbit/s link, in the simulator and on the tbf link,
/// side by side. The tolerance would catch an engine bug (a stream that stalls, a grant
/// never used, a lockout): the sums of the two rates within 10 % of each other and Jain's
/// indices within 0.05.
///
/// It fails today, and that is what it is for: the simulator's two TCP/CM flows are two
/// agents polled in a fixed order, and the second loses most segments to drop-tail lockout
/// (1 055 of 2 733 sent in 6 s; the link runs at 84 %), which the runtime's endpoint avoids
/// by rotating its streams (EXPERIMENTS.md, "Stream transport over UDP"). Run it with
/// `--ignored`; un-ignore it when the simulator's TCP/CM flows run in one core endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "known engine difference: the simulator's TCP/CM agents suffer drop-tail lockout (EXPERIMENTS.md)"]
async fn two_cm_streams_in_the_simulator_and_on_the_namespace_link_agree() {
    let sim = sim_streams(2, SECS);
    let Some(link) = Link::new("scs", 83) else {
        return;
    };
    link.shape("10mbit");
    let ns = run_streams(&link, 2, StreamOptions::client().with_cm(), SECS).await;
    let row = |name: &str, r: &[f64]| {
        let sum: f64 = r.iter().sum();
        println!(
            "{name:<22} a = {:6.3}  b = {:6.3}  sum = {:6.3} Mbit/s  Jain = {:.4}",
            r[0] * 8e-6,
            r[1] * 8e-6,
            sum * 8e-6,
            jain_index(r)
        );
        (sum, jain_index(r))
    };
    println!(
        "two CM streams, 10 Mbit/s, {QUEUE_BYTES}-byte queue, goodput {WARMUP_SECS}-{SECS} s:"
    );
    let (sim_sum, sim_jain) = row("simulator", &sim);
    let (ns_sum, ns_jain) = row("namespace (tbf, veth)", &ns);
    let sum_err = (sim_sum - ns_sum).abs() / ns_sum;
    println!(
        "sum differs by {:.1} %, Jain by {:.4}",
        sum_err * 100.0,
        (sim_jain - ns_jain).abs()
    );
    assert!(sum_err <= 0.10, "sums {sim_sum} vs {ns_sum} B/s");
    assert!(
        (sim_jain - ns_jain).abs() <= 0.05,
        "Jain {sim_jain} vs {ns_jain}"
    );
}
