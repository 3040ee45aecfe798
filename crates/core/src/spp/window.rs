//! Receiver flow control: how much a receiver lets its sender start.
//!
//! SPP's receiver holds a message from its first piece until the application has taken it
//! (partly received messages in reassembly, whole ones waiting to be read). With flow
//! control ([`SppConfig::receive_window_bytes`](super::SppConfig::receive_window_bytes)) it
//! bounds that custody and tells the sender, in every ACK, an absolute **window limit**: the
//! most message bytes the sender may have *started* since the connection began. Like TCP's
//! right window edge (RFC 9293 §3.8.6) and QUIC's MAX_DATA (RFC 9000 §4.1), an absolute limit
//! makes a late or repeated ACK harmless: the sender keeps the largest it has seen.
//!
//! Accounting, in *charged* bytes ([`charge`]: the message's length plus a fixed
//! per-message allowance, so that a window also bounds how many small messages wait):
//!
//! * the sender adds a message's charge when it transmits the message's first piece, and
//!   subtracts it again if the receiver answers a cancel with "never held any of it"
//!   ([`Verdict::unseen`](super::wire::Verdict::unseen));
//! * the receiver *credits* a message's charge when it stops holding it: the application took
//!   it ([`SppReceiver::handle_consumed`](super::SppReceiver::handle_consumed)), or it was
//!   discarded by a cancel;
//! * the receiver advertises `limit = credited + receive_window_bytes`, and sends an ACK with
//!   the new limit when it has grown by an eighth of the window since the last one it sent
//!   (and whenever the sender asks with a PING);
//! * the sender starts a new message only if its charge fits under the limit (or it goes
//!   alone, below). Pieces of
//!   messages already started are always sent (they are inside the window already), so the
//!   receiver's custody never exceeds the window, and a slow reader slows the sender without
//!   losing anything.
//!
//! Keep the window at least twice the largest message: a message that does not fit waits,
//! urgent ones included, until the receiver's application has taken enough. A message whose
//! charge exceeds the whole window goes alone: the sender starts it only
//! when the receiver holds nothing of its messages (its started bytes are at most
//! `limit - size`, which is why ACK_WINDOW also carries the window's size), and the receiver
//! takes it only then. Its custody may then exceed the window by that one message.

/// Per-message allowance in the window, bytes: with it, a window of W bytes also bounds the
/// messages waiting at the receiver to W / 1024, whatever their size.
pub const MESSAGE_CHARGE_BYTES: u64 = 1024;

/// The window charge of a message of `len` bytes.
pub fn charge(len: u64) -> u64 {
    len.saturating_add(MESSAGE_CHARGE_BYTES)
}

/// The window charge of `messages` messages totalling `bytes` bytes.
pub fn charge_many(messages: u64, bytes: u64) -> u64 {
    bytes.saturating_add(messages.saturating_mul(MESSAGE_CHARGE_BYTES))
}
