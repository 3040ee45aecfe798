//! Scoring against ground truth, parameter files and determinism of the ADTCP experiments.

use super::accuracy::{Spreads, judge, judge_at_detection, score};
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
    let (all, by, unjudged) = score(&losses, &ids, None);
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
    assert_eq!(all.congestion_losses, 2);
    // The missed congestion loss was reported "normal": the sender still halves on it.
    assert_eq!(all.incompatible_acted, 0);
    let sp = Spreads::of(&[all]);
    assert!((sp.missed.mean - 50.0).abs() < 1e-9);
}

#[test]
fn test_a_loss_is_judged_by_the_report_in_force_when_the_receiver_sees_it() {
    use Level::{High, Low, Medium};
    let ids = vec![
        (Time::from_millis(100), id(High, Low, Medium)),
        (Time::from_millis(200), id(Medium, Medium, High)),
        (Time::from_millis(300), id(Medium, Medium, Medium)),
    ];
    let holes = [Time::from_millis(150), Time::from_millis(260)];
    // Lost at 120 ms, seen at 150 ms: the report of the interval closed at 100 ms.
    assert!(judge_at_detection(&ids, &holes, Time::from_millis(120)).is_some_and(|j| j.multi));
    // Lost at 210 ms, seen at 260 ms: the interval closed at 200 ms (PLR high).
    let j = judge_at_detection(&ids, &holes, Time::from_millis(210));
    assert!(j.is_some_and(|j| !j.multi && j.plr), "{j:?}");
    // Never seen: not judged; seen before any interval closed: not judged.
    assert!(judge_at_detection(&ids, &holes, Time::from_millis(270)).is_none());
    assert!(judge_at_detection(&ids, &[Time::from_millis(50)], Time::ZERO).is_none());
    // A congestion loss reported as channel error is one the sender acts on.
    let (all, _, _) = score(&[loss(210, TrueState::Congestion)], &ids, Some(&holes));
    assert_eq!((all.incompatible_multi, all.incompatible_acted), (1, 1));
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
        assert_eq!(cfg.cross.len(), p.cross.len());
        let alone = p.path_config(7.0, true, false, true);
        assert!(alone.cbr.is_empty() && alone.cross.is_empty());
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

#[test]
fn test_competing_cases_have_dynamic_cross_traffic_and_a_window_that_can_overflow() {
    let p = Params::load(&opts(), "accuracy.params").expect("params");
    assert!(!p.cross.is_empty(), "on/off cross traffic, not CBR");
    assert!(p.competing.is_empty());
    // A lone flow's window can exceed the path's pipe plus the queue.
    assert!(p.path.max_window_segments > p.path.queue_packets + 10);
    assert!(!p.rsd_sensitivity.is_empty());
    let cfg = p.path_config(5.0, true, true, true);
    let out = run_path(
        &cfg,
        Duration::from_secs(40),
        run_seed(1, 5.0),
        &[Protocol::NewRenoObserved],
        Duration::from_millis(10),
    )
    .expect("run");
    let cong = out
        .monitor
        .losses()
        .iter()
        .filter(|l| l.truth == TrueState::Congestion)
        .count();
    assert!(cong > 0, "no congestion loss in 40 s of cross traffic");
    assert!(!out.hole_detections.is_empty());
    assert!(!out.flows[0].goodput_series_bps.is_empty());
}

#[test]
fn test_fig3_and_fig9_run_quickly_and_report() {
    let dir = std::env::temp_dir().join(format!("adtcp-figs-{}", std::process::id()));
    let adtcp = dir.join("adtcp");
    std::fs::create_dir_all(&adtcp).expect("tmp");
    let src = opts().experiments_dir.join("adtcp");
    for (f, from, to) in [
        (
            "metrics.params",
            "quick_duration_s = 40",
            "quick_duration_s = 8",
        ),
        (
            "testbed.params",
            "quick_duration_s = 40",
            "quick_duration_s = 8",
        ),
    ] {
        let text = std::fs::read_to_string(src.join(f)).expect("read");
        assert!(text.contains(from), "{f}");
        std::fs::write(adtcp.join(f), text.replace(from, to)).expect("write");
    }
    let o = ExpOptions {
        experiments_dir: dir.clone(),
        seeds: vec![1, 2],
        quick: true,
    };
    let fig3 = super::all()
        .into_iter()
        .find(|e| e.name() == "adtcp-fig3")
        .expect("fig3")
        .run(&o, &mut |_| {})
        .expect("runs")
        .render();
    assert!(
        fig3.contains("over half") && fig3.contains("Panel 4"),
        "{fig3}"
    );
    let fig9 = super::all()
        .into_iter()
        .find(|e| e.name() == "adtcp-fig9")
        .expect("fig9")
        .run(&o, &mut |_| {})
        .expect("runs")
        .render();
    assert!(
        fig9.contains("clear channel") && fig9.contains("weak signal") && fig9.contains("mobility"),
        "{fig9}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
