//! The one error type of the environment module's local API.

use thiserror::Error;

/// Why an environment request was refused.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum EnvError {
    /// A device or parameter name is empty, too long or contains control characters.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A parameter value is NaN or infinite.
    #[error("parameter value {0} is not finite")]
    NonFiniteValue(f64),
    /// More levels than a [`crate::env::LevelMask`] can name.
    #[error("{count} levels given, at most {max} are supported")]
    TooManyLevels {
        /// Levels given.
        count: usize,
        /// The limit, [`crate::env::watermarks::MAX_LEVELS`].
        max: usize,
    },
    /// Level values must be finite and strictly increasing with the index.
    #[error(
        "level {index} is not finite or not above the level before it; give levels in increasing order"
    )]
    LevelsNotIncreasing {
        /// The first offending level.
        index: usize,
    },
    /// A level index that the parameter's watermarks (or any watermark set) cannot have.
    #[error("level {level} does not exist (the parameter has {count} levels)")]
    NoSuchLevel {
        /// The index asked for.
        level: u16,
        /// Levels the parameter has.
        count: usize,
    },
    /// A hysteresis setting is out of range.
    #[error("invalid hysteresis: {0}")]
    InvalidHysteresis(&'static str),
    /// The subscriber id is not (or no longer) registered.
    #[error("unknown subscriber {0}")]
    UnknownSubscriber(u32),
    /// A configured bound would be exceeded.
    #[error("limit exceeded: {what} (at most {max})")]
    LimitExceeded {
        /// Which bound.
        what: &'static str,
        /// Its value.
        max: usize,
    },
    /// A queue or buffer capacity of zero was asked for.
    #[error("{0} must be at least 1")]
    ZeroCapacity(&'static str),
    /// A complex action's gate is malformed (no inputs, or a threshold above its fan-in).
    #[error("invalid gate: {0}")]
    InvalidGate(&'static str),
    /// The action has no hook on this transport yet.
    #[error("action {0} is not supported by this transport")]
    Unsupported(&'static str),
}
