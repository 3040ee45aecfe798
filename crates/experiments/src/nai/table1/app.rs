//! The four-level adaptive application of §4.4 and its parameters.

use crate::nai::params::{TestbedParams, TraceParams};
use adaptnet_core::Time;
use adaptnet_core::nai::{MessageId, NaiEvent, NotificationId, OnExpiry, Priority, SendOptions};
use adaptnet_sim::agents::nai_app::{NaiApp, NaiPort};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The parameter file.
pub const PARAMS: &str = "nai/table1.params";

/// One level of the application.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelParams {
    /// Upper bound of the bandwidth range of this level's mode (`None`: unbounded).
    pub upper_kbytes_per_s: Option<f64>,
    /// Usage of this level when all its messages are delivered.
    pub usage_kbytes_per_s: f64,
}

/// `experiments/nai/table1.params`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table1Params {
    /// Length of the run.
    pub duration_s: f64,
    /// Length with `--quick`.
    pub quick_duration_s: f64,
    /// Interval between a level's messages.
    pub period_s: f64,
    /// Every message's callback timer.
    pub timer_s: f64,
    /// Estimator poll delays to compare.
    pub poll_delays_s: Vec<u32>,
    /// Simulator seed.
    pub seed: u64,
    /// Levels 1..4.
    pub levels: Vec<LevelParams>,
    /// The testbed.
    pub testbed: TestbedParams,
    /// The bandwidth trace.
    pub trace: TraceParams,
}

/// The two adaptation schemes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Bandwidth notifications only (modes).
    Notifications,
    /// Callbacks + priorities.
    Callbacks,
}

impl Scheme {
    /// Name in tables, as in the paper.
    pub fn label(self) -> &'static str {
        match self {
            Scheme::Notifications => "bandwidth",
            Scheme::Callbacks => "callbacks",
        }
    }
}

/// The adaptive application.
#[derive(Debug)]
pub struct AdaptiveApp {
    scheme: Scheme,
    /// (upper bound, usage) per level, bytes per second.
    levels: Vec<(f64, f64)>,
    period: Duration,
    timer: Duration,
    end: Time,
    next_at: Time,
    mode: usize,
    registration: Option<NotificationId>,
    /// The level (0-based) of every message submitted.
    pub level_of: BTreeMap<MessageId, u8>,
    /// (time, mode) at each mode change (notifications scheme).
    pub modes: Vec<(Time, usize)>,
}

impl AdaptiveApp {
    /// An application running `scheme` until `end`.
    pub fn new(
        scheme: Scheme,
        levels: Vec<(f64, f64)>,
        period: Duration,
        timer: Duration,
        end: Time,
    ) -> AdaptiveApp {
        AdaptiveApp {
            scheme,
            levels,
            period: period.max(Duration::from_millis(1)),
            timer,
            end,
            next_at: Time::ZERO,
            mode: 1,
            registration: None,
            level_of: BTreeMap::new(),
            modes: Vec::new(),
        }
    }

    /// The mode whose range holds `estimate`: the first level whose upper bound exceeds it.
    fn mode_for(&self, estimate: f64) -> usize {
        self.levels
            .iter()
            .position(|(upper, _)| estimate < *upper)
            .map_or(self.levels.len(), |i| i + 1)
            .max(1)
    }

    /// Switches to the mode for `estimate` and registers its range.
    fn adapt(&mut self, now: Time, estimate: f64, port: &mut dyn NaiPort) {
        self.mode = self.mode_for(estimate);
        if self.modes.last().is_none_or(|&(_, m)| m != self.mode) {
            self.modes.push((now, self.mode));
        }
        let low = match self.mode {
            1 => 0.0,
            m => self.levels.get(m - 2).map_or(0.0, |l| l.0),
        };
        let high = self.levels.get(self.mode - 1).map_or(f64::MAX, |l| l.0);
        self.registration = port.register_bandwidth_range(low, high);
    }

    /// Number of levels.
    pub fn levels_count(&self) -> usize {
        self.levels.len()
    }

    /// The total usage of mode `m` (levels 1..m), bytes per second.
    pub fn mode_usage(&self, m: usize) -> f64 {
        self.levels.iter().take(m).map(|l| l.1).sum()
    }
}

impl NaiApp for AdaptiveApp {
    fn start(&mut self, now: Time, port: &mut dyn NaiPort) {
        if self.scheme == Scheme::Notifications {
            let e = port.bandwidth_estimate().unwrap_or(0.0);
            self.adapt(now, e, port);
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        (self.next_at < self.end).then_some(self.next_at)
    }

    fn handle_timeout(&mut self, now: Time, port: &mut dyn NaiPort) {
        while self.next_at <= now && self.next_at < self.end {
            let count = match self.scheme {
                Scheme::Notifications => self.mode,
                Scheme::Callbacks => self.levels.len(),
            };
            for level in 0..count.min(self.levels.len()) {
                let size = (self.levels[level].1 * self.period.as_secs_f64()).round() as u64;
                let priority = match self.scheme {
                    Scheme::Notifications => Priority(0),
                    Scheme::Callbacks => Priority(level as u8),
                };
                let opts = SendOptions {
                    priority,
                    timer: Some(self.timer),
                    on_expiry: OnExpiry::Discard,
                };
                let id = match port.submit(now, size.max(1), opts) {
                    Ok(id) => Some(id),
                    Err(adaptnet_core::nai::NaiError::Rejected { id, .. }) => Some(id),
                    Err(_) => None,
                };
                if let Some(id) = id {
                    self.level_of.insert(id, level as u8);
                }
            }
            self.next_at += self.period;
        }
    }

    fn on_event(&mut self, now: Time, event: &NaiEvent, port: &mut dyn NaiPort) {
        if let NaiEvent::Bandwidth {
            id,
            available_bytes_per_s,
        } = event
            && self.scheme == Scheme::Notifications
            && Some(*id) == self.registration
        {
            self.adapt(now, *available_bytes_per_s, port);
        }
    }
}
