//! TPBA, TCP-Rate-Probing-Based Adaptation (`papers/002_ef8b8f60f6080824.txt`): a media flow
//! that measures the TCP-exact rate by carrying its own data on TCP for a while (the
//! rate-probing period), then sends on UDP at that rate (the running period), decreasing it
//! multiplicatively on reported loss and never increasing it, and probes again.
//!
//! Read in this order: [`config`] (Table 2's parameters), [`controller`] (§4: the periods and
//! their transitions), [`report`] (the wire formats: data fragments on both paths and the
//! RTCP-like receiver report), [`fsocket`] (§5: the flow pair behind `f_socket`, `f_dst`,
//! `f_send`, `f_recv`, `f_close`, and ADU reassembly across switches).

pub mod config;
pub mod controller;
pub mod fsocket;
pub mod report;

pub use config::{Agreement, LargeDecrease, Sampling, TpbaConfig};
pub use controller::{Controller, Period, RunningEnd, TpbaEvent, cwnd_new};
pub use fsocket::{
    FSocket, FlowPath, FlowTransmit, FsConfig, FsError, FsEvent, TcpCommand, TcpStatus,
};
