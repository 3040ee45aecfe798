//! The host daemon's local protocol (issue 20): any byte string, as one frame body or as a
//! stream cut into arbitrary chunks, parses or is an error, never a panic; the decoder's
//! buffer stays within one frame plus one chunk; whatever parses re-encodes and parses again
//! to the same message.
#![no_main]

use adaptnet_core::daemon::{FrameDecoder, LEN_PREFIX, MAX_FRAME_LEN, encode_frame, parse_body};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((id, m)) = parse_body(data) {
        let mut buf = Vec::new();
        encode_frame(id, &m, &mut buf).expect("a parsed message re-encodes");
        let (id2, m2) = parse_body(&buf[LEN_PREFIX..]).expect("and parses again");
        assert_eq!(id, id2);
        assert_eq!(format!("{m:?}"), format!("{m2:?}"));
    }
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(cut).max(1);
    let mut d = FrameDecoder::new();
    for c in rest.chunks(chunk) {
        d.push(c);
        while d.next_frame().is_some() {}
        assert!(d.buffered() <= LEN_PREFIX + MAX_FRAME_LEN + chunk);
    }
});
