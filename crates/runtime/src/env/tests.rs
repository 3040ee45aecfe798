//! The monitor end to end: status messages over loopback UDP, the real `lo`, a veth pair.

use super::linux::{AVAILABLE, UNAVAILABLE};
use super::*;
use adaptnet_core::env::{StatusMessage, StatusSigner};
use std::process::Command;

const WAIT: Duration = Duration::from_secs(2);

fn key(b: u8) -> StatusKey {
    StatusKey::new(&[b; 32]).expect("a 32-byte key")
}

fn signal_levels() -> Watermarks {
    Watermarks::new(vec![Level::low(10.0), Level::high(20.0)]).expect("levels")
}

fn report(device: &str, value: f64) -> StatusMessage {
    StatusMessage {
        key_id: 0,
        seq: 0,
        device: Name::new(device).expect("name"),
        param: Param::SignalQuality,
        value,
        violated: LevelMask::EMPTY,
        cleared: LevelMask::EMPTY,
    }
}

fn seal(signer: &mut StatusSigner, msg: &StatusMessage) -> Vec<u8> {
    let mut buf = vec![0u8; msg.buffer_len()];
    let n = signer.seal(msg, &mut buf).expect("seal");
    buf.truncate(n);
    buf
}

/// Polls `f` every 10 ms until it holds or `WAIT` passes.
async fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + WAIT;
    while Instant::now() < end {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f()
}

fn reading(m: &EnvMonitor, dev: &str, p: &Param) -> Option<f64> {
    m.get_dev_params(dev)
        .ok()?
        .into_iter()
        .find(|r| &r.param == p)
        .map(|r| r.raw)
}

#[tokio::test]
async fn test_status_right_key_changes_param_wrong_key_and_replay_rejected() {
    let sender = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("sender socket");
    let peer = sender.local_addr().expect("addr");
    let config = EnvOptions {
        interfaces: vec!["lo".into()],
        status: Some(StatusConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            peers: vec![StatusPeer {
                addr: peer,
                key_id: 7,
                key: key(1),
            }],
        }),
        ..EnvOptions::default()
    };
    let monitor = EnvMonitor::start(config).expect("start");
    let to = monitor.status_addr().expect("status receiver bound");
    monitor
        .set_watermarks("wlan9", Param::SignalQuality, signal_levels())
        .expect("levels");
    monitor
        .set_dev_param("wlan9", Param::SignalQuality, 25.0)
        .expect("baseline");
    let mut events = monitor
        .subscribe("wlan9", Param::SignalQuality, LevelMask::ALL)
        .expect("subscribe");

    // Right key: 25 → 5 violates low level 0.
    let mut good = StatusSigner::new(7, key(1), 1);
    let first = seal(&mut good, &report("wlan9", 5.0));
    sender.send_to(&first, to).await.expect("send");
    let d = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an event within 2 s")
        .expect("monitor running");
    assert_eq!(d.event.device.as_str(), "wlan9");
    assert_eq!(d.event.param, Param::SignalQuality);
    assert_eq!(d.event.value, 5.0);
    assert_eq!(d.event.violated, LevelMask::of(&[0]));
    assert_eq!(d.lost_before, 0);
    assert_eq!(reading(&monitor, "wlan9", &Param::SignalQuality), Some(5.0));

    // Wrong key (same key id): rejected. Replay of the accepted datagram: rejected.
    let mut bad = StatusSigner::new(7, key(2), 2);
    let forged = seal(&mut bad, &report("wlan9", 25.0));
    sender.send_to(&forged, to).await.expect("send");
    sender.send_to(&first, to).await.expect("send");
    assert!(
        eventually(|| monitor.stats().status_rejected == 2).await,
        "{:?}",
        monitor.stats()
    );
    assert_eq!(monitor.stats().status_accepted, 1);
    assert_eq!(reading(&monitor, "wlan9", &Param::SignalQuality), Some(5.0));
    assert!(
        events.try_recv().is_none(),
        "a rejected message made an event"
    );

    // The next sequence number under the right key is accepted again: 5 → 25 violates high 1.
    let next = seal(&mut good, &report("wlan9", 25.0));
    sender.send_to(&next, to).await.expect("send");
    let d = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an event within 2 s")
        .expect("monitor running");
    assert_eq!(d.event.violated, LevelMask::of(&[1]));
    assert_eq!(d.event.cleared, LevelMask::of(&[0]));
    assert_eq!(monitor.stats().status_accepted, 2);
}

/// `lo` followed, and a status receiver that accepts no peer.
fn lo_with_status_of_nobody() -> EnvOptions {
    EnvOptions {
        interfaces: vec!["lo".into()],
        status: Some(StatusConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            peers: Vec::new(),
        }),
        ..EnvOptions::default()
    }
}

#[tokio::test]
async fn test_unconfigured_peer_is_rejected() {
    let monitor = EnvMonitor::start(lo_with_status_of_nobody()).expect("start");
    let to = monitor.status_addr().expect("bound");
    let sender = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("socket");
    let mut s = StatusSigner::new(7, key(1), 1);
    sender
        .send_to(&seal(&mut s, &report("wlan9", 5.0)), to)
        .await
        .expect("send");
    sender.send_to(b"garbage", to).await.expect("send");
    assert!(eventually(|| monitor.stats().status_rejected == 2).await);
    assert_eq!(reading(&monitor, "wlan9", &Param::SignalQuality), None);
}

#[tokio::test]
async fn test_lo_reports_availability_and_bandwidth() {
    let config = EnvOptions {
        interfaces: vec!["lo".into()],
        period: Duration::from_millis(50),
        ..EnvOptions::default()
    };
    let monitor = EnvMonitor::start(config).expect("start");
    assert!(
        eventually(|| reading(&monitor, "lo", &Param::Availability) == Some(AVAILABLE)).await,
        "lo not reported available: {:?}",
        monitor.get_dev_params("lo")
    );
    assert!(eventually(|| reading(&monitor, "lo", &Param::Bandwidth).is_some()).await);
    assert!(monitor.stats().polls >= 2);
    assert_eq!(monitor.stats().read_errors, 0);
}

/// Without root: the rtnetlink listener opens, its dump gives `lo`'s availability, and the
/// poller (a minute away after its first read) leaves availability to it.
#[tokio::test]
async fn test_rtnetlink_dump_gives_lo_availability() {
    let config = EnvOptions {
        interfaces: vec!["lo".into()],
        period: Duration::from_secs(60),
        ..EnvOptions::default()
    };
    let monitor = EnvMonitor::start(config).expect("start");
    let stats = monitor.stats();
    if !stats.availability_pushed {
        eprintln!(
            "SKIPPED test_rtnetlink_dump_gives_lo_availability: no NETLINK_ROUTE socket here"
        );
        return;
    }
    assert!(
        eventually(|| monitor.stats().link_messages >= 1).await,
        "{:?}",
        monitor.stats()
    );
    assert_eq!(
        reading(&monitor, "lo", &Param::Availability),
        Some(AVAILABLE)
    );
    assert_eq!(monitor.stats().link_malformed, 0);
}

/// Regression: levels set for one parameter of a device before its first reading used to mark
/// the device configured, so the default availability levels were never applied and
/// `adaptnet events` printed no availability event.
#[tokio::test]
async fn test_levels_for_one_param_keep_the_default_availability_levels() {
    let config = EnvOptions {
        interfaces: vec!["lo".into()],
        link_events: false,
        ..EnvOptions::default()
    };
    let monitor = EnvMonitor::start(config).expect("start");
    monitor
        .set_watermarks("x1", Param::Bandwidth, signal_levels())
        .expect("levels");
    monitor
        .set_dev_param("x1", Param::Availability, AVAILABLE)
        .expect("baseline");
    let mut events = monitor
        .subscribe("x1", Param::Availability, LevelMask::ALL)
        .expect("subscribe");
    monitor
        .set_dev_param("x1", Param::Availability, UNAVAILABLE)
        .expect("set");
    let d = events.try_recv().expect("an availability event");
    assert_eq!(d.event.violated, LevelMask::of(&[0]), "Table 3 low 10");
}

#[tokio::test]
async fn test_slow_subscriber_loses_oldest_and_is_told() {
    let config = EnvOptions {
        interfaces: vec!["lo".into()],
        queue_events: 2,
        ..EnvOptions::default()
    };
    let monitor = EnvMonitor::start(config).expect("start");
    monitor
        .set_watermarks("x0", Param::Cost, signal_levels())
        .expect("levels");
    monitor.set_dev_param("x0", Param::Cost, 25.0).expect("set");
    let mut events = monitor
        .subscribe("x0", Param::Cost, LevelMask::ALL)
        .expect("subscribe");
    for v in [5.0, 25.0, 5.0, 25.0, 5.0] {
        monitor.set_dev_param("x0", Param::Cost, v).expect("set");
    }
    let d = events.recv().await.expect("event");
    assert_eq!(d.lost_before, 3);
    assert_eq!(d.event.value, 25.0);
    assert_eq!(events.recv().await.expect("event").event.value, 5.0);
    assert_eq!(events.lost_total(), 3);
    drop(monitor);
    assert!(
        events.recv().await.is_none(),
        "the stream ends with the monitor"
    );
}

#[test]
fn test_start_outside_runtime_and_short_period_are_errors() {
    assert!(matches!(
        EnvMonitor::start(EnvOptions::default()),
        Err(EnvMonitorError::NoRuntime)
    ));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _g = rt.enter();
    let short = EnvOptions {
        period: Duration::from_millis(1),
        ..EnvOptions::default()
    };
    assert!(matches!(
        EnvMonitor::start(short),
        Err(EnvMonitorError::PeriodTooShort(_))
    ));
}

/// A veth pair deleted on drop (deleting one end deletes both).
struct Veth {
    a: String,
}

impl Veth {
    fn create() -> Result<Veth, String> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}{n}", std::process::id() % 100_000);
        let a = format!("aeva{tag}");
        let b = format!("aevb{tag}");
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b])?;
        let v = Veth { a };
        ip(&["link", "set", "dev", &b, "up"])?;
        ip(&["link", "set", "dev", &v.a, "up"])?;
        Ok(v)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = ip(&["link", "del", "dev", &self.a]);
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The polling fallback (no rtnetlink listener): a veth in this namespace going down and up is
/// seen at the next poll. The pushed path is `tests/env/mod.rs` (in the `netns` binary).
#[tokio::test]
async fn test_veth_down_and_up_are_polled_availability_events_within_2s() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "SKIPPED test_veth_down_and_up_are_polled_availability_events_within_2s: needs root"
        );
        return;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!(
            "SKIPPED test_veth_down_and_up_are_polled_availability_events_within_2s: no `ip`"
        );
        return;
    }
    let veth = match Veth::create() {
        Ok(v) => v,
        Err(e) => {
            eprintln!(
                "SKIPPED test_veth_down_and_up_are_polled_availability_events_within_2s: {e}"
            );
            return;
        }
    };
    let config = EnvOptions {
        interfaces: vec![veth.a.clone()],
        period: Duration::from_millis(100),
        link_events: false,
        ..EnvOptions::default()
    };
    let monitor = EnvMonitor::start(config).expect("start");
    let mut events = monitor
        .subscribe(&veth.a, Param::Availability, LevelMask::ALL)
        .expect("subscribe");
    assert!(
        eventually(|| reading(&monitor, &veth.a, &Param::Availability) == Some(AVAILABLE)).await,
        "veth up not seen: {:?}",
        monitor.get_dev_params(&veth.a)
    );
    // A poll may have caught the new pair before its carrier came up: that up event is not
    // the one under test.
    while events.try_recv().is_some() {}

    let t0 = Instant::now();
    ip(&["link", "set", "dev", &veth.a, "down"]).expect("ip link set down");
    let d = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("a down event within 2 s")
        .expect("monitor running");
    assert_eq!(d.event.value, UNAVAILABLE);
    assert_eq!(d.event.violated, LevelMask::of(&[0]), "low 10: unavailable");
    eprintln!("veth down seen after {:?}", t0.elapsed());

    ip(&["link", "set", "dev", &veth.a, "up"]).expect("ip link set up");
    let d = tokio::time::timeout(WAIT, events.recv())
        .await
        .expect("an up event within 2 s")
        .expect("monitor running");
    assert_eq!(d.event.value, AVAILABLE);
    assert_eq!(d.event.violated, LevelMask::of(&[1]), "high 20: available");
    assert_eq!(d.event.cleared, LevelMask::of(&[0]));
}

/// `close` stops every task (the poller, the status receiver, the netlink listener) and
/// `wait_idle` returns; a subscriber reads what was queued, then its stream ends.
#[tokio::test]
async fn test_close_stops_every_task_and_ends_streams() {
    let monitor = EnvMonitor::start(lo_with_status_of_nobody()).expect("start");
    let mut events = monitor
        .subscribe("eth-test", Param::Cost, LevelMask::ALL)
        .expect("subscribe");
    monitor
        .set_watermarks(
            "eth-test",
            Param::Cost,
            Watermarks::new(vec![Level::high(5.0)]).expect("levels"),
        )
        .expect("levels");
    for cost in [1.0, 10.0] {
        monitor
            .set_dev_param("eth-test", Param::Cost, cost)
            .expect("set");
    }
    monitor.close();
    tokio::time::timeout(WAIT, monitor.wait_idle())
        .await
        .expect("every task returned");
    assert!(events.recv().await.is_some(), "the queued event is kept");
    let end = tokio::time::timeout(WAIT, events.recv()).await;
    assert!(matches!(end, Ok(None)), "the stream ends: {end:?}");
}
