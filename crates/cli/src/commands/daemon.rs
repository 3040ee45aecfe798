//! `adaptnet daemon`: the host daemon (issue 20; `docs/design/daemon.md`).

use adaptnet_daemon::DaemonConfig;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What `adaptnet daemon` was given.
pub struct DaemonArgs<'a> {
    /// The configuration file, if any.
    pub config: Option<&'a Path>,
    /// A socket path overriding the configuration's.
    pub socket: Option<PathBuf>,
    /// A probe-protocol address overriding the configuration's.
    pub probe_bind: Option<SocketAddr>,
}

/// Runs the daemon until SIGINT or SIGTERM, then removes its socket file.
pub fn run(args: &DaemonArgs<'_>) -> Result<ExitCode> {
    let mut config = match args.config {
        Some(p) => DaemonConfig::load(p)?,
        None => DaemonConfig::default(),
    };
    if let Some(s) = &args.socket {
        config.daemon.socket = s.clone();
    }
    if let Some(a) = args.probe_bind {
        config.cm.probe_bind = Some(a);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(async move {
        let socket = config.daemon.socket.clone();
        let d = adaptnet_daemon::start(config).await?;
        eprintln!(
            "adaptnet daemon: listening on {}{}",
            socket.display(),
            d.probe_addr()
                .map(|a| format!(", probes on udp {a}"))
                .unwrap_or_default()
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("adaptnet daemon: stopping");
        d.shutdown();
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(ExitCode::SUCCESS)
}
