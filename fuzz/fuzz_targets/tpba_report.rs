//! The TPBA flow's wire formats (data fragments, receiver reports) and TFRC's headers never
//! panic on any input, and what parses re-emits to the same bytes.
#![no_main]

use adaptnet_core::ratectl::tfrc::{TfrcData, TfrcFeedback};
use adaptnet_core::tpba::report::{FragmentHeader, ReceiverReport, packet_kind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = packet_kind(data);
    if let Ok((h, payload)) = FragmentHeader::parse_datagram(data) {
        assert_eq!(h.to_bytes(payload), data);
    }
    if let Ok(rr) = ReceiverReport::parse(data) {
        assert_eq!(rr.to_bytes().as_slice(), data.get(..ReceiverReport::LEN).unwrap_or_default());
    }
    let _ = TfrcData::parse(data);
    let _ = TfrcFeedback::parse(data);
});
