//! Messages carry their bytes through the simulator on every NAI path — ATP over SPP, ATP over
//! TCP, NAI-TCP and NAI-MTCP2 — over a link that loses and reorders packets in both
//! directions: every delivered message has exactly the bytes sent (by SHA-256), once; every
//! message has its one outcome; and carrying bytes changes no decision (the same run with
//! sizes only has the same ledger).

use super::atp::{self, AtpAgent, AtpSink, RateFeed};
use super::atp_tcp::{self, AtpTcpAgent, AtpTcpSink};
use super::message_bytes::{MessageData, PayloadCheck};
use super::nai_app::{Ledger, MessageSpec, ScheduledApp};
use super::nai_tcp::{self, NaiTcpAgent, NaiTcpSink};
use crate::link::{Bandwidth, LinkConfig, LossModel, QueueLimit, Reorder};
use crate::world::{LinkId, World};
use adaptnet_core::Time;
use adaptnet_core::atp::{AtpConfig, EstimatorConfig};
use adaptnet_core::nai::baseline::BaselineKind;
use adaptnet_core::nai::{MessageId, NaiConfig, Outcome, Priority};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use std::time::Duration;

const SEED: u64 = 7;
const MESSAGES: u64 = 60;
const PORT: u16 = 4000;

/// 60 messages over 4.8 s: 1 B to 20 KB, two priority levels; every fifth has a 150 ms
/// timer (some of those cannot make it), the rest none.
fn workload() -> ScheduledApp {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let specs = (0..MESSAGES)
        .map(|i| MessageSpec {
            at: Time::from_millis(i * 80),
            size_bytes: rng.random_range(1..=20_000),
            priority: Priority(rng.random_range(0..2u8)),
            timer: (i % 5 == 0).then(|| Duration::from_millis(150)),
        })
        .collect();
    ScheduledApp::new(specs)
}

/// Two hosts joined by 2 Mbit/s each way, 10 ms one way, 3 % random loss each way, and a
/// 200 ms reordering burst (+25 ms) every second in both directions.
fn testbed() -> (World, LinkId, LinkId) {
    let mut w = World::new(SEED);
    let a = w.add_node("a").expect("node");
    let b = w.add_node("b").expect("node");
    let reorders: Vec<Reorder> = (0..30)
        .map(|i| Reorder {
            start: Time::from_millis(300 + i * 1000),
            duration: Duration::from_millis(200),
            extra_delay: Duration::from_millis(25),
        })
        .collect();
    let dir = LinkConfig {
        bandwidth: Bandwidth::bits_per_s(2e6),
        delay: Duration::from_millis(10),
        queue: QueueLimit::Packets(100),
        loss: LossModel::Bernoulli { p: 0.03 },
        outages: Vec::new(),
        reorders,
    };
    let (ab, ba) = w.add_link("l", a, b, dir.clone(), dir).expect("link");
    (w, ab, ba)
}

/// What one run showed.
struct Seen {
    ledger: Ledger,
    /// `None` with sizes only.
    check: Option<PayloadCheck>,
    delivered: Vec<MessageId>,
    /// Packets that should have carried bytes and did not (either end), and stream errors.
    faults: u64,
    /// Arrivals out of order at the receiver (reordered datagrams, or TCP data beyond a hole).
    out_of_order: u64,
    /// Random losses in each direction.
    lost: (u64, u64),
}

enum Path {
    AtpSpp,
    AtpTcp,
    Baseline(BaselineKind),
}

fn run(path: &Path, data: MessageData) -> Seen {
    let (mut w, ab, ba) = testbed();
    let (a, b) = (
        w.node_by_name("a").expect("a"),
        w.node_by_name("b").expect("b"),
    );
    let app = Box::new(workload());
    let (start, stop) = (Time::ZERO, Time::from_secs(30));
    let nai = NaiConfig {
        levels: 2,
        ..NaiConfig::default()
    };
    let (s, r) = match path {
        Path::AtpSpp => {
            let config = AtpConfig {
                nai,
                ..AtpConfig::default()
            };
            let feed = RateFeed::Estimated;
            atp::install(
                &mut w, "f", config, feed, a, b, PORT, app, start, stop, data,
            )
        }
        Path::AtpTcp => {
            let est = EstimatorConfig::default();
            let feed = RateFeed::Estimated;
            atp_tcp::install(
                &mut w, "f", nai, est, feed, a, b, PORT, app, start, stop, data,
            )
        }
        Path::Baseline(kind) => {
            nai_tcp::install(&mut w, "f", *kind, 2, a, b, PORT, app, start, stop, data)
        }
    }
    .expect("install");
    w.check_routes().expect("routes");
    w.run_until(Time::from_secs(30), &mut |_| {});
    let now = w.now();
    if let Some(n) = w.agent_mut::<NaiTcpAgent>(s) {
        assert_eq!(n.finish_all(now), 0, "every message settled within the run");
    }
    let lost = (
        w.link(ab).stats().dropped_random,
        w.link(ba).stats().dropped_random,
    );
    // What the sender and the receiver of `$tx`/`$rx` types saw; `$faults` and `$ooo` read
    // them (as `tx`, `rx`).
    macro_rules! seen {
        ($tx:ty, $rx:ty, |$t:ident, $r:ident| $faults:expr, $ooo:expr) => {{
            let $t = w.agent::<$tx>(s).expect("sender");
            let $r = w.agent::<$rx>(r).expect("receiver");
            Seen {
                ledger: $t.ledger().clone(),
                check: $t.message_bytes().map(|m| $r.payload_check(m)),
                delivered: $r.deliveries().iter().map(|d| d.id).collect(),
                faults: $faults,
                out_of_order: $ooo,
                lost,
            }
        }};
    }
    match path {
        Path::AtpSpp => seen!(AtpAgent, AtpSink, |tx, rx| 0, rx.reordered_datagrams()),
        Path::AtpTcp => seen!(
            AtpTcpAgent,
            AtpTcpSink,
            |tx, rx| tx.conns().unmaterialised
                + rx.conns().missing_payload
                + rx.malformed_segments(),
            rx.conns().out_of_order
        ),
        Path::Baseline(_) => seen!(
            NaiTcpAgent,
            NaiTcpSink,
            |tx, rx| tx.conns().unmaterialised
                + rx.conns().missing_payload
                + rx.malformed_records(),
            rx.conns().out_of_order
        ),
    }
}

/// Runs `path` with bytes and with sizes only, and checks everything the module docs promise.
fn check(path: Path) {
    let seen = run(&path, MessageData::Bytes);
    let c = seen.check.expect("bytes carried");
    assert!(
        c.all_match(),
        "every delivery once, with the bytes sent: {c:?}"
    );
    assert_eq!(
        seen.faults, 0,
        "no packet without its bytes, no stream error"
    );
    assert!(
        seen.lost.0 > 0 && seen.lost.1 > 0,
        "losses both ways: {:?}",
        seen.lost
    );
    assert!(seen.out_of_order > 0, "arrivals out of order");
    // Every message has its one outcome; the delivered ones are exactly those the receiver
    // got (MTCP may also deliver a message whose timer expired after it was fully written:
    // its late acknowledgement is ignored, §5.2).
    let l = &seen.ledger;
    assert_eq!(l.messages().len() as u64, MESSAGES);
    assert!(l.each_has_one_outcome() && l.pending() == 0);
    let acked: BTreeSet<MessageId> = l
        .messages()
        .iter()
        .filter(|(_, m)| matches!(m.outcome, Some(Outcome::Delivered { .. })))
        .map(|(id, _)| *id)
        .collect();
    let got: BTreeSet<MessageId> = seen.delivered.iter().copied().collect();
    assert!(
        acked.is_subset(&got),
        "every Delivered outcome was delivered"
    );
    assert_eq!(c.matched as usize, got.len());
    assert!(
        acked.len() >= 30,
        "most messages delivered: {}",
        acked.len()
    );
    // Carrying bytes changed no decision.
    let sizes = run(&path, MessageData::Sizes);
    assert!(sizes.check.is_none());
    assert_eq!(
        sizes.ledger.messages(),
        l.messages(),
        "same outcomes, same times"
    );
    assert_eq!(sizes.delivered, seen.delivered);
}

#[test]
fn atp_over_spp_carries_every_message_intact_under_loss_and_reordering() {
    check(Path::AtpSpp);
}

#[test]
fn atp_over_tcp_carries_every_message_intact_under_loss_and_reordering() {
    check(Path::AtpTcp);
}

#[test]
fn nai_tcp_carries_every_message_intact_under_loss_and_reordering() {
    check(Path::Baseline(BaselineKind::NaiTcp));
}

#[test]
fn nai_mtcp2_carries_every_message_intact_under_loss_and_reordering() {
    check(Path::Baseline(BaselineKind::Mtcp {
        high_connections: 2,
    }));
}
