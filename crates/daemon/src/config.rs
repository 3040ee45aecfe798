//! The daemon's configuration file (TOML; `dist/adaptnetd.toml` is the documented sample).
//!
//! Every section and field is optional; unknown fields are errors that name the field, so a
//! typo is not silently ignored.

use adaptnet_core::env::StatusKey;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this schema.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the line and field).
        message: String,
    },
    /// A value is out of range.
    #[error("{field}: {message}")]
    Invalid {
        /// The field, as `section.field`.
        field: &'static str,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// `[daemon]`: where the daemon listens.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SocketConfig {
    /// Path of the Unix-domain socket.
    pub socket: PathBuf,
    /// Permission bits of the socket file, as an octal string (`"0660"`): who may connect.
    pub socket_mode: String,
    /// Group owning the socket file (numeric gid); `None` keeps the daemon's group.
    pub socket_gid: Option<u32>,
}

impl Default for SocketConfig {
    fn default() -> Self {
        SocketConfig {
            socket: PathBuf::from(adaptnet_core::daemon::DEFAULT_SOCKET_PATH),
            socket_mode: "0660".into(),
            socket_gid: None,
        }
    }
}

/// `[limits]`: every per-client table is bounded; a request past a bound is an error reply.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Most connected clients; more are refused at accept.
    pub max_clients: usize,
    /// Most open flows per client.
    pub max_flows_per_client: usize,
    /// Most event requests (`request_event`) plus estimator subscriptions per client.
    pub max_subscriptions_per_client: usize,
    /// Most events queued for one client; beyond, its events are dropped and counted.
    pub max_queued_events: usize,
    /// Most requests the daemon reads from one client per wake-up before serving others.
    pub max_requests_per_batch: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_clients: 256,
            max_flows_per_client: 256,
            max_subscriptions_per_client: 64,
            max_queued_events: 1024,
            max_requests_per_batch: 64,
        }
    }
}

/// `[weights]`: how the host's capacity to one destination is divided between users
/// (papers/003 §2.4, "pre-configured weights").
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Weights {
    /// The share of a user not listed in `users`.
    pub default: f64,
    /// Share per uid (keys are decimal uids).
    pub users: BTreeMap<String, f64>,
    /// Largest weight a client may ask for one flow; larger requests are clamped.
    pub max_flow_weight: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Weights {
            default: 1.0,
            users: BTreeMap::new(),
            max_flow_weight: 16.0,
        }
    }
}

impl Weights {
    /// The share of `uid`.
    pub fn share(&self, uid: u32) -> f64 {
        self.users
            .get(&uid.to_string())
            .copied()
            .unwrap_or(self.default)
    }
}

/// `[cm]`: the host's Congestion Manager.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CmSection {
    /// Path MTU, bytes (the grant size).
    pub mtu_bytes: u64,
    /// Token-bucket depth, bytes.
    pub burst_bytes: u64,
    /// Where the probe protocol (papers/003 Figure 5) listens, daemon to daemon over UDP;
    /// `None` disables probe-fed flows across hosts (responses are still answered locally).
    pub probe_bind: Option<SocketAddr>,
    /// The UDP port probes are sent to on peer hosts.
    pub probe_peer_port: u16,
    /// `CmConfig::feedback_floor`, milliseconds.
    pub feedback_floor_ms: f64,
}

impl Default for CmSection {
    fn default() -> Self {
        CmSection {
            mtu_bytes: 1500,
            burst_bytes: 3000,
            probe_bind: None,
            probe_peer_port: DEFAULT_PROBE_PORT,
            feedback_floor_ms: adaptnet_core::cm::DEFAULT_FEEDBACK_FLOOR.as_secs_f64() * 1e3,
        }
    }
}

/// The probe protocol's default UDP port.
pub const DEFAULT_PROBE_PORT: u16 = 5099;

/// `[estimator]`: the per-interface bandwidth estimator (papers/000 §5's interface counters).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EstimatorSection {
    /// How often each subscribed interface's counters are read, milliseconds.
    pub period_ms: u64,
    /// Smoothing gain of the rate estimate (0 < gain ≤ 1; 1 = last period only).
    pub gain: f64,
}

impl Default for EstimatorSection {
    fn default() -> Self {
        EstimatorSection {
            period_ms: 100,
            gain: 0.5,
        }
    }
}

/// One configured sender of authenticated status messages (papers/001 §3.1).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// Its address (datagrams from any other source are rejected).
    pub addr: SocketAddr,
    /// Its key id.
    pub key_id: u32,
    /// The shared key, hex.
    pub key_hex: String,
}

/// `[env]`: the environment engine.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvSection {
    /// Where status messages are received; `None` disables remote status.
    pub status_bind: Option<SocketAddr>,
    /// The only peers whose status messages are accepted.
    pub peers: Vec<PeerConfig>,
    /// Environment events kept before the engine drains them.
    pub event_capacity: usize,
}

impl Default for EnvSection {
    fn default() -> Self {
        EnvSection {
            status_bind: None,
            peers: Vec::new(),
            event_capacity: 4096,
        }
    }
}

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// `[daemon]`.
    pub daemon: SocketConfig,
    /// `[limits]`.
    pub limits: Limits,
    /// `[weights]`.
    pub weights: Weights,
    /// `[cm]`.
    pub cm: CmSection,
    /// `[estimator]`.
    pub estimator: EstimatorSection,
    /// `[env]`.
    pub env: EnvSection,
}

impl DaemonConfig {
    /// Reads and checks `path`.
    pub fn load(path: &Path) -> Result<DaemonConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        DaemonConfig::parse(&text).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse {
                path: path.to_owned(),
                message,
            },
            other => other,
        })
    }

    /// Parses and checks TOML text.
    pub fn parse(text: &str) -> Result<DaemonConfig, ConfigError> {
        let c: DaemonConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: PathBuf::from("<config>"),
            message: e.to_string(),
        })?;
        c.check()?;
        Ok(c)
    }

    /// A configuration with defaults and the socket at `socket`.
    pub fn with_socket(socket: &Path) -> DaemonConfig {
        let mut c = DaemonConfig::default();
        c.daemon.socket = socket.to_owned();
        c
    }

    /// The socket's permission bits.
    pub fn socket_mode(&self) -> Result<u32, ConfigError> {
        u32::from_str_radix(self.daemon.socket_mode.trim_start_matches("0o"), 8)
            .ok()
            .filter(|m| *m <= 0o777)
            .ok_or(ConfigError::Invalid {
                field: "daemon.socket_mode",
                message: format!(
                    "{:?} is not octal permission bits; write e.g. \"0660\"",
                    self.daemon.socket_mode
                ),
            })
    }

    /// `cm.feedback_floor_ms` as a duration.
    pub fn feedback_floor(&self) -> Duration {
        Duration::from_secs_f64(self.cm.feedback_floor_ms.max(0.0) / 1e3)
    }

    /// The configured status peers with their parsed keys.
    pub fn status_peers(&self) -> Result<Vec<(SocketAddr, u32, StatusKey)>, ConfigError> {
        self.env
            .peers
            .iter()
            .map(|p| {
                let bytes = hex(&p.key_hex).ok_or(ConfigError::Invalid {
                    field: "env.peers.key_hex",
                    message: format!("key of peer {} is not an even number of hex digits", p.addr),
                })?;
                let key = StatusKey::new(&bytes).ok_or(ConfigError::Invalid {
                    field: "env.peers.key_hex",
                    message: format!("key of peer {} has an unusable length", p.addr),
                })?;
                Ok((p.addr, p.key_id, key))
            })
            .collect()
    }

    fn check(&self) -> Result<(), ConfigError> {
        self.socket_mode()?;
        let l = &self.limits;
        for (field, v) in [
            ("limits.max_clients", l.max_clients),
            ("limits.max_flows_per_client", l.max_flows_per_client),
            (
                "limits.max_subscriptions_per_client",
                l.max_subscriptions_per_client,
            ),
            ("limits.max_queued_events", l.max_queued_events),
            ("limits.max_requests_per_batch", l.max_requests_per_batch),
            ("env.event_capacity", self.env.event_capacity),
        ] {
            if v == 0 {
                return Err(ConfigError::Invalid {
                    field,
                    message: "must be at least 1".into(),
                });
            }
        }
        let w = &self.weights;
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(w.default) || !positive(w.max_flow_weight) {
            return Err(ConfigError::Invalid {
                field: "weights.default",
                message: "weights must be finite and positive".into(),
            });
        }
        for (uid, v) in &w.users {
            if uid.parse::<u32>().is_err() || !positive(*v) {
                return Err(ConfigError::Invalid {
                    field: "weights.users",
                    message: format!("{uid:?} = {v}: keys are decimal uids, weights positive"),
                });
            }
        }
        if self.cm.mtu_bytes < 64 || !self.cm.feedback_floor_ms.is_finite() {
            return Err(ConfigError::Invalid {
                field: "cm.mtu_bytes",
                message: "mtu_bytes must be at least 64 and feedback_floor_ms finite".into(),
            });
        }
        if self.estimator.period_ms == 0
            || !(self.estimator.gain > 0.0 && self.estimator.gain <= 1.0)
        {
            return Err(ConfigError::Invalid {
                field: "estimator.period_ms",
                message: "period_ms must be at least 1 and gain in (0, 1]".into(),
            });
        }
        self.status_peers()?;
        Ok(())
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_sample_config_parses() {
        let text = include_str!("../../../dist/adaptnetd.toml");
        let c = DaemonConfig::parse(text).expect("sample parses");
        assert_eq!(c.socket_mode().expect("mode"), 0o660);
        assert_eq!(c.weights.share(1000), 2.0);
        assert_eq!(c.weights.share(4242), 1.0);
    }

    #[test]
    fn test_bad_fields_are_named() {
        let e = DaemonConfig::parse("[limits]\nmax_flows = 3\n").expect_err("unknown");
        assert!(e.to_string().contains("max_flows"), "{e}");
        let e = DaemonConfig::parse("[daemon]\nsocket_mode = \"rw\"\n").expect_err("mode");
        assert!(e.to_string().contains("daemon.socket_mode"), "{e}");
        let e = DaemonConfig::parse("[weights.users]\nalice = 2.0\n").expect_err("uid");
        assert!(e.to_string().contains("weights.users"), "{e}");
        let e = DaemonConfig::parse("[limits]\nmax_queued_events = 0\n").expect_err("zero");
        assert!(e.to_string().contains("max_queued_events"), "{e}");
    }
}
