//! Receiver flow control end to end: an ATP sender and an SPP receiver with a window, over a
//! lossy delay line, with an application that reads in stalls.

use super::window::charge;
use super::{SppConfig, SppEvent, SppReceiver, SppRepr};
use crate::atp::{AtpConfig, AtpSender, RateSource};
use crate::nai::{MessageId, NaiEvent, OnExpiry, Outcome, Priority, QueueId, SendOptions};
use crate::time::Time;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

const ONE_WAY: Duration = Duration::from_millis(10);
const STEP: Duration = Duration::from_millis(1);

/// What the test drives: a burst to submit, a cancel, or a reader pause.
#[derive(Clone, Debug)]
enum Op {
    /// Submit `count` messages of `size` bytes (timer in ms, if any).
    Burst {
        count: u8,
        size: u32,
        timer_ms: Option<u16>,
        high: bool,
    },
    /// Cancel the n-th submitted message (modulo).
    Cancel(u16),
    /// The reader takes nothing for this many ms.
    Stall(u16),
    /// Time passes (ms).
    Wait(u16),
}

fn any_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            1u8..20,
            1u32..40_000,
            proptest::option::of(50u16..3000),
            any::<bool>()
        )
            .prop_map(|(count, size, timer_ms, high)| Op::Burst {
                count,
                size,
                timer_ms,
                high
            }),
        any::<u16>().prop_map(Op::Cancel),
        (1u16..3000).prop_map(Op::Stall),
        (1u16..500).prop_map(Op::Wait),
    ]
}

struct Harness {
    now: Time,
    tx: AtpSender,
    rx: SppReceiver,
    window: u64,
    /// Datagrams in flight: arrival time, header, payload length.
    to_rx: VecDeque<(Time, SppRepr, u32)>,
    to_tx: VecDeque<(Time, SppRepr, u32)>,
    /// Delivered by the receiver and not yet read: id, size.
    unread: VecDeque<(MessageId, u64)>,
    delivered_at_rx: BTreeSet<MessageId>,
    outcomes: BTreeMap<MessageId, Outcome>,
    submitted: Vec<MessageId>,
    stalled_until: Time,
    /// Every `loss_every`-th datagram each way is dropped (0: none).
    loss_every: u64,
    sent: u64,
    peak_held: u64,
    /// When the sender was last found blocked by the window with nothing in flight.
    blocked_since: Option<Time>,
    /// The largest charge submitted (a message larger than the window goes alone).
    largest: u64,
}

impl Harness {
    fn new(window: u64, loss_every: u64) -> Harness {
        let spp = SppConfig {
            receive_window_bytes: Some(window),
            ..SppConfig::default()
        };
        let config = AtpConfig {
            spp: spp.clone(),
            ..AtpConfig::default()
        };
        let mut tx = AtpSender::new(config, RateSource::External, Time::ZERO);
        tx.set_external_rate(Time::ZERO, 2_000_000.0);
        Harness {
            now: Time::ZERO,
            tx,
            rx: SppReceiver::new(spp),
            window,
            to_rx: VecDeque::new(),
            to_tx: VecDeque::new(),
            unread: VecDeque::new(),
            delivered_at_rx: BTreeSet::new(),
            outcomes: BTreeMap::new(),
            submitted: Vec::new(),
            stalled_until: Time::ZERO,
            loss_every,
            sent: 0,
            peak_held: 0,
            blocked_since: None,
            largest: 0,
        }
    }

    fn lost(&mut self) -> bool {
        self.sent += 1;
        self.loss_every > 0 && self.sent.is_multiple_of(self.loss_every)
    }

    fn step(&mut self) {
        let now = self.now;
        while self.to_rx.front().is_some_and(|(t, _, _)| *t <= now) {
            if let Some((_, repr, len)) = self.to_rx.pop_front() {
                self.rx.handle_datagram(now, &repr, len);
            }
        }
        while let Some(ev) = self.rx.poll_event() {
            if let SppEvent::Delivered(d) = ev {
                assert!(
                    self.delivered_at_rx.insert(d.id),
                    "{:?} delivered twice",
                    d.id
                );
                self.unread.push_back((d.id, d.size_bytes));
            }
        }
        self.peak_held = self.peak_held.max(self.rx.held_bytes());
        // The sender keeps to the window: it never started more than the receiver allows
        // now (its own view of the limit lags behind, never ahead).
        let limit = self.rx.window_limit().unwrap_or(u64::MAX);
        // An oversized message goes alone: nothing else outstanding beyond the credit.
        let credited = limit.saturating_sub(self.window);
        let alone = self.tx.spp().started_charge().saturating_sub(credited) <= self.largest
            && self.largest > self.window;
        assert!(
            self.tx.spp().started_charge() <= limit || alone,
            "sender started {} past the window limit {limit}",
            self.tx.spp().started_charge()
        );
        assert!(
            self.rx.held_bytes() <= self.window.max(self.largest),
            "receiver holds {} > window {}",
            self.rx.held_bytes(),
            self.window
        );
        if now >= self.stalled_until {
            // The reader takes up to two messages a millisecond.
            for _ in 0..2 {
                if let Some((_, size)) = self.unread.pop_front() {
                    self.rx.handle_consumed(1, size);
                }
            }
        }
        // The connection's window probe (a PING asking for an ACK) after 200 ms blocked:
        // a lost window update must not stall the sender for good.
        let (nai, spp) = (self.tx.nai(), self.tx.spp());
        let blocked = spp.in_flight_packets() == 0
            && nai.has_sendable()
            && !nai.has_sendable_within(spp.new_message_max_len());
        match (blocked, self.blocked_since) {
            (false, _) => self.blocked_since = None,
            (true, None) => self.blocked_since = Some(now),
            (true, Some(t)) if now >= t + Duration::from_millis(200) => {
                self.rx.request_ack();
                self.blocked_since = Some(now);
            }
            (true, Some(_)) => {}
        }
        while let Some(d) = self.rx.poll_transmit(now) {
            if !self.lost() {
                self.to_tx.push_back((now + ONE_WAY, d.repr, d.payload_len));
            }
        }
        while self.to_tx.front().is_some_and(|(t, _, _)| *t <= now) {
            if let Some((_, repr, len)) = self.to_tx.pop_front() {
                self.tx.handle_datagram(now, &repr, len);
            }
        }
        if self.tx.poll_timeout().is_some_and(|t| t <= now) {
            self.tx.handle_timeout(now);
        }
        while let Some(d) = self.tx.poll_transmit(now) {
            if !self.lost() {
                self.to_rx.push_back((now + ONE_WAY, d.repr, d.payload_len));
            }
        }
        while let Some(ev) = self.tx.poll_event() {
            if let NaiEvent::Outcome { id, outcome } = ev {
                assert!(
                    self.outcomes.insert(id, outcome).is_none(),
                    "{id:?} got a second outcome {outcome:?}"
                );
            }
        }
        self.now = now + STEP;
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.step();
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Burst {
                count,
                size,
                timer_ms,
                high,
            } => {
                self.largest = self.largest.max(charge(u64::from(size)));
                for _ in 0..count {
                    let opts = SendOptions {
                        priority: if high { Priority::HIGH } else { Priority(1) },
                        timer: timer_ms.map(|t| Duration::from_millis(u64::from(t))),
                        on_expiry: OnExpiry::Discard,
                    };
                    let r = self
                        .tx
                        .nai_mut()
                        .submit(self.now, QueueId(0), u64::from(size), opts);
                    match r {
                        Ok(id) | Err(crate::nai::NaiError::Rejected { id, .. }) => {
                            self.submitted.push(id);
                        }
                        Err(_) => {}
                    }
                }
            }
            Op::Cancel(n) => {
                if !self.submitted.is_empty() {
                    let id = self.submitted[usize::from(n) % self.submitted.len()];
                    let _ = self.tx.nai_mut().cancel(self.now, id);
                }
            }
            Op::Stall(ms) => self.stalled_until = self.now + Duration::from_millis(ms.into()),
            Op::Wait(ms) => self.run_for(Duration::from_millis(ms.into())),
        }
        self.step();
    }

    /// Runs until every message is final (the reader catching up), at most `limit`.
    fn settle(&mut self, limit: Duration) {
        self.stalled_until = self.now;
        let end = self.now + limit;
        while self.now < end && self.tx.nai().live_messages() > 0 {
            self.step();
        }
    }

    fn check(&self) {
        assert_eq!(
            self.tx.nai().live_messages(),
            0,
            "messages without an outcome"
        );
        for (id, o) in &self.outcomes {
            let at_rx = self.delivered_at_rx.contains(id);
            match o {
                Outcome::Delivered { .. } => assert!(at_rx, "{id:?} Delivered but not held"),
                Outcome::Expired { .. } | Outcome::Cancelled | Outcome::Rejected(_) => {
                    assert!(!at_rx, "{id:?} {o:?} yet the receiver delivered it")
                }
                Outcome::Abandoned => {}
            }
        }
    }
}

/// A reader that stops for 3 s: the sender stops at the window, loses nothing, and finishes
/// once the reader resumes.
#[test]
fn test_slow_reader_slows_the_sender_and_loses_nothing() {
    let window = 256 << 10;
    let mut h = Harness::new(window, 0);
    h.stalled_until = Time::from_secs(3);
    h.apply(&Op::Burst {
        count: 100,
        size: 16 << 10,
        timer_ms: None,
        high: true,
    });
    h.run_for(Duration::from_secs(2));
    // Stalled: the receiver holds at most the window; the sender started no more.
    assert!(h.rx.held_bytes() <= window);
    assert!(h.tx.spp().started_charge() <= window + charge(0));
    let delivered_while_stalled = h.outcomes.len();
    assert!(
        delivered_while_stalled < 100,
        "the window held the sender back"
    );
    h.settle(Duration::from_secs(30));
    h.check();
    assert_eq!(h.outcomes.len(), 100);
    assert!(
        h.outcomes
            .values()
            .all(|o| matches!(o, Outcome::Delivered { .. }))
    );
}

/// A lost window update is recovered: every tenth datagram is lost both ways.
#[test]
fn test_window_survives_loss() {
    let mut h = Harness::new(64 << 10, 10);
    h.stalled_until = Time::from_millis(500);
    h.apply(&Op::Burst {
        count: 50,
        size: 8 << 10,
        timer_ms: None,
        high: false,
    });
    h.settle(Duration::from_secs(60));
    h.check();
    assert_eq!(h.outcomes.len(), 50);
}

/// A cancelled message the receiver never saw returns its room to the sender.
#[test]
fn test_unseen_cancel_returns_window_credit() {
    let mut h = Harness::new(64 << 10, 0);
    h.stalled_until = Time::from_secs(100);
    // Fill the window with messages the reader does not take.
    h.apply(&Op::Burst {
        count: 4,
        size: 15 << 10,
        timer_ms: None,
        high: true,
    });
    h.run_for(Duration::from_millis(200));
    let full = h.tx.spp().started_charge();
    // A message started but dropped on the way (cut the link), then cancelled.
    h.loss_every = 1;
    h.apply(&Op::Burst {
        count: 1,
        size: 1000,
        timer_ms: None,
        high: true,
    });
    h.run_for(Duration::from_millis(5));
    h.loss_every = 0;
    let last = *h.submitted.last().unwrap();
    let _ = h.tx.nai_mut().cancel(h.now, last);
    h.run_for(Duration::from_secs(2));
    assert_eq!(h.outcomes.get(&last), Some(&Outcome::Cancelled));
    assert!(h.tx.spp().started_charge() <= full);
}

/// Regression: with a window of one largest message, an urgent message waited for the
/// reader to take the bulk one. With the window at twice the largest, it goes beside it.
#[test]
fn test_urgent_message_fits_beside_the_largest_one() {
    let mut h = Harness::new(2 * charge(60_000), 0);
    h.stalled_until = Time::from_secs(100);
    h.apply(&Op::Burst {
        count: 1,
        size: 60_000,
        timer_ms: None,
        high: false,
    });
    h.run_for(Duration::from_millis(300));
    h.apply(&Op::Burst {
        count: 1,
        size: 4000,
        timer_ms: Some(500),
        high: true,
    });
    h.run_for(Duration::from_millis(300));
    let urgent = *h.submitted.last().unwrap();
    assert!(
        matches!(h.outcomes.get(&urgent), Some(Outcome::Delivered { .. })),
        "{:?}",
        h.outcomes.get(&urgent)
    );
}

/// Messages larger than the whole window go one at a time instead of never.
#[test]
fn test_message_larger_than_the_window_goes_alone() {
    let mut h = Harness::new(64 << 10, 0);
    h.apply(&Op::Burst {
        count: 3,
        size: 200_000,
        timer_ms: None,
        high: true,
    });
    h.settle(Duration::from_secs(30));
    h.check();
    assert_eq!(h.outcomes.len(), 3);
    assert!(h.rx.held_bytes() == 0 && h.peak_held <= charge(200_000));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random reader stalls, sender bursts, cancels and loss: every message gets exactly one
    /// outcome, the receiver never holds more than its window, and no message reported
    /// `Delivered` is missing at the receiver (nor one reported expired or cancelled
    /// present).
    #[test]
    fn prop_flow_control_keeps_outcomes_honest(
        ops in proptest::collection::vec(any_op(), 1..30),
        window_kb in 48u64..512,
        loss_every in prop_oneof![Just(0u64), 7u64..40],
    ) {
        let mut h = Harness::new(window_kb << 10, loss_every);
        for op in &ops {
            h.apply(op);
        }
        h.settle(Duration::from_secs(120));
        h.check();
        prop_assert_eq!(h.outcomes.len(), h.submitted.len());
    }
}
