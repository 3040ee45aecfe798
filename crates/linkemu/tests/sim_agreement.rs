//! The emulated link against the simulator on the same link table: one flow at a time from
//! the far side to the emulated side, goodput over the emulated link beside the simulator's
//! NewReno. Kernel reno must come within 10 %; kernel cubic and the stream transport (core's
//! NewReno over UDP) are reported beside them and checked more loosely (cubic is not the
//! simulator's algorithm; the stream transport's per-datagram overhead is not the
//! simulator's). Kernel bbr is reported beside them when `ADAPTNET_LINKEMU_BBR=1` (not by
//! default, to keep CI's budget), never checked: the simulator has no BBR, and a model-based
//! sender is not expected to match NewReno.

use adaptnet_linkemu::EmulatorOptions;

mod common;

/// Seconds each flow runs: `default` in CI, or `$ADAPTNET_LINKEMU_SECONDS` for longer runs
/// (`EXPERIMENTS.md` has some).
fn seconds(default: f64) -> f64 {
    std::env::var("ADAPTNET_LINKEMU_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s: &f64| s > 0.0 && s <= 600.0)
        .unwrap_or(default)
}

/// 10 Mbit/s, 50 ms each way, a bandwidth-delay product of queue (10 Mbit/s × 100 ms =
/// 125 kB = 84 packets of 1500 bytes).
const CONSTANT: &str = "bandwidth_mbps = 10\ndelay_ms = 50\nqueue_packets = 84";

/// The simulator's TCP configured as Linux's: SACK, timestamps, IW10, MSS 1448 (a 1500-byte
/// packet with the 12-byte timestamp option), and Linux's 200 ms minimum RTO (TCP_RTO_MIN;
/// the simulator's default is RFC 6298's 1 s).
const LINUX_LIKE: &str =
    "sack = true\ntimestamps = true\ninitial_window = \"iw10\"\nmss = 1448\nrto_min_ms = 200";

fn compare(test: &str, downlink: &str, uplink: &str, seconds: f64) {
    let _slot = common::serial();
    let sim = common::sim_goodput_bps(downlink, uplink, seconds, LINUX_LIKE);
    let sim_stream = common::sim_goodput_bps(downlink, uplink, seconds, common::STREAM_SIM_KEYS);
    let mut rows = Vec::new();
    for (what, run) in [("reno", 0), ("cubic", 1), ("stream", 2), ("bbr", 3)] {
        if run == 3 && std::env::var("ADAPTNET_LINKEMU_BBR").as_deref() != Ok("1") {
            eprintln!("{test}: bbr not run (set ADAPTNET_LINKEMU_BBR=1 to report it)");
            continue;
        }
        if run == 3 && !common::kernel_has("bbr") {
            eprintln!("{test}: *** this kernel has no bbr: not compared ***");
            continue;
        }
        let table = common::table(downlink, uplink);
        let Some(link) = common::up(test, table, EmulatorOptions::default()) else {
            return;
        };
        let got = match run {
            0 => common::kernel_tcp_goodput_bps(&link, "reno", seconds),
            1 => common::kernel_tcp_goodput_bps(&link, "cubic", seconds),
            2 => common::stream_goodput_bps(&link, seconds),
            _ => common::kernel_tcp_goodput_bps(&link, "bbr", seconds),
        };
        let report = link.shutdown().expect("report");
        let reference = if run == 2 { sim_stream } else { sim };
        eprintln!(
            "{test}: {what} {:.2} Mbit/s over the emulated link, simulator NewReno {:.2} Mbit/s \
             (ratio {:.3}); emulator lateness p99 {:.0} µs, {} late",
            got / 1e6,
            reference / 1e6,
            got / reference,
            report.downlink.lateness.p99_us,
            report.downlink.lateness.late
        );
        rows.push((what, got / reference));
    }
    for (what, ratio) in rows {
        let tolerance = match what {
            "reno" => 0.10,
            "bbr" => continue,
            _ => 0.25,
        };
        assert!(
            (ratio - 1.0).abs() <= tolerance,
            "{test}: {what} goodput is {ratio:.3} × the simulator's (allowed ±{tolerance})"
        );
    }
}

#[test]
fn tcp_over_a_constant_10_mbit_50_ms_bdp_link_matches_the_simulator() {
    compare("constant 10 Mbit/s", CONSTANT, CONSTANT, seconds(8.0));
}

#[test]
fn tcp_over_the_verizon_lte_trace_matches_the_simulator() {
    let dir = common::traces_dir().join("mahimahi");
    if !dir.join("Verizon-LTE-short.down").is_file() {
        common::skip("Verizon LTE", &format!("no traces in {}", dir.display()));
        return;
    }
    let down = "trace = { format = \"mahimahi\", path = \"mahimahi/Verizon-LTE-short.down\" }\n\
                delay_ms = 20\nqueue_packets = 100";
    let up = "trace = { format = \"mahimahi\", path = \"mahimahi/Verizon-LTE-short.up\" }\n\
              delay_ms = 20\nqueue_packets = 100";
    // 15 s: the trace's first seconds (12 Mbit/s, then a fall) decide a shorter run — the
    // simulator's NewReno takes an RTO there that Linux's RACK/TLP avoids (8 s: ratio 1.08-1.09,
    // 30 s: 1.035).
    compare("Verizon LTE", down, up, seconds(15.0));
}
