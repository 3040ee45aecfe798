//! Checks of single field values, each naming the field it is about: numbers, probabilities
//! and times the simulator's clock can hold.

use super::ScenarioError;
use std::path::Path;
use std::time::Duration;

/// Context for error messages: which file, and where relative paths start.
pub(super) struct Ctx<'a> {
    pub file: &'a str,
    pub base_dir: &'a Path,
}

impl Ctx<'_> {
    pub(super) fn invalid(
        &self,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ScenarioError {
        ScenarioError::Invalid {
            file: self.file.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

pub(super) fn finite_nonneg(ctx: &Ctx, field: &str, v: f64) -> Result<f64, ScenarioError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(ctx.invalid(field, format!("must be a finite number ≥ 0, got {v}")))
    }
}

pub(super) fn positive(ctx: &Ctx, field: &str, v: f64) -> Result<f64, ScenarioError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(ctx.invalid(field, format!("must be a finite number > 0, got {v}")))
    }
}

/// The simulator's clock counts nanoseconds in a u64: no time or duration can exceed this many
/// seconds (about 584 years).
const MAX_TIME_S: f64 = 18_446_744_073.0;

/// A time or duration in seconds that the clock can hold (`zero_ok`: 0 is allowed).
pub(super) fn time_s(ctx: &Ctx, field: &str, v: f64, zero_ok: bool) -> Result<f64, ScenarioError> {
    let v = if zero_ok {
        finite_nonneg(ctx, field, v)?
    } else {
        positive(ctx, field, v)?
    };
    if v > MAX_TIME_S {
        return Err(ctx.invalid(
            field,
            format!(
                "must be at most {MAX_TIME_S:.0} s (the simulator's clock counts u64 \
                 nanoseconds), got {v}"
            ),
        ));
    }
    Ok(v)
}

/// As [`time_s`], for a value in milliseconds.
pub(super) fn time_ms(ctx: &Ctx, field: &str, v: f64, zero_ok: bool) -> Result<f64, ScenarioError> {
    let v = if zero_ok {
        finite_nonneg(ctx, field, v)?
    } else {
        positive(ctx, field, v)?
    };
    if v > MAX_TIME_S * 1e3 {
        return Err(ctx.invalid(
            field,
            format!(
                "must be at most {:.0} ms (the simulator's clock counts u64 nanoseconds), \
                 got {v}",
                MAX_TIME_S * 1e3
            ),
        ));
    }
    Ok(v)
}

pub(super) fn probability(ctx: &Ctx, field: &str, v: f64) -> Result<f64, ScenarioError> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(ctx.invalid(field, format!("must be a probability in [0, 1], got {v}")))
    }
}

pub(super) fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}
