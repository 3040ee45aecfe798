//! Message bytes for the simulator's NAI agents (ATP over SPP, ATP over TCP, NAI-TCP,
//! NAI-MTCPk), when a run asks for them ([`MessageData::Bytes`]).
//!
//! NAI is message-oriented: the application hands NAI its data units and the receiver gets
//! them back whole (`papers/000_97f7680fd99dd928.txt` §3.1). By default the simulator moves
//! sizes only — the applications submit sizes and packets carry byte counts — which is all the
//! reproductions need and keeps them fast. With [`MessageData::Bytes`] the sending agent gives
//! every message contents drawn from a seeded generator (so a run stays reproducible from its
//! seed), submits them through core's bytes path (`submit_bytes`), and puts the bytes core
//! hands out for each datagram or stream segment into the packet ([`Packet::payload`]); the
//! receiving agent hands the bytes it gets to core's payload-aware calls, and core delivers
//! each message with its bytes. Both sides keep a SHA-256 digest per message, so a run can
//! check every delivery against what was sent ([`PayloadCheck`]).
//!
//! Scheduling is unchanged by carrying bytes: core sees the same sizes, packets have the same
//! lengths, and the generator has its own seed, so a run with bytes makes the same decisions
//! as the same run without (a test checks this).
//!
//! Memory on the simulator's side: each packet in flight holds at most one datagram's or one
//! TCP segment's bytes, shared between clones; each TCP connection holds its unacknowledged
//! stream bytes (bounded by the framer's unacknowledged-byte limit) and a receive ring of
//! `recv_buffer` bytes; a message's contents are generated only after the sender's buffer bound
//! ([`NaiError::BufferFull`]) is checked. Per message, one 32-byte digest on each side, like the
//! ledger's record of it.
//!
//! [`Packet::payload`]: crate::packet::Packet::payload

use adaptnet_core::Time;
use adaptnet_core::atp::AtpSender;
use adaptnet_core::atp::tcp::AtpTcpSender;
use adaptnet_core::nai::NaiEvent;
use adaptnet_core::nai::app::NaiPort;
use adaptnet_core::nai::app::{AppHost, Ledger, NaiApp};
use adaptnet_core::nai::baseline::BaselineSender;
use adaptnet_core::nai::{MessageId, NaiError, NotificationId, QueueId, SendOptions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// A message's SHA-256 digest.
pub type Digest = [u8; 32];

/// The SHA-256 digest of `data`.
pub fn digest(data: &[u8]) -> Digest {
    Sha256::digest(data).into()
}

/// Whether an NAI flow's messages carry bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum MessageData {
    /// Sizes only: messages and packets carry byte counts (the default).
    #[default]
    Sizes,
    /// Every message carries seeded contents end to end (see the module docs).
    Bytes,
}

/// The sender's side: each message's contents, generated from a seed, and the digest of each
/// one the implementation accepted.
#[derive(Clone, Debug)]
pub struct MessageBytes {
    rng: ChaCha8Rng,
    max_buffered_bytes: u64,
    sent: BTreeMap<MessageId, Digest>,
}

impl MessageBytes {
    /// Contents drawn from `seed`, for a sender that holds at most `max_buffered_bytes` of
    /// message bytes (its configuration's bound, checked before anything is generated).
    pub fn new(seed: u64, max_buffered_bytes: u64) -> MessageBytes {
        MessageBytes {
            rng: ChaCha8Rng::seed_from_u64(seed),
            max_buffered_bytes,
            sent: BTreeMap::new(),
        }
    }

    /// The digest of every accepted message, by id.
    pub fn sent(&self) -> &BTreeMap<MessageId, Digest> {
        &self.sent
    }
}

/// A sender that can take a message with its bytes: the implementation behind an agent's
/// [`MessagePort`].
pub(crate) trait SubmitBytes {
    /// The implementation's own port, for everything but the bytes.
    fn port(&mut self) -> &mut dyn NaiPort;
    /// The same, for queries.
    fn port_ref(&self) -> &dyn NaiPort;
    /// Message bytes held now.
    fn buffered_bytes(&self) -> u64;
    /// Submits a message with its bytes (core's `submit_bytes`, on queue 0 where there are
    /// queues, as [`NaiPort::submit`] does).
    fn submit_bytes(
        &mut self,
        now: Time,
        data: Vec<u8>,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError>;
}

/// Both ATP senders offer the application their scheduler's queue 0.
macro_rules! atp_submit_bytes {
    ($sender:ty) => {
        impl SubmitBytes for $sender {
            fn port(&mut self) -> &mut dyn NaiPort {
                self.nai_mut()
            }
            fn port_ref(&self) -> &dyn NaiPort {
                self.nai()
            }
            fn buffered_bytes(&self) -> u64 {
                <$sender>::buffered_bytes(self)
            }
            fn submit_bytes(
                &mut self,
                now: Time,
                data: Vec<u8>,
                opts: SendOptions,
            ) -> Result<MessageId, NaiError> {
                <$sender>::submit_bytes(self, now, QueueId(0), data, opts)
            }
        }
    };
}

atp_submit_bytes!(AtpSender);
atp_submit_bytes!(AtpTcpSender);

impl SubmitBytes for BaselineSender {
    fn port(&mut self) -> &mut dyn NaiPort {
        self
    }
    fn port_ref(&self) -> &dyn NaiPort {
        self
    }
    fn buffered_bytes(&self) -> u64 {
        BaselineSender::buffered_bytes(self)
    }
    fn submit_bytes(
        &mut self,
        now: Time,
        data: Vec<u8>,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        BaselineSender::submit_bytes(self, now, data, opts)
    }
}

/// The port an NAI agent offers its application: the implementation's own, except that with
/// [`MessageBytes`] a submission of `size_bytes` becomes a message of that many seeded bytes.
pub(crate) struct MessagePort<'a, T: SubmitBytes> {
    /// The sender.
    pub(crate) target: &'a mut T,
    /// Contents and digests, when the flow carries bytes.
    pub(crate) bytes: Option<&'a mut MessageBytes>,
}

impl<T: SubmitBytes> NaiPort for MessagePort<'_, T> {
    fn submit(
        &mut self,
        now: Time,
        size_bytes: u64,
        opts: SendOptions,
    ) -> Result<MessageId, NaiError> {
        let Some(bytes) = self.bytes.as_deref_mut() else {
            return self.target.port().submit(now, size_bytes, opts);
        };
        let buffered = self.target.buffered_bytes();
        let len = usize::try_from(size_bytes)
            .ok()
            .filter(|_| buffered.saturating_add(size_bytes) <= bytes.max_buffered_bytes);
        let Some(len) = len else {
            return Err(NaiError::BufferFull {
                bytes: size_bytes,
                buffered,
                max: bytes.max_buffered_bytes,
            });
        };
        let mut data = vec![0u8; len];
        bytes.rng.fill_bytes(&mut data);
        let d = digest(&data);
        let id = self.target.submit_bytes(now, data, opts)?;
        bytes.sent.insert(id, d);
        Ok(id)
    }

    fn register_bandwidth_range(&mut self, low: f64, high: f64) -> Option<NotificationId> {
        self.target.port().register_bandwidth_range(low, high)
    }

    fn bandwidth_estimate(&self) -> Option<f64> {
        self.target.port_ref().bandwidth_estimate()
    }

    fn live_messages(&self) -> usize {
        self.target.port_ref().live_messages()
    }
}

/// The application half of every NAI sender agent: core's [`AppHost`] (the app and its
/// ledger) and, when the flow carries bytes, the message contents — so the app is always
/// offered a [`MessagePort`] over the agent's sender.
pub(crate) struct SenderHost {
    host: AppHost,
    bytes: Option<MessageBytes>,
}

impl SenderHost {
    /// Hosts `app`; sizes only until [`set_bytes`](Self::set_bytes).
    pub(crate) fn new(app: Box<dyn NaiApp>) -> SenderHost {
        SenderHost {
            host: AppHost::new(app),
            bytes: None,
        }
    }

    /// Messages carry contents from `bytes`.
    pub(crate) fn set_bytes(&mut self, bytes: MessageBytes) {
        self.bytes = Some(bytes);
    }

    /// The message contents, when the flow carries bytes.
    pub(crate) fn message_bytes(&self) -> Option<&MessageBytes> {
        self.bytes.as_ref()
    }

    /// Whether messages carry bytes.
    pub(crate) fn carries_bytes(&self) -> bool {
        self.bytes.is_some()
    }

    /// The ledger.
    pub(crate) fn ledger(&self) -> &Ledger {
        self.host.ledger()
    }

    /// The application.
    pub(crate) fn app(&self) -> &dyn NaiApp {
        self.host.app()
    }

    /// Starts the app on `sender`.
    pub(crate) fn start<T: SubmitBytes>(&mut self, now: Time, sender: &mut T) {
        self.host.start(now, &mut port(&mut self.bytes, sender));
    }

    /// Stops the app.
    pub(crate) fn stop(&mut self) {
        self.host.stop();
    }

    /// The app's next wake-up.
    pub(crate) fn poll_timeout(&self) -> Option<Time> {
        self.host.poll_timeout()
    }

    /// Runs the app if its wake-up is due.
    pub(crate) fn handle_timeout<T: SubmitBytes>(&mut self, now: Time, sender: &mut T) {
        self.host
            .handle_timeout(now, &mut port(&mut self.bytes, sender));
    }

    /// Records an event of `sender` and hands it to the app.
    pub(crate) fn on_event<T: SubmitBytes>(&mut self, now: Time, event: &NaiEvent, sender: &mut T) {
        self.host
            .on_event(now, event, &mut port(&mut self.bytes, sender));
    }
}

/// The port over `sender`, generating contents from `bytes` when the flow carries them.
fn port<'a, T: SubmitBytes>(
    bytes: &'a mut Option<MessageBytes>,
    sender: &'a mut T,
) -> MessagePort<'a, T> {
    MessagePort {
        target: sender,
        bytes: bytes.as_mut(),
    }
}

/// Deliveries checked against what the sender sent, by digest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PayloadCheck {
    /// Messages delivered (first deliveries).
    pub delivered: u64,
    /// Delivered with exactly the bytes sent.
    pub matched: u64,
    /// Delivered with other bytes.
    pub mismatched: u64,
    /// Delivered without bytes.
    pub without_bytes: u64,
    /// Delivered but never sent with bytes.
    pub unknown: u64,
    /// Deliveries of a message already delivered.
    pub duplicates: u64,
}

impl PayloadCheck {
    /// Compares `delivered` (id and digest of each delivery, in order) with `sent`.
    pub fn new<'a>(
        sent: &BTreeMap<MessageId, Digest>,
        delivered: impl IntoIterator<Item = (MessageId, Option<&'a Digest>)>,
    ) -> PayloadCheck {
        let mut c = PayloadCheck::default();
        let mut seen = BTreeSet::new();
        for (id, got) in delivered {
            if !seen.insert(id) {
                c.duplicates += 1;
                continue;
            }
            c.delivered += 1;
            match (sent.get(&id), got) {
                (None, _) => c.unknown += 1,
                (Some(_), None) => c.without_bytes += 1,
                (Some(want), Some(got)) if want == got => c.matched += 1,
                (Some(_), Some(_)) => c.mismatched += 1,
            }
        }
        c
    }

    /// Every message delivered once, with exactly the bytes sent.
    pub fn all_match(&self) -> bool {
        self.matched == self.delivered && self.duplicates == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_check_counts_each_kind_of_delivery() {
        let sent: BTreeMap<MessageId, Digest> =
            [(MessageId(1), digest(b"a")), (MessageId(2), digest(b"b"))].into();
        let (a, b) = (digest(b"a"), digest(b"B"));
        let c = PayloadCheck::new(
            &sent,
            [
                (MessageId(1), Some(&a)),
                (MessageId(1), Some(&a)),
                (MessageId(2), Some(&b)),
                (MessageId(3), Some(&a)),
            ],
        );
        assert_eq!(
            c,
            PayloadCheck {
                delivered: 3,
                matched: 1,
                mismatched: 1,
                without_bytes: 0,
                unknown: 1,
                duplicates: 1,
            }
        );
        assert!(!c.all_match());
        let ok = PayloadCheck::new(&sent, [(MessageId(2), Some(&digest(b"b")))]);
        assert!(ok.all_match());
    }
}
