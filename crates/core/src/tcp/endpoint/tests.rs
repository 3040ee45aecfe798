//! The endpoint driven by hand and through a tiny virtual-time pair (quinn's test style): two
//! endpoints, a network of datagrams in flight ordered by arrival time, time advanced to the
//! next arrival or timer. Tests are named `test_<state>_<event>`.

use super::*;
use crate::session::token::TokenConfig;
use crate::tcp::{Flags, State};
use proptest::prelude::*;
use std::collections::BTreeMap;

const MSS: u16 = 1000;
const BUF: usize = MSS as usize + crate::tcp::wire::MAX_HEADER_LEN;

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

fn tcp() -> TcpConfig {
    TcpConfig {
        mss: MSS,
        recv_buffer: 64 * 1024,
        ..TcpConfig::default()
    }
}

fn client() -> Endpoint<SocketAddr> {
    Endpoint::new(EndpointConfig::client(tcp()))
}

fn server() -> Endpoint<SocketAddr> {
    Endpoint::new(EndpointConfig {
        listen: Listen::Cookies {
            port: 1,
            tokens: TokenConfig::new([7; 32]),
        },
        ..EndpointConfig::client(tcp())
    })
}

/// Datagrams in flight: (arrival, sequence) → (to the server?, from, bytes).
type InFlight = BTreeMap<(Time, u64), (bool, SocketAddr, Vec<u8>)>;

/// Two endpoints and the network between them.
struct Pair {
    client: Endpoint<SocketAddr>,
    server: Endpoint<SocketAddr>,
    c_addr: SocketAddr,
    s_addr: SocketAddr,
    net: InFlight,
    sent: u64,
    now: Time,
    /// (datagram number) → `Some(extra delay)` to deliver it, `None` to lose it.
    fate: Box<dyn FnMut(u64) -> Option<Duration>>,
}

const DELAY: Duration = Duration::from_millis(10);

impl Pair {
    fn new(fate: impl FnMut(u64) -> Option<Duration> + 'static) -> Pair {
        Pair {
            client: client(),
            server: server(),
            c_addr: addr("192.0.2.1:5000"),
            s_addr: addr("192.0.2.2:6000"),
            net: BTreeMap::new(),
            sent: 0,
            now: Time::ZERO,
            fate: Box::new(fate),
        }
    }

    /// Moves every datagram each endpoint has to the network.
    fn flush(&mut self) {
        let mut buf = vec![0u8; BUF];
        for to_server in [true, false] {
            loop {
                let ep = if to_server {
                    &mut self.client
                } else {
                    &mut self.server
                };
                let Some(t) = ep.poll_transmit(self.now, &mut buf) else {
                    break;
                };
                let n = self.sent;
                self.sent += 1;
                if let Some(extra) = (self.fate)(n) {
                    let from = if to_server { self.c_addr } else { self.s_addr };
                    let data = buf.get(..t.len).expect("len").to_vec();
                    self.net
                        .insert((self.now + DELAY + extra, n), (to_server, from, data));
                }
            }
        }
    }

    /// Runs until `until`, delivering datagrams and firing timers in time order.
    fn run_until(&mut self, until: Time) {
        self.flush();
        let mut spins = 0u32;
        let mut last = self.now;
        loop {
            let arrival = self.net.keys().next().map(|k| k.0);
            let timer = [self.client.poll_timeout(), self.server.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let next = match (arrival, timer) {
                (Some(a), Some(t)) => a.min(t),
                (a, t) => match a.or(t) {
                    Some(x) => x,
                    None => break,
                },
            };
            if next > until {
                break;
            }
            if next <= last {
                spins += 1;
                // A timer that handling does not move would spin an engine's loop.
                assert!(spins < 10_000, "time stuck at {:?}", self.now);
            } else {
                spins = 0;
                last = next;
            }
            self.now = self.now.max(next);
            while let Some(entry) = self.net.first_entry() {
                if entry.key().0 > self.now {
                    break;
                }
                let (to_server, from, data) = entry.remove();
                if to_server {
                    self.server.handle_datagram(self.now, from, &data);
                } else {
                    self.client.handle_datagram(self.now, from, &data);
                }
            }
            for ep in [&mut self.client, &mut self.server] {
                if ep.poll_timeout().is_some_and(|t| t <= self.now) {
                    ep.handle_timeout(self.now);
                }
            }
            self.flush();
        }
        self.now = self.now.max(until);
    }

    fn connect(&mut self) -> ConnectionHandle {
        let s = self.s_addr;
        self.client
            .connect(self.now, s, None, 1, 4242)
            .expect("connect")
    }
}

fn events(ep: &mut Endpoint<SocketAddr>) -> Vec<EndpointEvent<SocketAddr>> {
    std::iter::from_fn(|| ep.poll_event()).collect()
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn test_listen_syn_gets_cookie_and_keeps_no_state() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    p.connect();
    let mut buf = vec![0u8; BUF];
    let syn = p.client.poll_transmit(p.now, &mut buf).expect("SYN");
    let data = buf.get(..syn.len).expect("len").to_vec();
    p.server.handle_datagram(p.now, p.c_addr, &data);
    assert_eq!(p.server.connection_count(), 0, "no state for a SYN");
    assert_eq!(p.server.stats().cookies_sent, 1);
    let answer = p.server.poll_transmit(p.now, &mut buf).expect("SYN-ACK");
    assert!(answer.len <= 3 * syn.len, "no amplification");
    let (repr, _) = TcpRepr::parse_segment(buf.get(..answer.len).expect("len")).expect("parse");
    assert!(repr.flags.syn && repr.flags.ack);
}

#[test]
fn test_listen_cookie_ack_opens_incoming_connection() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    let h = p.connect();
    p.run_until(Time::from_millis(100));
    assert!(events(&mut p.client).contains(&EndpointEvent::Connected(h)));
    let evs = events(&mut p.server);
    assert!(
        matches!(evs.first(), Some(EndpointEvent::Incoming(_, a)) if *a == p.c_addr),
        "{evs:?}"
    );
    assert_eq!(p.server.connection_count(), 1);
}

#[test]
fn test_closed_ack_without_cookie_is_dropped_without_state() {
    let mut s = server();
    let ack = Flags {
        ack: true,
        ..Flags::default()
    };
    let forged = TcpRepr::control(9, 1, 100, 12345, ack);
    let mut buf = vec![0u8; forged.buffer_len()];
    let n = forged.emit(&mut buf).expect("emit");
    s.handle_datagram(Time::ZERO, addr("192.0.2.9:1"), buf.get(..n).expect("n"));
    assert_eq!(s.connection_count(), 0);
    assert_eq!(s.stats().unknown, 1);
}

#[test]
fn test_any_malformed_datagram_is_counted() {
    let mut s = server();
    for junk in [&[][..], &[1, 2, 3], &[0u8; 19], &[0u8; 20]] {
        s.handle_datagram(Time::ZERO, addr("192.0.2.9:1"), junk);
    }
    assert_eq!(
        s.stats().malformed,
        4,
        "a zero data offset is malformed too"
    );
    assert_eq!(s.connection_count(), 0);
}

#[test]
fn test_client_syn_is_refused_with_a_reset() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    // The client does not listen: the server's "connect" to it is reset at once.
    let c = p.c_addr;
    let h = p.server.connect(p.now, c, None, 1, 9).expect("connect");
    p.run_until(Time::from_millis(100));
    assert_eq!(p.client.stats().refused, 1);
    assert!(events(&mut p.server).contains(&EndpointEvent::Aborted(h)));
    let reason = p
        .server
        .stream(h)
        .and_then(Stream::conn)
        .and_then(Connection::abort_reason);
    assert_eq!(reason, Some(crate::tcp::AbortReason::Reset));
}

#[test]
fn test_closed_segment_after_the_linger_is_reset() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    let h = p.connect();
    p.client.close(p.now, h);
    p.run_until(Time::from_millis(100));
    let sh = p.server.handles().next().expect("accepted");
    p.server.close(p.now, sh);
    p.run_until(Time::from_millis(200));
    let (local, remote) = {
        let c = p.client.stream(h).expect("stream");
        (c.local_port(), c.remote_port())
    };
    p.client.release(p.now, h);
    p.run_until(Time::from_secs(3));
    assert_eq!(p.client.connection_count(), 0, "the client forgot it");
    // A retransmitted FIN from the server (its ACK lost) reaches a client that forgot.
    let flags = Flags {
        fin: true,
        ack: true,
        ..Flags::default()
    };
    let fin = TcpRepr::control(remote, local, 1, 1, flags);
    let mut buf = vec![0u8; BUF];
    let n = fin.emit(&mut buf).expect("emit");
    let data = buf.get(..n).expect("n").to_vec();
    let s_addr = p.s_addr;
    p.client.handle_datagram(p.now, s_addr, &data);
    let t = p.client.poll_transmit(p.now, &mut buf).expect("a reset");
    let (rst, _) = TcpRepr::parse_segment(buf.get(..t.len).expect("len")).expect("parse");
    assert!(rst.flags.rst && rst.seq == 1, "{rst:?}");
    assert_eq!(p.client.connection_count(), 0, "no state for it");
}

#[test]
fn test_full_connect_is_refused() {
    let mut c = Endpoint::<SocketAddr>::new(EndpointConfig {
        max_connections: 1,
        ..EndpointConfig::client(tcp())
    });
    let s = addr("192.0.2.2:6000");
    c.connect(Time::ZERO, s, None, 1, 1).expect("first");
    assert_eq!(
        c.connect(Time::ZERO, s, None, 1, 2),
        Err(EndpointError::TooManyConnections(1))
    );
}

#[test]
fn test_synsent_silence_aborts() {
    let mut c = Endpoint::<SocketAddr>::new(EndpointConfig::client(TcpConfig {
        max_retries: 2,
        ..tcp()
    }));
    let h = c
        .connect(Time::ZERO, addr("192.0.2.2:6000"), None, 1, 1)
        .expect("connect");
    let mut buf = vec![0u8; BUF];
    let mut now = Time::ZERO;
    for _ in 0..10 {
        while c.poll_transmit(now, &mut buf).is_some() {}
        match c.poll_timeout() {
            Some(t) => now = t,
            None => break,
        }
        c.handle_timeout(now);
    }
    assert!(events(&mut c).contains(&EndpointEvent::Aborted(h)));
}

#[test]
fn test_established_write_arrives_in_order_and_release_lingers_then_closes() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    let h = p.connect();
    let data = pattern(50_000);
    p.client.write(h, &data).expect("write");
    p.client.close(p.now, h);
    p.run_until(Time::from_millis(500));
    let sh = p.server.handles().next().expect("accepted");
    let mut got = Vec::new();
    p.server.read(sh, u64::MAX, &mut got);
    assert_eq!(got, data);
    let stream = p.server.stream(sh).expect("stream");
    assert!(stream.at_eof());
    p.server.release(p.now, sh);
    p.client.release(p.now, h);
    p.run_until(Time::from_millis(600));
    assert!(p.client.is_idle() && p.server.is_idle());
    assert_eq!(p.server.connection_count(), 1, "lingering");
    p.run_until(Time::from_secs(3));
    assert_eq!(p.server.connection_count(), 0, "gone after the linger");
    assert!(events(&mut p.server).contains(&EndpointEvent::Closed(sh)));
    assert_eq!(p.client.connection_count(), 0);
}

#[test]
fn test_established_release_discards_what_arrives_and_the_fin_still_comes() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    let h = p.connect();
    p.run_until(Time::from_millis(100));
    let sh = p.server.handles().next().expect("accepted");
    // The receiving application lets go without reading; the sender's bytes keep flowing.
    p.server.release(p.now, sh);
    p.client.write(h, &pattern(300_000)).expect("write");
    p.client.close(p.now, h);
    p.run_until(Time::from_secs(2));
    let c = p.client.stream(h).expect("stream");
    assert!(
        c.send_closed(),
        "everything acknowledged: the window never closed"
    );
    assert!(c.at_eof(), "the server's FIN came");
}

#[test]
fn test_established_close_all_sends_fins_and_goes_idle() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    let h = p.connect();
    p.client.write(h, &pattern(5_000)).expect("write");
    p.run_until(Time::from_millis(100));
    p.server.close_all(p.now);
    p.run_until(Time::from_millis(200));
    let c = p.client.stream(h).expect("stream");
    assert!(
        c.conn().is_some_and(Connection::peer_closed),
        "the peer saw our FIN"
    );
    assert!(
        !p.server.is_idle(),
        "the client has not closed its direction yet"
    );
    assert_eq!(
        p.server.connect(p.now, p.c_addr, None, 1, 3),
        Err(EndpointError::TooManyConnections(1024)),
        "a closing endpoint opens nothing"
    );
    p.client.close(p.now, h);
    p.run_until(Time::from_millis(300));
    assert!(p.server.is_idle());
}

#[test]
fn test_listen_specified_passive_open_accepts_its_peer_with_the_given_iss() {
    let c_addr = addr("192.0.2.1:5000");
    let s_addr = addr("192.0.2.2:6000");
    let mut s = Endpoint::<SocketAddr>::new(EndpointConfig {
        linger: None,
        ..EndpointConfig::client(tcp())
    });
    s.set_passive_iss(7_000);
    let sh = s.open_passive(c_addr, 80, 4000).expect("passive");
    let mut c = client();
    c.connect(Time::ZERO, s_addr, Some(4000), 80, 1)
        .expect("connect");
    let mut buf = vec![0u8; BUF];
    let syn = c.poll_transmit(Time::ZERO, &mut buf).expect("SYN");
    let syn = buf.get(..syn.len).expect("len").to_vec();
    // From another port: not the specified peer.
    s.handle_datagram(Time::ZERO, addr("192.0.2.1:5001"), &syn);
    assert!(s.stream(sh).expect("stream").conn().is_none());
    s.handle_datagram(Time::ZERO, c_addr, &syn);
    let stream = s.stream(sh).expect("stream");
    assert_eq!(stream.iss(), 7_000);
    assert_eq!(
        stream.conn().map(Connection::state),
        Some(State::SynReceived)
    );
}

#[test]
fn test_cm_connections_share_one_flow_per_host_and_close_it() {
    use crate::cm::{CmConfig, CmHandle, CongestionManager};
    let cm = CmHandle::new(CongestionManager::new(CmConfig::default()));
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    p.client = Endpoint::new(EndpointConfig {
        congestion: Congestion::Cm(cm.clone()),
        linger: Some(Duration::from_millis(100)),
        ..EndpointConfig::client(tcp())
    });
    let a = p.connect();
    let b = p.connect();
    for h in [a, b] {
        p.client.write(h, &pattern(20_000)).expect("write");
        p.client.close(p.now, h);
    }
    p.run_until(Time::from_millis(200));
    let (fa, fb) = (
        p.client.stream(a).and_then(Stream::flow).expect("flow"),
        p.client.stream(b).and_then(Stream::flow).expect("flow"),
    );
    let ma = cm.borrow().getmacroflow(fa);
    let mb = cm.borrow().getmacroflow(fb);
    assert_eq!(ma, mb, "one macroflow per destination host");
    for _ in 0..20 {
        let now = p.now;
        {
            let mut g = cm.borrow_mut();
            if g.poll_timeout().is_some_and(|t| t <= now) {
                g.handle_timeout(now);
            }
            while g.poll_event().is_some() {}
        }
        p.run_until(now + Duration::from_millis(50));
    }
    let handles: Vec<_> = p.server.handles().collect();
    for sh in handles {
        p.server.release(p.now, sh);
    }
    p.client.release(p.now, a);
    p.client.release(p.now, b);
    p.run_until(p.now + Duration::from_secs(3));
    assert_eq!(p.client.connection_count(), 0);
    assert!(
        cm.borrow().query(fa).is_err(),
        "cm_close when the connection went"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random loss and reordering between two endpoints: every byte arrives once, in order,
    /// both directions close, and both endpoints forget the connection after the linger.
    #[test]
    fn prop_lossy_reordering_network_delivers_every_byte_once_in_order(
        lost in proptest::collection::btree_set(0u64..300, 0..40),
        late in proptest::collection::btree_map(0u64..300, 1u64..40, 0..40),
        len in 1usize..120_000,
    ) {
        let mut p = Pair::new(move |n| {
            if lost.contains(&n) {
                None
            } else {
                Some(Duration::from_millis(late.get(&n).copied().unwrap_or(0)))
            }
        });
        let h = p.connect();
        let data = pattern(len);
        p.client.write(h, &data).expect("write");
        p.client.close(p.now, h);
        let mut got = Vec::new();
        let mut sh = None;
        while p.now < Time::from_secs(600) {
            let next = p.now + Duration::from_millis(50);
            p.run_until(next);
            sh = sh.or_else(|| p.server.handles().next());
            if let Some(sh) = sh {
                p.server.read(sh, u64::MAX, &mut got);
                prop_assert!(data.starts_with(&got), "bytes wrong or out of order");
                if p.server.stream(sh).is_some_and(Stream::at_eof) {
                    p.server.release(p.now, sh);
                }
            }
            if p.client.stream(h).is_some_and(|s| s.send_closed() && s.at_eof()) {
                p.client.release(p.now, h);
            }
            if p.client.connection_count() == 0 && p.server.connection_count() == 0 {
                break;
            }
        }
        prop_assert_eq!(got.len(), data.len(), "liveness: every byte arrived");
        prop_assert_eq!(p.client.connection_count(), 0, "client forgot the connection");
        prop_assert_eq!(p.server.connection_count(), 0, "server forgot the connection");
    }
}

/// RFC 9293 §3.8.6.2.2: a window closed by a full receive buffer reopens when the
/// application reads — the receiver says so at once, and the sender resumes without waiting
/// for its probe's retransmission timeout (at least 1 s here).
#[test]
fn test_established_read_of_full_buffer_sends_window_update() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    let h = p.connect();
    let data = pattern(300_000);
    p.client.write(h, &data).expect("write");
    p.run_until(Time::from_millis(500));
    let sh = p.server.handles().next().expect("accepted");
    let buffered = p.server.stream(sh).expect("stream").readable_bytes();
    assert_eq!(buffered, 64 * 1024, "the receive buffer is full");
    assert!(p.server.poll_transmit(p.now, &mut [0u8; BUF]).is_none());
    let mut got = Vec::new();
    p.server.read(sh, u64::MAX, &mut got);
    let mut buf = vec![0u8; BUF];
    let t = p
        .server
        .poll_transmit(p.now, &mut buf)
        .expect("a window update as soon as the application read");
    let update = buf.get(..t.len).expect("len").to_vec();
    let (repr, payload) = TcpRepr::parse_segment(&update).expect("segment");
    assert!(payload.is_empty() && repr.flags.ack);
    assert!(repr.window > 0, "the update opens the window");
    let at = p.now + DELAY;
    p.net.insert((at, p.sent), (false, p.s_addr, update));
    p.sent += 1;
    // Well before the probe's retransmission timeout, the sender has refilled the buffer.
    p.run_until(p.now + Duration::from_millis(200));
    let refilled = p.server.stream(sh).expect("stream").readable_bytes();
    assert_eq!(refilled, 64 * 1024, "the sender resumed at once");
    // And the whole transfer completes with periodic reads, each reopening the window.
    while got.len() < data.len() {
        let before = got.len();
        p.server.read(sh, u64::MAX, &mut got);
        p.run_until(p.now + Duration::from_millis(100));
        assert!(
            got.len() > before || got.len() == data.len(),
            "stalled at {}",
            got.len()
        );
    }
    assert_eq!(got, data);
    let retransmitted = p
        .client
        .stream(h)
        .and_then(Stream::conn)
        .map(|c| c.stats().timeouts);
    assert_eq!(
        retransmitted,
        Some(0),
        "no retransmission timeout was needed"
    );
}

#[test]
fn test_synsent_unreachable_aborts_at_once() {
    let mut c = client();
    let there = addr("192.0.2.2:6000");
    let h = c.connect(Time::ZERO, there, None, 1, 1).expect("connect");
    let other = c
        .connect(Time::ZERO, addr("192.0.2.3:6000"), None, 1, 1)
        .expect("connect");
    let mut buf = vec![0u8; BUF];
    while c.poll_transmit(Time::ZERO, &mut buf).is_some() {}
    assert_eq!(c.handle_unreachable(Time::from_millis(1), there), 1);
    assert_eq!(events(&mut c), vec![EndpointEvent::Aborted(h)]);
    let reason = c
        .stream(h)
        .and_then(Stream::conn)
        .and_then(Connection::abort_reason);
    assert_eq!(reason, Some(crate::tcp::AbortReason::Unreachable));
    assert!(
        !c.stream(other).is_some_and(Stream::aborted),
        "only the peer reported"
    );
}

#[test]
fn test_established_unreachable_is_a_soft_error() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    let h = p.connect();
    p.run_until(Time::from_millis(100));
    assert_eq!(p.client.handle_unreachable(p.now, p.s_addr), 0);
    assert!(p.client.stream(h).is_some_and(Stream::is_established));
}

/// Issue 17: an idle connection holds storage for what it buffers, not for its window.
#[test]
fn test_established_idle_connections_hold_little_storage() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    let mut handles = Vec::new();
    for _ in 0..20 {
        let h = p.connect();
        p.client.write(h, &pattern(60_000)).expect("write");
        handles.push(h);
    }
    p.run_until(Time::from_secs(2));
    let mut got = Vec::new();
    for sh in p.server.handles().collect::<Vec<_>>() {
        p.server.read(sh, u64::MAX, &mut got);
    }
    assert_eq!(got.len(), 20 * 60_000);
    p.run_until(Time::from_secs(3));
    for ep in [&mut p.server, &mut p.client] {
        for h in ep.handles().collect::<Vec<_>>() {
            ep.trim_storage(h);
        }
    }
    let per_conn = (p.server.storage_bytes() + p.client.storage_bytes()) / 20;
    assert_eq!(per_conn, 0, "nothing buffered, nothing held");
}

/// A peer that went away after closing: our FIN is all that is left, and the network's
/// "port unreachable" ends the connection instead of the FIN's retransmissions (15 backed-off
/// timeouts), so its state goes after the linger.
#[test]
fn test_established_unreachable_after_both_fins_sent_ends_the_connection() {
    let mut p = Pair::new(|_| Some(Duration::ZERO));
    let h = p.connect();
    p.client.write(h, &pattern(10_000)).expect("write");
    p.client.close(p.now, h);
    p.run_until(Time::from_millis(300));
    let sh = p.server.handles().next().expect("accepted");
    let mut got = Vec::new();
    p.server.read(sh, u64::MAX, &mut got);
    assert!(p.server.stream(sh).is_some_and(Stream::at_eof));
    // The client's process is gone: our FIN goes nowhere.
    p.server.release(p.now, sh);
    p.flush();
    p.net.clear();
    assert_eq!(p.server.handle_unreachable(p.now, p.c_addr), 1);
    assert!(events(&mut p.server).contains(&EndpointEvent::Aborted(sh)));
    p.run_until(p.now + Duration::from_secs(3));
    assert_eq!(p.server.connection_count(), 0, "gone after the linger");
}
