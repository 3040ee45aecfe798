//! Bulk transfers over loopback inside one process — the workloads `adaptnet bench loopback`
//! and `benches/quinn-compare` measure, so both measure the same thing: kernel TCP (the
//! baseline), ATP/SPP with 64 KB messages, NAI-TCP with the same messages, and the stream
//! transport. Each returns a [`Measure`]: bytes the receiver got, wall time, and the CPU time
//! (user + system) of the whole process, sender and receiver both.

use adaptnet_core::nai::SendOptions;
use adaptnet_runtime::message::{
    ConnectionStats, Endpoint, EndpointOptions, MessageHandle, Transport,
};
use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
use adaptnet_runtime::{ConnectError, ConnectionError, SendError};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Message and write size, bytes.
pub const CHUNK_BYTES: usize = 64 << 10;
/// Messages an application keeps outstanding (16 MB of 64 KB messages).
const OUTSTANDING: usize = 256;

/// Why a run failed.
#[derive(Debug, Error)]
pub enum BenchError {
    /// A socket of kernel TCP (or a bind) failed.
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    /// A message transport could not connect.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// A message transport's connection ended.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// A message transport refused a message.
    #[error(transparent)]
    Send(#[from] SendError),
    /// The server accepted no connection.
    #[error("the server accepted no connection")]
    NotAccepted,
    /// The receiving task failed.
    #[error("receiving task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// One transport's run.
#[derive(Clone, Debug)]
pub struct Measure {
    /// The transport.
    pub name: &'static str,
    /// Bytes the receiver got.
    pub bytes: u64,
    /// From the first send to the last byte received.
    pub wall: Duration,
    /// CPU time (user + system) of the process over the run.
    pub cpu: Duration,
    /// What to know about the run.
    pub note: String,
}

impl Measure {
    /// Goodput, Gbit/s.
    pub fn gbit_per_s(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.wall.as_secs_f64().max(1e-9) / 1e9
    }

    /// CPU seconds per GB moved.
    pub fn cpu_s_per_gb(&self) -> f64 {
        self.cpu.as_secs_f64() / (self.bytes as f64 / 1e9).max(1e-9)
    }
}

/// CPU time (user + system) this process has used.
pub fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given; all-zero is a valid `rusage`.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Times `run` (which returns the bytes received and a note) as transport `name`.
pub async fn measure<F, E>(name: &'static str, run: F) -> Result<Measure, E>
where
    F: Future<Output = Result<(u64, String), E>>,
{
    let (cpu0, t0) = (cpu_time(), Instant::now());
    let (bytes, note) = run.await?;
    Ok(Measure {
        name,
        bytes,
        wall: t0.elapsed(),
        cpu: cpu_time().saturating_sub(cpu0),
        note,
    })
}

/// Reads `from` to its end; returns the byte count.
async fn drain(mut from: impl AsyncRead + Unpin) -> std::io::Result<u64> {
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut bytes = 0u64;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(bytes);
        }
        bytes += n as u64;
    }
}

/// Kernel TCP: one stream, 64 KB writes.
pub async fn kernel_tcp(total: usize) -> Result<Measure, BenchError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    measure("kernel TCP", async move {
        let recv = tokio::spawn(async move { drain(listener.accept().await?.0).await });
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let chunk = vec![0x42; CHUNK_BYTES];
        for _ in 0..total / CHUNK_BYTES {
            s.write_all(&chunk).await?;
        }
        s.shutdown().await?;
        Ok((recv.await??, "one stream, 64 KB writes".to_owned()))
    })
    .await
}

/// Where the loopback runs bind: 127.0.0.1, any port.
const LOOPBACK: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// What the receiving side of [`messages`] has counted.
#[derive(Default)]
struct Received {
    bytes: AtomicU64,
    messages: AtomicUsize,
    /// Notified when the last message is in.
    all: tokio::sync::Notify,
}

/// 64 KB messages over a message transport, at most 256 (16 MB) awaiting their outcome, as
/// an application would keep; the run and the sender's counters at its end.
async fn messages(
    transport: Transport,
    name: &'static str,
    total: usize,
) -> Result<(Measure, ConnectionStats), BenchError> {
    let server = Endpoint::bind(LOOPBACK, EndpointOptions::server(transport))?;
    let client = Endpoint::bind(LOOPBACK, EndpointOptions::client(transport))?;
    let conn = client.connect(server.local_addr()).await?;
    let count = total / CHUNK_BYTES;
    // The server endpoint, kept until the sender's counters are read.
    let mut recv_server = Vec::new();
    let m = measure(name, async {
        // The server takes every connection (NAI-MTCPk opens several) and counts the bytes
        // of the whole messages it receives, until it has them all. Each connection's reader
        // counts for itself (no hand-off to another task per message: the receiving
        // application is one task per connection, as quinn's is one per stream).
        let recv = tokio::spawn(async move {
            let got = Arc::new(Received::default());
            // Nothing to wait for when no message is sent.
            while got.messages.load(Ordering::Acquire) < count {
                tokio::select! {
                    c = server.accept() => {
                        let Some(c) = c else { break };
                        let got = got.clone();
                        tokio::spawn(async move {
                            while let Ok(m) = c.recv().await {
                                got.bytes.fetch_add(m.data.len() as u64, Ordering::Relaxed);
                                if got.messages.fetch_add(1, Ordering::AcqRel) + 1 == count {
                                    got.all.notify_one();
                                }
                            }
                        });
                    }
                    () = got.all.notified() => break,
                }
            }
            (got.bytes.load(Ordering::Acquire), server)
        });
        let mut pending: VecDeque<MessageHandle> = VecDeque::new();
        // One buffer for every message, as the quinn and TCP senders write one chunk again and
        // again (EXPERIMENTS.md, "One buffer for every message").
        let chunk = bytes::Bytes::from(vec![0x42; CHUNK_BYTES]);
        for _ in 0..count {
            if pending.len() >= OUTSTANDING
                && let Some(h) = pending.pop_front()
            {
                h.outcome().await;
            }
            pending.push_back(conn.send(chunk.clone(), SendOptions::default()).await?);
        }
        let (bytes, server) = recv.await?;
        recv_server.push(server);
        Ok::<_, BenchError>((bytes, String::new()))
    })
    .await?;
    let stats = conn.stats().await?;
    Ok((m, stats))
}

/// ATP/SPP: 64 KB messages, at most 256 (16 MB) awaiting their outcome.
pub async fn atp(total: usize) -> Result<Measure, BenchError> {
    let (m, stats) = messages(Transport::Atp, "ATP/SPP, 64 KB messages", total).await?;
    let note = match stats {
        ConnectionStats::Atp(st) => {
            let retx = st.spp.retransmitted_bytes as f64 / st.spp.data_bytes.max(1) as f64;
            format!("{:.0} % of DATA bytes were retransmissions", retx * 100.0)
        }
        _ => String::new(),
    };
    Ok(Measure { note, ..m })
}

/// NAI-TCP: the same 64 KB messages over one kernel TCP connection.
pub async fn nai_tcp(total: usize) -> Result<Measure, BenchError> {
    let (m, _) = messages(Transport::NaiTcp, "NAI-TCP (kernel TCP)", total).await?;
    Ok(Measure {
        note: "one 1-byte acknowledgement per message".to_owned(),
        ..m
    })
}

/// The stream transport (core's TCP over UDP, NewReno): one stream, 64 KB writes.
pub async fn stream(total: usize) -> Result<Measure, BenchError> {
    let server = StreamEndpoint::bind(LOOPBACK, StreamOptions::server())?;
    let client = StreamEndpoint::bind(LOOPBACK, StreamOptions::client())?;
    let mut out = client.connect(server.local_addr()).await?;
    let incoming = server.accept().await.ok_or(BenchError::NotAccepted)?;
    measure("adaptnet stream (TCP over UDP)", async move {
        let recv = tokio::spawn(drain(incoming));
        let chunk = vec![0x42; CHUNK_BYTES];
        for _ in 0..total / CHUNK_BYTES {
            out.write_all(&chunk).await?;
        }
        out.shutdown().await?;
        Ok((recv.await??, "NewReno, one datagram per segment".to_owned()))
    })
    .await
}
