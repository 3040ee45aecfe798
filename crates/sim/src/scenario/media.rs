//! Media flows with TCP-friendly rate control in scenario files (`papers/002`, issue 11): the
//! flow types `tpba`, `lda`, `ldaf` and `tfrc`, their keys, their validation, and the agents
//! they become ([`crate::agents::tpba`], [`crate::agents::lda`], [`crate::agents::tfrc`]).
//! Every parameter of Tables 1 and 2 (and §7's options) is a key; defaults are the paper's.
//!
//! ```toml
//! [[flows]]
//! type = "tpba"            # Table 2, §6.1 defaults:
//! from = "s2"
//! to = "r2"
//! start_s = 1
//! t_running_s = 10         # T_running
//! t_tcp_s = 1              # T_TCP (sampling period of the probing period)
//! epsilon_kbps = 30        # ε; or z_percent = 5 (§7's relative criterion)
//! sampling = "fixed"       # or "cwnd-reductions" (§7) with sampling_min_s / sampling_max_s
//! t_adapt_s = 3            # T_adapt
//! t_rtcp_s = 1             # T_rtcp
//! r_f = 3.0                # R_f
//! adu_bytes = 5120         # ADU2 (ADU1: adu_bytes = 64, write_bytes = 64)
//! write_bytes = 512
//! recv_buffer_bytes = 16384  # the probing TCP's options: the keys of a `tcp` flow
//!
//! [[flows]]
//! type = "lda"             # or "ldaf" (fixed AIR, §6.2); Table 1:
//! t_adapt_s = 3
//! t_rtcp_s = 1
//! r0_kbps = 600
//! air0_kbps = 10
//! r_f = 3.0
//! packet_bytes = 512
//! bottleneck = "packet-pair"   # or "none", or bottleneck_kbps = 1100
//!
//! [[flows]]
//! type = "tfrc"            # RFC 5348
//! segment_bytes = 512
//! ```

use super::fields::{Ctx, positive, time_s};
use super::schema::{InitialWindowSpec, TcpFlowSpec};
use super::tcp::tcp_flow;
use super::{FlowType, ScenarioError};
use crate::agent::Agent;
use crate::agents::lda::{Bottleneck, LdaFlowConfig, LdaReceiver, LdaSender};
use crate::agents::stream::StreamTags;
use crate::agents::tfrc::{TfrcReceiver, TfrcSender};
use crate::agents::tpba::{TpbaFlowConfig, TpbaReceiver, TpbaSender};
use crate::packet::Addr;
use adaptnet_core::ratectl::kbps;
use adaptnet_core::ratectl::lda::{AirUpdate, LdaConfig};
use adaptnet_core::ratectl::tfrc::TfrcConfig;
use adaptnet_core::tpba::{Agreement, FsConfig, LargeDecrease, Sampling, TpbaConfig};
use serde::Deserialize;
use std::time::Duration;

/// A validated media flow.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub enum MediaFlow {
    /// TPBA (`papers/002` §4).
    Tpba(Box<TpbaFlowConfig>),
    /// LDA or LDAF (§3, §6.2).
    Lda(LdaFlowConfig),
    /// TFRC (RFC 5348).
    Tfrc(TfrcConfig),
}

impl MediaFlow {
    /// The type's name in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            MediaFlow::Tpba(_) => "tpba",
            MediaFlow::Lda(c) if c.lda.air_update == AirUpdate::Fixed => "ldaf",
            MediaFlow::Lda(_) => "lda",
            MediaFlow::Tfrc(_) => "tfrc",
        }
    }

    /// Whether the flow also needs a TCP port (TPBA's probing path).
    pub fn uses_tcp(&self) -> bool {
        matches!(self, MediaFlow::Tpba(_))
    }

    /// The sender and receiver agents. `isn` seeds TPBA's TCP connection.
    pub(super) fn agents(
        &self,
        local: Addr,
        remote: Addr,
        isn: u32,
    ) -> (Box<dyn Agent>, Box<dyn Agent>) {
        match self {
            MediaFlow::Tpba(c) => {
                let tags = StreamTags::new();
                (
                    Box::new(TpbaSender::new(
                        local,
                        remote,
                        (**c).clone(),
                        isn,
                        tags.clone(),
                    )),
                    Box::new(TpbaReceiver::new(
                        remote,
                        local,
                        (**c).clone(),
                        isn ^ 0x5555_5555,
                        tags,
                    )),
                )
            }
            MediaFlow::Lda(c) => (
                Box::new(LdaSender::new(local, remote, c.clone())),
                Box::new(LdaReceiver::new(remote, local, c.lda.t_rtcp)),
            ),
            MediaFlow::Tfrc(c) => (
                Box::new(TfrcSender::new(local, remote, c.clone())),
                Box::new(TfrcReceiver::new(remote, local)),
            ),
        }
    }
}

/// `tpba` flow keys.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TpbaFlowSpec {
    /// `T_running`, s (default 10).
    pub t_running_s: Option<f64>,
    /// `T_TCP`, s (default 1).
    pub t_tcp_s: Option<f64>,
    /// `ε`, kbit/s (default 30).
    pub epsilon_kbps: Option<f64>,
    /// §7's `z %` instead of `ε`.
    pub z_percent: Option<f64>,
    /// `"fixed"` (default) or `"cwnd-reductions"` (§7).
    pub sampling: Option<String>,
    /// Shortest sampling period with `cwnd-reductions`, s (default 0.2).
    pub sampling_min_s: Option<f64>,
    /// Longest sampling period with `cwnd-reductions`, s (default 4 × `t_tcp_s`).
    pub sampling_max_s: Option<f64>,
    /// `T_rtcp`, s (default 1).
    pub t_rtcp_s: Option<f64>,
    /// `T_adapt`, s (default 3).
    pub t_adapt_s: Option<f64>,
    /// `R_f` (default 3).
    pub r_f: Option<f64>,
    /// Lowest running rate, kbit/s (default one 512-byte packet per second).
    pub r_min_kbps: Option<f64>,
    /// §4's early return to probing: fraction of the rate a decrease must remove to count.
    pub large_decrease_fraction: Option<f64>,
    /// §4's early return to probing: this many large decreases in a row.
    pub large_decrease_successive: Option<u32>,
    /// End probing with the mean of the last three samples after this many (default never).
    pub max_probe_samples: Option<u32>,
    /// ADU bytes per UDP datagram (default 512).
    pub udp_payload_bytes: Option<u32>,
    /// The flow's TCP send buffer, bytes (default 65536).
    pub tcp_buffer_bytes: Option<u64>,
    /// The fsocket's send queue, bytes (default 4 ADUs).
    pub send_queue_bytes: Option<u64>,
    /// Receiver's wait for a lost fragment, ms (default 500).
    pub reorder_timeout_ms: Option<f64>,
    /// Bytes per ADU (default 5120, the paper's ADU2).
    pub adu_bytes: Option<u32>,
    /// Bytes per `f_send` (default 512; ADU1: 64).
    pub write_bytes: Option<u32>,
    /// The probing TCP's MSS (default 1460).
    pub mss: Option<u16>,
    /// The probing TCP's delayed-ACK timeout, ms (default off).
    pub delayed_ack_ms: Option<f64>,
    /// The probing TCP's minimum RTO, ms (default 1000).
    pub rto_min_ms: Option<f64>,
    /// The probing TCP's receive buffer, bytes (default 4 MiB).
    pub recv_buffer_bytes: Option<u64>,
    /// The probing TCP's initial window.
    pub initial_window: Option<InitialWindowSpec>,
    /// The probing TCP's SACK option.
    pub sack: Option<bool>,
}

/// `lda` / `ldaf` flow keys (Table 1).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LdaFlowSpec {
    /// `T_adapt`, s (default 3).
    pub t_adapt_s: Option<f64>,
    /// `T_rtcp`, s (default 1).
    pub t_rtcp_s: Option<f64>,
    /// `r0`, kbit/s (default 600, §3).
    pub r0_kbps: Option<f64>,
    /// `r_min`, kbit/s (default one 512-byte packet per second).
    pub r_min_kbps: Option<f64>,
    /// `AIR0`, kbit/s (default 10).
    pub air0_kbps: Option<f64>,
    /// `R_f` (default 3).
    pub r_f: Option<f64>,
    /// RTP payload bytes per datagram (default 512).
    pub packet_bytes: Option<u32>,
    /// `"packet-pair"` (default) or `"none"`.
    pub bottleneck: Option<String>,
    /// A fixed `b`, kbit/s of payload, instead of packet pairs.
    pub bottleneck_kbps: Option<f64>,
}

/// `tfrc` flow keys.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TfrcFlowSpec {
    /// `s`, bytes per packet (default 512).
    pub segment_bytes: Option<u32>,
    /// `b` of the throughput equation (default 1).
    pub b: Option<f64>,
    /// `t_mbi`, s (default 64).
    pub t_mbi_s: Option<f64>,
}

fn opt_time(
    ctx: &Ctx,
    field: &str,
    key: &str,
    v: Option<f64>,
    d: f64,
) -> Result<Duration, ScenarioError> {
    let v = time_s(ctx, &format!("{field}.{key}"), v.unwrap_or(d), false)?;
    Ok(Duration::from_secs_f64(v))
}

fn opt_kbps(
    ctx: &Ctx,
    field: &str,
    key: &str,
    v: Option<f64>,
    d: f64,
) -> Result<f64, ScenarioError> {
    let v = positive(ctx, &format!("{field}.{key}"), v.unwrap_or(d))?;
    if v > 1e7 {
        return Err(ctx.invalid(
            format!("{field}.{key}"),
            format!("must be at most 1e7 kbit/s, got {v}"),
        ));
    }
    Ok(kbps(v))
}

fn reduction_factor(ctx: &Ctx, field: &str, v: Option<f64>) -> Result<f64, ScenarioError> {
    let r_f = v.unwrap_or(3.0);
    if r_f.is_finite() && (0.0..=100.0).contains(&r_f) && r_f > 0.0 {
        Ok(r_f)
    } else {
        Err(ctx.invalid(
            format!("{field}.r_f"),
            format!("must be in (0, 100] (the paper uses 3.0 and 6.0), got {r_f}"),
        ))
    }
}

fn bytes_in(
    ctx: &Ctx,
    field: &str,
    key: &str,
    v: Option<u32>,
    d: u32,
    range: std::ops::RangeInclusive<u32>,
) -> Result<u32, ScenarioError> {
    let v = v.unwrap_or(d);
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(ctx.invalid(
            format!("{field}.{key}"),
            format!("must be in {}..={}, got {v}", range.start(), range.end()),
        ))
    }
}

/// Validates a `tpba` flow.
pub(super) fn tpba_flow(
    ctx: &Ctx,
    field: &str,
    s: &TpbaFlowSpec,
) -> Result<FlowType, ScenarioError> {
    let t_tcp = opt_time(ctx, field, "t_tcp_s", s.t_tcp_s, 1.0)?;
    let agreement = match (s.epsilon_kbps, s.z_percent) {
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(
                field,
                "set at most one of epsilon_kbps (§4) and z_percent (§7)",
            ));
        }
        (_, Some(z)) => {
            if !(z.is_finite() && z > 0.0 && z <= 100.0) {
                return Err(ctx.invalid(
                    format!("{field}.z_percent"),
                    format!("must be in (0, 100], got {z}"),
                ));
            }
            Agreement::Relative { z: z / 100.0 }
        }
        (e, None) => Agreement::Absolute {
            epsilon_bytes_per_s: opt_kbps(ctx, field, "epsilon_kbps", e, 30.0)?,
        },
    };
    let sampling = match s.sampling.as_deref() {
        None | Some("fixed") => {
            if s.sampling_min_s.is_some() || s.sampling_max_s.is_some() {
                return Err(ctx.invalid(
                    field,
                    "sampling_min_s / sampling_max_s need sampling = \"cwnd-reductions\"",
                ));
            }
            Sampling::Fixed
        }
        Some("cwnd-reductions") => {
            let min_period = opt_time(ctx, field, "sampling_min_s", s.sampling_min_s, 0.2)?;
            let max_period = opt_time(
                ctx,
                field,
                "sampling_max_s",
                s.sampling_max_s,
                4.0 * t_tcp.as_secs_f64(),
            )?;
            if max_period < min_period {
                return Err(ctx.invalid(
                    format!("{field}.sampling_max_s"),
                    "must be at least sampling_min_s",
                ));
            }
            Sampling::CwndReductions {
                min_period,
                max_period,
            }
        }
        Some(other) => {
            return Err(ctx.invalid(
                format!("{field}.sampling"),
                format!("unknown value {other:?}; use \"fixed\" or \"cwnd-reductions\""),
            ));
        }
    };
    let large_decrease = match (s.large_decrease_fraction, s.large_decrease_successive) {
        (None, None) => None,
        (Some(f), Some(n)) if f.is_finite() && f > 0.0 && f <= 1.0 && n >= 1 => {
            Some(LargeDecrease {
                fraction: f,
                successive: n,
            })
        }
        _ => {
            return Err(ctx.invalid(
                field,
                "set both large_decrease_fraction (in (0, 1]) and large_decrease_successive \
                 (≥ 1), or neither",
            ));
        }
    };
    if s.max_probe_samples.is_some_and(|n| n < 3) {
        return Err(ctx.invalid(
            format!("{field}.max_probe_samples"),
            "must be at least 3 (agreement needs three samples)",
        ));
    }
    let tpba = TpbaConfig {
        t_running: opt_time(ctx, field, "t_running_s", s.t_running_s, 10.0)?,
        t_tcp,
        agreement,
        sampling,
        t_rtcp: opt_time(ctx, field, "t_rtcp_s", s.t_rtcp_s, 1.0)?,
        t_adapt: opt_time(ctx, field, "t_adapt_s", s.t_adapt_s, 3.0)?,
        r_f: reduction_factor(ctx, field, s.r_f)?,
        r_min_bytes_per_s: opt_kbps(ctx, field, "r_min_kbps", s.r_min_kbps, 4.096)?,
        large_decrease,
        max_probe_samples: s.max_probe_samples,
    };
    let adu_bytes = bytes_in(ctx, field, "adu_bytes", s.adu_bytes, 5120, 1..=1 << 20)?;
    let write_bytes = bytes_in(ctx, field, "write_bytes", s.write_bytes, 512, 1..=adu_bytes)?;
    let udp_payload_bytes = bytes_in(
        ctx,
        field,
        "udp_payload_bytes",
        s.udp_payload_bytes,
        512,
        1..=65_000,
    )?;
    let send_queue_bytes = s.send_queue_bytes.unwrap_or(4 * u64::from(adu_bytes));
    if send_queue_bytes < u64::from(adu_bytes) {
        return Err(ctx.invalid(
            format!("{field}.send_queue_bytes"),
            format!("must hold at least one ADU ({adu_bytes} bytes)"),
        ));
    }
    let tcp_buffer_bytes = s.tcp_buffer_bytes.unwrap_or(65_536);
    if tcp_buffer_bytes < 1024 {
        return Err(ctx.invalid(format!("{field}.tcp_buffer_bytes"), "must be at least 1024"));
    }
    let reorder_ms = s.reorder_timeout_ms.unwrap_or(500.0);
    let reorder_timeout = Duration::from_secs_f64(time_s(
        ctx,
        &format!("{field}.reorder_timeout_ms"),
        reorder_ms / 1e3,
        false,
    )?);
    let tcp_spec = TcpFlowSpec {
        mss: s.mss,
        delayed_ack_ms: s.delayed_ack_ms,
        rto_min_ms: s.rto_min_ms,
        recv_buffer_bytes: s.recv_buffer_bytes,
        initial_window: s.initial_window.clone(),
        sack: s.sack,
        ..TcpFlowSpec::default()
    };
    let FlowType::Tcp { config: tcp, .. } = tcp_flow(ctx, field, &tcp_spec)? else {
        return Err(ctx.invalid(field, "internal: tcp validation changed type"));
    };
    let fs = FsConfig {
        tpba,
        udp_payload_bytes,
        tcp_buffer_bytes,
        send_queue_bytes,
        max_adu_bytes: adu_bytes,
        reorder_timeout,
        ..FsConfig::default()
    };
    Ok(FlowType::Media(MediaFlow::Tpba(Box::new(TpbaFlowConfig {
        fs,
        tcp,
        adu_bytes,
        write_bytes,
    }))))
}

/// Validates an `lda` (`fixed_air` false) or `ldaf` flow.
pub(super) fn lda_flow(
    ctx: &Ctx,
    field: &str,
    s: &LdaFlowSpec,
    fixed_air: bool,
) -> Result<FlowType, ScenarioError> {
    let lda = LdaConfig {
        t_adapt: opt_time(ctx, field, "t_adapt_s", s.t_adapt_s, 3.0)?,
        t_rtcp: opt_time(ctx, field, "t_rtcp_s", s.t_rtcp_s, 1.0)?,
        r0_bytes_per_s: opt_kbps(ctx, field, "r0_kbps", s.r0_kbps, 600.0)?,
        r_min_bytes_per_s: opt_kbps(ctx, field, "r_min_kbps", s.r_min_kbps, 4.096)?,
        air0_bytes_per_s: opt_kbps(ctx, field, "air0_kbps", s.air0_kbps, 10.0)?,
        r_f: reduction_factor(ctx, field, s.r_f)?,
        packet_bytes: bytes_in(ctx, field, "packet_bytes", s.packet_bytes, 512, 1..=65_000)?,
        air_update: if fixed_air {
            AirUpdate::Fixed
        } else {
            AirUpdate::Iterated
        },
    };
    let bottleneck = match (s.bottleneck.as_deref(), s.bottleneck_kbps) {
        (None | Some("fixed"), Some(b)) => {
            Bottleneck::Fixed(opt_kbps(ctx, field, "bottleneck_kbps", Some(b), 0.0)?)
        }
        (None | Some("packet-pair"), None) => Bottleneck::PacketPair,
        (Some("none"), None) => Bottleneck::Unknown,
        (Some(other), None) => {
            return Err(ctx.invalid(
                format!("{field}.bottleneck"),
                format!("unknown value {other:?}; use \"packet-pair\" or \"none\", or set bottleneck_kbps"),
            ));
        }
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(
                field,
                "set bottleneck (\"packet-pair\" | \"none\") or bottleneck_kbps, not both",
            ));
        }
    };
    Ok(FlowType::Media(MediaFlow::Lda(LdaFlowConfig {
        lda,
        bottleneck,
    })))
}

/// Validates a `tfrc` flow.
pub(super) fn tfrc_flow(
    ctx: &Ctx,
    field: &str,
    s: &TfrcFlowSpec,
) -> Result<FlowType, ScenarioError> {
    let b = s.b.unwrap_or(1.0);
    if !(b.is_finite() && (1.0..=8.0).contains(&b)) {
        return Err(ctx.invalid(
            format!("{field}.b"),
            format!("must be in [1, 8] (packets per ACK; RFC 5348 uses 1), got {b}"),
        ));
    }
    Ok(FlowType::Media(MediaFlow::Tfrc(TfrcConfig {
        segment_bytes: bytes_in(
            ctx,
            field,
            "segment_bytes",
            s.segment_bytes,
            512,
            32..=65_000,
        )?,
        b,
        t_mbi: opt_time(ctx, field, "t_mbi_s", s.t_mbi_s, 64.0)?,
    })))
}

/// Parses and validates the flow-type-specific keys of a media flow; `None` if `kind` is not
/// a media type.
pub(super) fn media_flow(
    ctx: &Ctx,
    field: &str,
    kind: &str,
    rest: toml::Value,
) -> Option<Result<FlowType, ScenarioError>> {
    let err = |e: toml::de::Error| ctx.invalid(field, format!("{kind} flow: {}", e.message()));
    Some(match kind {
        "tpba" => TpbaFlowSpec::deserialize(rest)
            .map_err(err)
            .and_then(|s| tpba_flow(ctx, field, &s)),
        "lda" | "ldaf" => LdaFlowSpec::deserialize(rest)
            .map_err(err)
            .and_then(|s| lda_flow(ctx, field, &s, kind == "ldaf")),
        "tfrc" => TfrcFlowSpec::deserialize(rest)
            .map_err(err)
            .and_then(|s| tfrc_flow(ctx, field, &s)),
        _ => return None,
    })
}

#[cfg(test)]
#[path = "media_tests.rs"]
mod tests;
