//! ADTCP (papers/004) on the stream transport over the emulated link, beside core's NewReno
//! on an identical link: through a scheduled outage (the connection must survive and resume
//! soon after the link returns) and through random channel loss (ADTCP tells it from
//! congestion, so its goodput must not collapse as NewReno's does).

use adaptnet_runtime::stream::StreamOptions;
use std::time::Duration;

mod common;
use common::flows::{Samples, fmt_rates, streams};

/// The link's rate, delay and queue in both directions: 10 Mbit/s, 20 ms each way, a
/// bandwidth-delay product of queue (10 Mbit/s × 40 ms = 34 packets, rounded up).
const BASE: &str = "bandwidth_mbps = 10\ndelay_ms = 20\nqueue_packets = 40";

/// What one run measured: the samples and the link's drop counts.
struct Run {
    samples: Samples,
    dropped_random: u64,
    dropped_outage: u64,
}

/// One stream, far side → emulated side, for `seconds` of link time over `down`/`up`.
fn run(test: &str, what: &str, down: &str, up: &str, adtcp: bool, seconds: f64) -> Option<Run> {
    let link = common::up(test, common::table(down, up), common::named(what))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (tx, rx) = if adtcp {
        (
            StreamOptions::client().with_adtcp(),
            StreamOptions::server().with_adtcp(),
        )
    } else {
        (StreamOptions::client(), StreamOptions::server())
    };
    let until = link.started_at() + Duration::from_secs_f64(seconds + 0.5);
    let counts = rt.block_on(streams(&link, 1, tx, rx, 7200, until));
    let samples = Samples::take(
        &[&counts[0]],
        link.started_at(),
        Duration::from_millis(50),
        seconds,
        |_| {},
    );
    let report = link.shutdown().expect("report");
    rt.shutdown_timeout(Duration::from_secs(1));
    Some(Run {
        samples,
        dropped_random: report.downlink.link.dropped_random,
        dropped_outage: report.downlink.link.dropped_outage + report.uplink.link.dropped_outage,
    })
}

/// The outage: link time 4 s to 6 s, both directions.
const OUTAGE: (f64, f64) = (4.0, 6.0);
/// Link seconds of the outage run.
const OUTAGE_RUN_S: f64 = 10.0;

/// Seconds from the end of the outage to the receiver's first new byte, and the goodput
/// (Mbit/s) from the end of the outage to the end of the run.
fn after_outage(s: &Samples) -> (Option<f64>, f64) {
    let at_end =
        s.t.iter()
            .position(|&t| t >= OUTAGE.1)
            .map_or(0, |k| s.bytes[0][k]);
    let resumed =
        s.t.iter()
            .zip(&s.bytes[0])
            .find(|(t, b)| **t >= OUTAGE.1 && **b > at_end)
            .map(|(t, _)| t - OUTAGE.1);
    (resumed, s.rate_bps(0, OUTAGE.1, OUTAGE_RUN_S) / 1e6)
}

/// The outage link: [`BASE`] with the outage in both directions.
fn with_outage() -> String {
    format!(
        "{BASE}\noutages = [{{ at_s = {}, duration_s = {} }}]",
        OUTAGE.0,
        OUTAGE.1 - OUTAGE.0
    )
}

/// One outage run of `what`: (goodput before, seconds to resume, goodput after), printed.
fn outage_run(test: &str, what: &str, adtcp: bool) -> Option<(f64, Option<f64>, f64)> {
    let link = with_outage();
    let r = run(
        test,
        &format!("out-{what}"),
        &link,
        &link,
        adtcp,
        OUTAGE_RUN_S,
    )?;
    let (resumed, after) = after_outage(&r.samples);
    let before = r.samples.rate_bps(0, 1.0, OUTAGE.0) / 1e6;
    eprintln!(
        "outage {:.0}-{:.0} s on 10 Mbit/s, 20 ms: {what}: {before:.2} Mbit/s before (1-{:.0} s), \
         first byte {} after the link returned, {after:.2} Mbit/s after; {} packets lost to the \
         outage; per second: {}",
        OUTAGE.0,
        OUTAGE.1,
        OUTAGE.0,
        resumed.map_or("never".to_string(), |r| format!("{r:.2} s")),
        r.dropped_outage,
        fmt_rates(&r.samples.per_second_mbps(0))
    );
    Some((before, resumed, after))
}

/// How soon after the link returns an ADTCP stream must be moving again: it probes the
/// disconnected path (papers/004 Figure 5) instead of waiting out a backed-off timeout.
const RESUME_BOUND_S: f64 = 1.5;

#[test]
fn adtcp_survives_an_outage_and_resumes_within_1_5_s() {
    let _slot = common::serial();
    let Some((before, resumed, after)) = outage_run("ADTCP outage", "adtcp", true) else {
        return;
    };
    assert!(before > 0.1, "ADTCP before the outage: {before:.2} Mbit/s");
    let resumed = resumed.unwrap_or_else(|| panic!("ADTCP never resumed after the outage"));
    assert!(
        resumed <= RESUME_BOUND_S,
        "ADTCP resumed {resumed:.2} s after the link returned (bound {RESUME_BOUND_S} s)"
    );
    assert!(after > 0.0, "ADTCP delivered nothing after the outage");
}

#[test]
#[ignore = "fails today: after the 2-s outage ADTCP runs at 1.04, 0.48, 0.52 Mbit/s for the \
            remaining 4 s (three runs) where NewReno on the same link gets 8.25, 8.56, 8.14; \
            3.10 against 8.15 with periodic probing at the frozen RTO; 2.69, 3.11, 2.65 \
            against 8.39, 8.50, 8.25 after ATP's new control landed (EXPERIMENTS.md, the \
            link emulator)"]
fn adtcp_regains_its_rate_after_an_outage_like_newreno() {
    let _slot = common::serial();
    let mut after = Vec::new();
    for (what, adtcp) in [("adtcp", true), ("newreno", false)] {
        let Some(r) = outage_run("ADTCP outage rate", what, adtcp) else {
            return;
        };
        after.push(r.2);
    }
    assert!(
        after[0] >= 0.5 * after[1],
        "after the outage ADTCP got {:.2} Mbit/s, NewReno {:.2}",
        after[0],
        after[1]
    );
}

/// Random loss on the data direction.
const LOSS: f64 = 0.02;
/// Link seconds of each loss run; goodput is counted from 2 s.
const LOSS_RUN_S: f64 = 12.0;

/// ADTCP's goodput under [`LOSS`] must be at least this many times NewReno's on an
/// identical link (NewReno halves its window at every random loss; ADTCP, telling channel
/// error from congestion, retransmits without halving).
const LOSS_RATIO_BOUND: f64 = 1.3;

#[test]
#[ignore = "intermittent and long for CI: ADTCP / NewReno goodput 2.43, 1.84, 1.41, 1.84, \
            1.13 in five runs (ADTCP 2.6-4.1 Mbit/s, NewReno 1.7-2.4), 1.77 in one since, \
            1.50, 1.76, 1.86 in three more (one failure in nine); in the low runs ADTCP sits \
            at ~0.5 Mbit/s for seconds; two 12-s link runs take 25 s (EXPERIMENTS.md, the \
            link emulator)"]
fn adtcp_goodput_under_random_loss_does_not_collapse_like_newreno() {
    let _slot = common::serial();
    let lossy = format!("{BASE}\nloss = {{ bernoulli = {LOSS} }}");
    let mut got = Vec::new();
    for (what, adtcp) in [("adtcp", true), ("newreno", false)] {
        let Some(r) = run(
            "ADTCP loss",
            &format!("loss-{what}"),
            &lossy,
            BASE,
            adtcp,
            LOSS_RUN_S,
        ) else {
            return;
        };
        let goodput = r.samples.rate_bps(0, 2.0, LOSS_RUN_S) / 1e6;
        eprintln!(
            "{:.0} % Bernoulli loss on 10 Mbit/s, 20 ms: {what} {goodput:.2} Mbit/s (2-{LOSS_RUN_S:.0} s), \
             {} random drops; per second: {}",
            LOSS * 100.0,
            r.dropped_random,
            fmt_rates(&r.samples.per_second_mbps(0))
        );
        got.push(goodput);
    }
    let (adtcp, newreno) = (got[0], got[1]);
    eprintln!("ADTCP / NewReno goodput: {:.2}", adtcp / newreno.max(1e-9));
    assert!(
        adtcp >= LOSS_RATIO_BOUND * newreno,
        "ADTCP {adtcp:.2} Mbit/s is not {LOSS_RATIO_BOUND} × NewReno's {newreno:.2} under {LOSS} random loss"
    );
    assert!(
        adtcp >= 2.5,
        "ADTCP under {LOSS} random loss: {adtcp:.2} Mbit/s of 10"
    );
}
