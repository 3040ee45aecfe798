//! The bytes of messages submitted with their data, held by a sender until each message's
//! outcome (ATP over SPP, ATP over TCP and the TCP baselines share it), under one bound.

use super::{MessageId, NaiError, QueueId, Scheduler, SendOptions};
use crate::time::Time;
use bytes::Bytes;
use std::collections::BTreeMap;

/// Message bytes by message, at most `max_bytes` in all.
#[derive(Clone, Debug)]
pub struct PayloadStore {
    payloads: BTreeMap<MessageId, Bytes>,
    buffered_bytes: u64,
    max_bytes: u64,
}

impl PayloadStore {
    /// An empty store holding at most `max_bytes`.
    pub fn new(max_bytes: u64) -> PayloadStore {
        PayloadStore {
            payloads: BTreeMap::new(),
            buffered_bytes: 0,
            max_bytes,
        }
    }

    /// Whether `len` more bytes fit; [`NaiError::BufferFull`] if not. Call before submitting
    /// the message, so a refusal allocates nothing and queues nothing.
    pub fn check(&self, len: u64) -> Result<(), NaiError> {
        if self.buffered_bytes.saturating_add(len) > self.max_bytes {
            return Err(NaiError::BufferFull {
                bytes: len,
                buffered: self.buffered_bytes,
                max: self.max_bytes,
            });
        }
        Ok(())
    }

    /// Holds `data` for `id` (after a successful [`check`](Self::check) and submission).
    pub fn insert(&mut self, id: MessageId, data: Bytes) {
        self.buffered_bytes = self.buffered_bytes.saturating_add(data.len() as u64);
        if let Some(old) = self.payloads.insert(id, data) {
            self.buffered_bytes = self.buffered_bytes.saturating_sub(old.len() as u64);
        }
    }

    /// Submits `data` to `nai` (its length as the size) and holds it; nothing is queued or
    /// held if the bound or the scheduler refuses.
    pub fn submit(
        &mut self,
        nai: &mut Scheduler,
        now: Time,
        queue: QueueId,
        data: Bytes,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        self.check(data.len() as u64)?;
        let id = nai.submit(now, queue, data.len() as u64, opts)?;
        self.insert(id, data);
        Ok(id)
    }

    /// `len` bytes of message `id` from `offset`, if held and in range.
    pub fn get(&self, id: MessageId, offset: u64, len: u64) -> Option<&[u8]> {
        let start = usize::try_from(offset).ok()?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        self.payloads.get(&id)?.get(start..end)
    }

    /// Releases message `id`'s bytes (its outcome is final).
    pub fn release(&mut self, id: MessageId) {
        if let Some(data) = self.payloads.remove(&id) {
            self.buffered_bytes = self.buffered_bytes.saturating_sub(data.len() as u64);
        }
    }

    /// Bytes held.
    pub fn buffered_bytes(&self) -> u64 {
        self.buffered_bytes
    }
}
