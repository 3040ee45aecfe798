//! A listening TCP endpoint fed any sequence of datagrams from a few peers never panics,
//! keeps its bounds, and answers with datagrams that parse. The input is split into
//! datagrams by a length byte; each takes the peer and an arrival-time step from its first
//! byte.
#![no_main]

use adaptnet_core::Time;
use adaptnet_core::session::token::TokenConfig;
use adaptnet_core::tcp::TcpRepr;
use adaptnet_core::tcp::endpoint::{Endpoint, EndpointConfig, Listen};
use libfuzzer_sys::fuzz_target;
use std::net::SocketAddr;
use std::time::Duration;

const MAX_CONNECTIONS: usize = 4;

fuzz_target!(|data: &[u8]| {
    let config = EndpointConfig {
        listen: Listen::Cookies {
            port: 1,
            tokens: TokenConfig::new([3; 32]),
        },
        max_connections: MAX_CONNECTIONS,
        max_queued_answers: 8,
        ..EndpointConfig::client(adaptnet_core::tcp::TcpConfig::default())
    };
    let mut ep = Endpoint::<SocketAddr>::new(config);
    let peers: [SocketAddr; 3] = [
        "192.0.2.1:1000".parse().unwrap(),
        "192.0.2.2:1000".parse().unwrap(),
        "[2001:db8::1]:7".parse().unwrap(),
    ];
    let mut now = Time::ZERO;
    let mut rest = data;
    let mut buf = vec![0u8; 1460 + 60];
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len).min(tail.len());
        let (datagram, next) = tail.split_at(len);
        rest = next;
        let tag = datagram.first().copied().unwrap_or(0);
        let from = peers[usize::from(tag % 3)];
        now += Duration::from_millis(u64::from(tag >> 2));
        ep.handle_datagram(now, from, datagram);
        if ep.poll_timeout().is_some_and(|t| t <= now) {
            ep.handle_timeout(now);
        }
        while let Some(t) = ep.poll_transmit(now, &mut buf) {
            assert!(TcpRepr::parse_segment(&buf[..t.len]).is_ok());
        }
        while ep.poll_event().is_some() {}
        assert!(ep.connection_count() <= MAX_CONNECTIONS);
    }
});
