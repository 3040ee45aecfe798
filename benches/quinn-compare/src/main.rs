//! Bulk throughput on loopback, every transport measured in the same run and the same
//! process (sender and receiver on a two-thread tokio runtime): kernel TCP (the baseline),
//! quinn (QUIC over UDP, the yardstick), ATP/SPP with 64 KB messages, and adaptnet's
//! stream transport (core TCP over UDP). Reports Gbit/s, CPU seconds per GB (user + system of
//! the whole process) and the ratio to kernel TCP.
//!
//! Run: `cargo run --release --manifest-path benches/quinn-compare/Cargo.toml [-- MB]`
//! (default 256 MB per transport). Not part of the workspace: quinn and rustls are heavy to
//! build and nothing else needs them.

use adaptnet_core::nai::SendOptions;
use adaptnet_runtime::atp::{AtpEndpoint, EndpointOptions};
use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
use anyhow::{Context, Result};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CHUNK: usize = 64 << 10;

/// CPU time (user + system) this process has used.
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    tv(u.ru_utime) + tv(u.ru_stime)
}

struct Measure {
    name: &'static str,
    bytes: u64,
    wall: Duration,
    cpu: Duration,
}

/// Times `run`, which returns the bytes the receiver got.
async fn measure<F>(name: &'static str, run: F) -> Result<Measure>
where
    F: std::future::Future<Output = Result<u64>>,
{
    let (cpu0, t0) = (cpu_time(), Instant::now());
    let bytes = run.await?;
    Ok(Measure {
        name,
        bytes,
        wall: t0.elapsed(),
        cpu: cpu_time() - cpu0,
    })
}

async fn kernel_tcp(total: usize) -> Result<u64> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let recv = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await?;
        let mut buf = vec![0u8; CHUNK];
        let mut bytes = 0u64;
        loop {
            let n = s.read(&mut buf).await?;
            if n == 0 {
                return anyhow::Ok(bytes);
            }
            bytes += n as u64;
        }
    });
    let mut c = tokio::net::TcpStream::connect(addr).await?;
    let chunk = vec![0x42u8; CHUNK];
    for _ in 0..total / CHUNK {
        c.write_all(&chunk).await?;
    }
    c.shutdown().await?;
    recv.await?
}

async fn quinn_bulk(total: usize) -> Result<u64> {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    let cert_der = cert.cert.der().clone();
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der());
    let server_config = quinn::ServerConfig::with_single_cert(vec![cert_der.clone()], key.into())?;
    let server = quinn::Endpoint::server(server_config, "127.0.0.1:0".parse()?)?;
    let addr = server.local_addr()?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert_der)?;
    let client_config = quinn::ClientConfig::with_root_certificates(Arc::new(roots))?;
    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse()?)?;
    client.set_default_client_config(client_config);
    let recv = tokio::spawn(async move {
        let conn = server.accept().await.context("accept")?.await?;
        let mut s = conn.accept_uni().await?;
        let mut bytes = 0u64;
        while let Some(chunk) = s.read_chunk(CHUNK, true).await? {
            bytes += chunk.bytes.len() as u64;
        }
        anyhow::Ok(bytes)
    });
    let conn = client.connect(addr, "localhost")?.await?;
    let mut s = conn.open_uni().await?;
    let chunk = vec![0x42u8; CHUNK];
    for _ in 0..total / CHUNK {
        s.write_all(&chunk).await?;
    }
    s.finish()?;
    let bytes = recv.await??;
    conn.close(0u32.into(), b"done");
    Ok(bytes)
}

async fn atp(total: usize) -> Result<u64> {
    let server = AtpEndpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::server()).await?;
    let client = AtpEndpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::client()).await?;
    let conn = client.connect(server.local_addr()).await?;
    let mut s = server.accept().await.context("accept")?;
    let count = total / CHUNK;
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
    // At most 256 messages (16 MB) outstanding, as an application would keep.
    let mut pending = std::collections::VecDeque::new();
    for _ in 0..count {
        if pending.len() >= 256
            && let Some(h) = pending.pop_front()
        {
            let h: adaptnet_runtime::atp::MessageHandle = h;
            h.outcome().await?;
        }
        pending.push_back(
            conn.send(vec![0x42; CHUNK], SendOptions::default())
                .await?,
        );
    }
    Ok(recv.await?)
}

async fn stream(total: usize) -> Result<u64> {
    let server = StreamEndpoint::bind("127.0.0.1:0".parse()?, StreamOptions::server())?;
    let client = StreamEndpoint::bind("127.0.0.1:0".parse()?, StreamOptions::client())?;
    let mut out = client.connect(server.local_addr()).await?;
    let mut incoming = server.accept().await.context("accept")?;
    let recv = tokio::spawn(async move {
        let mut buf = vec![0u8; CHUNK];
        let mut bytes = 0u64;
        loop {
            let n = incoming.read(&mut buf).await?;
            if n == 0 {
                return anyhow::Ok(bytes);
            }
            bytes += n as u64;
        }
    });
    let chunk = vec![0x42u8; CHUNK];
    for _ in 0..total / CHUNK {
        out.write_all(&chunk).await?;
    }
    out.shutdown().await?;
    recv.await?
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let mb: usize = std::env::args().nth(1).map_or(Ok(256), |s| s.parse())?;
    let total = mb << 20;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut rows = vec![measure("kernel TCP", kernel_tcp(total)).await?];
    rows.push(measure("quinn (QUIC)", quinn_bulk(total)).await?);
    rows.push(measure("ATP/SPP, 64 KB messages", atp(total)).await?);
    // The stream transport is slow on loopback (core TCP's NewReno, one datagram per
    // segment): a smaller transfer keeps the run short; rates are per byte anyway.
    rows.push(measure("adaptnet stream", stream(total.min(64 << 20))).await?);
    let base = rows[0].bytes as f64 / rows[0].wall.as_secs_f64();
    println!(
        "{:<26} {:>6} {:>8} {:>9} {:>14}",
        "transport", "MB", "Gbit/s", "CPU s/GB", "vs kernel TCP"
    );
    for r in &rows {
        let rate = r.bytes as f64 / r.wall.as_secs_f64();
        println!(
            "{:<26} {:>6} {:>8.3} {:>9.2} {:>14.3}",
            r.name,
            r.bytes >> 20,
            rate * 8e-9,
            r.cpu.as_secs_f64() / (r.bytes as f64 / 1e9),
            rate / base
        );
    }
    Ok(())
}
