//! TCP header parsing never panics, and whatever parses re-emits and re-parses identically.
#![no_main]

use adaptnet_core::tcp::TcpRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(repr) = TcpRepr::parse(data) {
        let mut buf = vec![0u8; repr.buffer_len()];
        if repr.emit(&mut buf).is_ok() {
            assert_eq!(TcpRepr::parse(&buf).ok(), Some(repr));
        }
    }
});
