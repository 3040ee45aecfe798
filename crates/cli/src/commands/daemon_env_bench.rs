//! `adaptnet bench daemon-env-netns`: papers/001 Table 2 with the event service in the host
//! daemon — whether running the daemon and delivering 100 events/s through it to 10
//! subscribed applications slows a bulk transfer.
//!
//! The transfer is `bench env-netns`'s: kernel TCP, 10,240 writes of 1,400 bytes from the root
//! namespace into a namespace behind a veth shaped with `tbf` at 10 Mbit/s (the paper's
//! Ethernet), then the unshaped veth (CPU-bound, [`UNSHAPED_WRITES`] writes). Four cases,
//! rotated round by round:
//!
//! 1. **no daemon**;
//! 2. **daemon, no events** — `adaptnet daemon` running as its own process, one idle client;
//! 3. **100 events/s** — a client sets a parameter across a level every 10 ms (one event per
//!    set) through the daemon, nobody subscribed;
//! 4. **100 events/s to 10 apps** — the same with 10 subscribed clients reading every event.
//!
//! The verdict is the paper's: the largest difference from case 1 against the run-to-run
//! noise (pooled standard deviation) of the same runs.

use super::daemon_bench::DaemonProcess;
use super::env_netns_bench::{WRITE_BYTES, WRITES, mean, stdev, transfer};
use adaptnet_core::daemon::Message;
use adaptnet_core::env::{Level, LevelMask, Name, Param};
use adaptnet_daemon::DaemonClient;
use adaptnet_experiments::report::table::Table;
use adaptnet_testbed::netns::NetnsLink;
use anyhow::{Result, anyhow};
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Writes on the unshaped veth (≈280 MB).
const UNSHAPED_WRITES: usize = 200_000;
const CASES: [&str; 4] = [
    "no daemon",
    "daemon, no events",
    "100 events/s via daemon",
    "100 events/s via daemon, 10 apps",
];
const APPS: usize = 10;

/// The daemon-side load of cases 2–4 while a transfer runs.
struct Load {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    events: Arc<AtomicU64>,
    delivered: Arc<AtomicU64>,
    _clients: Vec<DaemonClient>,
}

async fn start_load(d: &DaemonProcess, case: usize) -> Result<Load> {
    let dev = Name::new("bench0")?;
    let setter = DaemonClient::connect(d.socket(), "table2-setter").await?;
    setter
        .set_dev_param_wms(
            dev.clone(),
            Param::Cost,
            vec![Level::low(10.0), Level::high(50.0)],
        )
        .await?;
    setter.set_dev_param(dev.clone(), Param::Cost, 0.0).await?;
    let mut load = Load {
        tasks: Vec::new(),
        events: Arc::new(AtomicU64::new(0)),
        delivered: Arc::new(AtomicU64::new(0)),
        _clients: vec![setter.clone()],
    };
    if case >= 3 {
        for i in 0..APPS {
            let c = DaemonClient::connect(d.socket(), &format!("table2-app{i}")).await?;
            c.request_event(dev.clone(), Param::Cost, LevelMask::ALL)
                .await?;
            let delivered = load.delivered.clone();
            load.tasks.push(tokio::spawn(async move {
                while let Some(m) = c.next_event().await {
                    if matches!(m, Message::EnvEvent { .. }) {
                        delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
    }
    if case >= 2 {
        let events = load.events.clone();
        load.tasks.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let mut high = false;
            loop {
                tick.tick().await;
                high = !high;
                let v = if high { 100.0 } else { 0.0 };
                if setter
                    .set_dev_param(dev.clone(), Param::Cost, v)
                    .await
                    .is_ok()
                {
                    events.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    Ok(load)
}

struct Run {
    case: usize,
    mbps: f64,
    events: u64,
    delivered: u64,
    seconds: f64,
}

fn one_run(
    rt: &tokio::runtime::Runtime,
    link: &NetnsLink,
    case: usize,
    writes: usize,
) -> Result<Run> {
    let addr = link.inside_addr();
    let listener = link.inside(move || TcpListener::bind(addr))??;
    let to = listener.local_addr()?;
    let daemon = if case >= 1 {
        Some(DaemonProcess::start()?)
    } else {
        None
    };
    let load = match &daemon {
        Some(d) => Some(rt.block_on(start_load(d, case))?),
        None => None,
    };
    std::thread::sleep(Duration::from_millis(200));
    let count = |l: &Option<Load>| {
        l.as_ref().map_or((0, 0), |l| {
            (
                l.events.load(Ordering::Relaxed),
                l.delivered.load(Ordering::Relaxed),
            )
        })
    };
    let before = count(&load);
    let (bytes, took) = transfer(listener, to, writes)?;
    let after = count(&load);
    if let Some(l) = load {
        for t in l.tasks {
            t.abort();
        }
    }
    drop(daemon);
    if bytes != (writes * WRITE_BYTES) as u64 {
        return Err(anyhow!("the receiver got {bytes} bytes"));
    }
    Ok(Run {
        case,
        mbps: bytes as f64 * 8.0 / took.as_secs_f64().max(1e-9) / 1e6,
        events: after.0 - before.0,
        delivered: after.1 - before.1,
        seconds: took.as_secs_f64(),
    })
}

/// Runs `rounds` rounds of the four cases on the shaped and the unshaped veth.
pub fn run(rounds: u32) -> Result<ExitCode> {
    let rounds = rounds.max(1) as usize;
    let link = NetnsLink::create("dt2", 84)
        .map_err(|e| anyhow!("bench daemon-env-netns needs a namespace link: {e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for (title, rate, writes) in [
        (
            "veth + tbf 10 Mbit/s, 10,240 × 1,400 bytes (paper: 7.43 / 7.47 / 7.39 / 7.46 Mb/s)",
            Some("10mbit"),
            WRITES,
        ),
        (
            "veth unshaped, 200,000 × 1,400 bytes (CPU-bound)",
            None,
            UNSHAPED_WRITES,
        ),
    ] {
        match rate {
            Some(r) => link.shape(r)?,
            None => link.unshape()?,
        }
        let mut runs = Vec::new();
        for round in 0..rounds {
            for k in 0..CASES.len() {
                let case = (k + round) % CASES.len();
                let r = one_run(&rt, &link, case, writes)?;
                eprintln!(
                    "round {}/{rounds}: {:<34} {:.3} Mbit/s",
                    round + 1,
                    CASES[case],
                    r.mbps
                );
                runs.push(r);
            }
        }
        println!("\n{title}");
        let mbps = |c: usize| -> Vec<f64> {
            runs.iter()
                .filter(|r| r.case == c)
                .map(|r| r.mbps)
                .collect()
        };
        let base = mean(&mbps(0));
        let mut t = Table::new([
            "case",
            "runs",
            "mean Mb/s",
            "sd",
            "vs no daemon",
            "events/s",
            "delivered/s",
        ]);
        let (mut ss, mut dof) = (0.0, 0usize);
        for (c, name) in CASES.iter().enumerate() {
            let v = mbps(c);
            let m = mean(&v);
            ss += v.iter().map(|x| (x - m).powi(2)).sum::<f64>();
            dof += v.len().saturating_sub(1);
            let rs: Vec<&Run> = runs.iter().filter(|r| r.case == c).collect();
            let secs: f64 = rs.iter().map(|r| r.seconds).sum::<f64>().max(1e-9);
            t.row([
                name.to_string(),
                v.len().to_string(),
                format!("{m:.4}"),
                format!("{:.4}", stdev(&v)),
                format!("{:+.4}", m - base),
                format!(
                    "{:.1}",
                    rs.iter().map(|r| r.events).sum::<u64>() as f64 / secs
                ),
                format!(
                    "{:.1}",
                    rs.iter().map(|r| r.delivered).sum::<u64>() as f64 / secs
                ),
            ]);
        }
        print!("{}", t.render());
        let worst = (1..CASES.len())
            .map(|c| (mean(&mbps(c)) - base).abs())
            .fold(0.0, f64::max);
        if dof > 0 {
            let noise = (ss / dof as f64).sqrt();
            println!(
                "run-to-run noise (pooled sd): {noise:.4} Mbit/s; largest |mean − no daemon|: {worst:.4} Mbit/s ({:.2} × the noise)",
                worst / noise.max(1e-12)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
