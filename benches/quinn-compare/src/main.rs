//! Bulk throughput on loopback, every transport measured in the same run and the same
//! process (sender and receiver on a two-thread tokio runtime): kernel TCP (the baseline),
//! quinn (QUIC over UDP, the yardstick), ATP/SPP with 64 KB messages, and adaptnet's
//! stream transport (core TCP over UDP) — the last three through
//! `adaptnet_testbed::loopback`, the workloads `adaptnet bench loopback` runs. Reports Gbit/s,
//! CPU seconds per GB (user + system of the whole process) and the ratio to kernel TCP.
//!
//! Run: `cargo run --release --manifest-path benches/quinn-compare/Cargo.toml [-- MB]`
//! (default 256 MB per transport). Not part of the workspace: quinn and rustls are heavy to
//! build and nothing else needs them.

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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let mb: usize = std::env::args().nth(1).map_or(Ok(256), |s| s.parse())?;
    let total = mb << 20;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rows: Vec<Measure> = vec![
        loopback::kernel_tcp(total).await?,
        loopback::measure("quinn (QUIC)", quinn_bulk(total)).await?,
        loopback::atp(total).await?,
        loopback::stream(total).await?,
    ];
    let base = rows[0].gbit_per_s();
    println!(
        "{:<32} {:>6} {:>8} {:>9} {:>14}",
        "transport", "MB", "Gbit/s", "CPU s/GB", "vs kernel TCP"
    );
    for r in &rows {
        println!(
            "{:<32} {:>6} {:>8.3} {:>9.2} {:>14.3}",
            r.name,
            r.bytes >> 20,
            r.gbit_per_s(),
            r.cpu_s_per_gb(),
            r.gbit_per_s() / base
        );
    }
    Ok(())
}
