//! Sending and accepting status messages: the signer's sequence numbers and the receiver's
//! peer table, tag check and replay window.
//!
//! The receiver accepts a message only if all hold, checked in this order (nothing from the
//! message is trusted before the tag is):
//!
//! 1. it parses ([`StatusMessage::parse`]);
//! 2. it comes from a configured peer (the engine names the sender, e.g. its UDP address);
//! 3. its key id is the one configured for that peer;
//! 4. its HMAC-SHA256 tag is correct under that peer's key (constant-time comparison);
//! 5. its sequence number is new: above the highest accepted so far, or within the last
//!    [`REPLAY_WINDOW`] numbers and not yet seen (the sliding window of RFC 4303 §3.4.3, so
//!    reordering by UDP does not lose reports). Sequence number 0 is never accepted.
//!
//! Only then does the window advance. A sender that restarts must continue above the numbers
//! it used before (the runtime can seed [`StatusSigner::new`] from the wall clock) or use a
//! new key id.

use super::status_wire::{StatusKey, StatusMessage};
use crate::wire::WireError;
use hmac::Mac;
use std::collections::BTreeMap;
use thiserror::Error;

/// How many sequence numbers below the highest accepted one may still arrive late.
pub const REPLAY_WINDOW: u64 = 64;
/// Most peers one verifier holds.
pub const MAX_PEERS: usize = 256;

/// Why a status message was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum StatusError {
    /// The bytes are not a status message.
    #[error("malformed status message: {0}")]
    Wire(#[from] WireError),
    /// The sender is not a configured peer.
    #[error("status message from an unconfigured peer")]
    UnknownPeer,
    /// The key id is not the one configured for this peer.
    #[error("status message under key id {got}, peer is configured with {expected}")]
    WrongKeyId {
        /// The peer's key id.
        expected: u32,
        /// The message's.
        got: u32,
    },
    /// The tag does not match the message under the peer's key.
    #[error("status message failed authentication")]
    BadMac,
    /// The sequence number was already accepted, is too old, or is 0.
    #[error("status message replayed or too old (sequence number {0})")]
    Replay(u64),
    /// Too many peers configured.
    #[error("at most {0} status peers")]
    TooManyPeers(usize),
}

/// The sending side: one key and its sequence numbers.
#[derive(Clone, Debug)]
pub struct StatusSigner {
    key_id: u32,
    key: StatusKey,
    next_seq: u64,
}

impl StatusSigner {
    /// A signer whose first message carries `first_seq` (0 is taken as 1).
    pub fn new(key_id: u32, key: StatusKey, first_seq: u64) -> StatusSigner {
        StatusSigner {
            key_id,
            key,
            next_seq: first_seq.max(1),
        }
    }

    /// Stamps `msg` with this signer's key id and next sequence number, writes it into `buf`
    /// and returns its length. The sequence number is used up only on success.
    pub fn seal(&mut self, msg: &StatusMessage, buf: &mut [u8]) -> Result<usize, WireError> {
        let stamped = StatusMessage {
            key_id: self.key_id,
            seq: self.next_seq,
            ..msg.clone()
        };
        let len = stamped.emit(&self.key, buf)?;
        self.next_seq = self.next_seq.saturating_add(1);
        Ok(len)
    }

    /// The sequence number the next message will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
}

/// Sequence numbers accepted from one peer: the highest, and a bitmap of the
/// [`REPLAY_WINDOW`] below it (bit i set: `highest - i` seen).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    highest: u64,
    seen: u64,
}

impl ReplayWindow {
    /// Whether `seq` would be accepted.
    pub fn is_fresh(&self, seq: u64) -> bool {
        if seq == 0 {
            return false;
        }
        if seq > self.highest {
            return true;
        }
        let age = self.highest - seq;
        age < REPLAY_WINDOW && self.seen & (1u64 << age) == 0
    }

    /// Records `seq` as accepted (call only after [`ReplayWindow::is_fresh`]).
    pub fn accept(&mut self, seq: u64) {
        if seq > self.highest {
            let shift = seq - self.highest;
            self.seen = if shift >= REPLAY_WINDOW {
                0
            } else {
                self.seen << shift
            };
            self.seen |= 1;
            self.highest = seq;
        } else {
            let age = self.highest - seq;
            if age < REPLAY_WINDOW {
                self.seen |= 1u64 << age;
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Peer {
    key_id: u32,
    key: StatusKey,
    window: ReplayWindow,
}

/// The receiving side: the configured peers, their keys and replay windows. `A` is how the
/// engine names a sender (a socket address in the runtime, a node id in the simulator).
#[derive(Clone, Debug)]
pub struct StatusVerifier<A: Ord + Clone> {
    peers: BTreeMap<A, Peer>,
}

impl<A: Ord + Clone> Default for StatusVerifier<A> {
    fn default() -> Self {
        StatusVerifier {
            peers: BTreeMap::new(),
        }
    }
}

impl<A: Ord + Clone> StatusVerifier<A> {
    /// A verifier that accepts nothing until peers are added.
    pub fn new() -> StatusVerifier<A> {
        StatusVerifier::default()
    }

    /// Accepts messages from `peer` signed with `key` under `key_id`. Replacing a peer's key
    /// resets its replay window.
    pub fn add_peer(&mut self, peer: A, key_id: u32, key: StatusKey) -> Result<(), StatusError> {
        if !self.peers.contains_key(&peer) && self.peers.len() >= MAX_PEERS {
            return Err(StatusError::TooManyPeers(MAX_PEERS));
        }
        self.peers.insert(
            peer,
            Peer {
                key_id,
                key,
                window: ReplayWindow::default(),
            },
        );
        Ok(())
    }

    /// Stops accepting messages from `peer`; true if it was configured.
    pub fn remove_peer(&mut self, peer: &A) -> bool {
        self.peers.remove(peer).is_some()
    }

    /// Checks a datagram received from `from` (see the module documentation for the order of
    /// checks) and returns the message if it is accepted.
    pub fn verify(&mut self, from: &A, datagram: &[u8]) -> Result<StatusMessage, StatusError> {
        let (msg, signed, tag) = StatusMessage::parse_parts(datagram)?;
        let peer = self.peers.get_mut(from).ok_or(StatusError::UnknownPeer)?;
        if msg.key_id != peer.key_id {
            return Err(StatusError::WrongKeyId {
                expected: peer.key_id,
                got: msg.key_id,
            });
        }
        peer.key
            .mac()
            .chain_update(signed)
            .verify_slice(tag)
            .map_err(|_| StatusError::BadMac)?;
        if !peer.window.is_fresh(msg.seq) {
            return Err(StatusError::Replay(msg.seq));
        }
        peer.window.accept(msg.seq);
        Ok(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::super::params::{Name, Param};
    use super::super::watermarks::LevelMask;
    use super::*;
    use proptest::prelude::*;

    fn key(b: u8) -> StatusKey {
        StatusKey::new(&[b; 32]).unwrap()
    }

    fn report() -> StatusMessage {
        StatusMessage {
            key_id: 0,
            seq: 0,
            device: Name::new("wlan0").unwrap(),
            param: Param::Availability,
            value: 45.0,
            violated: LevelMask::of(&[3]),
            cleared: LevelMask::EMPTY,
        }
    }

    fn seal(s: &mut StatusSigner) -> Vec<u8> {
        let m = report();
        let mut buf = vec![0u8; m.buffer_len()];
        let n = s.seal(&m, &mut buf).unwrap();
        buf.truncate(n);
        buf
    }

    const BS: &str = "base-station";

    fn pair() -> (StatusSigner, StatusVerifier<&'static str>) {
        let mut v = StatusVerifier::new();
        v.add_peer(BS, 9, key(1)).unwrap();
        (StatusSigner::new(9, key(1), 1), v)
    }

    #[test]
    fn test_accepts_configured_peer_and_rejects_replay() {
        let (mut s, mut v) = pair();
        let first = seal(&mut s);
        let msg = v.verify(&BS, &first).unwrap();
        assert_eq!((msg.key_id, msg.seq, msg.value), (9, 1, 45.0));
        assert_eq!(v.verify(&BS, &first), Err(StatusError::Replay(1)));
        let second = seal(&mut s);
        assert_eq!(v.verify(&BS, &second).map(|m| m.seq), Ok(2));
    }

    #[test]
    fn test_rejects_unknown_peer_wrong_key_id_and_wrong_key() {
        let (mut s, mut v) = pair();
        let bytes = seal(&mut s);
        assert_eq!(v.verify(&"proxy", &bytes), Err(StatusError::UnknownPeer));
        let mut other_id = StatusSigner::new(8, key(1), 1);
        assert_eq!(
            v.verify(&BS, &seal(&mut other_id)),
            Err(StatusError::WrongKeyId {
                expected: 9,
                got: 8
            })
        );
        let mut other_key = StatusSigner::new(9, key(2), 1);
        assert_eq!(
            v.verify(&BS, &seal(&mut other_key)),
            Err(StatusError::BadMac)
        );
        // A rejected forgery does not use up the sequence number.
        assert_eq!(v.verify(&BS, &bytes).map(|m| m.seq), Ok(1));
        assert!(v.remove_peer(&BS));
        assert_eq!(v.verify(&BS, &seal(&mut s)), Err(StatusError::UnknownPeer));
    }

    #[test]
    fn test_any_tampered_byte_is_rejected() {
        let (mut s, v) = pair();
        let bytes = seal(&mut s);
        for i in 0..bytes.len() {
            let mut v = v.clone();
            let mut t = bytes.clone();
            t[i] ^= 0x01;
            assert!(
                v.verify(&BS, &t).is_err(),
                "flipped bit in byte {i} was accepted"
            );
        }
    }

    #[test]
    fn test_window_accepts_reordering_and_rejects_old() {
        let (mut s, mut v) = pair();
        let msgs: Vec<Vec<u8>> = (0..100).map(|_| seal(&mut s)).collect();
        // 10 arrives before 5; both accepted once.
        assert!(v.verify(&BS, &msgs[9]).is_ok());
        assert!(v.verify(&BS, &msgs[4]).is_ok());
        assert_eq!(v.verify(&BS, &msgs[4]), Err(StatusError::Replay(5)));
        // Jump to 100: 36 is exactly 64 behind and too old; 37 is still inside the window.
        assert!(v.verify(&BS, &msgs[99]).is_ok());
        assert_eq!(v.verify(&BS, &msgs[35]), Err(StatusError::Replay(36)));
        assert!(v.verify(&BS, &msgs[36]).is_ok());
    }

    #[test]
    fn test_sequence_zero_is_never_fresh() {
        assert!(!ReplayWindow::default().is_fresh(0));
        assert_eq!(StatusSigner::new(1, key(1), 0).next_seq(), 1);
    }

    proptest! {
        /// Whatever order a stream of sealed messages arrives in (with duplicates), each
        /// sequence number is accepted at most once.
        #[test]
        fn prop_each_seq_accepted_at_most_once(order in proptest::collection::vec(0usize..80, 1..300)) {
            let (mut s, mut v) = pair();
            let msgs: Vec<Vec<u8>> = (0..80).map(|_| seal(&mut s)).collect();
            let mut accepted = std::collections::BTreeSet::new();
            for i in order {
                if let Ok(m) = v.verify(&BS, &msgs[i]) {
                    prop_assert!(accepted.insert(m.seq), "seq {} accepted twice", m.seq);
                }
            }
        }
    }
}
