//! State × event tests of the TCP baselines (§5.2), without TCP: writes are taken with a
//! chosen unacknowledged count and acknowledgement bytes are fed by hand.

use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn opts(p: u8, timer_ms: Option<u64>) -> SendOptions {
    SendOptions {
        priority: Priority(p),
        timer: timer_ms.map(Duration::from_millis),
        ..SendOptions::default()
    }
}

fn ms(t: u64) -> Time {
    Time::from_millis(t)
}

/// Writes everything connection `c` may write with nothing unacknowledged; returns the records.
fn drain(s: &mut BaselineSender, now: Time, c: usize) -> Vec<RecordHeader> {
    let mut out = Vec::new();
    let mut unacked = 0;
    while let Some(r) = s.poll_transmit(now, c, unacked) {
        unacked += r.stream_len();
        out.push(r);
    }
    out
}

fn outcomes(s: &mut BaselineSender) -> Vec<(MessageId, Outcome)> {
    std::iter::from_fn(|| s.poll_event())
        .filter_map(|e| match e {
            NaiEvent::Outcome { id, outcome } => Some((id, outcome)),
            _ => None,
        })
        .collect()
}

#[test]
fn test_naitcp_half_timeout_rule_discards_at_dequeue() {
    let mut s = BaselineSender::new(BaselineConfig::new(BaselineKind::NaiTcp, 2));
    let a = s.submit(ms(0), 1000, opts(0, Some(1000))).unwrap();
    let b = s.submit(ms(0), 1000, opts(0, Some(1000))).unwrap();
    let c = s.submit(ms(300), 1000, opts(1, Some(1000))).unwrap();
    let recs = drain(&mut s, ms(0), 0);
    assert_eq!(recs.len(), 1, "one message at a time: the send blocks");
    assert_eq!(recs[0].msg_id, a.0);
    s.handle_ack_bytes(ms(600), 0, 1);
    // At 600 ms, b has waited 600 ms >= 500 ms: discarded; c has waited 300 ms: sent.
    let recs = drain(&mut s, ms(600), 0);
    assert_eq!(recs.iter().map(|r| r.msg_id).collect::<Vec<_>>(), vec![c.0]);
    let out = outcomes(&mut s);
    assert_eq!(
        out,
        vec![
            (
                a,
                Outcome::Delivered {
                    at: ms(600),
                    margin: Some(DeadlineMargin::Early(Duration::from_millis(400)))
                }
            ),
            (b, Outcome::Expired { early: true }),
        ]
    );
    assert_eq!(s.stats().half_timeout_discards, 1);
}

#[test]
fn test_naitcp_sends_are_irrevocable_and_judged_on_the_ack() {
    let mut s = BaselineSender::new(BaselineConfig::new(BaselineKind::NaiTcp, 2));
    let a = s.submit(ms(0), 100_000, opts(1, Some(1000))).unwrap();
    let hi = s.submit(ms(10), 100, opts(0, Some(1000))).unwrap();
    let mut written = 0;
    let mut t = 0;
    while written < 100_000 {
        for r in drain(&mut s, ms(t), 0) {
            assert_eq!(r.msg_id, a.0, "priorities are ignored: FIFO");
            written += u64::from(r.chunk_len);
        }
        t += 100;
    }
    s.handle_timeout(ms(5000)); // no timers: nothing happens
    s.handle_ack_bytes(ms(5000), 0, 1);
    let out = outcomes(&mut s);
    assert_eq!(
        out,
        vec![(
            a,
            Outcome::Delivered {
                at: ms(5000),
                margin: Some(DeadlineMargin::Late(Duration::from_millis(4000)))
            }
        )]
    );
    assert!(drain(&mut s, ms(5000), 0).is_empty());
    assert_eq!(
        outcomes(&mut s),
        vec![(hi, Outcome::Expired { early: true })]
    );
}

#[test]
fn test_mtcp_opens_k_plus_one_connections_per_extra_level() {
    for k in 1..=3u8 {
        let two = BaselineSender::new(BaselineConfig::new(
            BaselineKind::Mtcp {
                high_connections: k,
            },
            2,
        ));
        assert_eq!(two.connections(), usize::from(k) + 1);
        let three = BaselineSender::new(BaselineConfig::new(
            BaselineKind::Mtcp {
                high_connections: k,
            },
            3,
        ));
        assert_eq!(three.connections(), usize::from(k) + 2);
    }
    let tcp = BaselineSender::new(BaselineConfig::new(BaselineKind::NaiTcp, 3));
    assert_eq!(tcp.connections(), 1);
}

#[test]
fn test_mtcp_levels_use_their_own_connections_concurrently() {
    let mut s = BaselineSender::new(BaselineConfig::new(
        BaselineKind::Mtcp {
            high_connections: 2,
        },
        2,
    ));
    let h1 = s.submit(ms(0), 100, opts(0, None)).unwrap();
    let h2 = s.submit(ms(0), 100, opts(0, None)).unwrap();
    let low = s.submit(ms(0), 100, opts(1, None)).unwrap();
    assert_eq!(drain(&mut s, ms(0), 0)[0].msg_id, h1.0);
    assert_eq!(drain(&mut s, ms(0), 1)[0].msg_id, h2.0);
    assert_eq!(drain(&mut s, ms(0), 2)[0].msg_id, low.0);
}

#[test]
fn test_mtcp_timer_stops_writing_and_aborts_partial_message() {
    let mut s = BaselineSender::new(BaselineConfig::new(
        BaselineKind::Mtcp {
            high_connections: 1,
        },
        2,
    ));
    let big = s.submit(ms(0), 100_000, opts(0, Some(1000))).unwrap();
    let next = s.submit(ms(100), 500, opts(0, Some(5000))).unwrap();
    let first = drain(&mut s, ms(0), 0);
    let written: u64 = first.iter().map(|r| u64::from(r.chunk_len)).sum();
    assert!(
        written > 0 && written <= 32 * 1024,
        "bounded by the send buffer"
    );
    assert_eq!(s.poll_timeout(), Some(ms(1000)));
    s.handle_timeout(ms(1000));
    assert_eq!(
        outcomes(&mut s),
        vec![(big, Outcome::Expired { early: false })]
    );
    let after = drain(&mut s, ms(1000), 0);
    assert_eq!(after[0].kind, RecordKind::Abort);
    assert_eq!(after[0].msg_id, big.0);
    assert_eq!(after[1].msg_id, next.0, "the connection is free at once");
    assert_eq!(s.stats().aborted_partial, 1);
    // A late acknowledgement answers `next`, not the aborted message.
    s.handle_ack_bytes(ms(1200), 0, 1);
    assert!(matches!(
        outcomes(&mut s)[..],
        [(id, Outcome::Delivered { .. })] if id == next
    ));
}

#[test]
fn test_mtcp_expiry_after_fully_written_ignores_the_late_ack() {
    let mut s = BaselineSender::new(BaselineConfig::new(
        BaselineKind::Mtcp {
            high_connections: 1,
        },
        2,
    ));
    let a = s.submit(ms(0), 1000, opts(0, Some(1000))).unwrap();
    let b = s.submit(ms(0), 1000, opts(0, Some(3000))).unwrap();
    assert_eq!(drain(&mut s, ms(0), 0).len(), 1);
    s.handle_timeout(ms(1000));
    // No abort record: every byte is already in the stream.
    let recs = drain(&mut s, ms(1000), 0);
    assert_eq!(recs.len(), 1);
    assert_eq!((recs[0].kind, recs[0].msg_id), (RecordKind::Data, b.0));
    s.handle_ack_bytes(ms(1100), 0, 1); // a's acknowledgement: ignored
    s.handle_ack_bytes(ms(1200), 0, 1); // b's
    let out = outcomes(&mut s);
    assert_eq!(out[0], (a, Outcome::Expired { early: false }));
    assert!(matches!(out[1], (id, Outcome::Delivered { at, .. }) if id == b && at == ms(1200)));
    assert_eq!(out.len(), 2);
}

#[test]
fn test_bad_arguments_are_errors() {
    let mut s = BaselineSender::new(BaselineConfig::new(BaselineKind::NaiTcp, 2));
    assert!(matches!(
        s.submit(ms(0), 10, opts(2, None)),
        Err(NaiError::BadPriority { .. })
    ));
    assert_eq!(
        s.submit(ms(0), 0, opts(0, None)),
        Err(NaiError::EmptyMessage)
    );
    assert!(s.poll_transmit(ms(0), 99, 0).is_none());
    s.handle_ack_bytes(ms(0), 99, 5);
    s.handle_ack_bytes(ms(0), 0, 5);
}

#[derive(Clone, Debug)]
enum Act {
    Submit(u64, u8, Option<u64>),
    Write(usize, u64),
    Ack(usize, u64),
    Advance(u64),
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        (1u64..50_000, 0u8..3, proptest::option::of(100u64..3_000))
            .prop_map(|(s, p, t)| Act::Submit(s, p, t)),
        (0usize..5, 0u64..40_000).prop_map(|(c, u)| Act::Write(c, u)),
        (0usize..5, 0u64..3).prop_map(|(c, n)| Act::Ack(c, n)),
        (1u64..800).prop_map(Act::Advance),
    ]
}

proptest! {
    /// Whatever the engine does, every message gets at most one outcome, and exactly one after
    /// `finish_all` or `abandon_all` (the connections lost); nothing is written or reported
    /// after either, whatever arrives late.
    #[test]
    fn every_message_has_exactly_one_outcome(
        mtcp in any::<bool>(),
        abandon in any::<bool>(),
        acts in proptest::collection::vec(act(), 1..200),
    ) {
        let kind = if mtcp { BaselineKind::Mtcp { high_connections: 2 } } else { BaselineKind::NaiTcp };
        let mut s = BaselineSender::new(BaselineConfig::new(kind, 3));
        let mut now = Time::ZERO;
        let mut ids = Vec::new();
        let mut seen: BTreeMap<MessageId, u32> = BTreeMap::new();
        for a in acts {
            match a {
                Act::Submit(size, p, t) => {
                    if let Ok(id) = s.submit(now, size, opts(p, t)) {
                        ids.push(id);
                    }
                }
                Act::Write(c, u) => while s.poll_transmit(now, c, u).is_some() {},
                Act::Ack(c, n) => s.handle_ack_bytes(now, c, n),
                Act::Advance(d) => {
                    now += Duration::from_millis(d);
                    s.handle_timeout(now);
                }
            }
            for (id, _) in outcomes(&mut s) {
                *seen.entry(id).or_default() += 1;
            }
            prop_assert!(seen.values().all(|&n| n == 1));
        }
        let live = s.live_messages();
        if abandon {
            prop_assert_eq!(s.abandon_all(), live);
        } else {
            s.finish_all(now);
        }
        for (id, outcome) in outcomes(&mut s) {
            prop_assert!(!abandon || outcome == Outcome::Abandoned);
            *seen.entry(id).or_default() += 1;
        }
        prop_assert_eq!(seen.len(), ids.len());
        prop_assert!(seen.values().all(|&n| n == 1));
        prop_assert_eq!(s.live_messages(), 0);
        for c in 0..s.connections() {
            s.handle_ack_bytes(now, c, 3);
            prop_assert!(s.poll_transmit(now, c, 0).is_none());
        }
        s.handle_timeout(now + Duration::from_secs(10));
        prop_assert!(outcomes(&mut s).is_empty());
    }
}

/// Pipelined sends (`max_unacked_messages` > 1): the send call returns once a message is
/// written whole, so several wait for their acknowledgement at once; each acknowledgement
/// byte still completes the oldest, and outcomes keep their order.
#[test]
fn test_pipelined_sends_write_ahead_and_acks_complete_in_order() {
    let mut config = BaselineConfig::new(BaselineKind::NaiTcp, 2);
    config.max_unacked_messages = 3;
    config.send_buffer_bytes = u64::MAX;
    let mut s = BaselineSender::new(config);
    let ids: Vec<MessageId> = (0..5)
        .map(|_| s.submit(ms(0), 1000, opts(0, None)).unwrap())
        .collect();
    let recs = drain(&mut s, ms(0), 0);
    assert_eq!(
        recs.iter().map(|r| r.msg_id).collect::<Vec<_>>(),
        ids[..3].iter().map(|i| i.0).collect::<Vec<_>>(),
        "three written ahead, then the send blocks"
    );
    s.handle_ack_bytes(ms(10), 0, 2);
    let recs = drain(&mut s, ms(10), 0);
    assert_eq!(
        recs.iter().map(|r| r.msg_id).collect::<Vec<_>>(),
        vec![ids[3].0, ids[4].0]
    );
    s.handle_ack_bytes(ms(20), 0, 3);
    let out = outcomes(&mut s);
    assert_eq!(out.iter().map(|(id, _)| *id).collect::<Vec<_>>(), ids);
    assert!(
        out.iter()
            .all(|(_, o)| matches!(o, Outcome::Delivered { .. }))
    );
}

/// With the paper's default (one message awaiting its acknowledgement) nothing is written
/// ahead: the simulator's NAI-TCP is unchanged by the option.
#[test]
fn test_default_send_blocks_until_the_acknowledgement() {
    let mut s = BaselineSender::new(BaselineConfig::new(BaselineKind::NaiTcp, 2));
    let a = s.submit(ms(0), 1000, opts(0, None)).unwrap();
    let _b = s.submit(ms(0), 1000, opts(0, None)).unwrap();
    let recs = drain(&mut s, ms(0), 0);
    assert_eq!(recs.iter().map(|r| r.msg_id).collect::<Vec<_>>(), vec![a.0]);
}

#[test]
fn test_an_unused_level_writes_a_heartbeat_only_while_another_level_is_busy() {
    let mut config = BaselineConfig::new(
        BaselineKind::Mtcp {
            high_connections: 1,
        },
        2,
    );
    config.heartbeat_after = Some(Duration::from_secs(15));
    config.max_unacked_messages = 64;
    let mut s = BaselineSender::new(config);
    // Nothing sent yet: every connection idle, no heartbeat, no timer.
    assert_eq!(s.poll_timeout(), None);
    assert!(drain(&mut s, ms(20_000), 1).is_empty());
    // Level 0 is busy: a message every second for 40 s, each acknowledged.
    let mut beats = Vec::new();
    for t in 0..40u64 {
        let now = ms(20_000 + t * 1000);
        s.submit(now, 100, opts(0, None)).unwrap();
        assert_eq!(drain(&mut s, now, 0).len(), 1);
        s.handle_ack_bytes(now, 0, 1);
        for r in drain(&mut s, now, 1) {
            assert_eq!(r.kind, RecordKind::Heartbeat);
            beats.push(t);
        }
    }
    // Level 1 never had a message: a heartbeat 15 s after the other level's first record
    // (from time zero, level 1 never wrote), then every 15 s.
    assert_eq!(beats, vec![0, 15, 30], "{beats:?}");
    assert_eq!(s.stats().heartbeats, 3);
    // Once level 0 is idle too, level 1 writes one more at most (level 0 wrote after
    // level 1's last heartbeat), then none.
    let later: usize = (0..10u64)
        .map(|k| drain(&mut s, ms(60_000 + k * 15_000), 1).len())
        .sum();
    assert_eq!(later, 1);
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn test_heartbeats_are_off_by_default_and_never_on_nai_tcp() {
    let mut s = BaselineSender::new(BaselineConfig::new(BaselineKind::NaiTcp, 2));
    s.submit(ms(0), 100, opts(0, None)).unwrap();
    drain(&mut s, ms(0), 0);
    s.handle_ack_bytes(ms(0), 0, 1);
    assert!(drain(&mut s, ms(100_000), 0).is_empty());
    let mut config = BaselineConfig::new(BaselineKind::NaiTcp, 2);
    config.heartbeat_after = Some(Duration::from_secs(1));
    let mut s = BaselineSender::new(config);
    s.submit(ms(0), 100, opts(0, None)).unwrap();
    drain(&mut s, ms(0), 0);
    s.handle_ack_bytes(ms(0), 0, 1);
    // Its one connection has no sibling: an idle NAI-TCP sender is idle.
    assert!(drain(&mut s, ms(100_000), 0).is_empty());
    assert_eq!(s.poll_timeout(), None);
}

#[test]
fn test_a_heartbeat_record_round_trips_and_the_receiver_ignores_it() {
    let h = RecordHeader {
        kind: RecordKind::Heartbeat,
        priority: 0,
        msg_id: 0,
        msg_len: 0,
        chunk_len: 0,
    };
    let mut buf = [0u8; record::RECORD_HEADER_LEN];
    h.emit(&mut buf).unwrap();
    assert_eq!(RecordHeader::parse(&buf), Ok(h));
    let mut bad = buf;
    bad[18] = 1; // a heartbeat carries no bytes
    assert!(RecordHeader::parse(&bad).is_err());
    let mut rx = record::RecordReceiver::new();
    rx.handle_bytes(ms(0), &buf).unwrap();
    assert!(rx.poll_event().is_none());
    assert_eq!(rx.take_acks(), 0);
}
