//! Whatever arrives from the network, an ATP endpoint never panics: session packets parse or
//! fail cleanly and round-trip, and a server fed arbitrary datagrams (from a few addresses, at
//! advancing times) keeps its bounds and answers no stranger with more bytes than it sent.
#![no_main]

use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{Endpoint, EndpointConfig};
use adaptnet_core::session::SessionRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = SessionRepr::parse(data) {
        let mut buf = vec![0u8; p.buffer_len()];
        if p.emit(&mut buf).is_ok() {
            assert_eq!(SessionRepr::parse(&buf).ok(), Some(p));
        }
    }
    let mut server = Endpoint::new(EndpointConfig::server([1; 32]));
    let mut buf = [0u8; 2048];
    let mut now = Time::ZERO;
    let mut sent = 0usize;
    let mut answered = 0usize;
    // Split the input into datagrams: [peer (2 bits) | len (u8)] then bytes.
    let mut rest = data;
    while let Some((&head, tail)) = rest.split_first() {
        let len = usize::from(head >> 2).min(tail.len());
        let (datagram, next) = tail.split_at(len);
        let peer = format!("10.0.0.{}:4000", head & 3).parse().expect("address");
        server.handle_datagram(now, peer, datagram);
        sent += datagram.len();
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            answered += t.len;
        }
        while server.poll_event().is_some() {}
        now = now + std::time::Duration::from_millis(u64::from(head));
        server.handle_timeout(now);
        rest = next;
    }
    // No valid token can be forged here, so nothing was allocated and nothing amplified.
    assert_eq!(server.connection_count(), 0);
    assert!(answered <= sent);
});
