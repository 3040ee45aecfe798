//! `adaptnet bench daemon`: what going through the host daemon costs, against the in-process
//! engines, in the same run.
//!
//! * **request → grant**: an implicit-feedback flow asks for one MTU and waits for the grant,
//!   then reports it sent and received (so the rate never limits); the time from the request
//!   to the grant's arrival. Through a daemon running as a separate process (`adaptnet
//!   daemon`, Unix socket), and through the runtime's in-process CM (`adaptnet_runtime::cm`,
//!   its host thread and channels).
//! * **events/s to 10 subscribers**: a setter alternates a parameter across a low and a high
//!   watermark (every set is one event) from 4 connections with 8 calls in flight on each; 10 subscribers count what
//!   they receive. Through the daemon (10 client connections), and in process (core's
//!   `EnvTable` + `EventHub`, publish and poll, no I/O).
//! * **CPU per granted MB**: the request → grant loop's CPU time (this process plus the
//!   daemon's, from `/proc/PID/stat`) per MB granted, against the in-process CM's.

use adaptnet_core::Time;
use adaptnet_core::cm::{Feedback, FeedbackSource, FlowKey, PeerAddr, Request};
use adaptnet_core::daemon::Message;
use adaptnet_core::env::{EnvTable, EventHub, Level, LevelMask, Name, Param, Watermarks};
use adaptnet_daemon::DaemonClient;
use adaptnet_experiments::report::table::Table;
use adaptnet_runtime::cm::{Cm, CmBackend, CmOptions, Notice};
use adaptnet_testbed::loopback::cpu_time;
use anyhow::{Context, Result, anyhow};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Request → grant round trips measured (after [`WARMUP`]).
const GRANTS: usize = 20_000;
const WARMUP: usize = 2_000;
/// Grant size (one MTU).
const MTU: u64 = 1_500;
/// Subscribers of the event benchmark.
const SUBSCRIBERS: usize = 10;
/// Parameter sets of the event benchmark (each is one event to each subscriber).
const SETS: usize = 40_000;
/// Setter connections, and calls in flight on each (the protocol pipelines requests).
const SETTERS: usize = 4;
const IN_FLIGHT: usize = 8;
const RTT: Duration = Duration::from_millis(1);

/// The daemon as a child process; killed and its socket removed on drop.
pub(super) struct DaemonProcess {
    child: std::process::Child,
    socket: PathBuf,
}

impl DaemonProcess {
    /// Starts `adaptnet daemon` on a socket of its own and waits for the socket.
    pub(super) fn start() -> Result<DaemonProcess> {
        let socket =
            std::env::temp_dir().join(format!("adaptnet-bench-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let exe = std::env::current_exe().context("locating the adaptnet binary")?;
        let child = std::process::Command::new(exe)
            .arg("daemon")
            .arg("--socket")
            .arg(&socket)
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("starting adaptnet daemon")?;
        let start = Instant::now();
        while !socket.exists() {
            if start.elapsed() > Duration::from_secs(10) {
                return Err(anyhow!("the daemon did not create {}", socket.display()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(DaemonProcess { child, socket })
    }

    /// The socket path.
    pub(super) fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// The daemon's CPU time so far (user + system).
    fn cpu(&self) -> Duration {
        proc_cpu(self.child.id()).unwrap_or_default()
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// User + system CPU of process `pid` from `/proc/PID/stat`.
fn proc_cpu(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|h| *h > 0)?;
    Some(Duration::from_secs_f64((utime + stime) as f64 / hz as f64))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// One round: (through the daemon, in process) grant results and events/s.
type Round = (GrantResult, GrantResult, f64, f64);

struct GrantResult {
    median: Duration,
    p99: Duration,
    cpu_s_per_mb: f64,
}

fn summarize(mut lat: Vec<Duration>, cpu: Duration) -> GrantResult {
    lat.sort();
    let mb = (lat.len() as u64 * MTU) as f64 / 1e6;
    GrantResult {
        median: percentile(&lat, 0.5),
        p99: percentile(&lat, 0.99),
        cpu_s_per_mb: cpu.as_secs_f64() / mb,
    }
}

async fn grants_daemon(d: &DaemonProcess) -> Result<GrantResult> {
    let c = DaemonClient::connect(&d.socket, "bench").await?;
    let (flow, _) = c
        .open(PeerAddr(1), FlowKey(1), 1.0, FeedbackSource::Implicit)
        .await?;
    c.update(flow, Feedback::received(0, Some(RTT))).await?;
    let mut lat = Vec::with_capacity(GRANTS);
    let (mut cpu0, mut dcpu0) = (cpu_time(), d.cpu());
    for i in 0..WARMUP + GRANTS {
        if i == WARMUP {
            (cpu0, dcpu0) = (cpu_time(), d.cpu());
        }
        let t0 = Instant::now();
        c.request(flow, Request::bytes(MTU)).await?;
        loop {
            match c.next_event().await {
                Some(Message::Grant { .. }) => break,
                Some(_) => {}
                None => return Err(anyhow!("the daemon went away")),
            }
        }
        if i >= WARMUP {
            lat.push(t0.elapsed());
        }
        c.notify(flow, MTU).await?;
        c.update(flow, Feedback::received(MTU, Some(RTT))).await?;
    }
    let cpu = (cpu_time() - cpu0) + (d.cpu().saturating_sub(dcpu0));
    Ok(summarize(lat, cpu))
}

async fn grants_in_process(cm: &Cm, key: u64) -> Result<GrantResult> {
    let mut flow = cm
        .open_with(
            "127.0.0.1".parse()?,
            FlowKey(key),
            adaptnet_core::cm::FlowOptions::implicit(),
        )
        .await?;
    flow.update(Feedback::received(0, Some(RTT))).await?;
    let mut lat = Vec::with_capacity(GRANTS);
    let mut cpu0 = cpu_time();
    for i in 0..WARMUP + GRANTS {
        if i == WARMUP {
            cpu0 = cpu_time();
        }
        let t0 = Instant::now();
        flow.request(MTU).await?;
        loop {
            match flow.next_notice().await {
                Some(Notice::Grant(_)) => break,
                Some(_) => {}
                None => return Err(anyhow!("the CM went away")),
            }
        }
        if i >= WARMUP {
            lat.push(t0.elapsed());
        }
        flow.notify(MTU).await?;
        flow.update(Feedback::received(MTU, Some(RTT))).await?;
    }
    Ok(summarize(lat, cpu_time() - cpu0))
}

fn levels() -> Result<Vec<Level>> {
    Ok(vec![Level::low(10.0), Level::high(50.0)])
}

async fn events_daemon(d: &DaemonProcess) -> Result<f64> {
    let dev = Name::new("bench0")?;
    let admin = DaemonClient::connect(&d.socket, "setter").await?;
    admin
        .set_dev_param_wms(dev.clone(), Param::Cost, levels()?)
        .await?;
    admin.set_dev_param(dev.clone(), Param::Cost, 0.0).await?;
    let mut readers = Vec::new();
    for i in 0..SUBSCRIBERS {
        let s = DaemonClient::connect(&d.socket, &format!("sub{i}")).await?;
        s.request_event(dev.clone(), Param::Cost, LevelMask::ALL)
            .await?;
        readers.push(tokio::spawn(async move {
            // Counts events until the stream has been quiet for a second; the sets race, so
            // not every set crosses a level, and the count is what arrived.
            let (mut n, mut last) = (0usize, Instant::now());
            loop {
                match tokio::time::timeout(Duration::from_secs(1), s.next_event()).await {
                    Ok(Some(Message::EnvEvent { .. })) => {
                        n += 1;
                        last = Instant::now();
                    }
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
            (n, s.events_lost(), last)
        }));
    }
    let t0 = Instant::now();
    let mut setters = Vec::new();
    for k in 0..SETTERS {
        let admin = DaemonClient::connect(&d.socket, &format!("setter{k}")).await?;
        for j in 0..IN_FLIGHT {
            let admin = admin.clone();
            let dev = dev.clone();
            let k = k * IN_FLIGHT + j;
            setters.push(tokio::spawn(async move {
                for i in 0..SETS / (SETTERS * IN_FLIGHT) {
                    // Alternating 100 / 0 crosses high 50 or low 10: one event per set, whichever
                    // setter's set lands first.
                    let v = if (i + k).is_multiple_of(2) {
                        100.0
                    } else {
                        0.0
                    };
                    admin.set_dev_param(dev.clone(), Param::Cost, v).await?;
                }
                Ok::<_, adaptnet_daemon::ClientError>(())
            }));
        }
    }
    for s in setters {
        s.await??;
    }
    let (mut delivered, mut lost, mut end) = (0usize, 0u64, t0);
    for r in readers {
        let (n, l, last) = r.await?;
        delivered += n;
        lost += l;
        end = end.max(last);
    }
    let secs = end.duration_since(t0).as_secs_f64().max(1e-9);
    if lost > 0 {
        eprintln!("daemon events: {lost} lost by slow subscribers");
    }
    Ok(delivered as f64 / secs)
}

fn events_in_process() -> Result<f64> {
    let dev = Name::new("bench0")?;
    let mut table = EnvTable::new();
    table.set_dev_param_wms(&dev, &Param::Cost, Watermarks::new(levels()?)?)?;
    let mut hub = EventHub::new();
    let subs: Vec<_> = (0..SUBSCRIBERS)
        .map(|_| hub.subscribe(1024))
        .collect::<Result<_, _>>()?;
    for s in &subs {
        hub.request_event(*s, &dev, &Param::Cost, LevelMask::ALL)?;
    }
    let t0 = Instant::now();
    let mut delivered = 0usize;
    for i in 0..SETS * 10 {
        let v = if i % 2 == 0 { 100.0 } else { 0.0 };
        table.set_dev_param(Time::from_nanos(i as u64), &dev, &Param::Cost, v)?;
        while let Some(ev) = table.poll_event() {
            hub.publish(&ev);
        }
        for s in &subs {
            while let Ok(Some(_)) = hub.poll(*s) {
                delivered += 1;
            }
        }
    }
    Ok(delivered as f64 / t0.elapsed().as_secs_f64())
}

fn us(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

/// Runs the benchmark `rounds` times and prints the medians.
pub fn run(rounds: u32) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let d = DaemonProcess::start()?;
    // One in-process CM per process (the runtime's rule), reused by every round.
    let cm = rt.block_on(async {
        Cm::start(CmOptions {
            bind: "127.0.0.1:0".parse()?,
            peer_port: None,
            backend: CmBackend::InProcess,
            ..CmOptions::default()
        })
        .map_err(anyhow::Error::from)
    })?;
    let mut rows: Vec<Round> = Vec::new();
    for r in 0..rounds.max(1) {
        let (gd, gi, ed) = rt.block_on(async {
            let gd = grants_daemon(&d).await?;
            let gi = grants_in_process(&cm, u64::from(r)).await?;
            let ed = events_daemon(&d).await?;
            Ok::<_, anyhow::Error>((gd, gi, ed))
        })?;
        let ei = events_in_process()?;
        eprintln!(
            "round {}: grant median {} / {} us, events/s {:.0} / {:.0}",
            r + 1,
            us(gd.median),
            us(gi.median),
            ed,
            ei
        );
        rows.push((gd, gi, ed, ei));
    }
    let med = |f: &dyn Fn(&Round) -> f64| {
        let mut v: Vec<f64> = rows.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut t = Table::text([
        "measure",
        "through the daemon",
        "in process",
        "ratio",
        "aim",
    ]);
    let gdm = med(&|r| r.0.median.as_secs_f64() * 1e6);
    let gim = med(&|r| r.1.median.as_secs_f64() * 1e6);
    let gdp = med(&|r| r.0.p99.as_secs_f64() * 1e6);
    let gip = med(&|r| r.1.p99.as_secs_f64() * 1e6);
    let cd = med(&|r| r.0.cpu_s_per_mb * 1e3);
    let ci = med(&|r| r.1.cpu_s_per_mb * 1e3);
    let ed = med(&|r| r.2);
    let ei = med(&|r| r.3);
    t.row([
        "request → grant, median (µs)".to_string(),
        format!("{gdm:.1}"),
        format!("{gim:.1}"),
        format!("{:.2}", gdm / gim),
        "≤ 50".into(),
    ]);
    t.row([
        "request → grant, p99 (µs)".to_string(),
        format!("{gdp:.1}"),
        format!("{gip:.1}"),
        format!("{:.2}", gdp / gip),
        "".into(),
    ]);
    t.row([
        "CPU per granted MB (ms), 1,500-B grants".to_string(),
        format!("{cd:.1}"),
        format!("{ci:.1}"),
        format!("{:.2}", cd / ci),
        "".into(),
    ]);
    t.row([
        format!("events/s to {SUBSCRIBERS} subscribers"),
        format!("{ed:.0}"),
        format!("{ei:.0}"),
        format!("{:.3}", ed / ei),
        "≥ 100,000".into(),
    ]);
    println!(
        "adaptnet bench daemon: {GRANTS} grants, {SETS} parameter sets × {SUBSCRIBERS} subscribers, median of {} rounds",
        rows.len()
    );
    print!("{}", t.render());
    Ok(ExitCode::SUCCESS)
}
