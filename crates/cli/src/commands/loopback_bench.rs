//! `adaptnet bench loopback`: bulk throughput over loopback in one process, measured in the
//! same run for ATP/SPP (64 KB messages), NAI-TCP (the same messages over kernel TCP) and
//! plain kernel TCP (one stream, 64 KB writes). Reports Gbit/s, CPU seconds per GB (user +
//! system of the whole process: sender and receiver both) and the ratio to kernel TCP.

use adaptnet_core::nai::SendOptions;
use adaptnet_core::nai::baseline::BaselineKind;
use adaptnet_experiments::report::table::Table;
use adaptnet_runtime::atp::{AtpEndpoint, EndpointOptions};
use adaptnet_runtime::naitcp::{BaselineClient, BaselineServer};
use anyhow::{Context, Result};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MESSAGE: usize = 64 << 10;

/// CPU time (user + system) this process has used.
pub(super) fn cpu_time() -> Duration {
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
    note: String,
}

async fn atp(total: usize) -> Result<Measure> {
    let server = AtpEndpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::server()).await?;
    let client = AtpEndpoint::bind("127.0.0.1:0".parse()?, EndpointOptions::client()).await?;
    let conn = client.connect(server.local_addr()).await?;
    let mut s = server.accept().await.context("accept")?;
    let count = total / MESSAGE;
    let (cpu0, t0) = (cpu_time(), Instant::now());
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
    // Keep at most 256 messages (16 MB) outstanding, as an application would.
    let mut pending = std::collections::VecDeque::new();
    for _ in 0..count {
        if pending.len() >= 256
            && let Some(h) = pending.pop_front()
        {
            let _: adaptnet_runtime::atp::MessageHandle = h;
            h.outcome().await?;
        }
        pending.push_back(
            conn.send(vec![0x42; MESSAGE], SendOptions::default())
                .await?,
        );
    }
    let bytes = recv.await?;
    let (wall, cpu) = (t0.elapsed(), cpu_time() - cpu0);
    let st = conn.stats().await?;
    let retx = st.spp.retransmitted_bytes as f64 / st.spp.data_bytes.max(1) as f64;
    Ok(Measure {
        name: "ATP/SPP",
        bytes,
        wall,
        cpu,
        note: format!("{:.0} % of DATA bytes were retransmissions", retx * 100.0),
    })
}

async fn nai_tcp(total: usize) -> Result<Measure> {
    let mut server = BaselineServer::bind("127.0.0.1:0".parse()?).await?;
    let client = BaselineClient::connect(server.local_addr(), BaselineKind::NaiTcp, 1).await?;
    let count = total / MESSAGE;
    let (cpu0, t0) = (cpu_time(), Instant::now());
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
    let mut pending = std::collections::VecDeque::new();
    for _ in 0..count {
        if pending.len() >= 256
            && let Some(h) = pending.pop_front()
        {
            let h: adaptnet_runtime::naitcp::BaselineHandle = h;
            h.outcome().await;
        }
        pending.push_back(
            client
                .send(vec![0x42; MESSAGE], SendOptions::default())
                .await?,
        );
    }
    let bytes = recv.await?;
    Ok(Measure {
        name: "NAI-TCP (kernel TCP)",
        bytes,
        wall: t0.elapsed(),
        cpu: cpu_time() - cpu0,
        note: "one 1-byte acknowledgement per message".into(),
    })
}

async fn kernel_tcp(total: usize) -> Result<Measure> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (cpu0, t0) = (cpu_time(), Instant::now());
    let recv = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await?;
        let mut buf = vec![0u8; MESSAGE];
        let mut bytes = 0u64;
        loop {
            let n = s.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            bytes += n as u64;
        }
        std::io::Result::Ok(bytes)
    });
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let chunk = vec![0x42; MESSAGE];
    for _ in 0..total / MESSAGE {
        s.write_all(&chunk).await?;
    }
    s.shutdown().await?;
    let bytes = recv.await??;
    Ok(Measure {
        name: "kernel TCP",
        bytes,
        wall: t0.elapsed(),
        cpu: cpu_time() - cpu0,
        note: "one stream, 64 KB writes".into(),
    })
}

/// Runs the loopback benchmark moving `megabytes` per transport.
pub fn run(megabytes: usize) -> Result<ExitCode> {
    let total = megabytes.max(1) << 20;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let rows = rt.block_on(async {
        let tcp = kernel_tcp(total).await?;
        let atp = atp(total).await?;
        let nai = nai_tcp(total).await?;
        anyhow::Ok([tcp, atp, nai])
    })?;
    let gbps = |m: &Measure| m.bytes as f64 * 8.0 / m.wall.as_secs_f64().max(1e-9) / 1e9;
    let base = gbps(&rows[0]);
    let mut t = Table::new([
        "transport",
        "MB",
        "Gbit/s",
        "CPU s/GB",
        "vs kernel TCP",
        "note",
    ]);
    for m in &rows {
        t.row([
            m.name.to_owned(),
            format!("{}", m.bytes >> 20),
            format!("{:.3}", gbps(m)),
            format!(
                "{:.2}",
                m.cpu.as_secs_f64() / (m.bytes as f64 / 1e9).max(1e-9)
            ),
            format!("{:.3}", gbps(m) / base.max(1e-12)),
            m.note.clone(),
        ]);
    }
    print!("{}", t.render());
    Ok(ExitCode::SUCCESS)
}
