//! Topology builders: a dumbbell (N senders, N receivers, one bottleneck) and a chain.

use crate::link::LinkConfig;
use crate::packet::NodeId;
use crate::world::{LinkId, World, WorldError};

/// A dumbbell's parameters.
#[derive(Clone, Debug)]
pub struct DumbbellSpec {
    /// Sender/receiver pairs.
    pub pairs: usize,
    /// Bottleneck, left-to-right direction (data).
    pub bottleneck: LinkConfig,
    /// Bottleneck, right-to-left direction (ACKs).
    pub bottleneck_reverse: LinkConfig,
    /// Access link of each sender `i` (both directions); the last entry repeats if shorter.
    pub sender_access: Vec<LinkConfig>,
    /// Access link of each receiver `i` (both directions); the last entry repeats if shorter.
    pub receiver_access: Vec<LinkConfig>,
}

/// The nodes and links of a built dumbbell.
#[derive(Clone, Debug)]
pub struct Dumbbell {
    /// Sender hosts `s0`, `s1`, …
    pub senders: Vec<NodeId>,
    /// Receiver hosts `r0`, `r1`, …
    pub receivers: Vec<NodeId>,
    /// The router on the senders' side.
    pub left: NodeId,
    /// The router on the receivers' side.
    pub right: NodeId,
    /// Bottleneck directions (left→right, right→left), duplex name `bottleneck`.
    pub bottleneck: (LinkId, LinkId),
}

fn nth(list: &[LinkConfig], i: usize, fallback: &LinkConfig) -> LinkConfig {
    list.get(i)
        .or_else(|| list.last())
        .unwrap_or(fallback)
        .clone()
}

/// Builds a dumbbell: `s{i}` —`access-s{i}`— `left` —`bottleneck`— `right` —`access-r{i}`—
/// `r{i}`.
pub fn dumbbell(world: &mut World, spec: &DumbbellSpec) -> Result<Dumbbell, WorldError> {
    let left = world.add_node("left")?;
    let right = world.add_node("right")?;
    let bottleneck = world.add_link(
        "bottleneck",
        left,
        right,
        spec.bottleneck.clone(),
        spec.bottleneck_reverse.clone(),
    )?;
    let fast = LinkConfig::constant(1e9, std::time::Duration::ZERO, 10_000);
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for i in 0..spec.pairs {
        let s = world.add_node(&format!("s{i}"))?;
        let cfg = nth(&spec.sender_access, i, &fast);
        world.add_link(&format!("access-s{i}"), s, left, cfg.clone(), cfg)?;
        senders.push(s);
    }
    for i in 0..spec.pairs {
        let r = world.add_node(&format!("r{i}"))?;
        let cfg = nth(&spec.receiver_access, i, &fast);
        world.add_link(&format!("access-r{i}"), right, r, cfg.clone(), cfg)?;
        receivers.push(r);
    }
    Ok(Dumbbell {
        senders,
        receivers,
        left,
        right,
        bottleneck,
    })
}

/// Builds a chain `n0 — n1 — … — n{k}` with `hops[i]` (both directions) between `n{i}` and
/// `n{i+1}`, named `hop{i}`.
pub fn chain(world: &mut World, hops: &[LinkConfig]) -> Result<Vec<NodeId>, WorldError> {
    let first = world.add_node("n0")?;
    let mut nodes = vec![first];
    let mut prev = first;
    for (i, cfg) in hops.iter().enumerate() {
        let next = world.add_node(&format!("n{}", i + 1))?;
        world.add_link(&format!("hop{i}"), prev, next, cfg.clone(), cfg.clone())?;
        nodes.push(next);
        prev = next;
    }
    Ok(nodes)
}
