//! Measurements behind EXPERIMENTS.md's "window updates, refused connects, memory per
//! stream" (issue 17), run by hand in release mode on any version of the stream transport
//! (they use only its long-standing API):
//! `cargo test --release -p adaptnet-runtime --test stream_measure -- --ignored --nocapture --test-threads=1`.
//! They print numbers and assert only that every byte arrives.

use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The process's resident set, bytes (Linux), after the allocator gave back what it holds
/// free (glibc keeps freed memory in its arenas: without the trim, RSS counts the transfer's
/// freed buffers as well as what the streams hold).
fn rss_bytes() -> u64 {
    // SAFETY: malloc_trim only releases free memory; it takes no pointers.
    unsafe { libc::malloc_trim(0) };
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// 2 MiB to a reader taking 32 KiB every 5 ms through a 64 KiB window, default timers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand in release mode"]
async fn measure_slow_reader_rate() {
    for run in 0..5 {
        let mut server_opts = StreamOptions::server();
        server_opts.core.recv_buffer = 64 << 10;
        server_opts.read_buffer_bytes = 32 << 10;
        let server = StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), server_opts).unwrap();
        let client =
            StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::client()).unwrap();
        let mut out = client.connect(server.local_addr()).await.expect("connect");
        let writer = tokio::spawn(async move {
            out.write_all(&vec![7u8; 2 << 20]).await.expect("write");
            out.shutdown().await.expect("shutdown");
        });
        let mut incoming = server.accept().await.expect("accept");
        let mut buf = vec![0u8; 32 << 10];
        let (mut got, start) = (0, Instant::now());
        loop {
            let n = incoming.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            got += n;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        writer.await.unwrap();
        assert_eq!(got, 2 << 20);
        let took = start.elapsed();
        let rate = (2 << 20) as f64 / took.as_secs_f64() / 1e6;
        println!("slow reader run {run}: {took:.2?}, {rate:.2} MB/s (reader's ceiling 6.55)");
    }
}

/// 20 streams carry 5 MiB each (more than the 4 MiB window, so a ring would have wrapped),
/// then sit idle and open: the process's resident set before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand in release mode"]
async fn measure_idle_streams_resident_memory() {
    const STREAMS: usize = 20;
    const EACH: usize = 5 << 20;
    let server =
        StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::server()).unwrap();
    let client =
        StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::client()).unwrap();
    let data = vec![1u8; EACH];
    let before = rss_bytes();
    let mut held = Vec::new();
    for _ in 0..STREAMS {
        let mut out = client.connect(server.local_addr()).await.expect("connect");
        let d = data.clone();
        let writer = tokio::spawn(async move {
            out.write_all(&d).await.expect("write");
            out
        });
        let mut incoming = server.accept().await.expect("accept");
        let mut buf = vec![0u8; EACH];
        incoming.read_exact(&mut buf).await.expect("read");
        held.push((writer.await.unwrap(), incoming));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_bytes();
    println!(
        "{STREAMS} idle streams after 5 MiB each: RSS {:.1} MB -> {:.1} MB ({:.2} MB a stream, both ends)",
        before as f64 / 1e6,
        after as f64 / 1e6,
        after.saturating_sub(before) as f64 / 1e6 / STREAMS as f64
    );
    drop(held);
}
