//! Behaviour of the link model in isolation.

use super::*;
use crate::trace::MahimahiTrace;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pkt {
    id: u32,
    len: u32,
}

impl WireSize for Pkt {
    fn wire_len(&self) -> u32 {
        self.len
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// (arrival time, id) of delivered packets.
type Arrivals = Vec<(Time, u32)>;
/// (id, reason) of dropped packets.
type Drops = Vec<(u32, DropReason)>;

/// Drives the link until nothing is pending.
fn drain(link: &mut Link<Pkt>) -> (Arrivals, Drops) {
    let mut got = Vec::new();
    let mut lost = Vec::new();
    while let Some(t) = link.poll_timeout() {
        link.handle_timeout(t);
        while let Some(p) = link.poll_delivered(t) {
            got.push((t, p.id));
        }
        while let Some((p, why)) = link.poll_dropped() {
            lost.push((p.id, why));
        }
    }
    (got, lost)
}

fn offer(link: &mut Link<Pkt>, now: Time, ids: std::ops::Range<u32>, len: u32) -> Vec<u32> {
    let mut refused = Vec::new();
    for id in ids {
        if let Err((p, DropReason::QueueFull)) = link.enqueue(now, Pkt { id, len }) {
            refused.push(p.id);
        }
    }
    refused
}

#[test]
fn constant_rate_serialises_then_propagates() {
    // 1 Mbit/s: a 1250-byte packet takes 10 ms; 10 ms propagation.
    let mut link = Link::new(LinkConfig::constant(1e6, ms(10), 100), 1);
    assert!(offer(&mut link, Time::ZERO, 0..5, 1250).is_empty());
    let (got, lost) = drain(&mut link);
    assert!(lost.is_empty());
    let expect: Vec<(Time, u32)> = (0..5)
        .map(|i| (Time::from_millis(10 * (u64::from(i) + 1) + 10), i))
        .collect();
    assert_eq!(got, expect);
    assert_eq!(link.stats().delivered_bytes, 5 * 1250);
}

#[test]
fn drop_tail_in_packets_excludes_the_packet_in_service() {
    let mut link = Link::new(LinkConfig::constant(1e6, ms(1), 5), 1);
    let refused = offer(&mut link, Time::ZERO, 0..20, 1000);
    assert_eq!(refused, (6..20).collect::<Vec<_>>());
    assert_eq!(link.queue_packets(Time::ZERO), 5);
    assert_eq!(link.stats().dropped_queue, 14);
    assert_eq!(link.stats().max_queue_packets, 5);
}

#[test]
fn drop_tail_in_bytes() {
    let mut cfg = LinkConfig::constant(1e6, ms(1), 0);
    cfg.queue = QueueLimit::Bytes(2500);
    let mut link = Link::new(cfg, 1);
    // One in service, then 1000 + 1000 fit, a third 1000 would make 3000 > 2500.
    let refused = offer(&mut link, Time::ZERO, 0..5, 1000);
    assert_eq!(refused, vec![3, 4]);
    assert_eq!(link.queue_bytes(Time::ZERO), 2000);
}

#[test]
fn mahimahi_constant_trace_delivers_one_packet_per_opportunity() {
    let mut cfg = LinkConfig::constant(0.0, ms(0), 10_000);
    cfg.bandwidth = Bandwidth::Mahimahi(MahimahiTrace::constant(1_500_000.0));
    let mut link = Link::new(cfg, 1);
    offer(&mut link, Time::ZERO, 0..3000, 1500);
    let (got, _) = drain(&mut link);
    assert_eq!(got.len(), 3000);
    // Opportunities at 1, 2, 3, … ms; the trace wraps after 1 s.
    assert_eq!(got[0].0, Time::from_millis(1));
    assert_eq!(got[999].0, Time::from_millis(1000));
    assert_eq!(got[2999].0, Time::from_millis(3000));
}

#[test]
fn mahimahi_large_packet_spans_opportunities_and_small_ones_share() {
    let trace = MahimahiTrace::parse("10\n20\n30\n40\n", "t").expect("valid");
    let mut cfg = LinkConfig::constant(0.0, ms(0), 100);
    cfg.bandwidth = Bandwidth::Mahimahi(trace);
    let mut link = Link::new(cfg, 1);
    link.enqueue(Time::ZERO, Pkt { id: 0, len: 2000 })
        .expect("queued");
    link.enqueue(Time::ZERO, Pkt { id: 1, len: 500 })
        .expect("queued");
    link.enqueue(Time::ZERO, Pkt { id: 2, len: 500 })
        .expect("queued");
    let (got, _) = drain(&mut link);
    // 2000 bytes need the 10 ms and 20 ms opportunities; the 1000 left at 20 ms carry both
    // small packets.
    assert_eq!(
        got,
        vec![
            (Time::from_millis(20), 0),
            (Time::from_millis(20), 1),
            (Time::from_millis(20), 2)
        ]
    );
}

#[test]
fn mahimahi_unused_opportunities_are_lost() {
    let trace = MahimahiTrace::parse("10\n20\n30\n40\n", "t").expect("valid");
    let mut cfg = LinkConfig::constant(0.0, ms(0), 100);
    cfg.bandwidth = Bandwidth::Mahimahi(trace);
    let mut link = Link::new(cfg, 1);
    // Arrives after the 10 and 20 ms opportunities passed unused.
    link.enqueue(Time::from_millis(25), Pkt { id: 0, len: 1500 })
        .expect("queued");
    let (got, _) = drain(&mut link);
    assert_eq!(got, vec![(Time::from_millis(30), 0)]);
}

#[test]
fn outage_loses_packets_in_flight_and_holds_the_queue() {
    let mut cfg = LinkConfig::constant(1e6, ms(50), 100);
    cfg.outages = vec![Outage {
        start: Time::from_millis(35),
        duration: ms(100),
    }];
    let mut link = Link::new(cfg, 1);
    offer(&mut link, Time::ZERO, 0..6, 1250);
    let (got, lost) = drain(&mut link);
    // Packets 0-2 left the transmitter at 10, 20, 30 ms and were propagating at 35 ms;
    // packet 3 was being transmitted. All four are lost.
    assert_eq!(
        lost,
        vec![
            (0, DropReason::Outage),
            (1, DropReason::Outage),
            (2, DropReason::Outage),
            (3, DropReason::Outage)
        ]
    );
    // Packets 4 and 5 wait out the outage (ends at 135 ms), then go out normally.
    assert_eq!(
        got,
        vec![(Time::from_millis(195), 4), (Time::from_millis(205), 5)]
    );
}

#[test]
fn outage_while_idle_delays_new_packets_until_it_ends() {
    let mut cfg = LinkConfig::constant(1e6, ms(5), 100);
    cfg.outages = vec![Outage {
        start: Time::from_millis(10),
        duration: ms(100),
    }];
    let mut link = Link::new(cfg, 1);
    offer(&mut link, Time::from_millis(50), 0..1, 1250);
    let (got, lost) = drain(&mut link);
    assert!(lost.is_empty());
    assert_eq!(got, vec![(Time::from_millis(125), 0)]);
    assert!(link.is_down(Time::from_millis(109)));
    assert!(!link.is_down(Time::from_millis(110)));
}

#[test]
fn reorder_burst_lets_later_packets_overtake() {
    let mut cfg = LinkConfig::constant(1e6, ms(10), 100);
    cfg.reorders = vec![Reorder {
        start: Time::from_millis(15),
        duration: ms(20),
        extra_delay: ms(25),
    }];
    let mut link = Link::new(cfg, 1);
    offer(&mut link, Time::ZERO, 0..6, 1250);
    let (got, lost) = drain(&mut link);
    assert!(lost.is_empty());
    let order: Vec<u32> = got.iter().map(|&(_, id)| id).collect();
    // Departures at 10, 20, 30, 40, 50, 60 ms; those at 20 and 30 ms take 25 ms longer
    // (arriving at 55 and 65 ms) and are overtaken by packets 3 and 4.
    assert_eq!(order, vec![0, 3, 1, 4, 2, 5]);
    assert_eq!(got[2], (Time::from_millis(55), 1));
}

#[test]
fn random_loss_is_counted_and_seeded() {
    let run = |seed| {
        let mut cfg = LinkConfig::constant(1e9, ms(1), 100_000);
        cfg.loss = LossModel::Bernoulli { p: 0.1 };
        let mut link = Link::new(cfg, seed);
        offer(&mut link, Time::ZERO, 0..10_000, 100);
        let (got, lost) = drain(&mut link);
        assert_eq!(got.len() + lost.len(), 10_000);
        lost
    };
    let a = run(3);
    assert!((900..1100).contains(&a.len()), "{}", a.len());
    assert_eq!(a, run(3), "same seed, same losses");
    assert_ne!(a, run(4));
}
