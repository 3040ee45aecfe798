//! Bulk transfers over loopback inside one process — the workloads `adaptnet bench loopback`
//! and `benches/quinn-compare` measure, so both measure the same thing: kernel TCP (the
//! baseline), ATP/SPP with 64 KB messages, NAI-TCP with the same messages, and the stream
//! transport. Each returns a [`Measure`]: bytes the receiver got, wall time, and the CPU time
//! (user + system) of the whole process, sender and receiver both.

use crate::atp::{AtpEndpoint, EndpointOptions};
use crate::naitcp::{BaselineClient, BaselineServer};
use crate::stream::{StreamEndpoint, StreamOptions};
use adaptnet_core::nai::SendOptions;
use adaptnet_core::nai::baseline::BaselineKind;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Message and write size, bytes.
pub const CHUNK_BYTES: usize = 64 << 10;
/// Messages an application keeps outstanding (16 MB of 64 KB messages).
const OUTSTANDING: usize = 256;

/// Any error of a run (the transports' errors differ; a benchmark only reports them).
pub type BenchError = Box<dyn std::error::Error + Send + Sync>;

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
pub async fn measure<F>(name: &'static str, run: F) -> Result<Measure, BenchError>
where
    F: Future<Output = Result<(u64, String), BenchError>>,
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

/// ATP/SPP: 64 KB messages, at most 256 (16 MB) awaiting their outcome, as an application
/// would keep.
pub async fn atp(total: usize) -> Result<Measure, BenchError> {
    let server = AtpEndpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::server()).await?;
    let client = AtpEndpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::client()).await?;
    let conn = client.connect(server.local_addr()).await?;
    let mut s = server.accept().await.ok_or("the server stopped")?;
    let count = total / CHUNK_BYTES;
    let m = measure("ATP/SPP, 64 KB messages", async {
        let recv = tokio::spawn(async move {
            let mut bytes = 0u64;
            for _ in 0..count {
                match s.recv().await {
                    Some(m) => bytes += m.data.len() as u64,
                    None => break,
                }
            }
            bytes
        });
        let mut pending = VecDeque::new();
        for _ in 0..count {
            if pending.len() >= OUTSTANDING
                && let Some(h) = pending.pop_front()
            {
                let h: crate::atp::MessageHandle = h;
                h.outcome().await?;
            }
            pending.push_back(
                conn.send(vec![0x42; CHUNK_BYTES], SendOptions::default())
                    .await?,
            );
        }
        Ok((recv.await?, String::new()))
    })
    .await?;
    let st = conn.stats().await?;
    let retx = st.spp.retransmitted_bytes as f64 / st.spp.data_bytes.max(1) as f64;
    Ok(Measure {
        note: format!("{:.0} % of DATA bytes were retransmissions", retx * 100.0),
        ..m
    })
}

/// NAI-TCP: the same 64 KB messages over one kernel TCP connection.
pub async fn nai_tcp(total: usize) -> Result<Measure, BenchError> {
    let mut server = BaselineServer::bind("127.0.0.1:0".parse()?).await?;
    let client = BaselineClient::connect(server.local_addr(), BaselineKind::NaiTcp, 1).await?;
    let count = total / CHUNK_BYTES;
    measure("NAI-TCP (kernel TCP)", async move {
        let recv = tokio::spawn(async move {
            let mut bytes = 0u64;
            for _ in 0..count {
                match server.recv().await {
                    Some(m) => bytes += m.data.len() as u64,
                    None => break,
                }
            }
            bytes
        });
        let mut pending = VecDeque::new();
        for _ in 0..count {
            if pending.len() >= OUTSTANDING
                && let Some(h) = pending.pop_front()
            {
                let h: crate::naitcp::BaselineHandle = h;
                h.outcome().await;
            }
            pending.push_back(
                client
                    .send(vec![0x42; CHUNK_BYTES], SendOptions::default())
                    .await?,
            );
        }
        Ok((
            recv.await?,
            "one 1-byte acknowledgement per message".to_owned(),
        ))
    })
    .await
}

/// The stream transport (core's TCP over UDP, NewReno): one stream, 64 KB writes.
pub async fn stream(total: usize) -> Result<Measure, BenchError> {
    let server = StreamEndpoint::bind("127.0.0.1:0".parse()?, StreamOptions::server())?;
    let client = StreamEndpoint::bind("127.0.0.1:0".parse()?, StreamOptions::client())?;
    let mut out = client.connect(server.local_addr()).await?;
    let incoming = server.accept().await.ok_or("the server stopped")?;
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
