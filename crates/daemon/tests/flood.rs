//! A flood of malformed and oversized requests (issue 20): the daemon answers each with an
//! error, keeps serving another client promptly, and its memory stays bounded. In a file of
//! its own so that the process's memory is this test's alone.

use adaptnet_core::cm::{FeedbackSource, FlowKey, PeerAddr};
use adaptnet_core::daemon::{ErrorCode, MAX_FRAME_LEN, Message};
use adaptnet_daemon::{ClientError, DaemonClient, DaemonConfig};
use std::time::Duration;
use tokio::time::{Instant, timeout};

const DEST: PeerAddr = PeerAddr(0x0a00_0001);

fn vm_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_malformed_and_oversized_requests_leaves_others_served() {
    let path = std::env::temp_dir().join(format!(
        "adaptnet-h-daemon-{}-flood.sock",
        std::process::id()
    ));
    let d = adaptnet_daemon::start(DaemonConfig::with_socket(&path))
        .await
        .expect("daemon starts");
    let good = DaemonClient::connect(&path, "good")
        .await
        .expect("connects");
    let (flow, _) = good
        .open(DEST, FlowKey(1), 1.0, FeedbackSource::Implicit)
        .await
        .expect("open");
    let bad = DaemonClient::connect(&path, "bad").await.expect("connects");
    // One malformed frame gets an error reply with its request number.
    match bad.call(Message::Grant { flow, bytes: 1 }).await {
        Err(ClientError::Refused { code, .. }) => assert_eq!(code, ErrorCode::NotAllowed),
        other => panic!("{other:?}"),
    }
    let rss_before = vm_rss_kb();
    let flooder = tokio::spawn({
        let bad = bad.clone();
        async move {
            let mut garbage = Vec::new();
            // Oversized frames (skipped unread), bad versions, unknown kinds, short bodies.
            let big = u32::try_from(MAX_FRAME_LEN * 64).expect("fits");
            garbage.extend(big.to_be_bytes());
            garbage.extend(std::iter::repeat_n(0x55u8, MAX_FRAME_LEN * 64));
            for i in 0..2000u32 {
                garbage.extend([0, 0, 0, 6, 9, 0x02, 0, 0, 0, 1]);
                garbage.extend([0, 0, 0, 6, 1, 0x3e]);
                garbage.extend(i.to_be_bytes());
                garbage.extend([0, 0, 0, 3, 1, 2, 3]);
            }
            let reps: usize = std::env::var("FLOOD_REPS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(20);
            for _ in 0..reps {
                if bad.send_raw(&garbage).await.is_err() {
                    break;
                }
            }
        }
    });
    // Meanwhile the good client is served, promptly.
    let mut worst = Duration::ZERO;
    for _ in 0..50 {
        let t = Instant::now();
        good.query(flow).await.expect("served during the flood");
        worst = worst.max(t.elapsed());
    }
    let _ = timeout(Duration::from_secs(30), flooder).await;
    let errors = wait_errors(&bad).await;
    let rss_after = vm_rss_kb();
    println!(
        "flood: {errors} error replies read by the flooder, good client's slowest query {worst:?}, RSS {rss_before} -> {rss_after} kB"
    );
    assert!(errors > 1000, "error replies: {errors}");
    good.query(flow).await.expect("still served");
    assert_eq!(d.client_count(), 2);
    // About 20 MB of flood went through; the daemon kept at most a frame and a read of it.
    assert!(
        rss_after < rss_before + 16 * 1024,
        "RSS grew {rss_before} -> {rss_after} kB"
    );
}

/// Error replies without a waiting call arrive as unsolicited frames (req_id 0 or unknown);
/// count what the flooder's reader saw as events.
async fn wait_errors(c: &DaemonClient) -> u64 {
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut n = 0;
    while let Some(m) = c.try_next_event() {
        if matches!(m, Message::Error { .. }) {
            n += 1;
        }
    }
    n + c.events_lost()
}
