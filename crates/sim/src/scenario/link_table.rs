//! A link described on its own, outside a scenario: the file `adaptnet link --config` reads.
//!
//! Each direction is exactly a scenario's link table ([`LinkSpec`]: rate or trace, delay,
//! queue, loss, outages, reordering), validated by the same code, so a link emulated on real
//! packets and a simulated one are described alike:
//!
//! ```toml
//! seed = 1                 # optional: the loss models' random stream (default 1)
//! [link]                   # both directions (optional when both below are given)
//! bandwidth_mbps = 10
//! delay_ms = 50
//! queue_packets = 84
//! [downlink]               # far side → emulated side; overrides [link]
//! trace = { format = "mahimahi", path = "Verizon-LTE-short.down" }
//! [uplink]                 # emulated side → far side; overrides [link]
//! trace = { format = "mahimahi", path = "Verizon-LTE-short.up" }
//! ```
//!
//! Trace paths are relative to the file. A direction given in `[uplink]` or `[downlink]`
//! replaces `[link]` whole (keys are not merged), so what a table says is all there is.

use super::ScenarioError;
use super::fields::Ctx;
use super::schema::LinkSpec;
use crate::link::LinkConfig;
use serde::Deserialize;
use std::path::Path;

/// The file's schema.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkFile {
    /// Seed of the loss models (default 1).
    pub seed: Option<u64>,
    /// Both directions.
    pub link: Option<LinkSpec>,
    /// Emulated side → far side.
    pub uplink: Option<LinkSpec>,
    /// Far side → emulated side.
    pub downlink: Option<LinkSpec>,
}

/// Both directions of a validated link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkPair {
    /// Emulated side → far side.
    pub uplink: LinkConfig,
    /// Far side → emulated side.
    pub downlink: LinkConfig,
    /// Seed of the loss models.
    pub seed: u64,
}

impl LinkPair {
    /// Reads and validates a link file; trace paths are relative to its directory.
    pub fn load(path: &Path) -> Result<LinkPair, ScenarioError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            file: file.clone(),
            source,
        })?;
        LinkPair::parse(&text, &file, path.parent().unwrap_or(Path::new(".")))
    }

    /// Parses and validates link-file text; `file` names it in errors.
    pub fn parse(text: &str, file: &str, base_dir: &Path) -> Result<LinkPair, ScenarioError> {
        let parsed: LinkFile = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        LinkPair::from_file(&parsed, file, base_dir)
    }

    /// Validates an already parsed file.
    pub fn from_file(f: &LinkFile, file: &str, base_dir: &Path) -> Result<LinkPair, ScenarioError> {
        let ctx = Ctx { file, base_dir };
        let pick = |name: &str, own: &Option<LinkSpec>| match (own, &f.link) {
            (Some(spec), _) => link_config(spec, name, file, base_dir),
            (None, Some(both)) => link_config(both, "link", file, base_dir),
            (None, None) => Err(ctx.invalid(
                name,
                "missing: give [link] for both directions, or both [uplink] and [downlink]",
            )),
        };
        Ok(LinkPair {
            uplink: pick("uplink", &f.uplink)?,
            downlink: pick("downlink", &f.downlink)?,
            seed: f.seed.unwrap_or(1),
        })
    }
}

/// Validates one link direction's table; `field` names it in errors (e.g. `uplink`), `file`
/// the file it came from, and relative trace paths start at `base_dir`.
pub fn link_config(
    spec: &LinkSpec,
    field: &str,
    file: &str,
    base_dir: &Path,
) -> Result<LinkConfig, ScenarioError> {
    super::validate::link_config(&Ctx { file, base_dir }, field, spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::{Bandwidth, LossModel, QueueLimit};
    use std::time::Duration;

    #[test]
    fn one_table_for_both_directions_or_one_each() {
        let both = "[link]\nbandwidth_mbps = 10\ndelay_ms = 50\nqueue_packets = 84\n";
        let p = LinkPair::parse(both, "l.toml", Path::new(".")).expect("valid");
        assert_eq!(p.uplink, p.downlink);
        assert_eq!(p.uplink.bandwidth, Bandwidth::bits_per_s(10e6));
        assert_eq!(p.uplink.delay, Duration::from_millis(50));
        assert_eq!(p.uplink.queue, QueueLimit::Packets(84));
        assert_eq!(p.seed, 1);
        let split = format!(
            "seed = 4\n{both}[uplink]\nbandwidth_kbps = 500\nloss = {{ bernoulli = 0.01 }}\n"
        );
        let p = LinkPair::parse(&split, "l.toml", Path::new(".")).expect("valid");
        assert_eq!(p.seed, 4);
        assert_eq!(p.uplink.bandwidth, Bandwidth::bits_per_s(500e3));
        assert_eq!(p.uplink.loss, LossModel::Bernoulli { p: 0.01 });
        assert_eq!(p.uplink.delay, Duration::ZERO, "tables are not merged");
        assert_eq!(p.downlink.delay, Duration::from_millis(50));
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let e = LinkPair::parse("[uplink]\nbandwidth_mbps = 1\n", "l.toml", Path::new("."))
            .expect_err("no downlink");
        assert!(e.to_string().contains("l.toml: field `downlink`"), "{e}");
        let e = LinkPair::parse("[link]\nbandwidth_mbps = -1\n", "l.toml", Path::new("."))
            .expect_err("negative rate");
        assert!(e.to_string().contains("link.bandwidth_mbps"), "{e}");
        let e = LinkPair::parse("[link]\nrate = 1\n", "l.toml", Path::new("."))
            .expect_err("unknown key");
        assert!(e.to_string().contains("rate"), "{e}");
    }
}
