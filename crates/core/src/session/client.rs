//! The client's side of the handshake: send HELLO, answer RETRY with the token, wait for
//! ACCEPT; retransmit with exponential backoff and give up after a bound.

use super::wire::SessionRepr;
use crate::time::Time;
use std::time::Duration;

/// Handshake timing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandshakeConfig {
    /// Wait before the first retransmission of a HELLO; doubled after each (RFC 6298's
    /// initial RTO is 1 s; a handshake on a LAN should not wait that long, and a lost HELLO
    /// costs only this).
    pub initial_timeout: Duration,
    /// HELLOs sent before giving up.
    pub max_attempts: u32,
}

impl Default for HandshakeConfig {
    fn default() -> Self {
        HandshakeConfig {
            initial_timeout: Duration::from_millis(250),
            max_attempts: 7,
        }
    }
}

/// Where a client handshake stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandshakeState {
    /// Waiting for RETRY or ACCEPT.
    Waiting,
    /// The server accepted: the connection is established.
    Established,
    /// No answer after every attempt, or the server closed.
    Failed,
}

/// A client handshake (sans-IO). Drive it like every machine: `handle_packet`,
/// `poll_transmit`, `poll_timeout` / `handle_timeout`, then read [`ClientHandshake::state`].
#[derive(Clone, Debug)]
pub struct ClientHandshake {
    config: HandshakeConfig,
    client_id: u64,
    token: Vec<u8>,
    state: HandshakeState,
    send_due: bool,
    attempts: u32,
    next_retransmit: Option<Time>,
    timeout: Duration,
}

impl ClientHandshake {
    /// Starts a handshake with a random `client_id` (the engine draws it).
    pub fn new(config: HandshakeConfig, client_id: u64) -> ClientHandshake {
        let timeout = config.initial_timeout;
        ClientHandshake {
            config,
            client_id,
            token: Vec::new(),
            state: HandshakeState::Waiting,
            send_due: true,
            attempts: 0,
            next_retransmit: None,
            timeout,
        }
    }

    /// This attempt's identifier.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// Where the handshake stands.
    pub fn state(&self) -> &HandshakeState {
        &self.state
    }

    /// A session packet from the server. Packets for another client id are ignored.
    pub fn handle_packet(&mut self, _now: Time, packet: &SessionRepr) {
        if self.state != HandshakeState::Waiting {
            return;
        }
        match packet {
            // Only the first RETRY counts; answer it at once, and the retransmission count
            // starts again for this phase.
            SessionRepr::Retry { client_id, token }
                if *client_id == self.client_id && self.token.is_empty() =>
            {
                self.token = token.clone();
                self.send_due = true;
                self.attempts = 0;
                self.timeout = self.config.initial_timeout;
            }
            SessionRepr::Accept { client_id } if *client_id == self.client_id => {
                self.state = HandshakeState::Established;
                self.next_retransmit = None;
            }
            SessionRepr::Close { client_id, .. } if *client_id == self.client_id => {
                self.state = HandshakeState::Failed;
                self.next_retransmit = None;
            }
            _ => {}
        }
    }

    /// The HELLO to send, if one is due.
    pub fn poll_transmit(&mut self, now: Time) -> Option<SessionRepr> {
        if !self.send_due || self.state != HandshakeState::Waiting {
            return None;
        }
        self.send_due = false;
        self.attempts += 1;
        self.next_retransmit = Some(now + self.timeout);
        Some(SessionRepr::Hello {
            client_id: self.client_id,
            token: self.token.clone(),
        })
    }

    /// When to call `handle_timeout`.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.next_retransmit
    }

    /// Retransmits, or fails once `max_attempts` HELLOs went unanswered.
    pub fn handle_timeout(&mut self, now: Time) {
        if self.next_retransmit.is_none_or(|t| t > now) {
            return;
        }
        self.next_retransmit = None;
        if self.attempts >= self.config.max_attempts {
            self.state = HandshakeState::Failed;
        } else {
            self.timeout = self.timeout.saturating_mul(2);
            self.send_due = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_then_accept() {
        let mut c = ClientHandshake::new(HandshakeConfig::default(), 9);
        let t0 = Time::ZERO;
        assert_eq!(
            c.poll_transmit(t0),
            Some(SessionRepr::Hello {
                client_id: 9,
                token: vec![]
            })
        );
        assert_eq!(c.poll_transmit(t0), None);
        c.handle_packet(
            t0,
            &SessionRepr::Retry {
                client_id: 8,
                token: vec![1],
            },
        );
        assert_eq!(
            c.poll_transmit(t0),
            None,
            "another client's retry is ignored"
        );
        c.handle_packet(
            t0,
            &SessionRepr::Retry {
                client_id: 9,
                token: vec![5; 20],
            },
        );
        assert_eq!(
            c.poll_transmit(t0),
            Some(SessionRepr::Hello {
                client_id: 9,
                token: vec![5; 20]
            })
        );
        c.handle_packet(t0, &SessionRepr::Accept { client_id: 9 });
        assert_eq!(c.state(), &HandshakeState::Established);
        assert_eq!(c.poll_timeout(), None);
    }

    #[test]
    fn backs_off_then_fails() {
        let config = HandshakeConfig {
            initial_timeout: Duration::from_millis(100),
            max_attempts: 3,
        };
        let mut c = ClientHandshake::new(config, 1);
        let mut sent = Vec::new();
        let mut now = Time::ZERO;
        for _ in 0..10 {
            if c.poll_transmit(now).is_some() {
                sent.push(now);
            }
            match c.poll_timeout() {
                Some(t) => {
                    now = t;
                    c.handle_timeout(now);
                }
                None => break,
            }
        }
        assert_eq!(
            sent,
            vec![Time::ZERO, Time::from_millis(100), Time::from_millis(300)]
        );
        assert_eq!(c.state(), &HandshakeState::Failed);
        assert_eq!(now, Time::from_millis(700));
    }
}
