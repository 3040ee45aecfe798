//! The CM experiments in quick mode: Figure 9's qualitative result, every experiment runs and
//! writes its files, and runs are reproducible from the seed.

use super::*;
use std::path::PathBuf;

fn opts(seeds: &[u64]) -> ExpOptions {
    ExpOptions {
        experiments_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments"),
        seeds: seeds.to_vec(),
        quick: true,
    }
}

#[test]
fn test_quick_fig9_tcp_cm_spread_is_smaller_than_newreno() {
    let o = opts(&[1, 2]);
    let mut spread = [Vec::new(), Vec::new()];
    for seed in [1, 2] {
        for (i, tcp_cm) in [false, true].into_iter().enumerate() {
            let (r, _) = fig9::run_one(&o, tcp_cm, seed, &mut |_| {}, 0.0, 1.0).expect("runs");
            assert!(r.all_completed, "{r:?}");
            spread[i].push(r.spread);
        }
    }
    let (nr, cm) = (mean(&spread[0]), mean(&spread[1]));
    assert!(cm < nr, "TCP/CM spread {cm:.3} vs NewReno {nr:.3}");
    assert!(cm < 1.05, "TCP/CM connections progress together: {cm:.3}");
}

#[test]
fn test_every_cm_experiment_runs_quick_and_writes_plots() {
    let o = opts(&[1]);
    for e in all() {
        let mut last = 0.0;
        let report = e
            .run(&o, &mut |f| {
                assert!(
                    (0.0..=1.0 + 1e-9).contains(&f),
                    "{}: progress {f}",
                    e.name()
                );
                last = f;
            })
            .unwrap_or_else(|err| panic!("{}: {err}", e.name()));
        assert!(last > 0.5, "{}: progress reached {last}", e.name());
        let svgs: Vec<_> = report
            .files
            .iter()
            .filter(|(n, _)| n.ends_with(".svg"))
            .collect();
        assert!(!svgs.is_empty(), "{}: no plot", e.name());
        for (name, bytes) in svgs {
            assert!(bytes.starts_with(b"<svg"), "{name}");
        }
        assert!(report.files.iter().any(|(n, _)| n.ends_with(".json")));
        assert!(report.files.iter().any(|(n, _)| n.ends_with(".csv")));
        assert!(report.render().contains("paper") || report.render().contains("Paper"));
    }
}

#[test]
fn test_same_seed_gives_identical_experiment_output() {
    let o = opts(&[4]);
    let e = fig10::Fig10;
    let a = e.run(&o, &mut |_| {}).expect("runs");
    let b = e.run(&o, &mut |_| {}).expect("runs");
    assert_eq!(a.files, b.files);
    assert_eq!(a.render(), b.render());
}

#[test]
fn test_web_background_is_seeded_and_near_its_load() {
    let o = opts(&[1]);
    let base = scenario(&o, "fig3.toml").expect("loads");
    let pairs = vec![("s1".to_string(), "r1".to_string())];
    let load = web::WebLoad::new(1e6, pairs);
    let mut a = base.clone();
    let mut b = base.clone();
    let n = web::add_background(&mut a, 7, &load);
    assert_eq!(web::add_background(&mut b, 7, &load), n);
    assert_eq!(format!("{:?}", a.flows), format!("{:?}", b.flows));
    let bytes: u64 = a
        .flows
        .iter()
        .filter_map(|f| match f.kind {
            adaptnet_sim::scenario::FlowType::Tcp { bytes, .. } if f.name.starts_with("web") => {
                bytes
            }
            _ => None,
        })
        .sum();
    let offered = bytes as f64 * 8.0 / base.duration.as_secs_f64();
    // Heavy tails make one 60 s draw noisy; the mean is right within a factor.
    assert!((0.4e6..2.5e6).contains(&offered), "{offered}");
}
