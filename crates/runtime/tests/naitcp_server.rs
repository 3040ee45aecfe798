//! A NAI-TCP server against careless and hostile peers (loopback): it holds at most
//! `max_connections` accepted connections (the rest are closed at once and counted), closes
//! a connection that sends nothing for `idle_timeout` (its handle learns `TimedOut`), and
//! keeps a connection that is busy however long it lives.

use adaptnet_core::nai::{Outcome, SendOptions};
use adaptnet_runtime::ConnectionError;
use adaptnet_runtime::message::{Endpoint, EndpointOptions, Transport};
use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod common;

fn server(max_connections: usize, idle: Option<Duration>) -> Endpoint {
    server_of(Transport::NaiTcp, max_connections, idle)
}

fn server_of(transport: Transport, max_connections: usize, idle: Option<Duration>) -> Endpoint {
    let mut options = EndpointOptions::server(transport);
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

/// A NAI-MTCP1 client busy on its high level only, against a server whose idle timeout is
/// 400 ms, for five idle timeouts: whether its connection was still up at the end.
async fn mtcp_with_an_unused_level_lives(heartbeat: Option<Duration>) -> bool {
    let server = server_of(Transport::NaiMtcp(1), 16, Some(Duration::from_millis(400)));
    let mut options = EndpointOptions::client(Transport::NaiMtcp(1)).with_levels(2);
    options
        .baseline_mut()
        .expect("a baseline")
        .config
        .heartbeat_after = heartbeat;
    let client = Endpoint::bind("127.0.0.1:0".parse().expect("addr"), options).expect("client");
    let conn = client
        .connect(server.local_addr())
        .await
        .expect("connected");
    let mut messages = common::messages_of(server);
    for _ in 0..20 {
        let Ok(h) = conn.send(vec![1; 100], SendOptions::default()).await else {
            return false;
        };
        if !matches!(h.outcome().await, Outcome::Delivered { .. }) {
            return false;
        }
        messages.recv().await.expect("received");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    conn.close_reason().is_none()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_mtcp_level_survives_the_servers_idle_timeout_by_its_heartbeats() {
    // Without heartbeats the server closes the low level's idle TCP connection, which ends
    // the client's whole connection: the failure mode the heartbeat exists for.
    assert!(!mtcp_with_an_unused_level_lives(None).await);
    assert!(mtcp_with_an_unused_level_lives(Some(Duration::from_millis(100))).await);
}
