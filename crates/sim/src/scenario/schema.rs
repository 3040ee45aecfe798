//! The TOML schema of scenario files, as plain serde structs. Validation and meaning live in
//! `build.rs`; this file only says what may be written.
//!
//! ```toml
//! name = "one-flow"
//! duration_s = 60
//! seed = 1                    # optional; the CLI's --seed overrides it
//! sample_period_s = 1.0       # optional
//!
//! [topology]
//! kind = "dumbbell"           # "dumbbell" | "chain" | "custom"
//! pairs = 1
//! [topology.bottleneck]
//! bandwidth_mbps = 1.0        # or bandwidth_kbps / bandwidth_bps / trace = { … }
//! delay_ms = 50
//! queue_packets = 8           # or queue_bytes
//!
//! [[flows]]
//! type = "tcp"                # "tcp" | "cbr" | "tcp-cm" | "cm-audio" | "cm-udp"
//!                             # | "tpba" | "lda" | "ldaf" | "tfrc" (keys: media.rs)
//! from = "s0"
//! to = "r0"
//! sack = true                 # TCP options, off by default: sack, timestamps,
//! initial_window = "iw10"     # limited_transmit; initial_window "rfc3390" | "iw10" | n
//! recover_after_rto = "reno"  # "rfc6582" (default) | "reno" (dup ACKs after an RTO count)
//!
//! [cm]                        # optional: every host's Congestion Manager (papers/003)
//! mtu_bytes = 1000            # grant size; default: the largest tcp-cm mss, else 1460
//! ```

use serde::Deserialize;

/// A whole scenario file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// Name used in reports (defaults to the file stem).
    pub name: Option<String>,
    /// Free text shown by `adaptnet sim`.
    pub description: Option<String>,
    /// Simulated time to run, seconds.
    pub duration_s: f64,
    /// Seed (default 1).
    pub seed: Option<u64>,
    /// Goodput/queue sampling period, seconds (default 1).
    pub sample_period_s: Option<f64>,
    /// The network.
    pub topology: TopologySpec,
    /// The traffic: tables with [`FlowCommon`] keys plus the type's own (see `build.rs`).
    #[serde(default)]
    pub flows: Vec<toml::Table>,
    /// Extra outputs.
    #[serde(default)]
    pub outputs: OutputsSpec,
    /// The Congestion Manager of every host with CM flows (`tcp-cm`, `cm-audio`, `cm-udp`).
    pub cm: Option<CmSpec>,
    /// A host's environment parameters and action tables (papers/001; see `scenario::env`).
    pub env: Option<super::env::EnvSpec>,
}

/// Which topology, with its parameters.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
// Built once per run; boxing the big variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum TopologySpec {
    /// `s{i}` — left — bottleneck — right — `r{i}`.
    Dumbbell {
        /// Sender/receiver pairs.
        pairs: usize,
        /// The bottleneck (both directions unless `bottleneck_reverse` is given).
        bottleneck: LinkSpec,
        /// The reverse (ACK) direction of the bottleneck.
        bottleneck_reverse: Option<LinkSpec>,
        /// Access links (default: 1 Gbit/s, no delay, 10,000 packets).
        access: Option<LinkSpec>,
        /// Per-pair one-way delay of the sender access links, ms (overrides `access`'s).
        access_delays_ms: Option<Vec<f64>>,
    },
    /// `n0` — `n1` — … — `n{hops}`.
    Chain {
        /// Number of links.
        hops: usize,
        /// Every hop's link.
        link: LinkSpec,
    },
    /// Explicit nodes and links.
    Custom {
        /// Node names.
        nodes: Vec<String>,
        /// Links between them.
        links: Vec<CustomLinkSpec>,
    },
}

/// A link in a custom topology.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomLinkSpec {
    /// Duplex link name.
    pub name: String,
    /// One end.
    pub a: String,
    /// Other end.
    pub b: String,
    /// The a→b direction (and b→a unless `reverse` is given).
    pub link: LinkSpec,
    /// The b→a direction.
    pub reverse: Option<LinkSpec>,
}

/// One link direction's parameters.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Constant rate in Mbit/s.
    pub bandwidth_mbps: Option<f64>,
    /// Constant rate in kbit/s.
    pub bandwidth_kbps: Option<f64>,
    /// Constant rate in bit/s.
    pub bandwidth_bps: Option<f64>,
    /// A bandwidth trace instead of a constant rate.
    pub trace: Option<TraceSpec>,
    /// One-way propagation delay, ms (default 0).
    pub delay_ms: Option<f64>,
    /// Queue limit in packets.
    pub queue_packets: Option<u32>,
    /// Queue limit in bytes.
    pub queue_bytes: Option<u64>,
    /// Random loss.
    pub loss: Option<LossSpec>,
    /// Scheduled outages.
    #[serde(default)]
    pub outages: Vec<OutageSpec>,
    /// Scheduled reordering bursts.
    #[serde(default)]
    pub reorder: Vec<ReorderSpec>,
}

/// A bandwidth trace reference.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceSpec {
    /// File format.
    pub format: TraceFormat,
    /// Path, relative to the scenario file.
    pub path: String,
}

/// Trace file formats.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum TraceFormat {
    /// One millisecond timestamp per 1500-byte delivery opportunity.
    Mahimahi,
    /// `time_seconds bandwidth_bytes_per_second` lines.
    Piecewise,
}

/// A loss model.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum LossSpec {
    /// Independent loss with this probability.
    Bernoulli(f64),
    /// Two-state bursty loss.
    GilbertElliott {
        /// Good → bad transition probability per packet.
        p_good_to_bad: f64,
        /// Bad → good transition probability per packet.
        p_bad_to_good: f64,
        /// Loss probability in the good state (default 0).
        #[serde(default)]
        loss_good: f64,
        /// Loss probability in the bad state (default 1).
        #[serde(default = "one")]
        loss_bad: f64,
    },
    /// Exactly these packets (numbered from 1 as they leave the transmitter) are lost.
    Packets(Vec<u64>),
}

fn one() -> f64 {
    1.0
}

/// An outage.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutageSpec {
    /// Start, seconds.
    pub at_s: f64,
    /// Length, seconds.
    pub duration_s: f64,
}

/// A reordering burst.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReorderSpec {
    /// Start, seconds.
    pub at_s: f64,
    /// Length, seconds.
    pub duration_s: f64,
    /// Extra one-way delay for packets sent during the burst, ms.
    pub extra_delay_ms: f64,
}

/// The fields every flow has. A flow table is split in two: these keys, and the rest,
/// which must fit the flow type's own struct (so a misspelt key is reported, not ignored).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowCommon {
    /// Flow type: `tcp`, `cbr`, `tcp-cm`, `cm-audio` or `cm-udp`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Name in reports (default `<type><index>`).
    pub name: Option<String>,
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// Start time, seconds (default 0).
    #[serde(default)]
    pub start_s: f64,
    /// Stop time, seconds (default: the end of the run).
    pub stop_s: Option<f64>,
}

/// Keys of [`FlowCommon`].
pub const FLOW_COMMON_KEYS: [&str; 6] = ["type", "name", "from", "to", "start_s", "stop_s"];

/// TCP flow parameters.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpFlowSpec {
    /// Bytes to transfer (default: unlimited until `stop_s`).
    pub bytes: Option<u64>,
    /// Segment payload size (default 1460).
    pub mss: Option<u16>,
    /// Delayed-ACK timeout in ms (default: off, every segment is acknowledged).
    pub delayed_ack_ms: Option<f64>,
    /// Minimum RTO in ms (default 1000, RFC 6298).
    pub rto_min_ms: Option<f64>,
    /// Receive buffer in bytes (default 4 MiB).
    pub recv_buffer_bytes: Option<u64>,
    /// Initial congestion window: `"rfc3390"` (default, 2–4 segments by MSS), `"iw10"`
    /// (RFC 6928) or a number of segments.
    pub initial_window: Option<InitialWindowSpec>,
    /// RFC 3042 limited transmit (default false).
    pub limited_transmit: Option<bool>,
    /// Offer SACK, with RFC 6675 loss recovery when the receiver offers it too (default
    /// false). Both ends of a flow use the flow's options.
    pub sack: Option<bool>,
    /// Offer RFC 7323 timestamps (default false).
    pub timestamps: Option<bool>,
    /// Duplicate ACKs after a retransmission timeout: `"rfc6582"` (default: ignored below
    /// `recover`) or `"reno"` (papers/001's 1997 senders: the third starts fast retransmit).
    pub recover_after_rto: Option<String>,
}

/// How a scenario names an initial window: a name or a segment count.
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum InitialWindowSpec {
    /// `"rfc3390"` or `"iw10"`.
    Name(String),
    /// A number of segments.
    Segments(i64),
}

/// CBR flow parameters.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CbrFlowSpec {
    /// Rate in kbit/s (UDP payload).
    pub rate_kbps: Option<f64>,
    /// Rate in Mbit/s (UDP payload).
    pub rate_mbps: Option<f64>,
    /// UDP payload bytes per datagram (default 1000).
    pub packet_bytes: Option<u32>,
}

/// `tcp-cm` flow parameters: TCP whose congestion control is its host's CM (papers/003
/// §3.2.1). The keys of `tcp`, plus the flow's scheduler weight.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpCmFlowSpec {
    /// Bytes to transfer (default: unlimited until `stop_s`).
    pub bytes: Option<u64>,
    /// Segment payload size (default 1460).
    pub mss: Option<u16>,
    /// Delayed-ACK timeout in ms (default: off).
    pub delayed_ack_ms: Option<f64>,
    /// Minimum RTO in ms (default 1000).
    pub rto_min_ms: Option<f64>,
    /// Receive buffer in bytes (default 4 MiB).
    pub recv_buffer_bytes: Option<u64>,
    /// Weight in the macroflow's scheduler (papers/003 §2.4; default 1).
    pub weight: Option<f64>,
}

/// `cm-audio` flow parameters: the layered audio server over UDP (papers/003 §3.2.2, §4.2).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CmAudioFlowSpec {
    /// Available encodings in kbit/s (default: the paper's 10, 20, 40, 80, 160, 320).
    pub encodings_kbps: Option<Vec<f64>>,
    /// UDP payload bytes per packet (default 1000, the paper's "1KB").
    pub packet_bytes: Option<u32>,
    /// Weight in the macroflow's scheduler (default 1).
    pub weight: Option<f64>,
    /// When `change_rate` fires: `"thresholds"` (default, ±20 %) or `"every-change"` (the
    /// paper's "whenever a flow's share of the available rate changes").
    pub change_rate: Option<String>,
}

/// `cm-udp` flow parameters: a greedy sender on the CM's request/app_notify/notify API with
/// probe feedback (papers/003 §3.1, §2.2.2).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CmUdpFlowSpec {
    /// Bytes to send (default: unlimited until `stop_s`).
    pub bytes: Option<u64>,
    /// UDP payload bytes per datagram (default 1000).
    pub packet_bytes: Option<u32>,
    /// Weight in the macroflow's scheduler (default 1).
    pub weight: Option<f64>,
    /// When `change_rate` fires: `"thresholds"` (default) or `"every-change"`.
    pub change_rate: Option<String>,
}

/// The `[cm]` table: parameters of every host's Congestion Manager (see
/// `adaptnet_core::cm::CmConfig`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CmSpec {
    /// Grant size and AIMD unit, bytes (default: the largest `tcp-cm` mss, else 1460).
    pub mtu_bytes: Option<u64>,
    /// Token-bucket depth, bytes (default 2 × mtu_bytes).
    pub burst_bytes: Option<u64>,
    /// Probes per smoothed RTT (default 2; papers/003 §2.2.1).
    pub probes_per_rtt: Option<f64>,
    /// Exponential-aging half-life: `"min-rtt"` (default, the paper's) or `"srtt"`.
    pub aging_half_life: Option<String>,
    /// When aging starts without feedback: `"srtt"` (default, the paper's: one round-trip
    /// time after an unanswered probe) or `"rto"` (`srtt + 4·rttvar`).
    pub aging_trigger: Option<String>,
    /// RTT assumed before the first sample, ms (default 1000).
    pub initial_rtt_ms: Option<f64>,
}

/// Extra outputs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputsSpec {
    /// Duplex link names to capture into `<name>.pcap`.
    #[serde(default)]
    pub pcap: Vec<String>,
}
