//! `adaptnet bench urgent`: NAI's reason to exist on a real link (papers/000 §1, §5.4) — a
//! 4 KB high-priority message sent while a 64 MB low-priority transfer is under way on the
//! same connection, over a veth shaped with `tbf` at 10 Mbit/s (`burst 16kb latency 100ms`).
//!
//! Per transport, in one run: the urgent message alone on the idle connection (the unloaded
//! time to delivery), then the bulk transfer and, once it has run for two seconds, `repeat`
//! urgent messages a quarter second apart (time from `send` to the message at the receiving
//! application), while the `tbf` backlog is sampled every 20 ms (its queueing delay: backlog
//! bytes at the shaped rate). Kernel-TCP baselines run with a loss-based congestion control
//! and with BBR, set as the sender namespace's default ([`super::sender_link`]): Reno, not
//! CUBIC, because a namespace other than the initial one may only default to an algorithm in
//! `net.ipv4.tcp_allowed_congestion_control` (here `reno bbr`), and widening that list is a
//! machine-wide change. NAI-TCP's one
//! FIFO connection delivers the urgent message only after the 64 MB (about 54 s): its first
//! trial stops at the cap and the rest are skipped.

use super::sender_link::{ReceiverSocket, SenderLink, quantile, serve};
use adaptnet_core::nai::{Priority, SendOptions};
use adaptnet_experiments::report::table::Table;
use adaptnet_runtime::atp::InterfaceChoice;
use adaptnet_runtime::message::{Connection, Endpoint, EndpointOptions, Transport};
use anyhow::{Result, anyhow};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The bulk message.
const BULK: usize = 64 << 20;
/// The urgent message.
const URGENT: usize = 4096;
/// The shaped rate, bit/s.
const RATE: u64 = 10_000_000;
/// tbf's bucket, as the runtime's namespace tests shape.
const BURST: u32 = 16 * 1024;
/// Bulk running before the first urgent message.
const WARMUP: Duration = Duration::from_secs(2);
/// Between urgent messages.
const GAP: Duration = Duration::from_millis(250);
/// Longest wait for one urgent message.
const CAP: Duration = Duration::from_secs(3);
/// Urgent messages sent on the idle connection.
const UNLOADED: usize = 5;
/// One full datagram's time on the link (1,514 bytes on the wire).
const PACKET_TIME: Duration = Duration::from_micros(1_211);

/// One row: a transport and the congestion control its kernel TCP ran.
struct Case {
    name: &'static str,
    transport: Transport,
    cc: &'static str,
}

const CASES: [Case; 5] = [
    Case {
        name: "ATP",
        transport: Transport::Atp,
        cc: "-",
    },
    Case {
        name: "NAI-MTCP1",
        transport: Transport::NaiMtcp(1),
        cc: "reno",
    },
    Case {
        name: "NAI-MTCP1",
        transport: Transport::NaiMtcp(1),
        cc: "bbr",
    },
    Case {
        name: "NAI-TCP",
        transport: Transport::NaiTcp,
        cc: "reno",
    },
    Case {
        name: "NAI-TCP",
        transport: Transport::NaiTcp,
        cc: "bbr",
    },
];

/// What one transport gave.
struct Row {
    unloaded: Vec<Duration>,
    /// `None`: not delivered within [`CAP`].
    loaded: Vec<Option<Duration>>,
    /// tbf queueing delay samples during the loaded phase.
    queue: Vec<Duration>,
    drops: u64,
}

/// `adaptnet bench urgent`: `trials` urgent messages per transport.
pub fn run(trials: u32) -> Result<ExitCode> {
    let trials = usize::try_from(trials.max(1)).unwrap_or(20);
    let link = Arc::new(SenderLink::create("urg", 93)?);
    link.shape(RATE, BURST)?;
    let rt = link.runtime()?;
    let mut rows = Vec::new();
    for case in &CASES {
        if case.cc != "-" {
            link.set_congestion(case.cc)?;
        }
        eprintln!("adaptnet bench urgent: {} ({})", case.name, case.cc);
        let socket = ReceiverSocket::bind(&link, case.transport)?;
        let row = rt.block_on(async {
            let link = link.clone();
            let transport = case.transport;
            tokio::spawn(async move { one(link, socket, transport, trials).await })
                .await
                .map_err(|e| anyhow!("the trial task failed: {e}"))?
        })?;
        let mut got: Vec<Duration> = row.loaded.iter().flatten().copied().collect();
        got.sort();
        eprintln!(
            "  delivered {}/{}, median {} ms, drops {}",
            got.len(),
            row.loaded.len(),
            ms(quantile(&got, 0.5)),
            row.drops
        );
        rows.push(row);
        std::thread::sleep(Duration::from_millis(500));
    }
    print!("{}", render(&rows).render());
    println!(
        "tbf 10 Mbit/s burst 16 KB latency 100 ms; {trials} urgent 4 KB messages per transport \
         under a 64 MB transfer; kernel TCP cc = the sender namespace's default"
    );
    for (aim, met) in aims(&rows) {
        println!("aim: {aim}: {}", if met { "met" } else { "NOT met" });
    }
    Ok(ExitCode::SUCCESS)
}

/// Server options: room at the receiver for the bulk message beside newer ones.
fn server_options(transport: Transport) -> EndpointOptions {
    let mut o = EndpointOptions::server(transport).with_levels(2);
    if let Some(a) = o.atp_mut() {
        a.core.atp.spp.max_reassembly_bytes = 4 * BULK as u64;
        a.interface = InterfaceChoice::Off;
    }
    o
}

/// Client options: room at the sender for the bulk message and the urgent ones.
fn client_options(transport: Transport) -> EndpointOptions {
    let mut o = EndpointOptions::client(transport).with_levels(2);
    if let Some(a) = o.atp_mut() {
        a.core.atp.max_buffered_bytes = 2 * BULK as u64;
        // The interface's counters live in the namespace's sysfs, which this process does not
        // mount; the rate control measures from acknowledgements.
        a.interface = InterfaceChoice::Off;
    }
    if let Some(b) = o.baseline_mut() {
        b.config.max_buffered_bytes = 2 * BULK as u64;
    }
    o
}

/// Sends the urgent message and waits for it at the receiver (up to `cap`).
async fn urgent(
    conn: &Connection,
    arrivals: &mut mpsc::Receiver<(usize, Instant)>,
    cap: Duration,
) -> Result<Option<Duration>> {
    let high = SendOptions {
        priority: Priority(0),
        ..SendOptions::default()
    };
    let sent = Instant::now();
    conn.send(vec![7; URGENT], high).await?;
    loop {
        match tokio::time::timeout(cap.saturating_sub(sent.elapsed()), arrivals.recv()).await {
            Ok(Some((len, at))) if len == URGENT => return Ok(Some(at - sent)),
            Ok(Some(_)) => {}
            _ => return Ok(None),
        }
    }
}

async fn one(
    link: Arc<SenderLink>,
    socket: ReceiverSocket,
    transport: Transport,
    trials: usize,
) -> Result<Row> {
    let (server, mut arrivals) = serve(socket, server_options(transport))?;
    let client = Endpoint::bind(link.sender_bind(), client_options(transport))?;
    let conn = client.connect(server.local_addr()).await?;
    let mut unloaded = Vec::new();
    for _ in 0..UNLOADED {
        if let Some(d) = urgent(&conn, &mut arrivals, CAP).await? {
            unloaded.push(d);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let debug = std::env::var("ADAPTNET_DEBUG").is_ok();
    if debug {
        eprintln!(
            "  unloaded {unloaded:?}; estimate {:.2} Mbit/s; {:?}",
            conn.bandwidth() * 8e-6,
            conn.stats().await
        );
    }
    let low = SendOptions {
        priority: Priority(1),
        ..SendOptions::default()
    };
    let _bulk = conn.send(vec![1; BULK], low).await?;
    tokio::time::sleep(WARMUP).await;
    // The tbf backlog, sampled every 20 ms from a thread of its own (`tc` is a process per
    // sample; a worker thread of this runtime would stall the transports meanwhile).
    let before = link.qdisc()?;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (stop, link) = (stop.clone(), link.clone());
        std::thread::spawn(move || {
            let mut queue = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                if let Ok(q) = link.qdisc() {
                    queue.push(Duration::from_secs_f64(
                        q.backlog as f64 * 8.0 / RATE as f64,
                    ));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            queue
        })
    };
    let mut loaded = Vec::new();
    for _ in 0..trials {
        let d = urgent(&conn, &mut arrivals, CAP).await?;
        if debug {
            eprintln!(
                "  {d:?}; estimate {:.2} Mbit/s; {:?}",
                conn.bandwidth() * 8e-6,
                conn.stats().await
            );
        }
        loaded.push(d);
        if d.is_none() && transport == Transport::NaiTcp {
            // One FIFO connection: every later urgent message waits behind the bulk too.
            break;
        }
        tokio::time::sleep(GAP).await;
    }
    stop.store(true, Ordering::Relaxed);
    let queue = sampler
        .join()
        .map_err(|_| anyhow!("the queue sampler panicked"))?;
    let after = link.qdisc()?;
    drop(conn);
    client.close();
    server.close();
    Ok(Row {
        unloaded,
        loaded,
        queue,
        drops: after.drops.saturating_sub(before.drops),
    })
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("-".into(), |d| format!("{:.1}", d.as_secs_f64() * 1e3))
}

fn render(rows: &[Row]) -> Table {
    let mut t = Table::text([
        "transport",
        "kernel TCP cc",
        "unloaded median ms",
        "loaded median ms",
        "p95 ms",
        "max ms",
        "delivered",
        "tbf queue median / p95 ms",
        "tbf drops",
    ]);
    for (case, row) in CASES.iter().zip(rows) {
        let mut unloaded = row.unloaded.clone();
        unloaded.sort();
        let mut got: Vec<Duration> = row.loaded.iter().flatten().copied().collect();
        got.sort();
        let missed = row.loaded.len() - got.len();
        // A message not delivered within the cap counts as the cap, after every delivered one.
        let mut all = got.clone();
        all.extend(std::iter::repeat_n(CAP, missed));
        let mut q = row.queue.clone();
        q.sort();
        let median = if missed * 2 >= all.len() {
            format!("> {}", CAP.as_secs())
        } else {
            ms(quantile(&all, 0.5))
        };
        t.row([
            case.name.to_string(),
            case.cc.to_string(),
            ms(quantile(&unloaded, 0.5)),
            median,
            ms(quantile(&all, 0.95)),
            ms(all.last().copied()),
            format!("{}/{}", got.len(), row.loaded.len()),
            format!("{} / {}", ms(quantile(&q, 0.5)), ms(quantile(&q, 0.95))),
            row.drops.to_string(),
        ]);
    }
    t
}

/// The aims, checked on the rows (`[ATP, MTCP1 reno, MTCP1 bbr, …]`): ATP's median
/// and 95th percentile below both NAI-MTCP1 medians, and its median within 2 ms and one
/// packet time of its unloaded median.
fn aims(rows: &[Row]) -> Vec<(String, bool)> {
    let sorted = |r: &Row| {
        let mut v: Vec<Duration> = r.loaded.iter().map(|d| d.unwrap_or(CAP)).collect();
        v.sort();
        v
    };
    let mut out = Vec::new();
    let (Some(atp), Some(c), Some(b)) = (rows.first(), rows.get(1), rows.get(2)) else {
        return out;
    };
    let a = sorted(atp);
    let mtcp = quantile(&sorted(c), 0.5)
        .into_iter()
        .chain(quantile(&sorted(b), 0.5))
        .min();
    if let (Some(m), Some(p95), Some(mtcp)) = (quantile(&a, 0.5), quantile(&a, 0.95), mtcp) {
        out.push((
            format!(
                "ATP median {} and p95 {} ms below NAI-MTCP1's median {} ms",
                ms(Some(m)),
                ms(Some(p95)),
                ms(Some(mtcp))
            ),
            m < mtcp && p95 < mtcp,
        ));
    }
    let mut u = atp.unloaded.clone();
    u.sort();
    if let (Some(m), Some(u)) = (quantile(&a, 0.5), quantile(&u, 0.5)) {
        let bound = u + Duration::from_millis(2) + PACKET_TIME;
        out.push((
            format!(
                "ATP median {} ms within 2 ms + one packet time of unloaded {} ms",
                ms(Some(m)),
                ms(Some(u))
            ),
            m <= bound,
        ));
    }
    out
}
