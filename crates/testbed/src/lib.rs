//! adaptnet-testbed: the harnesses adaptnet's tests, benchmarks and CLI measure the runtime
//! with — kept out of the runtime's public API, which is for applications.
//!
//! * [`netns`]: two hosts on one machine (a network namespace joined to the root namespace by
//!   a veth pair, shaped with `tbf`) for the namespace tests and `adaptnet bench env-netns`;
//! * [`loopback`]: bulk transfers over loopback inside one process (kernel TCP, ATP,
//!   NAI-TCP, the stream transport), what `adaptnet bench loopback` and
//!   `benches/quinn-compare` measure;
//! * [`jain_index`]: Jain's fairness index — the simulator's own, so the two engines'
//!   reports compute fairness the same way.

#![deny(missing_docs)]

pub mod loopback;
pub mod netns;

pub use adaptnet_sim::metrics::jain_index;
