//! `adaptnet bench env-netns`: papers/001 Table 2 on a real link — the cost of the event
//! mechanism to a bulk transfer.
//!
//! A network namespace joined by veth; kernel TCP moves 1,400-byte writes (the paper's `ttcp`,
//! §5.1) from the root namespace to a receiver inside, over two links in turn:
//!
//! * the root → namespace direction shaped with `tbf` at 10 Mbit/s (the paper's Ethernet),
//!   10,240 writes (the paper's transfer) — the link sets the rate, as in the paper;
//! * the veth unshaped, [`UNSHAPED_WRITES`] writes — the CPU sets the rate, so a cost of the
//!   mechanism in this process would show here first.
//!
//! Four cases on each, in this process, interleaved round by round so slow drift of the
//! machine spreads over all of them:
//!
//! 1. **no monitor** — the paper's "unmodified kernel";
//! 2. **monitor, no events** — an [`EnvMonitor`] follows the sending veth (rtnetlink listener,
//!    `/sys` counters every 500 ms), no event is generated;
//! 3. **100 events/s** — a task sets a `cost` parameter across a level every 10 ms (each set is
//!    one event), published to nobody;
//! 4. **100 events/s, 10 apps, 10 actions** — the same, with 10 subscribed applications reading
//!    every event and the socket's 10-entry action table deciding actions on each.
//!
//! The actions decided are counted, not applied: the flow is kernel TCP, which has none of
//! core's TCP hooks. What is measured is what the paper measured — whether delivering events
//! and deciding actions in the same process slows the transfer — reported against the
//! run-to-run noise of the same runs.

use adaptnet_core::env::{ActionTable, Level, LevelMask, Name, Param, TcpAction, Watermarks};
use adaptnet_experiments::report::table::Table;
use adaptnet_runtime::env::{EnvMonitor, EnvOptions};
use adaptnet_testbed::loopback::cpu_time;
use adaptnet_testbed::netns::NetnsLink;
use anyhow::{Context, Result, anyhow};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The paper's transfer: 10,240 writes of 1,400 bytes.
pub(super) const WRITES: usize = 10_240;
/// Writes on the unshaped veth (≈1 GB), long enough for a CPU-bound rate to be measured.
pub const UNSHAPED_WRITES: usize = 750_000;
/// Bytes per write.
pub(super) const WRITE_BYTES: usize = 1_400;
/// The shaped rate (the paper's Ethernet).
const RATE: &str = "10mbit";
/// One event every this long: 100 events/s.
const EVENT_PERIOD: Duration = Duration::from_millis(10);
/// Subscribed applications in case 4.
const APPS: usize = 10;
/// Action-table entries in case 4.
const ACTIONS: usize = 10;
/// The device the generated events are about.
const DEVICE: &str = "bench0";

/// The four cases, in the paper's order.
const CASES: [&str; 4] = [
    "no monitor (unmodified)",
    "monitor, no events",
    "100 events/s",
    "100 events/s, 10 apps, 10 actions",
];

/// One run's result.
#[derive(Clone, Debug)]
struct RunResult {
    case: usize,
    mbps: f64,
    cpu_s: f64,
    events: u64,
    delivered: u64,
    actions: u64,
    seconds: f64,
}

/// One link the cases run on.
struct Section {
    title: &'static str,
    /// `tc` rate, or unshaped.
    rate: Option<&'static str>,
    writes: usize,
    /// The paper's Table 2 column beside it.
    paper: [&'static str; 4],
}

const SECTIONS: [Section; 2] = [
    Section {
        title: "veth + tbf 10 Mbit/s, 10,240 × 1,400 bytes (the paper's Ethernet and transfer)",
        rate: Some(RATE),
        writes: WRITES,
        paper: ["7.43", "7.47", "7.39", "7.46"],
    },
    Section {
        title: "veth unshaped, 750,000 × 1,400 bytes (CPU-bound)",
        rate: None,
        writes: UNSHAPED_WRITES,
        paper: ["-", "-", "-", "-"],
    },
];

/// The event machinery of cases 2–4, running in this process while the transfer runs.
struct Mechanism {
    monitor: Arc<EnvMonitor>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    events: Arc<AtomicU64>,
    delivered: Arc<AtomicU64>,
    actions: Arc<AtomicU64>,
}

impl Mechanism {
    /// Starts the monitor on `link`'s host end and, per `case`, the generator, the
    /// subscribers and the action table.
    fn start(case: usize, host_if: &str) -> Result<Mechanism> {
        let monitor = Arc::new(EnvMonitor::start(EnvOptions {
            interfaces: vec![host_if.to_string()],
            ..EnvOptions::default()
        })?);
        let levels = Watermarks::new(vec![Level::low(10.0), Level::high(50.0)])?;
        monitor.set_watermarks(DEVICE, Param::Cost, levels)?;
        monitor.set_dev_param(DEVICE, Param::Cost, 0.0)?;
        let mut m = Mechanism {
            monitor: monitor.clone(),
            tasks: Vec::new(),
            events: Arc::new(AtomicU64::new(0)),
            delivered: Arc::new(AtomicU64::new(0)),
            actions: Arc::new(AtomicU64::new(0)),
        };
        if case >= 3 {
            for _ in 0..APPS {
                let mut s = monitor.subscribe(DEVICE, Param::Cost, LevelMask::ALL)?;
                let delivered = m.delivered.clone();
                m.tasks.push(tokio::spawn(async move {
                    while s.recv().await.is_some() {
                        delivered.fetch_add(1, Ordering::Relaxed);
                    }
                }));
            }
            // The socket's action table, fed by its own subscription as the runtime would.
            let mut s = monitor.subscribe(DEVICE, Param::Cost, LevelMask::ALL)?;
            let mut table = ActionTable::new(Name::new(DEVICE)?);
            for i in 0..ACTIONS {
                let action = if i % 2 == 0 {
                    TcpAction::ResetTimers
                } else {
                    TcpAction::DupAcks(3)
                };
                table.set_simple_action(Param::Cost, u16::from(i % 2 == 1), action)?;
            }
            let actions = m.actions.clone();
            m.tasks.push(tokio::spawn(async move {
                while let Some(d) = s.recv().await {
                    let n = table.handle_event(&d.event).len();
                    actions.fetch_add(n as u64, Ordering::Relaxed);
                }
            }));
        }
        if case >= 2 {
            let events = m.events.clone();
            m.tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(EVENT_PERIOD);
                let mut high = false;
                loop {
                    tick.tick().await;
                    high = !high;
                    // Alternating 100 / 0 crosses high 50 or low 10: one event per set.
                    let v = if high { 100.0 } else { 0.0 };
                    if monitor.set_dev_param(DEVICE, Param::Cost, v).is_ok() {
                        events.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        Ok(m)
    }

    /// (events generated, deliveries to apps, actions decided) so far.
    fn counts(&self) -> (u64, u64, u64) {
        (
            self.events.load(Ordering::Relaxed),
            self.delivered.load(Ordering::Relaxed),
            self.actions.load(Ordering::Relaxed),
        )
    }

    /// Stops everything.
    fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        drop(self.monitor);
    }
}

/// One `ttcp`-like transfer to `listener` at `to`: the receiver's bytes and the time from the
/// connect to its last byte.
pub(super) fn transfer(
    listener: TcpListener,
    to: SocketAddr,
    writes: usize,
) -> Result<(u64, Duration)> {
    let recv = std::thread::spawn(move || -> std::io::Result<(u64, Instant)> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 64 << 10];
        let mut n = 0u64;
        loop {
            let k = s.read(&mut buf)?;
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        Ok((n, Instant::now()))
    });
    let t0 = Instant::now();
    let mut s = TcpStream::connect(to).with_context(|| format!("connecting to {to}"))?;
    let chunk = vec![0x5au8; WRITE_BYTES];
    for _ in 0..writes {
        s.write_all(&chunk)?;
    }
    s.shutdown(std::net::Shutdown::Write)?;
    let (bytes, end) = recv
        .join()
        .map_err(|_| anyhow!("receiver thread panicked"))??;
    Ok((bytes, end.saturating_duration_since(t0)))
}

/// Runs one case on `link`, moving `writes` × [`WRITE_BYTES`].
fn one_run(
    rt: &tokio::runtime::Runtime,
    link: &NetnsLink,
    case: usize,
    writes: usize,
) -> Result<RunResult> {
    let addr = link.inside_addr();
    let listener = link.inside(move || TcpListener::bind(addr))??;
    let to = listener.local_addr()?;
    let mech = if case >= 1 {
        let _g = rt.enter();
        Some(Mechanism::start(case, &link.host)?)
    } else {
        None
    };
    // Let the monitor's first poll and dump pass before timing.
    std::thread::sleep(Duration::from_millis(200));
    let before = mech.as_ref().map_or((0, 0, 0), Mechanism::counts);
    let cpu0 = cpu_time();
    let (bytes, took) = transfer(listener, to, writes)?;
    let cpu = cpu_time().saturating_sub(cpu0);
    let after = mech.as_ref().map_or((0, 0, 0), Mechanism::counts);
    if let Some(m) = mech {
        m.stop();
    }
    let (events, delivered, actions) = (after.0 - before.0, after.1 - before.1, after.2 - before.2);
    if bytes != (writes * WRITE_BYTES) as u64 {
        return Err(anyhow!(
            "the receiver got {bytes} bytes, expected {}",
            writes * WRITE_BYTES
        ));
    }
    Ok(RunResult {
        case,
        mbps: bytes as f64 * 8.0 / took.as_secs_f64().max(1e-9) / 1e6,
        cpu_s: cpu.as_secs_f64(),
        events,
        delivered,
        actions,
        seconds: took.as_secs_f64(),
    })
}

pub(super) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Sample standard deviation (0 for fewer than two values).
pub(super) fn stdev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// Runs `rounds` rounds of the four cases on each link and prints the tables.
pub fn run(rounds: u32) -> Result<ExitCode> {
    let rounds = rounds.max(1) as usize;
    let link = NetnsLink::create("t2", 83)
        .map_err(|e| anyhow!("bench env-netns needs a namespace link: {e}"))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    for section in &SECTIONS {
        match section.rate {
            Some(rate) => link.shape(rate)?,
            None => link.unshape()?,
        }
        eprintln!(
            "{}: {rounds} round(s) × {} cases",
            section.title,
            CASES.len()
        );
        let mut runs = Vec::new();
        for round in 0..rounds {
            for k in 0..CASES.len() {
                // Rotate the order each round.
                let case = (k + round) % CASES.len();
                let r = one_run(&rt, &link, case, section.writes)?;
                eprintln!(
                    "round {}/{rounds}: {:<36} {:.3} Mbit/s",
                    round + 1,
                    CASES.get(case).copied().unwrap_or("?"),
                    r.mbps
                );
                runs.push(r);
            }
        }
        println!("\n{}", section.title);
        print_section(&runs, &section.paper);
    }
    Ok(ExitCode::SUCCESS)
}

/// The table of one link's runs, and the verdict against the run-to-run noise.
fn print_section(runs: &[RunResult], paper: &[&str; 4]) {
    let per_case: Vec<Vec<&RunResult>> = (0..CASES.len())
        .map(|c| runs.iter().filter(|r| r.case == c).collect())
        .collect();
    let mbps = |c: usize| -> Vec<f64> {
        per_case
            .get(c)
            .map(|v| v.iter().map(|r| r.mbps).collect())
            .unwrap_or_default()
    };
    let base = mean(&mbps(0));
    // Pooled within-case standard deviation: the run-to-run noise.
    let (ss, dof) = (0..CASES.len()).fold((0.0, 0usize), |(ss, dof), c| {
        let v = mbps(c);
        let m = mean(&v);
        (
            ss + v.iter().map(|x| (x - m).powi(2)).sum::<f64>(),
            dof + v.len().saturating_sub(1),
        )
    });
    let mut t = Table::new([
        "case",
        "paper Ethernet Mb/s",
        "runs",
        "mean Mb/s",
        "sd",
        "min",
        "max",
        "vs unmodified",
        "events/s",
        "to apps",
        "actions",
        "CPU s/run",
    ]);
    for (c, name) in CASES.iter().enumerate() {
        let v = mbps(c);
        let rs = per_case.get(c).cloned().unwrap_or_default();
        let secs: f64 = rs.iter().map(|r| r.seconds).sum();
        let sum = |f: fn(&RunResult) -> u64| rs.iter().map(|r| f(r)).sum::<u64>();
        t.row([
            name.to_string(),
            paper.get(c).copied().unwrap_or("-").to_string(),
            v.len().to_string(),
            format!("{:.4}", mean(&v)),
            format!("{:.4}", stdev(&v)),
            format!("{:.4}", v.iter().copied().fold(f64::INFINITY, f64::min)),
            format!("{:.4}", v.iter().copied().fold(0.0, f64::max)),
            format!("{:+.4}", mean(&v) - base),
            format!("{:.1}", sum(|r| r.events) as f64 / secs.max(1e-9)),
            sum(|r| r.delivered).to_string(),
            sum(|r| r.actions).to_string(),
            format!(
                "{:.3}",
                mean(&rs.iter().map(|r| r.cpu_s).collect::<Vec<_>>())
            ),
        ]);
    }
    print!("{}", t.render());
    let worst = (1..CASES.len())
        .map(|c| (mean(&mbps(c)) - base).abs())
        .fold(0.0, f64::max);
    if dof == 0 {
        println!(
            "one run per case: no estimate of the run-to-run noise (use --repeat 3 or more); \
             largest |mean − unmodified|: {worst:.4} Mbit/s"
        );
        return;
    }
    let noise = (ss / dof as f64).sqrt();
    println!(
        "run-to-run noise (pooled sd): {noise:.4} Mbit/s; largest |mean − unmodified|: \
         {worst:.4} Mbit/s ({:.2} × the noise, {:.3} % of the unmodified rate)",
        worst / noise.max(1e-12),
        100.0 * worst / base.max(1e-12)
    );
}
