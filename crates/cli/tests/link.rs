//! `adaptnet link` as a user runs it: a command's exit status passes through, the delay line
//! shows its round trip, and nothing is left behind — when the command fails, on SIGTERM, on
//! Ctrl-C — and `up`/`down` leave and remove a named pair of namespaces. Needs root and
//! iproute2 (and ping); skips loudly otherwise, except under `CI=true`.

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const ADAPTNET: &str = env!("CARGO_BIN_EXE_adaptnet");

/// One link at a time: shells pick the first free host subnet, and timing is measured.
static SERIAL: Mutex<()> = Mutex::new(());

fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tools = ["ip", "ping"]
        .iter()
        .all(|t| Command::new(t).arg("-V").output().is_ok());
    if root && tools && std::path::Path::new("/dev/net/tun").exists() {
        return true;
    }
    let msg =
        format!("SKIPPED adaptnet link test {test}: needs root, iproute2, ping and /dev/net/tun");
    eprintln!("\n*** {msg} ***\n");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{msg} (CI must run it)"
    );
    false
}

fn namespaces() -> String {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn devices() -> String {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until `cond` holds (up to 10 s).
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_failing_command_passes_its_status_through_and_leaves_nothing() {
    let _slot = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("failing command") {
        return;
    }
    let before = devices().matches("adlh").count();
    let child = Command::new(ADAPTNET)
        .args(["link", "--delay-ms", "5", "--", "sh", "-c", "exit 7"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("adaptnet");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !namespaces().contains(&format!("adl{pid}-")),
        "namespace left behind"
    );
    assert_eq!(
        devices().matches("adlh").count(),
        before,
        "TUN device left behind"
    );
    // A command that cannot be started at all fails too, and cleans up as well.
    let child = Command::new(ADAPTNET)
        .args(["link", "--", "/nonexistent/command"])
        .stderr(Stdio::null())
        .spawn()
        .expect("adaptnet");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    assert!(!out.status.success());
    assert!(
        !namespaces().contains(&format!("adl{pid}-")),
        "namespace left behind"
    );
}

#[test]
fn a_20_ms_delay_line_shows_a_40_ms_ping() {
    let _slot = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("ping") {
        return;
    }
    let out = Command::new(ADAPTNET)
        .args(["link", "--quiet", "--delay-ms", "20", "--", "sh", "-c"])
        .arg("ping -q -n -c 10 -i 0.1 \"$ADAPTNET_LINK_PEER\"")
        .output()
        .expect("adaptnet");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "rtt min/avg/max/mdev = 40.2/40.3/40.5/0.1 ms"
    let avg: f64 = text
        .lines()
        .find_map(|l| l.split(" = ").nth(1))
        .and_then(|v| v.split('/').nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no ping summary in {text}"));
    assert!(
        (40.0..42.0).contains(&avg),
        "average RTT {avg} ms over a 20 ms delay line"
    );
}

fn stopped_by(signal: libc::c_int, expected_code: i32, settle: Duration) {
    let mut cmd = Command::new(ADAPTNET);
    cmd.args(["link", "--quiet", "--delay-ms", "5", "--", "sleep", "30"])
        .stderr(Stdio::null());
    // Its own process group, as a shell gives a foreground job: Ctrl-C reaches the group.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().expect("adaptnet");
    let pid = child.id();
    let ns = format!("adl{pid}-0");
    wait_for("the link to come up", || namespaces().contains(&ns));
    std::thread::sleep(settle);
    let t0 = Instant::now();
    // SAFETY: kill on the process group we just made.
    unsafe {
        libc::kill(-(pid as libc::pid_t), signal);
    }
    let status = child.wait().expect("wait");
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "took {:?} to stop",
        t0.elapsed()
    );
    assert_eq!(status.code(), Some(expected_code));
    assert!(!namespaces().contains(&ns), "namespace left behind");
}

#[test]
fn sigterm_and_ctrl_c_tear_the_link_down() {
    let _slot = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("signals") {
        return;
    }
    // Right as the namespace appears (set-up still running `ip`), and once the command runs.
    for settle in [Duration::ZERO, Duration::from_millis(500)] {
        stopped_by(libc::SIGTERM, 128 + libc::SIGTERM, settle);
        stopped_by(libc::SIGINT, 128 + libc::SIGINT, settle);
    }
}

#[test]
fn up_leaves_a_named_pair_of_namespaces_and_down_removes_it() {
    let _slot = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("up/down") {
        return;
    }
    let name = format!("adltest{}", std::process::id());
    let out = Command::new(ADAPTNET)
        .args(["link", "up", &name, "--delay-ms", "10", "--rate-mbps", "20"])
        .output()
        .expect("adaptnet link up");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let far = format!("{name}-far");
    let list = namespaces();
    let result = std::panic::catch_unwind(|| {
        assert!(list.contains(&name) && list.contains(&far), "{list}");
        // Across the link from the emulated side to the far side: 2 × 10 ms.
        let ping = Command::new("ip")
            .args([
                "netns",
                "exec",
                &name,
                "ping",
                "-q",
                "-n",
                "-c",
                "5",
                "-i",
                "0.1",
                "10.250.0.1",
            ])
            .output()
            .expect("ping");
        let text = String::from_utf8_lossy(&ping.stdout);
        assert!(ping.status.success(), "{text}");
        assert!(text.contains(" 0% packet loss"), "{text}");
    });
    let down = Command::new(ADAPTNET)
        .args(["link", "down", &name])
        .output()
        .expect("adaptnet link down");
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    let list = namespaces();
    assert!(!list.contains(&name), "namespaces left behind: {list}");
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    let summary = String::from_utf8_lossy(&down.stdout);
    assert!(summary.contains("delivered_packets"), "{summary}");
    // Down again: nothing to remove is an error.
    let again = Command::new(ADAPTNET)
        .args(["link", "down", &name])
        .output()
        .expect("down");
    assert!(!again.status.success());
}

/// `adaptnet serve` on the far side and `adaptnet send` on the emulated side of a named link:
/// a 6-s Table 2 workload over ATP and over NAI-TCP, every message delivered before its timer
/// on a 4 Mbit/s, 10 ms link that the workload (about 0.2 Mbit/s) does not fill.
#[test]
fn send_and_serve_run_a_workload_across_the_emulated_link() {
    let _slot = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("send/serve") {
        return;
    }
    let name = format!("adlss{}", std::process::id());
    let out = Command::new(ADAPTNET)
        .args([
            "link",
            "up",
            &name,
            "--delay-ms",
            "10",
            "--rate-mbps",
            "4",
            "--queue-packets",
            "50",
        ])
        .output()
        .expect("adaptnet link up");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = std::panic::catch_unwind(|| {
        let mut server = Command::new("ip")
            .args(["netns", "exec", &format!("{name}-far"), ADAPTNET, "serve"])
            .args(["--listen", "10.250.0.1:7700", "-t", "60"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve");
        std::thread::sleep(Duration::from_millis(500));
        let outdir = std::env::temp_dir().join(format!("{name}-send"));
        let mut fractions = Vec::new();
        for transport in ["atp", "nai-tcp"] {
            let send = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &name,
                    ADAPTNET,
                    "send",
                    "--to",
                    "10.250.0.1:7700",
                ])
                .args([
                    "--workload",
                    "uniform",
                    "-t",
                    "6",
                    "--json",
                    "--transport",
                    transport,
                ])
                .arg("--out")
                .arg(&outdir)
                .output()
                .expect("send");
            let text = String::from_utf8_lossy(&send.stdout);
            assert!(
                send.status.success(),
                "{transport}: {}",
                String::from_utf8_lossy(&send.stderr)
            );
            let report: serde_json::Value = serde_json::from_str(&text).expect("JSON report");
            let (mut submitted, mut on_time) = (0, 0);
            for level in report["levels"].as_array().expect("levels") {
                submitted += level["submitted"].as_u64().unwrap_or(0);
                on_time += level["on_time"].as_u64().unwrap_or(0);
            }
            fractions.push((transport, submitted, on_time));
        }
        let _ = server.kill();
        let _ = server.wait();
        std::fs::remove_dir_all(&outdir).ok();
        eprintln!("send/serve across the emulated link: {fractions:?}");
        for (transport, submitted, on_time) in fractions {
            assert!(submitted > 10, "{transport}: {submitted} submitted");
            assert_eq!(
                on_time, submitted,
                "{transport}: {on_time}/{submitted} on time"
            );
        }
    });
    let down = Command::new(ADAPTNET)
        .args(["link", "down", &name])
        .output()
        .expect("down");
    assert!(down.status.success());
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
