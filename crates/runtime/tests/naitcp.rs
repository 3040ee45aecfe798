//! NAI-TCP and NAI-MTCPk over kernel TCP on loopback: bytes arrive whole, every message gets
//! one outcome, MTCP serves the urgent level on its own connection and terminates a message
//! whose timer expires.

use adaptnet_core::nai::baseline::BaselineKind;
use adaptnet_core::nai::{Outcome, Priority, SendOptions};
use adaptnet_runtime::naitcp::{BaselineClient, BaselineServer};
use std::time::Duration;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nai_tcp_delivers_every_message_whole_in_order() {
    let mut server = BaselineServer::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = BaselineClient::connect(server.local_addr(), BaselineKind::NaiTcp, 2)
        .await
        .unwrap();
    let mut handles = Vec::new();
    for i in 0..30u8 {
        let opts = SendOptions {
            priority: Priority(i % 2),
            ..SendOptions::default()
        };
        let data = pattern(i, 1 + usize::from(i) * 5000);
        handles.push(client.send(data, opts).await.expect("queued"));
    }
    for i in 0..30u8 {
        let m = timeout(LIMIT, server.recv())
            .await
            .expect("in time")
            .expect("message");
        assert_eq!(m.id.0, u64::from(i), "NAI-TCP is one FIFO queue");
        assert!(
            m.data == pattern(i, 1 + usize::from(i) * 5000),
            "message {i} bytes differ"
        );
    }
    for h in handles {
        let o = timeout(LIMIT, h.outcome()).await.expect("in time");
        assert!(matches!(o, Outcome::Delivered { .. }), "{o:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtcp_serves_urgent_messages_beside_a_bulk_one_and_terminates_late_ones() {
    let mut server = BaselineServer::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let kind = BaselineKind::Mtcp {
        high_connections: 1,
    };
    let client = BaselineClient::connect(server.local_addr(), kind, 2)
        .await
        .unwrap();
    let low = SendOptions {
        priority: Priority(1),
        ..SendOptions::default()
    };
    let bulk = client.send(vec![9; 48 << 20], low).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    let high = SendOptions {
        priority: Priority(0),
        ..SendOptions::default()
    };
    let urgent = client.send(b"urgent".to_vec(), high).await.unwrap();
    let first = timeout(LIMIT, server.recv())
        .await
        .expect("in time")
        .expect("message");
    assert!(
        first.data == b"urgent",
        "urgent first (got {} bytes)",
        first.data.len()
    );
    assert!(matches!(urgent.outcome().await, Outcome::Delivered { .. }));
    assert!(matches!(
        timeout(LIMIT, bulk.outcome()).await.expect("in time"),
        Outcome::Delivered { .. }
    ));
    let second = timeout(LIMIT, server.recv())
        .await
        .expect("in time")
        .expect("message");
    assert_eq!(second.data.len(), 48 << 20);
    // A message that cannot be written before its 1 ms timer: MTCP stops writing it.
    let late = SendOptions {
        priority: Priority(1),
        timer: Some(Duration::from_millis(1)),
        ..SendOptions::default()
    };
    let h = client.send(vec![1; 48 << 20], late).await.unwrap();
    assert_eq!(
        timeout(LIMIT, h.outcome()).await.expect("in time"),
        Outcome::Expired { early: false }
    );
}
