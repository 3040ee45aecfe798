//! State-machine tests of the stream, driven through the tiny deterministic two-endpoint pipe
//! of [`crate::testing::pipe`] (no simulator): fixed one-way delay, a caller-chosen drop rule,
//! one serialisation slot per segment.

use super::*;
use crate::testing::pipe::{Dir, Endpoints, Pipe, serve};

const DELAY: Duration = Duration::from_millis(50);
/// Serialisation time of one full segment (about 10 Mbit/s), so segments arrive spaced out.
const SLOT: Duration = Duration::from_millis(1);

/// One client and the server that accepts it.
struct Pair {
    pipe: Pipe,
    client: Connection,
    server: Option<Connection>,
    config: TcpConfig,
}

impl Pair {
    /// A client connecting from port 1000 to port 80; `drop(n, segment)` decides whether the
    /// n-th data segment from the client is dropped.
    fn new(config: TcpConfig, drop: impl FnMut(u64, &Segment) -> bool + 'static) -> Pair {
        let client = Connection::connect(
            config.clone(),
            1000,
            80,
            0xffff_ff00,
            Connection::newreno(&config),
        );
        Pair {
            pipe: Pipe::new(DELAY, SLOT, drop),
            client,
            server: None,
            config,
        }
    }
}

impl Endpoints for Pair {
    fn pipe(&mut self) -> &mut Pipe {
        &mut self.pipe
    }

    fn pump(&mut self) {
        let now = self.pipe.now();
        while let Some(seg) = self.client.poll_transmit(now) {
            self.pipe.send(Dir::ToServer, seg);
        }
        if let Some(server) = self.server.as_mut() {
            while let Some(seg) = server.poll_transmit(now) {
                self.pipe.send(Dir::ToClient, seg);
            }
        }
    }

    fn receive(&mut self, dir: Dir, repr: &TcpRepr, len: u32) {
        let now = self.pipe.now();
        match dir {
            Dir::ToServer => {
                if let Some(s) = serve(&self.config, self.server.as_mut(), now, repr, len) {
                    self.server = Some(s);
                }
            }
            Dir::ToClient => self.client.handle_segment(now, repr, len),
        }
    }

    fn handle_timeout(&mut self) {
        let now = self.pipe.now();
        self.client.handle_timeout(now);
        if let Some(s) = self.server.as_mut() {
            s.handle_timeout(now);
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        [Some(&self.client), self.server.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(Connection::poll_timeout)
            .min()
    }
}

fn no_drop(_: u64, _: &Segment) -> bool {
    false
}

#[test]
fn test_handshake_then_transfer_completes() {
    let mut p = Pair::new(TcpConfig::default(), no_drop);
    p.client.write(100_000);
    p.client.close();
    p.run(Time::from_secs(30));
    let server = p.server.as_ref().expect("server accepted");
    assert_eq!(server.bytes_delivered(), 100_000);
    assert!(server.peer_closed());
    assert!(p.client.send_complete());
    assert_eq!(p.client.stats().segments_retransmitted, 0);
    assert_eq!(p.client.rtt().min_rtt(), Some(2 * (DELAY + SLOT)));
    let mut events = Vec::new();
    while let Some(e) = p.client.poll_event() {
        events.push(e);
    }
    assert_eq!(events, vec![TcpEvent::Connected, TcpEvent::SendClosed]);
}

#[test]
fn test_established_single_loss_is_repaired_by_fast_retransmit() {
    let mut p = Pair::new(TcpConfig::default(), |n, _| n == 20);
    p.client.write(200_000);
    p.run(Time::from_secs(30));
    let stats = *p.client.stats();
    assert_eq!(
        p.server.as_ref().map(|s| s.bytes_delivered()),
        Some(200_000)
    );
    assert_eq!(stats.fast_retransmits, 1);
    assert_eq!(stats.timeouts, 0);
    assert_eq!(stats.segments_retransmitted, 1);
}

#[test]
fn test_established_two_losses_in_window_use_partial_ack_not_rto() {
    // RFC 6582: NewReno recovers several losses from one window without a timeout.
    let mut p = Pair::new(TcpConfig::default(), |n, _| n == 30 || n == 33);
    p.client.write(300_000);
    p.run(Time::from_secs(30));
    let stats = *p.client.stats();
    assert_eq!(
        p.server.as_ref().map(|s| s.bytes_delivered()),
        Some(300_000)
    );
    assert_eq!(stats.fast_retransmits, 1, "one recovery episode");
    assert_eq!(stats.timeouts, 0, "partial ACK retransmits the second loss");
    assert_eq!(stats.segments_retransmitted, 2);
}

#[test]
fn test_established_lost_retransmission_times_out_and_backs_off() {
    // Drop the 20th data segment and its fast retransmission: only the RTO can repair it.
    let target = seq::to_wire(0xffff_ff00, 1 + 19 * 1460);
    let mut drops_left = 2;
    let mut p = Pair::new(TcpConfig::default(), move |_, seg| {
        let hit = seg.repr.seq == target && drops_left > 0;
        drops_left -= u32::from(hit);
        hit
    });
    p.client.write(200_000);
    p.run(Time::from_secs(60));
    let stats = *p.client.stats();
    assert_eq!(p.pipe.dropped(), 2);
    assert_eq!(stats.fast_retransmits, 1);
    assert_eq!(stats.timeouts, 1);
    assert_eq!(
        p.server.as_ref().map(|s| s.bytes_delivered()),
        Some(200_000)
    );
}

#[test]
fn test_rto_doubles_while_peer_is_unreachable() {
    let mut p = Pair::new(TcpConfig::default(), |n, _| n > 5);
    p.client.write(100_000);
    p.run(Time::from_secs(1));
    let first = p.client.poll_timeout().expect("timer armed");
    p.run(first);
    let second = p.client.poll_timeout().expect("timer re-armed");
    p.run(second);
    let third = p.client.poll_timeout().expect("timer re-armed");
    let gap1 = second - first;
    let gap2 = third - second;
    assert_eq!(gap2, gap1 * 2, "exponential backoff (RFC 6298 §5.5)");
    assert_eq!(p.client.stats().timeouts, 2);
}

#[test]
fn test_karn_no_sample_from_retransmitted_segment() {
    // Everything after the handshake is dropped once: the only acknowledgements are for
    // retransmissions, which must not update the RTT estimate.
    let mut seen = std::collections::HashSet::new();
    let mut p = Pair::new(TcpConfig::default(), move |_, seg| {
        seen.insert(seg.repr.seq)
    });
    p.client.write(1460);
    p.run(Time::from_secs(10));
    assert_eq!(p.server.as_ref().map(|s| s.bytes_delivered()), Some(1460));
    assert_eq!(
        p.client.rtt().samples(),
        1,
        "only the SYN round trip was sampled"
    );
}

#[test]
fn test_delayed_ack_halves_pure_acks() {
    let run = |delayed: Option<Duration>| {
        let config = TcpConfig {
            delayed_ack: delayed,
            ..TcpConfig::default()
        };
        let mut p = Pair::new(config, no_drop);
        p.client.write(146_000);
        p.run(Time::from_secs(30));
        p.server.as_ref().map(|s| s.stats().acks_sent).unwrap_or(0)
    };
    let every = run(None);
    let delayed = run(Some(Duration::from_millis(200)));
    assert!(every >= 100, "one ACK per segment: {every}");
    assert!(
        delayed <= every / 2 + 2,
        "delayed {delayed} vs every {every}"
    );
}

#[test]
fn test_extra_acks_are_sent_on_request() {
    let mut p = Pair::new(TcpConfig::default(), no_drop);
    p.client.write(1460);
    p.run(Time::from_secs(5));
    let before = p.server.as_ref().map(|s| s.stats().acks_sent).unwrap_or(0);
    if let Some(s) = p.server.as_mut() {
        s.request_extra_acks(3);
    }
    p.run(Time::from_secs(6));
    let after = p.server.as_ref().map(|s| s.stats().acks_sent).unwrap_or(0);
    assert_eq!(after - before, 3);
    // Nothing is outstanding, so by RFC 5681 §2 these are not duplicate ACKs for the sender.
    assert_eq!(p.client.stats().dup_acks_received, 0);
}

/// Regression (starvation after repeated timeouts): after a timeout every ACK covers a
/// retransmitted segment, so Karn's rule yields no RTT sample; the backed-off RTO must still
/// collapse once new data is acknowledged, or a flow waits 2, 4, 8, 16 s between segments.
#[test]
fn test_rto_backoff_cleared_when_retransmission_is_acked() {
    let mut first_seq = None;
    let mut drops = 0;
    let mut p = Pair::new(TcpConfig::default(), move |_, seg| {
        let seq = *first_seq.get_or_insert(seg.repr.seq);
        if seg.repr.seq == seq && drops < 3 {
            drops += 1;
            return true;
        }
        false
    });
    p.client.write(100_000);
    p.run(Time::from_secs(1));
    // Three timeouts in a row: the RTO is backed off to 8 times its base value.
    for _ in 0..3 {
        let fire = p.client.poll_timeout().expect("timer armed");
        p.run(fire);
    }
    assert_eq!(p.client.stats().timeouts, 3);
    let third = p.pipe.now();
    // The third retransmission gets through; its ACK (one round trip later) acknowledges new
    // data although no RTT sample may be taken from it.
    p.run(third + Duration::from_millis(150));
    assert!(p.client.rtt().samples() == 1, "Karn's rule still holds");
    let now = p.pipe.now();
    let next = p
        .client
        .poll_timeout()
        .expect("data outstanding, timer armed");
    assert!(
        next - now <= p.client.rtt().rto(),
        "timer {:?} after the ACK, base RTO {:?}: backoff not cleared",
        next - now,
        p.client.rtt().rto()
    );
}

/// Runs a 6-segment transfer with a 3-segment window whose first data segment is lost once;
/// returns (fast retransmits, timeouts).
fn first_segment_lost_with_window_of_three(limited_transmit: bool) -> (u64, u64) {
    let config = TcpConfig {
        initial_window: InitialWindow::Segments(3),
        limited_transmit,
        ..TcpConfig::default()
    };
    let mut p = Pair::new(config, |n, _| n == 1);
    p.client.write(6 * 1460);
    p.run(Time::from_secs(10));
    assert_eq!(
        p.server.as_ref().map(|s| s.bytes_delivered()),
        Some(6 * 1460)
    );
    let s = p.client.stats();
    (s.fast_retransmits, s.timeouts)
}

#[test]
fn test_window_of_three_loss_needs_timeout_without_limited_transmit() {
    // Two segments follow the lost one: two duplicate ACKs, no fast retransmit.
    assert_eq!(first_segment_lost_with_window_of_three(false), (0, 1));
}

#[test]
fn test_limited_transmit_fast_retransmits_with_window_of_three() {
    // RFC 3042: each of the two duplicate ACKs releases one new segment, whose ACKs are the
    // third and fourth duplicates.
    assert_eq!(first_segment_lost_with_window_of_three(true), (1, 0));
}

#[test]
fn test_iw10_sends_ten_segments_in_first_flight() {
    let config = TcpConfig {
        initial_window: InitialWindow::Iw10,
        ..TcpConfig::default()
    };
    let mut p = Pair::new(config, no_drop);
    p.run(Time::from_millis(150));
    p.client.write(100 * 1460);
    let now = p.pipe.now();
    let mut first_flight = 0;
    while p.client.poll_transmit(now).is_some() {
        first_flight += 1;
    }
    assert_eq!(first_flight, 10);
}
