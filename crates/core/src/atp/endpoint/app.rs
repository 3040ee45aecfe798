//! The application's side of an ATP connection: the NAI calls of `papers/000_97f7680fd99dd928.txt`
//! §3 (send with options, abort, defer, restart, re-prioritise, new callback timer, queues,
//! bandwidth notifications, queries), made on [`AtpConnection`] or, by id, on the
//! [`Endpoint`](super::Endpoint). Engines make these calls and nothing deeper: the connection's
//! sender, scheduler and SPP state stay core's, so both engines drive ATP at the same layer.
//!
//! Receiving is an event: a whole message arrives as [`ConnEvent::Delivered`](super::ConnEvent)
//! from `poll_event`, and each sent message's one outcome as
//! [`ConnEvent::Nai`](super::ConnEvent)`(`[`NaiEvent::Outcome`](crate::nai::NaiEvent)`)`.

use super::connection::AtpConnection;
use crate::Time;
use crate::nai::app::NaiPort;
use crate::nai::{
    MessageId, MessageState, NaiError, NotificationId, Priority, QueueId, SendOptions,
};
use crate::spp::SppStats;
use bytes::Bytes;
use std::time::Duration;
use thiserror::Error;

/// Why an application call on a connection failed.
#[derive(Clone, Copy, Debug, PartialEq, Error)]
pub enum AppError {
    /// No open connection has this id (never existed, still connecting, or gone).
    #[error("no open connection {0}")]
    UnknownConnection(u64),
    /// The connection is closing or closed: it takes no new message.
    #[error("the connection is closing")]
    Closing,
    /// NAI refused the call: admission control ([`NaiError::Rejected`]: the message still has
    /// its id, and its `Rejected` outcome follows as an event), a bound, an unknown message
    /// or queue, a call that does not fit the message's state.
    #[error(transparent)]
    Nai(#[from] NaiError),
}

/// A change to a live message (§3.1: abort, defer, restart; §3.3: new priority or timer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageControl {
    /// Abort: its outcome is `Cancelled` (or `Delivered`, if the receiver already had it).
    Cancel,
    /// Suspend; its timer keeps running.
    Defer,
    /// Restart a deferred message, or continue one suspended by its timer.
    Resume,
    /// Move it to another priority level (admission-checked).
    Priority(Priority),
    /// A new callback timer counted from now, or none (admission-checked).
    Timer(Option<Duration>),
}

/// One connection's transport counters and rates, for reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConnectionStats {
    /// SPP's counters for what this side sent.
    pub spp: SppStats,
    /// Smoothed RTT, once measured.
    pub srtt: Option<Duration>,
    /// The rate SPP is paced at (datagram bytes per second).
    pub pacing_bytes_per_s: f64,
    /// The rate NAI plans with (message bytes per second): the estimate given to the
    /// application.
    pub planning_bytes_per_s: f64,
    /// Packet pairs sent.
    pub packet_pairs: u64,
    /// Datagrams from the peer that did not parse.
    pub malformed: u64,
    /// Bytes of submitted messages held until their outcome.
    pub buffered_bytes: u64,
}

impl AtpConnection {
    /// Sends a message with its bytes on `queue` (§3.1). Returns its id, or why it was refused:
    /// [`NaiError::Rejected`] by admission control (its `Rejected` outcome still follows as an
    /// event), a bound ([`NaiError::BufferFull`], …), or [`AppError::Closing`].
    pub fn send(
        &mut self,
        now: Time,
        queue: QueueId,
        data: impl Into<Bytes>,
        opts: SendOptions,
    ) -> Result<MessageId, AppError> {
        if !self.is_open() {
            return Err(AppError::Closing);
        }
        Ok(self.sender.submit_bytes(now, queue, data, opts)?)
    }

    /// Applies `op` to live message `id`. Allowed while the connection drains (an application
    /// may still cancel what holds up its close), not once it has closed.
    pub fn control(
        &mut self,
        now: Time,
        id: MessageId,
        op: MessageControl,
    ) -> Result<(), AppError> {
        if self.is_closed() {
            return Err(AppError::Closing);
        }
        let nai = self.sender.nai_mut();
        let r = match op {
            MessageControl::Cancel => nai.cancel(now, id),
            MessageControl::Defer => nai.defer(now, id),
            MessageControl::Resume => nai.resume(now, id),
            MessageControl::Priority(p) => nai.set_priority(now, id, p),
            MessageControl::Timer(t) => nai.set_deadline(now, id, t.map(|t| now.saturating_add(t))),
        };
        Ok(r?)
    }

    /// Aborts message `id` ([`MessageControl::Cancel`]).
    pub fn cancel(&mut self, now: Time, id: MessageId) -> Result<(), AppError> {
        self.control(now, id, MessageControl::Cancel)
    }

    /// Suspends message `id` ([`MessageControl::Defer`]).
    pub fn defer(&mut self, now: Time, id: MessageId) -> Result<(), AppError> {
        self.control(now, id, MessageControl::Defer)
    }

    /// Restarts or continues message `id` ([`MessageControl::Resume`]).
    pub fn resume(&mut self, now: Time, id: MessageId) -> Result<(), AppError> {
        self.control(now, id, MessageControl::Resume)
    }

    /// Moves message `id` to `priority` ([`MessageControl::Priority`]).
    pub fn set_priority(
        &mut self,
        now: Time,
        id: MessageId,
        priority: Priority,
    ) -> Result<(), AppError> {
        self.control(now, id, MessageControl::Priority(priority))
    }

    /// Creates another message queue (§3.2).
    pub fn create_queue(&mut self) -> Result<QueueId, AppError> {
        Ok(self.sender.nai_mut().create_queue()?)
    }

    /// Registers a bandwidth range in message bytes per second (§3.3); a
    /// [`NaiEvent::Bandwidth`](crate::nai::NaiEvent::Bandwidth) fires once the estimate
    /// leaves it.
    pub fn register_bandwidth_range(
        &mut self,
        low_bytes_per_s: f64,
        high_bytes_per_s: f64,
    ) -> Result<NotificationId, AppError> {
        let nai = self.sender.nai_mut();
        Ok(nai.register_bandwidth_range(low_bytes_per_s, high_bytes_per_s)?)
    }

    /// Withdraws a registration; `false` if it had fired or never existed.
    pub fn unregister_bandwidth_range(&mut self, id: NotificationId) -> bool {
        self.sender.nai_mut().unregister_bandwidth_range(id)
    }

    /// The state of live message `id`.
    pub fn message_state(&self, id: MessageId) -> Result<MessageState, AppError> {
        Ok(self.sender.nai().state(id)?)
    }

    /// Bytes of live message `id` the receiver has not acknowledged.
    pub fn bytes_remaining(&self, id: MessageId) -> Result<u64, AppError> {
        Ok(self.sender.nai().bytes_remaining(id)?)
    }

    /// Messages of this side not yet final.
    pub fn live_messages(&self) -> usize {
        self.sender.nai().live_messages()
    }

    /// The bandwidth NAI plans with, in message bytes per second: the payload share of ATP's
    /// estimate (§4.2), what admission control and notifications use.
    pub fn bandwidth_bytes_per_s(&self) -> f64 {
        self.sender.planning_rate_bytes_per_s()
    }

    /// This side's counters and rates.
    pub fn stats(&self) -> ConnectionStats {
        let tx = &self.sender;
        ConnectionStats {
            spp: *tx.stats(),
            srtt: tx.spp().rtt().srtt(),
            pacing_bytes_per_s: tx.pacing_rate_bytes_per_s(),
            planning_bytes_per_s: tx.planning_rate_bytes_per_s(),
            packet_pairs: tx.packet_pairs(),
            malformed: self.malformed(),
            buffered_bytes: tx.buffered_bytes(),
        }
    }
}

/// An ATP connection is an [`NaiPort`], so an [`NaiApp`](crate::nai::app::NaiApp) runs on it
/// unchanged in either engine. A submission by size sends that many zero bytes (checked against
/// the message and buffer bounds before anything is allocated); an application with contents
/// calls [`AtpConnection::send`].
impl NaiPort for AtpConnection {
    fn submit(
        &mut self,
        now: Time,
        size_bytes: u64,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        let max = self.sender.nai().config().max_message_bytes;
        if size_bytes > max {
            return Err(NaiError::TooLarge {
                bytes: size_bytes,
                max,
            });
        }
        let buffered = self.sender.buffered_bytes();
        let limit = self.max_buffered_bytes();
        let len = usize::try_from(size_bytes)
            .ok()
            .filter(|_| buffered.saturating_add(size_bytes) <= limit);
        let Some(len) = len else {
            return Err(NaiError::BufferFull {
                bytes: size_bytes,
                buffered,
                max: limit,
            });
        };
        match self.send(now, QueueId(0), vec![0; len], opts) {
            Ok(id) => Ok(id),
            Err(AppError::Nai(e)) => Err(e),
            // A closing connection takes nothing: to an NAI application that is a full buffer
            // that never drains (its `Closed` event says why).
            Err(AppError::Closing | AppError::UnknownConnection(_)) => Err(NaiError::BufferFull {
                bytes: size_bytes,
                buffered,
                max: buffered,
            }),
        }
    }

    fn register_bandwidth_range(&mut self, low: f64, high: f64) -> Option<NotificationId> {
        AtpConnection::register_bandwidth_range(self, low, high).ok()
    }

    fn bandwidth_estimate(&self) -> Option<f64> {
        Some(self.bandwidth_bytes_per_s())
    }

    fn live_messages(&self) -> usize {
        AtpConnection::live_messages(self)
    }
}
