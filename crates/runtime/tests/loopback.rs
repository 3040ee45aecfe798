//! The ATP runtime API over real UDP sockets on loopback: handshake, messages with bytes both
//! ways, priorities, callback timers, abort/defer/resume, bandwidth notifications, close.

use adaptnet_core::nai::{NaiError, OnExpiry, Outcome, Priority, QueueId, SendOptions};
use adaptnet_runtime::message::{
    Connection, ConnectionEvent, Endpoint, EndpointOptions, Transport,
};
use adaptnet_runtime::{ConnectError, ConnectionError, SendError};
use std::time::Duration;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

async fn pair() -> (Endpoint, Endpoint, Connection, Connection) {
    let server = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointOptions::server(Transport::Atp),
    )
    .expect("bind server");
    let client = Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        EndpointOptions::client(Transport::Atp),
    )
    .expect("bind client");
    let c = timeout(LIMIT, client.connect(server.local_addr()))
        .await
        .expect("in time")
        .expect("connected");
    let s = timeout(LIMIT, server.accept())
        .await
        .expect("in time")
        .expect("accepted");
    (server, client, c, s)
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_arrive_whole_both_ways_with_one_outcome_each() {
    let (server, _client, c, s) = pair().await;
    let mut handles = Vec::new();
    for i in 0..50u8 {
        let data = pattern(i, 1 + usize::from(i) * 997);
        handles.push(
            c.send(data, SendOptions::default())
                .await
                .expect("admitted"),
        );
    }
    let reply = s
        .send(b"ack".to_vec(), SendOptions::default())
        .await
        .expect("admitted");
    let mut got = Vec::new();
    for _ in 0..50 {
        let m = timeout(LIMIT, s.recv())
            .await
            .expect("in time")
            .expect("message");
        got.push(m);
    }
    got.sort_by_key(|m| m.id);
    for (i, m) in got.iter().enumerate() {
        let i = u8::try_from(i).unwrap();
        assert!(
            m.data == pattern(i, 1 + usize::from(i) * 997),
            "message {i} bytes differ"
        );
    }
    for h in handles {
        let o = timeout(LIMIT, h.outcome()).await.expect("in time");
        assert!(matches!(o, Outcome::Delivered { .. }), "{o:?}");
    }
    assert!(matches!(reply.outcome().await, Outcome::Delivered { .. }));
    let stats = server.stats().await.expect("stats");
    assert_eq!(stats.connections, 1);
    let atp = stats.atp.expect("ATP's counters");
    assert_eq!(
        atp.core.retries_sent, 1,
        "one stateless retry in the handshake"
    );
    assert_eq!(atp.core.malformed, 0);
    assert!(c.bandwidth() > 0.0, "the estimator measured the path");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_priority_overtakes_a_bulk_transfer() {
    let (_server, _client, c, s) = pair().await;
    let low = SendOptions {
        priority: Priority(1),
        ..SendOptions::default()
    };
    // Large enough that it is still in flight when the urgent message comes (loopback moves
    // a few hundred Mbit/s here).
    let bulk = c.send(vec![7; 48 << 20], low).await.expect("admitted");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let high = SendOptions {
        priority: Priority(0),
        ..SendOptions::default()
    };
    let urgent = c.send(b"urgent".to_vec(), high).await.expect("admitted");
    let first = timeout(LIMIT, s.recv())
        .await
        .expect("in time")
        .expect("message");
    assert!(
        first.data == b"urgent",
        "the high-priority message arrives first (got {} bytes)",
        first.data.len()
    );
    assert!(matches!(urgent.outcome().await, Outcome::Delivered { .. }));
    let second = timeout(Duration::from_secs(60), s.recv())
        .await
        .expect("in time")
        .expect("message");
    assert_eq!(second.data.len(), 48 << 20);
    assert!(matches!(bulk.outcome().await, Outcome::Delivered { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_expiry_reaches_the_application_which_resumes_or_cancels() {
    let (_server, _client, c, s) = pair().await;
    // Let the estimator measure first, so admission control has a rate.
    c.send(vec![0; 10_000], SendOptions::default())
        .await
        .unwrap()
        .outcome()
        .await;
    let _ = timeout(LIMIT, s.recv()).await;
    // A large message, deferred at once (before ATP can have sent it all), then given a
    // 300 ms callback timer: the timer runs out while it waits, and the app is told.
    let opts = SendOptions {
        priority: Priority(0),
        timer: None,
        on_expiry: OnExpiry::Suspend,
    };
    let size = 32 << 20;
    let h = c.send(vec![1; size], opts).await.expect("admitted");
    h.defer().await.expect("deferred");
    h.set_timer(Some(Duration::from_millis(300)))
        .await
        .expect("timer set");
    let ev = timeout(LIMIT, c.next_event())
        .await
        .expect("in time")
        .expect("event");
    match ev {
        ConnectionEvent::TimerExpired { id, early, .. } => {
            assert_eq!(id, h.id());
            assert!(!early, "deferred: expired by its timer, not the estimate");
        }
        other => panic!("unexpected {other:?}"),
    }
    // The application continues it: the message has no deadline now and completes.
    h.resume().await.expect("resumed");
    assert!(matches!(h.outcome().await, Outcome::Delivered { .. }));
    // Cancelled before it was all sent: Cancelled, never delivered.
    let h2 = c.send(vec![2; size], SendOptions::default()).await.unwrap();
    h2.defer().await.unwrap();
    h2.cancel().await.unwrap();
    assert_eq!(h2.outcome().await, Outcome::Cancelled);
    let delivered = timeout(LIMIT, s.recv())
        .await
        .expect("in time")
        .expect("message");
    assert_eq!(delivered.data.len(), size);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bandwidth_notification_fires_when_the_estimate_leaves_the_range() {
    let (_server, _client, c, _s) = pair().await;
    // The estimate starts at zero; a range above zero is left as soon as it is measured.
    c.register_bandwidth_range(0.0, 1.0)
        .await
        .expect("registered");
    c.send(vec![0; 100_000], SendOptions::default())
        .await
        .unwrap();
    let ev = timeout(LIMIT, c.next_event())
        .await
        .expect("in time")
        .expect("event");
    assert!(
        matches!(ev, ConnectionEvent::Bandwidth { available_bytes_per_s, .. } if available_bytes_per_s > 1.0),
        "{ev:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_is_graceful_and_seen_by_the_peer() {
    let (_server, _client, c, s) = pair().await;
    let h = c
        .send(vec![9; 200_000], SendOptions::default())
        .await
        .unwrap();
    timeout(LIMIT, c.close(Duration::from_secs(10)))
        .await
        .expect("in time");
    assert!(matches!(h.outcome().await, Outcome::Delivered { .. }));
    let m = timeout(LIMIT, s.recv())
        .await
        .expect("in time")
        .expect("message");
    assert_eq!(m.data.len(), 200_000);
    // The peer learns why; both ends' queues end with it after what they held.
    assert!(matches!(
        timeout(LIMIT, s.closed()).await.expect("in time"),
        ConnectionError::ClosedByPeer(_)
    ));
    assert!(matches!(
        s.recv().await,
        Err(ConnectionError::ClosedByPeer(_))
    ));
    assert!(matches!(
        c.close_reason(),
        Some(ConnectionError::LocallyClosed)
    ));
    assert!(matches!(
        c.send(vec![1], SendOptions::default()).await,
        Err(SendError::ConnectionLost(ConnectionError::LocallyClosed))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_nobody_fails() {
    let mut options = EndpointOptions::client(Transport::Atp);
    let atp = options.atp_mut().expect("ATP options");
    atp.core.handshake.initial_timeout = Duration::from_millis(20);
    atp.core.handshake.max_attempts = 3;
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), options).unwrap();
    // A bound socket that never answers.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let r = timeout(LIMIT, client.connect(silent.local_addr().unwrap()))
        .await
        .expect("in time");
    assert!(matches!(r, Err(ConnectError::HandshakeFailed(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_queues_share_the_connection_by_priority() {
    let (_server, _client, c, s) = pair().await;
    let second = c.create_queue().await.expect("a second queue");
    assert_ne!(second, QueueId(0));
    assert!(matches!(
        c.send_on(QueueId(99), b"x".to_vec(), SendOptions::default())
            .await,
        Err(SendError::Nai(NaiError::UnknownQueue(QueueId(99))))
    ));
    let low = SendOptions {
        priority: Priority(1),
        ..SendOptions::default()
    };
    let bulk = c
        .send_on(QueueId(0), vec![7; 48 << 20], low)
        .await
        .expect("admitted");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let high = SendOptions {
        priority: Priority(0),
        ..SendOptions::default()
    };
    let urgent = c
        .send_on(second, b"urgent".to_vec(), high)
        .await
        .expect("admitted");
    let first = timeout(LIMIT, s.recv())
        .await
        .expect("in time")
        .expect("message");
    assert_eq!(
        first.data, b"urgent",
        "the queue holding the higher priority is served first"
    );
    assert!(matches!(urgent.outcome().await, Outcome::Delivered { .. }));
    let rest = timeout(Duration::from_secs(60), s.recv())
        .await
        .expect("in time")
        .expect("message");
    assert_eq!(rest.data.len(), 48 << 20);
    assert!(matches!(bulk.outcome().await, Outcome::Delivered { .. }));
}
