//! Bulk throughput on loopback, every transport measured in the same run and the same
//! process (sender and receiver on a two-thread tokio runtime): kernel TCP (the baseline),
//! quinn (QUIC over UDP, the yardstick), ATP/SPP with 64 KB messages, and adaptnet's
//! stream transport (core TCP over UDP) — the last three through
//! `adaptnet_testbed::loopback`, the workloads `adaptnet bench loopback` runs. Reports Gbit/s,
//! CPU seconds per GB (user + system of the whole process) and the ratio to kernel TCP.
//!
//! With several runs (`-- MB RUNS`) the transports take turns run after run, and a summary
//! gives each transport's min / median / max Gbit/s, its median CPU s/GB and its median
//! context switches (voluntary + involuntary, of the whole process) per GB.
//!
//! Run: `cargo run --release --manifest-path benches/quinn-compare/Cargo.toml [-- MB [RUNS
//! [ONLY]]]` (default 256 MB per transport, one run; `ONLY`, e.g. `quinn,atp`, runs just
//! those of `tcp`, `quinn`, `atp`, `stream` — for profiling one transport). Not part of the workspace: quinn and rustls are
//! heavy to build and nothing else needs them.

use adaptnet_testbed::loopback::{self, CHUNK_BYTES, Measure};
use anyhow::{Context, Result};
use std::sync::Arc;

/// quinn: one unidirectional stream, 64 KB writes, default transport configuration.
async fn quinn_bulk(total: usize) -> Result<(u64, String)> {
    quinn_transfer(total)
        .await
        .map(|bytes| (bytes, "one unidirectional stream, 64 KB writes".to_owned()))
}

async fn quinn_transfer(total: usize) -> Result<u64> {
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
        while let Some(chunk) = s.read_chunk(CHUNK_BYTES, true).await? {
            bytes += chunk.bytes.len() as u64;
        }
        anyhow::Ok(bytes)
    });
    let conn = client.connect(addr, "localhost")?.await?;
    let mut s = conn.open_uni().await?;
    let chunk = vec![0x42u8; CHUNK_BYTES];
    for _ in 0..total / CHUNK_BYTES {
        s.write_all(&chunk).await?;
    }
    s.finish()?;
    let bytes = recv.await??;
    conn.close(0u32.into(), b"done");
    Ok(bytes)
}

/// Context switches (voluntary + involuntary) this process has made so far.
fn context_switches() -> u64 {
    // SAFETY: getrusage fills the struct it is given; all-zero is a valid `rusage`.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u64::try_from(u.ru_nvcsw).unwrap_or(0) + u64::try_from(u.ru_nivcsw).unwrap_or(0)
}

/// One transport's run and the context switches it cost.
async fn switches<F>(run: F) -> Result<(Measure, u64)>
where
    F: Future<Output = Result<Measure>>,
{
    let before = context_switches();
    let m = run.await?;
    Ok((m, context_switches().saturating_sub(before)))
}

/// The middle value (the upper one of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let mb: usize = std::env::args().nth(1).map_or(Ok(256), |s| s.parse())?;
    let runs: usize = std::env::args().nth(2).map_or(Ok(1), |s| s.parse())?;
    let only: Option<String> = std::env::args().nth(3);
    let wanted = |key: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|k| k == key))
    };
    let total = mb << 20;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut all: Vec<Vec<(Measure, u64)>> = Vec::new();
    for run in 1..=runs {
        let mut rows = Vec::new();
        if wanted("tcp") {
            rows.push(switches(async { Ok(loopback::kernel_tcp(total).await?) }).await?);
        }
        if wanted("quinn") {
            rows.push(switches(loopback::measure("quinn (QUIC)", quinn_bulk(total))).await?);
        }
        if wanted("atp") {
            rows.push(switches(async { Ok(loopback::atp(total).await?) }).await?);
        }
        if wanted("stream") {
            rows.push(switches(async { Ok(loopback::stream(total).await?) }).await?);
        }
        // The ratio's base: kernel TCP when it ran, else the first transport.
        let base = rows.first().map_or(f64::NAN, |r| r.0.gbit_per_s());
        println!(
            "run {run}: {:<32} {:>6} {:>8} {:>9} {:>12} {:>14}",
            "transport",
            "MB",
            "Gbit/s",
            "CPU s/GB",
            "ctx sw/GB",
            if wanted("tcp") {
                "vs kernel TCP"
            } else {
                "vs first row"
            }
        );
        for (r, cs) in &rows {
            println!(
                "run {run}: {:<32} {:>6} {:>8.3} {:>9.2} {:>12.0} {:>14.3}",
                r.name,
                r.bytes >> 20,
                r.gbit_per_s(),
                r.cpu_s_per_gb(),
                *cs as f64 / (r.bytes as f64 / 1e9).max(1e-9),
                r.gbit_per_s() / base
            );
        }
        all.push(rows);
    }
    if runs > 1 {
        println!(
            "\n{runs} runs: {:<32} {:>8} {:>8} {:>8} {:>9} {:>12}",
            "transport", "min", "median", "max", "CPU s/GB", "ctx sw/GB"
        );
        for i in 0..all.first().map_or(0, Vec::len) {
            let gbit: Vec<f64> = all.iter().map(|r| r[i].0.gbit_per_s()).collect();
            let cpu: Vec<f64> = all.iter().map(|r| r[i].0.cpu_s_per_gb()).collect();
            let cs: Vec<f64> = all
                .iter()
                .map(|r| r[i].1 as f64 / (r[i].0.bytes as f64 / 1e9).max(1e-9))
                .collect();
            let (min, max) = gbit
                .iter()
                .fold((f64::INFINITY, 0.0f64), |(a, b), &g| (a.min(g), b.max(g)));
            println!(
                "{runs} runs: {:<32} {:>8.3} {:>8.3} {:>8.3} {:>9.2} {:>12.0}",
                all[0][i].0.name,
                min,
                median(gbit),
                max,
                median(cpu),
                median(cs)
            );
        }
    }
    Ok(())
}
