//! `adaptnet send` over each message transport (ATP, NAI-TCP, NAI-MTCP1) and `adaptnet bulk
//! --transport atp` against one `adaptnet serve` on loopback: every message of the workload
//! gets an outcome other than "no outcome", and bytes arrive.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::free_base_port;

fn adaptnet(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_adaptnet"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run adaptnet")
}

fn json_of(what: &str, out: Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

#[test]
fn send_over_every_message_transport_and_bulk_atp_against_serve() {
    let p = free_base_port();
    let to = format!("127.0.0.1:{p}");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_adaptnet"))
        .args(["serve", "--listen", &to, "-t", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start adaptnet serve");
    std::thread::sleep(Duration::from_millis(500));
    let experiments = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let experiments = experiments.to_str().expect("a UTF-8 path");
    let out = std::env::temp_dir().join(format!("adaptnet-send-test-{p}"));
    let transports = ["atp", "nai-tcp", "nai-mtcp1"];
    let sends: Vec<_> = transports
        .iter()
        .map(|t| {
            let dir = out.join(t);
            adaptnet(&[
                "send",
                "--to",
                &to,
                "--transport",
                t,
                "--workload",
                "prioritised",
                "-t",
                "2",
                "--json",
                "--experiments",
                experiments,
                "--out",
                dir.to_str().expect("a UTF-8 path"),
            ])
        })
        .collect();
    let reports: Vec<_> = sends
        .into_iter()
        .zip(transports)
        .map(|(child, t)| json_of(t, child.wait_with_output().expect("send ran")))
        .collect();
    let bulk = json_of(
        "bulk atp",
        adaptnet(&[
            "bulk",
            "--to",
            &to,
            "--transport",
            "atp",
            "-t",
            "1",
            "--json",
        ])
        .wait_with_output()
        .expect("bulk ran"),
    );
    let _ = serve.kill();
    let _ = serve.wait();
    // messages.csv: one row per message, its outcome column agreeing with the tallies.
    let rows: Vec<Vec<String>> = transports
        .iter()
        .map(|t| {
            let csv = std::fs::read_to_string(out.join(t).join("messages.csv"))
                .unwrap_or_else(|e| panic!("{t}: messages.csv: {e}"));
            let mut lines = csv.lines();
            assert_eq!(
                lines.next(),
                Some("id,level,size_bytes,submitted_s,timer_ms,outcome,margin_ms,outcome_s"),
                "{t}"
            );
            lines
                .map(|l| l.split(',').nth(5).unwrap_or("").to_owned())
                .collect()
        })
        .collect();
    let _ = std::fs::remove_dir_all(&out);
    for ((t, r), outcomes) in transports.iter().zip(&reports).zip(&rows) {
        let levels = r["levels"].as_array().expect("levels");
        let sum = |k: &str| -> u64 { levels.iter().map(|l| l[k].as_u64().unwrap_or(0)).sum() };
        assert!(sum("submitted") > 0, "{t}: {r}");
        assert_eq!(
            sum("abandoned"),
            0,
            "{t}: every message has an outcome: {r}"
        );
        assert!(sum("on_time") + sum("late") > 0, "{t}: {r}");
        assert!(r["delivered_bytes"].as_u64().unwrap_or(0) > 0, "{t}: {r}");
        let count = |o: &str| outcomes.iter().filter(|x| x.as_str() == o).count() as u64;
        assert_eq!(
            outcomes.len() as u64,
            sum("submitted"),
            "{t}: one row per message"
        );
        assert_eq!(count("on_time"), sum("on_time"), "{t}");
        assert_eq!(count("late"), sum("late"), "{t}");
        assert_eq!(count("rejected"), sum("rejected"), "{t}");
        assert_eq!(
            count("expired") + count("expired_early"),
            sum("expired"),
            "{t}"
        );
    }
    let results = bulk["results"].as_array().expect("results");
    assert!(
        results
            .iter()
            .all(|f| f["bytes"].as_u64().unwrap_or(0) > 1_000_000),
        "bulk atp: {bulk}"
    );
}
