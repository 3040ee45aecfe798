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
    /// Every datagram the client sent: when, and its size.
    client_sent: Vec<(Time, usize)>,
    /// When each of `client_events` was polled.
    client_event_times: Vec<Time>,
}

/// Link rate of the wire, bytes per second.
const LINK_BYTES_PER_S: f64 = 1_250_000.0;

impl Wire {
    fn new(loss: f64) -> Wire {
        Wire::with(
            loss,
            EndpointConfig::client(),
            EndpointConfig::server([3; 32]),
        )
    }

    fn with(loss: f64, client: EndpointConfig, mut server: EndpointConfig) -> Wire {
        server.atp.estimator.mode = crate::atp::EstimatorMode::Bounded;
        Wire {
            now: Time::ZERO,
            client: Endpoint::new(client),
            server: Endpoint::new(server),
            in_flight: BTreeMap::new(),
            seq: 0,
            loss,
            rng: ChaCha8Rng::seed_from_u64(1),
            client_events: Vec::new(),
            server_events: Vec::new(),
            busy_until: [Time::ZERO; 2],
            client_sent: Vec::new(),
            client_event_times: Vec::new(),
        }
    }

    fn flush(&mut self) {
        let mut buf = [0u8; 2048];
        let delay = Duration::from_millis(10);
        loop {
            let mut any = false;
            while let Some(t) = self.client.poll_transmit(self.now, &mut buf) {
                assert_eq!(t.destination, addr(S));
                self.client_sent.push((self.now, t.len));
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
                self.client_event_times.push(self.now);
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

fn opts_with_timer(timer: Duration) -> SendOptions {
    SendOptions {
        timer: Some(timer),
        on_expiry: crate::nai::OnExpiry::Discard,
        ..SendOptions::default()
    }
}

/// Regression (issue 18): with the server gone mid-workload, messages with a 1 s timer were
/// reported only at the 30 s idle timeout, as `Abandoned`, and the survivor kept sending
/// full-size datagrams. Now every timer fires at its deadline, only PINGs go out once the
/// peer is silent, and the connection ends within `silent_timeout`.
#[test]
fn test_dead_server_timers_fire_on_time_survivor_only_pings_and_frees_the_connection() {
    let mut w = Wire::new(0.0);
    let (c, _) = connected(&mut w);
    // Let the estimator settle on a healthy path first.
    let conn = w.client.connection_mut(c).expect("open");
    for _ in 0..20 {
        let _ = conn.send(w.now, QueueId(0), vec![1; 4000], SendOptions::default());
    }
    w.run_until(w.now + Duration::from_secs(2));
    // The server dies; the client submits a workload with 1 s timers.
    w.loss = 1.0;
    let t0 = w.now;
    let conn = w.client.connection_mut(c).expect("open");
    let mut ids = Vec::new();
    for i in 0..30 {
        let r = conn.send(
            t0,
            QueueId(0),
            vec![2; 1000 + 100 * i],
            opts_with_timer(Duration::from_secs(1)),
        );
        if let Ok(id) = r {
            ids.push(id);
        }
    }
    let events_before = w.client_events.len();
    w.run_until(t0 + Duration::from_secs(12));
    let deadline = t0 + Duration::from_secs(1);
    let mut expired = 0;
    let mut outcomes_after = 0;
    let mut closed_at = None;
    for (e, at) in w.client_events[events_before..]
        .iter()
        .zip(&w.client_event_times[events_before..])
    {
        match e {
            EndpointEvent::Connection(_, ConnEvent::Nai(NaiEvent::TimerExpired { id, .. }))
                if ids.contains(id) =>
            {
                expired += 1;
                assert!(
                    *at <= deadline + Duration::from_millis(100),
                    "timer of {id:?} fired at {at:?}, deadline {deadline:?}"
                );
            }
            EndpointEvent::Connection(_, ConnEvent::Nai(NaiEvent::Outcome { id, .. }))
                if ids.contains(id) =>
            {
                outcomes_after += 1;
            }
            EndpointEvent::Connection(_, ConnEvent::Closed(reason)) => {
                assert_eq!(*reason, CloseReason::Idle);
                closed_at = Some(*at);
            }
            _ => {}
        }
    }
    assert_eq!(
        expired,
        ids.len(),
        "every timer fired while the peer was dead"
    );
    assert_eq!(outcomes_after, ids.len(), "exactly one outcome each");
    let closed_at = closed_at.expect("the survivor ended the connection");
    assert!(
        closed_at <= t0 + Duration::from_secs(9),
        "freed at {:?} after the death",
        closed_at - t0
    );
    assert!(w.client.connection(c).is_none(), "forgotten");
    // Once the peer is silent (one RTO, at most 1 s here), only small datagrams go out.
    let late: Vec<usize> = w
        .client_sent
        .iter()
        .filter(|(at, _)| *at >= t0 + Duration::from_secs(1))
        .map(|(_, len)| *len)
        .collect();
    assert!(
        late.iter().all(|len| *len <= 64),
        "only small probes to the silent peer: {late:?}"
    );
    assert!(late.len() <= 12, "probes backed off: {} sent", late.len());
}

/// The client dies mid-transfer: the server, which only receives (its acknowledgements
/// expect nothing), notices with one PING once the data stops, and frees the connection
/// within `quiet_probe + silent_timeout`.
#[test]
fn test_dead_client_is_noticed_by_a_receiving_server() {
    let mut w = Wire::new(0.0);
    let (c, s) = connected(&mut w);
    let conn = w.client.connection_mut(c).expect("open");
    for _ in 0..50 {
        let _ = conn.send(w.now, QueueId(0), vec![5; 30_000], SendOptions::default());
    }
    w.run_until(w.now + Duration::from_millis(300));
    w.loss = 1.0;
    let t0 = w.now;
    let mut closed_at = None;
    let before = w.server_events.len();
    while w.now < t0 + Duration::from_secs(15) && closed_at.is_none() {
        w.run_until(w.now + Duration::from_millis(10));
        closed_at = w.server_events[before..]
            .iter()
            .any(|e| {
                matches!(e, EndpointEvent::Connection(id, ConnEvent::Closed(CloseReason::Idle)) if *id == s)
            })
            .then_some(w.now);
    }
    let closed_at = closed_at.expect("the server ended the connection");
    assert!(
        closed_at - t0 <= Duration::from_millis(9_500),
        "freed {:?} after the client died",
        closed_at - t0
    );
    assert!(w.server.connection(s).is_none());
}

/// A link down for 5 s (shorter than `silent_timeout`) is ridden out: the connection stays,
/// sending resumes when the PINGs are answered, and every message is delivered.
#[test]
fn test_link_down_for_5_s_is_ridden_out() {
    let mut w = Wire::new(0.0);
    let (c, s) = connected(&mut w);
    let conn = w.client.connection_mut(c).expect("open");
    let mut ids = Vec::new();
    for _ in 0..40 {
        if let Ok(id) = conn.send(w.now, QueueId(0), vec![3; 20_000], SendOptions::default()) {
            ids.push(id);
        }
    }
    w.run_until(w.now + Duration::from_millis(150));
    w.loss = 1.0;
    w.run_until(w.now + Duration::from_secs(5));
    w.loss = 0.0;
    w.run_until(w.now + Duration::from_secs(20));
    assert!(w.client.connection(c).is_some(), "client connection kept");
    assert!(w.server.connection(s).is_some(), "server connection kept");
    let got = outcomes(&w.client_events, c);
    assert_eq!(got.len(), ids.len());
    assert!(got.iter().all(|o| matches!(o, Outcome::Delivered { .. })));
    assert_eq!(delivered(&w.server_events, s).len(), ids.len());
}

/// Regression (issue 18): a receiving application that reads slowly made the endpoint close
/// the connection after its sender was told messages were delivered. With flow control the
/// sender waits for the window, nothing is lost, and nothing closes.
#[test]
fn test_slow_reader_through_endpoints_delivers_everything() {
    let window = 1 << 20;
    let mut client = EndpointConfig::client();
    client.atp.spp.receive_window_bytes = Some(window);
    let mut server = EndpointConfig::server([3; 32]);
    server.atp.spp.receive_window_bytes = Some(window);
    let mut w = Wire::with(0.0, client, server);
    let (c, s) = connected(&mut w);
    let n = 120;
    let size = 64 << 10;
    let conn = w.client.connection_mut(c).expect("open");
    for i in 0..n {
        let data = vec![(i % 251) as u8; size];
        // Submit as room allows (the sender's own buffer is 64 MB: all fit).
        conn.send(w.now, QueueId(0), data, SendOptions::default())
            .expect("admitted");
    }
    // The reader takes one message every 40 ms (1.6 MB/s against a 1.25 MB/s link, after
    // a 3 s stall at the start).
    let mut read = 0usize;
    let mut next_read = w.now + Duration::from_secs(3);
    let end = w.now + Duration::from_secs(60);
    let mut peak_unread = 0usize;
    while w.now < end && read < n {
        let step = w.now + Duration::from_millis(10);
        w.run_until(step);
        let arrived = delivered(&w.server_events, s).len();
        peak_unread = peak_unread.max(arrived - read);
        if w.now >= next_read && read < arrived {
            if let Some(conn) = w.server.connection_mut(s) {
                conn.handle_consumed(1, size as u64);
            }
            read += 1;
            next_read = w.now + Duration::from_millis(40);
        }
    }
    assert_eq!(read, n, "the reader got every message");
    w.run_until(w.now + Duration::from_secs(1));
    let got = outcomes(&w.client_events, c);
    assert_eq!(got.len(), n);
    assert!(got.iter().all(|o| matches!(o, Outcome::Delivered { .. })));
    let held = crate::spp::window::charge(size as u64) as usize;
    assert!(
        peak_unread * held <= window as usize,
        "the receiver held {peak_unread} unread messages, more than the window"
    );
    assert!(
        !w.server_events
            .iter()
            .any(|e| matches!(e, EndpointEvent::Connection(_, ConnEvent::Closed(_))))
    );
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
