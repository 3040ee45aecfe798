//! Environment events and action tables (papers/001, Sudame & Badrinath).
//!
//! Read papers/001 §3 first: a device carries named *parameters* (bandwidth, loss, signal
//! quality, availability, cost, …); each parameter has a set of *levels* (generalized
//! watermarks), each a high or a low watermark. A value that crosses a high level from below,
//! or a low level from above, *violates* it; a violation of a low level *clears* the violated
//! high levels above it and a violation of a high level clears the violated low levels below
//! it. Violations are *events*, reported to applications and to per-socket *action tables*
//! that retune the transports.
//!
//! The pieces, each sans-IO (time is passed in, nothing blocks):
//!
//! - [`params`]: device and parameter names, [`ParamReading`]s;
//! - [`watermarks`]: [`Level`], [`Watermarks`], [`LevelMask`] and the §3 violation and
//!   clearing rules;
//! - [`hysteresis`]: per-parameter smoothing, dead band and minimum dwell (§6);
//! - [`table`]: [`EnvTable`], the host's parameter table (`set_dev_param`, `get_dev_params`,
//!   `set_dev_param_wms`), the source of [`EnvEvent`]s;
//! - [`events`]: the event type; [`subscriptions`]: [`EventHub`], bounded per-application
//!   queues filtered to a subset of levels (`request_event`, §3.2);
//! - [`status_wire`] and [`status_auth`]: the authenticated status message a base station or
//!   proxy sends to a host (the role of §3.1's ICMP_STATUS, over UDP);
//! - [`rtnetlink`]: the Linux kernel's link messages (pushed availability), parsed without
//!   I/O for the runtime's listener;
//! - [`actions`], [`action_table`], [`udp_gate`], [`tcp_actions`]: the action vocabulary,
//!   per-socket action tables with simple and complex (threshold-circuit) actions (§3.3.1),
//!   the UDP send gate and the TCP hooks (§4, §5).
//!
//! An engine wires them together: after feeding values into the [`EnvTable`], it drains
//! [`EnvTable::poll_event`] and hands each event to [`EventHub::publish`] and to every
//! socket's [`ActionTable::handle_event`], then applies the decided actions (to a
//! [`UdpActionGate`], or to a TCP connection with [`TcpAction::apply`]).

pub mod action_table;
pub mod actions;
mod error;
pub mod events;
pub mod hysteresis;
pub mod params;
pub mod rtnetlink;
pub mod status_auth;
pub mod status_wire;
pub mod subscriptions;
pub mod table;
pub mod tcp_actions;
pub mod udp_gate;
pub mod watermarks;

#[cfg(test)]
mod tests;

pub use action_table::{ActionTable, Decided, EntryId, Fired};
pub use actions::{Action, Knob, TcpAction, UdpAction};
pub use error::EnvError;
pub use events::EnvEvent;
pub use hysteresis::Hysteresis;
pub use params::{Name, Param, ParamReading};
pub use status_auth::{StatusError, StatusSigner, StatusVerifier};
pub use status_wire::{StatusKey, StatusMessage};
pub use subscriptions::{Delivery, EventHub, SubscriberId};
pub use table::EnvTable;
pub use udp_gate::{GateEvent, GateStats, SendVerdict, UdpActionGate, UdpMode};
pub use watermarks::{Level, LevelKind, LevelMask, Watermarks};
