//! ADTCP (papers/004): receiver-side multi-metric identification of the network state —
//! congestion, channel error, route change, disconnection — fed back to a TCP-friendly sender
//! that reacts to each differently.
//!
//! Read in this order:
//! 1. [`metrics`]: IDD, STT, POR and PLR over sampling intervals of half an RTT (§2.2);
//! 2. [`rsd`]: relative sample density, which tells whether a sample is high or low against
//!    its own history (§3);
//! 3. [`identify`]: Table 2's rules from levels to states (§3);
//! 4. [`receiver`]: the three together, as the stream runs them on every arriving segment;
//! 5. [`option`]: the TCP option that carries the state to the sender in every ACK and the
//!    sending time to the receiver in every data segment (§4);
//! 6. [`sender`]: the ADTCP sender, a [`crate::cc::CongestionController`] on our one TCP.
//!
//! Enabling it: set [`crate::tcp::TcpConfig::adtcp`] on a connection (it then stamps its data,
//! identifies the state of the data it receives and reports it in every ACK), and give the
//! sending side an [`AdtcpSender`] as its controller (it then acts on the reports). Either end
//! works with a conventional peer: without reports the sender is NewReno, and a conventional
//! sender ignores the option.

pub mod identify;
pub mod metrics;
pub mod option;
pub mod receiver;
pub mod rsd;
pub mod sender;

pub use identify::{NetworkState, StateReport};
pub use option::AdtcpOption;
pub use receiver::{Receiver, ReceiverConfig};
pub use sender::{AdtcpSender, SenderConfig};

#[cfg(test)]
mod tests;
