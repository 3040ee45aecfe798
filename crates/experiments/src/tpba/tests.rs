//! The TPBA experiments run end to end on the repository's scenario files and show the
//! paper's qualitative results.

use super::*;
use std::path::PathBuf;

fn opts() -> ExpOptions {
    ExpOptions {
        experiments_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments"),
        seeds: vec![1],
        quick: true,
    }
}

#[test]
fn test_every_tpba_experiment_runs_and_writes_files() {
    for e in all() {
        if e.name() == "tpba-table4" {
            continue; // covered below with fewer cases' worth of checks
        }
        let report = e
            .run(&opts(), &mut |_| {})
            .unwrap_or_else(|err| panic!("{}: {err}", e.name()));
        assert!(
            report.files.iter().any(|(n, _)| n.ends_with(".svg")),
            "{}",
            e.name()
        );
        assert!(
            report.files.iter().any(|(n, _)| n.ends_with(".json")),
            "{}",
            e.name()
        );
        assert!(report.render().contains("paper"), "{}", e.name());
    }
}

#[test]
fn test_table4_tpba_beats_lda_after_the_change() {
    let report = table4::Table4.run(&opts(), &mut |_| {}).expect("table4");
    let json = report
        .files
        .iter()
        .find(|(n, _)| n == "table4.json")
        .map(|(_, b)| b.clone())
        .expect("json");
    let runs: serde_json::Value = serde_json::from_slice(&json).expect("parses");
    let ave2 = |prefix: &str| -> f64 {
        let v: Vec<f64> = runs
            .as_array()
            .expect("array")
            .iter()
            .filter(|r| r["case"].as_str().is_some_and(|c| c.starts_with(prefix)))
            .filter_map(|r| r["delta_r"]["ave2"].as_f64())
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (tpba, lda) = (ave2("TPBA-"), ave2("LDA-"));
    assert!(tpba < lda, "δR_ave2: TPBA {tpba:.0} vs LDA {lda:.0} kbit/s");
}
