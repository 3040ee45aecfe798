//! The fixed-size headers (CBR datagrams, ATP-over-TCP segments) never panic on any input.
#![no_main]

use adaptnet_core::atp::tcp::SegHeader;
use adaptnet_core::cbr::CbrHeader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = CbrHeader::parse(data);
    let _ = SegHeader::parse(data);
});
