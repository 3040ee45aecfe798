//! The stream transport over loopback: bytes arrive exactly, with and without loss, and
//! streams sharing one CM all complete.

use adaptnet_runtime::stream::{StreamEndpoint, StreamOptions};
use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::time::Duration;
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
