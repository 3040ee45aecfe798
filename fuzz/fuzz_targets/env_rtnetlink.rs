//! The rtnetlink link-message parser (the runtime's pushed availability source) never panics
//! on any datagram, consumes at least a header per message, and reads back what it emits.
#![no_main]

use adaptnet_core::env::rtnetlink::{self, NLMSG_HDR_LEN, RTM_NEWLINK, RtnlMessage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut count = 0usize;
    for m in rtnetlink::messages(data) {
        count += 1;
        // Anything parsed as a link re-emits and parses back to the same fields.
        if let Ok(RtnlMessage::NewLink(info)) = m {
            let again = rtnetlink::emit_link(RTM_NEWLINK, &info);
            let back: Vec<_> = rtnetlink::messages(&again).collect();
            assert_eq!(back, vec![Ok(RtnlMessage::NewLink(info))]);
        }
    }
    assert!(count <= data.len() / NLMSG_HDR_LEN + 1);
});
