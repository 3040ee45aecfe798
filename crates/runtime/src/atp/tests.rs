//! ATP's send path without the driver's command queue (`state.rs`): a send is admitted in
//! the caller's task, and with senders racing a close every message still gets exactly one
//! outcome, every send after the close is refused, and every message reported `Delivered`
//! is one the receiving application reads.

use super::state::SharedState;
use crate::clock::Clock;
use crate::driver;
use crate::message::{Connection, Endpoint, EndpointOptions, Transport};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{Endpoint as CoreEndpoint, EndpointConfig};
use adaptnet_core::nai::{MessageId, Outcome, Priority, SendOptions};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::HashSet;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

/// A client connection to a fresh server, and the server's side of it.
async fn pair() -> (Endpoint, Endpoint, Connection, Connection) {
    let any = "127.0.0.1:0".parse().expect("address");
    let server =
        Endpoint::bind(any, EndpointOptions::server(Transport::Atp).with_levels(4)).expect("bind");
    let client =
        Endpoint::bind(any, EndpointOptions::client(Transport::Atp).with_levels(4)).expect("bind");
    let conn = timeout(LIMIT, client.connect(server.local_addr()))
        .await
        .expect("in time")
        .expect("connected");
    let accepted = timeout(LIMIT, server.accept())
        .await
        .expect("in time")
        .expect("accepted");
    (server, client, conn, accepted)
}

#[test]
fn test_core_time_never_goes_back_whichever_side_calls() {
    let shared = SharedState::new(
        CoreEndpoint::new(EndpointConfig::client()),
        1 << 20,
        Clock::new(),
        driver::Shared::new(),
    );
    let mut state = shared.lock();
    assert_eq!(state.at(Time::from_millis(5)), Time::from_millis(5));
    // The driver read its clock before a send took the lock at 7 ms.
    assert_eq!(state.at(Time::from_millis(7)), Time::from_millis(7));
    assert_eq!(state.at(Time::from_millis(6)), Time::from_millis(7));
    assert_eq!(state.at(Time::from_millis(9)), Time::from_millis(9));
}

#[tokio::test]
async fn test_a_send_is_admitted_in_the_callers_task() {
    let (_server, _client, conn, accepted) = pair().await;
    // One poll, on this single-threaded runtime, without the driver's task running: through
    // the command queue that poll could only be `Pending` (the driver has to answer).
    let mut send = pin!(conn.send(b"admitted".to_vec(), SendOptions::default()));
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(handle) = send.as_mut().poll(&mut cx) else {
        panic!("the send waited for the driver");
    };
    let handle = handle.expect("admitted");
    let m = timeout(LIMIT, accepted.recv())
        .await
        .expect("in time")
        .expect("message");
    assert_eq!((m.id, m.data.as_slice()), (handle.id(), &b"admitted"[..]));
    let outcome = timeout(LIMIT, handle.outcome()).await.expect("in time");
    assert!(matches!(outcome, Outcome::Delivered { .. }), "{outcome:?}");
}

#[tokio::test]
async fn test_one_shared_buffer_and_its_slices_are_delivered_byte_exact() {
    let (_server, _client, conn, accepted) = pair().await;
    // 100 KB of distinct bytes: a shifted or reused piece would not compare equal.
    let buffer = bytes::Bytes::from((0..100_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
    let sends = [
        buffer.clone(),
        buffer.clone(),
        buffer.slice(1_000..4_000),
        buffer.slice(99_999..),
    ];
    let mut handles = Vec::new();
    for data in sends.iter().cloned() {
        handles.push(
            conn.send(data, SendOptions::default())
                .await
                .expect("admitted"),
        );
    }
    for (h, want) in handles.iter().zip(&sends) {
        let m = timeout(LIMIT, accepted.recv())
            .await
            .expect("in time")
            .expect("message");
        assert_eq!(m.id, h.id());
        assert!(m.data == want.as_ref(), "message {:?}: bytes differ", m.id);
    }
    for h in handles {
        let outcome = timeout(LIMIT, h.outcome()).await.expect("in time");
        assert!(matches!(outcome, Outcome::Delivered { .. }), "{outcome:?}");
    }
    // The transport let its views of the buffer go with the outcomes: once this test's own
    // are dropped, the buffer is unshared.
    drop(sends);
    assert!(
        buffer.try_into_mut().is_ok(),
        "the transport still holds the buffer after every outcome"
    );
}

/// Senders racing a close, drawn from `seed`, checked; the messages delivered and abandoned.
async fn senders_race_a_close(seed: u64) -> (usize, usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (_server, _client, conn, accepted) = pair().await;
    let read_count = Arc::new(AtomicUsize::new(0));
    // Set just before `close` is called: from then a send may be refused (the close has begun
    // in core) before the connection's end is published to `close_reason`.
    let closing = Arc::new(AtomicBool::new(false));
    let reader = {
        let read_count = read_count.clone();
        tokio::spawn(async move {
            let mut ids = HashSet::new();
            while let Ok(m) = accepted.recv().await {
                assert!(ids.insert(m.id), "seed {seed}: {:?} read twice", m.id);
                read_count.fetch_add(1, Ordering::Relaxed);
            }
            ids
        })
    };
    let senders: Vec<_> = (0..rng.random_range(1..=4))
        .map(|_| {
            let conn = conn.clone();
            let closing = closing.clone();
            let count = rng.random_range(1..=60);
            let sizes: Vec<usize> = (0..count)
                .map(|_| rng.random_range(1..=(64 << 10)))
                .collect();
            let levels: Vec<u8> = (0..count).map(|_| rng.random_range(0..4)).collect();
            let pauses_us: Vec<u64> = (0..count).map(|_| rng.random_range(0..400)).collect();
            tokio::spawn(async move {
                let mut handles = Vec::new();
                for ((size, level), pause_us) in sizes.into_iter().zip(levels).zip(pauses_us) {
                    let opts = SendOptions {
                        priority: Priority(level),
                        ..Default::default()
                    };
                    match conn.send(vec![level; size], opts).await {
                        Ok(h) => handles.push(h),
                        Err(e) => {
                            assert!(
                                closing.load(Ordering::SeqCst) || conn.close_reason().is_some(),
                                "seed {seed}: refused while open: {e}"
                            );
                        }
                    }
                    tokio::time::sleep(Duration::from_micros(pause_us)).await;
                }
                let mut outcomes = Vec::new();
                for h in handles {
                    let id = h.id();
                    outcomes.push((id, h.outcome().await));
                }
                outcomes
            })
        })
        .collect();
    // The close comes once the receiver has read a few messages (or soon, if the senders
    // are done before that).
    let close_after = rng.random_range(0..20);
    let until = tokio::time::Instant::now() + Duration::from_millis(200);
    while read_count.load(Ordering::Relaxed) < close_after && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    closing.store(true, Ordering::SeqCst);
    timeout(LIMIT, conn.close(Duration::ZERO))
        .await
        .expect("closed in time");
    let after = conn
        .send(b"late".to_vec(), SendOptions::default())
        .await
        .expect_err("a send after the close is refused");
    assert!(
        matches!(after, crate::SendError::ConnectionLost(_)),
        "{after}"
    );
    let mut delivered: Vec<MessageId> = Vec::new();
    let mut abandoned = 0;
    let mut seen = HashSet::new();
    for s in senders {
        let outcomes = timeout(LIMIT, s).await.expect("in time").expect("sender");
        for (id, outcome) in outcomes {
            assert!(seen.insert(id), "seed {seed}: {id:?} admitted twice");
            match outcome {
                Outcome::Delivered { .. } => delivered.push(id),
                Outcome::Abandoned => abandoned += 1,
                other => panic!("seed {seed}: {id:?} ended {other:?}"),
            }
        }
    }
    let read = timeout(LIMIT, reader)
        .await
        .expect("in time")
        .expect("reader");
    for id in &delivered {
        assert!(
            read.contains(id),
            "seed {seed}: {id:?} reported delivered, never read"
        );
    }
    (delivered.len(), abandoned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_senders_racing_a_close_leave_every_message_one_true_outcome() {
    let (mut delivered, mut abandoned) = (0, 0);
    for seed in 0..8 {
        let (d, a) = senders_race_a_close(seed).await;
        delivered += d;
        abandoned += a;
    }
    // The close came mid-transfer: both ends of the race were exercised.
    assert!(delivered > 0 && abandoned > 0, "{delivered} {abandoned}");
}
