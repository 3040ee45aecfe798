//! Stateless retry tokens: the server proves a client can receive at the address it claims
//! without remembering anything about it.
//!
//! A token is `epoch (u32, big-endian) ‖ HMAC-SHA256(key, addr ‖ client_id ‖ epoch)[..16]`,
//! where `epoch` counts [`TokenConfig::lifetime`] periods. A token is valid in its own epoch
//! and the next, so it lives between one and two lifetimes. The MAC is truncated to 128 bits,
//! as QUIC's Retry integrity tag is: forging one takes about 2^128 guesses.

use crate::time::Time;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::net::SocketAddr;
use std::time::Duration;

/// Token bytes: 4 of epoch, 16 of MAC.
pub const TOKEN_BYTES: usize = 20;

/// How tokens are made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenConfig {
    /// The server's secret; draw it from a cryptographic RNG at start-up.
    pub key: [u8; 32],
    /// How long an issued token stays valid (between one and two of these).
    pub lifetime: Duration,
}

impl TokenConfig {
    /// A configuration with `key` and a 10 s lifetime.
    pub fn new(key: [u8; 32]) -> TokenConfig {
        TokenConfig {
            key,
            lifetime: Duration::from_secs(10),
        }
    }

    /// The token epoch `now` falls in (tokens count [`TokenConfig::lifetime`] periods).
    pub(crate) fn epoch(&self, now: Time) -> u32 {
        let period = crate::time::duration_nanos(self.lifetime).max(1);
        u32::try_from(now.as_nanos() / period).unwrap_or(u32::MAX)
    }

    /// The MAC state over the token's inputs (`None` only if the key were refused, which
    /// HMAC never does).
    fn mac(&self, peer: SocketAddr, client_id: u64, epoch: u32) -> Option<Hmac<Sha256>> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).ok()?;
        match peer {
            SocketAddr::V4(a) => mac.update(&a.ip().octets()),
            SocketAddr::V6(a) => mac.update(&a.ip().octets()),
        }
        mac.update(&peer.port().to_be_bytes());
        mac.update(&client_id.to_be_bytes());
        mac.update(&epoch.to_be_bytes());
        Some(mac)
    }

    /// The first 32 bits of this key's MAC over `peer`, `client_id` and `epoch`: the compact
    /// form of a token for places with no room for [`TOKEN_BYTES`] (a TCP initial sequence
    /// number, see `tcp::cookie`).
    pub(crate) fn tag32(&self, peer: SocketAddr, client_id: u64, epoch: u32) -> u32 {
        let mut w = [0u8; 4];
        if let Some(mac) = self.mac(peer, client_id, epoch) {
            for (d, b) in w.iter_mut().zip(mac.finalize().into_bytes().iter()) {
                *d = *b;
            }
        }
        u32::from_be_bytes(w)
    }

    /// A token for `peer` asking with `client_id` at `now`.
    pub fn issue(&self, now: Time, peer: SocketAddr, client_id: u64) -> Vec<u8> {
        let epoch = self.epoch(now);
        let mut t = Vec::with_capacity(TOKEN_BYTES);
        t.extend_from_slice(&epoch.to_be_bytes());
        if let Some(mac) = self.mac(peer, client_id, epoch) {
            t.extend(mac.finalize().into_bytes().iter().take(TOKEN_BYTES - 4));
        }
        t
    }

    /// Whether `token` was issued by this key to `peer` for `client_id`, and has not expired.
    /// The MAC is compared in constant time.
    pub fn validate(&self, now: Time, peer: SocketAddr, client_id: u64, token: &[u8]) -> bool {
        if token.len() != TOKEN_BYTES {
            return false;
        }
        let (Some(epoch), Some(tag)) = (token.get(..4), token.get(4..)) else {
            return false;
        };
        let mut e = [0u8; 4];
        e.copy_from_slice(epoch);
        let epoch = u32::from_be_bytes(e);
        let current = self.epoch(now);
        if epoch > current || current - epoch > 1 {
            return false;
        }
        self.mac(peer, client_id, epoch)
            .is_some_and(|mac| mac.verify_truncated_left(tag).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn valid_for_its_peer_and_id_only() {
        let c = TokenConfig::new([7; 32]);
        let now = Time::from_secs(100);
        let t = c.issue(now, addr("10.0.0.1:5000"), 42);
        assert_eq!(t.len(), TOKEN_BYTES);
        assert!(c.validate(now, addr("10.0.0.1:5000"), 42, &t));
        assert!(!c.validate(now, addr("10.0.0.1:5001"), 42, &t));
        assert!(!c.validate(now, addr("10.0.0.2:5000"), 42, &t));
        assert!(!c.validate(now, addr("10.0.0.1:5000"), 43, &t));
        assert!(!TokenConfig::new([8; 32]).validate(now, addr("10.0.0.1:5000"), 42, &t));
        let mut forged = t.clone();
        forged[10] ^= 1;
        assert!(!c.validate(now, addr("10.0.0.1:5000"), 42, &forged));
        assert!(!c.validate(now, addr("10.0.0.1:5000"), 42, &t[..19]));
    }

    #[test]
    fn expires_after_one_to_two_lifetimes() {
        let c = TokenConfig::new([1; 32]);
        let peer = addr("[::1]:9");
        let t = c.issue(Time::from_secs(100), peer, 1);
        assert!(c.validate(Time::from_secs(109), peer, 1, &t));
        assert!(c.validate(Time::from_secs(119), peer, 1, &t));
        assert!(!c.validate(Time::from_secs(120), peer, 1, &t));
        // Not valid before it was issued (a token from the future is a forgery).
        assert!(!c.validate(Time::from_secs(89), peer, 1, &t));
    }
}
