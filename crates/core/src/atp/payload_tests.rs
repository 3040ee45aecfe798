//! Messages carry their bytes end to end: ATP over SPP with payloads, through a wire that
//! loses and reorders datagrams (each one emitted to bytes and parsed back), delivers every
//! message's exact bytes once — checked by hash and by content — and reports one outcome per
//! message.

use super::*;
use crate::nai::{MessageId, NaiEvent, OnExpiry, Outcome, Priority, QueueId, SendOptions};
use crate::spp::{SppEvent, SppRepr};
use crate::time::Time;
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

fn digest(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// A datagram on the wire: its bytes, arriving at `.0.0` (ties broken by `.0.1`).
type Wire = BTreeMap<(Time, u64), Vec<u8>>;

struct Run {
    sent: BTreeMap<MessageId, u64>,
    delivered: BTreeMap<MessageId, (u64, usize)>,
    outcomes: BTreeMap<MessageId, Vec<Outcome>>,
    malformed: u64,
}

/// Sends `count` random messages (1 B to 20 KB, random content) at a fixed external rate over
/// a wire with one-way delay 10–40 ms (so datagrams overtake each other) and `loss` in both
/// directions; runs until every message has an outcome or 120 s pass.
fn run(seed: u64, loss: f64, count: usize) -> Run {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let config = AtpConfig::default();
    let mut tx = AtpSender::new(config.clone(), RateSource::External, Time::ZERO);
    let mut rx = AtpReceiver::new(config.spp.clone());
    tx.set_external_rate(Time::ZERO, 500_000.0);
    let mut out = Run {
        sent: BTreeMap::new(),
        delivered: BTreeMap::new(),
        outcomes: BTreeMap::new(),
        malformed: 0,
    };
    for _ in 0..count {
        let len = rng.random_range(1..=20_000usize);
        let data: Vec<u8> = (0..len).map(|_| rng.random::<u8>()).collect();
        let opts = SendOptions {
            priority: Priority(rng.random_range(0..2u8)),
            timer: None,
            on_expiry: OnExpiry::Discard,
        };
        let hash = digest(&data);
        let id = tx
            .submit_bytes(Time::ZERO, QueueId(0), data, opts)
            .expect("no timer: admitted");
        out.sent.insert(id, hash);
    }
    let mut fwd = Wire::new();
    let mut rev = Wire::new();
    let mut seq = 0u64;
    let mut now = Time::ZERO;
    let end = Time::from_secs(120);
    while now < end && out.outcomes.len() < count {
        // Sender output, each datagram as the bytes a socket would carry.
        while let Some(d) = tx.poll_transmit(now) {
            let mut buf = vec![0u8; d.repr.buffer_len()];
            let n = d.repr.emit(&mut buf).expect("fits");
            buf.truncate(n);
            match &d.repr {
                SppRepr::Data(h) => buf.extend_from_slice(tx.payload(h).expect("bytes held")),
                _ => buf.resize(d.wire_len(), 0),
            }
            seq += 1;
            if rng.random::<f64>() >= loss {
                let delay = Duration::from_millis(rng.random_range(10..=40));
                fwd.insert((now + delay, seq), buf);
            }
        }
        while let Some(ev) = tx.poll_event() {
            if let NaiEvent::Outcome { id, outcome } = ev {
                out.outcomes.entry(id).or_default().push(outcome);
            }
        }
        let next = [
            fwd.keys().next().map(|k| k.0),
            rev.keys().next().map(|k| k.0),
            tx.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        now = now.max(next);
        while let Some(entry) = fwd.first_entry().filter(|e| e.key().0 <= now) {
            let bytes = entry.remove();
            let Ok(repr) = SppRepr::parse(&bytes) else {
                out.malformed += 1;
                continue;
            };
            rx.handle_datagram_payload(now, &repr, &bytes[repr.buffer_len()..]);
            while let Some(ev) = rx.poll_event() {
                if let SppEvent::Delivered(d) = ev {
                    let data = d.data.expect("payload carried");
                    let (hash, n) = out.delivered.entry(d.id).or_insert((digest(&data), 0));
                    assert_eq!(*hash, digest(&data));
                    *n += 1;
                }
            }
            while let Some(d) = rx.poll_transmit(now) {
                let mut buf = vec![0u8; d.wire_len()];
                d.repr.emit(&mut buf).expect("fits");
                seq += 1;
                if rng.random::<f64>() >= loss {
                    let delay = Duration::from_millis(rng.random_range(10..=40));
                    rev.insert((now + delay, seq), buf);
                }
            }
        }
        while let Some(entry) = rev.first_entry().filter(|e| e.key().0 <= now) {
            let bytes = entry.remove();
            match SppRepr::parse(&bytes) {
                Ok(repr) => tx.handle_datagram(now, &repr, 0),
                Err(_) => out.malformed += 1,
            }
        }
        if tx.poll_timeout().is_some_and(|t| t <= now) {
            tx.handle_timeout(now);
        }
    }
    out
}

fn check(r: &Run, count: usize) {
    assert_eq!(r.malformed, 0);
    assert_eq!(r.sent.len(), count);
    let ids: BTreeSet<_> = r.outcomes.keys().collect();
    assert_eq!(ids.len(), count, "every message gets an outcome");
    for (id, outcomes) in &r.outcomes {
        assert_eq!(outcomes.len(), 1, "message {id:?}: one outcome");
        assert!(
            matches!(outcomes[0], Outcome::Delivered { .. }),
            "message {id:?}: {outcomes:?}"
        );
        let (hash, n) = r.delivered.get(id).expect("delivered at the receiver");
        assert_eq!(*n, 1, "message {id:?} delivered once");
        assert_eq!(hash, &r.sent[id], "message {id:?}: bytes differ");
    }
}

#[test]
fn bytes_arrive_intact_under_loss_and_reordering() {
    let r = run(7, 0.05, 200);
    check(&r, 200);
}

#[test]
fn sender_releases_bytes_with_the_outcome() {
    let config = AtpConfig {
        max_buffered_bytes: 10,
        ..AtpConfig::default()
    };
    let mut tx = AtpSender::new(config, RateSource::External, Time::ZERO);
    let opts = SendOptions::default();
    tx.submit_bytes(Time::ZERO, QueueId(0), vec![1; 8], opts)
        .expect("fits");
    let err = tx
        .submit_bytes(Time::ZERO, QueueId(0), vec![2; 3], opts)
        .expect_err("over the bound");
    assert!(matches!(
        err,
        crate::nai::NaiError::BufferFull { buffered: 8, .. }
    ));
    let id = tx.nai().live_ids().next().expect("one live");
    tx.nai_mut().cancel(Time::ZERO, id).expect("live");
    while tx.poll_event().is_some() {}
    assert_eq!(tx.buffered_bytes(), 0);
    tx.submit_bytes(Time::ZERO, QueueId(0), vec![3; 10], opts)
        .expect("room again");
}

#[test]
fn receiver_bounds_reassembly_memory() {
    use crate::spp::wire::DataHeader;
    let config = crate::spp::SppConfig {
        max_reassembly_bytes: 1000,
        ..crate::spp::SppConfig::default()
    };
    let mut rx = AtpReceiver::new(config);
    let piece = |wire_seq: u64, msg_len: u32| {
        SppRepr::Data(DataHeader {
            pn: wire_seq,
            msg_floor: 0,
            wire_seq,
            msg_id: wire_seq,
            msg_len,
            offset: 0,
            len: 10,
            priority: 0,
        })
    };
    // A peer declaring a 4 GB message gets nothing allocated and no acknowledgement.
    rx.handle_datagram_payload(Time::ZERO, &piece(0, u32::MAX), &[0; 10]);
    assert_eq!(rx.reassembly_bytes(), 0);
    assert!(rx.poll_transmit(Time::ZERO).is_none());
    rx.handle_datagram_payload(Time::ZERO, &piece(1, 600), &[0; 10]);
    assert_eq!(rx.reassembly_bytes(), 600);
    rx.handle_datagram_payload(Time::ZERO, &piece(2, 600), &[0; 10]);
    assert_eq!(
        rx.reassembly_bytes(),
        600,
        "second buffer would exceed the bound"
    );
    // A piece beyond its message's end is ignored.
    let mut bad = piece(3, 5);
    if let SppRepr::Data(h) = &mut bad {
        h.len = 10;
    }
    rx.handle_datagram_payload(Time::ZERO, &bad, &[0; 10]);
    assert_eq!(rx.reassembly_bytes(), 600);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// Any seed and loss up to 20 %: exact bytes, once, one outcome each.
    #[test]
    fn bytes_intact_for_any_seed(seed in any::<u64>(), loss in 0.0f64..0.2) {
        let r = run(seed, loss, 40);
        check(&r, 40);
    }
}
