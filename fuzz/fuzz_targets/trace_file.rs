//! Trace files are user input: any text parses or errors, never panics.
#![no_main]

use adaptnet_sim::trace::{MahimahiTrace, PiecewiseTrace};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = MahimahiTrace::parse(text, "fuzz");
        let _ = PiecewiseTrace::parse(text, "fuzz");
    }
});
