//! Every call the ATP driver makes into core's [`AtpConnection`] on the application's behalf —
//! send, the changes to a message, queues, bandwidth notifications, counters, the planning
//! rate — through core's application API (`atp::endpoint`'s `app.rs`), in one place.

use super::AtpConnectionStats;
use crate::error::{ConnectionError, SendError};
use crate::message::command::Control;
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{AppError, AtpConnection, MessageControl};
use adaptnet_core::nai::{MessageId, NotificationId, QueueId, SendOptions};

/// Core's refusal in the runtime's vocabulary. The driver checks its own record of a closing
/// connection first, so `Closing` here means core began the close (an idle timeout or the
/// peer's CLOSE, whose event is on its way).
fn refused(e: AppError) -> SendError {
    match e {
        AppError::Nai(e) => SendError::Nai(e),
        AppError::Closing | AppError::UnknownConnection(_) => {
            SendError::ConnectionLost(ConnectionError::LocallyClosed)
        }
    }
}

/// Submits a message with its bytes to `queue`.
pub(super) fn submit(
    conn: &mut AtpConnection,
    now: Time,
    queue: QueueId,
    data: bytes::Bytes,
    opts: SendOptions,
) -> Result<MessageId, SendError> {
    conn.send(now, queue, data, opts).map_err(refused)
}

/// Applies a change to a live message.
pub(super) fn control(
    conn: &mut AtpConnection,
    now: Time,
    id: MessageId,
    op: Control,
) -> Result<(), SendError> {
    let op = match op {
        Control::Cancel => MessageControl::Cancel,
        Control::Defer => MessageControl::Defer,
        Control::Resume => MessageControl::Resume,
        Control::Priority(p) => MessageControl::Priority(p),
        Control::Timer(t) => MessageControl::Timer(t),
    };
    conn.control(now, id, op).map_err(refused)
}

/// Creates another message queue.
pub(super) fn create_queue(conn: &mut AtpConnection) -> Result<QueueId, SendError> {
    conn.create_queue().map_err(refused)
}

/// Registers a bandwidth range (message bytes per second).
pub(super) fn register_bandwidth_range(
    conn: &mut AtpConnection,
    low: f64,
    high: f64,
) -> Result<NotificationId, SendError> {
    conn.register_bandwidth_range(low, high).map_err(refused)
}

/// The rate NAI plans with (message bytes per second).
pub(super) fn planning_rate(conn: &AtpConnection) -> f64 {
    conn.bandwidth_bytes_per_s()
}

/// This side's counters.
pub(super) fn stats(conn: &AtpConnection) -> AtpConnectionStats {
    let s = conn.stats();
    AtpConnectionStats {
        spp: s.spp,
        srtt: s.srtt,
        pacing_bytes_per_s: s.pacing_bytes_per_s,
        packet_pairs: s.packet_pairs,
        malformed: s.malformed,
        control: conn.sender().control().map(|c| super::ControlState {
            phase: c.phase(),
            bottleneck_bytes_per_s: c.bottleneck_bytes_per_s(),
            min_rtt: c.min_rtt(),
            cwnd_bytes: c.cwnd_bytes(),
            stats: c.stats(),
        }),
    }
}
