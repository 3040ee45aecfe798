//! ADTCP end to end on our one TCP, through the tiny deterministic pipe of
//! [`crate::testing::pipe`]: interoperation with conventional peers in both directions
//! (papers/004 §4 "backward compatibility"), the option on the wire, and the disconnection
//! path (freeze, small periodic probes at the frozen RTO, restore, close).

use super::*;
use crate::cc::CongestionController;
use crate::tcp::{Connection, Segment, State, TcpConfig, TcpEvent, TcpRepr};
use crate::testing::pipe::{Dir, Endpoints, Pipe};
use crate::time::Time;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

const DELAY: Duration = Duration::from_millis(50);
const SLOT: Duration = Duration::from_millis(1);
const MSS: u32 = 1460;

/// Which end speaks ADTCP.
#[derive(Clone, Copy, Debug)]
struct Ends {
    adtcp_sender: bool,
    adtcp_receiver: bool,
}

/// A client (the data sender) and the server that accepts it, each with its own
/// configuration, and every segment sent recorded.
struct Pair {
    pipe: Pipe,
    client: Connection,
    server: Option<Connection>,
    server_config: TcpConfig,
    sent: Vec<(Time, Dir, Segment)>,
}

impl Pair {
    fn new(ends: Ends, drop: impl FnMut(u64, &Segment) -> bool + 'static) -> Pair {
        let client_config = TcpConfig {
            adtcp: ends.adtcp_sender,
            ..TcpConfig::default()
        };
        let cc: Box<dyn CongestionController> = if ends.adtcp_sender {
            AdtcpSender::for_tcp(&client_config, SenderConfig::default())
        } else {
            Connection::newreno(&client_config)
        };
        Pair {
            pipe: Pipe::new(DELAY, SLOT, drop),
            client: Connection::connect(client_config, 1000, 80, 0xffff_ff00, cc),
            server: None,
            server_config: TcpConfig {
                adtcp: ends.adtcp_receiver,
                ..TcpConfig::default()
            },
            sent: Vec::new(),
        }
    }

    fn data_segments(&self) -> impl Iterator<Item = &(Time, Dir, Segment)> {
        self.sent
            .iter()
            .filter(|(_, d, s)| *d == Dir::ToServer && s.payload_len > 0)
    }

    fn acks(&self) -> impl Iterator<Item = &TcpRepr> {
        self.sent
            .iter()
            .filter(|(_, d, s)| *d == Dir::ToClient && !s.repr.flags.syn)
            .map(|(_, _, s)| &s.repr)
    }

    fn delivered(&self) -> u64 {
        self.server.as_ref().map_or(0, Connection::bytes_delivered)
    }
}

impl Endpoints for Pair {
    fn pipe(&mut self) -> &mut Pipe {
        &mut self.pipe
    }

    fn pump(&mut self) {
        let now = self.pipe.now();
        while let Some(seg) = self.client.poll_transmit(now) {
            self.sent.push((now, Dir::ToServer, seg));
            self.pipe.send(Dir::ToServer, seg);
        }
        if let Some(server) = self.server.as_mut() {
            while let Some(seg) = server.poll_transmit(now) {
                self.sent.push((now, Dir::ToClient, seg));
                self.pipe.send(Dir::ToClient, seg);
            }
        }
    }

    fn receive(&mut self, dir: Dir, repr: &TcpRepr, len: u32) {
        let now = self.pipe.now();
        match (dir, self.server.as_mut()) {
            (Dir::ToServer, Some(s)) => {
                s.handle_segment(now, repr, len);
                let unread = s.bytes_unread();
                s.read(unread);
            }
            (Dir::ToServer, None) if repr.flags.syn => {
                let cc = Connection::newreno(&self.server_config);
                self.server = Some(Connection::accept(self.server_config.clone(), repr, 7, cc));
            }
            (Dir::ToServer, None) => {}
            (Dir::ToClient, _) => self.client.handle_segment(now, repr, len),
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

const PLAIN: Ends = Ends {
    adtcp_sender: false,
    adtcp_receiver: false,
};
const BOTH: Ends = Ends {
    adtcp_sender: true,
    adtcp_receiver: true,
};

/// Drops the 40th and 90th data segments.
fn two_losses(n: u64, _: &Segment) -> bool {
    n == 40 || n == 90
}

/// Runs a 400 kB transfer and returns the pair.
fn transfer(ends: Ends, drop: impl FnMut(u64, &Segment) -> bool + 'static) -> Pair {
    let mut p = Pair::new(ends, drop);
    p.client.write(400_000);
    p.run(Time::from_secs(60));
    p
}

#[test]
fn test_adtcp_sender_with_plain_receiver_is_newreno() {
    let adtcp = transfer(
        Ends {
            adtcp_sender: true,
            adtcp_receiver: false,
        },
        two_losses,
    );
    let plain = transfer(PLAIN, two_losses);
    assert_eq!(adtcp.delivered(), 400_000);
    assert_eq!(adtcp.client.cc().name(), "adtcp");
    // The sender stamps its data; the plain receiver reports nothing.
    assert!(
        adtcp
            .data_segments()
            .all(|(_, _, s)| s.repr.adtcp.is_some_and(|o| o.sent_us.is_some()))
    );
    assert!(adtcp.acks().all(|r| r.adtcp.is_none()));
    // Without reports it falls back to NewReno, segment for segment.
    assert_eq!(adtcp.client.stats(), plain.client.stats());
    assert_eq!(adtcp.client.cc().window(), plain.client.cc().window());
    assert_eq!(adtcp.client.cc().ssthresh(), plain.client.cc().ssthresh());
    assert_eq!(adtcp.pipe.now(), plain.pipe.now());
}

#[test]
fn test_plain_sender_with_adtcp_receiver_ignores_the_reports() {
    let ends = Ends {
        adtcp_sender: false,
        adtcp_receiver: true,
    };
    let mixed = transfer(ends, two_losses);
    let plain = transfer(PLAIN, two_losses);
    assert_eq!(mixed.delivered(), 400_000);
    assert!(
        mixed
            .data_segments()
            .all(|(_, _, s)| s.repr.adtcp.is_none())
    );
    // The receiver measures what it can without sending times (STT, PLR).
    let rx = mixed
        .server
        .as_ref()
        .and_then(Connection::adtcp_receiver)
        .expect("ADTCP receiver");
    assert!(rx.intervals() > 5);
    let last = rx.last().expect("an interval closed");
    assert_eq!(last.sample.idd_us, None);
    assert_eq!(last.levels.idd, rsd::Level::Unknown);
    // Without IDD the congestion rule cannot be evaluated, so the receiver never claims a
    // state: its ACKs carry the option with no report.
    assert_eq!(rx.report(), None);
    assert!(mixed.acks().all(|r| {
        r.adtcp
            .is_some_and(|o| o.report.is_none() && o.sent_us.is_none())
    }));
    // The conventional sender behaves exactly as with a conventional receiver.
    assert_eq!(mixed.client.stats(), plain.client.stats());
    assert_eq!(mixed.pipe.now(), plain.pipe.now());
}

#[test]
fn test_adtcp_both_ends_measure_report_and_complete() {
    let p = transfer(BOTH, two_losses);
    assert_eq!(p.delivered(), 400_000);
    let rx = p
        .server
        .as_ref()
        .and_then(Connection::adtcp_receiver)
        .expect("ADTCP receiver");
    assert!(rx.intervals() > 5, "{}", rx.intervals());
    assert!(rx.last().is_some_and(|id| id.sample.idd_us.is_some()));
    // Every ACK carries the option; once the histories are long enough, with a report.
    assert!(p.acks().all(|r| r.adtcp.is_some()));
    let first = p
        .acks()
        .position(|r| r.adtcp.is_some_and(|o| o.report.is_some()))
        .expect("a report was sent");
    assert!(first > 5, "no report before the histories are long enough");
    assert!(rx.report().is_some());
    // The interval is half the RTT the server measured in the handshake.
    let srtt = p
        .server
        .as_ref()
        .and_then(|s| s.rtt().srtt())
        .expect("srtt");
    assert_eq!(rx.interval(Some(srtt)), srtt / 2);
}

/// Drops every data segment while `outage` is set.
fn outage_rule(outage: &Rc<Cell<bool>>) -> impl FnMut(u64, &Segment) -> bool + 'static {
    let outage = Rc::clone(outage);
    move |_, _| outage.get()
}

/// A transfer interrupted by a forward-path outage from 1 s to `end`.
fn with_outage(ends: Ends, end: Time) -> Pair {
    let outage = Rc::new(Cell::new(false));
    let mut p = Pair::new(ends, outage_rule(&outage));
    p.client.write(2_000_000);
    p.run(Time::from_secs(1));
    outage.set(true);
    p.run(end);
    outage.set(false);
    p.run(Time::from_secs(120));
    p
}

#[test]
fn test_disconnection_freezes_probes_small_periodically_and_restores() {
    let outage_end = Time::from_secs(9);
    let p = with_outage(BOTH, outage_end);
    assert_eq!(p.delivered(), 2_000_000);
    // Probes during the outage: one byte each, periodic at the frozen RTO (papers/004 §2.1),
    // not backed off.
    let probes: Vec<Time> = p
        .data_segments()
        .filter(|(t, _, s)| s.payload_len == 1 && *t < outage_end)
        .map(|(t, _, _)| *t)
        .collect();
    assert!(probes.len() >= 4, "{probes:?}");
    let gaps: Vec<Duration> = probes.windows(2).map(|w| w[1] - w[0]).collect();
    for g in &gaps {
        assert_eq!(*g, gaps[0], "{gaps:?}");
    }
    assert!(
        gaps[0] >= Duration::from_secs(1),
        "RFC 6298's 1 s minimum RTO"
    );
    // Before the outage, segments were full-sized.
    assert!(
        p.data_segments()
            .filter(|(t, _, _)| *t < Time::from_secs(1))
            .all(|(_, _, s)| s.payload_len == MSS)
    );
    // After the first probe that got through, the frozen window lets a burst go at once.
    let first_after = p
        .data_segments()
        .find(|(t, _, s)| *t >= outage_end && s.payload_len == 1)
        .map(|(t, _, _)| *t)
        .expect("a probe after the outage");
    let reconnect = first_after + 2 * (DELAY + SLOT);
    let burst = p
        .data_segments()
        .filter(|(t, _, s)| *t == reconnect && s.payload_len > 1)
        .count();
    assert!(burst > 10, "{burst} segments sent at reconnection");
}

#[test]
fn test_disconnection_adtcp_recovers_faster_than_newreno() {
    let end = Time::from_secs(9);
    let adtcp = with_outage(BOTH, end);
    let plain = with_outage(PLAIN, end);
    assert_eq!(adtcp.delivered(), 2_000_000);
    assert_eq!(plain.delivered(), 2_000_000);
    let done = |p: &Pair| p.data_segments().map(|(t, _, _)| *t).max();
    assert!(
        done(&adtcp) < done(&plain),
        "adtcp {:?} newreno {:?}",
        done(&adtcp),
        done(&plain)
    );
}

#[test]
fn test_permanent_disconnection_closes_after_max_probe_failures() {
    let outage = Rc::new(Cell::new(false));
    let mut p = Pair::new(BOTH, outage_rule(&outage));
    p.client.write(2_000_000);
    p.run(Time::from_secs(1));
    outage.set(true);
    p.run(Time::from_secs(3600));
    assert_eq!(p.client.state(), State::Aborted);
    let max = SenderConfig::default().max_probe_failures;
    // One timeout enters probing, then `max` probes fail; the stream's own limit (15) is not
    // what closed it.
    assert_eq!(p.client.stats().timeouts, u64::from(max) + 1);
    let mut events = Vec::new();
    while let Some(e) = p.client.poll_event() {
        events.push(e);
    }
    assert_eq!(events.last(), Some(&TcpEvent::Aborted));
}
