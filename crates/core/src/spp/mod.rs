//! SPP, the Sequenced Packet Protocol (`papers/000_97f7680fd99dd928.txt` §4.1): a reliable
//! datagram protocol over UDP that "performs its own buffering, retransmissions and duplicate
//! suppression at user level" and needs no padding to mark message boundaries.
//!
//! Read in this order: [`wire`] (the header), [`SppSender`] (packet numbers, selective
//! acknowledgement, loss detection, retransmission timer, cancel notices), [`SppReceiver`]
//! (duplicate suppression, reassembly, delivery, verdicts, packet-pair measurement).
//!
//! The sender transmits pieces chosen by the NAI [`Scheduler`](crate::nai::Scheduler); it has
//! no congestion window of its own: ATP paces it at the bandwidth estimate (§4.2).
//!
//! # Message numbering and forgetting
//! A message gets a `wire_seq` at its first transmission. It stays *open* at the sender until
//! it is acknowledged in full or the receiver answered its cancel notice; every DATA and CANCEL
//! carries the lowest open number (`msg_floor`), below which the receiver forgets. The sender
//! starts a new message only while fewer than [`SppConfig::max_open_messages`] are open and the
//! newest is within [`SppConfig::message_window`] of the floor, which bounds the receiver's
//! memory.
//!
//! # Flow control
//! With [`SppConfig::receive_window_bytes`] the receiver also bounds the bytes it holds for
//! its application and the sender starts no message beyond the advertised window
//! ([`window`]). A message is reported `Delivered` to its sender only when the receiver holds
//! all of it and will hand it to the application (it is never dropped for lack of room: the
//! room was reserved before its first byte was sent).

mod receiver;
mod sender;
mod sent;
#[cfg(test)]
mod tests;
pub mod window;
pub mod wire;

pub use receiver::{Delivery, SppEvent, SppReceiver};
pub use sender::{SppOutcome, SppSender, SppStats};
pub use wire::{SppDatagram, SppRepr};

use crate::rtt::RtoConfig;

/// SPP limits.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SppConfig {
    /// Largest UDP payload sent (header included); 1472 fits a 1500-byte IP MTU.
    pub max_datagram_bytes: u16,
    /// Retransmission timer bounds (RFC 6298, shared estimator).
    pub rto: RtoConfig,
    /// Packets acknowledged after a later one that make it count as lost (like RFC 5681's
    /// three duplicate ACKs).
    pub packet_threshold: u64,
    /// Most unacknowledged packets in flight.
    pub max_in_flight_packets: usize,
    /// Most messages open at once (started and not final at the receiver).
    pub max_open_messages: usize,
    /// Span of message numbers the receiver tracks above the floor.
    pub message_window: u64,
    /// Most byte ranges a receiver keeps per partial message (further pieces are dropped
    /// unacknowledged and retransmitted later).
    pub max_ranges_per_message: usize,
    /// Most bytes a receiver that carries payloads holds in buffers of partly received
    /// messages; a piece of a new message beyond it is dropped unacknowledged (and sent
    /// again). Keep it well above the largest message the peer sends: a message that fills
    /// the bound blocks every newer one, urgent ones included, until it completes. The
    /// default is twice the sender's default buffer (`AtpConfig::max_buffered_bytes`).
    pub max_reassembly_bytes: u64,
    /// Receiver flow control ([`window`]): the most charged message bytes the receiver holds
    /// for its application (partly received, and whole but not yet taken), advertised to the
    /// sender in every ACK. `None` (the default, and the simulator's, whose receiving
    /// application takes every message at once): no window, plain ACKs, the sender is
    /// unlimited. With `Some`, the engine must report what the application took
    /// ([`SppReceiver::handle_consumed`]) or the sender stops once the window is full.
    pub receive_window_bytes: Option<u64>,
}

impl Default for SppConfig {
    fn default() -> Self {
        SppConfig {
            max_datagram_bytes: 1472,
            rto: RtoConfig {
                min: std::time::Duration::from_millis(200),
                ..RtoConfig::default()
            },
            packet_threshold: 3,
            max_in_flight_packets: 4096,
            max_open_messages: 4096,
            message_window: 65_536,
            max_ranges_per_message: 256,
            max_reassembly_bytes: 128 << 20,
            receive_window_bytes: None,
        }
    }
}
