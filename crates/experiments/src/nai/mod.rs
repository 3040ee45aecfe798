//! NAI/ATP experiments (`papers/000_97f7680fd99dd928.txt` §4.4, §5): bulk transfer (§5.3),
//! the priority and deadline workloads of Table 2 / Figure 7 (§5.4), and the four-level
//! adaptive application of Table 1 (§4.4), on an emulated wireless hop whose sender interface
//! is shaped by a bandwidth trace (§5.1). Parameters live in `experiments/nai/*.params`, TOML syntax.
//!
//! Read in this order: [`params`], [`traces`], [`workloads`], [`net`] (the testbed and one
//! run of any implementation), then the experiments.

pub mod bulk;
pub mod endpoint;
pub mod estimators;
pub mod net;
pub mod params;
pub mod table1;
pub mod table2;
pub mod traces;
pub mod workloads;
