//! The NAI application's port on an endpoint connection (and on one that has ended).

use crate::agents::message_bytes::SubmitBytes;
use crate::agents::nai_app::NaiPort;
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{AppError, AtpConnection};
use adaptnet_core::nai::{MessageId, NaiError, NotificationId, QueueId, SendOptions};

/// The NAI port of a connection that has ended: it takes nothing. Events still owed to the
/// application (there are none after `Closed`, but the ledger must never miss an outcome)
/// are handed over with it.
pub(super) struct Gone;

impl NaiPort for Gone {
    fn submit(&mut self, _: Time, size_bytes: u64, _: SendOptions) -> Result<MessageId, NaiError> {
        Err(NaiError::BufferFull {
            bytes: size_bytes,
            buffered: 0,
            max: 0,
        })
    }
    fn register_bandwidth_range(&mut self, _: f64, _: f64) -> Option<NotificationId> {
        None
    }
    fn bandwidth_estimate(&self) -> Option<f64> {
        None
    }
    fn live_messages(&self) -> usize {
        0
    }
}

impl SubmitBytes for Gone {
    fn port(&mut self) -> &mut dyn NaiPort {
        self
    }
    fn port_ref(&self) -> &dyn NaiPort {
        self
    }
    fn buffered_bytes(&self) -> u64 {
        0
    }
    fn submit_bytes(
        &mut self,
        now: Time,
        data: Vec<u8>,
        o: SendOptions,
    ) -> Result<MessageId, NaiError> {
        self.submit(now, data.len() as u64, o)
    }
}

/// The application's side of a connection: core's `send` on queue 0, as the direct mode's
/// port does on the sender's scheduler.
impl SubmitBytes for AtpConnection {
    fn port(&mut self) -> &mut dyn NaiPort {
        self
    }
    fn port_ref(&self) -> &dyn NaiPort {
        self
    }
    fn buffered_bytes(&self) -> u64 {
        self.stats().buffered_bytes
    }
    fn submit_bytes(
        &mut self,
        now: Time,
        data: Vec<u8>,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        let len = data.len() as u64;
        self.send(now, QueueId(0), data, opts).map_err(|e| match e {
            AppError::Nai(e) => e,
            // Closing: the application was stopped first, so this is not reached; to an NAI
            // application it would be a buffer that takes nothing.
            AppError::Closing | AppError::UnknownConnection(_) => NaiError::BufferFull {
                bytes: len,
                buffered: 0,
                max: 0,
            },
        })
    }
}
