//! Scenario files and link files (`adaptnet link --config`, the same link tables) are user
//! input: any text gets a result or an error, never a panic.
#![no_main]

use adaptnet_sim::scenario::Scenario;
use adaptnet_sim::scenario::link_table::LinkPair;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Scenario::parse(text, "fuzz.toml", Path::new("/nonexistent"), "fuzz");
        let _ = LinkPair::parse(text, "fuzz.toml", Path::new("/nonexistent"));
    }
});
