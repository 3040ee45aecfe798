//! Issue 17's leftovers in the stream transport, over loopback: a slow reader's window
//! updates (the sender resumes when the application reads, not at its next probe), a
//! connect to where nothing listens fails at once, and idle streams hold storage for what
//! they buffer rather than for their windows.

use adaptnet_runtime::ConnectError;
use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `total` bytes to a reader that takes at most `read_bytes` every `every`, over a
/// receive window of `window` bytes; returns how long it took.
async fn slow_reader_transfer(
    total: usize,
    window: u64,
    read_bytes: usize,
    every: Duration,
    rto: Duration,
) -> Duration {
    let mut server_opts = StreamOptions::server();
    server_opts.core.recv_buffer = window;
    // The reader's queue is small so that core's window is what fills up.
    server_opts.read_buffer_bytes = read_bytes;
    let mut client_opts = StreamOptions::client();
    // The probe that would otherwise reopen a closed window is the retransmission timer.
    client_opts.core.rto.initial = rto;
    client_opts.core.rto.min = rto;
    let server = StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), server_opts).unwrap();
    let client = StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), client_opts).unwrap();
    let mut out = client.connect(server.local_addr()).await.expect("connect");
    let writer = tokio::spawn(async move {
        out.write_all(&vec![7u8; total]).await.expect("write");
        out.shutdown().await.expect("shutdown");
    });
    let mut incoming = server.accept().await.expect("accept");
    let mut buf = vec![0u8; read_bytes];
    let mut got = 0;
    let start = Instant::now();
    loop {
        let n = incoming.read(&mut buf).await.expect("read");
        if n == 0 {
            break;
        }
        got += n;
        tokio::time::sleep(every).await;
    }
    writer.await.unwrap();
    assert_eq!(got, total);
    start.elapsed()
}

/// RFC 9293 §3.8.6.2.2: reading from a full receive window sends a window update. The
/// sender's retransmission timer — its only other way to learn that the window opened — is
/// set to 30 s here, so without updates the transfer would stall for 30 s at the first
/// closed window; with them it proceeds at the reader's pace (32 KiB every 5 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_reopens_the_window_without_waiting_for_a_probe() {
    let took = tokio::time::timeout(
        Duration::from_secs(20),
        slow_reader_transfer(
            2 << 20,
            64 << 10,
            32 << 10,
            Duration::from_millis(5),
            Duration::from_secs(30),
        ),
    )
    .await
    .expect("the sender follows the reader's window updates, not its 30 s timer");
    let rate = (2 << 20) as f64 / took.as_secs_f64() / 1e6;
    eprintln!("slow reader, 2 MiB through a 64 KiB window: {took:?} ({rate:.2} MB/s)");
}

/// The same reader with the default timers, for the before/after comparison in
/// EXPERIMENTS.md (prints the time; asserts only that every byte arrives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_reader_with_default_timers_reports_its_rate() {
    let rto = StreamOptions::client().core.rto.min;
    let took = tokio::time::timeout(
        Duration::from_secs(120),
        slow_reader_transfer(2 << 20, 64 << 10, 32 << 10, Duration::from_millis(5), rto),
    )
    .await
    .expect("the transfer completes");
    let rate = (2 << 20) as f64 / took.as_secs_f64() / 1e6;
    eprintln!("slow reader, default timers: {took:?} ({rate:.2} MB/s)");
}

/// A connect to a UDP port where nothing listens fails with `Refused` as soon as the
/// network says so (ICMP port unreachable), not after the SYN's retransmissions (the first
/// of which alone waits 1 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_to_a_port_nobody_listens_on_is_refused_within_a_second() {
    let nobody = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = nobody.local_addr().unwrap();
    drop(nobody);
    let client =
        StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::client()).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(1), client.connect(to))
        .await
        .expect("the connect ends within a second");
    match r {
        Err(ConnectError::Refused(peer)) => assert_eq!(peer, to),
        other => panic!("expected Refused({to}), got {other:?}"),
    }
    // The endpoint still works: a server that does listen is reached.
    let server =
        StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::server()).unwrap();
    let mut s = client.connect(server.local_addr()).await.expect("connect");
    s.write_all(b"still here").await.unwrap();
    s.shutdown().await.unwrap();
    let mut got = Vec::new();
    let mut incoming = server.accept().await.expect("accept");
    incoming.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"still here");
}

/// Issue 17: `adaptnet serve` held about 5 MB per unfinished stream (a reassembly ring
/// allocated at the 4 MiB window, a read queue that kept its largest size). 200 streams that
/// carried 100 KB each and then sit idle, open, hold storage for what they buffer: a few
/// kilobytes each, through the endpoint's counter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_streams_hold_storage_for_what_they_buffer_not_their_windows() {
    const STREAMS: usize = 200;
    const EACH: usize = 100_000;
    let server =
        StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::server()).unwrap();
    let client =
        StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::client()).unwrap();
    let addr = server.local_addr();
    let accepting = {
        let server = server.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            for _ in 0..STREAMS {
                let mut s = server.accept().await.expect("accept");
                let mut buf = vec![0u8; EACH];
                s.read_exact(&mut buf).await.expect("read");
                // Kept open, idle: an unfinished stream.
                held.push(s);
            }
            held
        })
    };
    let mut outs = Vec::new();
    for _ in 0..STREAMS {
        let mut s = client.connect(addr).await.expect("connect");
        s.write_all(&vec![1u8; EACH]).await.expect("write");
        outs.push(s);
    }
    let held = tokio::time::timeout(Duration::from_secs(60), accepting)
        .await
        .expect("every stream delivered")
        .unwrap();
    // Let the last acknowledgements arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let s = server.stats().await.unwrap();
    let c = client.stats().await.unwrap();
    assert_eq!(s.open_streams, STREAMS as u64);
    let per_stream = (s.buffer_storage_bytes + c.buffer_storage_bytes) / STREAMS as u64;
    eprintln!(
        "{STREAMS} idle streams: server {} B, client {} B of buffer storage ({per_stream} B a stream, both ends)",
        s.buffer_storage_bytes, c.buffer_storage_bytes
    );
    // Every byte was read and acknowledged: once the streams have been quiet for a moment
    // their emptied buffers hold nothing.
    assert!(per_stream <= 4096, "{per_stream} B a stream");
    drop((held, outs));
}
