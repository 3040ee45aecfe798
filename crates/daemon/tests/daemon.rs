//! The daemon over its Unix socket: the CM API, who may do what, bounds, faults.
//!
//! Each test starts its own daemon on a socket path unique to the test and the process.

use adaptnet_core::cm::{Feedback, FeedbackSource, FlowKey, PeerAddr, Request};
use adaptnet_core::daemon::{ErrorCode, Message};
use adaptnet_core::env::{Level, LevelMask, Name, Param};
use adaptnet_daemon::{ClientError, DaemonClient, DaemonConfig, RunningDaemon};
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::{Instant, timeout};

fn socket(test: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "adaptnet-h-daemon-{}-{test}.sock",
        std::process::id()
    ))
}

async fn daemon(test: &str, tweak: impl FnOnce(&mut DaemonConfig)) -> RunningDaemon {
    let mut c = DaemonConfig::with_socket(&socket(test));
    tweak(&mut c);
    adaptnet_daemon::start(c).await.expect("daemon starts")
}

async fn client(d: &RunningDaemon, name: &str) -> DaemonClient {
    DaemonClient::connect(d.socket_path(), name)
        .await
        .expect("connects")
}

const DEST: PeerAddr = PeerAddr(0x0a00_0001);

fn refused(r: Result<impl std::fmt::Debug, ClientError>) -> ErrorCode {
    match r {
        Err(ClientError::Refused { code, .. }) => code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn wait_for(mut cond: impl FnMut() -> bool, within: Duration) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "not within {within:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_grant_notify_update_through_the_daemon() {
    let d = daemon("api", |_| {}).await;
    let c = client(&d, "api").await;
    assert_eq!(c.uid(), unsafe { libc::geteuid() });
    let (flow, _) = c
        .open(DEST, FlowKey(1), 1.0, FeedbackSource::Implicit)
        .await
        .expect("open");
    c.update(flow, Feedback::received(0, Some(Duration::from_millis(20))))
        .await
        .expect("update");
    c.request(flow, Request::bytes(10_000))
        .await
        .expect("request");
    let mut granted = 0;
    while granted < 10_000 {
        match timeout(Duration::from_secs(5), c.next_event()).await {
            Ok(Some(Message::Grant { flow: f, bytes })) => {
                assert_eq!(f, flow);
                granted += bytes;
                c.notify(flow, bytes).await.expect("notify");
                c.update(
                    flow,
                    Feedback::received(bytes, Some(Duration::from_millis(20))),
                )
                .await
                .expect("update");
            }
            Ok(Some(_)) => {}
            other => panic!("no grant: {other:?}"),
        }
    }
    assert_eq!(granted, 10_000);
    let q = c.query(flow).await.expect("query");
    assert_eq!(q.srtt, Some(Duration::from_millis(20)));
    c.close(flow).await.expect("close");
    assert_eq!(refused(c.query(flow).await), ErrorCode::UnknownFlow);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_touch_another_clients_flows() {
    let d = daemon("owner", |_| {}).await;
    let a = client(&d, "a").await;
    let b = client(&d, "b").await;
    let (flow, _) = a
        .open(DEST, FlowKey(1), 1.0, FeedbackSource::Implicit)
        .await
        .expect("open");
    assert_eq!(refused(b.close(flow).await), ErrorCode::UnknownFlow);
    assert_eq!(
        refused(b.update(flow, Feedback::loss(0, 1500)).await),
        ErrorCode::UnknownFlow
    );
    assert_eq!(
        refused(b.request(flow, Request::bytes(1)).await),
        ErrorCode::UnknownFlow
    );
    assert_eq!(refused(b.query(flow).await), ErrorCode::UnknownFlow);
    a.query(flow).await.expect("the owner still has it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_split_a_users_share_and_asking_more_does_not_help() {
    let d = daemon("weights", |c| c.weights.max_flow_weight = 4.0).await;
    let a = client(&d, "a").await;
    let b = client(&d, "b").await;
    let (fa, mfa) = a
        .open(DEST, FlowKey(1), 1.0, FeedbackSource::Implicit)
        .await
        .expect("open");
    // Asks for 100: clamped to max_flow_weight 4, so 1 : 4 of this user's share.
    let (fb, mfb) = b
        .open(DEST, FlowKey(2), 100.0, FeedbackSource::Implicit)
        .await
        .expect("open");
    assert_eq!(
        mfa, mfb,
        "one macroflow for one destination across processes"
    );
    a.update(fa, Feedback::received(0, Some(Duration::from_millis(10))))
        .await
        .expect("rtt");
    let qa = a.query(fa).await.expect("query");
    let qb = b.query(fb).await.expect("query");
    let (ra, rb) = (
        qa.rate_bytes_per_s.expect("valid"),
        qb.rate_bytes_per_s.expect("valid"),
    );
    assert!(((ra + rb) / qa.macroflow_rate_bytes_per_s - 1.0).abs() < 1e-9);
    assert!((rb / ra - 4.0).abs() < 1e-9, "{ra} {rb}");
    // The second client opening more flows takes nothing more from the first.
    for k in 3..6 {
        b.open(DEST, FlowKey(k), 4.0, FeedbackSource::Implicit)
            .await
            .expect("open");
    }
    let ra2 = a
        .query(fa)
        .await
        .expect("query")
        .rate_bytes_per_s
        .expect("valid");
    assert!(ra2 / qa.macroflow_rate_bytes_per_s > 0.05);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_client_tables_are_bounded_with_an_error() {
    let d = daemon("limits", |c| {
        c.limits.max_flows_per_client = 2;
        c.limits.max_subscriptions_per_client = 1;
    })
    .await;
    let c = client(&d, "greedy").await;
    for k in 0..2 {
        c.open(DEST, FlowKey(k), 1.0, FeedbackSource::Implicit)
            .await
            .expect("open");
    }
    assert_eq!(
        refused(
            c.open(DEST, FlowKey(9), 1.0, FeedbackSource::Implicit)
                .await
        ),
        ErrorCode::LimitExceeded
    );
    let dev = Name::new("wlan0").expect("name");
    c.request_event(dev.clone(), Param::Bandwidth, LevelMask::ALL)
        .await
        .expect("first");
    assert_eq!(
        refused(c.request_event(dev, Param::Loss, LevelMask::ALL).await),
        ErrorCode::LimitExceeded
    );
    assert_eq!(
        refused(c.subscribe_estimator("lo").await),
        ErrorCode::LimitExceeded
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_frees_its_flows_at_once() {
    let d = daemon("drop", |_| {}).await;
    let c = client(&d, "short-lived").await;
    for k in 0..10 {
        c.open(DEST, FlowKey(k), 1.0, FeedbackSource::Implicit)
            .await
            .expect("open");
    }
    assert_eq!(d.flow_count(), 10);
    drop(c);
    let took = wait_for(|| d.flow_count() == 0, Duration::from_secs(1)).await;
    println!("flows freed {took:?} after the client closed");
    assert_eq!(d.client_count(), 0);
}

/// Raw frame bytes for a helper process, in hex.
fn frame_hex(req_id: u32, m: &Message) -> String {
    let mut v = Vec::new();
    adaptnet_core::daemon::encode_frame(req_id, m, &mut v).expect("encodes");
    v.iter().map(|b| format!("{b:02x}")).collect()
}

const HELPER_ENV: &str = "ADAPTNET_DAEMON_TEST_HELPER";

/// This test binary run again as a separate client process (the `helper_client` test).
fn helper(path: &str, frames_hex: &str, as_nobody: bool) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "helper_client",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(
            HELPER_ENV,
            format!("{path} {frames_hex} {}", u8::from(as_nobody)),
        )
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("helper process")
}

/// Run as a child process: connects (as uid 65534 if asked), sends the frames, prints
/// "ready" once the daemon has answered (or "denied"), then sleeps until killed.
#[test]
fn helper_client() {
    use std::io::{Read, Write};
    let Ok(spec) = std::env::var(HELPER_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split_whitespace().collect();
    let (path, hex, as_nobody) = (parts[0], parts[1], parts[2] == "1");
    if as_nobody {
        // SAFETY: plain system calls dropping this process's privileges.
        unsafe {
            assert_eq!(libc::setgid(65534), 0);
            assert_eq!(libc::setuid(65534), 0);
        }
    }
    let mut s = match std::os::unix::net::UnixStream::connect(path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            println!("denied");
            return;
        }
        Err(e) => panic!("connect: {e}"),
    };
    let frames: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    s.write_all(&frames).expect("write");
    std::thread::sleep(Duration::from_millis(300));
    let mut buf = [0u8; 4096];
    let _ = s.set_nonblocking(true);
    let _ = s.read(&mut buf);
    println!("ready");
    std::thread::sleep(Duration::from_secs(60));
}

/// The helper's verdict: its first line that is "ready" or "denied" (the test harness
/// prints its own lines first).
fn read_line(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let out = child.stdout.take().expect("piped");
    std::io::BufReader::new(out)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            // libtest may have written "test helper_client ... " before it on the line.
            ["ready", "denied"]
                .into_iter()
                .find(|w| l.trim_end().ends_with(w))
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_client_has_its_flows_freed_within_one_second() {
    let d = daemon("sigkill", |_| {}).await;
    let mut frames = frame_hex(
        1,
        &Message::Hello {
            name: "victim".into(),
        },
    );
    for k in 0..5u32 {
        frames += &frame_hex(
            2 + k,
            &Message::Open {
                dest: DEST,
                key: FlowKey(u64::from(k)),
                weight: 1.0,
                feedback: FeedbackSource::Implicit,
            },
        );
    }
    let path = d.socket_path().to_str().expect("utf-8").to_owned();
    let mut child = helper(&path, &frames, false);
    let line = tokio::task::block_in_place(|| read_line(&mut child));
    assert_eq!(line, "ready");
    wait_for(|| d.flow_count() == 5, Duration::from_secs(2)).await;
    child.kill().expect("SIGKILL");
    let took = wait_for(|| d.flow_count() == 0, Duration::from_secs(1)).await;
    let _ = child.wait();
    println!("SIGKILLed client's 5 flows freed in {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_permissions_keep_other_users_out() {
    let d = daemon("perm", |c| c.daemon.socket_mode = "0600".into()).await;
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(d.socket_path())
        .expect("socket file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    if unsafe { libc::geteuid() } != 0 {
        println!("not root: cannot switch to another user, permission check skipped");
        return;
    }
    let path = d.socket_path().to_str().expect("utf-8").to_owned();
    let hello = frame_hex(
        1,
        &Message::Hello {
            name: "nobody".into(),
        },
    );
    let mut child = helper(&path, &hello, true);
    let line = tokio::task::block_in_place(|| read_line(&mut child));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        line, "denied",
        "uid 65534 must not connect to a 0600 socket"
    );
    // Opened to everyone (0666), the same user is served.
    drop(d);
    let d = daemon("perm2", |c| c.daemon.socket_mode = "0666".into()).await;
    let path = d.socket_path().to_str().expect("utf-8").to_owned();
    let mut child = helper(&path, &hello, true);
    let line = tokio::task::block_in_place(|| read_line(&mut child));
    assert_eq!(line, "ready");
    wait_for(|| d.client_count() == 1, Duration::from_secs(2)).await;
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_loses_its_own_events_and_no_one_elses() {
    let d = daemon("slow", |c| c.limits.max_queued_events = 16).await;
    let admin = client(&d, "admin").await;
    let dev = Name::new("wlan0").expect("name");
    admin
        .set_dev_param_wms(dev.clone(), Param::Bandwidth, vec![Level::low(100.0)])
        .await
        .expect("watermarks (root)");
    // The slow one keeps only 4 events locally and never reads.
    let slow = DaemonClient::connect_with(d.socket_path(), "slow", 4)
        .await
        .expect("connects");
    slow.request_event(dev.clone(), Param::Bandwidth, LevelMask::ALL)
        .await
        .expect("subscribe");
    let fast = client(&d, "fast").await;
    fast.request_event(dev.clone(), Param::Bandwidth, LevelMask::ALL)
        .await
        .expect("subscribe");
    let reader = tokio::spawn({
        let fast = fast.clone();
        async move {
            let mut got = 0u64;
            while got < 2000 {
                match timeout(Duration::from_secs(10), fast.next_event()).await {
                    Ok(Some(Message::EnvEvent { .. })) => got += 1,
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
            got
        }
    });
    // 2000 violations of the low watermark: up and down across it.
    for i in 0..4000u32 {
        let v = if i % 2 == 0 { 200.0 } else { 50.0 };
        admin
            .set_dev_param(dev.clone(), Param::Bandwidth, v)
            .await
            .expect("set");
    }
    let got = reader.await.expect("reader");
    assert_eq!(got, 2000, "the reading subscriber lost nothing");
    tokio::time::sleep(Duration::from_millis(100)).await;
    println!("slow subscriber: {} events lost", slow.events_lost());
    assert!(slow.events_lost() > 1000, "lost {}", slow.events_lost());
    // Non-root callers may not set device parameters: checked in the engine's unit tests.
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_restart_is_an_error_then_clients_reattach() {
    let d = daemon("restart", |_| {}).await;
    let path = d.socket_path().to_owned();
    let c = client(&d, "app").await;
    let (flow, _) = c
        .open(DEST, FlowKey(1), 1.0, FeedbackSource::Implicit)
        .await
        .expect("open");
    drop(d);
    // The old connection fails with an error, not a panic or a hang.
    let r = timeout(Duration::from_secs(2), c.query(flow))
        .await
        .expect("no hang");
    assert!(matches!(r, Err(ClientError::Disconnected)), "{r:?}");
    let d = adaptnet_daemon::start(DaemonConfig::with_socket(&path))
        .await
        .expect("restarts on the same path");
    let c = client(&d, "app").await;
    c.open(DEST, FlowKey(1), 1.0, FeedbackSource::Implicit)
        .await
        .expect("reattached");
}

/// The CM probe protocol daemon to daemon over UDP (papers/003 Figure 5): a probe-fed flow
/// from daemon A's host to daemon B's; B's application reports 3 packets in 4 to B's receiver
/// CM; A learns the RTT and the loss from B's responses alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_run_daemon_to_daemon_over_udp() {
    let b = daemon("probe-b", |c| {
        c.cm.probe_bind = Some("127.0.0.1:0".parse().expect("addr"));
    })
    .await;
    let b_port = b.probe_addr().expect("bound").port();
    let a = daemon("probe-a", |c| {
        c.cm.probe_bind = Some("127.0.0.1:0".parse().expect("addr"));
        c.cm.probe_peer_port = b_port;
    })
    .await;
    let a_addr = a.probe_addr().expect("bound");
    let sender = client(&a, "sender").await;
    let receiver = client(&b, "receiver").await;
    let key = FlowKey(0xfeed);
    let (flow, _) = sender
        .open(PeerAddr::from(a_addr.ip()), key, 1.0, FeedbackSource::Probe)
        .await
        .expect("open");
    sender
        .request(flow, Request::bytes(1 << 30))
        .await
        .expect("request");
    let from = PeerAddr::from(a_addr.ip());
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(8) {
        let Ok(Some(Message::Grant { bytes, .. })) =
            timeout(Duration::from_millis(500), sender.next_event()).await
        else {
            continue;
        };
        n += 1;
        // The sending application sends, then notifies its CM; the packet reaches the
        // receiving application, which reports it to its CM (3 in 4 arrive).
        sender.notify(flow, bytes).await.expect("notify");
        if !n.is_multiple_of(4) {
            receiver
                .received(from, key, bytes, false)
                .await
                .expect("received");
        }
        if n.is_multiple_of(64)
            && sender.query(flow).await.expect("query").probe_sent_bytes > 300_000
        {
            break;
        }
    }
    let q = sender.query(flow).await.expect("query");
    let loss = q.probe_lost_bytes as f64 / q.probe_sent_bytes.max(1) as f64;
    println!(
        "daemon to daemon: {} B in probed intervals, loss {loss:.3} (true 0.25), srtt {:?}",
        q.probe_sent_bytes, q.srtt
    );
    assert!(q.srtt.is_some(), "probe responses gave an RTT: {q:?}");
    assert!(q.probe_sent_bytes > 100_000, "{q:?}");
    // On a miss, both daemons' state says which probes and responses were ignored.
    let a_status = sender.status().await.unwrap_or_default();
    let b_status = receiver.status().await.unwrap_or_default();
    assert!(
        (loss - 0.25).abs() < 0.05,
        "loss {loss}; {q:?}\nsender's daemon: {a_status}\nreceiver's daemon: {b_status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimates_and_the_status_reach_clients() {
    let d = daemon("estimator", |c| c.estimator.period_ms = 20).await;
    let c = client(&d, "watcher").await;
    assert_eq!(
        refused(c.subscribe_estimator("../../etc").await),
        ErrorCode::InvalidArgument
    );
    c.subscribe_estimator("lo").await.expect("subscribe");
    let est = timeout(Duration::from_secs(5), async {
        loop {
            if let Some(Message::Estimate {
                iface,
                bytes_per_s,
                total_bytes,
                ..
            }) = c.next_event().await
            {
                return (iface, bytes_per_s, total_bytes);
            }
        }
    })
    .await
    .expect("an estimate within 5 s");
    assert_eq!(est.0, "lo");
    assert!(est.1 >= 0.0 && est.2 > 0, "{est:?}");
    let (flow, _) = c
        .open(DEST, FlowKey(3), 2.0, FeedbackSource::Implicit)
        .await
        .expect("open");
    let json = c.status().await.expect("status");
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(v["clients"][0]["name"], "watcher");
    assert_eq!(v["clients"][0]["flows"], 1);
    assert_eq!(v["macroflows"][0]["flows"][0]["flow"], flow.0);
    assert_eq!(v["estimators"][0]["iface"], "lo");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_messages_are_accepted_from_configured_peers_only() {
    use adaptnet_core::env::{StatusKey, StatusMessage, StatusSigner};
    let peer = std::net::UdpSocket::bind("127.0.0.1:0").expect("peer socket");
    let stranger = std::net::UdpSocket::bind("127.0.0.1:0").expect("stranger socket");
    let key_hex = "00112233445566778899aabbccddeeff";
    let peer_addr = peer.local_addr().expect("addr");
    let d = daemon("status", |c| {
        c.env.status_bind = Some("127.0.0.1:0".parse().expect("addr"));
        c.env.peers = vec![adaptnet_daemon::config::PeerConfig {
            addr: peer_addr,
            key_id: 4,
            key_hex: key_hex.into(),
        }];
    })
    .await;
    let to = d.status_addr().expect("status socket");
    let key = StatusKey::new(&[
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,
        0xff,
    ])
    .expect("key");
    let dev = Name::new("wlan0").expect("name");
    let msg = |v: f64| StatusMessage {
        key_id: 0,
        seq: 0,
        device: dev.clone(),
        param: Param::Bandwidth,
        value: v,
        violated: LevelMask::EMPTY,
        cleared: LevelMask::EMPTY,
    };
    let mut buf = [0u8; 512];
    // The same key from an address that is not configured: rejected.
    let mut signer = StatusSigner::new(4, key.clone(), 1);
    let n = signer.seal(&msg(111.0), &mut buf).expect("seal");
    stranger.send_to(&buf[..n], to).expect("send");
    // The configured peer: accepted.
    let n = signer.seal(&msg(222.0), &mut buf).expect("seal");
    peer.send_to(&buf[..n], to).expect("send");
    let c = client(&d, "reader").await;
    let mut got = None;
    for _ in 0..100 {
        let r = c.get_dev_params(dev.clone()).await.expect("get");
        if let Some(p) = r.first() {
            got = Some(p.raw);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(got, Some(222.0));
    let v: serde_json::Value =
        serde_json::from_str(&c.status().await.expect("status")).expect("JSON");
    assert_eq!(v["stats"]["status_accepted"], 1);
    assert_eq!(v["stats"]["status_rejected"], 1);
}
