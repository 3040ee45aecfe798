//! The same scenarios through the host daemon and through the process's own engines, behind
//! one API each — the runtime's `Cm` (its backend chosen by `CmOptions::backend`, or by
//! `Cm::global()` from the daemon's socket and `ADAPTNET_CM`) and `HostEvents`: the answers
//! must be the same.

use adaptnet_core::cm::{Feedback, FlowKey, FlowOptions, FlowQuery};
use adaptnet_daemon::{Backend, DaemonConfig};
use adaptnet_runtime::cm::{Cm, CmBackend, CmOptions, Error, Notice};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::timeout;

fn options(backend: CmBackend) -> CmOptions {
    CmOptions {
        bind: "0.0.0.0:0".parse().expect("address"),
        peer_port: None,
        backend,
        ..CmOptions::default()
    }
}

fn socket(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "adaptnet-h-cm-backend-{}-{what}.sock",
        std::process::id()
    ))
}

fn through_daemon(socket: &Path) -> Cm {
    Cm::new(options(CmBackend::Daemon(Some(socket.to_owned())))).expect("daemon backend")
}

/// What one run of the scenario saw: bytes granted, grants, the final query, and the
/// latest `change_rate` (bytes/s) the flow was told.
type Outcome = (u64, usize, FlowQuery, Option<f64>);

/// open → update(rtt 20 ms) → request 10 kB → grants, each notified and acknowledged →
/// query.
async fn scenario(cm: &Cm, key: u64) -> Outcome {
    let dest: IpAddr = "10.9.8.7".parse().expect("ip");
    let mut flow = cm
        .open_with(dest, FlowKey(key), FlowOptions::implicit())
        .await
        .expect("open");
    let rates = flow.rate_changes();
    let rtt = Some(Duration::from_millis(20));
    flow.update(Feedback::received(0, rtt))
        .await
        .expect("update");
    flow.request(10_000).await.expect("request");
    let (mut total, mut grants) = (0, 0);
    while total < 10_000 {
        let notice = timeout(Duration::from_secs(5), flow.next_notice())
            .await
            .expect("a grant in time")
            .expect("the CM is there");
        let Notice::Grant(bytes) = notice else {
            continue;
        };
        total += bytes;
        grants += 1;
        flow.notify(bytes).await.expect("notify");
        flow.update(Feedback::received(bytes, rtt))
            .await
            .expect("update");
    }
    let q = flow.query().await.expect("query");
    // Rate changes are events: give the last one time to arrive through the daemon.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let latest = rates.latest().map(|r| r.rate_bytes_per_s);
    flow.close().await;
    (total, grants, q, latest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_cm_scenario_through_the_daemon_and_in_process_gives_the_same_answers() {
    let socket = socket("same");
    let d = adaptnet_daemon::start(DaemonConfig::with_socket(&socket))
        .await
        .expect("daemon");
    let via_daemon = through_daemon(&socket);
    assert!(via_daemon.is_daemon());
    let in_process = Cm::new(options(CmBackend::InProcess)).expect("in-process backend");
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
    assert!(b.3.is_some(), "the in-process flow was told its rate");
    assert_eq!(a.3, b.3, "same change_rate");

    // A CM-delegated stream calls its CM synchronously: it refuses the daemon's, and
    // `with_cm` uses the process's own engine whatever the backend.
    use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("address");
    assert!(
        StreamEndpoint::bind(any, StreamOptions::client().with_cm_of(via_daemon.clone())).is_err()
    );
    assert!(StreamEndpoint::bind(any, StreamOptions::client().with_cm()).is_ok());

    // The flow lives in the daemon's CM, under this process's connection.
    let mut flow = via_daemon
        .open_with(
            "10.9.8.7".parse().expect("ip"),
            FlowKey(3),
            FlowOptions::implicit(),
        )
        .await
        .expect("open");
    let status = adaptnet_daemon::DaemonClient::connect(&socket, "observer")
        .await
        .expect("observer")
        .status()
        .await
        .expect("status");
    // Its name (sent in the background `hello`) and its open flow.
    let me = format!("[{}]", std::process::id());
    assert!(status.contains(&me), "{status}");
    assert!(status.contains(r#""flows":1"#), "{status}");

    // The daemon stops: the flow's notices end and its calls fail, without a panic.
    drop(d);
    let ended = timeout(Duration::from_secs(5), flow.next_notice())
        .await
        .expect("the flow learns the daemon is gone");
    assert_eq!(ended, None);
    assert!(flow.request(1_000).await.is_err());
    // Forcing the daemon when none runs is an error.
    assert!(matches!(
        Cm::new(options(CmBackend::Daemon(Some(socket.clone())))),
        Err(Error::Daemon(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_uses_the_daemon_when_its_socket_exists_and_its_own_engine_otherwise() {
    if std::env::var(adaptnet_runtime::cm::BACKEND_ENV).is_ok_and(|v| v != "auto") {
        eprintln!("skipped: ADAPTNET_CM is set");
        return;
    }
    // Auto reads the standard path or $ADAPTNET_DAEMON_SOCKET; point it here.
    let socket = socket("auto");
    // SAFETY: this test binary's other tests do not read the variable.
    unsafe { std::env::set_var(adaptnet_core::daemon::SOCKET_ENV, &socket) };
    let d = adaptnet_daemon::start(DaemonConfig::with_socket(&socket))
        .await
        .expect("daemon");
    let cm = Cm::global().expect("global");
    assert!(cm.is_daemon(), "socket exists: the daemon");
    let again = Cm::global().expect("global");
    assert!(again.is_daemon(), "one process CM while a handle lives");
    let q = scenario(&cm, 7).await;
    assert_eq!(q.0, 10_000, "granted through the daemon");
    let local = Cm::new(options(CmBackend::InProcess)).expect("forced local");
    assert!(!local.is_daemon(), "local is local even with a daemon");
    drop((cm, again, local));
    drop(d);
    let cm = Cm::global().expect("global");
    assert!(!cm.is_daemon(), "no socket: in process");
    assert_eq!(scenario(&cm, 8).await.0, 10_000, "granted in process");
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

    // Dropping the handle closes its connection: the daemon forgets the client.
    let observer = adaptnet_daemon::DaemonClient::connect(&socket, "observer")
        .await
        .expect("observer");
    let me = format!("[{}]", std::process::id());
    assert!(observer.status().await.expect("status").contains(&me));
    drop(via_daemon);
    let mut gone = false;
    for _ in 0..50 {
        if !observer.status().await.expect("status").contains(&me) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        gone,
        "the daemon still lists the dropped handle's connection"
    );
}
