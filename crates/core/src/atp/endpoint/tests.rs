//! Two endpoints joined by an in-memory wire (fixed delay, optional seeded loss): handshake,
//! messages with bytes both ways, close, idle timeout, and what a stranger can make a server do.

use super::*;
use crate::nai::{NaiEvent, Outcome, QueueId, SendOptions};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

const C: &str = "10.0.0.1:5000";
const S: &str = "10.0.0.2:7000";

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("address")
}

struct Wire {
    now: Time,
    client: Endpoint,
    server: Endpoint,
    in_flight: BTreeMap<(Time, u64), (bool, Vec<u8>)>,
    seq: u64,
    loss: f64,
    rng: ChaCha8Rng,
    client_events: Vec<EndpointEvent>,
    server_events: Vec<EndpointEvent>,
    /// When each direction's link (10 Mbit/s) is next free: [to server, to client].
    busy_until: [Time; 2],
}

/// Link rate of the wire, bytes per second.
const LINK_BYTES_PER_S: f64 = 1_250_000.0;

impl Wire {
    fn new(loss: f64) -> Wire {
        let mut server = EndpointConfig::server([3; 32]);
        server.atp.estimator.mode = crate::atp::EstimatorMode::Bounded;
        Wire {
            now: Time::ZERO,
            client: Endpoint::new(EndpointConfig::client()),
            server: Endpoint::new(server),
            in_flight: BTreeMap::new(),
            seq: 0,
            loss,
            rng: ChaCha8Rng::seed_from_u64(1),
            client_events: Vec::new(),
            server_events: Vec::new(),
            busy_until: [Time::ZERO; 2],
        }
    }

    fn flush(&mut self) {
        let mut buf = [0u8; 2048];
        let delay = Duration::from_millis(10);
        loop {
            let mut any = false;
            while let Some(t) = self.client.poll_transmit(self.now, &mut buf) {
                assert_eq!(t.destination, addr(S));
                self.send(true, buf[..t.len].to_vec(), delay);
                any = true;
            }
            while let Some(t) = self.server.poll_transmit(self.now, &mut buf) {
                assert_eq!(t.destination, addr(C));
                self.send(false, buf[..t.len].to_vec(), delay);
                any = true;
            }
            while let Some(e) = self.client.poll_event() {
                self.client_events.push(e);
                any = true;
            }
            while let Some(e) = self.server.poll_event() {
                self.server_events.push(e);
                any = true;
            }
            if !any {
                break;
            }
        }
    }

    fn send(&mut self, to_server: bool, bytes: Vec<u8>, delay: Duration) {
        self.seq += 1;
        // Serialise on the direction's link, so back-to-back datagrams arrive spaced out.
        let busy = &mut self.busy_until[usize::from(!to_server)];
        let start = (*busy).max(self.now);
        *busy = start + Duration::from_secs_f64(bytes.len() as f64 / LINK_BYTES_PER_S);
        let arrival = *busy + delay;
        if self.loss > 0.0 && self.rng.random::<f64>() < self.loss {
            return;
        }
        self.in_flight
            .insert((arrival, self.seq), (to_server, bytes));
    }

    /// Runs until `until`, delivering datagrams and firing timers.
    fn run_until(&mut self, until: Time) {
        self.flush();
        loop {
            let next = [
                self.in_flight.keys().next().map(|k| k.0),
                self.client.poll_timeout(),
                self.server.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(next) = next.filter(|t| *t <= until) else {
                self.now = until;
                return;
            };
            self.now = self.now.max(next);
            while let Some(e) = self
                .in_flight
                .first_entry()
                .filter(|e| e.key().0 <= self.now)
            {
                let (to_server, bytes) = e.remove();
                if to_server {
                    self.server.handle_datagram(self.now, addr(C), &bytes);
                } else {
                    self.client.handle_datagram(self.now, addr(S), &bytes);
                }
            }
            self.client.handle_timeout(self.now);
            self.server.handle_timeout(self.now);
            self.flush();
        }
    }
}

fn connected(w: &mut Wire) -> (ConnectionId, ConnectionId) {
    let c = w.client.connect(w.now, addr(S), 99).expect("connect");
    w.run_until(w.now + Duration::from_millis(200));
    assert!(w.client_events.contains(&EndpointEvent::Connected(c)));
    let s = w
        .server_events
        .iter()
        .find_map(|e| match e {
            EndpointEvent::Incoming(id, a) if *a == addr(C) => Some(*id),
            _ => None,
        })
        .expect("server saw the connection");
    (c, s)
}

fn delivered(events: &[EndpointEvent], on: ConnectionId) -> Vec<Vec<u8>> {
    events
        .iter()
        .filter_map(|e| match e {
            EndpointEvent::Connection(id, ConnEvent::Delivered(d)) if *id == on => d.data.clone(),
            _ => None,
        })
        .collect()
}

fn outcomes(events: &[EndpointEvent], on: ConnectionId) -> Vec<Outcome> {
    events
        .iter()
        .filter_map(|e| match e {
            EndpointEvent::Connection(id, ConnEvent::Nai(NaiEvent::Outcome { outcome, .. }))
                if *id == on =>
            {
                Some(*outcome)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn handshake_uses_a_retry_and_allocates_nothing_before() {
    let mut w = Wire::new(0.0);
    w.client.connect(w.now, addr(S), 5).expect("connect");
    // First HELLO: the server answers statelessly.
    let mut buf = [0u8; 2048];
    let n = w.client.poll_transmit(w.now, &mut buf).expect("hello").len;
    w.server.handle_datagram(w.now, addr(C), &buf[..n]);
    assert_eq!(w.server.connection_count(), 0);
    assert_eq!(w.server.stats().retries_sent, 1);
    let m = w.server.poll_transmit(w.now, &mut buf).expect("retry").len;
    assert!(m < n, "retry ({m} B) smaller than hello ({n} B)");
    let (c, s) = connected(&mut Wire::new(0.0));
    assert_eq!((c.0, s.0), (0, 0));
}

#[test]
fn messages_with_bytes_both_ways() {
    let mut w = Wire::new(0.0);
    let (c, s) = connected(&mut w);
    let opts = SendOptions::default();
    let payloads: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 3000 + usize::from(i)]).collect();
    for p in &payloads {
        w.client
            .send(w.now, c, QueueId(0), p.clone(), opts)
            .expect("admitted");
    }
    let tx = w.server.connection_mut(s).expect("open");
    tx.send(w.now, QueueId(0), b"pong".to_vec(), opts)
        .expect("admitted");
    w.run_until(Time::from_secs(5));
    let mut got = delivered(&w.server_events, s);
    got.sort_by_key(|d| d.first().copied());
    let sizes: Vec<usize> = got.iter().map(Vec::len).collect();
    assert_eq!(got.len(), payloads.len(), "delivered sizes {sizes:?}");
    assert!(got == payloads, "bytes differ");
    assert_eq!(delivered(&w.client_events, c), vec![b"pong".to_vec()]);
    let outs = outcomes(&w.client_events, c);
    assert_eq!(outs.len(), 20);
    assert!(outs.iter().all(|o| matches!(o, Outcome::Delivered { .. })));
}

#[test]
fn survives_loss_in_handshake_and_data() {
    let mut w = Wire::new(0.1);
    let c = w.client.connect(w.now, addr(S), 7).expect("connect");
    w.run_until(Time::from_secs(3));
    assert!(w.client_events.contains(&EndpointEvent::Connected(c)));
    for i in 0..30u8 {
        let tx = w.client.connection_mut(c).expect("open");
        tx.send(w.now, QueueId(0), vec![i; 5000], SendOptions::default())
            .expect("admitted");
    }
    w.run_until(Time::from_secs(30));
    let s = w
        .server_events
        .iter()
        .find_map(|e| match e {
            EndpointEvent::Incoming(id, _) => Some(*id),
            _ => None,
        })
        .expect("incoming");
    assert_eq!(delivered(&w.server_events, s).len(), 30);
    assert_eq!(outcomes(&w.client_events, c).len(), 30);
}

#[test]
fn graceful_close_reaches_both_sides_and_every_message_has_an_outcome() {
    let mut w = Wire::new(0.0);
    let (c, s) = connected(&mut w);
    for _ in 0..5 {
        let tx = w.client.connection_mut(c).expect("open");
        tx.send(w.now, QueueId(0), vec![1; 20_000], SendOptions::default())
            .expect("admitted");
    }
    w.client.close(w.now, c, Duration::from_secs(10));
    w.run_until(w.now + Duration::from_secs(10));
    let closed = |evs: &[EndpointEvent], id| {
        evs.iter()
            .filter(|e| matches!(e, EndpointEvent::Connection(i, ConnEvent::Closed(_)) if *i == id))
            .count()
    };
    assert_eq!(closed(&w.client_events, c), 1);
    assert_eq!(closed(&w.server_events, s), 1);
    let outs = outcomes(&w.client_events, c);
    assert_eq!(outs.len(), 5, "each message one outcome: {outs:?}");
    assert_eq!(w.client.connection_count(), 0);
    assert_eq!(w.server.connection_count(), 0);
}

#[test]
fn abrupt_close_abandons_live_messages() {
    let mut w = Wire::new(0.0);
    let (c, _) = connected(&mut w);
    let tx = w.client.connection_mut(c).expect("open");
    tx.send(
        w.now,
        QueueId(0),
        vec![1; 1_000_000],
        SendOptions::default(),
    )
    .expect("admitted");
    w.run_until(w.now + Duration::from_millis(100));
    w.client.close(w.now, c, Duration::ZERO);
    w.run_until(w.now + Duration::from_millis(100));
    assert_eq!(outcomes(&w.client_events, c), vec![Outcome::Abandoned]);
}

#[test]
fn a_second_close_shortens_a_graceful_close_never_lengthens_it() {
    let mut w = Wire::new(0.0);
    let (c, s) = connected(&mut w);
    let tx = w.client.connection_mut(c).expect("open");
    tx.send(
        w.now,
        QueueId(0),
        vec![1; 10_000_000],
        SendOptions::default(),
    )
    .expect("admitted");
    w.client.close(w.now, c, Duration::from_secs(60));
    // A longer linger changes nothing; a shorter one (zero: an endpoint shutting down) closes
    // at once, long before the 10 MB message could finish.
    w.client.close(w.now, c, Duration::from_secs(600));
    w.run_until(w.now + Duration::from_millis(100));
    assert!(w.client.connection(c).is_some(), "still draining");
    w.client.close(w.now, c, Duration::ZERO);
    w.run_until(w.now + Duration::from_millis(100));
    assert_eq!(outcomes(&w.client_events, c), vec![Outcome::Abandoned]);
    assert!(w.server_events.iter().any(|e| matches!(
        e,
        EndpointEvent::Connection(id, ConnEvent::Closed(CloseReason::Application)) if *id == s
    )));
}

#[test]
fn idle_peer_times_out_but_quiet_one_stays() {
    let mut w = Wire::new(0.0);
    let (c, s) = connected(&mut w);
    // Quiet for 2 minutes: keep-alives hold the connection.
    w.run_until(w.now + Duration::from_secs(120));
    assert!(w.client.connection(c).is_some());
    assert!(w.server.connection(s).is_some());
    // The client vanishes (its datagrams are lost from now on): the server times out.
    w.loss = 1.0;
    w.run_until(w.now + Duration::from_secs(31));
    assert!(w.server_events.iter().any(|e| matches!(
        e,
        EndpointEvent::Connection(id, ConnEvent::Closed(CloseReason::Idle)) if *id == s
    )));
}

#[test]
fn strangers_get_no_state_and_no_amplification() {
    let mut server = Endpoint::new(EndpointConfig::server([9; 32]));
    let now = Time::ZERO;
    let peer = addr("192.0.2.7:1234");
    let mut buf = [0u8; 2048];
    // Not a HELLO: dropped without state or answer.
    server.handle_datagram(now, peer, &[1, 1, 0, 0, 0]);
    server.handle_datagram(now, peer, &[0xff; 40]);
    assert_eq!(server.stats().unknown_peer, 2);
    // A short HELLO: dropped.
    let hello = SessionRepr::Hello {
        client_id: 1,
        token: vec![],
    };
    let mut h = vec![0u8; hello.buffer_len()];
    hello.emit(&mut h).expect("fits");
    server.handle_datagram(now, peer, &h[..40]);
    assert_eq!(server.stats().short_hellos, 1);
    // A forged token: a fresh RETRY, no connection.
    let forged = SessionRepr::Hello {
        client_id: 1,
        token: vec![0; 20],
    };
    let mut f = vec![0u8; forged.buffer_len()];
    forged.emit(&mut f).expect("fits");
    let mut received = 0usize;
    let mut sent = 0usize;
    for _ in 0..100 {
        server.handle_datagram(now, peer, &f);
        sent += f.len();
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            received += t.len;
        }
    }
    assert_eq!(server.connection_count(), 0);
    assert_eq!(server.stats().bad_tokens, 100);
    assert!(
        received < sent,
        "answered {received} B to {sent} B from an unvalidated peer"
    );
    assert_eq!(server.poll_event(), None);
}

#[test]
fn full_server_refuses_with_close() {
    let mut config = EndpointConfig::server([2; 32]);
    config.max_connections = 0;
    let mut w = Wire::new(0.0);
    w.server = Endpoint::new(config);
    let c = w.client.connect(w.now, addr(S), 3).expect("connect");
    w.run_until(Time::from_secs(1));
    assert!(w.client_events.contains(&EndpointEvent::ConnectFailed(c)));
    assert_eq!(w.server.stats().refused_full, 1);
}

#[test]
fn unanswered_connect_fails() {
    let mut w = Wire::new(1.0);
    let c = w.client.connect(w.now, addr(S), 3).expect("connect");
    w.run_until(Time::from_secs(60));
    assert_eq!(w.client_events, vec![EndpointEvent::ConnectFailed(c)]);
    assert_eq!(w.client.connection_count(), 0);
}

#[test]
fn application_calls_by_connection_id() {
    let mut w = Wire::new(0.0);
    let (c, _) = connected(&mut w);
    let opts = SendOptions::default();
    let big = w
        .client
        .send(w.now, c, QueueId(0), vec![5; 2_000_000], opts)
        .expect("admitted");
    let small = w
        .client
        .send(w.now, c, QueueId(0), vec![6; 1000], opts)
        .expect("admitted");
    w.client
        .control(w.now, c, big, MessageControl::Defer)
        .expect("deferred");
    let conn = w.client.connection(c).expect("open");
    assert_eq!(
        conn.message_state(big),
        Ok(crate::nai::MessageState::Deferred)
    );
    assert_eq!(conn.live_messages(), 2);
    w.run_until(w.now + Duration::from_millis(500));
    // The small one went; the deferred one did not move.
    assert!(outcomes(&w.client_events, c).len() == 1);
    let conn = w.client.connection_mut(c).expect("open");
    assert_eq!(conn.bytes_remaining(big), Ok(2_000_000));
    assert!(conn.message_state(small).is_err(), "final");
    conn.cancel(w.now, big).expect("cancelled");
    w.run_until(w.now + Duration::from_millis(100));
    assert_eq!(
        outcomes(&w.client_events, c)[1],
        Outcome::Cancelled,
        "one outcome each"
    );
    // Unknown ids and messages say so.
    let nobody = ConnectionId(77);
    assert_eq!(
        w.client.send(w.now, nobody, QueueId(0), vec![1], opts),
        Err(AppError::UnknownConnection(77))
    );
    assert!(matches!(
        w.client.control(w.now, c, big, MessageControl::Resume),
        Err(AppError::Nai(crate::nai::NaiError::UnknownMessage(_)))
    ));
    assert!(w.client.connection(c).expect("open").stats().srtt.is_some());
}

#[test]
fn a_closing_connection_takes_no_new_message() {
    let mut w = Wire::new(0.0);
    let (c, _) = connected(&mut w);
    let opts = SendOptions::default();
    w.client
        .send(w.now, c, QueueId(0), vec![1; 100_000], opts)
        .expect("admitted");
    w.client.close(w.now, c, Duration::from_secs(10));
    assert_eq!(
        w.client.send(w.now, c, QueueId(0), vec![1], opts),
        Err(AppError::Closing)
    );
    // The NAI port view of the same refusal.
    let conn = w.client.connection_mut(c).expect("draining");
    assert!(crate::nai::app::NaiPort::submit(conn, w.now, 10, opts).is_err());
}
