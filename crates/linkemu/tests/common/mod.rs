//! What the emulator's tests share: bring a link up or skip loudly where this machine cannot
//! (not root, no iproute2, no /dev/net/tun) — except under `CI=true`, where a skip is a
//! failure — and run one timing-sensitive test at a time.
//!
//! Run these tests holding the machine's namespace lock, so no other namespace test overlaps:
//! `flock /tmp/adaptnet-netns.lock cargo test -p adaptnet-linkemu`.

#![allow(dead_code)] // each test file uses a different part

use adaptnet_linkemu::{EmulatedLink, EmulatorOptions, LinkEmuError};
use adaptnet_sim::scenario::link_table::LinkPair;
use std::sync::{Mutex, MutexGuard};

/// One measuring test at a time in a test binary: two links moving packets at once on two
/// cores would measure each other.
static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the test binary's measuring slot (a failed test does not poison it for the rest).
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where the shared traces live (never copied into the repository).
pub fn traces_dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
}

/// Skips loudly (fails under CI=true).
pub fn skip(test: &str, why: &str) {
    let msg = format!("SKIPPED link emulator test {test}: {why}");
    eprintln!("\n*** {msg} ***\n");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{msg} (CI must run the link emulator tests)"
    );
}

/// A link table from TOML text (trace paths relative to the shared traces directory).
pub fn links(text: &str) -> LinkPair {
    LinkPair::parse(text, "test link", &traces_dir()).expect("valid link table")
}

/// Brings up `links` between two namespaces, or `None` after saying why this machine cannot.
pub fn up(test: &str, links: LinkPair, opts: EmulatorOptions) -> Option<EmulatedLink> {
    match EmulatedLink::up(links, opts) {
        Ok(l) => Some(l),
        Err(e @ (LinkEmuError::NotRoot | LinkEmuError::NoIproute2 | LinkEmuError::NoTun)) => {
            skip(test, &e.to_string());
            None
        }
        Err(e) => panic!("{test}: bringing the link up: {e}"),
    }
}

/// Namespaces whose name starts with `prefix` (from `ip netns list`).
pub fn namespaces_named(prefix: &str) -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}
