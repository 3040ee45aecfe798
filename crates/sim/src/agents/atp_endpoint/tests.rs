//! ATP through core's endpoint in the simulator: random workloads from one or two clients to
//! one server over links that lose and reorder, with a side that closes or dies. Safety: every
//! message has exactly one outcome, nothing is delivered twice or with other bytes, `Delivered`
//! only for what the server delivered, nothing cancelled or expired was delivered. Liveness:
//! every connection ends, and a side that closes is seen closing by its peer (its CLOSE, or the
//! idle timeout when the CLOSE itself was lost).

use crate::agents::atp_endpoint::{self, AtpClientAgent, AtpServerAgent, Faults};
use crate::agents::nai_app::{MessageSpec, ScheduledApp};
use crate::link::{Bandwidth, LinkConfig, LossModel, QueueLimit, Reorder};
use crate::packet::Addr;
use crate::world::{AgentId, World};
use adaptnet_core::Time;
use adaptnet_core::atp::endpoint::EndpointConfig;
use adaptnet_core::nai::{MessageId, Outcome, Priority};
use adaptnet_core::session::{CloseReason, LivenessConfig};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;
use std::time::Duration;

const PORT: u16 = 4000;
/// When the clients' flows stop (and they close).
const STOP_MS: u64 = 8000;
/// The idle timeout.
const IDLE_MS: u64 = 3000;
/// How long after a side dies its last datagrams may still arrive: the path's one-way delay
/// (10 ms) and a reordering burst's extra delay (20 ms), rounded up. The survivor's idle
/// timeout runs from the last datagram it heard, not from the death.
const IN_FLIGHT_MS: u64 = 50;

/// Who ends the connections, and how.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The clients close gracefully when their flows stop.
    ClientsClose,
    /// The server closes every connection at this many milliseconds.
    ServerCloses(u64),
    /// The server dies at this many milliseconds.
    ServerDies(u64),
    /// The first client dies at this many milliseconds.
    ClientDies(u64),
}

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    messages: u64,
    loss: f64,
    reorder: bool,
    clients: u16,
    fault: Fault,
}

/// `n` messages over 3 s: 1 B to 30 KB, two levels; a third have a 100–800 ms timer
/// (discarded on expiry), the rest none.
fn workload(seed: u64, n: u64) -> ScheduledApp {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let specs = (0..n)
        .map(|i| MessageSpec {
            at: Time::from_millis(i * 3000 / n.max(1)),
            size_bytes: rng.random_range(1..=30_000),
            priority: Priority(rng.random_range(0..2u8)),
            timer: (rng.random_range(0..3u8) == 0)
                .then(|| Duration::from_millis(rng.random_range(100..800))),
        })
        .collect();
    ScheduledApp::new(specs)
}

fn config() -> EndpointConfig {
    let mut c = EndpointConfig::client();
    c.atp.nai.levels = 2;
    // Short enough that a dead peer is noticed within the run.
    c.liveness = LivenessConfig {
        idle_timeout: Duration::from_millis(IDLE_MS),
        keepalive: Duration::from_secs(1),
        ..LivenessConfig::default()
    };
    c
}

struct Built {
    world: World,
    clients: Vec<AgentId>,
    server: AgentId,
}

/// Two hosts, 2 Mbit/s each way, 10 ms one way, `loss` each way, optionally a 150 ms
/// reordering burst (+20 ms) every 700 ms; the clients on one host, the server on the other.
fn build(case: &Case) -> Built {
    let mut w = World::new(case.seed);
    let a = w.add_node("a").expect("node");
    let b = w.add_node("b").expect("node");
    let reorders = if case.reorder {
        (0..60)
            .map(|i| Reorder {
                start: Time::from_millis(200 + i * 700),
                duration: Duration::from_millis(150),
                extra_delay: Duration::from_millis(20),
            })
            .collect()
    } else {
        Vec::new()
    };
    let dir = LinkConfig {
        bandwidth: Bandwidth::bits_per_s(2e6),
        delay: Duration::from_millis(10),
        queue: QueueLimit::Packets(100),
        loss: if case.loss > 0.0 {
            LossModel::Bernoulli { p: case.loss }
        } else {
            LossModel::None
        },
        outages: Vec::new(),
        reorders,
    };
    w.add_link("l", a, b, dir.clone(), dir).expect("link");
    let stop = Time::from_millis(STOP_MS);
    let mut client_faults = Faults {
        close_linger: Duration::from_secs(2),
        ..Faults::default()
    };
    let mut server_faults = Faults::default();
    match case.fault {
        Fault::ClientsClose => {}
        Fault::ServerCloses(ms) => server_faults.close_at = Some(Time::from_millis(ms)),
        Fault::ServerDies(ms) => server_faults.die_at = Some(Time::from_millis(ms)),
        Fault::ClientDies(ms) => client_faults.die_at = Some(Time::from_millis(ms)),
    }
    let app = Box::new(workload(case.seed, case.messages));
    let (c, server) = atp_endpoint::install(
        &mut w,
        "c0",
        config(),
        a,
        b,
        PORT,
        app,
        Time::ZERO,
        stop,
        client_faults.clone(),
        server_faults,
    )
    .expect("install");
    let server_addr = Addr {
        node: b,
        port: PORT,
    };
    let mut clients = vec![c];
    for i in 1..case.clients {
        let app = Box::new(workload(case.seed ^ u64::from(i), case.messages));
        // Only the first client dies, when one does.
        let faults = Faults {
            die_at: None,
            ..client_faults.clone()
        };
        let c = atp_endpoint::add_client(
            &mut w,
            &format!("c{i}"),
            config(),
            a,
            PORT + i,
            server,
            server_addr,
            app,
            Time::from_millis(u64::from(i) * 37),
            stop,
            faults,
        )
        .expect("second client");
        clients.push(c);
    }
    w.check_routes().expect("routes");
    Built {
        world: w,
        clients,
        server,
    }
}

/// Runs `case` for 30 s of simulated time and checks every property; `Err` says which failed.
fn check(case: &Case) -> Result<(), String> {
    let mut b = build(case);
    b.world.run_until(Time::from_secs(30), &mut |_| {});
    let server = b.world.agent::<AtpServerAgent>(b.server).ok_or("server")?;
    let mut any_connected = false;
    for (i, &cid) in b.clients.iter().enumerate() {
        let client = b.world.agent::<AtpClientAgent>(cid).ok_or("client")?;
        let ledger = client.ledger();
        let dead_client = matches!(case.fault, Fault::ClientDies(_)) && i == 0;
        if client.connected_at().is_none() {
            // The handshake never completed (possible under loss, or the client died first):
            // nothing was sent, and a live client was told.
            let told = client.connect_failed_at().is_some() || dead_client;
            if !ledger.messages().is_empty() || !told {
                return Err(format!("client {i}: unconnected but not failed, or sent"));
            }
            continue;
        }
        any_connected = true;
        // A host that died has no application left to tell: its ledger stops at its death.
        let complete = ledger.pending() == 0 || dead_client;
        if ledger.unknown_outcomes > 0
            || ledger.messages().values().any(|r| r.outcomes_reported > 1)
            || !complete
        {
            return Err(format!("client {i}: not exactly one outcome each"));
        }
        let local = Addr {
            node: b.world.node_by_name("a").ok_or("a")?,
            port: PORT + u16::try_from(i).map_err(|e| e.to_string())?,
        };
        let conn = server
            .connection_from(local)
            .ok_or(format!("client {i}: the server never accepted it"))?;
        let sent = client.message_bytes().ok_or("bytes")?;
        let pc = conn.payload_check(sent);
        if !pc.all_match() || pc.unknown > 0 {
            return Err(format!("client {i}: payload check {pc:?}"));
        }
        let delivered: BTreeSet<MessageId> = conn.deliveries().iter().map(|d| d.id).collect();
        for (id, r) in ledger.messages() {
            match r.outcome {
                Some(Outcome::Delivered { .. }) if !delivered.contains(id) => {
                    return Err(format!("client {i}: {id:?} reported delivered, never was"));
                }
                Some(Outcome::Cancelled | Outcome::Expired { .. } | Outcome::Rejected(_))
                    if delivered.contains(id) =>
                {
                    return Err(format!("client {i}: {id:?} {:?} yet delivered", r.outcome));
                }
                _ => {}
            }
        }
        // Both ends ended, and a side that closed was seen closing.
        let (c_end, s_end) = (client.ended(), conn.ended);
        if !dead_client && c_end.is_none() {
            return Err(format!("client {i}: never ended"));
        }
        if !matches!(case.fault, Fault::ServerDies(_)) && s_end.is_none() {
            return Err(format!("client {i}: the server's side never ended"));
        }
        let seen = |e: Option<atp_endpoint::Ended>| {
            e.map(|e| e.reason)
                .is_some_and(|r| r == CloseReason::Application || r == CloseReason::Idle)
        };
        let peer_saw = match case.fault {
            Fault::ClientsClose => seen(s_end),
            Fault::ServerCloses(_) => seen(c_end),
            // The client times out, unless its own close (at its stop) came first.
            Fault::ServerDies(ms) if ms + IN_FLIGHT_MS + IDLE_MS < STOP_MS => {
                c_end.map(|e| e.reason) == Some(CloseReason::Idle)
            }
            Fault::ServerDies(_) => c_end.is_some(),
            Fault::ClientDies(_) if dead_client => {
                s_end.map(|e| e.reason) == Some(CloseReason::Idle)
            }
            Fault::ClientDies(_) => seen(s_end),
        };
        if !peer_saw {
            return Err(format!(
                "client {i}: the peer's end was not seen: {c_end:?} {s_end:?}"
            ));
        }
        // Without loss a CLOSE cannot go missing: the peer sees it, not a timeout.
        let closer_end = match case.fault {
            Fault::ClientsClose => s_end,
            Fault::ServerCloses(_) => c_end,
            _ => None,
        };
        if case.loss == 0.0 && closer_end.is_some_and(|e| e.reason != CloseReason::Application) {
            return Err(format!(
                "client {i}: CLOSE not seen without loss: {closer_end:?}"
            ));
        }
    }
    // The server admits a connection only with a retry token. (With none connected, a server
    // that died at 200 ms may never have heard an Initial that the lossy path dropped.)
    if any_connected && server.endpoint_stats().retries_sent == 0 {
        return Err("a connection was admitted without a retry token".into());
    }
    Ok(())
}

#[test]
fn one_client_lossless_then_graceful_close() {
    let case = Case {
        seed: 1,
        messages: 60,
        loss: 0.0,
        reorder: false,
        clients: 1,
        fault: Fault::ClientsClose,
    };
    check(&case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
    let mut b = build(&case);
    b.world.run_until(Time::from_secs(30), &mut |_| {});
    let client = b
        .world
        .agent::<AtpClientAgent>(b.clients[0])
        .expect("client");
    let server = b.world.agent::<AtpServerAgent>(b.server).expect("server");
    // HELLO, RETRY, HELLO with token, ACCEPT: two 20 ms round trips plus serialisation.
    let at = client.connected_at().expect("connected");
    assert!(
        at >= Time::from_millis(40) && at < Time::from_millis(60),
        "connected at {at:?}"
    );
    let conn = server.connections().next().expect("accepted");
    // Most of the workload arrives on a clean link (timers of 100 ms may expire some).
    assert!(conn.deliveries().len() >= 40, "{}", conn.deliveries().len());
    assert_eq!(conn.ended.map(|e| e.reason), Some(CloseReason::Application));
    assert_eq!(server.endpoint_stats().retries_sent, 1);
}

#[test]
fn two_clients_are_demultiplexed_under_loss_and_reordering() {
    let case = Case {
        seed: 5,
        messages: 40,
        loss: 0.05,
        reorder: true,
        clients: 2,
        fault: Fault::ClientsClose,
    };
    check(&case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
}

#[test]
fn a_dead_server_leaves_every_message_one_outcome() {
    let case = Case {
        seed: 3,
        messages: 60,
        loss: 0.0,
        reorder: false,
        clients: 1,
        fault: Fault::ServerDies(1500),
    };
    check(&case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
    let mut b = build(&case);
    b.world.run_until(Time::from_secs(30), &mut |_| {});
    let client = b
        .world
        .agent::<AtpClientAgent>(b.clients[0])
        .expect("client");
    let abandoned = client
        .ledger()
        .messages()
        .values()
        .filter(|r| r.outcome == Some(Outcome::Abandoned))
        .count();
    assert!(
        abandoned > 0,
        "messages live at the server's death are abandoned"
    );
}

#[test]
fn endpoint_runs_are_deterministic() {
    let case = Case {
        seed: 9,
        messages: 30,
        loss: 0.03,
        reorder: true,
        clients: 2,
        fault: Fault::ServerCloses(2000),
    };
    let outcomes = |case: &Case| {
        let mut b = build(case);
        b.world.run_until(Time::from_secs(30), &mut |_| {});
        let c = b
            .world
            .agent::<AtpClientAgent>(b.clients[0])
            .expect("client");
        let v: Vec<_> = c
            .ledger()
            .messages()
            .iter()
            .map(|(id, r)| (*id, r.outcome))
            .collect();
        (v, c.ended())
    };
    assert_eq!(outcomes(&case), outcomes(&case));
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        Just(Fault::ClientsClose),
        (200u64..6000).prop_map(Fault::ServerCloses),
        (200u64..6000).prop_map(Fault::ServerDies),
        (200u64..6000).prop_map(Fault::ClientDies),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_message_one_outcome_whatever_the_faults(
        seed in 0u64..1_000_000,
        messages in 1u64..50,
        loss in prop_oneof![Just(0.0), 0.0f64..0.12],
        reorder in any::<bool>(),
        clients in 1u16..3,
        fault in fault(),
    ) {
        let case = Case { seed, messages, loss, reorder, clients, fault };
        if let Err(e) = check(&case) {
            return Err(TestCaseError::fail(format!("{case:?}: {e}")));
        }
    }
}

/// A case the property test drew (in about 1 of 5,000): a message's timer sent a CANCEL, the
/// receiver discarded the partial message, then acknowledged its reordered last piece. The
/// sender once reported that message `Delivered` from those acknowledgements; it now waits
/// for the receiver's verdict. Kept as a fixed case because proptest's regression file stores
/// seeds of its own generator, not these parameters.
#[test]
fn a_cancel_racing_the_last_piece_is_not_reported_delivered() {
    let case = Case {
        seed: 406_226,
        messages: 8,
        loss: 0.035_223_238_853_184_013,
        reorder: true,
        clients: 1,
        fault: Fault::ClientsClose,
    };
    check(&case).unwrap_or_else(|e| panic!("{case:?}: {e}"));
}
