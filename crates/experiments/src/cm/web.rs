//! Web-like background traffic (papers/003 §2.1: "random Web-like background traffic"; the
//! paper gives no model). Our reconstruction: TCP NewReno transfers arriving as a Poisson
//! process, with Pareto-distributed sizes (shape 1.2, heavy-tailed as in SURGE-style Web
//! models), spread round-robin over a set of host pairs, each its own connection. The offered
//! load is a fraction of the bottleneck; sizes are truncated so a run stays bounded.

use crate::rng::SplitMix;
use adaptnet_core::Time;
use adaptnet_core::tcp::TcpConfig;
use adaptnet_sim::scenario::{FlowDef, FlowType, Scenario};

/// Most flows a scenario can hold (ports are numbered by flow index).
const MAX_FLOWS: usize = 9_999;

/// Parameters of the background.
#[derive(Clone, Debug)]
pub(super) struct WebLoad {
    /// Offered load, bit/s.
    pub load_bps: f64,
    /// Mean transfer size before truncation, bytes.
    pub mean_bytes: f64,
    /// Pareto shape.
    pub shape: f64,
    /// Largest transfer, bytes.
    pub max_bytes: f64,
    /// (from, to) host pairs used round-robin.
    pub pairs: Vec<(String, String)>,
    /// Segment size.
    pub mss: u16,
}

impl WebLoad {
    /// The reconstruction used by the CM experiments: mean 12 kB, shape 1.2, at most 1 MB.
    pub(super) fn new(load_bps: f64, pairs: Vec<(String, String)>) -> WebLoad {
        WebLoad {
            load_bps,
            mean_bytes: 12_000.0,
            shape: 1.2,
            max_bytes: 1e6,
            pairs,
            mss: 1000,
        }
    }
}

/// Appends the background's transfers to `s` (from `seed`); returns how many were added.
pub(super) fn add_background(s: &mut Scenario, seed: u64, load: &WebLoad) -> usize {
    if load.pairs.is_empty() || load.load_bps <= 0.0 {
        return 0;
    }
    let mut rng = SplitMix::new(seed, 0x5745_4200);
    let (a, scale) = (
        load.shape,
        load.mean_bytes * (load.shape - 1.0) / load.shape,
    );
    // E[min(X, max)] for X ~ Pareto(a, scale): the offered load counts the truncation.
    let truncated_mean = load.mean_bytes - scale.powf(a) * load.max_bytes.powf(1.0 - a) / (a - 1.0);
    let arrivals_per_s = load.load_bps / 8.0 / truncated_mean.max(1.0);
    let end = s.duration.as_secs_f64();
    let config = TcpConfig {
        mss: load.mss,
        ..TcpConfig::default()
    };
    let mut t = rng.exponential(1.0 / arrivals_per_s);
    let mut added = 0;
    while t < end && s.flows.len() < MAX_FLOWS {
        let bytes = rng.pareto(a, scale).min(load.max_bytes).max(1.0) as u64;
        let (from, to) = &load.pairs[added % load.pairs.len()];
        s.flows.push(FlowDef {
            name: format!("web{added}"),
            from: from.clone(),
            to: to.clone(),
            start: Time::from_secs_f64(t),
            stop: s.duration,
            kind: FlowType::Tcp {
                bytes: Some(bytes),
                config: config.clone(),
            },
        });
        added += 1;
        t += rng.exponential(1.0 / arrivals_per_s);
    }
    added
}
