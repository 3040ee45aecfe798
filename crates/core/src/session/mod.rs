//! Sessions for the real engine: how two hosts agree to talk before any protocol state is
//! allocated, keep a quiet connection alive, and end it.
//!
//! The simulator wires its agents together, so its protocols start "connected". On a real
//! network a server faces any address on the Internet, so a connection begins with a
//! handshake in which the server keeps **no state** until the client has echoed a token the
//! server chose (the idea of TCP SYN cookies and QUIC's Retry, RFC 9000 §8.1):
//!
//! ```text
//! client                                   server
//! HELLO(client_id, no token, padded) ───▶  stateless: token = MAC(key, addr, id, epoch)
//!                                     ◀─── RETRY(client_id, token)      (smaller than HELLO)
//! HELLO(client_id, token, padded)    ───▶  token valid: allocate the connection
//!                                     ◀─── ACCEPT(client_id)
//! … protocol datagrams (SPP) …
//! PING when quiet; CLOSE(reason) to end
//! ```
//!
//! * [`wire`]: the session packets, in the same version/type header space as SPP;
//! * [`token`]: stateless retry tokens (HMAC-SHA256 over the peer's address);
//! * [`ClientHandshake`]: the client's side (retransmission with backoff, give up);
//! * [`Liveness`]: idle timeout and keep-alive timing for an established connection.
//!
//! Anti-amplification: a HELLO shorter than [`wire::MIN_HELLO_BYTES`] is dropped, and a RETRY
//! is always smaller than the HELLO it answers, so an unvalidated peer never gets more bytes
//! than it sent (the bound asked for is 3×).

mod client;
mod liveness;
pub mod token;
pub mod wire;

pub use client::{ClientHandshake, HandshakeConfig, HandshakeState};
pub use liveness::{Liveness, LivenessConfig};
pub use wire::{CloseReason, SessionRepr};
