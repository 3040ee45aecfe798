//! The fixed-size headers (CBR datagrams, ATP-over-TCP segments, the baselines' records) never
//! panic on any input, and neither does the baselines' stream splitter, which the runtime feeds
//! straight from a socket.
#![no_main]

use adaptnet_core::Time;
use adaptnet_core::atp::tcp::SegHeader;
use adaptnet_core::cbr::CbrHeader;
use adaptnet_core::nai::baseline::record::{RecordHeader, RecordReceiver};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = CbrHeader::parse(data);
    let _ = SegHeader::parse(data);
    let _ = RecordHeader::parse(data);
    // The stream in two reads, cut where the first byte says.
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let (a, b) = data.split_at(cut);
    let mut rx = RecordReceiver::with_max_message_bytes(1 << 16);
    let _ = rx.handle_bytes(Time::ZERO, a);
    let _ = rx.handle_bytes(Time::ZERO, b);
    while rx.poll_event().is_some() {}
});
