//! `adaptnet`: run simulated scenarios and experiments, validate the simulator, benchmark it.

mod commands;
mod log;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// adaptnet: adaptive transport for variable networks.
#[derive(Parser, Debug)]
#[command(name = "adaptnet", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the built-in demo scenario (no files needed) and write its report.
    Demo {
        /// Seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Output directory.
        #[arg(long, default_value = "out/demo")]
        out: PathBuf,
    },
    /// Receive `adaptnet send` workloads and `adaptnet bulk` flows on a real network
    /// (iperf3-like). With `--listen HOST:P` it opens four ports: UDP P (ATP), TCP P
    /// (NAI-TCP/NAI-MTCP), UDP P+1 (the stream transport's bulk sink) and TCP P+1 (kernel TCP's
    /// bulk sink). Prints a line a second and, at the end (`-t`, Ctrl-C or SIGTERM), a summary.
    Serve {
        /// HOST:P to listen on, a name or an address (P at most 65534: P+1 is used too).
        #[arg(long, default_value = "0.0.0.0:7700")]
        listen: String,
        /// Stop after this many seconds (default: run until interrupted).
        #[arg(short = 't', long)]
        time: Option<f64>,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
        /// Connections each of the four listeners holds at once; beyond, new ones are refused.
        #[arg(long, default_value_t = 1024)]
        max_connections: usize,
        /// Seconds after which a connection that sent nothing is closed (every listener).
        #[arg(long, default_value_t = 60.0)]
        idle_timeout_s: f64,
        /// Seconds a peer may leave a connection unanswered before it ends as dead (ATP's
        /// silent timeout, kernel TCP's `TCP_USER_TIMEOUT`; default: the runtime's 8 s).
        /// Raise it above the longest outage to ride out (a trace's zero-rate stretch).
        #[arg(long)]
        peer_timeout_s: Option<f64>,
    },
    /// Bulk throughput to an `adaptnet serve` (iperf3-shaped): per-second table, per-flow
    /// summary, Jain's index across flows.
    Bulk {
        /// The server, HOST:P (a name or an address; stream and TCP use P+1).
        #[arg(long)]
        to: String,
        /// Transport: atp, stream (core TCP over UDP) or tcp (kernel).
        #[arg(long, default_value = "stream")]
        transport: commands::bulk::BulkTransport,
        /// Parallel flows.
        #[arg(short = 'P', long = "parallel", default_value_t = 1)]
        parallel: usize,
        /// Stream flows share the process's Congestion Manager.
        #[arg(long)]
        cm: bool,
        /// Seconds each flow sends.
        #[arg(short = 't', long, default_value_t = 10.0)]
        time: f64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Kernel TCP's congestion control for `--transport tcp`: cubic, reno, bbr (or any
        /// name in /proc/sys/net/ipv4/tcp_available_congestion_control). Default: the host's.
        #[arg(long)]
        congestion: Option<String>,
    },
    /// Run a Table-2-style message workload to an `adaptnet serve` over a real network.
    Send {
        /// The server, HOST:PORT (a name or an address).
        #[arg(long)]
        to: String,
        /// Workload name from experiments/nai/table2.params (uniform, prioritised, reversed,
        /// filesystem, overload, random) or a file with one `[[workloads]]` entry.
        #[arg(long, default_value = "prioritised")]
        workload: String,
        /// Transport: atp, nai-tcp, or nai-mtcpK (K connections for the highest level).
        #[arg(long, default_value = "atp")]
        transport: adaptnet_runtime::message::Transport,
        /// Seconds of the workload to run.
        #[arg(short = 't', long, default_value_t = 10.0)]
        time: f64,
        /// Workload seed (class phases, random draws).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Output directory.
        #[arg(long, default_value = "out/send")]
        out: PathBuf,
        /// The experiments directory.
        #[arg(long)]
        experiments: Option<PathBuf>,
        /// Kernel TCP's congestion control for nai-tcp and nai-mtcpK: cubic, reno, bbr (or any
        /// name the kernel has). Default: the host's.
        #[arg(long)]
        congestion: Option<String>,
        /// Seconds the server may leave the connection unanswered before it ends as dead
        /// (as `serve --peer-timeout-s`; default: the runtime's 8 s).
        #[arg(long)]
        peer_timeout_s: Option<f64>,
        /// How ATP orders priority levels: `slack` (the default: a less important message
        /// goes first when the more important ones can spare the time) or `strict` (the
        /// paper's strict priorities).
        #[arg(long, value_parser = commands::real::parse_priorities)]
        priorities: Option<adaptnet_core::nai::ServiceOrder>,
        /// Under `--priorities slack`: the share of ATP's rate estimate, in percent (1–100),
        /// at which every more important message must still make its deadline for a less
        /// important one to go first (default 75; 100 lends all the estimate says is spare).
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100))]
        lend_at_percent: Option<u8>,
    },
    /// Run a scenario file: summary table, CSV/JSON, SVG goodput plot, requested pcaps.
    Sim {
        /// The scenario (TOML).
        scenario: PathBuf,
        /// Seed (default: the scenario's).
        #[arg(long)]
        seed: Option<u64>,
        /// Output directory (default: out/SCENARIO-NAME).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run the simulator's validation checks (experiments/validation) and print a table.
    Validate {
        /// The experiments directory.
        #[arg(long)]
        experiments: Option<PathBuf>,
        /// Seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Run a paper experiment (`adaptnet exp list` shows them).
    Exp {
        /// Experiment name, or `list`.
        name: String,
        /// Seeds, comma-separated (default: the experiment's own, usually 1..=5).
        #[arg(long, value_delimiter = ',')]
        seeds: Vec<u64>,
        /// Shorter runs, for a quick look (not comparable with the paper).
        #[arg(long)]
        quick: bool,
        /// Output directory (default: out/NAME).
        #[arg(long)]
        out: Option<PathBuf>,
        /// The experiments directory.
        #[arg(long)]
        experiments: Option<PathBuf>,
    },
    /// Print this host's environment events (papers/001) as they happen, one line each:
    /// interface availability, bandwidth and signal quality crossing their levels.
    Events {
        /// The interface to watch (default: every interface in /sys/class/net).
        #[arg(long)]
        interface: Option<String>,
        /// Only these events (papers/001 request_event): `DEVICE:PARAM[:LEVELS][,…]`, PARAM one
        /// of availability, bandwidth, signal; LEVELS level indices joined by '+' (availability:
        /// 0 low 10, 1 high 20; bandwidth: 0..=5; signal: 0..=3), e.g.
        /// `eth0:availability,wlan0:signal:1+3`.
        #[arg(long, conflicts_with = "interface")]
        subscribe: Option<String>,
        /// Poll period in milliseconds (at least 10).
        #[arg(long, default_value_t = 500)]
        period_ms: u64,
        /// Stop after this many seconds (default: run until interrupted).
        #[arg(short = 't', long)]
        time: Option<f64>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Emulate a link on real packets with the simulator's link model (traces, delay, queue,
    /// loss, outages): `adaptnet link [LINK] -- COMMAND…` runs COMMAND on the emulated side
    /// (the far side is this host, its address in $ADAPTNET_LINK_PEER); `adaptnet link up
    /// NAME [LINK]` / `down NAME` leave a link between namespaces NAME and NAME-far. Needs root.
    #[command(args_conflicts_with_subcommands = true)]
    Link {
        #[command(subcommand)]
        action: Option<commands::link::LinkAction>,
        #[command(flatten)]
        args: Box<commands::link::LinkArgs>,
        /// The command to run on the emulated side (after `--`).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// The host daemon (issue 20): one Congestion Manager, one estimator per interface and
    /// one event service for every application on the host, on a Unix socket
    /// (docs/design/daemon.md; sample configuration in dist/adaptnetd.toml).
    Daemon {
        /// Configuration file (TOML).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Socket path (overrides the configuration's).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Address of the probe protocol's UDP socket (overrides the configuration's).
        #[arg(long)]
        probe_bind: Option<std::net::SocketAddr>,
    },
    /// Show the daemon's macroflows, rates, clients, estimators and counters, live.
    Monitor {
        /// The daemon's socket (default: $ADAPTNET_DAEMON_SOCKET or /run/adaptnet/daemon.sock).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Refresh period, milliseconds.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
        /// Snapshots to print, then exit (0: until interrupted).
        #[arg(long, default_value_t = 0)]
        count: u64,
        /// Subscribe to this interface's bandwidth estimates (repeatable).
        #[arg(long = "iface")]
        ifaces: Vec<String>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Run a benchmark (`adaptnet bench list` shows them; default `sim`: the simulator on
    /// 10 NewReno flows, 10 Mbit/s, 50 ms RTT, 300 s).
    Bench {
        /// Benchmark name, or `list`.
        #[arg(default_value = "sim")]
        name: String,
        /// Runs to make (the median is reported).
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Another scenario for the `sim` benchmark instead of the reference.
        #[arg(long)]
        scenario: Option<PathBuf>,
        /// `table2-netns`: how long either end waits for a silent peer, seconds (default:
        /// the transports' own, 8 s).
        #[arg(long)]
        peer_timeout_s: Option<f64>,
        /// `table2-netns`: only these links (`10mbit`, `1mbit`, `stepped`), transports
        /// (`ATP`, `NAI-TCP`, `NAI-MTCP1` …) and workloads, comma-separated; a category none
        /// of them names runs whole.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    log::init();
    let result = match cli.command {
        Command::Demo { seed, out } => commands::sim::demo(seed, &out),
        Command::Serve {
            listen,
            time,
            json,
            max_connections,
            idle_timeout_s,
            peer_timeout_s,
        } => seconds(time).and_then(|d| {
            let idle_timeout = seconds(Some(idle_timeout_s))
                .map_err(|_| anyhow::anyhow!("--idle-timeout-s must be in (0, 86400]"))?
                .unwrap_or_default();
            let peer_timeout = seconds(peer_timeout_s)
                .map_err(|_| anyhow::anyhow!("--peer-timeout-s must be in (0, 86400]"))?;
            commands::serve::serve(&commands::serve::ServeArgs {
                listen,
                duration: d,
                json,
                max_connections,
                idle_timeout,
                peer_timeout,
            })
        }),
        Command::Bulk {
            to,
            transport,
            parallel,
            cm,
            time,
            json,
            congestion,
        } => seconds(Some(time)).and_then(|d| {
            commands::bulk::bulk(&commands::bulk::BulkArgs {
                to,
                transport,
                flows: parallel,
                cm,
                duration: d.unwrap_or_default(),
                json,
                congestion,
            })
        }),
        Command::Send {
            to,
            workload,
            transport,
            time,
            seed,
            json,
            out,
            experiments,
            congestion,
            peer_timeout_s,
            priorities,
            lend_at_percent,
        } => seconds(Some(time)).and_then(|d| {
            let experiments = commands::experiments_dir(experiments.as_deref());
            let peer_timeout = seconds(peer_timeout_s)
                .map_err(|_| anyhow::anyhow!("--peer-timeout-s must be in (0, 86400]"))?;
            commands::real::send(&commands::real::SendArgs {
                to: &to,
                peer_timeout,
                priorities,
                lend_at_percent,
                congestion: congestion.as_deref(),
                workload: &workload,
                transport,
                duration: d.unwrap_or_default(),
                seed,
                json,
                out: &out,
                experiments: &experiments,
            })
        }),
        Command::Sim {
            scenario,
            seed,
            out,
        } => commands::sim::run_file(&scenario, seed, out.as_deref()),
        Command::Validate { experiments, seed } => {
            commands::validate::run(experiments.as_deref(), seed)
        }
        Command::Exp {
            name,
            seeds,
            quick,
            out,
            experiments,
        } => commands::exp::run(&name, seeds, quick, out.as_deref(), experiments.as_deref()),
        Command::Events {
            interface,
            subscribe,
            period_ms,
            time,
            json,
        } => seconds(time).and_then(|d| {
            commands::events::run(interface, subscribe.as_deref(), period_ms, d, json)
        }),
        Command::Link {
            action,
            args,
            command,
        } => match action {
            Some(a) => commands::link::action(&a),
            None => commands::link::shell(&args, &command),
        },
        Command::Bench {
            name,
            repeat,
            scenario,
            peer_timeout_s,
            only,
        } => {
            let table2 = commands::table2_netns_bench::Selection {
                peer_timeout_s,
                only,
            };
            commands::bench::run(&name, repeat, scenario.as_deref(), table2)
        }
        Command::Daemon {
            config,
            socket,
            probe_bind,
        } => commands::daemon::run(&commands::daemon::DaemonArgs {
            config: config.as_deref(),
            socket,
            probe_bind,
        }),
        Command::Monitor {
            socket,
            interval_ms,
            count,
            ifaces,
            json,
        } => commands::monitor::run(&commands::monitor::MonitorArgs {
            socket,
            interval: std::time::Duration::from_millis(interval_ms),
            count,
            ifaces,
            json,
        }),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", render_error(&e));
            ExitCode::FAILURE
        }
    }
}

/// An error and its causes on one line. Our library errors already name their cause in their
/// message (`trace X, line 2: …`), so a cause whose text is already shown is not repeated.
fn render_error(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// A `-t` value in seconds as a duration: finite, positive, at most a day.
fn seconds(s: Option<f64>) -> anyhow::Result<Option<std::time::Duration>> {
    match s {
        None => Ok(None),
        Some(s) if s.is_finite() && s > 0.0 && s <= 86_400.0 => {
            Ok(Some(std::time::Duration::from_secs_f64(s)))
        }
        Some(s) => anyhow::bail!("-t/--time must be a number of seconds in (0, 86400], got {s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::render_error;

    /// Regression: a trace error printed its message twice (`trace X, line 2: … : trace X,
    /// line 2: …`).
    #[test]
    fn error_causes_already_in_the_message_are_not_repeated() {
        let text = "name = \"t\"\nduration_s = 1\n[topology]\nkind = \"dumbbell\"\npairs = 1\n\
                    [topology.bottleneck]\ntrace = { format = \"piecewise\", path = \"bad.trace\" }\n";
        let dir = std::env::temp_dir().join(format!("adaptnet-cli-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        std::fs::write(dir.join("bad.trace"), "0 100\nnot-a-number\n").expect("write trace");
        std::fs::write(dir.join("s.toml"), text).expect("write scenario");
        let err = adaptnet_sim::scenario::Scenario::load(&dir.join("s.toml"))
            .map(|_| ())
            .map_err(anyhow::Error::from)
            .expect_err("the trace is malformed");
        let shown = render_error(&err);
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(shown.matches("line 2").count(), 1, "{shown}");
        assert!(shown.contains("bad.trace"), "{shown}");
    }

    #[test]
    fn causes_not_in_the_message_are_appended() {
        let err = anyhow::Error::msg("inner").context("outer");
        assert_eq!(render_error(&err), "outer: inner");
    }
}
