//! State-machine tests of the stream, driven through a tiny deterministic two-endpoint pipe
//! (no simulator): fixed one-way delay, a caller-chosen drop rule, no bandwidth limit.

use super::*;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const DELAY: Duration = Duration::from_millis(50);
/// Serialisation time of one full segment (about 10 Mbit/s), so segments arrive spaced out.
const SLOT: Duration = Duration::from_millis(1);

/// Which direction a segment travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Dir {
    ToServer,
    ToClient,
}

/// A segment in flight: arrival time, tie-breaker, direction, payload length, header bytes.
type InFlight = Reverse<(Time, u64, Dir, u32, SegKey)>;
/// Decides whether the n-th data segment from the client is dropped.
type DropRule = Box<dyn FnMut(u64, &Segment) -> bool>;

struct Pair {
    now: Time,
    client: Connection,
    server: Option<Connection>,
    config: TcpConfig,
    wire: BinaryHeap<InFlight>,
    seq: u64,
    /// Data segments sent towards the server so far (1-based index of the next one).
    data_sent: u64,
    drop: DropRule,
    dropped: u64,
    /// When each direction's "link" is next free.
    busy_until: [Time; 2],
}

/// A `TcpRepr` cannot go in a heap (no `Ord`), so the pipe stores its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct SegKey([u8; 28], usize);

impl Pair {
    fn new(config: TcpConfig, drop: impl FnMut(u64, &Segment) -> bool + 'static) -> Pair {
        let client = Connection::connect(
            config.clone(),
            1000,
            80,
            0xffff_ff00,
            Connection::newreno(&config),
        );
        Pair {
            now: Time::ZERO,
            client,
            server: None,
            config,
            wire: BinaryHeap::new(),
            seq: 0,
            data_sent: 0,
            drop: Box::new(drop),
            dropped: 0,
            busy_until: [Time::ZERO; 2],
        }
    }

    fn pump(&mut self) {
        while let Some(seg) = self.client.poll_transmit(self.now) {
            if seg.payload_len > 0 {
                self.data_sent += 1;
                if (self.drop)(self.data_sent, &seg) {
                    self.dropped += 1;
                    continue;
                }
            }
            self.put(Dir::ToServer, seg);
        }
        if let Some(server) = self.server.as_mut() {
            let mut out = Vec::new();
            while let Some(seg) = server.poll_transmit(self.now) {
                out.push(seg);
            }
            for seg in out {
                self.put(Dir::ToClient, seg);
            }
        }
    }

    fn put(&mut self, dir: Dir, seg: Segment) {
        let mut buf = [0u8; 28];
        let n = seg.repr.emit(&mut buf).expect("header fits");
        self.seq += 1;
        let link = &mut self.busy_until[dir as usize];
        *link = (*link).max(self.now) + SLOT;
        let arrival = *link + DELAY;
        self.wire.push(Reverse((
            arrival,
            self.seq,
            dir,
            seg.payload_len,
            SegKey(buf, n),
        )));
    }

    fn next_wakeup(&self) -> Option<Time> {
        let mut t = self.wire.peek().map(|Reverse(e)| e.0);
        for c in [Some(&self.client), self.server.as_ref()]
            .into_iter()
            .flatten()
        {
            if let Some(d) = c.poll_timeout() {
                t = Some(t.map_or(d, |x| x.min(d)));
            }
        }
        t
    }

    /// Runs until `until` or until nothing is scheduled.
    fn run(&mut self, until: Time) {
        self.pump();
        while let Some(t) = self.next_wakeup() {
            if t > until {
                break;
            }
            self.now = self.now.max(t);
            if let Some(Reverse((at, _, _, _, _))) = self.wire.peek()
                && *at <= self.now
            {
                let Some(Reverse((_, _, dir, len, SegKey(buf, n)))) = self.wire.pop() else {
                    return;
                };
                let repr = TcpRepr::parse(&buf[..n]).expect("valid header");
                match dir {
                    Dir::ToServer => {
                        if self.server.is_none() && repr.flags.syn {
                            let cfg = self.config.clone();
                            let cc = Connection::newreno(&cfg);
                            self.server = Some(Connection::accept(cfg, &repr, 7, cc));
                        } else if let Some(s) = self.server.as_mut() {
                            s.handle_segment(self.now, &repr, len);
                            let unread = s.bytes_unread();
                            s.read(unread);
                        }
                    }
                    Dir::ToClient => self.client.handle_segment(self.now, &repr, len),
                }
            }
            self.client.handle_timeout(self.now);
            if let Some(s) = self.server.as_mut() {
                s.handle_timeout(self.now);
            }
            self.pump();
        }
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
    assert_eq!(p.dropped, 2);
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
