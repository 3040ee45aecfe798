//! Admission control and early expiry (`papers/000_97f7680fd99dd928.txt` §3.3).
//!
//! > "deciding if a new message can be added to the currently queued messages without
//! > jeopardising the timers of any existing messages (that is, without causing a message which
//! > was deliverable under the current bandwidth to exceed its timeout value)."
//!
//! # Model
//!
//! A queue is served in the order `(priority level, deadline, submission sequence)`: strict
//! priority between levels, earliest deadline first within a level, messages without a timer
//! last in their level. Under the queue's rate `r` (its share of the estimate), the message at
//! position `k` finishes when the unsent bytes of everything up to and including it, `C_k`, are
//! out: it is deliverable iff `C_k <= r * (d_k - now)`.
//!
//! Admitting a message of `s` unsent bytes at position `p`:
//! * it must itself be deliverable: `C_{<p} + s <= r * (d - now)`;
//! * every protected message after `p` that is deliverable now (`C_k <= r (d_k - now)`) must
//!   stay so (`C_k + s <= r (d_k - now)`). Messages before `p` are unaffected, and so is every
//!   message at a more important level, whose bytes enter only as the per-level total `C_{<p}`.
//!   Which messages after `p` are protected is [`AdmissionScope`]: by default those of the
//!   same level only (strict priorities: a more important message may push a less important
//!   one past its deadline, and early expiry then discards it), or every one (`AllLevels`).
//!
//! # Cost
//!
//! One pass over the messages of the affected levels of one queue (the new message's level and
//! the less important ones); more important levels cost O(1) through per-level byte totals.
//! With the target load (10,000 messages across 100 queues) that is ~100 entries per
//! admission. An incremental structure (an order-statistics tree with lazy suffix-add and
//! suffix-minimum of slack) would make this O(log n), but slack must then ignore messages that
//! are already undeliverable, which a plain minimum cannot do; the linear pass is exact and was
//! measured fast enough (see `nai::tests::bench_admission_rate`, `#[ignore]`d).
//!
//! Queues: admission checks the target queue at the share it will have once the message is in;
//! other queues' admitted messages are not re-checked when a new queue becomes active (their
//! share shrinks). Those messages, if now undeliverable, are expired early at the next rate
//! update, exactly as if the estimate had dropped: a queue's bandwidth *is* its share (§3.2).

use super::AdmissionScope;
use super::message::{MessageId, RejectReason};
use crate::time::Time;
use std::collections::BTreeMap;

/// Service order within a queue: (level, deadline or `Time::MAX`, submission sequence).
pub(super) type OrderKey = (u8, Time, u64);

/// What the order map stores per message: its id and unsent bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub id: MessageId,
    pub unsent: u64,
}

/// Bytes that can be sent at `rate_bytes_per_s` between `now` and `deadline`.
fn budget_bytes(rate_bytes_per_s: f64, now: Time, deadline: Time) -> f64 {
    if deadline == Time::MAX {
        f64::INFINITY
    } else if deadline <= now {
        0.0
    } else {
        rate_bytes_per_s * (deadline - now).as_secs_f64()
    }
}

/// Decides whether a message with `key` and `unsent` bytes may join `order`.
///
/// `level_unsent[l]` is the total unsent bytes of level `l` in `order`.
pub(super) fn check(
    order: &BTreeMap<OrderKey, Entry>,
    level_unsent: &[u64],
    key: OrderKey,
    unsent: u64,
    rate_bytes_per_s: f64,
    now: Time,
    scope: AdmissionScope,
) -> Result<(), RejectReason> {
    let level = usize::from(key.0);
    let mut before: u64 = level_unsent.iter().take(level).sum();
    let level_start = (key.0, Time::ZERO, 0);
    for (_, e) in order.range(level_start..key) {
        before += e.unsent;
    }
    let own = before.saturating_add(unsent);
    if key.1 != Time::MAX && own as f64 > budget_bytes(rate_bytes_per_s, now, key.1) {
        return Err(RejectReason::CannotMeetDeadline);
    }
    if unsent == 0 {
        return Ok(());
    }
    let mut c = before;
    let behind = match (scope, key.0.checked_add(1)) {
        (AdmissionScope::SameLevel, Some(next)) => order.range(key..(next, Time::ZERO, 0)),
        _ => order.range(key..),
    };
    for (k, e) in behind {
        c = c.saturating_add(e.unsent);
        if k.1 == Time::MAX {
            continue;
        }
        let b = budget_bytes(rate_bytes_per_s, now, k.1);
        if c as f64 <= b && c.saturating_add(unsent) as f64 > b {
            return Err(RejectReason::WouldJeopardize(e.id));
        }
    }
    Ok(())
}

/// Messages of `order` that cannot make their deadline at `rate_bytes_per_s`, greedily in
/// service order: a message found undeliverable is taken out, which helps the ones behind it.
/// Messages whose deadline has already passed are left to the deadline timer.
pub(super) fn undeliverable(
    order: &BTreeMap<OrderKey, Entry>,
    rate_bytes_per_s: f64,
    now: Time,
) -> Vec<MessageId> {
    let mut out = Vec::new();
    let mut c: u64 = 0;
    for (k, e) in order {
        c = c.saturating_add(e.unsent);
        if k.1 == Time::MAX || k.1 <= now {
            continue;
        }
        if c as f64 > budget_bytes(rate_bytes_per_s, now, k.1) {
            out.push(e.id);
            c -= e.unsent;
        }
    }
    out
}
