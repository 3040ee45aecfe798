//! SPP packet parsing never panics; parsed packets round-trip through emit.
#![no_main]

use adaptnet_core::spp::SppRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(repr) = SppRepr::parse(data) {
        let mut buf = vec![0u8; repr.buffer_len()];
        if repr.emit(&mut buf).is_ok() {
            assert_eq!(SppRepr::parse(&buf).ok(), Some(repr));
        }
    }
});
