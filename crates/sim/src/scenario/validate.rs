//! Validating a parsed scenario file into a [`Scenario`](super::Scenario): the topology, the
//! links and the flows (TCP options in `tcp.rs`, the CM's flow types in `cm.rs`, single values
//! in `fields.rs`). Every check names the field it is about.

use super::fields::*;
use super::schema::{
    CbrFlowSpec, CmAudioFlowSpec, CmUdpFlowSpec, FLOW_COMMON_KEYS, FlowCommon, LinkSpec, LossSpec,
    ScenarioFile, TcpCmFlowSpec, TcpFlowSpec, TopologySpec, TraceFormat, TraceSpec,
};
use super::tcp::tcp_flow;
use super::{FlowDef, FlowType, LinkDef, Scenario, ScenarioError, TopologyDef};
use crate::link::{Bandwidth, LinkConfig, LossModel, Outage, QueueLimit, Reorder};
use crate::trace::{MahimahiTrace, PiecewiseTrace};
use adaptnet_core::Time;
use serde::Deserialize;
use std::time::Duration;

/// Validates a whole file.
pub(super) fn validate(
    ctx: &Ctx,
    file: ScenarioFile,
    name: String,
) -> Result<Scenario, ScenarioError> {
    let duration_s = time_s(ctx, "duration_s", file.duration_s, false)?;
    let sample_period_s = time_s(
        ctx,
        "sample_period_s",
        file.sample_period_s.unwrap_or(1.0),
        false,
    )?;
    let topology = topology(ctx, &file.topology)?;
    let mut flows = Vec::with_capacity(file.flows.len());
    for (i, table) in file.flows.into_iter().enumerate() {
        flows.push(flow(ctx, i, table, duration_s, &topology)?);
    }
    let cm = super::cm::cm_config(ctx, file.cm.as_ref(), &flows)?;
    let env = super::env::env_def(ctx, file.env.as_ref(), &topology, &flows, duration_s)?;
    for (i, link) in file.outputs.pcap.iter().enumerate() {
        if !topology.links().iter().any(|l| &l.name == link) {
            let known: Vec<&str> = topology.links().iter().map(|l| l.name.as_str()).collect();
            return Err(ctx.invalid(
                format!("outputs.pcap[{i}]"),
                format!("no link named {link:?}; links are {known:?}"),
            ));
        }
    }
    Ok(Scenario {
        name,
        description: file.description,
        file: ctx.file.to_string(),
        duration: Time::from_secs_f64(duration_s),
        seed: file.seed.unwrap_or(1),
        sample_period: secs(sample_period_s),
        topology,
        flows,
        pcap: file.outputs.pcap,
        cm,
        env,
    })
}

fn topology(ctx: &Ctx, spec: &TopologySpec) -> Result<TopologyDef, ScenarioError> {
    match spec {
        TopologySpec::Dumbbell {
            pairs,
            bottleneck,
            bottleneck_reverse,
            access,
            access_delays_ms,
        } => {
            if *pairs == 0 || *pairs > 10_000 {
                return Err(ctx.invalid("topology.pairs", "must be between 1 and 10000"));
            }
            let fwd = link_config(ctx, "topology.bottleneck", bottleneck)?;
            let rev = match bottleneck_reverse {
                Some(r) => link_config(ctx, "topology.bottleneck_reverse", r)?,
                None => fwd.clone(),
            };
            let access_cfg = match access {
                Some(a) => link_config(ctx, "topology.access", a)?,
                None => LinkConfig::constant(1e9, Duration::ZERO, 10_000),
            };
            let mut sender_access = vec![access_cfg.clone()];
            if let Some(delays) = access_delays_ms {
                if delays.len() != *pairs {
                    return Err(ctx.invalid(
                        "topology.access_delays_ms",
                        format!("has {} entries but there are {pairs} pairs", delays.len()),
                    ));
                }
                sender_access = delays
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| {
                        let d = time_ms(ctx, &format!("topology.access_delays_ms[{i}]"), d, true)?;
                        let mut c = access_cfg.clone();
                        c.delay = secs(d / 1e3);
                        Ok(c)
                    })
                    .collect::<Result<_, ScenarioError>>()?;
            }
            Ok(TopologyDef::Dumbbell {
                spec: crate::topology::DumbbellSpec {
                    pairs: *pairs,
                    bottleneck: fwd,
                    bottleneck_reverse: rev,
                    sender_access,
                    receiver_access: vec![access_cfg],
                },
                nodes: dumbbell_nodes(*pairs),
                links: dumbbell_links(*pairs),
            })
        }
        TopologySpec::Chain { hops, link } => {
            if *hops == 0 || *hops > 10_000 {
                return Err(ctx.invalid("topology.hops", "must be between 1 and 10000"));
            }
            let cfg = link_config(ctx, "topology.link", link)?;
            let nodes = (0..=*hops).map(|i| format!("n{i}")).collect();
            let links = (0..*hops)
                .map(|i| LinkDef {
                    name: format!("hop{i}"),
                    a: format!("n{i}"),
                    b: format!("n{}", i + 1),
                    forward: cfg.clone(),
                    reverse: cfg.clone(),
                })
                .collect();
            Ok(TopologyDef::Explicit { nodes, links })
        }
        TopologySpec::Custom { nodes, links } => {
            for (i, n) in nodes.iter().enumerate() {
                if nodes.iter().take(i).any(|m| m == n) {
                    return Err(ctx.invalid(
                        format!("topology.nodes[{i}]"),
                        format!("{n:?} is listed twice"),
                    ));
                }
            }
            let mut defs = Vec::new();
            for (i, l) in links.iter().enumerate() {
                let field = format!("topology.links[{i}]");
                for (end, node) in [("a", &l.a), ("b", &l.b)] {
                    if !nodes.contains(node) {
                        return Err(ctx
                            .invalid(format!("{field}.{end}"), format!("no node named {node:?}")));
                    }
                }
                if defs.iter().any(|d: &LinkDef| d.name == l.name) {
                    return Err(ctx.invalid(
                        format!("{field}.name"),
                        format!("{:?} is used twice", l.name),
                    ));
                }
                let forward = link_config(ctx, &format!("{field}.link"), &l.link)?;
                let reverse = match &l.reverse {
                    Some(r) => link_config(ctx, &format!("{field}.reverse"), r)?,
                    None => forward.clone(),
                };
                defs.push(LinkDef {
                    name: l.name.clone(),
                    a: l.a.clone(),
                    b: l.b.clone(),
                    forward,
                    reverse,
                });
            }
            Ok(TopologyDef::Explicit {
                nodes: nodes.clone(),
                links: defs,
            })
        }
    }
}

fn dumbbell_nodes(pairs: usize) -> Vec<String> {
    let mut v = vec!["left".to_string(), "right".to_string()];
    v.extend((0..pairs).map(|i| format!("s{i}")));
    v.extend((0..pairs).map(|i| format!("r{i}")));
    v
}

/// Names only (the builder makes the links); used for validating pcap outputs.
fn dumbbell_links(pairs: usize) -> Vec<LinkDef> {
    let stub = LinkConfig::constant(1.0, Duration::ZERO, 1);
    let mut names = vec!["bottleneck".to_string()];
    names.extend((0..pairs).map(|i| format!("access-s{i}")));
    names.extend((0..pairs).map(|i| format!("access-r{i}")));
    names
        .into_iter()
        .map(|name| LinkDef {
            name,
            a: String::new(),
            b: String::new(),
            forward: stub.clone(),
            reverse: stub.clone(),
        })
        .collect()
}

/// Converts one link direction's spec; `field` is its path in the file.
pub(super) fn link_config(
    ctx: &Ctx,
    field: &str,
    s: &LinkSpec,
) -> Result<LinkConfig, ScenarioError> {
    let bandwidth = match (
        s.bandwidth_mbps,
        s.bandwidth_kbps,
        s.bandwidth_bps,
        &s.trace,
    ) {
        (Some(v), None, None, None) => {
            Bandwidth::bits_per_s(positive(ctx, &format!("{field}.bandwidth_mbps"), v)? * 1e6)
        }
        (None, Some(v), None, None) => {
            Bandwidth::bits_per_s(positive(ctx, &format!("{field}.bandwidth_kbps"), v)? * 1e3)
        }
        (None, None, Some(v), None) => {
            Bandwidth::bits_per_s(positive(ctx, &format!("{field}.bandwidth_bps"), v)?)
        }
        (None, None, None, Some(t)) => trace_bandwidth(ctx, field, t)?,
        _ => {
            return Err(ctx.invalid(
                field,
                "set exactly one of bandwidth_mbps, bandwidth_kbps, bandwidth_bps or trace",
            ));
        }
    };
    let delay_ms = time_ms(
        ctx,
        &format!("{field}.delay_ms"),
        s.delay_ms.unwrap_or(0.0),
        true,
    )?;
    let queue = match (s.queue_packets, s.queue_bytes) {
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(field, "set queue_packets or queue_bytes, not both"));
        }
        (Some(0), None) => {
            return Err(ctx.invalid(format!("{field}.queue_packets"), "must be at least 1"));
        }
        (None, Some(0)) => {
            return Err(ctx.invalid(format!("{field}.queue_bytes"), "must be at least 1"));
        }
        (Some(n), None) => QueueLimit::Packets(n),
        (None, Some(n)) => QueueLimit::Bytes(n),
        (None, None) => QueueLimit::Packets(100),
    };
    let loss = match &s.loss {
        None => LossModel::None,
        Some(LossSpec::Bernoulli(p)) => LossModel::Bernoulli {
            p: probability(ctx, &format!("{field}.loss.bernoulli"), *p)?,
        },
        Some(LossSpec::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_good,
            loss_bad,
        }) => {
            let f = |name: &str, v: f64| {
                probability(ctx, &format!("{field}.loss.gilbert_elliott.{name}"), v)
            };
            LossModel::GilbertElliott {
                p_good_to_bad: f("p_good_to_bad", *p_good_to_bad)?,
                p_bad_to_good: f("p_bad_to_good", *p_bad_to_good)?,
                loss_good: f("loss_good", *loss_good)?,
                loss_bad: f("loss_bad", *loss_bad)?,
            }
        }
        Some(LossSpec::Packets(numbers)) => {
            let mut numbers = numbers.clone();
            if numbers.contains(&0) {
                return Err(ctx.invalid(
                    format!("{field}.loss.packets"),
                    "packets are numbered from 1",
                ));
            }
            numbers.sort_unstable();
            numbers.dedup();
            LossModel::Packets { numbers }
        }
    };
    let mut outages = Vec::new();
    for (i, o) in s.outages.iter().enumerate() {
        let f = format!("{field}.outages[{i}]");
        let at = time_s(ctx, &format!("{f}.at_s"), o.at_s, true)?;
        let d = time_s(ctx, &format!("{f}.duration_s"), o.duration_s, false)?;
        outages.push(Outage {
            start: Time::from_secs_f64(at),
            duration: secs(d),
        });
    }
    outages.sort_by_key(|o| o.start);
    if outages
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.start + a.duration > b.start))
    {
        return Err(ctx.invalid(format!("{field}.outages"), "outages overlap"));
    }
    let mut reorders = Vec::new();
    for (i, r) in s.reorder.iter().enumerate() {
        let f = format!("{field}.reorder[{i}]");
        let at = time_s(ctx, &format!("{f}.at_s"), r.at_s, true)?;
        let d = time_s(ctx, &format!("{f}.duration_s"), r.duration_s, false)?;
        let extra = time_ms(ctx, &format!("{f}.extra_delay_ms"), r.extra_delay_ms, true)?;
        reorders.push(Reorder {
            start: Time::from_secs_f64(at),
            duration: secs(d),
            extra_delay: secs(extra / 1e3),
        });
    }
    reorders.sort_by_key(|r| r.start);
    if reorders
        .windows(2)
        .any(|w| matches!(w, [a, b] if a.start + a.duration > b.start))
    {
        return Err(ctx.invalid(format!("{field}.reorder"), "reordering bursts overlap"));
    }
    Ok(LinkConfig {
        bandwidth,
        delay: secs(delay_ms / 1e3),
        queue,
        loss,
        outages,
        reorders,
    })
}

fn trace_bandwidth(ctx: &Ctx, field: &str, t: &TraceSpec) -> Result<Bandwidth, ScenarioError> {
    let path = ctx.base_dir.join(&t.path);
    let trace_field = format!("{field}.trace.path");
    if !path.is_file() {
        return Err(ctx.invalid(
            trace_field,
            format!(
                "trace file {} does not exist (paths are relative to the scenario file)",
                path.display()
            ),
        ));
    }
    let wrap = |source| ScenarioError::Trace {
        file: ctx.file.to_string(),
        field: trace_field.clone(),
        source,
    };
    Ok(match t.format {
        TraceFormat::Mahimahi => Bandwidth::Mahimahi(MahimahiTrace::load(&path).map_err(wrap)?),
        TraceFormat::Piecewise => Bandwidth::Piecewise(PiecewiseTrace::load(&path).map_err(wrap)?),
    })
}

fn flow(
    ctx: &Ctx,
    index: usize,
    mut table: toml::Table,
    duration_s: f64,
    topo: &TopologyDef,
) -> Result<FlowDef, ScenarioError> {
    let field = format!("flows[{index}]");
    let mut common_table = toml::Table::new();
    for key in FLOW_COMMON_KEYS {
        if let Some(v) = table.remove(key) {
            common_table.insert(key.to_string(), v);
        }
    }
    let common = FlowCommon::deserialize(toml::Value::Table(common_table))
        .map_err(|e| ctx.invalid(&field, e.message().to_string()))?;
    let nodes = topo.node_names();
    for (key, host) in [("from", &common.from), ("to", &common.to)] {
        if !nodes.iter().any(|n| n == host) {
            return Err(ctx.invalid(
                format!("{field}.{key}"),
                format!("no host named {host:?}; hosts are {nodes:?}"),
            ));
        }
    }
    if common.from == common.to {
        return Err(ctx.invalid(&field, "`from` and `to` are the same host"));
    }
    let start_s = time_s(ctx, &format!("{field}.start_s"), common.start_s, true)?;
    let stop_s = time_s(
        ctx,
        &format!("{field}.stop_s"),
        common.stop_s.unwrap_or(duration_s),
        true,
    )?;
    if stop_s <= start_s {
        return Err(ctx.invalid(
            format!("{field}.stop_s"),
            format!("stop_s ({stop_s}) must be after start_s ({start_s})"),
        ));
    }
    let rest = toml::Value::Table(table);
    let kind = match common.kind.as_str() {
        "tcp" => {
            let spec = TcpFlowSpec::deserialize(rest)
                .map_err(|e| ctx.invalid(&field, format!("tcp flow: {}", e.message())))?;
            tcp_flow(ctx, &field, &spec)?
        }
        "cbr" => {
            let spec = CbrFlowSpec::deserialize(rest)
                .map_err(|e| ctx.invalid(&field, format!("cbr flow: {}", e.message())))?;
            cbr_flow(ctx, &field, &spec)?
        }
        "tcp-cm" => {
            let spec = TcpCmFlowSpec::deserialize(rest)
                .map_err(|e| ctx.invalid(&field, format!("tcp-cm flow: {}", e.message())))?;
            super::cm::tcp_cm_flow(ctx, &field, &spec)?
        }
        "cm-audio" => {
            let spec = CmAudioFlowSpec::deserialize(rest)
                .map_err(|e| ctx.invalid(&field, format!("cm-audio flow: {}", e.message())))?;
            super::cm::cm_audio_flow(ctx, &field, &spec)?
        }
        "cm-udp" => {
            let spec = CmUdpFlowSpec::deserialize(rest)
                .map_err(|e| ctx.invalid(&field, format!("cm-udp flow: {}", e.message())))?;
            super::cm::cm_udp_flow(ctx, &field, &spec)?
        }
        other => match super::media::media_flow(ctx, &field, other, rest) {
            Some(kind) => kind?,
            None => {
                return Err(ctx.invalid(
                    format!("{field}.type"),
                    format!(
                        "unknown flow type {other:?}; known types are \"tcp\", \"cbr\", \
                         \"tcp-cm\", \"cm-audio\" and \"cm-udp\", and the media types \
                         \"tpba\", \"lda\", \"ldaf\" and \"tfrc\""
                    ),
                ));
            }
        },
    };
    Ok(FlowDef {
        name: common
            .name
            .unwrap_or_else(|| format!("{}{index}", common.kind)),
        from: common.from,
        to: common.to,
        start: Time::from_secs_f64(start_s),
        stop: Time::from_secs_f64(stop_s),
        kind,
    })
}

fn cbr_flow(ctx: &Ctx, field: &str, s: &CbrFlowSpec) -> Result<FlowType, ScenarioError> {
    let rate_bps = match (s.rate_kbps, s.rate_mbps) {
        (Some(k), None) => positive(ctx, &format!("{field}.rate_kbps"), k)? * 1e3,
        (None, Some(m)) => positive(ctx, &format!("{field}.rate_mbps"), m)? * 1e6,
        _ => return Err(ctx.invalid(field, "set exactly one of rate_kbps or rate_mbps")),
    };
    let packet_bytes = s.packet_bytes.unwrap_or(1000);
    if !(12..=65_507).contains(&packet_bytes) {
        return Err(ctx.invalid(
            format!("{field}.packet_bytes"),
            format!("must be in 12..=65507 (the CBR header is 12 bytes), got {packet_bytes}"),
        ));
    }
    Ok(FlowType::Cbr {
        rate_bytes_per_s: rate_bps / 8.0,
        packet_bytes,
    })
}
