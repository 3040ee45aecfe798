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
//! # Slack order
//!
//! Under [`ServiceOrder::Slack`] every level is judged on its own: `C_k` counts the unsent
//! bytes of `k`'s own level up to and including it, not the more important levels' (they lend
//! their slack, see [`slack_first`]), so a message is refused or expired early only when it
//! could not make its deadline even with the link to its level alone. A newcomer then
//! affects only its own level, whatever the [`AdmissionScope`].
//!
//! Queues: admission checks the target queue at the share it will have once the message is in;
//! other queues' admitted messages are not re-checked when a new queue becomes active (their
//! share shrinks). Those messages, if now undeliverable, are expired early at the next rate
//! update, exactly as if the estimate had dropped: a queue's bandwidth *is* its share (§3.2).

use super::message::{MessageId, RejectReason};
use super::{AdmissionScope, NaiConfig, ServiceOrder};
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

/// The start of level `level` in the service order.
fn level_start(level: u8) -> OrderKey {
    (level, Time::ZERO, 0)
}

/// Decides whether a message with `key` and `unsent` bytes may join `order`, by `rules`'
/// admission scope and service order.
///
/// `level_unsent[l]` is the total unsent bytes of level `l` in `order`.
pub(super) fn check(
    order: &BTreeMap<OrderKey, Entry>,
    level_unsent: &[u64],
    key: OrderKey,
    unsent: u64,
    rate_bytes_per_s: f64,
    now: Time,
    rules: &NaiConfig,
) -> Result<(), RejectReason> {
    let level = usize::from(key.0);
    let mut before: u64 = match rules.service {
        ServiceOrder::Strict => level_unsent.iter().take(level).sum(),
        ServiceOrder::Slack => 0,
    };
    for (_, e) in order.range(level_start(key.0)..key) {
        before += e.unsent;
    }
    let own = before.saturating_add(unsent);
    if key.1 != Time::MAX && own as f64 > budget_bytes(rate_bytes_per_s, now, key.1) {
        return Err(RejectReason::CannotMeetDeadline);
    }
    if unsent == 0 {
        return Ok(());
    }
    let own_level_only =
        rules.admission == AdmissionScope::SameLevel || rules.service == ServiceOrder::Slack;
    let behind = match (own_level_only, key.0.checked_add(1)) {
        (true, Some(next)) => order.range(key..level_start(next)),
        _ => order.range(key..),
    };
    match first_jeopardised(behind, before, unsent, rate_bytes_per_s, now, 1.0) {
        Some(id) => Err(RejectReason::WouldJeopardize(id)),
        None => Ok(()),
    }
}

/// The first of `entries` (in service order, after `before` bytes) that can make its
/// deadline now but would not with `extra` more bytes served before it, at `share` of the
/// rate. Messages without a deadline, or that cannot make it anyway, are not protected.
fn first_jeopardised<'a>(
    entries: impl Iterator<Item = (&'a OrderKey, &'a Entry)>,
    before: u64,
    extra: u64,
    rate_bytes_per_s: f64,
    now: Time,
    share: f64,
) -> Option<MessageId> {
    let mut c = before;
    for (k, e) in entries {
        c = c.saturating_add(e.unsent);
        if k.1 == Time::MAX {
            continue;
        }
        let b = budget_bytes(rate_bytes_per_s, now, k.1);
        if c as f64 <= b && c.saturating_add(extra) as f64 > share * b {
            return Some(e.id);
        }
    }
    None
}

/// Messages of `order` that cannot make their deadline at `rate_bytes_per_s`, greedily in
/// service order: a message found undeliverable is taken out, which helps the ones behind it.
/// Messages whose deadline has already passed are left to the deadline timer. Under
/// [`ServiceOrder::Slack`] each level is judged on its own (see the module docs).
pub(super) fn undeliverable(
    order: &BTreeMap<OrderKey, Entry>,
    rate_bytes_per_s: f64,
    now: Time,
    service: ServiceOrder,
) -> Vec<MessageId> {
    let mut out = Vec::new();
    let mut c: u64 = 0;
    let mut level = None;
    for (k, e) in order {
        // Slack order: each level starts from nothing (the ones above lend it their slack).
        if service == ServiceOrder::Slack && level != Some(k.0) {
            level = Some(k.0);
            c = 0;
        }
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

/// The message a queue serves before more important ones under [`ServiceOrder::Slack`], if
/// any: the first message (earliest deadline) of the most important level for which all of
/// these hold at `rate_bytes_per_s` from `now`:
///
/// * in strict order it would miss its deadline (the bytes of every more important level
///   and its own exceed its budget): otherwise strict order serves it in time;
/// * served first, it would make its deadline (its own bytes fit its budget);
/// * every more important message that can make its deadline in strict order still can with
///   this message's bytes ahead of it, even at `lend_at` of the rate
///   ([`NaiConfig::lend_at_percent`](super::NaiConfig::lend_at_percent)). A more important
///   message that cannot make it anyway is not protected, as in admission.
///
/// This is slack stealing, from fixed-priority real-time scheduling: the link time more
/// important messages can spare before their deadlines goes to a less important message
/// that needs it now. It protects the messages queued now; the caller works it out again
/// whenever the queue or the rate changes, so a more important message that arrives and
/// needs the link takes it back. One pass over the more important levels' messages.
pub(super) fn slack_first(
    order: &BTreeMap<OrderKey, Entry>,
    level_unsent: &[u64],
    rate_bytes_per_s: f64,
    lend_at: f64,
    now: Time,
) -> Option<OrderKey> {
    let mut above: u64 = 0;
    for (level, &bytes) in level_unsent.iter().enumerate() {
        if bytes == 0 {
            continue;
        }
        if above > 0
            && let Ok(l) = u8::try_from(level)
            && let Some((&key, e)) = order.range(level_start(l)..).next()
            && key.0 == l
            && key.1 != Time::MAX
            && key.1 > now
        {
            let budget = budget_bytes(rate_bytes_per_s, now, key.1);
            let misses_in_order = above.saturating_add(e.unsent) as f64 > budget;
            let makes_it_first = e.unsent as f64 <= budget;
            if misses_in_order
                && makes_it_first
                && spares(order, l, e.unsent, rate_bytes_per_s, lend_at, now)
            {
                return Some(key);
            }
        }
        above = above.saturating_add(bytes);
    }
    None
}

/// Whether every message more important than `level` that can make its deadline in strict
/// order still can with `extra` bytes served before it, at `lend_at` of the rate. The rate is
/// an estimate, and on a variable link it is sometimes high: a lending decision that holds
/// only at the estimate turns every overestimate into a miss that strict order would not have
/// had. At 0.75 the lender is safe against an estimate up to a third above the rate the link
/// then carries (the rate control aims within 20 %).
fn spares(
    order: &BTreeMap<OrderKey, Entry>,
    level: u8,
    extra: u64,
    rate_bytes_per_s: f64,
    lend_at: f64,
    now: Time,
) -> bool {
    let above = order.range(..level_start(level));
    first_jeopardised(above, 0, extra, rate_bytes_per_s, now, lend_at).is_none()
}
