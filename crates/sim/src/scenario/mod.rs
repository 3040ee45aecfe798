//! Scenario files: TOML descriptions of a topology, its links and traces, the flows, and
//! outputs. [`Scenario::load`] parses and validates a file (every error names the file and
//! the field); [`Scenario::run`] builds the [`World`] and runs it.
//!
//! The schema is documented on [`schema::ScenarioFile`]; `experiments/` holds examples.

mod cm;
pub mod env;
mod env_build;
mod fields;
pub mod link_table;
mod media;
pub mod schema;
mod tcp;
mod validate;

use crate::agents::cbr::{CbrReceiver, CbrSender};
use crate::agents::tcp::{TcpReceiver, TcpSender};
use crate::link::LinkConfig;
use crate::metrics::RunResults;
use crate::packet::{Addr, Proto};
use crate::topology::DumbbellSpec;
use crate::trace::TraceError;
use crate::world::{FlowSpec, World, WorldError};
use adaptnet_core::Time;
use adaptnet_core::cm::CmConfig;
use adaptnet_core::cm::Thresholds;
use adaptnet_core::tcp::TcpConfig;
pub use media::MediaFlow;
use std::path::Path;
use std::time::Duration;
use thiserror::Error;

/// Why a scenario could not be loaded or run.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read scenario {file}: {source}")]
    Io {
        /// The file.
        file: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not fit the schema.
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field has a value that makes no sense.
    #[error("{file}: field `{field}`: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// Path of the field, e.g. `topology.bottleneck.bandwidth_mbps`.
        field: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A trace file is malformed.
    #[error("{file}: field `{field}`: {source}")]
    Trace {
        /// The scenario file.
        file: String,
        /// The field naming the trace.
        field: String,
        /// The trace error (with its own file and line).
        source: TraceError,
    },
    /// The world could not be built (e.g. no route between a flow's hosts).
    #[error("{file}: {source}")]
    World {
        /// The file.
        file: String,
        /// The world's error.
        source: WorldError,
    },
}

/// A validated scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Name for reports.
    pub name: String,
    /// Free-text description.
    pub description: Option<String>,
    /// Where it came from (a path, or `<embedded:…>`).
    pub file: String,
    /// Simulated run time.
    pub duration: Time,
    /// Default seed.
    pub seed: u64,
    /// Sampling period of the series.
    pub sample_period: Duration,
    /// The network.
    pub topology: TopologyDef,
    /// The traffic.
    pub flows: Vec<FlowDef>,
    /// Duplex links to capture.
    pub pcap: Vec<String>,
    /// The Congestion Manager of every host with CM flows (the `[cm]` table).
    pub cm: CmConfig,
    /// A host's environment and action tables (the `[env]` table, papers/001).
    pub env: Option<env::EnvDef>,
}

/// A validated topology.
#[derive(Clone, Debug)]
// Built once per run; boxing the big variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum TopologyDef {
    /// Built by [`crate::topology::dumbbell`].
    Dumbbell {
        /// Builder parameters.
        spec: DumbbellSpec,
        /// Node names the builder creates.
        nodes: Vec<String>,
        /// Link names the builder creates (configurations are in `spec`).
        links: Vec<LinkDef>,
    },
    /// Explicit nodes and links (chains and custom topologies).
    Explicit {
        /// Node names.
        nodes: Vec<String>,
        /// Links.
        links: Vec<LinkDef>,
    },
}

impl TopologyDef {
    /// All node names.
    pub fn node_names(&self) -> &[String] {
        match self {
            TopologyDef::Dumbbell { nodes, .. } | TopologyDef::Explicit { nodes, .. } => nodes,
        }
    }

    /// All duplex links.
    pub fn links(&self) -> &[LinkDef] {
        match self {
            TopologyDef::Dumbbell { links, .. } | TopologyDef::Explicit { links, .. } => links,
        }
    }
}

/// A validated duplex link.
#[derive(Clone, Debug)]
pub struct LinkDef {
    /// Duplex name.
    pub name: String,
    /// One end.
    pub a: String,
    /// Other end.
    pub b: String,
    /// a→b direction.
    pub forward: LinkConfig,
    /// b→a direction.
    pub reverse: LinkConfig,
}

/// A validated flow.
#[derive(Clone, Debug)]
pub struct FlowDef {
    /// Name for reports.
    pub name: String,
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Start.
    pub start: Time,
    /// Stop.
    pub stop: Time,
    /// Type and parameters.
    pub kind: FlowType,
}

/// Flow types.
#[derive(Clone, Debug)]
pub enum FlowType {
    /// TCP NewReno.
    Tcp {
        /// Bytes to send (`None`: until stopped).
        bytes: Option<u64>,
        /// Stream configuration.
        config: TcpConfig,
    },
    /// Constant-bit-rate UDP.
    Cbr {
        /// Payload rate.
        rate_bytes_per_s: f64,
        /// UDP payload bytes per datagram.
        packet_bytes: u32,
    },
    /// TCP/CM: TCP whose congestion control is its host's CM (papers/003 §3.2.1).
    TcpCm {
        /// Bytes to send (`None`: until stopped).
        bytes: Option<u64>,
        /// Stream configuration.
        config: TcpConfig,
        /// Scheduler weight in its macroflow.
        weight: f64,
    },
    /// The layered audio server over UDP, using only the CM (papers/003 §3.2.2).
    CmAudio {
        /// Encodings, bit/s, ascending.
        encodings_bps: Vec<u64>,
        /// UDP payload bytes per packet.
        packet_bytes: u32,
        /// Scheduler weight in its macroflow.
        weight: f64,
        /// When `change_rate` is raised.
        thresholds: Thresholds,
    },
    /// A greedy UDP sender on the CM's request/notify API with probe feedback.
    CmUdp {
        /// Bytes to send (`None`: until stopped).
        bytes: Option<u64>,
        /// UDP payload bytes per datagram.
        packet_bytes: u32,
        /// Scheduler weight in its macroflow.
        weight: f64,
        /// When `change_rate` is raised.
        thresholds: Thresholds,
    },
    /// A rate-controlled media flow: `tpba`, `lda`, `ldaf` or `tfrc` (papers/002; see
    /// `media.rs`).
    Media(MediaFlow),
}

impl FlowType {
    /// The type's name in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            FlowType::Tcp { .. } => "tcp",
            FlowType::Cbr { .. } => "cbr",
            FlowType::TcpCm { .. } => "tcp-cm",
            FlowType::CmAudio { .. } => "cm-audio",
            FlowType::CmUdp { .. } => "cm-udp",
            FlowType::Media(m) => m.name(),
        }
    }
}

/// Output of a run: measurements plus captures.
#[derive(Clone, Debug)]
pub struct RunOutput {
    /// Measurements.
    pub results: RunResults,
    /// `(duplex link name, pcap bytes)` for each requested capture.
    pub captures: Vec<(String, Vec<u8>)>,
}

/// First port used by flow senders; flow `i` sends from `SENDER_PORT_BASE + i`.
pub const SENDER_PORT_BASE: u16 = 10_000;
/// First port used by flow receivers; flow `i` listens on `RECEIVER_PORT_BASE + i`.
pub const RECEIVER_PORT_BASE: u16 = 20_000;

impl Scenario {
    /// Reads and validates a scenario file; trace paths are relative to its directory.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            file: file.clone(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let stem = path
            .file_stem()
            .map_or("scenario".to_string(), |s| s.to_string_lossy().into_owned());
        Scenario::parse(&text, &file, base, &stem)
    }

    /// Parses and validates scenario text. `file` names it in errors, relative trace paths
    /// start at `base_dir`, and `default_name` is used when the file has no `name`.
    pub fn parse(
        text: &str,
        file: &str,
        base_dir: &Path,
        default_name: &str,
    ) -> Result<Scenario, ScenarioError> {
        let parsed: schema::ScenarioFile =
            toml::from_str(text).map_err(|e| ScenarioError::Parse {
                file: file.to_string(),
                message: e.to_string(),
            })?;
        let name = parsed
            .name
            .clone()
            .unwrap_or_else(|| default_name.to_string());
        let ctx = fields::Ctx { file, base_dir };
        validate::validate(&ctx, parsed, name)
    }

    /// Builds the world for `seed` (ready to run) without running it.
    pub fn build(&self, seed: u64) -> Result<World, ScenarioError> {
        let wrap = |source| ScenarioError::World {
            file: self.file.clone(),
            source,
        };
        let mut world = World::new(seed);
        world.set_sample_period(self.sample_period);
        match &self.topology {
            TopologyDef::Dumbbell { spec, .. } => {
                crate::topology::dumbbell(&mut world, spec).map_err(wrap)?;
            }
            TopologyDef::Explicit { nodes, links } => {
                for n in nodes {
                    world.add_node(n).map_err(wrap)?;
                }
                for l in links {
                    let (Some(a), Some(b)) = (world.node_by_name(&l.a), world.node_by_name(&l.b))
                    else {
                        continue; // validated: both ends exist
                    };
                    world
                        .add_link(&l.name, a, b, l.forward.clone(), l.reverse.clone())
                        .map_err(wrap)?;
                }
            }
        }
        let mut cm_hosts = cm::CmHosts::new(self.cm.clone());
        let env = env_build::EnvBuild::new(&self.file, self.env.as_ref(), seed, self.duration)?;
        for (i, f) in self.flows.iter().enumerate() {
            self.add_flow(&mut world, &mut cm_hosts, &env, i, f)
                .map_err(wrap)?;
        }
        env.install(&mut world, seed, self.duration).map_err(wrap)?;
        // After the flows: each host's CM agent must be polled after its flows.
        cm_hosts.install(&mut world).map_err(wrap)?;
        for name in &self.pcap {
            world.capture(name).map_err(wrap)?;
        }
        world.check_routes().map_err(wrap)?;
        Ok(world)
    }

    fn add_flow(
        &self,
        world: &mut World,
        cm_hosts: &mut cm::CmHosts,
        env: &env_build::EnvBuild,
        index: usize,
        f: &FlowDef,
    ) -> Result<(), WorldError> {
        let missing = |n: &str| WorldError::NoRoute {
            from: n.to_string(),
            to: n.to_string(),
        };
        let src = world
            .node_by_name(&f.from)
            .ok_or_else(|| missing(&f.from))?;
        let dst = world.node_by_name(&f.to).ok_or_else(|| missing(&f.to))?;
        let offset = u16::try_from(index).unwrap_or(u16::MAX).min(9_999);
        let local = Addr {
            node: src,
            port: SENDER_PORT_BASE + offset,
        };
        let remote = Addr {
            node: dst,
            port: RECEIVER_PORT_BASE + offset,
        };
        // Initial sequence numbers come from the seed, like a real stack's random ISNs.
        #[allow(
            clippy::cast_possible_truncation,
            reason = "an initial sequence number is any 32 bits of the derived seed"
        )]
        let isn = world.derive_seed(0x4953_4e00 + index as u64) as u32;
        type Agents = (
            Box<dyn crate::agent::Agent>,
            Box<dyn crate::agent::Agent>,
            Proto,
        );
        let (sender, receiver, proto): Agents = match &f.kind {
            FlowType::Tcp { bytes, config } => (
                Box::new(TcpSender::newreno(
                    local,
                    remote,
                    config.clone(),
                    *bytes,
                    isn,
                )),
                Box::new(TcpReceiver::new(
                    remote,
                    local,
                    config.clone(),
                    isn ^ 0x5555_5555,
                )),
                Proto::Tcp,
            ),
            FlowType::Cbr {
                rate_bytes_per_s,
                packet_bytes,
            } => (
                Box::new(CbrSender::new(
                    local,
                    remote,
                    *rate_bytes_per_s,
                    *packet_bytes,
                )),
                Box::new(CbrReceiver::new()),
                Proto::Udp,
            ),
            FlowType::Media(m) => {
                let (s, r) = m.agents(local, remote, isn);
                (s, r, Proto::Udp)
            }
            other => cm_hosts
                .agents(other, local, remote, isn)
                .ok_or_else(|| missing(&f.from))?,
        };
        let (sender, receiver) = env.wrap(index, &f.kind, local, remote, isn, (sender, receiver));
        let s = world.add_agent(src, proto, local.port, sender)?;
        let r = world.add_agent(dst, proto, remote.port, receiver)?;
        if let FlowType::Media(m) = &f.kind
            && m.uses_tcp()
        {
            world.add_port(s, Proto::Tcp, local.port)?;
            world.add_port(r, Proto::Tcp, remote.port)?;
        }
        world.add_flow(FlowSpec {
            name: f.name.clone(),
            kind: f.kind.name().to_string(),
            sender: s,
            receiver: r,
            start: f.start,
            stop: f.stop,
        });
        Ok(())
    }

    /// Builds and runs the scenario with `seed`, reporting progress (virtual time reached).
    pub fn run(
        &self,
        seed: u64,
        progress: &mut dyn FnMut(Time),
    ) -> Result<RunOutput, ScenarioError> {
        let mut world = self.build(seed)?;
        world.run_until(self.duration, progress);
        let results = world.results(&self.name);
        let captures = world
            .captures()
            .iter()
            .map(|(n, w)| (n.clone(), w.bytes()))
            .collect();
        Ok(RunOutput { results, captures })
    }
}

#[cfg(test)]
mod tests;
