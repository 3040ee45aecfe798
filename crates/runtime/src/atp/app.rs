//! Every call the ATP driver makes into core's [`AtpConnection`] on the application's behalf —
//! submit, cancel, defer, resume, re-prioritise, new timer, queues, bandwidth notifications,
//! counters, the planning rate — in one place, so that a change of core's application API
//! (an `AtpConnection::send/cancel/…` in place of reaching through its sender) changes this
//! file only.

use super::AtpConnectionStats;
use crate::message::command::Control;
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::AtpConnection;
use adaptnet_core::nai::{MessageId, NaiError, NotificationId, QueueId, SendOptions};

/// Submits a message with its bytes to `queue`.
pub(super) fn submit(
    conn: &mut AtpConnection,
    now: Time,
    queue: QueueId,
    data: Vec<u8>,
    opts: SendOptions,
) -> Result<MessageId, NaiError> {
    conn.sender_mut().submit_bytes(now, queue, data, opts)
}

/// Applies a change to a live message.
pub(super) fn control(
    conn: &mut AtpConnection,
    now: Time,
    id: MessageId,
    op: Control,
) -> Result<(), NaiError> {
    let nai = conn.sender_mut().nai_mut();
    match op {
        Control::Cancel => nai.cancel(now, id),
        Control::Defer => nai.defer(now, id),
        Control::Resume => nai.resume(now, id),
        Control::Priority(p) => nai.set_priority(now, id, p),
        Control::Timer(t) => nai.set_deadline(now, id, t.map(|t| now.saturating_add(t))),
    }
}

/// Creates another message queue.
pub(super) fn create_queue(conn: &mut AtpConnection) -> Result<QueueId, NaiError> {
    conn.sender_mut().nai_mut().create_queue()
}

/// Registers a bandwidth range (message bytes per second).
pub(super) fn register_bandwidth_range(
    conn: &mut AtpConnection,
    low: f64,
    high: f64,
) -> Result<NotificationId, NaiError> {
    conn.sender_mut()
        .nai_mut()
        .register_bandwidth_range(low, high)
}

/// The rate NAI plans with (message bytes per second).
pub(super) fn planning_rate(conn: &AtpConnection) -> f64 {
    conn.sender().planning_rate_bytes_per_s()
}

/// This side's counters.
pub(super) fn stats(conn: &AtpConnection) -> AtpConnectionStats {
    let tx = conn.sender();
    AtpConnectionStats {
        spp: *tx.stats(),
        srtt: tx.spp().rtt().srtt(),
        pacing_bytes_per_s: tx.pacing_rate_bytes_per_s(),
        packet_pairs: tx.packet_pairs(),
        malformed: conn.malformed(),
        control: tx.control().map(|c| super::ControlState {
            phase: c.phase(),
            bottleneck_bytes_per_s: c.bottleneck_bytes_per_s(),
            min_rtt: c.min_rtt(),
            stats: c.stats(),
        }),
    }
}
