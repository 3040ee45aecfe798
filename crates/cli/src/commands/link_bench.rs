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
//! compares the two. Then the emulator alone on an unlimited link.

use adaptnet_experiments::report::table::Table;
use adaptnet_linkemu::measure::{self, FULL_PAYLOAD_BYTES};
use adaptnet_linkemu::{EmulatedLink, EmulatorOptions, LinkReport};
use adaptnet_sim::link::LinkConfig;
use adaptnet_sim::scenario::link_table::LinkPair;
use adaptnet_testbed::netns::NetnsLink;
use anyhow::{Context, Result, anyhow};
use std::net::{SocketAddr, UdpSocket};
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

fn delivered_mbps(arrivals: &[Duration]) -> f64 {
    let n = arrivals
        .iter()
        .filter(|&&t| t > Duration::from_millis(500))
        .count();
    n as f64 * 1500.0 * 8.0 / (SECONDS - 0.5) / 1e6
}

fn emulator_case(rate_bps: Option<f64>, offered_bps: f64) -> Result<Case> {
    let mut cfg = LinkConfig::constant(rate_bps.unwrap_or(1e12), Duration::ZERO, 1000);
    cfg.queue = adaptnet_sim::link::QueueLimit::Packets(1000);
    let pair = LinkPair {
        uplink: cfg.clone(),
        downlink: cfg,
        seed: 1,
    };
    let link = EmulatedLink::up(pair, EmulatorOptions::default())?;
    let to = SocketAddr::new(link.emulated_addr().into(), 9000);
    let rx = link.run_emulated(move || UdpSocket::bind(to))??;
    let tx = link.run_far(|| UdpSocket::bind("0.0.0.0:0"))??;
    let run = Duration::from_secs_f64(SECONDS);
    let sender = std::thread::spawn(move || {
        measure::paced_udp(&tx, to, offered_bps, FULL_PAYLOAD_BYTES, run)
    });
    let arrivals = measure::arrivals(&rx, link.started_at(), run);
    sender.join().map_err(|_| anyhow!("the sender panicked"))?;
    let report = link.shutdown()?;
    Ok(Case {
        delivered_mbps: delivered_mbps(&arrivals),
        spacing_p99_us: spacing_p99_us(&arrivals, rate_bps.unwrap_or(offered_bps)),
        report: Some(report),
    })
}

fn tbf_case(rate_bps: f64) -> Result<Case> {
    let link = NetnsLink::create("lb", 83).context("veth pair for tbf")?;
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
    let to = SocketAddr::new(link.b_ip.parse()?, 9000);
    let rx = link.inside(move || UdpSocket::bind(to))??;
    let tx = UdpSocket::bind(link.outside_addr())?;
    let run = Duration::from_secs_f64(SECONDS);
    let start = std::time::Instant::now();
    let sender = std::thread::spawn(move || {
        measure::paced_udp(&tx, to, rate_bps * OVERLOAD, FULL_PAYLOAD_BYTES, run)
    });
    let arrivals = measure::arrivals(&rx, start, run);
    sender.join().map_err(|_| anyhow!("the sender panicked"))?;
    Ok(Case {
        delivered_mbps: delivered_mbps(&arrivals),
        spacing_p99_us: spacing_p99_us(&arrivals, rate_bps),
        report: None,
    })
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
    let mut top: Option<f64> = None;
    let mut json = Vec::new();
    for &mbps in &RATES_MBPS {
        let rate = mbps * 1e6;
        let emu = emulator_case(Some(rate), rate * OVERLOAD)?;
        let tbf = tbf_case(rate)?;
        let l = emu.report.map(|r| r.downlink.lateness).unwrap_or_default();
        let unread = emu.report.map_or(0, |r| r.downlink.ingress_dropped);
        if l.p99_us < P99_BOUND_US && emu.delivered_mbps >= 0.95 * mbps {
            top = Some(mbps);
        }
        t.row([
            format!("{mbps:.0}"),
            format!("{:.1}", emu.delivered_mbps),
            format!("{:.0}/{:.0}/{:.0}", l.p50_us, l.p99_us, l.max_us),
            format!("{} / {unread} of {}", l.late, l.packets),
            format!("{:.1}", emu.spacing_p99_us),
            format!("{:.1}", tbf.delivered_mbps),
            format!("{:.1}", tbf.spacing_p99_us),
            format!("{:.2}", emu.spacing_p99_us / tbf.spacing_p99_us),
        ]);
        json.push(serde_json::json!({
            "rate_mbps": mbps, "emulator_delivered_mbps": emu.delivered_mbps,
            "emulator_lateness": l, "emulator_unread": unread,
            "emulator_spacing_p99_us": emu.spacing_p99_us,
            "tbf_delivered_mbps": tbf.delivered_mbps, "tbf_spacing_p99_us": tbf.spacing_p99_us,
        }));
        eprintln!("bench link: {mbps} Mbit/s done");
    }
    print!("{}", t.render());
    let unlimited = emulator_case(None, 3e9)?;
    let l = unlimited
        .report
        .map(|r| r.downlink.lateness)
        .unwrap_or_default();
    println!(
        "unlimited link (offered 3 Gbit/s): delivered {:.0} Mbit/s, lateness p50/p99/max {:.0}/{:.0}/{:.0} µs",
        unlimited.delivered_mbps, l.p50_us, l.p99_us, l.max_us
    );
    match top {
        Some(m) => println!(
            "top rate measured with emulator p99 lateness under {P99_BOUND_US:.0} µs and ≥ 95 % delivered: {m:.0} Mbit/s"
        ),
        None => println!("no measured rate kept p99 lateness under {P99_BOUND_US:.0} µs"),
    }
    println!("{}", serde_json::json!({ "rates": json }));
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
