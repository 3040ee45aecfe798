//! `adaptnet daemon` and `adaptnet monitor`: the daemon starts on the given socket with the
//! configured permissions, the monitor reads its state as JSON, and SIGTERM stops the daemon
//! and removes its socket file.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn daemon_serves_the_monitor_and_cleans_up_on_sigterm() {
    let socket =
        std::env::temp_dir().join(format!("adaptnet-h-daemon-{}-cli.sock", std::process::id()));
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_adaptnet"))
        .args(["daemon", "--socket"])
        .arg(&socket)
        .stderr(Stdio::null())
        .spawn()
        .expect("run adaptnet daemon");
    let start = Instant::now();
    while !socket.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no socket after 10 s"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mode = std::fs::metadata(&socket)
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o660, "the default socket mode");
    let out = Command::new(env!("CARGO_BIN_EXE_adaptnet"))
        .args(["monitor", "--json", "--count", "1", "--socket"])
        .arg(&socket)
        .output()
        .expect("run adaptnet monitor");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["clients"][0]["name"], "adaptnet monitor");
    assert!(v["stats"]["requests"].as_u64().is_some_and(|r| r >= 2));
    // SAFETY: kill(2) on our own child.
    let rc = unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = daemon.wait().expect("the daemon exits");
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists(), "socket removed on SIGTERM");
}
