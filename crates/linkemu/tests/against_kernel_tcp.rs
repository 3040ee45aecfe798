//! adaptnet's flows against kernel TCP on one emulated bottleneck: a TPBA media flow
//! (papers/002) beside a cubic and a bbr connection over a link whose rate steps down, and
//! two CM streams (papers/003) beside a cubic connection. Every flow goes from the far side
//! to the emulated side; each receiver counts what it read.

use adaptnet_core::tpba::{Agreement, FsConfig, TpbaConfig};
use adaptnet_runtime::stream::StreamOptions;
use adaptnet_runtime::tpba::TpbaOptions;
use std::time::Duration;

mod common;
use common::flows::{Samples, fmt_rates, kernel_tcp, streams, tpba};

/// The stepped link for TPBA: 12 Mbit/s for 10 s, then 6 Mbit/s.
const STEPS: [(f64, f64); 2] = [(0.0, 12.0), (10.0, 6.0)];
/// Link seconds of the TPBA run.
const TPBA_RUN_S: f64 = 20.0;

/// TPBA with the paper's controller and periods scaled to a 20-s run (the paper's are
/// `T_running` 10 s, `T_TCP` and `T_rtcp` 1 s, `T_adapt` 3 s): `T_running` 3 s, samples
/// every 250 ms agreeing within 10 % (§7's relative criterion), at most 8 per probing period.
fn tpba_options() -> TpbaOptions {
    TpbaOptions::with_fs(FsConfig {
        tpba: TpbaConfig {
            t_running: Duration::from_secs(3),
            t_tcp: Duration::from_millis(250),
            agreement: Agreement::Relative { z: 0.1 },
            max_probe_samples: Some(8),
            t_rtcp: Duration::from_millis(250),
            t_adapt: Duration::from_secs(1),
            ..TpbaConfig::default()
        },
        ..FsConfig::default()
    })
}

/// TPBA may take at most this many times the mean of the two kernel TCPs' rates in each step.
const TPBA_FRIENDLY_BOUND: f64 = 2.0;

#[test]
fn tpba_stays_tcp_friendly_beside_cubic_and_bbr_on_a_stepped_link() {
    let _slot = common::serial();
    if !common::kernel_has("bbr") {
        common::skip(
            "TPBA vs kernel TCP",
            "this kernel has no bbr congestion control",
        );
        return;
    }
    let table = common::flows::stepped_table(
        "tpba",
        &STEPS,
        "delay_ms = 20\nqueue_packets = 60",
        "bandwidth_mbps = 100\ndelay_ms = 20\nqueue_packets = 100",
    );
    let Some(link) = common::up("TPBA vs kernel TCP", table, common::named("tpba")) else {
        return;
    };
    // §4: the running period's silence must not restart slow start (cwnd_new cannot be set
    // on Linux); the sysctl is per namespace.
    let status = link
        .command_far("sysctl")
        .args(["-qw", "net.ipv4.tcp_slow_start_after_idle=0"])
        .status()
        .expect("sysctl");
    assert!(status.success(), "sysctl in the far namespace");
    let until = link.started_at() + Duration::from_secs_f64(TPBA_RUN_S + 0.5);
    let cubic = kernel_tcp(&link, "cubic", 5201, until);
    let bbr = kernel_tcp(&link, "bbr", 5202, until);
    let (media, sender) = tpba(&link, 5400, tpba_options(), 1000, until);
    let s = Samples::take(
        &[&cubic, &bbr, &media],
        link.started_at(),
        Duration::from_millis(100),
        TPBA_RUN_S,
        |_| {},
    );
    let stats = sender.join().expect("TPBA sender");
    let report = link.shutdown().expect("report");
    let names = ["cubic", "bbr", "tpba"];
    let mut rows = Vec::new();
    for (from, to, rate) in [(2.0, 10.0, STEPS[0].1), (12.0, TPBA_RUN_S, STEPS[1].1)] {
        let r: Vec<f64> = (0..3).map(|i| s.rate_bps(i, from, to) / 1e6).collect();
        let tcp_mean = (r[0] + r[1]) / 2.0;
        eprintln!(
            "{rate} Mbit/s link, {from}-{to} s: cubic {:.2}, bbr {:.2}, TPBA {:.2} Mbit/s \
             (sum {:.2}); TPBA / mean TCP {:.2}",
            r[0],
            r[1],
            r[2],
            r.iter().sum::<f64>(),
            r[2] / tcp_mean
        );
        rows.push((rate, r, tcp_mean));
    }
    for (i, n) in names.iter().enumerate() {
        eprintln!("  {n} per second: {}", fmt_rates(&s.per_second_mbps(i)));
    }
    eprintln!(
        "  TPBA sender: probed {:?} kbit/s, {} switches to running, {} to probing, {} decreases; \
         link: {} queue drops, lateness p99 {:.0} µs",
        stats
            .probed_rates_bytes_per_s
            .iter()
            .map(|r| (r * 8e-3).round())
            .collect::<Vec<_>>(),
        stats.switches_to_running,
        stats.switches_to_probing,
        stats.decreases,
        report.downlink.link.dropped_queue,
        report.downlink.lateness.p99_us
    );
    for (rate, r, tcp_mean) in &rows {
        assert!(
            r[2] <= TPBA_FRIENDLY_BOUND * tcp_mean,
            "{rate} Mbit/s: TPBA {:.2} Mbit/s > {TPBA_FRIENDLY_BOUND} × the TCPs' mean {tcp_mean:.2}",
            r[2]
        );
        assert!(r[2] > 0.0, "{rate} Mbit/s: TPBA delivered nothing");
        assert!(
            r.iter().sum::<f64>() >= 0.7 * rate,
            "{rate} Mbit/s: the three flows used only {:.2} Mbit/s",
            r.iter().sum::<f64>()
        );
    }
}

/// The CM run's link: 10 Mbit/s, 20 ms each way, 50 packets.
const CM_LINK: &str = "bandwidth_mbps = 10\ndelay_ms = 20\nqueue_packets = 50";
/// Link seconds of the CM run; shares are counted from 3 s.
const CM_RUN_S: f64 = 15.0;

#[test]
fn cm_streams_beside_a_kernel_cubic_flow_report_their_shares() {
    let _slot = common::serial();
    let Some(link) = common::up(
        "CM vs kernel TCP",
        common::table(CM_LINK, CM_LINK),
        common::named("cm"),
    ) else {
        return;
    };
    let until = link.started_at() + Duration::from_secs_f64(CM_RUN_S + 0.5);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let cm = rt.block_on(streams(
        &link,
        2,
        StreamOptions::client().with_cm(),
        StreamOptions::server(),
        7300,
        until,
    ));
    let cubic = kernel_tcp(&link, "cubic", 5203, until);
    let s = Samples::take(
        &[&cm[0], &cm[1], &cubic],
        link.started_at(),
        Duration::from_millis(100),
        CM_RUN_S,
        |_| {},
    );
    let report = link.shutdown().expect("report");
    rt.shutdown_timeout(Duration::from_secs(1));
    let r: Vec<f64> = (0..3).map(|i| s.rate_bps(i, 3.0, CM_RUN_S) / 1e6).collect();
    let sum: f64 = r.iter().sum();
    let jain_cm = (r[0] + r[1]).powi(2) / (2.0 * (r[0] * r[0] + r[1] * r[1])).max(1e-12);
    eprintln!(
        "10 Mbit/s, 20 ms, 50 packets, 3-{CM_RUN_S} s: CM streams {:.2} + {:.2} = {:.2} Mbit/s \
         ({:.0} % of the delivered), kernel cubic {:.2} ({:.0} %); Jain of the two CM streams \
         {jain_cm:.3}; link: {} queue drops, lateness p99 {:.0} µs",
        r[0],
        r[1],
        r[0] + r[1],
        (r[0] + r[1]) / sum * 100.0,
        r[2],
        r[2] / sum * 100.0,
        report.downlink.link.dropped_queue,
        report.downlink.lateness.p99_us
    );
    for (i, n) in ["cm a", "cm b", "cubic"].iter().enumerate() {
        eprintln!("  {n} per second: {}", fmt_rates(&s.per_second_mbps(i)));
    }
    // The CM's macroflow shares one window between its two streams: they split it evenly.
    assert!(jain_cm >= 0.9, "the two CM streams: {r:?}");
    assert!(sum >= 8.0, "the link carried only {sum:.2} Mbit/s: {r:?}");
    assert!(r[0] + r[1] > 0.5, "the CM macroflow starved: {r:?}");
}
