//! Device and parameter names (papers/001 §2, §3.4).
//!
//! §2 lists the parameters of a mobile host's environment: "latency, bandwidth, energy, cost,
//! signal strength, location etc."; §5 uses `avail` and `sq` (signal quality). The well-known
//! ones are variants of [`Param`]; anything else is [`Param::Custom`].

use super::error::EnvError;
use crate::time::Time;
use std::fmt;
use std::sync::Arc;

/// Longest device or parameter name, in bytes (it must fit a one-byte length on the wire).
pub const NAME_MAX_BYTES: usize = 32;

/// A validated device or parameter name: 1 to [`NAME_MAX_BYTES`] bytes of UTF-8 without
/// control characters. Cheap to clone (shared).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name(Arc<str>);

impl Name {
    /// Validates `name`.
    pub fn new(name: &str) -> Result<Name, EnvError> {
        let reason = if name.is_empty() {
            Some("empty")
        } else if name.len() > NAME_MAX_BYTES {
            Some("longer than 32 bytes")
        } else if name.chars().any(char::is_control) {
            Some("contains a control character")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(EnvError::InvalidName {
                name: name.to_owned(),
                reason,
            }),
            None => Ok(Name(Arc::from(name))),
        }
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A device parameter.
///
/// Units are a convention between whoever sets a parameter and whoever chooses its levels;
/// adaptnet's sources use bytes/s for bandwidth, ms for latency, a fraction in 0..=1 for loss,
/// and the scale of Table 3 (§5.2) for availability.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Param {
    /// Available bandwidth (`bw` in the paper).
    Bandwidth,
    /// Latency.
    Latency,
    /// Loss rate.
    Loss,
    /// Signal quality or strength (`sq`).
    SignalQuality,
    /// Availability of the device; §5.2 encodes handoffs in it (`avail`).
    Availability,
    /// Cost of communication.
    Cost,
    /// Energy left.
    Energy,
    /// Any other parameter.
    Custom(Name),
}

/// The well-known parameters with their wire codes and names; aliases follow the paper.
const KNOWN: [(Param, u8, &str, &[&str]); 7] = [
    (Param::Bandwidth, 1, "bandwidth", &["bw"]),
    (Param::Latency, 2, "latency", &[]),
    (Param::Loss, 3, "loss", &[]),
    (Param::SignalQuality, 4, "signal", &["sq", "signal_quality"]),
    (Param::Availability, 5, "availability", &["avail"]),
    (Param::Cost, 6, "cost", &[]),
    (Param::Energy, 7, "energy", &[]),
];

impl Param {
    /// The wire code of custom parameters (their name follows on the wire).
    pub const CUSTOM_CODE: u8 = 0;

    /// The parameter called `name`: a well-known name or one of the paper's aliases (`bw`,
    /// `sq`, `avail`), else a custom parameter.
    pub fn from_name(name: &str) -> Result<Param, EnvError> {
        for (p, _, canonical, aliases) in &KNOWN {
            if name == *canonical || aliases.contains(&name) {
                return Ok(p.clone());
            }
        }
        Ok(Param::Custom(Name::new(name)?))
    }

    /// The canonical name.
    pub fn name(&self) -> &str {
        match self {
            Param::Custom(n) => n.as_str(),
            known => KNOWN
                .iter()
                .find(|(p, ..)| p == known)
                .map_or("", |(_, _, name, _)| name),
        }
    }

    /// The wire code: 1..=7 for the well-known parameters, [`Param::CUSTOM_CODE`] otherwise.
    pub fn code(&self) -> u8 {
        KNOWN
            .iter()
            .find(|(p, ..)| p == self)
            .map_or(Param::CUSTOM_CODE, |(_, code, ..)| *code)
    }

    /// The well-known parameter with wire code `code`.
    pub fn from_code(code: u8) -> Option<Param> {
        KNOWN
            .iter()
            .find(|(_, c, ..)| *c == code)
            .map(|(p, ..)| p.clone())
    }
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One parameter of a device as [`crate::env::EnvTable::get_dev_params`] reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamReading {
    /// The parameter.
    pub param: Param,
    /// The last value set.
    pub raw: f64,
    /// The value the watermarks are checked against (`raw` after smoothing, if configured).
    pub effective: f64,
    /// When the last value was set.
    pub updated_at: Time,
    /// Levels currently violated and not cleared.
    pub violated: super::LevelMask,
}

/// Checks that a parameter value is usable.
pub(crate) fn check_value(value: f64) -> Result<f64, EnvError> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(EnvError::NonFiniteValue(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_names_are_validated() {
        assert!(Name::new("wlan0").is_ok());
        assert!(Name::new("").is_err());
        assert!(Name::new(&"x".repeat(33)).is_err());
        assert!(Name::new("a\nb").is_err());
    }

    #[test]
    fn test_param_names_codes_and_aliases() {
        assert_eq!(Param::from_name("avail"), Ok(Param::Availability));
        assert_eq!(Param::from_name("sq"), Ok(Param::SignalQuality));
        assert_eq!(Param::from_name("bw"), Ok(Param::Bandwidth));
        assert_eq!(Param::Availability.name(), "availability");
        for code in 1..=7 {
            let p = Param::from_code(code);
            assert_eq!(p.as_ref().map(Param::code), Some(code));
        }
        assert_eq!(Param::from_code(0), None);
        let custom = Param::from_name("location");
        assert!(matches!(custom, Ok(Param::Custom(_))));
        assert_eq!(custom.map(|p| p.code()), Ok(Param::CUSTOM_CODE));
    }
}
