//! `adaptnet serve` and `adaptnet bulk` over loopback: the port plan (UDP/TCP P for ATP and
//! NAI-TCP, P+1 for the stream and kernel-TCP bulk sinks) and the JSON report.

use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::free_base_port;

fn bulk(to: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_adaptnet"))
        .args(["bulk", "--to", to, "--json"])
        .args(args)
        .output()
        .expect("run adaptnet bulk");
    assert!(
        out.status.success(),
        "bulk {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

#[test]
fn bulk_stream_with_cm_and_tcp_against_serve() {
    let p = free_base_port();
    let to = format!("127.0.0.1:{p}");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_adaptnet"))
        .args(["serve", "--listen", &to, "-t", "20"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start adaptnet serve");
    std::thread::sleep(Duration::from_millis(500));
    let stream = bulk(
        &to,
        &["--transport", "stream", "-P", "2", "--cm", "-t", "1"],
    );
    let tcp = bulk(&to, &["--transport", "tcp", "-P", "2", "-t", "1"]);
    let _ = serve.kill();
    let _ = serve.wait();
    for (name, r) in [("stream", &stream), ("tcp", &tcp)] {
        let results = r["results"].as_array().expect("results");
        assert_eq!(results.len(), 2, "{name}: two flows");
        for f in results {
            assert!(f["bytes"].as_u64().unwrap_or(0) > 1_000_000, "{name}: {f}");
        }
        assert!(
            r["total_mbit_per_s"].as_f64().unwrap_or(0.0) > 10.0,
            "{name}: {r}"
        );
        assert!(r["jain"].as_f64().unwrap_or(0.0) > 0.8, "{name}: {r}");
        assert!(!r["intervals"].as_array().expect("intervals").is_empty());
    }
    assert_eq!(stream["cm"], true);
}
