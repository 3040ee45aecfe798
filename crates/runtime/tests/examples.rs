//! Runs the runnable examples of `crates/runtime/examples` and checks that each ends well
//! within its time. `cargo test` builds the examples next to the test binaries; when only
//! this test was built (`cargo test --test examples`), it says so and checks nothing.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Each example and what its output must say.
const EXAMPLES: &[(&str, &str)] = &[
    ("atp_hello", "server received"),
    ("atp_bulk", ""),
    ("core_atp_by_hand", "Closed(Application)"),
    ("naitcp_messages", "the connection ended"),
    ("tpba_media", "received 600 of 600 frames"),
    ("env_events", "lo cost = 9"),
];

fn examples_dir() -> Option<PathBuf> {
    // target/<profile>/deps/<this test> → target/<profile>/examples
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.join("examples"))
}

#[test]
fn every_runnable_example_runs_to_the_end() {
    let Some(dir) = examples_dir() else {
        eprintln!("SKIPPED: no path to the examples");
        return;
    };
    for (name, says) in EXAMPLES {
        let exe = dir.join(name);
        if !exe.is_file() {
            eprintln!("SKIPPED {name}: not built (run `cargo test -p adaptnet-runtime`)");
            continue;
        }
        let started = Instant::now();
        let out = Command::new(&exe).output().expect("run the example");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(says), "{name} says {says:?}: {stdout}");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{name} ends by itself"
        );
    }
}
