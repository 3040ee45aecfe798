//! The `[env]` table of scenario files: a host's environment parameters (papers/001 §2–§3),
//! their timelines, the handoffs of §5.2 and the action tables of the host's sockets.
//!
//! ```toml
//! [env]
//! host = "mh"                    # the host whose parameter table this is
//! device = "wlan0"               # optional (default "wlan0")
//! subscribers = 10               # optional: applications reading every event (default 0)
//!
//! [[env.params]]
//! name = "signal"                # bandwidth, latency, loss, signal (sq), availability
//!                                # (avail), cost, energy, or any custom name
//! levels = [{ value = 12.5, kind = "low" }, { value = 13.5, kind = "high" }]
//! # preset = "handoff"           # instead of levels: Table 3's five availability levels
//! points = [[0, 15], [30, 12], [40, 15]]   # [time_s, value], or:
//! # trace = "signal.trace"       # `time_s value` lines (the piecewise trace format), or:
//! # from_link = "wireless"       # bandwidth: the steps of that link's piecewise trace
//! smoothing_weight = 0.3         # optional hysteresis (§6): weight of a new sample,
//! dead_band = 0.5                #   distance beyond a level to cross it,
//! min_dwell_ms = 500             #   how long a change must hold
//! outage_below = 13              # optional: `outage_link` is down while value < this
//! outage_link = "wireless"
//!
//! [env.handoffs]                 # optional: §5.2's handoff cycle on `availability`
//! link = "wireless"              # the link that is down during each handoff
//! times_s = [30, 60]             # when the host loses its cell
//! beacon_interval_s = 1.0
//! missed_beacons = 2             # beacons missed before the handoff starts (default 2)
//! detect_fixed_s = 0.2           # daemon reaction time after the last missed beacon (0.2)
//! handoff_fixed_s = 0.0          # registration time after the new cell's beacon (0)
//! fade_max_s = 1.0               # the radio dies up to this long before the cell is lost (0)
//!
//! [[env.sockets]]                # an action table on one flow's end on `host`
//! flow = "cbr0"
//! packets = 10240                # cbr: stop after this many datagrams (default: stop_s)
//! buffer_datagrams = 1024        # cbr: the UDP gate's bound (default 1024)
//! actions = [
//!   { param = "availability", level = 3, action = "udp-sleep" },
//!   { param = "availability", level = 4, action = "udp-wakeup" },
//!   { inputs = [["cost", 0], ["loss", 1]], action = "udp-discard" },   # complex (AND)
//! ]
//! ```
//!
//! The handoff model (the paper gives no timing beyond the beacon interval, so this is ours):
//! each base station beacons every `beacon_interval_s` on a grid whose phase is drawn from the
//! run's seed. At time `t` in `times_s` the link goes down (both directions). The host's
//! daemon declares a handoff (availability 45, violating level 3 "about to handoff")
//! `detect_fixed_s` after the `missed_beacons`-th beacon slot at or after `t`; the handoff is
//! over (55, level 4, then back to 25) one beacon interval plus `handoff_fixed_s` later, when
//! the new cell's advertisement has been heard and the registration done — and the link comes
//! back at that moment. While a handoff (or an `outage_below` period) lasts, the link is in a
//! radio *blackout*: it keeps transmitting and every packet it sends is lost, as a radio out of
//! range sends into the void (an `outages` entry would instead hold the queue). So a sleeping sender saves one beacon interval (plus
//! `handoff_fixed_s`) of data per handoff, and an unmodified one loses it.
//!
//! `fade_max_s` (default 0: the blackout starts when the cell is lost) lets the signal fade
//! first: each handoff's blackout starts a uniform draw in `[0, fade_max_s)` before `t`, so the
//! last packet a TCP sender hears back arrives at a random moment before the handoff, and its
//! retransmission timer is at a random phase when the handoff ends (`papers/001` Table 6's
//! savings depend on that phase; the paper's testbed had no fixed one).
//!
//! Actions: `udp-sleep` (`max_sleep_ms` optional), `udp-wakeup`, `udp-buffer`, `udp-discard`,
//! `udp-fail`, `udp-normal` on `cbr` flows; `tcp-rst-timers`, `tcp-dupacks` (`count`,
//! default 5), `tcp-delack-timer` (`delay_ms`, 0 = off) on `tcp` flows, on whichever end
//! lives on `host`.

use super::fields::{Ctx, finite_nonneg, secs, time_s};
use super::{FlowDef, FlowType, ScenarioError, TopologyDef};
use crate::link::{Bandwidth, Outage};
use crate::trace::PiecewiseTrace;
use adaptnet_core::Time;
use adaptnet_core::env::{
    Action, Hysteresis, Level, Name, Param, TcpAction, UdpAction, Watermarks,
};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use std::time::Duration;

/// Most timeline points one scenario may set.
pub const MAX_POINTS: usize = 1_000_000;
/// Availability values of Table 3's cycle (§5.2).
pub const AVAIL_NONE: f64 = 0.0;
/// The steady state: the device is available.
pub const AVAIL_UP: f64 = 25.0;
/// "About to handoff": violates level 3.
pub const AVAIL_HANDOFF: f64 = 45.0;
/// "Handoff over": violates level 4.
pub const AVAIL_DONE: f64 = 55.0;

/// The `[env]` table as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvSpec {
    /// The host.
    pub host: String,
    /// The device name (default `wlan0`).
    pub device: Option<String>,
    /// Subscribed applications (default 0).
    pub subscribers: Option<usize>,
    /// Parameters.
    #[serde(default)]
    pub params: Vec<ParamSpec>,
    /// Handoffs.
    pub handoffs: Option<HandoffSpec>,
    /// Action tables.
    #[serde(default)]
    pub sockets: Vec<SocketSpec>,
}

/// One `[[env.params]]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamSpec {
    /// Parameter name.
    pub name: String,
    /// Levels, increasing.
    pub levels: Option<Vec<LevelSpec>>,
    /// `"handoff"`: Table 3's levels.
    pub preset: Option<String>,
    /// `[time_s, value]` pairs.
    #[serde(default)]
    pub points: Vec<[f64; 2]>,
    /// A `time_s value` file.
    pub trace: Option<String>,
    /// A link whose piecewise bandwidth trace gives the values.
    pub from_link: Option<String>,
    /// Hysteresis: smoothing weight.
    pub smoothing_weight: Option<f64>,
    /// Hysteresis: dead band.
    pub dead_band: Option<f64>,
    /// Hysteresis: minimum dwell, ms.
    pub min_dwell_ms: Option<f64>,
    /// The link goes down while the value is below this.
    pub outage_below: Option<f64>,
    /// The link `outage_below` acts on.
    pub outage_link: Option<String>,
}

/// One level.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelSpec {
    /// Its value.
    pub value: f64,
    /// `"high"` or `"low"`.
    pub kind: String,
}

/// `[env.handoffs]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandoffSpec {
    /// The link that is down during handoffs.
    pub link: String,
    /// When the cell is lost, seconds.
    pub times_s: Vec<f64>,
    /// Beacon interval, seconds.
    pub beacon_interval_s: f64,
    /// Beacons missed before the handoff starts (default 2).
    pub missed_beacons: Option<u32>,
    /// Reaction time after the last missed beacon, seconds (default 0.2).
    pub detect_fixed_s: Option<f64>,
    /// Registration time after the new cell's beacon, seconds (default 0).
    pub handoff_fixed_s: Option<f64>,
    /// The radio dies a uniform draw in `[0, fade_max_s)` before the cell is lost, seconds
    /// (default 0).
    pub fade_max_s: Option<f64>,
}

/// One `[[env.sockets]]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketSpec {
    /// The flow.
    pub flow: String,
    /// CBR: datagrams to send.
    pub packets: Option<u32>,
    /// CBR: the gate's bound.
    pub buffer_datagrams: Option<usize>,
    /// The action table, in order (empty: an unmodified socket).
    #[serde(default)]
    pub actions: Vec<ActionSpec>,
}

/// One action-table entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionSpec {
    /// Simple action: the parameter.
    pub param: Option<String>,
    /// Simple action: the level index.
    pub level: Option<u16>,
    /// Complex action: an AND over `[param, level]` inputs.
    pub inputs: Option<Vec<(String, u16)>>,
    /// The action's name.
    pub action: String,
    /// `udp-sleep`: maximum sleep, ms.
    pub max_sleep_ms: Option<f64>,
    /// `tcp-dupacks`: how many.
    pub count: Option<u32>,
    /// `tcp-delack-timer`: the timeout, ms (0: off).
    pub delay_ms: Option<f64>,
}

/// A validated parameter.
#[derive(Clone, Debug)]
pub struct EnvParamDef {
    /// The parameter.
    pub param: Param,
    /// Its levels.
    pub watermarks: Watermarks,
    /// Its hysteresis.
    pub hysteresis: Hysteresis,
    /// Its timeline, sorted.
    pub points: Vec<(Time, f64)>,
    /// `(link, threshold)`: the link is down while the value is below the threshold.
    pub outage_below: Option<(String, f64)>,
}

/// Validated handoffs (see the module documentation for the model).
#[derive(Clone, Debug)]
pub struct HandoffDef {
    /// The link.
    pub link: String,
    /// When the cell is lost, sorted.
    pub times: Vec<Time>,
    /// Beacon interval.
    pub beacon: Duration,
    /// Beacons missed before the handoff starts (≥ 1).
    pub missed_beacons: u32,
    /// Reaction time.
    pub detect_fixed: Duration,
    /// Registration time.
    pub handoff_fixed: Duration,
    /// The longest the signal fades (the radio is dead) before the cell is lost.
    pub fade_max: Duration,
}

/// One handoff's moments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandoffTimes {
    /// The radio dies (the blackout starts): `lost` minus the fade.
    pub faded: Time,
    /// The cell is lost (beacons are missed from here).
    pub lost: Time,
    /// Availability 45: about to handoff.
    pub started: Time,
    /// Availability 55 then 25; the link is back.
    pub over: Time,
}

impl HandoffDef {
    /// The longest a handoff can last: `missed_beacons + 1` beacon intervals plus the fixed
    /// times.
    pub fn max_span(&self) -> Duration {
        self.beacon
            .saturating_mul(self.missed_beacons.saturating_add(1))
            + self.detect_fixed
            + self.handoff_fixed
            + self.fade_max
    }

    /// The handoffs of a run with `seed` (the beacon phase comes from the seed).
    pub fn plan(&self, seed: u64) -> Vec<HandoffTimes> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x4841_4e44_4f46_4621);
        let beacon_ns = self.beacon.as_nanos().max(1) as f64;
        let phase = rng.random::<f64>() * beacon_ns;
        // Drawn after the phase, so a plan without fading is what it was before fading existed.
        let fade_ns = self.fade_max.as_nanos() as f64;
        self.times
            .iter()
            .map(|&lost| {
                let fade = Duration::from_nanos(adaptnet_core::convert::f64_u64_sat(
                    rng.random::<f64>() * fade_ns,
                ));
                // The first beacon slot at or after `lost`, then `missed - 1` more.
                let k = ((lost.as_nanos() as f64 - phase) / beacon_ns)
                    .ceil()
                    .max(0.0);
                let first =
                    Time::from_nanos(adaptnet_core::convert::f64_u64_sat(phase + k * beacon_ns));
                let first = first.max(lost);
                let missed = self
                    .beacon
                    .saturating_mul(self.missed_beacons.saturating_sub(1));
                let started = first + missed + self.detect_fixed;
                let over = started + self.beacon + self.handoff_fixed;
                HandoffTimes {
                    faded: lost.saturating_sub(fade),
                    lost,
                    started,
                    over,
                }
            })
            .collect()
    }
}

/// A validated action-table entry.
#[derive(Clone, Debug)]
pub struct EnvActionDef {
    /// `(param, level)` inputs: one for a simple action, several (ANDed) for a complex one.
    pub inputs: Vec<(Param, u16)>,
    /// Simple (fires on every violation) or complex (fires on activation).
    pub complex: bool,
    /// The action.
    pub action: Action,
}

/// A validated socket.
#[derive(Clone, Debug)]
pub struct EnvSocketDef {
    /// The flow's index in [`super::Scenario::flows`].
    pub flow: usize,
    /// The end on the env host is the sender (else the receiver).
    pub sender_side: bool,
    /// CBR: datagrams to send.
    pub packets: Option<u32>,
    /// CBR: the gate's bound.
    pub buffer_datagrams: usize,
    /// The table, in order.
    pub actions: Vec<EnvActionDef>,
}

/// The validated `[env]` table.
#[derive(Clone, Debug)]
pub struct EnvDef {
    /// The host.
    pub host: String,
    /// The device.
    pub device: Name,
    /// Subscribed applications.
    pub subscribers: usize,
    /// Parameters.
    pub params: Vec<EnvParamDef>,
    /// Handoffs.
    pub handoffs: Option<HandoffDef>,
    /// Action tables.
    pub sockets: Vec<EnvSocketDef>,
}

/// Table 3 (§5.2): unavailable 10 L, available 20 H, dummy 30 L, about to handoff 40 H,
/// handoff over 50 H.
pub fn table3_watermarks() -> Watermarks {
    let levels = vec![
        Level::low(10.0),
        Level::high(20.0),
        Level::low(30.0),
        Level::high(40.0),
        Level::high(50.0),
    ];
    Watermarks::new(levels).unwrap_or_else(|_| Watermarks::none())
}

/// Validates `[env]` against the topology and the flows.
pub(super) fn env_def(
    ctx: &Ctx,
    spec: Option<&EnvSpec>,
    topology: &TopologyDef,
    flows: &[FlowDef],
    duration_s: f64,
) -> Result<Option<EnvDef>, ScenarioError> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    if !topology.node_names().contains(&spec.host) {
        return Err(ctx.invalid(
            "env.host",
            format!(
                "no node named {:?}; nodes are {:?}",
                spec.host,
                topology.node_names()
            ),
        ));
    }
    let device = Name::new(spec.device.as_deref().unwrap_or("wlan0"))
        .map_err(|e| ctx.invalid("env.device", format!("{e}; use a short interface name")))?;
    let subscribers = spec.subscribers.unwrap_or(0);
    if subscribers > 1024 {
        return Err(ctx.invalid("env.subscribers", "at most 1024"));
    }
    let mut params = Vec::new();
    for (i, p) in spec.params.iter().enumerate() {
        params.push(param_def(ctx, i, p, topology, duration_s)?);
    }
    let handoffs = match &spec.handoffs {
        Some(h) => Some(handoff_def(ctx, h, topology, duration_s)?),
        None => None,
    };
    if handoffs.is_some() {
        if let Some(i) = params
            .iter()
            .position(|p| p.param == Param::Availability && !p.points.is_empty())
        {
            return Err(ctx.invalid(
                format!("env.params[{i}].points"),
                "availability values come from env.handoffs; remove the points",
            ));
        }
        if !params.iter().any(|p| p.param == Param::Availability) {
            params.push(EnvParamDef {
                param: Param::Availability,
                watermarks: table3_watermarks(),
                hysteresis: Hysteresis::NONE,
                points: Vec::new(),
                outage_below: None,
            });
        }
    }
    let mut sockets = Vec::new();
    for (i, s) in spec.sockets.iter().enumerate() {
        sockets.push(socket_def(ctx, i, s, &spec.host, flows, &params)?);
    }
    Ok(Some(EnvDef {
        host: spec.host.clone(),
        device,
        subscribers,
        params,
        handoffs,
        sockets,
    }))
}

fn link_exists(
    ctx: &Ctx,
    field: &str,
    link: &str,
    topology: &TopologyDef,
) -> Result<(), ScenarioError> {
    if !matches!(topology, TopologyDef::Explicit { .. }) {
        return Err(ctx.invalid(
            field,
            "env can only change links of a \"custom\" or \"chain\" topology; use one",
        ));
    }
    if topology.links().iter().any(|l| l.name == link) {
        return Ok(());
    }
    let known: Vec<&str> = topology.links().iter().map(|l| l.name.as_str()).collect();
    Err(ctx.invalid(
        field,
        format!("no link named {link:?}; links are {known:?}"),
    ))
}

fn param_def(
    ctx: &Ctx,
    i: usize,
    p: &ParamSpec,
    topology: &TopologyDef,
    duration_s: f64,
) -> Result<EnvParamDef, ScenarioError> {
    let f = |k: &str| format!("env.params[{i}].{k}");
    let param = Param::from_name(&p.name)
        .map_err(|e| ctx.invalid(f("name"), format!("{e}; use e.g. \"signal\" or \"cost\"")))?;
    let watermarks = match (&p.levels, p.preset.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(f("preset"), "give either levels or preset, not both"));
        }
        (None, Some("handoff")) => table3_watermarks(),
        (None, Some(other)) => {
            return Err(ctx.invalid(
                f("preset"),
                format!("unknown preset {other:?}; the only preset is \"handoff\" (Table 3)"),
            ));
        }
        (Some(levels), None) => {
            let mut v = Vec::with_capacity(levels.len());
            for (j, l) in levels.iter().enumerate() {
                v.push(match l.kind.as_str() {
                    "high" => Level::high(l.value),
                    "low" => Level::low(l.value),
                    other => {
                        return Err(ctx.invalid(
                            f(&format!("levels[{j}].kind")),
                            format!("{other:?} is not a level kind; use \"high\" or \"low\""),
                        ));
                    }
                });
            }
            Watermarks::new(v).map_err(|e| ctx.invalid(f("levels"), e.to_string()))?
        }
        (None, None) => {
            return Err(ctx.invalid(
                f("levels"),
                "missing: give levels = [{ value = …, kind = \"high\" | \"low\" }, …] or \
                 preset = \"handoff\"",
            ));
        }
    };
    let hysteresis = Hysteresis {
        smoothing_weight: p.smoothing_weight,
        dead_band: p.dead_band.unwrap_or(0.0),
        min_dwell: secs(
            p.min_dwell_ms
                .map(|ms| finite_nonneg(ctx, &f("min_dwell_ms"), ms))
                .transpose()?
                .unwrap_or(0.0)
                / 1e3,
        ),
    };
    hysteresis.validate().map_err(|e| {
        ctx.invalid(
            f("smoothing_weight"),
            format!("{e}; weight in (0, 1], dead_band finite and ≥ 0"),
        )
    })?;
    let sources = usize::from(!p.points.is_empty())
        + usize::from(p.trace.is_some())
        + usize::from(p.from_link.is_some());
    if sources > 1 {
        return Err(ctx.invalid(f("points"), "give one of points, trace or from_link"));
    }
    let mut raw: Vec<(f64, f64)> = p.points.iter().map(|[t, v]| (*t, *v)).collect();
    if let Some(path) = &p.trace {
        let full = ctx.base_dir.join(path);
        let t = PiecewiseTrace::load(&full).map_err(|source| ScenarioError::Trace {
            file: ctx.file.to_string(),
            field: f("trace"),
            source,
        })?;
        raw = t.steps;
    }
    if let Some(link) = &p.from_link {
        link_exists(ctx, &f("from_link"), link, topology)?;
        let l = topology.links().iter().find(|l| &l.name == link);
        let Some(Bandwidth::Piecewise(t)) = l.map(|l| &l.forward.bandwidth) else {
            return Err(ctx.invalid(
                f("from_link"),
                format!(
                    "link {link:?} has no piecewise bandwidth trace; give it one or use points"
                ),
            ));
        };
        raw = t.steps.clone();
    }
    if raw.len() > MAX_POINTS {
        return Err(ctx.invalid(f("points"), format!("at most {MAX_POINTS} points")));
    }
    let mut points = Vec::with_capacity(raw.len());
    let mut last = -1.0;
    for (j, (t, v)) in raw.into_iter().enumerate() {
        let t = time_s(ctx, &f(&format!("points[{j}][0]")), t, true)?;
        if t < last {
            return Err(ctx.invalid(
                f(&format!("points[{j}][0]")),
                "times must not decrease; sort the points by time",
            ));
        }
        if !v.is_finite() {
            return Err(ctx.invalid(f(&format!("points[{j}][1]")), "must be a finite number"));
        }
        last = t;
        if t <= duration_s {
            points.push((Time::from_secs_f64(t), v));
        }
    }
    let outage_below = match (&p.outage_link, p.outage_below) {
        (None, None) => None,
        (Some(link), Some(below)) => {
            link_exists(ctx, &f("outage_link"), link, topology)?;
            if !below.is_finite() {
                return Err(ctx.invalid(f("outage_below"), "must be a finite number"));
            }
            Some((link.clone(), below))
        }
        _ => {
            return Err(ctx.invalid(
                f("outage_below"),
                "give both outage_below and outage_link, or neither",
            ));
        }
    };
    Ok(EnvParamDef {
        param,
        watermarks,
        hysteresis,
        points,
        outage_below,
    })
}

fn handoff_def(
    ctx: &Ctx,
    h: &HandoffSpec,
    topology: &TopologyDef,
    duration_s: f64,
) -> Result<HandoffDef, ScenarioError> {
    link_exists(ctx, "env.handoffs.link", &h.link, topology)?;
    let beacon = secs(time_s(
        ctx,
        "env.handoffs.beacon_interval_s",
        h.beacon_interval_s,
        false,
    )?);
    let missed_beacons = h.missed_beacons.unwrap_or(2);
    if missed_beacons == 0 || missed_beacons > 100 {
        return Err(ctx.invalid("env.handoffs.missed_beacons", "must be 1 ..= 100"));
    }
    let detect = time_s(
        ctx,
        "env.handoffs.detect_fixed_s",
        h.detect_fixed_s.unwrap_or(0.2),
        true,
    )?;
    let fixed = time_s(
        ctx,
        "env.handoffs.handoff_fixed_s",
        h.handoff_fixed_s.unwrap_or(0.0),
        true,
    )?;
    let fade = time_s(
        ctx,
        "env.handoffs.fade_max_s",
        h.fade_max_s.unwrap_or(0.0),
        true,
    )?;
    let mut def = HandoffDef {
        link: h.link.clone(),
        times: Vec::with_capacity(h.times_s.len()),
        beacon,
        missed_beacons,
        detect_fixed: secs(detect),
        handoff_fixed: secs(fixed),
        fade_max: secs(fade),
    };
    let span = def.max_span();
    for (j, &t) in h.times_s.iter().enumerate() {
        let field = format!("env.handoffs.times_s[{j}]");
        let t = Time::from_secs_f64(time_s(ctx, &field, t, true)?);
        if t.as_secs_f64() > duration_s {
            return Err(ctx.invalid(field, format!("after the end of the run ({duration_s} s)")));
        }
        if let Some(&prev) = def.times.last()
            && t < prev + span
        {
            return Err(ctx.invalid(
                field,
                format!(
                    "handoffs must be at least {:.3} s apart (missed_beacons + 1 beacon \
                     intervals plus the fixed times) and sorted; move it later",
                    span.as_secs_f64()
                ),
            ));
        }
        def.times.push(t);
    }
    Ok(def)
}

fn action(ctx: &Ctx, field: &str, a: &ActionSpec) -> Result<Action, ScenarioError> {
    let ms = |v: Option<f64>, k: &str| -> Result<Option<Duration>, ScenarioError> {
        v.map(|ms| finite_nonneg(ctx, &format!("{field}.{k}"), ms).map(|m| secs(m / 1e3)))
            .transpose()
    };
    Ok(match a.action.as_str() {
        "udp-sleep" => UdpAction::Sleep {
            max_sleep: ms(a.max_sleep_ms, "max_sleep_ms")?,
        }
        .into(),
        "udp-wakeup" => UdpAction::Wakeup.into(),
        "udp-buffer" => UdpAction::Buffer.into(),
        "udp-discard" => UdpAction::Discard.into(),
        "udp-fail" => UdpAction::Fail.into(),
        "udp-normal" => UdpAction::Normal.into(),
        "tcp-rst-timers" => TcpAction::ResetTimers.into(),
        "tcp-dupacks" => TcpAction::DupAcks(a.count.unwrap_or(5)).into(),
        "tcp-delack-timer" => {
            TcpAction::DelayedAckTimer(ms(a.delay_ms, "delay_ms")?.filter(|d| !d.is_zero())).into()
        }
        other => {
            return Err(ctx.invalid(
                format!("{field}.action"),
                format!(
                    "unknown action {other:?}; use udp-sleep, udp-wakeup, udp-buffer, \
                     udp-discard, udp-fail, udp-normal, tcp-rst-timers, tcp-dupacks or \
                     tcp-delack-timer"
                ),
            ));
        }
    })
}

fn socket_def(
    ctx: &Ctx,
    i: usize,
    s: &SocketSpec,
    host: &str,
    flows: &[FlowDef],
    params: &[EnvParamDef],
) -> Result<EnvSocketDef, ScenarioError> {
    let f = |k: &str| format!("env.sockets[{i}].{k}");
    let Some((flow, fd)) = flows.iter().enumerate().find(|(_, x)| x.name == s.flow) else {
        let names: Vec<&str> = flows.iter().map(|x| x.name.as_str()).collect();
        return Err(ctx.invalid(
            f("flow"),
            format!("no flow named {:?}; flows are {names:?}", s.flow),
        ));
    };
    let udp = match fd.kind {
        FlowType::Cbr { .. } => true,
        FlowType::Tcp { .. } => false,
        ref other => {
            return Err(ctx.invalid(
                f("flow"),
                format!(
                    "flow type {:?} has no action table; use a \"cbr\" or \"tcp\" flow",
                    other.name()
                ),
            ));
        }
    };
    let sender_side = if fd.from == host {
        true
    } else if fd.to == host && !udp {
        false
    } else {
        return Err(ctx.invalid(
            f("flow"),
            format!(
                "the flow's {} must be env.host ({host:?}); move the flow or the host",
                if udp {
                    "sender (from)"
                } else {
                    "sender or receiver"
                }
            ),
        ));
    };
    if !udp && (s.packets.is_some() || s.buffer_datagrams.is_some()) {
        return Err(ctx.invalid(
            f("packets"),
            "packets and buffer_datagrams are for cbr flows; remove them",
        ));
    }
    let buffer_datagrams = s.buffer_datagrams.unwrap_or(1024);
    if buffer_datagrams == 0 || buffer_datagrams > 1 << 20 {
        return Err(ctx.invalid(f("buffer_datagrams"), "must be 1 ..= 1048576"));
    }
    // An empty table is allowed: the unmodified socket of a comparison, same application.
    if s.actions.len() > 1024 {
        return Err(ctx.invalid(f("actions"), "at most 1024 actions"));
    }
    let mut actions = Vec::with_capacity(s.actions.len());
    for (j, a) in s.actions.iter().enumerate() {
        let field = f(&format!("actions[{j}]"));
        let act = action(ctx, &field, a)?;
        if udp != matches!(act, Action::Udp(_)) {
            return Err(ctx.invalid(
                format!("{field}.action"),
                format!(
                    "{} is not an action of a {} flow; use {}-… actions here",
                    a.action,
                    fd.kind.name(),
                    if udp { "udp" } else { "tcp" }
                ),
            ));
        }
        let (raw, complex): (Vec<(String, u16)>, bool) = match (&a.param, a.level, &a.inputs) {
            (Some(p), Some(l), None) => (vec![(p.clone(), l)], false),
            (None, None, Some(inputs)) if !inputs.is_empty() && inputs.len() <= 16 => {
                (inputs.clone(), true)
            }
            _ => {
                return Err(ctx.invalid(
                    field,
                    "give param and level (a simple action) or inputs = [[param, level], …] \
                     with 1 to 16 inputs (a complex action), not both",
                ));
            }
        };
        let mut inputs = Vec::with_capacity(raw.len());
        for (name, level) in raw {
            let param = Param::from_name(&name)
                .map_err(|e| ctx.invalid(format!("{field}.param"), e.to_string()))?;
            let Some(def) = params.iter().find(|p| p.param == param) else {
                return Err(ctx.invalid(
                    format!("{field}.param"),
                    format!("parameter {name:?} is not in env.params; add it with its levels"),
                ));
            };
            if usize::from(level) >= def.watermarks.len() {
                return Err(ctx.invalid(
                    format!("{field}.level"),
                    format!(
                        "{name} has {} levels (0 ..= {}); pick one of them",
                        def.watermarks.len(),
                        def.watermarks.len().saturating_sub(1)
                    ),
                ));
            }
            inputs.push((param, level));
        }
        actions.push(EnvActionDef {
            inputs,
            complex,
            action: act,
        });
    }
    Ok(EnvSocketDef {
        flow,
        sender_side,
        packets: s.packets,
        buffer_datagrams,
        actions,
    })
}

/// Intervals during which a piecewise-constant timeline is below `below`.
pub fn below_intervals(points: &[(Time, f64)], below: f64, end: Time) -> Vec<(Time, Time)> {
    let mut out: Vec<(Time, Time)> = Vec::new();
    let mut open: Option<Time> = None;
    for &(t, v) in points {
        match (open, v < below) {
            (None, true) => open = Some(t),
            (Some(s), false) => {
                out.push((s, t));
                open = None;
            }
            _ => {}
        }
    }
    if let Some(s) = open
        && s < end
    {
        out.push((s, end));
    }
    out
}

/// What the environment does in one run.
#[derive(Clone, Debug, Default)]
pub struct EnvTimeline {
    /// `(time, parameter, value)` in time order (stable for equal times).
    pub points: Vec<(Time, Param, f64)>,
    /// `(link name, blackout)`: when the environment's link loses every packet it sends
    /// (see [`crate::link::Link::set_blackouts`]).
    pub outages: Vec<(String, Outage)>,
}

impl EnvDef {
    /// Every value the host's source sets in a run with `seed`, and the link outages the
    /// environment implies (`(link name, outage)`), for a run ending at `end`.
    pub fn timeline(&self, seed: u64, end: Time) -> EnvTimeline {
        let mut points = Vec::new();
        let mut outages = Vec::new();
        for p in &self.params {
            points.extend(p.points.iter().map(|&(t, v)| (t, p.param.clone(), v)));
            if let Some((link, below)) = &p.outage_below {
                for (s, e) in below_intervals(&p.points, *below, end) {
                    outages.push((
                        link.clone(),
                        Outage {
                            start: s,
                            duration: e - s,
                        },
                    ));
                }
            }
        }
        if let Some(h) = &self.handoffs {
            points.push((Time::ZERO, Param::Availability, AVAIL_NONE));
            points.push((Time::ZERO, Param::Availability, AVAIL_UP));
            for ho in h.plan(seed) {
                points.push((ho.started, Param::Availability, AVAIL_HANDOFF));
                points.push((ho.over, Param::Availability, AVAIL_DONE));
                points.push((ho.over, Param::Availability, AVAIL_UP));
                outages.push((
                    h.link.clone(),
                    Outage {
                        start: ho.faded,
                        duration: ho.over - ho.faded,
                    },
                ));
            }
        }
        points.sort_by_key(|p| p.0);
        EnvTimeline { points, outages }
    }
}

/// Adds `extra` periods to a link's sorted, non-overlapping list, merging overlaps.
pub fn merge_outages(list: &mut Vec<Outage>, extra: &[Outage]) {
    list.extend_from_slice(extra);
    list.sort_by_key(|o| o.start);
    let mut merged: Vec<Outage> = Vec::with_capacity(list.len());
    for o in list.drain(..) {
        match merged.last_mut() {
            Some(last) if o.start <= last.start + last.duration => {
                let end = (last.start + last.duration).max(o.start + o.duration);
                last.duration = end - last.start;
            }
            _ => merged.push(o),
        }
    }
    *list = merged;
}

#[cfg(test)]
#[path = "env_tests.rs"]
mod tests;
