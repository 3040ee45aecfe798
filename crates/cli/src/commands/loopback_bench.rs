//! `adaptnet bench loopback`: bulk throughput over loopback in one process, measured in the
//! same run for plain kernel TCP (one stream, 64 KB writes), ATP/SPP (64 KB messages),
//! NAI-TCP (the same messages over kernel TCP) and the stream transport — the workloads of
//! [`adaptnet_testbed::loopback`]. Reports Gbit/s, CPU seconds per GB (user + system of the
//! whole process: sender and receiver both) and the ratio to kernel TCP.

use adaptnet_experiments::report::table::Table;
use adaptnet_testbed::loopback::{self, Measure};
use anyhow::{Context, Result};
use std::process::ExitCode;

/// Runs the loopback benchmark moving `megabytes` per transport.
pub fn run(megabytes: usize) -> Result<ExitCode> {
    let total = megabytes.max(1) << 20;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let rows: Vec<Measure> = rt
        .block_on(async {
            Ok::<_, loopback::BenchError>(vec![
                loopback::kernel_tcp(total).await?,
                loopback::atp(total).await?,
                loopback::nai_tcp(total).await?,
                loopback::stream(total).await?,
            ])
        })
        .context("loopback benchmark")?;
    let base = rows.first().map_or(1.0, Measure::gbit_per_s);
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
            format!("{:.3}", m.gbit_per_s()),
            format!("{:.2}", m.cpu_s_per_gb()),
            format!("{:.3}", m.gbit_per_s() / base.max(1e-12)),
            m.note.clone(),
        ]);
    }
    print!("{}", t.render());
    Ok(ExitCode::SUCCESS)
}
