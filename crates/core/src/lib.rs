//! adaptnet-core: the sans-IO protocol logic of adaptnet.
//!
//! Nothing here performs I/O, reads a clock, spawns a thread or uses a global random number
//! generator. Every state machine is driven by an engine — the deterministic simulator
//! (`adaptnet-sim`) or a real runtime — through the same call pattern:
//!
//! 1. feed inputs: `handle_*(now, …)` for packets and application requests;
//! 2. drain outputs: `poll_transmit(now)` until `None`, then `poll_event()` until `None`;
//! 3. arm one timer at `poll_timeout()` and call `handle_timeout(now)` when it fires.
//!
//! Module map:
//! - [`time`]: the one `Time` type;
//! - [`rtt`]: RFC 6298 RTT estimation shared by all transports;
//! - [`cc`]: the pluggable congestion-controller trait and NewReno;
//! - [`tcp`]: the TCP-like stream (RFC 5681/6582/6298), with wire format;
//! - [`cbr`]: constant-bit-rate UDP source and sink for cross traffic;
//! - [`cm`]: the Congestion Manager (papers/003, RFC 3124), its probe protocol, TCP/CM, audio;
//! - [`daemon`]: the local protocol between applications and the host daemon (issue 20);
//! - [`nai`], [`spp`], [`atp`]: the Network-Aware Interface scheduler, the sequenced packet
//!   protocol, and ATP (NAI over SPP with its bandwidth estimator, or over one TCP stream);
//! - [`adtcp`]: ADTCP (papers/004): receiver-side identification of congestion, channel
//!   error, route change and disconnection, and the sender policy that acts on it;
//! - [`env`](mod@env): environment events (papers/001): device parameters, generalized watermarks,
//!   hysteresis, subscriptions, the authenticated status message, action tables for UDP/TCP;
//! - [`session`]: connection set-up for the real engine (stateless retry tokens, keep-alive,
//!   close);
//! - [`ratectl`]: media-flow rate controllers: LDA/LDAF (papers/002 §3) and TFRC (RFC 5348);
//! - [`tpba`]: TCP-rate-probing-based adaptation (papers/002): controller, flow pair (fsocket);
//! - [`wire`]: shared helpers for checked wire parsing; [`convert`]: saturating narrowing.

#![deny(missing_docs)]
// No unsafe code: the fuzz targets (which parse outside input with this crate) then run
// without a memory sanitizer, and panics are what they look for.
#![forbid(unsafe_code)]
// Core faces the network: no panics and no silent truncation outside tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation
    )
)]

pub mod adtcp;
pub mod atp;
pub mod cbr;
pub mod cc;
pub mod cm;
pub mod convert;
pub mod daemon;
pub mod env;
pub mod nai;
pub mod ratectl;
pub mod rtt;
pub mod session;
pub mod spp;
pub mod tcp;
pub mod time;
pub mod tpba;
pub mod wire;

#[cfg(test)]
mod testing;

pub use time::Time;
