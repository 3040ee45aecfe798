//! Test harnesses shared by the unit tests of several modules (compiled for tests only).

pub(crate) mod pipe;
