//! adaptnet-daemon: the host daemon (issue 20). One process holds, for every application on
//! the host:
//!
//! - the host's Congestion Manager (papers/003: "integrates congestion management across all
//!   applications and transport protocols"): macroflows across processes, weights per user
//!   and per flow from the configuration, and the probe protocol to other hosts' daemons over
//!   UDP;
//! - one bandwidth estimator per interface (papers/000 §5);
//! - the environment engine (papers/001 §3): device parameters, watermarks, events to every
//!   subscriber, and authenticated status messages from configured peers only.
//!
//! Applications talk to it over a Unix-domain socket with the protocol of
//! [`adaptnet_core::daemon`] (documented in `docs/design/daemon.md`).
//!
//! Module map: [`config`] (the TOML file), [`engine`] (state and who-may-do-what, no I/O),
//! [`server`] (sockets and tasks on the caller's tokio runtime), [`client`] (the library
//! applications use, re-exported from the runtime), [`host`] (environment events: the
//! daemon's if it runs, else in process), [`estimator`] (interface counters), `status` (the
//! monitor's JSON). The CM needs nothing from here: the runtime's `Cm` handle uses the
//! daemon when its socket exists (`ADAPTNET_CM`, `CmOptions::backend`).

pub mod client;
pub mod config;
pub mod engine;
pub mod estimator;
pub mod host;
pub mod server;
mod status;

pub use client::{ClientError, DaemonClient, socket_path};
pub use config::{ConfigError, DaemonConfig};
pub use engine::{Caller, DaemonStats, Engine};
pub use host::{Backend, HostEvent, HostEvents, HostSubscription};
pub use server::{DaemonError, RunningDaemon, start};
