//! A NAI-TCP server against careless and hostile peers (loopback): it holds at most
//! `max_connections` accepted connections (the rest are closed at once and counted), closes
//! a connection that sends nothing for `idle_timeout` (its handle learns `TimedOut`), and
//! keeps a connection that is busy however long it lives.

use adaptnet_core::nai::SendOptions;
use adaptnet_runtime::ConnectionError;
use adaptnet_runtime::message::{Endpoint, EndpointOptions, Transport};
use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn server(max_connections: usize, idle: Option<Duration>) -> Endpoint {
    let mut options = EndpointOptions::server(Transport::NaiTcp);
    let b = options.baseline_mut().expect("a baseline");
    b.max_connections = max_connections;
    b.idle_timeout = idle;
    Endpoint::bind("127.0.0.1:0".parse().expect("addr"), options).expect("bind")
}

/// Blocks until the server closes `s` (EOF or reset), at most `limit`; whether it did.
fn closed_within(mut s: TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).expect("timeout");
    let mut b = [0u8; 8];
    match s.read(&mut b) {
        Ok(0) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Ok(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_closed_at_once_and_counted() {
    let server = server(2, None);
    let at = server.local_addr();
    let kept: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(at).expect("connect"))
        .collect();
    let a = server.accept().await.expect("first");
    let b = server.accept().await.expect("second");
    let third = TcpStream::connect(at).expect("the kernel completes the handshake");
    let closed = tokio::task::spawn_blocking(move || closed_within(third, Duration::from_secs(10)))
        .await
        .expect("reader");
    assert!(closed, "the third connection is closed by the server");
    assert_eq!(server.stats().await.expect("stats").refused, 1);
    assert_eq!(server.stats().await.expect("stats").connections, 2);
    // Room again once one goes.
    drop(a);
    drop(kept);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let _again = TcpStream::connect(at).expect("connect");
    let c = tokio::time::timeout(Duration::from_secs(10), server.accept())
        .await
        .expect("accepted in time")
        .expect("accepted");
    assert_ne!(c.peer(), b.peer());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_at_the_idle_timeout_and_a_busy_one_is_not() {
    let idle = Duration::from_millis(400);
    let server = server(16, Some(idle));
    let at = server.local_addr();
    let started = Instant::now();
    let silent = TcpStream::connect(at).expect("connect");
    let accepted = server.accept().await.expect("accepted");
    let closed =
        tokio::task::spawn_blocking(move || closed_within(silent, Duration::from_secs(10)))
            .await
            .expect("reader");
    assert!(closed, "the silent connection was closed");
    assert!(started.elapsed() >= idle, "not before the timeout");
    assert!(matches!(accepted.closed().await, ConnectionError::TimedOut));

    // A client that sends every 100 ms for five idle timeouts stays connected.
    let client = Endpoint::bind(
        "127.0.0.1:0".parse().expect("addr"),
        EndpointOptions::client(Transport::NaiTcp),
    )
    .expect("client");
    let conn = client.connect(at).await.expect("connected");
    let incoming = server.accept().await.expect("accepted");
    for _ in 0..20 {
        conn.send(vec![1; 100], SendOptions::default())
            .await
            .expect("sent");
        incoming.recv().await.expect("received");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        incoming.close_reason().is_none(),
        "the busy connection lives"
    );
}
