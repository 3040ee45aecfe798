//! The slack order between priority levels ([`ServiceOrder::Slack`]) against the paper's strict
//! order, on a link served at exactly the scheduler's rate: what a less important message gains,
//! and that no more important message pays for it.

use super::*;
use crate::time::Time;
use proptest::prelude::*;
use std::time::Duration;

const Q0: QueueId = QueueId(0);
/// Bytes per piece the test link takes.
const PIECE: u32 = 1000;

/// One message the application submits: when (ms), how large, at which level, its timer (ms).
#[derive(Clone, Copy, Debug)]
struct Arrival {
    at_ms: u64,
    bytes: u64,
    priority: Priority,
    timer_ms: u64,
}

/// What became of one submitted message.
#[derive(Clone, Copy, Debug)]
struct Ended {
    id: MessageId,
    priority: Priority,
    deadline: Time,
    admitted: bool,
    outcome: Outcome,
}

fn scheduler(service: ServiceOrder, rate: f64) -> Scheduler {
    let mut s = Scheduler::new(NaiConfig {
        service,
        ..NaiConfig::default()
    });
    s.set_rate(Time::ZERO, rate);
    s
}

/// Serves `s` at exactly `rate` bytes/s, in pieces of at most [`PIECE`] bytes each acknowledged
/// as it is sent. Each arrival is submitted at the first piece boundary at or after its time
/// (so the link never holds a piece the scheduler did not choose after it). Returns every
/// message's end, in submission order.
fn serve_exactly(s: &mut Scheduler, rate: f64, arrivals: &[Arrival]) -> Vec<Ended> {
    let mut pending: Vec<Arrival> = arrivals.to_vec();
    pending.sort_by_key(|a| a.at_ms);
    let mut pending = pending.into_iter().peekable();
    let mut ended: Vec<Ended> = Vec::new();
    let mut now = Time::ZERO;
    loop {
        while let Some(a) = pending.next_if(|a| Time::from_millis(a.at_ms) <= now) {
            let opts = SendOptions {
                priority: a.priority,
                timer: Some(Duration::from_millis(a.timer_ms)),
                on_expiry: OnExpiry::Discard,
            };
            let (id, admitted) = match s.submit(now, Q0, a.bytes, opts) {
                Ok(id) => (id, true),
                Err(NaiError::Rejected { id, .. }) => (id, false),
                Err(e) => panic!("submit failed: {e}"),
            };
            ended.push(Ended {
                id,
                priority: a.priority,
                deadline: now.saturating_add(Duration::from_millis(a.timer_ms)),
                admitted,
                outcome: Outcome::Abandoned,
            });
        }
        if s.poll_timeout().is_some_and(|t| t <= now) {
            s.handle_timeout(now);
        }
        if let Some(c) = s.next_chunk_at(now, PIECE, true) {
            now = now.saturating_add(Duration::from_secs_f64(f64::from(c.len) / rate));
            s.handle_acked(now, c.id, c.offset, u64::from(c.len));
            while s.poll_transmit().is_some() {}
        } else {
            let next_arrival = pending.peek().map(|a| Time::from_millis(a.at_ms));
            let next = match (next_arrival, s.poll_timeout()) {
                (Some(a), Some(t)) => a.min(t),
                (a, t) => match a.or(t) {
                    Some(x) => x,
                    None => break,
                },
            };
            now = now.max(next);
        }
        record_outcomes(s, &mut ended);
    }
    record_outcomes(s, &mut ended);
    ended
}

/// Drains `s`'s events into `ended`, checking that no message gets a second outcome.
fn record_outcomes(s: &mut Scheduler, ended: &mut [Ended]) {
    while let Some(e) = s.poll_event() {
        if let NaiEvent::Outcome { id, outcome } = e
            && let Some(x) = ended.iter_mut().find(|x| x.id == id)
        {
            assert!(
                matches!(x.outcome, Outcome::Abandoned),
                "{id:?}: a second outcome {outcome:?} after {:?}",
                x.outcome
            );
            x.outcome = outcome;
        }
    }
}

/// Whether `e` was delivered by its deadline (allowing a microsecond for the clock's rounding).
fn on_time(e: &Ended) -> bool {
    matches!(e.outcome, Outcome::Delivered { at, .. }
        if at <= e.deadline.saturating_add(Duration::from_micros(1)))
}

/// A high message of 60 kB due in 2 s and a low one of 50 kB due in 1 s, both at 0.
fn lend_pair() -> Vec<Arrival> {
    vec![
        Arrival {
            at_ms: 0,
            bytes: 60_000,
            priority: Priority::HIGH,
            timer_ms: 2000,
        },
        Arrival {
            at_ms: 0,
            bytes: 50_000,
            priority: Priority::LOW,
            timer_ms: 1000,
        },
    ]
}

#[test]
fn test_a_low_message_goes_first_when_the_high_one_can_spare_the_time() {
    // 100 kB/s. A high message of 60 kB due in 2 s and a low one of 50 kB due in 1 s: in strict
    // order the low one would finish at 1.1 s; served first it finishes at 0.5 s and the high
    // one at 1.1 s, well before its 2 s.
    let arrivals = lend_pair();
    let strict = serve_exactly(&mut scheduler(ServiceOrder::Strict, 1e5), 1e5, &arrivals);
    assert!(on_time(&strict[0]));
    assert!(
        matches!(
            strict[1].outcome,
            Outcome::Rejected(RejectReason::CannotMeetDeadline)
        ),
        "strict: {:?}",
        strict[1]
    );
    let slack = serve_exactly(&mut scheduler(ServiceOrder::Slack, 1e5), 1e5, &arrivals);
    assert!(slack.iter().all(on_time), "slack: {slack:?}");
    let done = |e: &Ended| match e.outcome {
        Outcome::Delivered { at, .. } => at,
        _ => Time::MAX,
    };
    assert!(done(&slack[1]) < done(&slack[0]), "the low one went first");
}

#[test]
fn test_the_lending_margin_decides_whether_the_high_one_can_spare_the_time() {
    // The pair above at 100 kB/s: with the low message first the high one's 110 kB must fit
    // in its 2 s at the lending share of the rate. At 75 % (75 kB/s: 1.47 s) and 100 % it
    // does and the low one goes first; at 50 % (50 kB/s: 2.2 s) it does not, so the low one
    // waits and misses its deadline. The high one is on time whatever the share.
    let with_share = |percent: u8| {
        let mut s = Scheduler::new(NaiConfig {
            lend_at_percent: percent,
            ..NaiConfig::default()
        });
        s.set_rate(Time::ZERO, 1e5);
        serve_exactly(&mut s, 1e5, &lend_pair())
    };
    for percent in [75, 100] {
        let ended = with_share(percent);
        assert!(ended.iter().all(on_time), "{percent} %: {ended:?}");
    }
    let ended = with_share(50);
    assert!(on_time(&ended[0]), "50 %: {ended:?}");
    assert!(
        !on_time(&ended[1]),
        "50 %: the low one was lent the link: {ended:?}"
    );
}

#[test]
fn test_the_lending_margin_is_clamped_to_a_share_of_the_rate() {
    for (given, kept) in [(0, 1), (1, 1), (75, 75), (100, 100), (255, 100)] {
        let s = Scheduler::new(NaiConfig {
            lend_at_percent: given,
            ..NaiConfig::default()
        });
        assert_eq!(s.config().lend_at_percent, kept, "given {given}");
    }
}

#[test]
fn test_a_high_message_that_needs_the_link_takes_it_back() {
    // As above, and at 0.2 s an urgent 30 kB high message due 0.4 s later: with the low
    // message's remaining 30 kB ahead of it, it would finish at 0.8 s, so it is served at
    // once (done at 0.5 s); the low one resumes ahead of the big high one after it.
    let mut arrivals = lend_pair();
    arrivals.push(Arrival {
        at_ms: 200,
        bytes: 30_000,
        priority: Priority::HIGH,
        timer_ms: 400,
    });
    let slack = serve_exactly(&mut scheduler(ServiceOrder::Slack, 1e5), 1e5, &arrivals);
    assert!(slack.iter().all(on_time), "slack: {slack:?}");
    match slack[2].outcome {
        Outcome::Delivered { at, .. } => {
            assert!(at <= Time::from_millis(501), "urgent done at {at:?}");
        }
        o => panic!("urgent: {o:?}"),
    }
}

#[test]
fn test_a_low_message_is_refused_only_if_its_own_level_cannot_fit_it() {
    // 100 kB/s, 90 kB of high messages due in 5 s queued. Strict order refuses a low 50 kB
    // message due in 1 s (140 kB ahead of its deadline); the slack order admits it (its level
    // holds 50 kB) and delivers it first. A second low one of 60 kB due in 1 s cannot fit
    // behind the first even with the link to itself: refused in both.
    let s_strict = &mut scheduler(ServiceOrder::Strict, 1e5);
    let s_slack = &mut scheduler(ServiceOrder::Slack, 1e5);
    for s in [&mut *s_strict, &mut *s_slack] {
        let high = SendOptions {
            priority: Priority::HIGH,
            timer: Some(Duration::from_secs(5)),
            on_expiry: OnExpiry::Discard,
        };
        s.submit(Time::ZERO, Q0, 90_000, high).unwrap();
    }
    let low = SendOptions {
        priority: Priority::LOW,
        timer: Some(Duration::from_secs(1)),
        on_expiry: OnExpiry::Discard,
    };
    assert!(matches!(
        s_strict.submit(Time::ZERO, Q0, 50_000, low),
        Err(NaiError::Rejected {
            reason: RejectReason::CannotMeetDeadline,
            ..
        })
    ));
    let first = s_slack.submit(Time::ZERO, Q0, 50_000, low).unwrap();
    assert!(matches!(
        s_slack.submit(Time::ZERO, Q0, 60_000, low),
        Err(NaiError::Rejected {
            reason: RejectReason::CannotMeetDeadline,
            ..
        })
    ));
    assert_eq!(
        s_slack.next_chunk_at(Time::ZERO, PIECE, true).map(|c| c.id),
        Some(first)
    );
}

fn arrival() -> impl Strategy<Value = Arrival> {
    (0u64..3000, 1u64..40_000, 0u8..3, 100u64..3000).prop_map(|(at_ms, bytes, p, timer_ms)| {
        Arrival {
            at_ms,
            bytes,
            priority: Priority(p),
            timer_ms,
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// On a link that carries exactly the rate the scheduler plans with, lending slack never
    /// costs the most important level anything: every message of it that was admitted is
    /// delivered by its deadline, as in strict order. Every message gets exactly one outcome
    /// (`serve_exactly` checks that none gets two).
    #[test]
    fn lending_slack_never_makes_an_admitted_top_level_message_late(
        arrivals in proptest::collection::vec(arrival(), 1..40),
    ) {
        for service in [ServiceOrder::Strict, ServiceOrder::Slack] {
            let ended = serve_exactly(&mut scheduler(service, 50_000.0), 50_000.0, &arrivals);
            prop_assert_eq!(ended.len(), arrivals.len());
            for e in &ended {
                prop_assert!(!matches!(e.outcome, Outcome::Abandoned), "{:?}: no outcome", e);
                if e.priority == Priority::HIGH && e.admitted {
                    prop_assert!(on_time(e), "{:?}: {:?}", service, e);
                }
            }
        }
    }
}
