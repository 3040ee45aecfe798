//! Driving a core state machine by hand, with no socket and no clock: two ATP endpoints of
//! `adaptnet-core` (the sans-IO protocol the runtime drives over UDP) joined by a few lines of
//! "wire" in virtual time. This is the loop every engine runs — the runtime's driver and the
//! simulator alike:
//!
//! 1. hand each input to core with the time it arrived (`handle_datagram(now, from, bytes)`);
//! 2. drain `poll_transmit` (each datagram to its destination) and `poll_event`;
//! 3. sleep until the earliest `poll_timeout`, then `handle_timeout(now)`.
//!
//! It shows the handshake (HELLO, RETRY with a token, HELLO again, ACCEPT), keep-alives
//! while the connection is idle (every 10 s), and a CLOSE.
//!
//! Run: `cargo run -p adaptnet-runtime --example core_atp_by_hand`

use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::{Endpoint, EndpointConfig, EndpointEvent};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// One-way delay of the imaginary wire.
const DELAY: Duration = Duration::from_millis(20);

/// A datagram on the wire: when it arrives, where, from whom, its bytes.
struct InFlight {
    at: Time,
    to: SocketAddr,
    from: SocketAddr,
    bytes: Vec<u8>,
}

/// Step 2 for one endpoint: everything it wants to send goes on the wire; its events print.
fn drain(
    now: Time,
    name: &str,
    me: SocketAddr,
    ep: &mut Endpoint,
    wire: &mut VecDeque<InFlight>,
) -> Vec<EndpointEvent> {
    let mut buf = [0u8; 2048];
    while let Some(t) = ep.poll_transmit(now, &mut buf) {
        println!("{:>8.3} s  {name} sends {} bytes", secs(now), t.len);
        wire.push_back(InFlight {
            at: now + DELAY,
            to: t.destination,
            from: me,
            bytes: buf[..t.len].to_vec(),
        });
    }
    let mut events = Vec::new();
    while let Some(ev) = ep.poll_event() {
        println!("{:>8.3} s  {name}: {ev:?}", secs(now));
        events.push(ev);
    }
    events
}

fn secs(t: Time) -> f64 {
    t.as_nanos() as f64 / 1e9
}

fn main() {
    let client_addr: SocketAddr = "10.0.0.1:5000".parse().expect("addr");
    let server_addr: SocketAddr = "10.0.0.2:7000".parse().expect("addr");
    let mut client = Endpoint::new(EndpointConfig::client());
    // A real server draws its token key at random; any fixed key will do here.
    let mut server = Endpoint::new(EndpointConfig::server([7; 32]));
    let mut wire: VecDeque<InFlight> = VecDeque::new();
    let mut now = Time::ZERO;
    let id = client.connect(now, server_addr, 42).expect("connect");
    let close_at = Time::ZERO + Duration::from_secs(25);
    let mut closed = false;
    loop {
        drain(now, "client", client_addr, &mut client, &mut wire);
        for ev in drain(now, "server", server_addr, &mut server, &mut wire) {
            if matches!(ev, EndpointEvent::Connection(_, _)) && closed {
                // The server learned of the CLOSE: done.
                println!("datagrams left on the wire: {}", wire.len());
                return;
            }
        }
        // Step 3: the next thing to happen — a datagram arriving, a timer, or our close.
        let next_arrival = wire.front().map(|d| d.at);
        let next_timer = [client.poll_timeout(), server.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let next_close = (!closed).then_some(close_at);
        let Some(next) = [next_arrival, next_timer, next_close]
            .into_iter()
            .flatten()
            .min()
        else {
            break;
        };
        now = next;
        if next_arrival == Some(now)
            && let Some(d) = wire.pop_front()
        {
            let to = if d.to == server_addr {
                &mut server
            } else {
                &mut client
            };
            to.handle_datagram(now, d.from, &d.bytes);
        }
        if !closed && now >= close_at {
            println!("{:>8.3} s  client: closing", secs(now));
            client.close(now, id, Duration::ZERO);
            closed = true;
        }
        for ep in [&mut client, &mut server] {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
        }
    }
}
