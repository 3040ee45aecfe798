//! `adaptnet bench link`: how exactly the link emulator keeps time, beside a `tbf` link of the
//! same rate in the same run; `adaptnet bench link-schedule`: the 60-s check that a
//! saturating UDP flow is delivered at a cellular trace's opportunities.
//!
//! For each rate, a paced UDP sender offers 2 % more than the rate in 1500-byte packets for
//! [`SECONDS`] s, once through the emulator (a constant-rate link, no delay, far side → emulated
//! side) and once through a veth pair shaped with `tbf` (burst 16 kB or 4 ms of the rate,
//! whichever is larger). Reported: the rate delivered (at the receiver), the emulator's own
//! lateness (p50/p99/max: how long after the model's time it wrote each packet, and the
//! packets later than 1 ms, and the packets the kernel dropped because the emulator had not
//! read them in time), and for both links the receiver's spacing error — how far each
//! gap between consecutive arrivals is from the nominal `1500 B / rate` (p99) — whose ratio
//! compares the two.
//!
//! Then senders whose bursts the kernel hands over as GSO super-packets, the case the
//! emulator's offloads (`EmulatorOptions::offload`) are for: one kernel TCP connection (far
//! side → emulated side) over the emulator at each of [`TCP_RATES_MBPS`] and over `tbf` at
//! the same rate; and on an unlimited link (the emulator's ceiling) paced 1500-byte UDP,
//! paced UDP in `UDP_SEGMENT` bursts and kernel TCP, each with the devices' offloads off (one
//! `read(2)` and one `write(2)` per packet) and on, beside the same sender over a bare veth
//! pair.

use adaptnet_experiments::report::table::Table;
use adaptnet_linkemu::lateness::LatenessSummary;
use adaptnet_linkemu::measure::{self, FULL_PAYLOAD_BYTES};
use adaptnet_linkemu::{EmulatedLink, EmulatorOptions, LinkReport};
use adaptnet_sim::link::LinkConfig;
use adaptnet_sim::scenario::link_table::LinkPair;
use adaptnet_testbed::netns::NetnsLink;
use anyhow::{Context, Result, anyhow};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::ExitCode;
use std::time::Duration;

/// Seconds each case runs.
const SECONDS: f64 = 3.0;
/// Rates measured, Mbit/s.
const RATES_MBPS: [f64; 6] = [10.0, 100.0, 300.0, 600.0, 1000.0, 2000.0];
/// Offered load over the link's rate.
const OVERLOAD: f64 = 1.02;
/// The lateness bound of "the top rate".
const P99_BOUND_US: f64 = 1000.0;
/// Rates of the kernel-TCP rows, Mbit/s.
const TCP_RATES_MBPS: [f64; 4] = [100.0, 300.0, 1000.0, 2000.0];
/// Share of a link's rate a TCP flow's goodput must reach for "the top rate" (payload 1448 of
/// each 1500-byte packet is 96.5 %).
const TCP_FILL: f64 = 0.9;
/// Offered load of the UDP senders on an unlimited link, bit/s.
const UNLIMITED_OFFER_BPS: f64 = 3e9;
/// The TCP receiver's port.
const TCP_PORT: u16 = 9001;
/// The UDP receiver's port.
const UDP_PORT: u16 = 9000;

/// What one case measured.
struct Case {
    delivered_mbps: f64,
    spacing_p99_us: f64,
    report: Option<LinkReport>,
}

/// p99 of |gap − nominal| over arrivals after the first half second, µs.
fn spacing_p99_us(arrivals: &[Duration], rate_bps: f64) -> f64 {
    let nominal = 1500.0 * 8.0 / rate_bps;
    let mut errs: Vec<f64> = arrivals
        .windows(2)
        .filter(|w| w[0] > Duration::from_millis(500))
        .map(|w| ((w[1] - w[0]).as_secs_f64() - nominal).abs() * 1e6)
        .collect();
    if errs.is_empty() {
        return f64::NAN;
    }
    errs.sort_by(f64::total_cmp);
    errs[(errs.len() * 99 / 100).min(errs.len() - 1)]
}

/// The emulator's lateness of the data direction (far side → emulated side) and the packets
/// it did not read in time.
fn lateness_of(c: &Case) -> (LatenessSummary, u64) {
    c.report.map_or_else(Default::default, |r| {
        (r.downlink.lateness, r.downlink.ingress_dropped)
    })
}

/// "p50/p99/max" of a lateness summary, µs.
fn late_cell(l: &LatenessSummary) -> String {
    format!("{:.0}/{:.0}/{:.0}", l.p50_us, l.p99_us, l.max_us)
}

/// "late / unread of packets".
fn missed_cell(l: &LatenessSummary, unread: u64) -> String {
    format!("{} / {unread} of {}", l.late, l.packets)
}

/// A rate row's first cells: the rate, what the emulator delivered, its lateness, the
/// packets it served late or did not read.
fn emu_cells(mbps: f64, emu: &Case) -> [String; 4] {
    let (l, unread) = lateness_of(emu);
    [
        format!("{mbps:.0}"),
        format!("{:.1}", emu.delivered_mbps),
        late_cell(&l),
        missed_cell(&l, unread),
    ]
}

/// The line saying which measured rate was the top one for `what`.
fn print_top(what: &str, top: Option<f64>, criterion: &str) {
    match top {
        Some(m) => println!(
            "{what}: top rate measured with emulator p99 lateness under {P99_BOUND_US:.0} µs and {criterion}: {m:.0} Mbit/s"
        ),
        None => println!("{what}: no measured rate kept p99 lateness under {P99_BOUND_US:.0} µs"),
    }
}

fn delivered_mbps(arrivals: &[Duration]) -> f64 {
    let n = arrivals
        .iter()
        .filter(|&&t| t > Duration::from_millis(500))
        .count();
    n as f64 * 1500.0 * 8.0 / (SECONDS - 0.5) / 1e6
}

/// What sends across a link.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sender {
    /// Paced 1500-byte UDP, one datagram per send.
    Udp,
    /// Paced 1500-byte UDP, up to 44 datagrams per `UDP_SEGMENT` send.
    UdpGso,
    /// One kernel TCP connection writing as fast as it can.
    Tcp,
}

impl Sender {
    /// The receiver's port.
    fn port(self) -> u16 {
        match self {
            Sender::Tcp => TCP_PORT,
            _ => UDP_PORT,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Sender::Udp => "paced UDP, 1 datagram/send",
            Sender::UdpGso => "paced UDP, UDP_SEGMENT bursts",
            Sender::Tcp => "kernel TCP (cubic)",
        }
    }
}

/// Runs `sender` at `offered_bps` (UDP) from `tx_side` to `to` for [`SECONDS`]: the receiver's
/// arrivals (UDP) and goodput in Mbit/s after the first half second (TCP: payload; UDP: IP
/// packets). `bind_rx` opens the receiving socket on its side, `connect_tx` the sending one.
fn flow(
    sender: Sender,
    offered_bps: f64,
    to: SocketAddr,
    start: std::time::Instant,
    bind_rx: impl FnOnce(Sender) -> Result<Receiver>,
    connect_tx: impl FnOnce(Sender) -> Result<Transmitter>,
) -> Result<(Vec<Duration>, f64)> {
    let run = Duration::from_secs_f64(SECONDS);
    let rx = bind_rx(sender)?;
    let rx_thread = std::thread::spawn(move || match rx {
        Receiver::Udp(s) => {
            let a = measure::arrivals(&s, start, run);
            let mbps = delivered_mbps(&a);
            (a, mbps)
        }
        Receiver::Tcp(l) => (Vec::new(), tcp_goodput_mbps(&l, start, run)),
    });
    let tx = connect_tx(sender)?;
    match tx {
        Transmitter::Udp(s) if sender == Sender::UdpGso => {
            measure::paced_udp_gso(
                &s,
                to,
                offered_bps,
                FULL_PAYLOAD_BYTES,
                measure::MAX_GSO_DATAGRAMS,
                run,
            )?;
        }
        Transmitter::Udp(s) => {
            measure::paced_udp(&s, to, offered_bps, FULL_PAYLOAD_BYTES, run);
        }
        Transmitter::Tcp(s) => tcp_blast(s, start, run),
    }
    rx_thread
        .join()
        .map_err(|_| anyhow!("the receiver panicked"))
}

/// A receiving socket.
enum Receiver {
    Udp(UdpSocket),
    Tcp(TcpListener),
}

/// A sending socket.
enum Transmitter {
    Udp(UdpSocket),
    Tcp(TcpStream),
}

fn bind_receiver(sender: Sender, at: std::net::IpAddr) -> Result<Receiver> {
    Ok(match sender {
        Sender::Tcp => Receiver::Tcp(TcpListener::bind((at, TCP_PORT))?),
        _ => Receiver::Udp(UdpSocket::bind((at, UDP_PORT))?),
    })
}

fn open_transmitter(sender: Sender, to: SocketAddr) -> Result<Transmitter> {
    Ok(match sender {
        Sender::Tcp => {
            let s = TcpStream::connect_timeout(&to, Duration::from_secs(2))?;
            s.set_write_timeout(Some(Duration::from_millis(50)))?;
            Transmitter::Tcp(s)
        }
        _ => Transmitter::Udp(UdpSocket::bind("0.0.0.0:0")?),
    })
}

/// Writes to `s` as fast as it takes until `run` after `start`.
fn tcp_blast(mut s: TcpStream, start: std::time::Instant, run: Duration) {
    let buf = vec![0x5au8; 1 << 16];
    while start.elapsed() < run {
        // A timed-out write (the window is full) just goes round again.
        let _ = s.write(&buf);
    }
}

/// Accepts one connection and reads it until `run` after `start`: payload Mbit/s after the
/// first half second.
fn tcp_goodput_mbps(l: &TcpListener, start: std::time::Instant, run: Duration) -> f64 {
    let Ok((mut s, _)) = l.accept() else {
        return 0.0;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    while start.elapsed() < run {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if start.elapsed() > Duration::from_millis(500) => bytes += n as u64,
            _ => {}
        }
    }
    bytes as f64 * 8.0 / (SECONDS - 0.5) / 1e6
}

fn emulator_case(
    rate_bps: Option<f64>,
    offered_bps: f64,
    sender: Sender,
    offload: bool,
) -> Result<Case> {
    let mut cfg = LinkConfig::constant(rate_bps.unwrap_or(1e12), Duration::ZERO, 1000);
    cfg.queue = adaptnet_sim::link::QueueLimit::Packets(1000);
    let pair = LinkPair {
        uplink: cfg.clone(),
        downlink: cfg,
        seed: 1,
    };
    let opts = EmulatorOptions {
        offload,
        ..EmulatorOptions::default()
    };
    let link = EmulatedLink::up(pair, opts)?;
    let at = std::net::IpAddr::from(link.emulated_addr());
    let to = SocketAddr::new(at, sender.port());
    let (arrivals, mbps) = flow(
        sender,
        offered_bps,
        to,
        link.started_at(),
        |s| link.run_emulated(move || bind_receiver(s, at))?,
        |s| link.run_far(move || open_transmitter(s, to))?,
    )?;
    let report = link.shutdown()?;
    Ok(Case {
        delivered_mbps: mbps,
        spacing_p99_us: spacing_p99_us(&arrivals, rate_bps.unwrap_or(offered_bps)),
        report: Some(report),
    })
}

/// The same flow over a veth pair, shaped with `tbf` at `rate_bps` (or not at all).
fn tbf_case(rate_bps: Option<f64>, offered_bps: f64, sender: Sender) -> Result<Case> {
    let link = NetnsLink::create("lb", 83).context("veth pair for tbf")?;
    if let Some(rate_bps) = rate_bps {
        let burst_bytes = (rate_bps / 8.0 * 0.004).max(16_384.0) as u64;
        adaptnet_testbed::netns::run(&[
            "tc",
            "qdisc",
            "replace",
            "dev",
            &link.host,
            "root",
            "tbf",
            "rate",
            &format!("{}bit", rate_bps as u64),
            "burst",
            &burst_bytes.to_string(),
            "limit",
            "1500000",
        ])?;
    }
    let at: std::net::IpAddr = link.b_ip.parse()?;
    let to = SocketAddr::new(at, sender.port());
    let from = link.outside_addr().ip();
    let (arrivals, mbps) = flow(
        sender,
        offered_bps,
        to,
        std::time::Instant::now(),
        |s| link.inside(move || bind_receiver(s, at))?,
        |s| match s {
            Sender::Tcp => open_transmitter(s, to),
            _ => Ok(Transmitter::Udp(UdpSocket::bind((from, 0))?)),
        },
    )?;
    Ok(Case {
        delivered_mbps: mbps,
        spacing_p99_us: spacing_p99_us(&arrivals, rate_bps.unwrap_or(offered_bps)),
        report: None,
    })
}

/// One rate (Mbit/s) over the emulator and over `tbf`.
type RatePair = (f64, Case, Case);

/// Each of `rates` (Mbit/s) once over the emulator and once over `tbf`, `sender` offering
/// `overload` × the rate; and the top rate at which the emulator's p99 lateness stayed under
/// [`P99_BOUND_US`] with at least `fill` of the rate delivered.
fn sweep(
    sender: Sender,
    rates: &[f64],
    overload: f64,
    fill: f64,
) -> Result<(Vec<RatePair>, Option<f64>)> {
    let mut out = Vec::new();
    let mut top = None;
    for &mbps in rates {
        let rate = mbps * 1e6;
        let emu = emulator_case(Some(rate), rate * overload, sender, true)?;
        let tbf = tbf_case(Some(rate), rate * overload, sender)?;
        if lateness_of(&emu).0.p99_us < P99_BOUND_US && emu.delivered_mbps >= fill * mbps {
            top = Some(mbps);
        }
        eprintln!("bench link: {}, {mbps} Mbit/s done", sender.label());
        out.push((mbps, emu, tbf));
    }
    Ok((out, top))
}

/// `adaptnet bench link`.
pub fn run() -> Result<ExitCode> {
    adaptnet_linkemu::netns::check_prerequisites()?;
    let mut t = Table::text([
        "rate Mbit/s",
        "emu delivered",
        "emu late p50/p99/max µs",
        "emu > 1 ms / unread",
        "emu spacing p99 µs",
        "tbf delivered",
        "tbf spacing p99 µs",
        "spacing emu/tbf",
    ]);
    let (cases, top) = sweep(Sender::Udp, &RATES_MBPS, OVERLOAD, 0.95)?;
    let mut json = Vec::new();
    for (mbps, emu, tbf) in &cases {
        let (l, unread) = lateness_of(emu);
        t.row(emu_cells(*mbps, emu).into_iter().chain([
            format!("{:.1}", emu.spacing_p99_us),
            format!("{:.1}", tbf.delivered_mbps),
            format!("{:.1}", tbf.spacing_p99_us),
            format!("{:.2}", emu.spacing_p99_us / tbf.spacing_p99_us),
        ]));
        json.push(serde_json::json!({
            "rate_mbps": mbps, "emulator_delivered_mbps": emu.delivered_mbps,
            "emulator_lateness": l, "emulator_unread": unread,
            "emulator_spacing_p99_us": emu.spacing_p99_us,
            "tbf_delivered_mbps": tbf.delivered_mbps, "tbf_spacing_p99_us": tbf.spacing_p99_us,
        }));
    }
    print!("{}", t.render());
    print_top("paced UDP", top, "≥ 95 % delivered");

    // Kernel TCP, whose bursts reach the emulator as GSO super-packets.
    let mut t = Table::text([
        "TCP, rate Mbit/s",
        "emu goodput",
        "emu late p50/p99/max µs",
        "emu > 1 ms / unread",
        "tbf goodput",
    ]);
    let (cases, tcp_top) = sweep(Sender::Tcp, &TCP_RATES_MBPS, 1.0, TCP_FILL)?;
    let mut tcp_json = Vec::new();
    for (mbps, emu, tbf) in &cases {
        let (l, unread) = lateness_of(emu);
        t.row(
            emu_cells(*mbps, emu)
                .into_iter()
                .chain([format!("{:.1}", tbf.delivered_mbps)]),
        );
        tcp_json.push(serde_json::json!({
            "rate_mbps": mbps, "emulator_goodput_mbps": emu.delivered_mbps,
            "emulator_lateness": l, "emulator_unread": unread,
            "tbf_goodput_mbps": tbf.delivered_mbps,
        }));
    }
    print!("{}", t.render());
    print_top(
        "kernel TCP",
        tcp_top,
        &format!("goodput ≥ {:.0} % of it", TCP_FILL * 100.0),
    );

    // The ceiling: an unlimited link, offloads off and on, beside a bare veth pair.
    let mut t = Table::text([
        "unlimited link, sender",
        "veth delivered",
        "emu offloads off: delivered",
        "late p50/p99/max µs",
        "> 1 ms / unread",
        "emu offloads on: delivered",
        "late p50/p99/max µs",
        "> 1 ms / unread",
    ]);
    let mut unlimited_json = Vec::new();
    for sender in [Sender::Udp, Sender::UdpGso, Sender::Tcp] {
        let veth = tbf_case(None, UNLIMITED_OFFER_BPS, sender)?;
        let off = emulator_case(None, UNLIMITED_OFFER_BPS, sender, false)?;
        let on = emulator_case(None, UNLIMITED_OFFER_BPS, sender, true)?;
        let (lo, uo) = lateness_of(&off);
        let (ln, un) = lateness_of(&on);
        t.row([
            sender.label().to_string(),
            format!("{:.0}", veth.delivered_mbps),
            format!("{:.0}", off.delivered_mbps),
            late_cell(&lo),
            missed_cell(&lo, uo),
            format!("{:.0}", on.delivered_mbps),
            late_cell(&ln),
            missed_cell(&ln, un),
        ]);
        unlimited_json.push(serde_json::json!({
            "sender": sender.label(), "veth_mbps": veth.delivered_mbps,
            "offloads_off_mbps": off.delivered_mbps, "offloads_off_lateness": lo,
            "offloads_off_unread": uo,
            "offloads_on_mbps": on.delivered_mbps, "offloads_on_lateness": ln,
            "offloads_on_unread": un,
            "offloads_on_active": on.report.is_some_and(|r| r.offload),
        }));
        eprintln!("bench link: unlimited, {} done", sender.label());
    }
    println!(
        "unlimited link (UDP offered {:.0} Gbit/s; TCP: payload goodput; UDP: IP packets):",
        UNLIMITED_OFFER_BPS / 1e9
    );
    print!("{}", t.render());
    println!(
        "{}",
        serde_json::json!({ "rates": json, "tcp_rates": tcp_json, "unlimited": unlimited_json })
    );
    Ok(ExitCode::SUCCESS)
}

/// `adaptnet bench link-schedule [--scenario TRACE]`: a saturating UDP flow for 60 s over a
/// Mahimahi trace (default `../shared/traces/mahimahi/Verizon-LTE-short.down`, or
/// `$ADAPTNET_TRACES/mahimahi/…`), received packets against the trace's opportunities.
pub fn schedule(trace: Option<&std::path::Path>) -> Result<ExitCode> {
    adaptnet_linkemu::netns::check_prerequisites()?;
    let path = match trace {
        Some(p) => p.to_path_buf(),
        None => std::env::var_os("ADAPTNET_TRACES")
            .map_or_else(|| std::path::PathBuf::from("../shared/traces"), Into::into)
            .join("mahimahi/Verizon-LTE-short.down"),
    };
    let table = format!(
        "[downlink]\ntrace = {{ format = \"mahimahi\", path = {:?} }}\ndelay_ms = 20\n\
         queue_packets = 200\n[uplink]\nbandwidth_mbps = 100\ndelay_ms = 20\n",
        path.display().to_string()
    );
    let pair = LinkPair::parse(&table, "bench link-schedule", std::path::Path::new("."))?;
    let downlink = pair.downlink.clone();
    let link = EmulatedLink::up(pair, EmulatorOptions::default())?;
    let to = SocketAddr::new(link.emulated_addr().into(), 9000);
    let rx = link.run_emulated(move || UdpSocket::bind(to))??;
    let tx = link.run_far(|| UdpSocket::bind("0.0.0.0:0"))??;
    let run = Duration::from_secs(61);
    let sender =
        std::thread::spawn(move || measure::paced_udp(&tx, to, 60e6, FULL_PAYLOAD_BYTES, run));
    let arrivals = measure::arrivals(&rx, link.started_at(), run);
    sender.join().map_err(|_| anyhow!("the sender panicked"))?;
    let report = link.shutdown()?;
    let m = measure::schedule_match(&downlink, 1500, &arrivals, Duration::from_secs(1), run);
    let worst = m
        .per_second
        .iter()
        .map(|&(_, got, exp)| (got as f64 - exp).abs())
        .fold(0.0, f64::max);
    println!(
        "{}: saturating UDP, {:.0}-{:.0} s: received {} packets, the trace has {:.0} \
         opportunities ({:+.3} %); worst second off by {worst:.0} packets; emulator lateness \
         p50/p99/max {:.0}/{:.0}/{:.0} µs, {} later than 1 ms",
        path.display(),
        m.from_s,
        m.to_s,
        m.received,
        m.expected,
        m.error * 100.0,
        report.downlink.lateness.p50_us,
        report.downlink.lateness.p99_us,
        report.downlink.lateness.max_us,
        report.downlink.lateness.late
    );
    Ok(ExitCode::SUCCESS)
}
