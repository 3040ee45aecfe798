//! The seeded mobility process: from a node speed to the schedules of route changes,
//! disconnections and bursty channel error that the link model plays (papers/004 §3 and §5
//! run ns-2 with random-waypoint mobility, zero pause time, DSR over 802.11; we do not
//! simulate radios or routing, so node motion is replaced by its effects on one path).
//!
//! # The mapping from speed to rates
//!
//! * **Path breaks** are a Poisson process of rate `λ = hops × speed / radio_range` per second.
//!   Two nodes at relative speed `v` stay within radio range `R` for about `R / v`; a path of
//!   `h` links breaks when any one of them does. At the defaults (4 hops, 250 m, ns-2's
//!   802.11 range) that is one break every 6.25 s at 10 m/s and every 3.1 s at 20 m/s; no
//!   breaks at speed 0 (a static network).
//! * Each break is a **disconnection** with probability `disconnection_probability`
//!   (default 0.3: no alternative route is known, the path stays down while routing searches)
//!   and otherwise a **route change** (a cached or salvaged route takes over).
//! * A **route change** is a short gap (an outage of `route_gap_min..max`, uniform; default
//!   20–200 ms, DSR's salvage and route-reply time over a few hops) followed by a reordering
//!   burst: packets sent during the next `reorder_burst_min..max` (default 0.2–1 s) take
//!   `reorder_extra_min..max` (default 20–100 ms) longer, so packets sent after them overtake
//!   them — the old, longer path still draining while the new one delivers.
//! * A **disconnection** is an outage whose length is `outage_min + Exp(outage_mean −
//!   outage_min)`, capped at `outage_max` (defaults 0.5 s, mean 2 s, cap 10 s): route
//!   discovery with backoff until a path exists again. Long enough, mostly, for a TCP
//!   retransmission timeout, which is what papers/004 §2.1 calls a disconnection.
//! * The next break is drawn after the previous episode ends, so episodes never overlap.
//! * **Channel error** (see [`ChannelErrorConfig::loss_model`]) is random plus bursty loss:
//!   a Gilbert-Elliott chain whose good state loses `rate` of the packets and whose bad state
//!   (a fade, mean `mean_burst_packets` long) loses `burst_loss` of them. Fades start more
//!   often as nodes move faster (signal strength changes faster near the range's edge):
//!   `p(good → bad) = rate × (1 + speed / speed_ref) / mean_burst_packets`.

use crate::link::{LossModel, Outage, Reorder};
use adaptnet_core::Time;
use rand::RngExt;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

use super::ManetError;

/// Parameters of the mobility process. See the module docs for the mapping.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MobilityConfig {
    /// Node speed, m/s (0: static).
    pub speed_m_per_s: f64,
    /// Radio range, m. Default 250 (ns-2's 802.11 default).
    pub radio_range_m: f64,
    /// Probability that a path break is a disconnection rather than a route change.
    pub disconnection_probability: f64,
    /// Route-change gap, shortest, ms.
    pub route_gap_min_ms: f64,
    /// Route-change gap, longest, ms.
    pub route_gap_max_ms: f64,
    /// Reordering burst after a route change, shortest, ms.
    pub reorder_burst_min_ms: f64,
    /// Reordering burst after a route change, longest, ms.
    pub reorder_burst_max_ms: f64,
    /// Extra delay of packets on the old path, least, ms.
    pub reorder_extra_min_ms: f64,
    /// Extra delay of packets on the old path, most, ms.
    pub reorder_extra_max_ms: f64,
    /// Disconnection length, shortest, s.
    pub outage_min_s: f64,
    /// Disconnection length, mean, s.
    pub outage_mean_s: f64,
    /// Disconnection length, longest, s.
    pub outage_max_s: f64,
}

impl Default for MobilityConfig {
    fn default() -> Self {
        MobilityConfig {
            speed_m_per_s: 10.0,
            radio_range_m: 250.0,
            disconnection_probability: 0.3,
            route_gap_min_ms: 20.0,
            route_gap_max_ms: 200.0,
            reorder_burst_min_ms: 200.0,
            reorder_burst_max_ms: 1000.0,
            reorder_extra_min_ms: 20.0,
            reorder_extra_max_ms: 100.0,
            outage_min_s: 0.5,
            outage_mean_s: 2.0,
            outage_max_s: 10.0,
        }
    }
}

impl MobilityConfig {
    /// Path breaks per second on a path of `hops` links.
    pub fn break_rate_per_s(&self, hops: u32) -> f64 {
        f64::from(hops) * self.speed_m_per_s / self.radio_range_m
    }

    fn validate(&self) -> Result<(), ManetError> {
        let ranges = [
            ("speed_m_per_s", self.speed_m_per_s, 0.0, 1e3),
            ("radio_range_m", self.radio_range_m, 1.0, 1e6),
            (
                "disconnection_probability",
                self.disconnection_probability,
                0.0,
                1.0,
            ),
            ("route_gap_min_ms", self.route_gap_min_ms, 0.0, 1e5),
            ("reorder_burst_min_ms", self.reorder_burst_min_ms, 0.0, 1e5),
            ("reorder_extra_min_ms", self.reorder_extra_min_ms, 0.0, 1e5),
            ("outage_min_s", self.outage_min_s, 0.0, 1e4),
        ];
        for (field, v, lo, hi) in ranges {
            if !(v.is_finite() && (lo..=hi).contains(&v)) {
                return Err(ManetError::Param {
                    field,
                    why: format!("{v} is outside [{lo}, {hi}]"),
                });
            }
        }
        let pairs = [
            (
                "route_gap_max_ms",
                self.route_gap_min_ms,
                self.route_gap_max_ms,
            ),
            (
                "reorder_burst_max_ms",
                self.reorder_burst_min_ms,
                self.reorder_burst_max_ms,
            ),
            (
                "reorder_extra_max_ms",
                self.reorder_extra_min_ms,
                self.reorder_extra_max_ms,
            ),
            ("outage_mean_s", self.outage_min_s, self.outage_mean_s),
            ("outage_max_s", self.outage_mean_s, self.outage_max_s),
        ];
        for (field, lo, v) in pairs {
            if !(v.is_finite() && v >= lo && v <= 1e5) {
                return Err(ManetError::Param {
                    field,
                    why: format!("{v} must be finite, at most 1e5 and at least {lo}"),
                });
            }
        }
        Ok(())
    }
}

/// Random and bursty channel error. See the module docs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChannelErrorConfig {
    /// Loss probability outside fades (random error).
    pub rate: f64,
    /// Loss probability inside a fade.
    pub burst_loss: f64,
    /// Mean fade length, packets.
    pub mean_burst_packets: f64,
    /// The speed at which fades start twice as often as in a static network, m/s.
    pub speed_ref_m_per_s: f64,
}

impl Default for ChannelErrorConfig {
    fn default() -> Self {
        ChannelErrorConfig {
            rate: 0.01,
            burst_loss: 0.5,
            mean_burst_packets: 4.0,
            speed_ref_m_per_s: 10.0,
        }
    }
}

impl ChannelErrorConfig {
    /// The link's loss model at a node speed.
    pub fn loss_model(&self, speed_m_per_s: f64) -> Result<LossModel, ManetError> {
        for (field, v, lo, hi) in [
            ("rate", self.rate, 0.0, 1.0),
            ("burst_loss", self.burst_loss, 0.0, 1.0),
            ("mean_burst_packets", self.mean_burst_packets, 1.0, 1e6),
            ("speed_ref_m_per_s", self.speed_ref_m_per_s, 1e-3, 1e6),
        ] {
            if !(v.is_finite() && (lo..=hi).contains(&v)) {
                return Err(ManetError::Param {
                    field,
                    why: format!("{v} is outside [{lo}, {hi}]"),
                });
            }
        }
        let speed = speed_m_per_s.max(0.0);
        let p_good_to_bad =
            (self.rate * (1.0 + speed / self.speed_ref_m_per_s) / self.mean_burst_packets).min(1.0);
        Ok(LossModel::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good: 1.0 / self.mean_burst_packets,
            loss_good: self.rate,
            loss_bad: self.burst_loss,
        })
    }
}

/// What a path break turned into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum EpisodeKind {
    /// A short gap, then a reordering burst.
    RouteChange,
    /// A long outage.
    Disconnection,
}

/// One path break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Episode {
    /// Its kind.
    pub kind: EpisodeKind,
    /// The path is down over this outage (the gap of a route change, or the disconnection).
    pub outage: Outage,
    /// The reordering burst that follows a route change.
    pub reorder: Option<Reorder>,
}

impl Episode {
    /// When the episode's effects end.
    pub fn end(&self) -> Time {
        let down = self.outage.start + self.outage.duration;
        self.reorder.map_or(down, |r| r.start + r.duration)
    }
}

/// The path breaks of one run, sorted and non-overlapping.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MobilitySchedule {
    episodes: Vec<Episode>,
}

/// Uniform in `[lo, hi]` milliseconds.
fn uniform_ms(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> Duration {
    Duration::from_secs_f64((lo + (hi - lo) * rng.random::<f64>()) / 1e3)
}

impl MobilitySchedule {
    /// Draws the breaks of a path of `hops` links over `[0, duration)` from `seed`.
    pub fn generate(
        cfg: &MobilityConfig,
        hops: u32,
        duration: Duration,
        seed: u64,
    ) -> Result<MobilitySchedule, ManetError> {
        cfg.validate()?;
        let rate = cfg.break_rate_per_s(hops);
        let mut episodes = Vec::new();
        if rate <= 0.0 {
            return Ok(MobilitySchedule { episodes });
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let end = Time::ZERO + duration;
        let mut t = Time::ZERO;
        loop {
            // Exponential inter-break time; 1 − u is in (0, 1], so the log is finite.
            let u: f64 = rng.random();
            let wait_s = -(1.0 - u).ln() / rate;
            t = t.saturating_add(Duration::from_secs_f64(wait_s.min(1e6)));
            if t >= end {
                break;
            }
            let episode = if rng.random::<f64>() < cfg.disconnection_probability {
                let extra_mean = cfg.outage_mean_s - cfg.outage_min_s;
                let u: f64 = rng.random();
                let len = (cfg.outage_min_s - extra_mean * (1.0 - u).ln()).min(cfg.outage_max_s);
                Episode {
                    kind: EpisodeKind::Disconnection,
                    outage: Outage {
                        start: t,
                        duration: Duration::from_secs_f64(len),
                    },
                    reorder: None,
                }
            } else {
                let gap = uniform_ms(&mut rng, cfg.route_gap_min_ms, cfg.route_gap_max_ms);
                let burst =
                    uniform_ms(&mut rng, cfg.reorder_burst_min_ms, cfg.reorder_burst_max_ms);
                let extra =
                    uniform_ms(&mut rng, cfg.reorder_extra_min_ms, cfg.reorder_extra_max_ms);
                Episode {
                    kind: EpisodeKind::RouteChange,
                    outage: Outage {
                        start: t,
                        duration: gap,
                    },
                    reorder: Some(Reorder {
                        start: t + gap,
                        duration: burst,
                        extra_delay: extra,
                    }),
                }
            };
            t = episode.end();
            episodes.push(episode);
        }
        Ok(MobilitySchedule { episodes })
    }

    /// The episodes, in time order.
    pub fn episodes(&self) -> &[Episode] {
        &self.episodes
    }

    /// The outages, for [`crate::link::LinkConfig::outages`] (sorted, non-overlapping).
    pub fn outages(&self) -> Vec<Outage> {
        self.episodes.iter().map(|e| e.outage).collect()
    }

    /// The reordering bursts, for [`crate::link::LinkConfig::reorders`].
    pub fn reorders(&self) -> Vec<Reorder> {
        self.episodes.iter().filter_map(|e| e.reorder).collect()
    }

    /// The episode in force at `t` (from the start of its outage to the end of its effects).
    pub fn episode_at(&self, t: Time) -> Option<&Episode> {
        let idx = self.episodes.partition_point(|e| e.outage.start <= t);
        idx.checked_sub(1)
            .and_then(|i| self.episodes.get(i))
            .filter(|e| t < e.end())
    }

    /// Count of episodes of a kind.
    pub fn count(&self, kind: EpisodeKind) -> usize {
        self.episodes.iter().filter(|e| e.kind == kind).count()
    }
}
