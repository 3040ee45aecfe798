//! The same scenario through the daemon and through the in-process CM, behind one API
//! (`HostCm`): the CM's answers must be the same.

use adaptnet_core::cm::{Feedback, FlowKey, FlowOptions, FlowQuery};
use adaptnet_daemon::{Backend, DaemonConfig, HostCm};
use adaptnet_runtime::cm::{Cm, CmOptions, Error};
use std::net::IpAddr;
use std::time::Duration;
use tokio::time::timeout;

fn in_process_cm() -> Cm {
    let options = CmOptions {
        bind: "0.0.0.0:0".parse().expect("address"),
        peer_port: None,
        ..CmOptions::default()
    };
    match Cm::start(options) {
        Ok(cm) => cm,
        Err(Error::AlreadyStarted) => Cm::global().expect("the process CM"),
        Err(e) => panic!("cm: {e}"),
    }
}

/// open → update(rtt 20 ms) → request 10 kB → grants, each notified and acknowledged →
/// query. Returns (bytes granted, grants, final query).
async fn scenario(cm: &HostCm, key: u64) -> (u64, usize, FlowQuery) {
    let dest: IpAddr = "10.9.8.7".parse().expect("ip");
    let mut flow = cm
        .open(dest, FlowKey(key), FlowOptions::implicit())
        .await
        .expect("open");
    let rtt = Some(Duration::from_millis(20));
    flow.update(Feedback::received(0, rtt))
        .await
        .expect("update");
    flow.request(10_000).await.expect("request");
    let (mut total, mut grants) = (0, 0);
    while total < 10_000 {
        let bytes = timeout(Duration::from_secs(5), flow.next_grant())
            .await
            .expect("a grant in time")
            .expect("the CM is there");
        total += bytes;
        grants += 1;
        flow.notify(bytes).await.expect("notify");
        flow.update(Feedback::received(bytes, rtt))
            .await
            .expect("update");
    }
    let q = flow.query().await.expect("query");
    flow.close().await;
    (total, grants, q)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_scenario_through_the_daemon_and_in_process_gives_the_same_answers() {
    let socket = std::env::temp_dir().join(format!(
        "adaptnet-h-daemon-{}-backend.sock",
        std::process::id()
    ));
    let d = adaptnet_daemon::start(DaemonConfig::with_socket(&socket))
        .await
        .expect("daemon");
    let via_daemon = HostCm::connect(Backend::Daemon(Some(socket.clone())))
        .await
        .expect("daemon backend");
    assert!(via_daemon.is_daemon());
    let in_process = HostCm::InProcess(in_process_cm());
    assert!(!in_process.is_daemon());

    let a = scenario(&via_daemon, 1).await;
    let b = scenario(&in_process, 2).await;
    println!("through the daemon: {a:?}\nin process:         {b:?}");
    assert_eq!(a.0, 10_000);
    assert_eq!((a.0, a.1), (b.0, b.1), "same grants");
    assert_eq!(a.2.srtt, b.2.srtt);
    assert_eq!(a.2.rate_bytes_per_s, b.2.rate_bytes_per_s, "same rate");
    assert_eq!(
        a.2.macroflow_rate_bytes_per_s,
        b.2.macroflow_rate_bytes_per_s
    );

    // Forcing the daemon when none runs is an error; Auto falls back to the process's CM.
    drop(d);
    assert!(
        HostCm::connect(Backend::Daemon(Some(socket.clone())))
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_uses_the_daemon_when_its_socket_exists() {
    // Backend::Auto reads the standard path or $ADAPTNET_DAEMON_SOCKET; point it here.
    let socket = std::env::temp_dir().join(format!(
        "adaptnet-h-daemon-{}-auto.sock",
        std::process::id()
    ));
    // SAFETY: this test binary's other test does not read the variable.
    unsafe { std::env::set_var(adaptnet_core::daemon::SOCKET_ENV, &socket) };
    let d = adaptnet_daemon::start(DaemonConfig::with_socket(&socket))
        .await
        .expect("daemon");
    let cm = HostCm::connect(Backend::Auto).await.expect("auto");
    assert!(cm.is_daemon(), "socket exists: the daemon");
    drop(cm);
    drop(d);
    let cm = HostCm::connect(Backend::Auto).await.expect("auto");
    assert!(!cm.is_daemon(), "no socket: in process");
}

/// The same environment scenario through the daemon and through the process's monitor:
/// watermarks low 10 / high 50, a subscription to all levels, values crossing them.
async fn events_scenario(ev: &adaptnet_daemon::HostEvents) -> Vec<(f64, u128, u128)> {
    use adaptnet_core::env::{Level, LevelMask, Param, Watermarks};
    let dev = "hostbench0";
    ev.set_watermarks(
        dev,
        Param::Cost,
        Watermarks::new(vec![Level::low(10.0), Level::high(50.0)]).expect("levels"),
    )
    .await
    .expect("watermarks");
    let mut sub = ev
        .subscribe(dev, Param::Cost, LevelMask::ALL)
        .await
        .expect("subscribe");
    for v in [30.0, 100.0, 0.0, 40.0, 5.0, 60.0] {
        ev.set_dev_param(dev, Param::Cost, v).await.expect("set");
    }
    let mut got = Vec::new();
    while got.len() < 4 {
        let e = timeout(Duration::from_secs(5), sub.recv())
            .await
            .expect("an event in time")
            .expect("the source is there");
        got.push((e.value, e.violated.bits(), e.cleared.bits()));
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_events_through_the_daemon_and_in_process() {
    use adaptnet_runtime::env::EnvOptions;
    let socket = std::env::temp_dir().join(format!(
        "adaptnet-h-daemon-{}-events.sock",
        std::process::id()
    ));
    let _d = adaptnet_daemon::start(DaemonConfig::with_socket(&socket))
        .await
        .expect("daemon");
    let quiet = || EnvOptions {
        interfaces: vec!["lo".into()],
        link_events: false,
        ..EnvOptions::default()
    };
    let via_daemon =
        adaptnet_daemon::HostEvents::connect(Backend::Daemon(Some(socket.clone())), quiet())
            .await
            .expect("daemon backend");
    let in_process = adaptnet_daemon::HostEvents::connect(Backend::InProcess, quiet())
        .await
        .expect("in-process backend");
    assert!(via_daemon.is_daemon() && !in_process.is_daemon());
    let a = events_scenario(&via_daemon).await;
    let b = events_scenario(&in_process).await;
    println!("through the daemon: {a:?}\nin process:         {b:?}");
    assert_eq!(a, b);
    assert_eq!(a.len(), 4);
}
