//! The Congestion Manager in scenario files (papers/003): the `tcp-cm`, `cm-audio` and `cm-udp`
//! flow types, the `[cm]` table, and the agents they become. All CM flows leaving one host share
//! that host's CM and are grouped into macroflows by destination; a host that receives
//! probe-fed flows (`cm-audio`, `cm-udp`) gets a receiver CM. See [`crate::agents::cm`].
//!
//! ```toml
//! [cm]
//! mtu_bytes = 1000
//!
//! [[flows]]
//! type = "tcp-cm"        # the keys of "tcp", plus weight
//! from = "s0"
//! to = "r0"
//! bytes = 1000000
//! mss = 1000
//!
//! [[flows]]
//! type = "cm-audio"      # encodings_kbps (default 10..320), packet_bytes (1000), weight
//! from = "s0"
//! to = "r0"
//! ```

use super::fields::{Ctx, positive, time_ms};
use super::schema::{CmAudioFlowSpec, CmSpec, CmUdpFlowSpec, TcpCmFlowSpec, TcpFlowSpec};
use super::tcp::tcp_flow;
use super::{FlowDef, FlowType, ScenarioError};
use crate::agent::Agent;
use crate::agents::cm::{
    CmAudioSender, CmDatagramReceiver, CmHost, CmHostAgent, CmUdpSender, TcpCmSender,
};
use crate::agents::tcp::TcpReceiver;
use crate::packet::{Addr, NodeId, Proto};
use crate::world::{World, WorldError};
use adaptnet_core::cm::audio::AudioConfig;
use adaptnet_core::cm::{AgingHalfLife, AgingTrigger, CmConfig, FlowOptions, Thresholds};
use std::collections::BTreeMap;
use std::time::Duration;

/// A flow's sender agent, receiver agent and protocol.
pub(super) type FlowAgents = (Box<dyn Agent>, Box<dyn Agent>, Proto);

/// Scheduler weights and hints the CM accepts.
const WEIGHT_RANGE: std::ops::RangeInclusive<f64> = 1e-6..=1e6;

fn weight(ctx: &Ctx, field: &str, w: Option<f64>) -> Result<f64, ScenarioError> {
    let w = w.unwrap_or(1.0);
    if w.is_finite() && WEIGHT_RANGE.contains(&w) {
        Ok(w)
    } else {
        Err(ctx.invalid(
            format!("{field}.weight"),
            format!("must be a number in [1e-6, 1e6], got {w}"),
        ))
    }
}

fn datagram_bytes(ctx: &Ctx, field: &str, v: Option<u32>) -> Result<u32, ScenarioError> {
    let v = v.unwrap_or(1000);
    if (12..=65_507).contains(&v) {
        Ok(v)
    } else {
        Err(ctx.invalid(
            format!("{field}.packet_bytes"),
            format!("must be in 12..=65507 (the datagram header is 12 bytes), got {v}"),
        ))
    }
}

/// Validates a `tcp-cm` flow.
pub(super) fn tcp_cm_flow(
    ctx: &Ctx,
    field: &str,
    s: &TcpCmFlowSpec,
) -> Result<FlowType, ScenarioError> {
    let tcp = TcpFlowSpec {
        bytes: s.bytes,
        mss: s.mss,
        delayed_ack_ms: s.delayed_ack_ms,
        rto_min_ms: s.rto_min_ms,
        recv_buffer_bytes: s.recv_buffer_bytes,
        ..TcpFlowSpec::default()
    };
    let FlowType::Tcp { bytes, config } = tcp_flow(ctx, field, &tcp)? else {
        return Err(ctx.invalid(field, "internal: tcp validation changed type"));
    };
    Ok(FlowType::TcpCm {
        bytes,
        config,
        weight: weight(ctx, field, s.weight)?,
    })
}

/// Validates a `cm-audio` flow.
pub(super) fn cm_audio_flow(
    ctx: &Ctx,
    field: &str,
    s: &CmAudioFlowSpec,
) -> Result<FlowType, ScenarioError> {
    let mut encodings_bps = Vec::new();
    match &s.encodings_kbps {
        None => encodings_bps = AudioConfig::paper().encodings_bps,
        Some(list) if list.is_empty() => {
            return Err(ctx.invalid(
                format!("{field}.encodings_kbps"),
                "list at least one encoding",
            ));
        }
        Some(list) => {
            for (i, k) in list.iter().enumerate() {
                let k = positive(ctx, &format!("{field}.encodings_kbps[{i}]"), *k)?;
                if k > 1e7 {
                    return Err(ctx.invalid(
                        format!("{field}.encodings_kbps[{i}]"),
                        format!("must be at most 1e7 kbit/s, got {k}"),
                    ));
                }
                encodings_bps.push(adaptnet_core::convert::f64_u64_sat(
                    (k * 1e3).round().max(1.0),
                ));
            }
        }
    }
    Ok(FlowType::CmAudio {
        encodings_bps,
        packet_bytes: datagram_bytes(ctx, field, s.packet_bytes)?,
        weight: weight(ctx, field, s.weight)?,
        thresholds: change_rate(ctx, field, s.change_rate.as_deref())?,
    })
}

/// Validates a `cm-udp` flow.
pub(super) fn cm_udp_flow(
    ctx: &Ctx,
    field: &str,
    s: &CmUdpFlowSpec,
) -> Result<FlowType, ScenarioError> {
    if s.bytes == Some(0) {
        return Err(ctx.invalid(format!("{field}.bytes"), "must be at least 1"));
    }
    Ok(FlowType::CmUdp {
        bytes: s.bytes,
        packet_bytes: datagram_bytes(ctx, field, s.packet_bytes)?,
        weight: weight(ctx, field, s.weight)?,
        thresholds: change_rate(ctx, field, s.change_rate.as_deref())?,
    })
}

/// A flow's `change_rate` key: the default thresholds or the paper's every change.
fn change_rate(ctx: &Ctx, field: &str, v: Option<&str>) -> Result<Thresholds, ScenarioError> {
    match v {
        None | Some("thresholds") => Ok(Thresholds::DEFAULT),
        Some("every-change") => Ok(Thresholds::EVERY_RATE_CHANGE),
        Some(other) => Err(ctx.invalid(
            format!("{field}.change_rate"),
            format!("unknown value {other:?}; use \"thresholds\" or \"every-change\""),
        )),
    }
}

/// Validates the `[cm]` table; defaults depend on the flows (the MTU is the largest `tcp-cm`
/// MSS when not given).
pub(super) fn cm_config(
    ctx: &Ctx,
    spec: Option<&CmSpec>,
    flows: &[FlowDef],
) -> Result<CmConfig, ScenarioError> {
    let default = CmSpec::default();
    let s = spec.unwrap_or(&default);
    let largest_mss = flows
        .iter()
        .filter_map(|f| match &f.kind {
            FlowType::TcpCm { config, .. } => Some(u64::from(config.mss)),
            _ => None,
        })
        .max();
    let mtu = s.mtu_bytes.or(largest_mss).unwrap_or(1460);
    if !(64..=65_535).contains(&mtu) {
        return Err(ctx.invalid("cm.mtu_bytes", format!("must be in 64..=65535, got {mtu}")));
    }
    let burst = s.burst_bytes.unwrap_or(2 * mtu);
    if burst < mtu {
        return Err(ctx.invalid(
            "cm.burst_bytes",
            format!("must be at least mtu_bytes ({mtu}), got {burst}"),
        ));
    }
    let probes_per_rtt = s.probes_per_rtt.unwrap_or(2.0);
    if !(0.1..=100.0).contains(&probes_per_rtt) {
        return Err(ctx.invalid(
            "cm.probes_per_rtt",
            format!("must be in [0.1, 100], got {probes_per_rtt}"),
        ));
    }
    let aging_half_life = match s.aging_half_life.as_deref() {
        None | Some("min-rtt") => AgingHalfLife::MinRtt,
        Some("srtt") => AgingHalfLife::Srtt,
        Some(other) => {
            return Err(ctx.invalid(
                "cm.aging_half_life",
                format!("unknown value {other:?}; use \"min-rtt\" or \"srtt\""),
            ));
        }
    };
    let aging_trigger = match s.aging_trigger.as_deref() {
        None | Some("srtt") => AgingTrigger::Srtt,
        Some("rto") => AgingTrigger::Rto,
        Some(other) => {
            return Err(ctx.invalid(
                "cm.aging_trigger",
                format!("unknown value {other:?}; use \"srtt\" or \"rto\""),
            ));
        }
    };
    let initial_rtt_ms = time_ms(
        ctx,
        "cm.initial_rtt_ms",
        s.initial_rtt_ms.unwrap_or(1000.0),
        false,
    )?;
    if initial_rtt_ms > 60_000.0 {
        return Err(ctx.invalid("cm.initial_rtt_ms", "must be at most 60000"));
    }
    Ok(CmConfig {
        mtu_bytes: mtu,
        burst_bytes: burst,
        probes_per_rtt,
        aging_half_life,
        aging_trigger,
        initial_rtt: Duration::from_secs_f64(initial_rtt_ms / 1e3),
        ..CmConfig::default()
    })
}

/// The CM hosts of a world being built. Call [`CmHosts::install`] after every flow is added,
/// so each host agent is polled after its flows (see [`crate::agents::cm`]).
pub(super) struct CmHosts {
    config: CmConfig,
    hosts: BTreeMap<NodeId, CmHost>,
}

impl CmHosts {
    pub(super) fn new(config: CmConfig) -> CmHosts {
        CmHosts {
            config,
            hosts: BTreeMap::new(),
        }
    }

    fn host(&mut self, node: NodeId) -> CmHost {
        self.hosts
            .entry(node)
            .or_insert_with(|| CmHost::new(node, self.config.clone()))
            .clone()
    }

    /// The sender and receiver agents of a CM flow, and their protocol; `None` for other types.
    pub(super) fn agents(
        &mut self,
        kind: &FlowType,
        local: Addr,
        remote: Addr,
        isn: u32,
    ) -> Option<FlowAgents> {
        let implicit = |w: f64| FlowOptions {
            weight: w,
            ..FlowOptions::implicit()
        };
        let probed = |w: f64, thresholds: Thresholds| FlowOptions {
            weight: w,
            thresholds,
            ..FlowOptions::probed()
        };
        Some(match kind {
            FlowType::TcpCm {
                bytes,
                config,
                weight,
            } => {
                let host = self.host(local.node);
                let sender = TcpCmSender::new(
                    host,
                    local,
                    remote,
                    config.clone(),
                    *bytes,
                    isn,
                    implicit(*weight),
                );
                let receiver = TcpReceiver::new(remote, local, config.clone(), isn ^ 0x5555_5555);
                (Box::new(sender), Box::new(receiver), Proto::Tcp)
            }
            FlowType::CmAudio {
                encodings_bps,
                packet_bytes,
                weight,
                thresholds,
            } => {
                let config = AudioConfig {
                    encodings_bps: encodings_bps.clone(),
                    packet_bytes: *packet_bytes,
                };
                let sender = CmAudioSender::new(
                    self.host(local.node),
                    local,
                    remote,
                    config,
                    probed(*weight, *thresholds),
                );
                let receiver = CmDatagramReceiver::new(self.host(remote.node));
                (Box::new(sender), Box::new(receiver), Proto::Udp)
            }
            FlowType::CmUdp {
                bytes,
                packet_bytes,
                weight,
                thresholds,
            } => {
                let sender = CmUdpSender::new(
                    self.host(local.node),
                    local,
                    remote,
                    *packet_bytes,
                    *bytes,
                    probed(*weight, *thresholds),
                );
                let receiver = CmDatagramReceiver::new(self.host(remote.node));
                (Box::new(sender), Box::new(receiver), Proto::Udp)
            }
            FlowType::Tcp { .. } | FlowType::Cbr { .. } | FlowType::Media(_) => return None,
        })
    }

    /// Adds each host's CM agent (after its flows).
    pub(super) fn install(self, world: &mut World) -> Result<(), WorldError> {
        for (node, host) in self.hosts {
            world.add_agent(
                node,
                Proto::Udp,
                crate::agents::cm::CM_PORT,
                Box::new(CmHostAgent::new(host)),
            )?;
        }
        Ok(())
    }
}
