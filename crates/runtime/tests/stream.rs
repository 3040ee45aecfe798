//! The stream transport over loopback: bytes arrive exactly, with and without loss, streams
//! sharing one CM all complete, and the lifecycle (drop a stream, drop the endpoint, a slow
//! reader) ends or bounds things as documented.

use adaptnet_runtime::cm::{Cm, CmBackend, CmOptions};
use adaptnet_runtime::stream::{StreamConn, StreamEndpoint, StreamOptions};
use adaptnet_runtime::{ConnectionError, WriteError};
use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const EIGHT_MB: usize = 8 << 20;

/// Deterministic, non-repeating-looking test bytes.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[0]
        })
        .collect()
}

fn hash(data: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(data);
    h.finish()
}

/// Sends `data` over `n` streams from `client` to `server` (each stream the whole `data`)
/// and returns what each accepted stream read.
async fn transfer(
    client_opts: StreamOptions,
    server_opts: StreamOptions,
    data: Vec<u8>,
    n: usize,
) -> Vec<Vec<u8>> {
    let server = StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), server_opts).unwrap();
    let client = StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), client_opts).unwrap();
    let addr = server.local_addr();
    let mut writers = Vec::new();
    for _ in 0..n {
        let mut s = client.connect(addr).await.expect("connect");
        let d = data.clone();
        writers.push(tokio::spawn(async move {
            s.write_all(&d).await.expect("write");
            s.shutdown().await.expect("shutdown");
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..n {
        let mut s = server.accept().await.expect("accept");
        readers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.expect("read");
            got
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let mut out = Vec::new();
    for r in readers {
        out.push(r.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_megabytes_arrive_byte_exact() {
    let data = pattern(EIGHT_MB, 1);
    let got = tokio::time::timeout(
        Duration::from_secs(60),
        transfer(
            StreamOptions::client(),
            StreamOptions::server(),
            data.clone(),
            1,
        ),
    )
    .await
    .expect("transfer within 60 s");
    assert_eq!(got[0].len(), data.len());
    assert_eq!(hash(&got[0]), hash(&data));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_megabytes_arrive_byte_exact_with_every_50th_datagram_dropped() {
    let data = pattern(EIGHT_MB, 2);
    // SACK (RFC 6675 recovery) repairs the regular losses without waiting for timeouts.
    let lossy = |mut o: StreamOptions| {
        o.core.sack = true;
        o.drop_every_nth_sent = Some(50);
        o
    };
    let got = tokio::time::timeout(
        Duration::from_secs(240),
        transfer(
            lossy(StreamOptions::client()),
            lossy(StreamOptions::server()),
            data.clone(),
            1,
        ),
    )
    .await
    .expect("transfer within 240 s");
    assert_eq!(got[0].len(), data.len());
    assert_eq!(hash(&got[0]), hash(&data));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_streams_under_one_cm_both_complete() {
    let data = pattern(2 << 20, 3);
    let got = tokio::time::timeout(
        Duration::from_secs(60),
        transfer(
            StreamOptions::client().with_cm(),
            StreamOptions::server(),
            data.clone(),
            2,
        ),
    )
    .await
    .expect("transfers within 60 s");
    for g in &got {
        assert_eq!(hash(g), hash(&data));
    }
}

/// `Congestion::Adtcp` on both ends (papers/004): bytes arrive exactly through losses, the
/// client's data carry ADTCP send times and the server's ACKs carry its state reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adtcp_streams_carry_the_option_both_ways_and_arrive_byte_exact() {
    let data = pattern(1 << 20, 4);
    let lossy = |mut o: StreamOptions| {
        o.core.sack = true;
        o.drop_every_nth_sent = Some(100);
        o
    };
    let server = StreamEndpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        lossy(StreamOptions::server().with_adtcp()),
    )
    .unwrap();
    let client = StreamEndpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        lossy(StreamOptions::client().with_adtcp()),
    )
    .unwrap();
    let mut out = client.connect(server.local_addr()).await.expect("connect");
    let d = data.clone();
    let writer = tokio::spawn(async move {
        out.write_all(&d).await.expect("write");
        out.shutdown().await.expect("shutdown");
    });
    let mut incoming = server.accept().await.expect("accept");
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(120), incoming.read_to_end(&mut got))
        .await
        .expect("transfer within 120 s")
        .expect("read");
    writer.await.unwrap();
    assert_eq!(hash(&got), hash(&data));
    let (cs, ss) = (client.stats().await.unwrap(), server.stats().await.unwrap());
    assert!(
        cs.injected_drops > 0 && ss.injected_drops > 0,
        "losses both ways"
    );
    assert!(
        cs.adtcp_options_received * 2 > cs.datagrams_received,
        "reports on the server's ACKs: {cs:?}"
    );
    assert!(
        ss.adtcp_options_received * 2 > ss.datagrams_received,
        "send times on the client's data: {ss:?}"
    );
}

/// Issue 9 item 6: a listening endpoint keeps no state for SYNs — each gets a SYN cookie
/// SYN-ACK, no larger than 3× the SYN — and none for ACKs that echo no cookie of its own;
/// a real client's handshake still completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_keeps_no_state_before_a_cookie_is_echoed() {
    use adaptnet_core::tcp::{Flags, TcpRepr};
    use adaptnet_runtime::stream::LISTEN_PORT;
    let server =
        StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::server()).unwrap();
    let flood = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let segment = |i: u16, flags: Flags, ack: u32| {
        let repr = TcpRepr {
            src_port: 1000 + i,
            dst_port: LISTEN_PORT,
            seq: 0x1234_0000 ^ u32::from(i),
            ack,
            flags,
            window: 65_535,
            mss: flags.syn.then_some(1400),
            window_scale: flags.syn.then_some(7),
            sack_permitted: flags.syn,
            sack: adaptnet_core::tcp::SackBlocks::EMPTY,
            timestamps: None,
            adtcp: None,
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        let n = repr.emit(&mut buf).unwrap();
        buf.truncate(n);
        buf
    };
    let syn = Flags {
        syn: true,
        ..Flags::default()
    };
    let (mut sent, mut answered) = (0usize, 0usize);
    for i in 0..200 {
        let d = segment(i, syn, 0);
        sent += d.len();
        flood.send_to(&d, server.local_addr()).await.unwrap();
    }
    // ACKs that echo nothing the server chose (a guessed ISS).
    let ack = Flags {
        ack: true,
        ..Flags::default()
    };
    for i in 0..50 {
        let d = segment(i, ack, 0xdead_beef ^ u32::from(i));
        sent += d.len();
        flood.send_to(&d, server.local_addr()).await.unwrap();
    }
    let mut buf = [0u8; 2048];
    while let Ok(Ok(n)) =
        tokio::time::timeout(Duration::from_millis(300), flood.recv(&mut buf)).await
    {
        answered += n;
    }
    let stats = server.stats().await.unwrap();
    assert_eq!(stats.cookies_sent, 200, "{stats:?}");
    assert_eq!(
        stats.open_streams, 0,
        "no state for SYNs or guessed ACKs: {stats:?}"
    );
    assert_eq!(stats.unknown, 50, "{stats:?}");
    assert!(
        answered > 0 && answered <= 3 * sent,
        "{answered} B for {sent} B"
    );
    // A real client's handshake completes and its bytes arrive.
    let client =
        StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::client()).unwrap();
    let mut out = client.connect(server.local_addr()).await.expect("connect");
    out.write_all(b"validated").await.unwrap();
    out.shutdown().await.unwrap();
    let mut incoming = server.accept().await.expect("accept");
    let mut got = Vec::new();
    incoming.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"validated");
    assert_eq!(server.stats().await.unwrap().cookies_sent, 201);
}

/// Reads `s` to its end: the bytes and how it ended (`Ok`: end of stream).
async fn drain(mut s: StreamConn) -> (Vec<u8>, std::io::Result<()>) {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match s.read(&mut buf).await {
            Ok(0) => return (got, Ok(())),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return (got, Err(e)),
        }
    }
}

/// A CM of the test's own on this runtime.
fn own_cm() -> Cm {
    Cm::new(CmOptions {
        bind: "127.0.0.1:0".parse().unwrap(),
        peer_port: None,
        backend: CmBackend::InProcess,
        ..CmOptions::default()
    })
    .expect("cm")
}

/// A NewReno client and a CM-delegated one.
fn both_controls() -> [StreamOptions; 2] {
    [
        StreamOptions::client(),
        StreamOptions::client().with_cm_of(own_cm()),
    ]
}

/// A server, a client with `client_opts`, and a stream between them.
async fn connected(client_opts: StreamOptions) -> (StreamEndpoint, StreamEndpoint, StreamConn) {
    let server =
        StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), StreamOptions::server()).unwrap();
    let client = StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), client_opts).unwrap();
    let out = client.connect(server.local_addr()).await.expect("connect");
    (server, client, out)
}

/// Issue 17: dropping the endpoint mid-transfer closes its streams; the peer sees the end
/// (the FIN after what was written, or a reset) within a second, and the writer learns
/// that the endpoint closed. NewReno and CM-delegated alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_endpoint_mid_transfer_ends_the_peer_within_a_second() {
    for client_opts in both_controls() {
        let (server, client, mut out) = connected(client_opts).await;
        let writer = tokio::spawn(async move {
            let chunk = vec![5u8; 64 << 10];
            loop {
                if let Err(e) = out.write_all(&chunk).await {
                    return e;
                }
            }
        });
        let incoming = server.accept().await.expect("accept");
        let reader = tokio::spawn(drain(incoming));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let dropped_at = Instant::now();
        drop(client);
        let (got, how) = tokio::time::timeout(Duration::from_secs(1), reader)
            .await
            .expect("the peer saw the end within 1 s")
            .unwrap();
        eprintln!(
            "peer saw the end after {:?}: {} bytes, {how:?}",
            dropped_at.elapsed(),
            got.len()
        );
        assert!(!got.is_empty() && got.iter().all(|&b| b == 5));
        let e = tokio::time::timeout(Duration::from_secs(1), writer)
            .await
            .expect("the writer learnt")
            .unwrap();
        let lost = e.get_ref().and_then(|e| e.downcast_ref::<WriteError>());
        assert!(
            matches!(
                lost,
                Some(WriteError::ConnectionLost(ConnectionError::EndpointClosed))
            ),
            "{e:?}"
        );
    }
}

/// Issue 17: dropping the last handle of a stream closes it gracefully: everything written
/// arrives, then the end of stream, within a second; a clone keeps the stream open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_stream_handle_sends_the_rest_then_the_end() {
    for client_opts in both_controls() {
        let (server, client, mut out) = connected(client_opts).await;
        let data = pattern(1 << 20, 9);
        out.write_all(&data).await.expect("write");
        let clone = out.clone();
        drop(out);
        let incoming = server.accept().await.expect("accept");
        let reader = tokio::spawn(drain(incoming));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!reader.is_finished(), "a clone still holds the stream");
        let dropped_at = Instant::now();
        drop(clone);
        let (got, how) = tokio::time::timeout(Duration::from_secs(1), reader)
            .await
            .expect("the peer saw the end within 1 s")
            .unwrap();
        eprintln!("end after {:?}", dropped_at.elapsed());
        how.expect("end of stream, not an error");
        assert_eq!(hash(&got), hash(&data));
        // The endpoint keeps working.
        let mut again = client.connect(server.local_addr()).await.expect("connect");
        again.write_all(b"x").await.unwrap();
        drop(client);
    }
}

/// Issue 17: a slow reader never makes the bytes held between the two applications grow
/// past the configured bounds (the sender's buffer, the receiver's window and its read
/// buffer) — flow control holds the writer — and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_bounds_what_is_held_and_loses_nothing() {
    const SEND: usize = 256 << 10;
    const WINDOW: u64 = 256 << 10;
    const READ: usize = 128 << 10;
    let mut server_opts = StreamOptions::server();
    server_opts.core.recv_buffer = WINDOW;
    server_opts.read_buffer_bytes = READ;
    let mut client_opts = StreamOptions::client();
    client_opts.send_buffer_bytes = SEND;
    let server = StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), server_opts).unwrap();
    let client = StreamEndpoint::bind("127.0.0.1:0".parse().unwrap(), client_opts).unwrap();
    let data = pattern(4 << 20, 11);
    let written = Arc::new(AtomicU64::new(0));
    let mut out = client.connect(server.local_addr()).await.expect("connect");
    let (w, d) = (written.clone(), data.clone());
    let writer = tokio::spawn(async move {
        for chunk in d.chunks(16 << 10) {
            out.write_all(chunk).await.expect("write");
            w.fetch_add(chunk.len() as u64, Ordering::SeqCst);
        }
        out.shutdown().await.expect("shutdown");
    });
    let mut incoming = server.accept().await.expect("accept");
    let mut got = Vec::new();
    let mut buf = vec![0u8; 32 << 10];
    let mut most_held = 0;
    let bound = (SEND + READ) as u64 + WINDOW + (16 << 10);
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let n = incoming.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            let held = written.load(Ordering::SeqCst) - got.len() as u64;
            most_held = most_held.max(held);
            assert!(held <= bound, "{held} bytes held > bound {bound}");
            // A slow application: 32 KB every 2 ms at most.
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("the transfer completes");
    writer.await.unwrap();
    eprintln!("most held between the applications: {most_held} B (bound {bound} B)");
    assert_eq!(hash(&got), hash(&data), "nothing lost");
}
