//! The global monitor (papers/004 §3: "the real network state is obtained by a global monitor
//! implemented in the ns simulator"): the true state of the path at every moment and the cause
//! of every lost packet, against which identification is scored.
//!
//! # Ground truth
//!
//! The state at a moment, in priority order:
//! 1. **disconnection**: a disconnection outage is in force on the mobile hop;
//! 2. **route change**: a route-change gap or its reordering burst is in force;
//! 3. **congestion**: some queue on the path holds more than half its capacity — the paper's
//!    definition ("when the maximum network queue size exceeds half of the buffer capacity,
//!    IDD is clearly high and STT clearly low", §3);
//! 4. **channel error**: the mobile hop has a lossy channel;
//! 5. **normal** otherwise.
//!
//! The cause of a lost data packet is read from the drop itself, never from the state of the
//! path around it: a packet the loss model took is **channel error** even if a queue was full
//! at the time, and a packet lost to an outage is the episode's kind (**disconnection** or
//! **route change**). A queue-overflow drop is **congestion** — unless it happened at the
//! mobile hop while that hop was down: the queue then filled because the link was broken (the
//! DSR send buffer holding packets during route discovery), so it is the episode's kind.

use super::ManetPath;
use super::mobility::EpisodeKind;
use crate::link::DropReason;
use adaptnet_core::Time;
use std::time::Duration;

/// A true network state (papers/004 §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum TrueState {
    /// None of the others.
    Normal,
    /// A queue on the path is more than half full.
    Congestion,
    /// Random or bursty wireless loss.
    ChannelError,
    /// The route changed: a short gap and out-of-order delivery.
    RouteChange,
    /// The path is down.
    Disconnection,
}

impl TrueState {
    /// All states, in report order.
    pub const ALL: [TrueState; 5] = [
        TrueState::Normal,
        TrueState::Congestion,
        TrueState::ChannelError,
        TrueState::RouteChange,
        TrueState::Disconnection,
    ];

    /// Name for reports.
    pub fn name(self) -> &'static str {
        match self {
            TrueState::Normal => "normal",
            TrueState::Congestion => "congestion",
            TrueState::ChannelError => "channel error",
            TrueState::RouteChange => "route change",
            TrueState::Disconnection => "disconnection",
        }
    }
}

/// The path at one sampling moment.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Moment {
    /// When.
    pub at: Time,
    /// The fullest queue on the path, packets.
    pub max_queue_packets: u64,
    /// The true state.
    pub state: TrueState,
}

/// A lost TCP data packet and its true cause.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Loss {
    /// When it was lost.
    pub at: Time,
    /// The world's flow index.
    pub flow: u32,
    /// What the link reported.
    pub reason: DropReason,
    /// Its true cause.
    pub truth: TrueState,
}

/// What the monitor recorded over a run.
#[derive(Clone, Debug, Default)]
pub struct Monitor {
    period: Duration,
    moments: Vec<Moment>,
    losses: Vec<Loss>,
}

impl Monitor {
    /// Runs the path's world to its end, sampling every `period` (at least 1 ms), and records
    /// every loss. `progress` receives the virtual time reached.
    pub fn run(path: &mut ManetPath, period: Duration, progress: &mut dyn FnMut(Time)) -> Monitor {
        let period = period.max(Duration::from_millis(1));
        let end = Time::ZERO + path.duration();
        let half = u64::from(path.config.queue_packets) / 2;
        let lossy = path.config.channel_error.is_some();
        path.world.enable_drop_log();
        let mut moments = Vec::new();
        let mut t = Time::ZERO;
        while t < end {
            t = (t + period).min(end);
            path.world.run_until(t, &mut |_| {});
            let max_queue_packets = path
                .hops
                .iter()
                .flat_map(|&(a, b)| [a, b])
                .map(|l| path.world.link(l).queue_packets(t))
                .max()
                .unwrap_or(0);
            let state = match path.schedule.episode_at(t).map(|e| e.kind) {
                Some(EpisodeKind::Disconnection) => TrueState::Disconnection,
                Some(EpisodeKind::RouteChange) => TrueState::RouteChange,
                None if max_queue_packets > half => TrueState::Congestion,
                None if lossy => TrueState::ChannelError,
                None => TrueState::Normal,
            };
            moments.push(Moment {
                at: t,
                max_queue_packets,
                state,
            });
            progress(t);
        }
        let tcp_flows: Vec<u32> = path.tcp.iter().map(|f| f.flow.0).collect();
        let mut monitor = Monitor {
            period,
            moments,
            losses: Vec::new(),
        };
        let losses = path
            .world
            .drop_log()
            .iter()
            .filter(|d| !d.reverse && d.payload_len > 0)
            .filter_map(|d| {
                let flow = d.flow.filter(|f| tcp_flows.contains(f))?;
                let episode = || match path.schedule.episode_at(d.at).map(|e| e.kind) {
                    Some(EpisodeKind::RouteChange) => TrueState::RouteChange,
                    _ => TrueState::Disconnection,
                };
                let mobile_down = (d.link == path.mobile.0 || d.link == path.mobile.1)
                    && path.world.link(d.link).is_down(d.at);
                let truth = match d.reason {
                    DropReason::QueueFull if mobile_down => episode(),
                    DropReason::QueueFull => TrueState::Congestion,
                    DropReason::Outage => episode(),
                    DropReason::RandomLoss => TrueState::ChannelError,
                };
                Some(Loss {
                    at: d.at,
                    flow,
                    reason: d.reason,
                    truth,
                })
            })
            .collect();
        monitor.losses = losses;
        monitor
    }

    /// The sampling period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The samples, in time order.
    pub fn moments(&self) -> &[Moment] {
        &self.moments
    }

    /// The lost TCP data packets, in the order they were lost.
    pub fn losses(&self) -> &[Loss] {
        &self.losses
    }

    /// The true state at `t` (that of the last sample at or before it; normal before the
    /// first).
    pub fn state_at(&self, t: Time) -> TrueState {
        let idx = self.moments.partition_point(|m| m.at <= t);
        idx.checked_sub(1)
            .and_then(|i| self.moments.get(i))
            .map_or(TrueState::Normal, |m| m.state)
    }

    /// The fraction of samples in `state`.
    pub fn time_share(&self, state: TrueState) -> f64 {
        if self.moments.is_empty() {
            return 0.0;
        }
        let n = self.moments.iter().filter(|m| m.state == state).count();
        n as f64 / self.moments.len() as f64
    }
}
