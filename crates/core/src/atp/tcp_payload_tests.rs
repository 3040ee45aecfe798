//! Messages carry their bytes end to end over ATP on one TCP connection (§4.1) and over the
//! NAI-TCP / NAI-MTCPk record framing (§5.2): core's TCP connections joined by a wire that
//! loses and reorders segments in both directions; the receiver reassembles each message from
//! the in-order stream TCP delivers and must get exactly the bytes sent — checked by hash —
//! once, with one outcome per message at the sender. (Core's TCP carries byte counts; the
//! stream's bytes are the ones the sender wrote, in order, as a socket would carry them.)

use crate::atp::tcp::{AtpTcpReceiver, AtpTcpSender, TcpFramingConfig};
use crate::nai::baseline::record::RecordReceiver;
use crate::nai::baseline::{BaselineConfig, BaselineKind, BaselineSender};
use crate::nai::{
    MessageId, NaiConfig, NaiEvent, OnExpiry, Outcome, Priority, QueueId, SendOptions,
};
use crate::spp::SppEvent;
use crate::tcp::{Connection, Segment, TcpConfig};
use crate::time::Time;
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

fn digest(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// One TCP connection through a lossy, reordering wire (10–40 ms one way, `loss` each way).
struct Link {
    rng: ChaCha8Rng,
    loss: f64,
    client: Connection,
    server: Option<Connection>,
    fwd: BTreeMap<(Time, u64), Segment>,
    rev: BTreeMap<(Time, u64), Segment>,
    seq: u64,
    /// Bytes written by the client, in stream order; the server reads them in order.
    stream: Vec<u8>,
    read: usize,
}

impl Link {
    fn new(seed: u64, loss: f64) -> Link {
        let cfg = TcpConfig::default();
        Link {
            rng: ChaCha8Rng::seed_from_u64(seed),
            loss,
            client: Connection::connect(cfg.clone(), 1, 2, 100, Connection::newreno(&cfg)),
            server: None,
            fwd: BTreeMap::new(),
            rev: BTreeMap::new(),
            seq: 0,
            stream: Vec::new(),
            read: 0,
        }
    }

    fn send(&mut self, now: Time, s: Segment, forward: bool) {
        if self.rng.random::<f64>() < self.loss {
            return;
        }
        let at = now + Duration::from_millis(self.rng.random_range(10..=40));
        self.seq += 1;
        let wire = if forward {
            &mut self.fwd
        } else {
            &mut self.rev
        };
        wire.insert((at, self.seq), s);
    }

    /// Moves segments and timers up to `now`; returns the stream bytes the server read.
    fn step(&mut self, now: Time) -> Vec<u8> {
        while let Some(s) = self.client.poll_transmit(now) {
            self.send(now, s, true);
        }
        while let Some(e) = self.fwd.first_entry().filter(|e| e.key().0 <= now) {
            let s = e.remove();
            match self.server.as_mut() {
                None if s.repr.flags.syn => {
                    let cfg = TcpConfig::default();
                    let srv =
                        Connection::accept(cfg.clone(), &s.repr, 7, Connection::newreno(&cfg));
                    self.server = Some(srv);
                }
                Some(srv) => srv.handle_segment(now, &s.repr, s.payload_len),
                None => {}
            }
        }
        let mut got = Vec::new();
        if let Some(srv) = self.server.as_mut() {
            srv.handle_timeout(now);
            let n = srv.bytes_unread();
            srv.read(n);
            let end = self.read + usize::try_from(n).unwrap_or(0);
            got.extend_from_slice(&self.stream[self.read..end]);
            self.read = end;
            let back: Vec<Segment> = std::iter::from_fn(|| srv.poll_transmit(now)).collect();
            for s in back {
                self.send(now, s, false);
            }
        }
        while let Some(e) = self.rev.first_entry().filter(|e| e.key().0 <= now) {
            let s = e.remove();
            self.client.handle_segment(now, &s.repr, s.payload_len);
        }
        self.client.handle_timeout(now);
        got
    }
}

fn random_messages(rng: &mut ChaCha8Rng, count: usize) -> Vec<(Vec<u8>, SendOptions)> {
    (0..count)
        .map(|_| {
            let len = rng.random_range(1..=20_000usize);
            let data: Vec<u8> = (0..len).map(|_| rng.random::<u8>()).collect();
            let opts = SendOptions {
                priority: Priority(rng.random_range(0..2u8)),
                timer: None,
                on_expiry: OnExpiry::Discard,
            };
            (data, opts)
        })
        .collect()
}

/// What the sender sent (by hash), what the receiver delivered (hash, times), the outcomes.
#[derive(Default)]
struct Tally {
    sent: BTreeMap<MessageId, u64>,
    delivered: BTreeMap<MessageId, (u64, usize)>,
    outcomes: BTreeMap<MessageId, Vec<Outcome>>,
}

impl Tally {
    fn deliver(&mut self, ev: SppEvent) {
        if let SppEvent::Delivered(d) = ev {
            let data = d.data.expect("bytes carried");
            assert_eq!(data.len() as u64, d.size_bytes);
            let e = self.delivered.entry(d.id).or_insert((digest(&data), 0));
            assert_eq!(
                e.0,
                digest(&data),
                "{:?}: bytes differ between deliveries",
                d.id
            );
            e.1 += 1;
        }
    }

    fn outcome(&mut self, ev: NaiEvent) {
        if let NaiEvent::Outcome { id, outcome } = ev {
            self.outcomes.entry(id).or_default().push(outcome);
        }
    }

    fn check(&self, count: usize) {
        assert_eq!(self.sent.len(), count);
        assert_eq!(self.outcomes.len(), count, "every message gets an outcome");
        for (id, hash) in &self.sent {
            let o = &self.outcomes[id];
            assert!(
                matches!(o[..], [Outcome::Delivered { .. }]),
                "{id:?}: {o:?}"
            );
            let (h, n) = self.delivered.get(id).expect("delivered at the receiver");
            assert_eq!((*h, *n), (*hash, 1), "{id:?}: exact bytes, once");
        }
    }
}

fn atp_over_tcp(seed: u64, loss: f64, count: usize) -> Tally {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut link = Link::new(seed, loss);
    let mut tx = AtpTcpSender::new(TcpFramingConfig::default(), NaiConfig::default());
    let mut rx = AtpTcpReceiver::new(TcpFramingConfig::default());
    tx.set_rate(Time::ZERO, 1e6);
    let mut t = Tally::default();
    for (data, opts) in random_messages(&mut rng, count) {
        let hash = digest(&data);
        let id = tx
            .submit_bytes(Time::ZERO, QueueId(0), data, opts)
            .expect("admitted");
        t.sent.insert(id, hash);
    }
    let mut frame = Vec::new();
    let mut now = Time::ZERO;
    while now < Time::from_secs(300) && t.outcomes.len() < count {
        now += Duration::from_millis(1);
        if link.client.is_established() {
            while let Some(seg) =
                tx.poll_transmit_bytes(now, link.client.bytes_unacked(), &mut frame)
            {
                assert_eq!(frame.len() as u64, u64::from(seg.bytes));
                link.stream.extend_from_slice(&frame);
                link.client.write(u64::from(seg.bytes));
            }
        }
        let got = link.step(now);
        rx.handle_bytes(now, &got).expect("a valid stream");
        while let Some(ev) = rx.poll_event() {
            t.deliver(ev);
        }
        tx.handle_acked(now, link.client.bytes_acked());
        tx.handle_timeout(now);
        while let Some(ev) = tx.poll_event() {
            t.outcome(ev);
        }
    }
    assert_eq!(tx.buffered_bytes(), 0, "bytes released with the outcomes");
    assert_eq!(rx.reassembly_bytes(), 0);
    t
}

fn baseline_over_tcp(seed: u64, loss: f64, count: usize, kind: BaselineKind) -> Tally {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tx = BaselineSender::new(BaselineConfig::new(kind, 2));
    let mut links: Vec<Link> = (0..tx.connections())
        .map(|i| Link::new(seed.wrapping_add(i as u64), loss))
        .collect();
    let mut rxs: Vec<RecordReceiver> = links.iter().map(|_| RecordReceiver::new()).collect();
    let mut t = Tally::default();
    for (data, opts) in random_messages(&mut rng, count) {
        let hash = digest(&data);
        let id = tx.submit_bytes(Time::ZERO, data, opts).expect("queued");
        t.sent.insert(id, hash);
    }
    let mut now = Time::ZERO;
    while now < Time::from_secs(300) && t.outcomes.len() < count {
        now += Duration::from_millis(1);
        for (i, (link, rx)) in links.iter_mut().zip(rxs.iter_mut()).enumerate() {
            if link.client.is_established() {
                let mut record = Vec::new();
                while tx
                    .poll_transmit_bytes(now, i, link.client.bytes_unacked(), &mut record)
                    .is_some()
                {
                    link.stream.extend_from_slice(&record);
                    link.client.write(record.len() as u64);
                }
            }
            // Records as they complete in the stream.
            rx.handle_bytes(now, &link.step(now))
                .expect("a valid stream");
            // The 1-byte acknowledgements travel back on the same connection.
            let acks = rx.take_acks();
            if acks > 0 {
                tx.handle_ack_bytes(now, i, acks);
            }
            while let Some(ev) = rx.poll_event() {
                t.deliver(ev);
            }
        }
        tx.handle_timeout(now);
        while let Some(ev) = tx.poll_event() {
            t.outcome(ev);
        }
    }
    assert_eq!(tx.buffered_bytes(), 0, "bytes released with the outcomes");
    t
}

#[test]
fn atp_over_tcp_bytes_arrive_intact_under_loss_and_reordering() {
    atp_over_tcp(11, 0.05, 60).check(60);
}

#[test]
fn baseline_bytes_arrive_intact_under_loss_and_reordering() {
    baseline_over_tcp(12, 0.05, 40, BaselineKind::NaiTcp).check(40);
    let mtcp = BaselineKind::Mtcp {
        high_connections: 2,
    };
    baseline_over_tcp(13, 0.05, 40, mtcp).check(40);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    /// Any seed and loss up to 10 %: exact bytes, once, one outcome each.
    #[test]
    fn atp_over_tcp_bytes_intact_for_any_seed(seed in any::<u64>(), loss in 0.0f64..0.1) {
        atp_over_tcp(seed, loss, 15).check(15);
    }
}
