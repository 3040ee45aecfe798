//! Scenario files are user input: any text gets a result or an error, never a panic.
#![no_main]

use adaptnet_sim::scenario::Scenario;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Scenario::parse(text, "fuzz.toml", Path::new("/nonexistent"), "fuzz");
    }
});
