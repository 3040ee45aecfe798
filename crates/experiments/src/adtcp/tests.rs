//! Scoring against ground truth, parameter files and determinism of the ADTCP experiments.

use super::accuracy::{judge, score};
use super::*;
use adaptnet_core::adtcp::StateReport;
use adaptnet_core::adtcp::identify::Levels;
use adaptnet_core::adtcp::metrics::IntervalSample;
use adaptnet_core::adtcp::receiver::Identification;
use adaptnet_core::adtcp::rsd::Level;
use adaptnet_sim::link::DropReason;
use adaptnet_sim::manet::monitor::{Loss, TrueState};
use std::path::PathBuf;

fn id(idd: Level, stt: Level, plr: Level) -> Identification {
    Identification {
        sample: IntervalSample {
            start: Time::ZERO,
            length: Duration::from_millis(50),
            packets: 5,
            bytes: 5000,
            idd_us: Some(0.0),
            stt_bytes_per_s: 1e5,
            por: Some(0.0),
            plr: 0.0,
        },
        levels: Levels {
            idd,
            stt,
            por: Level::Medium,
            plr,
        },
        report: StateReport::NORMAL,
    }
}

fn loss(ms: u64, truth: TrueState) -> Loss {
    Loss {
        at: Time::from_millis(ms),
        flow: 0,
        reason: DropReason::RandomLoss,
        truth,
    }
}

#[test]
fn test_a_loss_is_judged_by_the_first_interval_closing_after_it() {
    use Level::{High, Low, Medium};
    let ids = vec![
        (Time::from_millis(100), id(High, Low, Medium)),
        (Time::from_millis(200), id(Medium, Medium, High)),
    ];
    assert!(judge(&ids, Time::from_millis(50)).is_some_and(|j| j.multi));
    assert!(judge(&ids, Time::from_millis(100)).is_some_and(|j| !j.multi && j.plr));
    assert!(judge(&ids, Time::from_millis(250)).is_none());
}

#[test]
fn test_score_counts_wrong_and_incompatible_calls() {
    use Level::{High, Low, Medium};
    let ids = vec![
        (Time::from_millis(100), id(High, Low, Medium)), // multi: congestion
        (Time::from_millis(200), id(High, Medium, High)), // IDD alone says congestion
        (Time::from_millis(300), id(Medium, Low, Medium)), // STT alone says congestion
        (Time::from_millis(400), id(Medium, Medium, Medium)), // nothing
    ];
    let losses = [
        loss(50, TrueState::Congestion),     // all right
        loss(150, TrueState::ChannelError),  // IDD wrong; PLR names it
        loss(250, TrueState::RouteChange),   // STT wrong
        loss(350, TrueState::Congestion),    // all wrong; multi incompatible
        loss(450, TrueState::Disconnection), // no interval after: unjudged
    ];
    let (all, by, unjudged) = score(&losses, &ids);
    assert_eq!(unjudged, 1);
    assert_eq!(all.losses, 4);
    assert_eq!((all.wrong_idd, all.wrong_stt, all.wrong_multi), (2, 2, 1));
    assert_eq!(all.incompatible_multi, 1);
    assert_eq!(all.state_named, 1);
    assert!((all.pct(all.wrong_multi) - 25.0).abs() < 1e-9);
    let cong = by[1];
    assert_eq!(
        (cong.losses, cong.wrong_multi, cong.incompatible_multi),
        (2, 1, 1)
    );
    assert_eq!(by[2].state_named, 1);
    assert_eq!(by[3].wrong_stt, 1);
}

fn opts() -> ExpOptions {
    ExpOptions {
        experiments_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments"),
        seeds: Vec::new(),
        quick: true,
    }
}

#[test]
fn test_the_parameter_files_load() {
    for f in [
        "accuracy.params",
        "throughput.params",
        "friendliness.params",
    ] {
        let p = Params::load(&opts(), f).expect(f);
        assert_eq!(p.path.hops, 4);
        assert!(p.path.channel_error.is_some());
        let cfg = p.path_config(7.0, false, true, true);
        assert_eq!(cfg.mobility.speed_m_per_s, 7.0);
        assert!(cfg.channel_error.is_none());
        assert_eq!(cfg.cbr.len(), p.competing.len());
    }
}

#[test]
fn test_a_bad_parameter_file_names_file_and_field() {
    let dir = std::env::temp_dir().join(format!("adtcp-params-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let f = dir.join("bad.params");
    let good = std::fs::read_to_string(opts().experiments_dir.join("adtcp/accuracy.params"))
        .expect("read");
    std::fs::write(&f, good.replace("runs_per_speed = 5", "runs_per_speed = 0")).expect("write");
    let err = Params::load_path(&f)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("bad.params") && err.contains("runs_per_speed"),
        "{err}"
    );
    std::fs::write(&f, good.replace("hops = 4", "hopz = 4")).expect("write");
    let err = Params::load_path(&f)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("hopz"), "{err}");
}

#[test]
fn test_protocols_see_the_same_path_and_runs_repeat() {
    let p = Params::load(&opts(), "throughput.params").expect("params");
    let cfg = p.path_config(20.0, true, false, true);
    let d = Duration::from_secs(30);
    let period = Duration::from_millis(10);
    let seed = run_seed(1, 20.0);
    let nr = run_path(&cfg, d, seed, &[Protocol::NewReno], period).expect("run");
    let ad = run_path(&cfg, d, seed, &[Protocol::Adtcp], period).expect("run");
    assert_eq!(nr.episodes, ad.episodes);
    assert!(nr.episodes.0 + nr.episodes.1 > 0);
    let again = run_path(&cfg, d, seed, &[Protocol::Adtcp], period).expect("run");
    assert_eq!(ad.flows[0].goodput_bps, again.flows[0].goodput_bps);
    assert!(ad.flows[0].goodput_bps > 0.0);
    assert!(ad.flows[0].policy.contains_key("disconnection"));
    assert!(nr.flows[0].policy.is_empty());
}

#[test]
fn test_cellular_adtcp_beats_newreno_under_random_loss_on_the_synthetic_trace() {
    use super::cellular::{CellularParams, build_traces, run_cells};
    let o = opts();
    let mut p = CellularParams::load_path(&o.experiments_dir.join("adtcp/cellular.params"))
        .unwrap_or_else(|e| panic!("{e}"));
    // The synthetic stand-in only (always present), 2 % random loss.
    p.traces.retain(|t| t.name() == "lte-synth");
    p.losses
        .retain(|l| l.name == "random 2%" || l.name == "none");
    assert_eq!((p.traces.len(), p.losses.len()), (1, 2));
    let root = o.experiments_dir.join("..");
    let (built, notes) = build_traces(&p.traces, &root, 30.0).unwrap_or_else(|e| panic!("{e}"));
    assert!(notes.is_empty() && built.len() == 1);
    let rows = run_cells(&p, &built, &[1, 2], Duration::from_secs(30), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let lossy = rows.iter().find(|r| r.loss == "random 2%").expect("row");
    let [nr, ad] = lossy.goodput_bps;
    assert!(ad >= nr, "ADTCP {ad} < NewReno {nr} under 2 % random loss");
    // Every loss there is channel error, and the breakdown accounts for them all.
    let b = lossy.breakdown;
    assert!(b.channel_losses > 50, "{b:?}");
    assert!(b.channel_called_congestion + b.channel_called_channel <= b.channel_losses);
    // Without added loss nothing is lost and the two are within 5 %.
    let clean = rows.iter().find(|r| r.loss == "none").expect("row");
    assert_eq!(clean.breakdown.channel_losses, 0);
    let [nr0, ad0] = clean.goodput_bps;
    assert!((ad0 / nr0 - 1.0).abs() < 0.05, "{nr0} vs {ad0}");
    // Deterministic per seed.
    let again = run_cells(&p, &built, &[1, 2], Duration::from_secs(30), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        again.iter().map(|r| r.goodput_bps).collect::<Vec<_>>(),
        rows.iter().map(|r| r.goodput_bps).collect::<Vec<_>>()
    );
}

#[test]
fn test_cellular_trace_paths_resolve_or_skip_with_a_note() {
    use super::cellular::resolve_trace_path;
    let dir = std::env::temp_dir().join("adaptnet-adtcp-cellular-resolve");
    let nested = dir.join("a/b");
    std::fs::create_dir_all(&nested).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("t.down"), "1\n2\n").unwrap_or_else(|e| panic!("{e}"));
    assert!(resolve_trace_path(&nested, "t.down").ends_with("t.down"));
    assert!(resolve_trace_path(&nested, "t.down").exists());
    let missing = resolve_trace_path(&nested, "no-such-trace.down");
    assert_eq!(missing, nested.join("no-such-trace.down"));
}
