//! Identifiers of links, agents and flows, and the errors of building a world.

use crate::packet::Proto;
use thiserror::Error;

/// Index of a link direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);

/// Index of an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AgentId(pub u32);

/// Index of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub u32);

/// Errors building a world.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum WorldError {
    /// Two nodes with one name.
    #[error("node {0:?} is defined twice")]
    DuplicateNode(String),
    /// Two links with one name.
    #[error("link {0:?} is defined twice")]
    DuplicateLink(String),
    /// A port is already bound on a node.
    #[error("port {port} ({proto:?}) is already in use on node {node}")]
    PortInUse {
        /// Node name.
        node: String,
        /// Protocol.
        proto: Proto,
        /// Port.
        port: u16,
    },
    /// No such link name.
    #[error("no link named {0:?}")]
    UnknownLink(String),
    /// No path between two nodes.
    #[error("no route from {from} to {to}")]
    NoRoute {
        /// Source node name.
        from: String,
        /// Destination node name.
        to: String,
    },
}
