//! The MANET path: the mobility mapping, the schedules it feeds the link model, the monitor's
//! ground truth, the ELFN notifications and determinism.

use super::agents::{ElfnSender, IdLogReceiver};
use super::mobility::{ChannelErrorConfig, EpisodeKind, MobilityConfig, MobilitySchedule};
use super::monitor::{Monitor, TrueState};
use super::*;
use crate::agent::Agent;
use crate::link::DropReason;

fn schedule(speed: f64, secs: u64, seed: u64) -> MobilitySchedule {
    let cfg = MobilityConfig {
        speed_m_per_s: speed,
        ..MobilityConfig::default()
    };
    MobilitySchedule::generate(&cfg, 4, Duration::from_secs(secs), seed).expect("valid")
}

#[test]
fn test_break_rate_follows_speed() {
    assert_eq!(schedule(0.0, 1000, 1).episodes().len(), 0);
    let cfg = MobilityConfig::default();
    assert!((cfg.break_rate_per_s(4) - 0.16).abs() < 1e-12);
    // Breaks come at rate λ between episodes: count ≈ T / (1/λ + mean episode length).
    let s10 = schedule(10.0, 20_000, 2);
    let mean_len: f64 = s10
        .episodes()
        .iter()
        .map(|e| (e.end() - e.outage.start).as_secs_f64())
        .sum::<f64>()
        / s10.episodes().len() as f64;
    let expected = 20_000.0 / (1.0 / 0.16 + mean_len);
    let n = s10.episodes().len() as f64;
    assert!((n - expected).abs() < 0.05 * expected, "{n} vs {expected}");
    let s20 = schedule(20.0, 20_000, 2);
    assert!(s20.episodes().len() as f64 > 1.6 * n);
    // Disconnections are 30 % of the breaks.
    let share = s10.count(EpisodeKind::Disconnection) as f64 / n;
    assert!((share - 0.3).abs() < 0.03, "{share}");
}

#[test]
fn test_episodes_are_sorted_non_overlapping_and_within_bounds() {
    let s = schedule(20.0, 5000, 3);
    let cfg = MobilityConfig::default();
    let mut last_end = Time::ZERO;
    for e in s.episodes() {
        assert!(e.outage.start >= last_end);
        last_end = e.end();
        let len = e.outage.duration.as_secs_f64();
        match e.kind {
            EpisodeKind::Disconnection => {
                assert!(e.reorder.is_none());
                assert!(
                    (cfg.outage_min_s..=cfg.outage_max_s).contains(&len),
                    "{len}"
                );
            }
            EpisodeKind::RouteChange => {
                let r = e.reorder.expect("route change reorders");
                assert_eq!(r.start, e.outage.start + e.outage.duration);
                assert!((0.02..=0.2).contains(&len), "{len}");
                assert!((0.02..=0.1).contains(&r.extra_delay.as_secs_f64()));
            }
        }
    }
    assert_eq!(s.outages().len(), s.episodes().len());
    assert_eq!(s.reorders().len(), s.count(EpisodeKind::RouteChange));
    assert_eq!(schedule(20.0, 5000, 3), s);
    assert_ne!(schedule(20.0, 5000, 4), s);
}

#[test]
fn test_channel_error_fades_start_more_often_with_speed() {
    let ce = ChannelErrorConfig::default();
    let still = ce.loss_model(0.0).expect("valid").mean_loss();
    let fast = ce.loss_model(20.0).expect("valid").mean_loss();
    assert!(still > 0.01 && fast > still + 0.003, "{still} {fast}");
    let bad = ChannelErrorConfig { rate: 1.5, ..ce };
    assert!(matches!(
        bad.loss_model(1.0),
        Err(ManetError::Param { field: "rate", .. })
    ));
}

#[test]
fn test_bad_parameters_are_named() {
    let cfg = ManetConfig {
        mobility: MobilityConfig {
            disconnection_probability: 2.0,
            ..MobilityConfig::default()
        },
        ..ManetConfig::default()
    };
    let err = ManetPath::build(&cfg, Duration::from_secs(1), 1).err();
    assert!(
        matches!(
            err,
            Some(ManetError::Param {
                field: "disconnection_probability",
                ..
            })
        ),
        "{err:?}"
    );
}

fn run(cfg: &ManetConfig, protocol: Protocol, secs: u64, seed: u64) -> (ManetPath, Monitor) {
    let mut path = ManetPath::build(cfg, Duration::from_secs(secs), seed).expect("valid");
    path.add_tcp("tcp", protocol, Time::ZERO).expect("flow");
    let m = Monitor::run(&mut path, Duration::from_millis(10), &mut |_| {});
    (path, m)
}

fn delivered(path: &ManetPath) -> u64 {
    let (_, rx) = path.world.flow_agents(path.tcp[0].flow).expect("flow");
    path.world
        .agent::<IdLogReceiver>(rx)
        .map_or(0, |r| r.delivered_bytes())
}

#[test]
fn test_monitor_ground_truth_matches_the_schedules() {
    let cfg = ManetConfig {
        mobility: MobilityConfig {
            speed_m_per_s: 20.0,
            ..MobilityConfig::default()
        },
        channel_error: Some(ChannelErrorConfig::default()),
        ..ManetConfig::default()
    };
    let (path, m) = run(&cfg, Protocol::NewRenoObserved, 60, 7);
    assert_eq!(m.moments().len(), 6000);
    assert!(!path.schedule.episodes().is_empty());
    for mo in m.moments() {
        let want = match path.schedule.episode_at(mo.at).map(|e| e.kind) {
            Some(EpisodeKind::Disconnection) => TrueState::Disconnection,
            Some(EpisodeKind::RouteChange) => TrueState::RouteChange,
            None if mo.max_queue_packets > 25 => TrueState::Congestion,
            None => TrueState::ChannelError,
        };
        assert_eq!(mo.state, want, "{mo:?}");
    }
    assert!(m.time_share(TrueState::Disconnection) > 0.0);
    let losses = m.losses();
    assert!(losses.iter().any(|l| l.truth == TrueState::ChannelError));
    assert!(losses.iter().any(|l| l.reason == DropReason::Outage));
    // Each loss is labelled by its own cause, not by the path's state around it.
    for l in losses {
        let kind = path.schedule.episode_at(l.at).map(|e| e.kind);
        let episode = match kind {
            Some(EpisodeKind::RouteChange) => TrueState::RouteChange,
            _ => TrueState::Disconnection,
        };
        match l.reason {
            DropReason::RandomLoss => assert_eq!(l.truth, TrueState::ChannelError, "{l:?}"),
            DropReason::Outage => {
                assert!(kind.is_some(), "outage loss outside any episode: {l:?}");
                assert_eq!(l.truth, episode, "{l:?}");
            }
            DropReason::QueueFull => assert!(
                l.truth == TrueState::Congestion || l.truth == episode,
                "{l:?}"
            ),
        }
    }
    // The receiver identified states all along.
    let (_, rx) = path.world.flow_agents(path.tcp[0].flow).expect("flow");
    let ids = path
        .world
        .agent::<IdLogReceiver>(rx)
        .map_or(0, |r| r.identifications().len());
    assert!(ids > 200, "{ids}");
}

#[test]
fn test_cbr_congests_the_shared_queue() {
    let cfg = ManetConfig {
        mobility: MobilityConfig {
            speed_m_per_s: 0.0,
            ..MobilityConfig::default()
        },
        cbr: vec![CbrFlow {
            start_s: 5.0,
            stop_s: 15.0,
            rate_bits_per_s: 1.1e6,
        }],
        ..ManetConfig::default()
    };
    let (_, m) = run(&cfg, Protocol::NewReno, 20, 1);
    let congested: Vec<_> = m
        .moments()
        .iter()
        .filter(|x| x.state == TrueState::Congestion)
        .collect();
    assert!(!congested.is_empty());
    assert!(congested.iter().all(|x| x.at.as_secs_f64() > 5.0));
    assert!(m.losses().iter().all(|l| l.truth == TrueState::Congestion));
    assert!(!m.losses().is_empty());
}

#[test]
fn test_elfn_sender_is_notified_at_each_disconnection() {
    let cfg = ManetConfig {
        mobility: MobilityConfig {
            speed_m_per_s: 20.0,
            disconnection_probability: 1.0,
            ..MobilityConfig::default()
        },
        ..ManetConfig::default()
    };
    let (path, _) = run(&cfg, Protocol::Elfn, 60, 5);
    let (tx, _) = path.world.flow_agents(path.tcp[0].flow).expect("flow");
    let elfn = path.world.agent::<ElfnSender>(tx).expect("elfn agent");
    let due = path
        .schedule
        .episodes()
        .iter()
        .filter(|e| e.outage.start.as_secs_f64() + 0.005 <= 60.0)
        .count() as u64;
    assert!(due > 3);
    assert_eq!(elfn.notices_delivered(), due);
    let counters = elfn
        .sender()
        .connection()
        .expect("connected")
        .cc()
        .policy_counters();
    assert!(counters.contains(&("notifications", due)), "{counters:?}");
    assert!(delivered(&path) > 0);
}

#[test]
fn test_same_seed_same_run() {
    let cfg = ManetConfig {
        channel_error: Some(ChannelErrorConfig::default()),
        ..ManetConfig::default()
    };
    let (a, ma) = run(&cfg, Protocol::Adtcp, 30, 9);
    let (b, mb) = run(&cfg, Protocol::Adtcp, 30, 9);
    assert_eq!(delivered(&a), delivered(&b));
    assert_eq!(ma.losses(), mb.losses());
    let (c, _) = run(&cfg, Protocol::Adtcp, 30, 10);
    assert_ne!(delivered(&a), delivered(&c));
}

/// A static path with on/off cross traffic into the shared queue and one NewReno flow.
fn cross_path(secs: u64) -> ManetConfig {
    ManetConfig {
        mobility: MobilityConfig {
            speed_m_per_s: 0.0,
            ..MobilityConfig::default()
        },
        cross: vec![CrossTraffic {
            start_s: 0.0,
            stop_s: secs as f64,
            peak_bits_per_s: 1.5e6,
            mean_on_s: 1.0,
            mean_off_s: 2.0,
        }],
        ..ManetConfig::default()
    }
}

#[test]
fn test_cross_traffic_builds_and_drains_the_queue() {
    let secs = 120;
    let cfg = cross_path(secs);
    let (path, m) = run(&cfg, Protocol::NewReno, secs, 3);
    // Its long-run load is peak × on / (on + off) = 0.5 Mbit/s, within 25 %.
    let cross = path
        .world
        // Cross flows are the world's first (added when the path is built).
        .flow_agents(crate::world::FlowId(0))
        .and_then(|(tx, _)| path.world.agent::<cross::OnOffSender>(tx))
        .expect("cross agent");
    let sent: f64 = cross
        .counters()
        .iter()
        .find(|(k, _)| *k == "datagrams_sent")
        .map_or(0.0, |(_, v)| *v);
    let mean_bps = sent * 1000.0 * 8.0 / secs as f64;
    assert!((mean_bps / 0.5e6 - 1.0).abs() < 0.25, "{mean_bps}");
    // Congestion comes and goes: episodes, not a queue pinned full.
    let share = m.time_share(TrueState::Congestion);
    assert!(share > 0.05 && share < 0.8, "congested {share}");
    let starts = m
        .moments()
        .windows(2)
        .filter(|w| w[0].state != TrueState::Congestion && w[1].state == TrueState::Congestion)
        .count();
    assert!(starts >= 10, "{starts} congestion episodes");
    // Queue overflows happen, and every TCP loss on a static loss-free path is congestion.
    assert!(!m.losses().is_empty());
    assert!(m.losses().iter().all(|l| l.truth == TrueState::Congestion));
}

#[test]
fn test_rsd_params_reach_the_receiver_and_bad_ones_are_named() {
    let mut cfg = ManetConfig {
        rsd: Some(RsdParams {
            history: 25.0,
            high_above: 0.8,
            low_below: 0.2,
        }),
        ..ManetConfig::default()
    };
    let (path, _) = run(&cfg, Protocol::NewRenoObserved, 5, 1);
    let (_, rx) = path.world.flow_agents(path.tcp[0].flow).expect("flow");
    let rsd = path
        .world
        .agent::<IdLogReceiver>(rx)
        .and_then(|r| r.receiver().connection())
        .and_then(|c| c.adtcp_receiver())
        .map(|r| r.config().idd)
        .expect("adtcp receiver");
    assert_eq!(
        (rsd.history, rsd.high_above, rsd.low_below),
        (25.0, 0.8, 0.2)
    );
    cfg.rsd = Some(RsdParams {
        history: 25.0,
        high_above: 0.2,
        low_below: 0.8,
    });
    let err = ManetPath::build(&cfg, Duration::from_secs(5), 1).err();
    assert!(
        matches!(err, Some(ManetError::Param { field: "rsd", .. })),
        "{err:?}"
    );
}

#[test]
fn test_contention_varies_the_service_rate_around_the_hop_rate() {
    use super::contention::ContentionParams;
    let c = ContentionParams {
        slot_ms: 10.0,
        spread: 0.5,
    };
    let crate::link::Bandwidth::Piecewise(trace) = c.bandwidth(1e6, Duration::from_secs(20), 4)
    else {
        panic!("a piecewise rate");
    };
    assert_eq!(trace.steps.len(), 2000);
    let rates: Vec<f64> = trace.steps.iter().map(|s| s.1).collect();
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    assert!((mean / 125_000.0 - 1.0).abs() < 0.05, "{mean}");
    assert!(rates.iter().all(|&r| (62_500.0..=187_500.0).contains(&r)));
    assert!(rates.iter().any(|&r| r < 80_000.0) && rates.iter().any(|&r| r > 170_000.0));
    // On a path: it runs, and a bad spread is named.
    let mut cfg = ManetConfig {
        contention: Some(c),
        ..ManetConfig::default()
    };
    let (path, _) = run(&cfg, Protocol::NewReno, 10, 1);
    assert!(delivered(&path) > 0);
    cfg.contention = Some(ContentionParams {
        slot_ms: 10.0,
        spread: 1.5,
    });
    let err = ManetPath::build(&cfg, Duration::from_secs(5), 1).err();
    assert!(
        matches!(
            err,
            Some(ManetError::Param {
                field: "contention.spread",
                ..
            })
        ),
        "{err:?}"
    );
}
