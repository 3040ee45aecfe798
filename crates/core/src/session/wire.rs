//! Session packets. They share SPP's two-byte header (version, type) and use types from
//! 0x20, so one socket carries both and [`is_session`] tells them apart.
//!
//! ```text
//! 0        1        2
//! +--------+--------+------------------------------------------------------------
//! |version |  type  |
//! +--------+--------+
//! HELLO  (0x20): client_id u64 | token_len u8 | token | zero padding (whole packet
//!                at least MIN_HELLO_BYTES)
//! RETRY  (0x21): client_id u64 | token_len u8 | token
//! ACCEPT (0x22): client_id u64
//! CLOSE  (0x23): client_id u64 | reason u8
//! PING   (0x24): client_id u64      (asks the peer for an SPP acknowledgement, which
//!                                    carries its window: keep-alive, silent-peer and
//!                                    closed-window probe in one)
//! ```
//!
//! `parse` never panics on any input; `emit` fails cleanly on a short buffer.

use crate::wire::{Reader, WireError, Writer};

/// The version this build speaks (SPP's).
pub const VERSION: u8 = crate::spp::wire::VERSION;
/// A HELLO must be at least this long, padding included, to be answered (anti-amplification).
pub const MIN_HELLO_BYTES: usize = 128;
/// Longest token carried.
pub const MAX_TOKEN_BYTES: usize = 64;

const T_HELLO: u8 = 0x20;
const T_RETRY: u8 = 0x21;
const T_ACCEPT: u8 = 0x22;
const T_CLOSE: u8 = 0x23;
const T_PING: u8 = 0x24;

/// Whether a datagram is a session packet (rather than a protocol datagram).
pub fn is_session(buf: &[u8]) -> bool {
    matches!(buf.get(1), Some(t) if (T_HELLO..=T_PING).contains(t))
}

/// Why a connection ended, as carried in CLOSE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum CloseReason {
    /// The application closed it.
    Application,
    /// Nothing was heard for the idle timeout.
    Idle,
    /// The peer broke the protocol or exceeded a bound.
    Protocol,
    /// The endpoint is shutting down.
    Shutdown,
    /// A reason this build does not know.
    Other(u8),
}

impl CloseReason {
    fn code(self) -> u8 {
        match self {
            CloseReason::Application => 0,
            CloseReason::Idle => 1,
            CloseReason::Protocol => 2,
            CloseReason::Shutdown => 3,
            CloseReason::Other(c) => c,
        }
    }

    fn from_code(c: u8) -> CloseReason {
        match c {
            0 => CloseReason::Application,
            1 => CloseReason::Idle,
            2 => CloseReason::Protocol,
            3 => CloseReason::Shutdown,
            c => CloseReason::Other(c),
        }
    }
}

/// A parsed session packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionRepr {
    /// A client asks to connect, with the server's token once it has one.
    Hello {
        /// The client's random identifier for this connection attempt.
        client_id: u64,
        /// The token from RETRY (empty on the first HELLO).
        token: Vec<u8>,
    },
    /// The server's stateless answer to a HELLO without a valid token.
    Retry {
        /// Echoed from HELLO.
        client_id: u64,
        /// To be echoed in the next HELLO.
        token: Vec<u8>,
    },
    /// The server allocated the connection.
    Accept {
        /// Echoed from HELLO.
        client_id: u64,
    },
    /// The sender ends the connection.
    Close {
        /// The connection's client id.
        client_id: u64,
        /// Why.
        reason: CloseReason,
    },
    /// Keep-alive and probe: refreshes the peer's idle timer and asks it for an
    /// acknowledgement (see [`crate::session::Liveness`]).
    Ping {
        /// The connection's client id.
        client_id: u64,
    },
}

impl SessionRepr {
    /// Bytes `emit` writes (a HELLO's padding included).
    pub fn buffer_len(&self) -> usize {
        2 + 8
            + match self {
                SessionRepr::Hello { token, .. } => {
                    (1 + token.len()).max(MIN_HELLO_BYTES.saturating_sub(10))
                }
                SessionRepr::Retry { token, .. } => 1 + token.len(),
                SessionRepr::Close { .. } => 1,
                SessionRepr::Accept { .. } | SessionRepr::Ping { .. } => 0,
            }
    }

    /// Parses a session packet. Never panics.
    pub fn parse(buf: &[u8]) -> Result<SessionRepr, WireError> {
        let mut r = Reader::new(buf);
        let version = r.u8()?;
        if version != VERSION {
            return Err(WireError::UnsupportedVersion(version));
        }
        let kind = r.u8()?;
        let client_id = r.u64()?;
        let token = |r: &mut Reader<'_>| -> Result<Vec<u8>, WireError> {
            let n = usize::from(r.u8()?);
            if n > MAX_TOKEN_BYTES {
                return Err(WireError::Malformed("token length"));
            }
            Ok(r.bytes(n)?.to_vec())
        };
        Ok(match kind {
            T_HELLO => SessionRepr::Hello {
                client_id,
                token: token(&mut r)?,
            },
            T_RETRY => SessionRepr::Retry {
                client_id,
                token: token(&mut r)?,
            },
            T_ACCEPT => SessionRepr::Accept { client_id },
            T_CLOSE => SessionRepr::Close {
                client_id,
                reason: CloseReason::from_code(r.u8()?),
            },
            T_PING => SessionRepr::Ping { client_id },
            other => {
                return Err(WireError::UnknownKind {
                    field: "session type",
                    value: u32::from(other),
                });
            }
        })
    }

    /// Writes the packet; returns the bytes written (`buffer_len()`).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let len = self.buffer_len();
        let available = buf.len();
        let out = buf.get_mut(..len).ok_or(WireError::BufferTooSmall {
            needed: len,
            available,
        })?;
        out.fill(0);
        let mut w = Writer::new(out);
        w.u8(VERSION)?;
        let (kind, client_id) = match self {
            SessionRepr::Hello { client_id, .. } => (T_HELLO, client_id),
            SessionRepr::Retry { client_id, .. } => (T_RETRY, client_id),
            SessionRepr::Accept { client_id } => (T_ACCEPT, client_id),
            SessionRepr::Close { client_id, .. } => (T_CLOSE, client_id),
            SessionRepr::Ping { client_id } => (T_PING, client_id),
        };
        w.u8(kind)?;
        w.u64(*client_id)?;
        match self {
            SessionRepr::Hello { token, .. } | SessionRepr::Retry { token, .. } => {
                if token.len() > MAX_TOKEN_BYTES {
                    return Err(WireError::Malformed("token length"));
                }
                w.u8(u8::try_from(token.len()).unwrap_or(u8::MAX))?;
                w.bytes(token)?;
            }
            SessionRepr::Close { reason, .. } => w.u8(reason.code())?,
            SessionRepr::Accept { .. } | SessionRepr::Ping { .. } => {}
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(p: &SessionRepr) -> SessionRepr {
        let mut buf = vec![0u8; p.buffer_len()];
        let n = p.emit(&mut buf).expect("fits");
        assert_eq!(n, buf.len());
        assert!(is_session(&buf));
        SessionRepr::parse(&buf).expect("parses")
    }

    #[test]
    fn hello_is_padded_and_retry_is_smaller() {
        let hello = SessionRepr::Hello {
            client_id: 7,
            token: Vec::new(),
        };
        assert_eq!(hello.buffer_len(), MIN_HELLO_BYTES);
        let retry = SessionRepr::Retry {
            client_id: 7,
            token: vec![1; MAX_TOKEN_BYTES],
        };
        assert!(retry.buffer_len() < MIN_HELLO_BYTES);
        assert_eq!(round_trip(&hello), hello);
        assert_eq!(round_trip(&retry), retry);
    }

    #[test]
    fn spp_datagrams_are_not_session_packets() {
        assert!(!is_session(&[1, 1, 0, 0]));
        assert!(!is_session(&[1]));
        assert!(is_session(&[1, 0x24]));
    }

    #[test]
    fn oversized_token_is_refused_both_ways() {
        let p = SessionRepr::Retry {
            client_id: 1,
            token: vec![0; MAX_TOKEN_BYTES + 1],
        };
        let mut buf = vec![0u8; p.buffer_len()];
        assert!(p.emit(&mut buf).is_err());
        let mut raw = vec![VERSION, T_RETRY, 0, 0, 0, 0, 0, 0, 0, 1, 65];
        raw.extend(vec![0; 65]);
        assert_eq!(
            SessionRepr::parse(&raw),
            Err(WireError::Malformed("token length"))
        );
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = SessionRepr::parse(&bytes);
        }

        #[test]
        fn round_trips(id in any::<u64>(), token in proptest::collection::vec(any::<u8>(), 0..=MAX_TOKEN_BYTES), kind in 0u8..5, reason in any::<u8>()) {
            let p = match kind {
                0 => SessionRepr::Hello { client_id: id, token },
                1 => SessionRepr::Retry { client_id: id, token },
                2 => SessionRepr::Accept { client_id: id },
                3 => SessionRepr::Close { client_id: id, reason: CloseReason::from_code(reason) },
                _ => SessionRepr::Ping { client_id: id },
            };
            prop_assert_eq!(round_trip(&p), p);
        }
    }
}
