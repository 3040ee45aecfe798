//! The built-in demo shows what its description says (regression: the 40 ms flow got less than
//! the 80 ms flow on seed 1, against the description's RTT bias).

use adaptnet_sim::scenario::Scenario;
use std::path::PathBuf;

#[test]
fn demo_shows_rtt_bias_on_the_default_seeds() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments/demo.toml");
    let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    for seed in [1, 2, 3] {
        let r = s
            .run(seed, &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"))
            .results;
        let goodput = |name: &str| {
            r.flows
                .iter()
                .find(|f| f.name == name)
                .map_or(0.0, |f| f.goodput_bps)
        };
        let (g40, g80, g160) = (
            goodput("tcp-40ms"),
            goodput("tcp-80ms"),
            goodput("tcp-160ms"),
        );
        assert!(
            g40 > g80 && g80 > g160,
            "seed {seed}: 40 ms {g40:.0}, 80 ms {g80:.0}, 160 ms {g160:.0} bit/s"
        );
    }
}
