//! `adaptnet bench`: speed and scale benchmarks.

use adaptnet_experiments::bench::{self, BenchOptions};
use adaptnet_experiments::report::table::Table;
use anyhow::{Result, bail};
use std::path::Path;
use std::process::ExitCode;

/// Runs benchmark `name` (or lists them for `list`).
pub fn run(
    name: &str,
    repeat: u32,
    scenario: Option<&Path>,
    table2: super::table2_netns_bench::Selection,
) -> Result<ExitCode> {
    if name == "loopback" {
        // Real sockets: lives here, beside the runtime, not with the simulator benchmarks.
        let _ = repeat; // one pass: each transport moves 256 MB
        return super::loopback_bench::run(256);
    }
    if name == "env-netns" {
        // A real namespace link (root, iproute2); `repeat` rounds of the four cases.
        return super::env_netns_bench::run(repeat);
    }
    if name == "link" {
        // The link emulator against tbf (root).
        let _ = repeat;
        return super::link_bench::run();
    }
    if name == "link-schedule" {
        // The 60-s saturating-UDP check over a trace (root); --scenario names the trace.
        return super::link_bench::schedule(scenario);
    }
    if name == "urgent" {
        // A real namespace link (root): `--repeat` urgent messages per transport, 20 by
        // default (the flag's own default is 3, for the other benchmarks).
        let trials = if repeat == 3 { 20 } else { repeat };
        return super::urgent_bench::run(trials);
    }
    if name == "table2-netns" {
        // Three namespace links side by side (root), each workload once per transport.
        let _ = repeat;
        return super::table2_netns_bench::run(&super::experiments_dir(None), &table2);
    }
    if name == "daemon-env-netns" {
        // papers/001 Table 2 with the events delivered by the daemon (root).
        return super::daemon_env_bench::run(repeat);
    }
    if name == "daemon" {
        // The host daemon (a child process) against the in-process engines.
        return super::daemon_bench::run(repeat);
    }
    if name == "list" {
        let mut t = Table::text(["benchmark", "measures"]);
        for b in bench::all() {
            t.row([b.name(), b.summary()]);
        }
        t.row([
            "daemon",
            "the host daemon against the in-process engines: request → grant round trip \
             (median, p99), events/s to 10 subscribers, CPU per granted MB; --repeat rounds",
        ]);
        t.row([
            "daemon-env-netns",
            "papers/001 Table 2 through the host daemon: kernel TCP over veth + tbf 10 Mbit/s \
             and unshaped, with no daemon, an idle daemon, 100 events/s through it, and to 10 \
             subscribed clients; --repeat rounds (needs root)",
        ]);
        t.row([
            "env-netns",
            "papers/001 Table 2 on a namespace link: kernel TCP 10,240 × 1,400 bytes over veth + \
             tbf 10 Mbit/s with no monitor, monitor without events, 100 events/s, and 100 \
             events/s to 10 apps + a 10-entry action table; --repeat rounds (needs root)",
        ]);
        t.row([
            "link",
            "adaptnet link's lateness (p50/p99/max, packets later than 1 ms) and delivered rate \
             from 10 Mbit/s to 2 Gbit/s and unlimited, beside tbf at the same rates (receiver \
             spacing error); the top rate with p99 under 1 ms (needs root)",
        ]);
        t.row([
            "link-schedule",
            "a saturating UDP flow for 60 s over the emulated Verizon LTE downlink (or \
             --scenario TRACE): packets received against the trace's opportunities (needs root)",
        ]);
        t.row([
            "table2-netns",
            "papers/000 Table 2's six workloads over namespace links (tbf 10 Mbit/s, 1 Mbit/s, \
             8/2/8/2 Mbit/s stepped every 10 s): ATP against NAI-TCP and NAI-MTCP1-3 (kernel TCP \
             bbr), percent on time beside the simulator's, ATP's estimate after each step, tbf \
             drops (needs root; about 25 min)",
        ]);
        t.row([
            "urgent",
            "a 4 KB high-priority message under a 64 MB transfer on a tbf 10 Mbit/s veth: ATP, \
             NAI-MTCP1 and NAI-TCP (kernel TCP reno and bbr), --repeat messages each (default \
             20): unloaded and loaded median/p95 time to delivery, tbf queueing delay and drops \
             (needs root)",
        ]);
        t.row([
            "loopback",
            "bulk throughput over loopback UDP/TCP: ATP, NAI-TCP, stream, kernel TCP (Gbit/s, CPU s/GB; \
             256 MB each)",
        ]);
        print!("{}", t.render());
        return Ok(ExitCode::SUCCESS);
    }
    let Some(b) = bench::find(name) else {
        let known: Vec<&str> = bench::all().iter().map(|b| b.name()).collect();
        bail!("no benchmark named {name:?}; known: {}", known.join(", "));
    };
    eprintln!("{}", b.summary());
    let report = b.run(&BenchOptions {
        repeat,
        scenario: scenario.map(Path::to_path_buf),
    })?;
    print!("{}", report.render());
    Ok(ExitCode::SUCCESS)
}
