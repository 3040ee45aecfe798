//! adaptnet-sim: a deterministic discrete-event network simulator.
//!
//! Virtual time in nanoseconds, one thread, one event heap ordered by (time, sequence), one
//! seed: the same scenario and seed give byte-identical results.
//!
//! - [`link`]: the link model (bandwidth, delay, queue, loss, outages, reordering), also
//!   driven in real time on real packets by `adaptnet link` (crate `adaptnet-linkemu`);
//! - [`trace`]: Mahimahi and piecewise-constant bandwidth traces;
//! - [`packet`]: what links carry; [`agent`]: the protocol endpoints on hosts;
//! - [`world`]: nodes, links, routing, the event loop; [`topology`]: dumbbell and chain
//!   builders;
//! - [`agents`]: TCP and CBR agents; [`metrics`]: goodput series, fairness, RTT summaries;
//! - [`pcap`]: packet captures; [`scenario`]: TOML scenario files;
//! - [`validation`]: the checks of the simulator and NewReno against known results.

#![deny(missing_docs)]
// No unsafe code: the fuzz targets (which parse outside input with this crate) then run
// without a memory sanitizer, and panics are what they look for.
#![forbid(unsafe_code)]
// Scenario files, traces and packets come from outside: no panics and no silent truncation
// outside tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        clippy::cast_possible_truncation
    )
)]

pub mod agent;
pub mod agents;
pub mod link;
pub mod manet;
pub mod media_metrics;
pub mod metrics;
pub mod packet;
pub mod pcap;
pub mod scenario;
pub mod topology;
pub mod trace;
pub mod validation;
pub mod world;
