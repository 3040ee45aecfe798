//! `adaptnet link`: the simulator's link model on real packets (crate `adaptnet-linkemu`).
//!
//! Two shells, like Mahimahi's: `adaptnet link [LINK] -- COMMAND…` runs a command on the
//! emulated side of a link whose far side is this host (`ADAPTNET_LINK_PEER` holds the far
//! side's address) and passes its exit status through; `adaptnet link up NAME [LINK]` leaves
//! a link between namespaces `NAME` (emulated side) and `NAME-far` running in the background
//! until `adaptnet link down NAME`. The link is a `--config` link table (the scenarios' link
//! table, see `adaptnet_sim::scenario::link_table`) or the flags. Clean-up — the emulator,
//! the devices, the namespaces — happens on exit, on SIGINT/SIGTERM/SIGHUP and when the
//! command fails.

use adaptnet_linkemu::{EmulatedLink, EmulatorOptions, FarSide, LinkReport, SecondStats};
use adaptnet_sim::scenario::link_table::{LinkPair, link_config};
use adaptnet_sim::scenario::schema::{LinkSpec, LossSpec, TraceFormat, TraceSpec};
use anyhow::{Context, Result, bail};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The rate of a link given no rate or trace: a delay line (1 Tbit/s serialises a 1500-byte
/// packet in 12 ns).
pub const UNLIMITED_BPS: f64 = 1e12;
/// Where `adaptnet link up` keeps each named link's state and log.
pub const STATE_DIR: &str = "/run/adaptnet-link";
/// How long a command gets to exit after the signal we forwarded, before SIGKILL.
const CHILD_GRACE: Duration = Duration::from_secs(5);

/// The link and the emulator's options, from the command line.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LinkArgs {
    /// A link table (TOML: `[link]`, or `[uplink]` and `[downlink]`, each a scenario link
    /// table); excludes the link flags below.
    #[arg(long, value_name = "LINK.toml")]
    pub config: Option<PathBuf>,
    /// Uplink (emulated side → far side) bandwidth trace.
    #[arg(long, value_name = "FILE")]
    pub uplink_trace: Option<PathBuf>,
    /// Downlink (far side → emulated side) bandwidth trace.
    #[arg(long, value_name = "FILE")]
    pub downlink_trace: Option<PathBuf>,
    /// Format of the trace files: mahimahi (ms timestamps of 1500-byte opportunities) or
    /// piecewise (`time_s bytes_per_s` lines).
    #[arg(long, default_value = "mahimahi")]
    pub trace_format: TraceFormatArg,
    /// Constant rate of both directions, Mbit/s (default: unlimited, a delay line).
    #[arg(long)]
    pub rate_mbps: Option<f64>,
    /// Constant uplink rate, Mbit/s.
    #[arg(long)]
    pub uplink_mbps: Option<f64>,
    /// Constant downlink rate, Mbit/s.
    #[arg(long)]
    pub downlink_mbps: Option<f64>,
    /// One-way delay of each direction, ms.
    #[arg(long, default_value_t = 0.0)]
    pub delay_ms: f64,
    /// Drop-tail queue limit of each direction, packets (default 100).
    #[arg(long)]
    pub queue_packets: Option<u32>,
    /// Drop-tail queue limit of each direction, bytes.
    #[arg(long, conflicts_with = "queue_packets")]
    pub queue_bytes: Option<u64>,
    /// Bernoulli loss probability of both directions.
    #[arg(long)]
    pub loss: Option<f64>,
    /// Bernoulli loss probability of the uplink.
    #[arg(long)]
    pub uplink_loss: Option<f64>,
    /// Bernoulli loss probability of the downlink.
    #[arg(long)]
    pub downlink_loss: Option<f64>,
    /// Seed of the loss models (default: the link table's, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The link's subnet 10.250.N.0/24 (far side .1, emulated side .2).
    #[arg(long)]
    pub subnet: Option<u8>,
    /// Write emulated.pcap and far.pcap (each side's packets) into this directory.
    #[arg(long, value_name = "DIR")]
    pub pcap: Option<PathBuf>,
    /// Write the link's per-packet schedule (CSV) to this file.
    #[arg(long, value_name = "FILE")]
    pub schedule_log: Option<PathBuf>,
    /// Count packets handed over later than this after their model time, µs.
    #[arg(long, default_value_t = 1000)]
    pub late_bound_us: u64,
    /// Busy-wait within this long of a deadline instead of sleeping, µs (a wake-up from sleep
    /// takes tens of µs).
    #[arg(long, default_value_t = 100)]
    pub spin_us: u64,
    /// Open the devices without offloads: one read(2) and one write(2) per packet instead of
    /// GSO super-packets split for the model and GRO batches (the model sees the same
    /// packets either way).
    #[arg(long)]
    pub no_offload: bool,
    /// Per-second statistics and the summary as JSON lines (on stderr).
    #[arg(long)]
    pub json: bool,
    /// No per-second statistics (the summary is still printed).
    #[arg(long)]
    pub quiet: bool,
}

/// Trace file formats on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum TraceFormatArg {
    /// Mahimahi delivery opportunities.
    #[default]
    Mahimahi,
    /// Piecewise-constant rates.
    Piecewise,
}

/// `adaptnet link up|down`.
#[derive(clap::Subcommand, Debug)]
pub enum LinkAction {
    /// Bring up a link between namespaces NAME (emulated side, 10.250.N.2) and NAME-far (far
    /// side, 10.250.N.1) and leave it running in the background.
    Up {
        /// The link's name (letters, digits, '-', '_').
        name: String,
        #[command(flatten)]
        args: Box<LinkArgs>,
    },
    /// Stop a link brought up with `up`, delete its namespaces and print its summary.
    Down {
        /// The link's name.
        name: String,
    },
    /// The background process of `up` (started by it).
    #[command(name = "__daemon", hide = true)]
    Daemon {
        /// The link's name.
        name: String,
        #[command(flatten)]
        args: Box<LinkArgs>,
    },
}

impl LinkArgs {
    /// The link both directions run, from `--config` or the flags.
    pub fn link_pair(&self) -> Result<LinkPair> {
        if let Some(path) = &self.config {
            let flags = self.uplink_trace.is_some()
                || self.downlink_trace.is_some()
                || self.rate_mbps.is_some()
                || self.uplink_mbps.is_some()
                || self.downlink_mbps.is_some()
                || self.delay_ms != 0.0
                || self.queue_packets.is_some()
                || self.queue_bytes.is_some()
                || self.loss.is_some()
                || self.uplink_loss.is_some()
                || self.downlink_loss.is_some();
            if flags {
                bail!("--config describes the whole link: drop the link flags, or the file");
            }
            let mut pair = LinkPair::load(path)?;
            if let Some(s) = self.seed {
                pair.seed = s;
            }
            return Ok(pair);
        }
        let dir = |trace: &Option<PathBuf>, mbps: Option<f64>, loss: Option<f64>, name: &str| {
            let mut spec = LinkSpec {
                delay_ms: Some(self.delay_ms),
                queue_packets: self.queue_packets,
                queue_bytes: self.queue_bytes,
                loss: loss.or(self.loss).map(LossSpec::Bernoulli),
                ..LinkSpec::default()
            };
            match (trace, mbps.or(self.rate_mbps)) {
                (Some(_), Some(_)) => bail!("--{name}-trace and a rate: give one"),
                (Some(path), None) => {
                    spec.trace = Some(TraceSpec {
                        format: match self.trace_format {
                            TraceFormatArg::Mahimahi => TraceFormat::Mahimahi,
                            TraceFormatArg::Piecewise => TraceFormat::Piecewise,
                        },
                        path: path.display().to_string(),
                    });
                }
                (None, Some(r)) => spec.bandwidth_mbps = Some(r),
                (None, None) => spec.bandwidth_bps = Some(UNLIMITED_BPS),
            }
            Ok(link_config(
                &spec,
                name,
                "the command line",
                Path::new("."),
            )?)
        };
        Ok(LinkPair {
            uplink: dir(
                &self.uplink_trace,
                self.uplink_mbps,
                self.uplink_loss,
                "uplink",
            )?,
            downlink: dir(
                &self.downlink_trace,
                self.downlink_mbps,
                self.downlink_loss,
                "downlink",
            )?,
            seed: self.seed.unwrap_or(1),
        })
    }

    fn options(&self, name: Option<String>, far: FarSide) -> EmulatorOptions {
        EmulatorOptions {
            name,
            far,
            subnet: self.subnet,
            capture_dir: self.pcap.clone(),
            schedule_log: self.schedule_log.clone(),
            late_bound: Duration::from_micros(self.late_bound_us),
            spin: Duration::from_micros(self.spin_us),
            offload: !self.no_offload,
            ..EmulatorOptions::default()
        }
    }
}

/// The signal that asked us to stop (0: none yet).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
}

/// Catches SIGINT, SIGTERM and SIGHUP so that the link is torn down before we exit. A command
/// we start gets the default dispositions back when it executes.
fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Prints one second of statistics to stderr.
fn print_second(s: &SecondStats, json: bool) {
    if json {
        if let Ok(line) = serde_json::to_string(&serde_json::json!({ "second": s })) {
            eprintln!("{line}");
        }
        return;
    }
    let d = |x: &adaptnet_linkemu::DirectionSecond| {
        format!(
            "{:7.2} Mbit/s q {:4} pk drop q/r/o {}/{}/{}{}",
            x.delivered_mbps,
            x.queue_packets,
            x.dropped_queue,
            x.dropped_random,
            x.dropped_outage,
            if x.dropped_overload > 0 {
                format!(" overload {}", x.dropped_overload)
            } else {
                String::new()
            }
        )
    };
    let late = s.uplink.lateness.p99_us.max(s.downlink.lateness.p99_us);
    eprintln!(
        "link {:4} s  up {} | down {} | late p99 {late:.0} µs",
        s.t_s,
        d(&s.uplink),
        d(&s.downlink)
    );
}

/// Prints the run's summary to stderr.
fn print_report(r: &LinkReport, json: bool) {
    if json {
        if let Ok(line) = serde_json::to_string(&serde_json::json!({ "summary": r })) {
            eprintln!("{line}");
        }
        return;
    }
    eprintln!("link summary over {:.1} s:", r.duration_s);
    for (name, d) in [("uplink", &r.uplink), ("downlink", &r.downlink)] {
        let l = &d.lateness;
        eprintln!(
            "  {name:8} delivered {} pk {} B; dropped queue {} random {} outage {} overload {}; \
             lateness p50 {:.0} µs p99 {:.0} µs max {:.0} µs; {} later than {:.0} µs; {} not \
             read in time (dropped by the kernel)",
            d.link.delivered_packets,
            d.link.delivered_bytes,
            d.link.dropped_queue,
            d.link.dropped_random,
            d.link.dropped_outage,
            d.dropped_overload,
            l.p50_us,
            l.p99_us,
            l.max_us,
            l.late,
            l.bound_us,
            d.ingress_dropped
        );
    }
}

/// `adaptnet link [LINK] -- COMMAND…`.
pub fn shell(args: &LinkArgs, command: &[String]) -> Result<ExitCode> {
    let Some((program, rest)) = command.split_first() else {
        bail!("give a command to run on the emulated side: adaptnet link [LINK] -- COMMAND…");
    };
    let pair = args.link_pair()?;
    catch_signals();
    let link = match EmulatedLink::up(pair, args.options(None, FarSide::Host)) {
        Ok(l) => l,
        // A Ctrl-C during set-up also reaches the `ip` commands it runs (same process group),
        // so set-up fails; what it made is already deleted. The signal is the reason.
        Err(_) if STOP_SIGNAL.load(Ordering::SeqCst) != 0 => {
            return Ok(signal_exit(STOP_SIGNAL.load(Ordering::SeqCst)));
        }
        Err(e) => return Err(e.into()),
    };
    eprintln!(
        "adaptnet link: {} (emulated side, namespace {}) <-> {} (this host); ADAPTNET_LINK_PEER={}",
        link.emulated_addr(),
        link.emulated_ns(),
        link.far_addr(),
        link.far_addr()
    );
    let mut child = match link.command_emulated(program).args(rest).spawn() {
        Ok(c) => c,
        Err(e) => {
            let report = link.shutdown();
            if let Ok(r) = report {
                print_report(&r, args.json);
            }
            return Err(e).context(format!("starting {program}"));
        }
    };
    let mut signalled_at: Option<Instant> = None;
    let status = loop {
        match link.next_second(Duration::from_millis(20)) {
            Some(s) if !args.quiet => print_second(&s, args.json),
            _ => {}
        }
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(e) => {
                eprintln!("adaptnet link: waiting for {program}: {e}");
                break None;
            }
        }
        let sig = STOP_SIGNAL.load(Ordering::SeqCst);
        let stop = sig != 0 || link.has_failed();
        match (stop, signalled_at) {
            (true, None) => {
                let forward = if sig != 0 { sig } else { libc::SIGTERM };
                // SAFETY: kill on our own child's pid.
                unsafe {
                    libc::kill(child.id() as libc::pid_t, forward);
                }
                signalled_at = Some(Instant::now());
            }
            (true, Some(at)) if at.elapsed() > CHILD_GRACE => {
                let _ = child.kill();
            }
            _ => {}
        }
    };
    let report = link.shutdown();
    match &report {
        Ok(r) => print_report(r, args.json),
        Err(e) => eprintln!("adaptnet link: the emulator failed: {e}"),
    }
    let sig = STOP_SIGNAL.load(Ordering::SeqCst);
    if sig != 0 {
        return Ok(signal_exit(sig));
    }
    report?;
    Ok(exit_code(status))
}

/// The exit status of a process ended by signal `sig`: 128 + `sig`, as shells report it.
fn signal_exit(sig: i32) -> ExitCode {
    ExitCode::from(128u8.saturating_add(u8::try_from(sig).unwrap_or(0)))
}

/// The command's exit status as ours: its code, or 128 + the signal that ended it.
fn exit_code(status: Option<std::process::ExitStatus>) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => ExitCode::from(u8::try_from(c).unwrap_or(1)),
            (None, Some(sig)) => signal_exit(sig),
            _ => ExitCode::FAILURE,
        },
        None => ExitCode::FAILURE,
    }
}

/// What `adaptnet link up` leaves in [`STATE_DIR`] for `down` and for scripts.
#[derive(serde::Serialize, serde::Deserialize, Debug)]
struct LinkState {
    pid: u32,
    emulated_ns: String,
    far_ns: String,
    emulated_addr: String,
    far_addr: String,
    log: String,
}

fn state_path(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.json"))
}

fn report_path(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.report.json"))
}

fn log_path(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(format!("{name}.log"))
}

/// `adaptnet link up|down|__daemon`.
pub fn action(a: &LinkAction) -> Result<ExitCode> {
    match a {
        LinkAction::Up { name, args } => up(name, args),
        LinkAction::Down { name } => down(name),
        LinkAction::Daemon { name, args } => daemon(name, args),
    }
}

fn up(name: &str, args: &LinkArgs) -> Result<ExitCode> {
    // Check the link here, so a bad table is reported by this command, not in a log.
    args.link_pair()?;
    if state_path(name).exists() {
        bail!(
            "a link named {name} is already up ({}); `adaptnet link down {name}` first",
            state_path(name).display()
        );
    }
    std::fs::create_dir_all(STATE_DIR).with_context(|| format!("creating {STATE_DIR}"))?;
    let log = std::fs::File::create(log_path(name))
        .with_context(|| format!("creating {}", log_path(name).display()))?;
    // The daemon gets our own arguments with `up` replaced, so it reads the same link.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let Some(pos) = argv.iter().position(|a| a == "up") else {
        bail!("cannot find `up` in the command line");
    };
    argv[pos] = "__daemon".into();
    let exe = std::env::current_exe().context("finding the adaptnet executable")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; the daemon leaves our session so a terminal's
    // Ctrl-C or hang-up does not reach it.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .context("starting the link's background process")?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        std::io::BufReader::new(out).read_line(&mut line).ok();
    }
    match line.strip_prefix("ready ") {
        Some(json) => {
            let st: LinkState = serde_json::from_str(json.trim()).context("the daemon's state")?;
            println!(
                "link {name} up: {} ({} ) <-> {} ({}); log {}; `adaptnet link down {name}` stops it",
                st.emulated_addr, st.emulated_ns, st.far_addr, st.far_ns, st.log
            );
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let _ = child.wait();
            let log = std::fs::read_to_string(log_path(name)).unwrap_or_default();
            bail!("link {name} did not come up: {}", log.trim());
        }
    }
}

fn daemon(name: &str, args: &LinkArgs) -> Result<ExitCode> {
    catch_signals();
    let link = match args.link_pair().and_then(|p| {
        Ok(EmulatedLink::up(
            p,
            args.options(Some(name.to_string()), FarSide::Namespace),
        )?)
    }) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e:#}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let state = LinkState {
        pid: std::process::id(),
        emulated_ns: link.emulated_ns().to_string(),
        far_ns: link.far_ns().unwrap_or_default().to_string(),
        emulated_addr: link.emulated_addr().to_string(),
        far_addr: link.far_addr().to_string(),
        log: log_path(name).display().to_string(),
    };
    let json = serde_json::to_string(&state)?;
    std::fs::write(state_path(name), &json)
        .with_context(|| format!("writing {}", state_path(name).display()))?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready {json}")?;
        out.flush()?;
    }
    // Nobody reads our stdout any more: point it at /dev/null so a write cannot fail.
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 of two open descriptors.
        unsafe {
            libc::dup2(null.as_raw_fd(), 1);
        }
    }
    while STOP_SIGNAL.load(Ordering::SeqCst) == 0 && !link.has_failed() {
        match link.next_second(Duration::from_millis(100)) {
            Some(s) if !args.quiet => print_second(&s, args.json),
            _ => {}
        }
    }
    let report = link.shutdown();
    let _ = std::fs::remove_file(state_path(name));
    match report {
        Ok(r) => {
            print_report(&r, args.json);
            std::fs::write(report_path(name), serde_json::to_string(&r)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: the emulator failed: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn down(name: &str) -> Result<ExitCode> {
    let state: Option<LinkState> = std::fs::read_to_string(state_path(name))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    let _ = std::fs::remove_file(report_path(name));
    if let Some(st) = &state {
        let pid = st.pid as libc::pid_t;
        // SAFETY: kill with a pid we recorded; a stale pid gets ESRCH.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let t0 = Instant::now();
        // SAFETY: signal 0 only checks that the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // Whatever a crashed daemon left behind.
    let mut removed = false;
    for ns in [name.to_string(), format!("{name}-far")] {
        if adaptnet_linkemu::netns::exists(&ns) {
            adaptnet_linkemu::netns::delete(&ns)?;
            removed = true;
        }
    }
    let _ = std::fs::remove_file(state_path(name));
    if state.is_none() && !removed {
        bail!("no link named {name} is up");
    }
    match std::fs::read_to_string(report_path(name))
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
    {
        Some(r) => println!("link {name} down; summary: {r}"),
        None => println!("link {name} down"),
    }
    Ok(ExitCode::SUCCESS)
}
