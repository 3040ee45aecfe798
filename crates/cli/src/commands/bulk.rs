//! `adaptnet bulk`: iperf3-shaped bulk throughput to an `adaptnet serve` over a real network,
//! with several flows (`-P`), optionally sharing the process's Congestion Manager (`--cm`).
//!
//! Port plan of `adaptnet serve --listen HOST:P` (documented in the README):
//!
//! | port | protocol | what |
//! |---|---|---|
//! | P/UDP | ATP (SPP) | message workloads (`send`) and `bulk --transport atp` |
//! | P/TCP | NAI-TCP / NAI-MTCP | message workloads over kernel TCP |
//! | P+1/UDP | stream transport (core TCP over UDP) | `bulk --transport stream [--cm]` |
//! | P+1/TCP | kernel TCP | `bulk --transport tcp` |
//!
//! P is at most 65534. Kernel TCP flows run the host's default congestion control unless
//! `--congestion` names one; the report says which ran.
//!
//! The per-second table counts bytes handed to the transport (a stream's or a socket's send
//! buffer, an ATP message admitted); the summary counts what the receiver acknowledged: each
//! flow shuts down after `-t` seconds and its goodput is its bytes over the time until they
//! were all acknowledged (ATP: bytes of delivered messages over `-t`).

use adaptnet_core::nai::{NaiError, Outcome, Priority, SendOptions};
use adaptnet_runtime::message::{
    Endpoint, EndpointOptions, MessageHandle, Transport, unspecified_for,
};
use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
use adaptnet_runtime::tcpinfo;
use adaptnet_runtime::{ConnectError, SendError};
use adaptnet_testbed::jain_index;
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// What `bulk` runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkTransport {
    /// ATP over UDP: 64 KB messages, low priority, no deadline.
    Atp,
    /// Core's TCP over UDP (`runtime::stream`), NewReno or (with `--cm`) the process CM.
    Stream,
    /// Kernel TCP.
    Tcp,
}

impl std::str::FromStr for BulkTransport {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<BulkTransport, String> {
        match s {
            "atp" => Ok(BulkTransport::Atp),
            "stream" => Ok(BulkTransport::Stream),
            "tcp" => Ok(BulkTransport::Tcp),
            _ => Err(format!("unknown transport {s:?}: use atp, stream or tcp")),
        }
    }
}

/// The arguments of `adaptnet bulk`.
pub struct BulkArgs {
    /// The `adaptnet serve` address (its base port P), `HOST:PORT`.
    pub to: String,
    /// The transport.
    pub transport: BulkTransport,
    /// Parallel flows.
    pub flows: usize,
    /// Stream flows share the process CM.
    pub cm: bool,
    /// How long each flow sends.
    pub duration: Duration,
    /// JSON instead of tables.
    pub json: bool,
    /// Kernel TCP's congestion control (`None`: the host's default).
    pub congestion: Option<String>,
}

/// Most parallel flows.
const MAX_FLOWS: usize = 128;
/// ATP message size.
const ATP_MESSAGE: usize = 64 << 10;
/// ATP messages a flow keeps admitted and undecided.
const ATP_WINDOW: usize = 16;
/// The stream transport's send buffer per flow for bulk: small, so bytes written follow
/// bytes acknowledged closely in the per-second table.
const STREAM_SEND_BUFFER: usize = 256 << 10;
/// Write size.
const CHUNK: usize = 64 << 10;
/// How long a stream flow waits for the sink's close after its own.
const SINK_CLOSE_LIMIT: Duration = Duration::from_secs(2);
/// How long a flow may take, after `-t`, to have everything acknowledged.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// The congestion control kernel TCP connections of this process will run: `choice` once
/// the kernel has accepted it on a socket (so a bad name fails before any flow starts), else
/// the host's default as a new socket reports it.
pub fn congestion_in_use(choice: Option<&str>) -> Result<String> {
    use std::os::fd::AsRawFd;
    let probe = tokio::net::TcpSocket::new_v4().context("a TCP socket")?;
    let fd = probe.as_raw_fd();
    if let Some(cc) = choice {
        tcpinfo::set_congestion_control(fd, cc)?;
        return Ok(cc.to_owned());
    }
    let cc = tcpinfo::congestion_control(fd)?;
    Ok(format!("{cc} (this host's default; --congestion chooses)"))
}

/// One flow's result.
#[derive(Clone, Debug, Serialize)]
struct FlowResult {
    flow: usize,
    bytes: u64,
    seconds: f64,
    mbit_per_s: f64,
}

#[derive(Serialize)]
struct Report {
    transport: String,
    /// Kernel TCP's congestion control (`tcp` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    congestion: Option<String>,
    cm: bool,
    flows: usize,
    intervals: Vec<Vec<f64>>,
    results: Vec<FlowResult>,
    total_mbit_per_s: f64,
    jain: f64,
}

/// A flow's counters, shared with its task: bytes handed to the transport, and the final
/// (acknowledged bytes, seconds).
#[derive(Default)]
struct Counter {
    written: AtomicU64,
}

/// `adaptnet bulk`.
pub fn bulk(args: &BulkArgs) -> Result<ExitCode> {
    if args.flows == 0 || args.flows > MAX_FLOWS {
        bail!("-P must be in 1..={MAX_FLOWS}, got {}", args.flows);
    }
    if args.cm && args.transport != BulkTransport::Stream {
        bail!(
            "--cm applies to --transport stream only (ATP and kernel TCP have their own congestion control)"
        );
    }
    if args.congestion.is_some() && args.transport != BulkTransport::Tcp {
        bail!("--congestion applies to --transport tcp only (kernel TCP)");
    }
    super::real::runtime()?.block_on(run(args))
}

async fn run(args: &BulkArgs) -> Result<ExitCode> {
    let to = super::addr::resolve(&args.to).await?;
    let counters: Vec<Arc<Counter>> = (0..args.flows).map(|_| Arc::default()).collect();
    let mut congestion = None;
    let tasks = match args.transport {
        BulkTransport::Stream => stream_flows(args, to, &counters).await?,
        BulkTransport::Tcp => {
            let cc = congestion_in_use(args.congestion.as_deref())?;
            eprintln!("adaptnet: kernel TCP flows run congestion control {cc}");
            congestion = Some(cc.split(' ').next().unwrap_or_default().to_owned());
            tcp_flows(args, to, &counters).await?
        }
        BulkTransport::Atp => atp_flows(args, to, &counters).await?,
    };
    if !args.json {
        let names: Vec<String> = (0..args.flows).map(|i| format!("flow {i}")).collect();
        eprintln!(
            "{:>8}  {}  (Mbit/s handed to the transport)",
            "time",
            names.join("  ")
        );
    }
    let start = Instant::now();
    let mut last: Vec<u64> = vec![0; args.flows];
    let mut intervals = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let secs = args.duration.as_secs_f64().ceil().max(1.0);
    for _ in 0..(secs as u64) {
        tick.tick().await;
        let now: Vec<u64> = counters
            .iter()
            .map(|c| c.written.load(Ordering::Relaxed))
            .collect();
        let rates: Vec<f64> = now
            .iter()
            .zip(&last)
            .map(|(n, l)| (n - l) as f64 * 8e-6)
            .collect();
        if !args.json {
            let cells: Vec<String> = rates.iter().map(|r| format!("{r:>6.2}")).collect();
            eprintln!(
                "{:>6.1} s  {}",
                start.elapsed().as_secs_f64(),
                cells.join("  ")
            );
        }
        intervals.push(rates);
        last = now;
    }
    let mut results = Vec::new();
    for (flow, t) in tasks.into_iter().enumerate() {
        let (bytes, seconds) = t.await.context("a flow's task")??;
        results.push(FlowResult {
            flow,
            bytes,
            seconds,
            mbit_per_s: if seconds > 0.0 {
                bytes as f64 * 8e-6 / seconds
            } else {
                0.0
            },
        });
    }
    let rates: Vec<f64> = results.iter().map(|r| r.mbit_per_s).collect();
    let report = Report {
        transport: format!("{:?}", args.transport).to_lowercase(),
        congestion,
        cm: args.cm,
        flows: args.flows,
        intervals,
        total_mbit_per_s: rates.iter().sum(),
        jain: jain_index(&rates),
        results,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("flow        bytes   seconds   Mbit/s (acknowledged)");
        for r in &report.results {
            println!(
                "{:>4}  {:>11}  {:>8.2}  {:>7.2}",
                r.flow, r.bytes, r.seconds, r.mbit_per_s
            );
        }
        println!(
            "total {:.2} Mbit/s over {} flow(s) ({}{}); Jain {:.4}",
            report.total_mbit_per_s,
            args.flows,
            report.transport,
            if args.cm { ", one CM" } else { "" },
            report.jain
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A flow's task: its (acknowledged bytes, seconds).
type FlowTask = tokio::task::JoinHandle<Result<(u64, f64)>>;

/// Writes for `duration`, then shuts down and waits for everything to be acknowledged.
async fn write_flow<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    counter: Arc<Counter>,
    duration: Duration,
) -> Result<(u64, f64)> {
    let chunk = vec![0u8; CHUNK];
    let start = Instant::now();
    let end = tokio::time::Instant::now() + duration;
    let mut sent = 0u64;
    while tokio::time::Instant::now() < end {
        match tokio::time::timeout_at(end, w.write(&chunk)).await {
            Ok(Ok(n)) => {
                sent += n as u64;
                counter.written.store(sent, Ordering::Relaxed);
            }
            Ok(Err(e)) => return Err(e).context("writing"),
            Err(_) => break,
        }
    }
    tokio::time::timeout(DRAIN_LIMIT, w.shutdown())
        .await
        .context("everything acknowledged in time")?
        .context("shutdown")?;
    Ok((sent, start.elapsed().as_secs_f64()))
}

async fn stream_flows(
    args: &BulkArgs,
    to: SocketAddr,
    counters: &[Arc<Counter>],
) -> Result<Vec<FlowTask>> {
    let mut options = StreamOptions::client();
    options.send_buffer_bytes = STREAM_SEND_BUFFER;
    if args.cm {
        options = options.with_cm();
    }
    let endpoint = Arc::new(
        StreamEndpoint::bind(unspecified_for(to), options)
            .context("binding the stream endpoint")?,
    );
    let to = super::addr::next_port(to)?;
    let mut tasks = Vec::new();
    for c in counters {
        // The stream endpoint hears the network's "port unreachable" itself (`Refused`);
        // a silent path is given 10 s.
        let conn = match tokio::time::timeout(Duration::from_secs(10), endpoint.connect(to)).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(ConnectError::Refused(_))) => bail!(
                "connecting (stream) to {to}: nothing listens there (is `adaptnet serve` running?)"
            ),
            Ok(Err(e)) => {
                return Err(anyhow::Error::from(e).context(format!("connecting (stream) to {to}")));
            }
            Err(_) => bail!(
                "connecting (stream) to {to}: no answer in 10 s (is `adaptnet serve` running there?)"
            ),
        };
        let (c, d, e) = (c.clone(), args.duration, endpoint.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = conn;
            let r = write_flow(&mut conn, c, d).await;
            // The sink closes its side once it has read everything: take its FIN (and
            // acknowledge it) before leaving, so neither side keeps the stream open.
            let mut rest = Vec::new();
            let _ = tokio::time::timeout(
                SINK_CLOSE_LIMIT,
                tokio::io::AsyncReadExt::read_to_end(&mut conn, &mut rest),
            )
            .await;
            drop(conn);
            drop(e);
            r
        }));
    }
    Ok(tasks)
}

async fn tcp_flows(
    args: &BulkArgs,
    to: SocketAddr,
    counters: &[Arc<Counter>],
) -> Result<Vec<FlowTask>> {
    use std::os::fd::AsRawFd;
    let to = super::addr::next_port(to)?;
    let mut tasks = Vec::new();
    for c in counters {
        let socket = if to.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        }
        .context("a TCP socket")?;
        if let Some(cc) = &args.congestion {
            tcpinfo::set_congestion_control(socket.as_raw_fd(), cc)?;
        }
        let conn = socket
            .connect(to)
            .await
            .with_context(|| format!("connecting to TCP {to} (is `adaptnet serve` running?)"))?;
        let (c, d) = (c.clone(), args.duration);
        tasks.push(tokio::spawn(async move {
            // Kernel TCP's shutdown returns before the peer has everything: the sink closes
            // its side once it read our FIN, after all our bytes.
            let start = Instant::now();
            let (mut r, mut w) = conn.into_split();
            let (sent, _) = write_flow(&mut w, c, d).await?;
            let mut sink = Vec::new();
            tokio::time::timeout(
                DRAIN_LIMIT,
                tokio::io::AsyncReadExt::read_to_end(&mut r, &mut sink),
            )
            .await
            .context("the sink's close in time")?
            .context("waiting for the sink's close")?;
            Ok((sent, start.elapsed().as_secs_f64()))
        }));
    }
    Ok(tasks)
}

async fn atp_flows(
    args: &BulkArgs,
    to: SocketAddr,
    counters: &[Arc<Counter>],
) -> Result<Vec<FlowTask>> {
    let mut tasks = Vec::new();
    for c in counters {
        // ATP keeps one connection per pair of addresses: each flow has its own endpoint
        // (its own UDP port), as each kernel TCP flow has its own port.
        let endpoint = Endpoint::bind(unspecified_for(to), EndpointOptions::client(Transport::Atp))
            .context("binding an ATP endpoint")?;
        let conn = super::addr::connect_udp(to, "atp", endpoint.connect(to)).await?;
        let (c, d, e) = (c.clone(), args.duration, endpoint);
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let end = tokio::time::Instant::now() + d;
            let opts = SendOptions {
                priority: Priority(1),
                ..SendOptions::default()
            };
            let mut pending = std::collections::VecDeque::new();
            let (mut handed, mut delivered) = (0u64, 0u64);
            // Every message sends the same bytes, as quinn's perf client does: one buffer,
            // shared. A fresh one per message would put a 64 KB calloc (a memset, or page
            // faults when glibc had handed the memory back) on the busy sending thread
            // (EXPERIMENTS.md, "One buffer for every message").
            let message = bytes::Bytes::from(vec![0u8; ATP_MESSAGE]);
            while tokio::time::Instant::now() < end {
                if pending.len() >= ATP_WINDOW {
                    let h: MessageHandle = pending.pop_front().context("a pending message")?;
                    if let Ok(Outcome::Delivered { .. }) =
                        tokio::time::timeout_at(end, h.outcome()).await
                    {
                        delivered += ATP_MESSAGE as u64;
                    }
                    continue;
                }
                match conn.send(message.clone(), opts).await {
                    Ok(h) => {
                        handed += ATP_MESSAGE as u64;
                        c.written.store(handed, Ordering::Relaxed);
                        pending.push_back(h);
                    }
                    // Admission refused: the estimator says the link is full; wait a little.
                    Err(SendError::Nai(NaiError::Rejected { .. })) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(e) => return Err(e).context("sending a message"),
                }
            }
            // Messages still in flight after `-t` are abandoned; the server is told.
            drop(pending);
            conn.close(Duration::ZERO).await;
            e.close();
            e.wait_idle().await;
            Ok((delivered, start.elapsed().as_secs_f64()))
        }));
    }
    Ok(tasks)
}
