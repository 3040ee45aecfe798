//! Environment events inside a network namespace (papers/001; issue 10 item 6): the monitor
//! runs on a thread that entered the namespace, so its rtnetlink socket follows that
//! namespace's links; `ip` brings the veth down and up from outside, and each change must be
//! an availability event within one second. The poll period is a minute, so only the pushed
//! kernel messages can deliver in time. Needs root and iproute2 (skips loudly otherwise).
//! A module of the `netns` test binary (one link of the runtime for all namespace tests).

use crate::common::{Link, sh};
use adaptnet_core::env::{Delivery, LevelMask, Param};
use adaptnet_runtime::env::linux::{AVAILABLE, UNAVAILABLE};
use adaptnet_runtime::env::{EnvMonitor, EnvOptions, MonitorStats};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What the namespace thread tells the test.
enum Report {
    /// The monitor runs and has the link's initial state.
    Ready(MonitorStats),
    /// An availability event.
    Event(Delivery),
    /// The monitor could not start or see the link.
    Failed(String),
}

/// Runs the monitor for `peer` until `stop` fires; reports on `tx`.
fn monitor_inside(
    peer: String,
    tx: mpsc::Sender<Report>,
    stop: tokio::sync::oneshot::Receiver<()>,
) -> Option<MonitorStats> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async move {
        let fail = |m: String| {
            let _ = tx.send(Report::Failed(m));
            None
        };
        let config = EnvOptions {
            interfaces: vec![peer.clone()],
            period: Duration::from_secs(60),
            ..EnvOptions::default()
        };
        let monitor = match EnvMonitor::start(config) {
            Ok(m) => m,
            Err(e) => return fail(format!("start: {e}")),
        };
        let available = || {
            monitor
                .get_dev_params(&peer)
                .ok()
                .and_then(|r| r.into_iter().find(|r| r.param == Param::Availability))
                .map(|r| r.raw)
        };
        let end = Instant::now() + Duration::from_secs(2);
        while available() != Some(AVAILABLE) {
            if Instant::now() > end {
                return fail(format!("initial state not seen: {:?}", available()));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut events = match monitor.subscribe(&peer, Param::Availability, LevelMask::ALL) {
            Ok(s) => s,
            Err(e) => return fail(format!("subscribe: {e}")),
        };
        let _ = tx.send(Report::Ready(monitor.stats()));
        tokio::pin!(stop);
        loop {
            tokio::select! {
                d = events.recv() => match d {
                    Some(d) => { let _ = tx.send(Report::Event(d)); }
                    None => break,
                },
                _ = &mut stop => break,
            }
        }
        Some(monitor.stats())
    })
}

/// The next event within one second, checked against `value` and the levels it must violate
/// and clear; returns how long it took from `t0`.
fn expect_event(
    rx: &mpsc::Receiver<Report>,
    t0: Instant,
    what: &str,
    value: f64,
    violated: &[u16],
    cleared: &[u16],
) -> Duration {
    match rx.recv_timeout(Duration::from_secs(1)) {
        Ok(Report::Event(d)) => {
            let took = t0.elapsed();
            assert_eq!(d.event.value, value, "{what}: {d:?}");
            assert_eq!(d.event.violated, LevelMask::of(violated), "{what}: {d:?}");
            assert_eq!(d.event.cleared, LevelMask::of(cleared), "{what}: {d:?}");
            assert_eq!(d.lost_before, 0, "{what}");
            eprintln!("{what}: availability event after {took:?}");
            took
        }
        Ok(Report::Failed(m)) => panic!("{what}: monitor failed: {m}"),
        Ok(Report::Ready(_)) => panic!("{what}: unexpected second ready"),
        Err(e) => panic!("{what}: no availability event within 1 s ({e})"),
    }
}

#[test]
fn test_veth_in_namespace_down_and_up_are_pushed_availability_events_within_1s() {
    let Some(link) = Link::new("ev", 82) else {
        return;
    };
    let (tx, rx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
    let peer = link.peer.clone();
    let thread = link
        .spawn_inside(move || monitor_inside(peer, tx, stop_rx))
        .expect("a thread inside the namespace");
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Report::Ready(stats)) => assert!(
            stats.availability_pushed,
            "the rtnetlink listener is not running: {stats:?}"
        ),
        Ok(Report::Failed(m)) => panic!("monitor: {m}"),
        Ok(Report::Event(d)) => panic!("event before the test began: {d:?}"),
        Err(e) => panic!("monitor not ready within 5 s: {e}"),
    }

    // The namespace's end, administratively (operstate down), from outside with `ip -n`.
    let t0 = Instant::now();
    assert!(sh(&[
        "ip", "-n", &link.ns, "link", "set", &link.peer, "down"
    ]));
    // The first crossing: no level was violated before (the initial value is a baseline).
    expect_event(&rx, t0, "peer down", UNAVAILABLE, &[0], &[]);
    let t0 = Instant::now();
    assert!(sh(&["ip", "-n", &link.ns, "link", "set", &link.peer, "up"]));
    expect_event(&rx, t0, "peer up", AVAILABLE, &[1], &[0]);

    // The root namespace's end: the peer loses its carrier (operstate lowerlayerdown).
    let t0 = Instant::now();
    assert!(sh(&["ip", "link", "set", &link.host, "down"]));
    expect_event(
        &rx,
        t0,
        "host end down (carrier lost)",
        UNAVAILABLE,
        &[0],
        &[1],
    );
    let t0 = Instant::now();
    assert!(sh(&["ip", "link", "set", &link.host, "up"]));
    expect_event(&rx, t0, "host end up (carrier back)", AVAILABLE, &[1], &[0]);

    let _ = stop_tx.send(());
    let stats = thread
        .join()
        .expect("namespace thread")
        .expect("monitor stats");
    assert!(stats.link_messages >= 4, "{stats:?}");
    assert_eq!(stats.link_malformed, 0, "{stats:?}");
    assert!(
        stats.polls <= 1,
        "a poll ran ({stats:?}): the events could have been polled, not pushed"
    );
}
