//! CM probe/response parsing never panics; parsed packets round-trip through emit.
#![no_main]

use adaptnet_core::cm::probe;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = probe::parse(data) {
        let mut buf = vec![0u8; p.buffer_len()];
        if p.emit(&mut buf).is_ok() {
            assert_eq!(probe::parse(&buf).ok(), Some(p));
        }
    }
});
