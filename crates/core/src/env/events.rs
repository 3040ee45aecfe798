//! The environment event (papers/001 §3: "Any violation of any of the watermarks is treated
//! as an event"; §3.1: the message names the device, the parameter and the watermarks
//! violated).

use super::params::{Name, Param};
use super::watermarks::LevelMask;
use crate::time::Time;

/// One event: an update of `param` on `device` violated the levels `violated` (never empty)
/// and cleared the levels `cleared`.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvEvent {
    /// When the event was decided (the update, or the end of the minimum dwell).
    pub at: Time,
    /// The device.
    pub device: Name,
    /// The parameter.
    pub param: Param,
    /// The value checked against the levels (after smoothing, if configured).
    pub value: f64,
    /// Levels violated by this update.
    pub violated: LevelMask,
    /// Levels violated earlier and cleared by this update.
    pub cleared: LevelMask,
    /// Which of the parameter's levels are high watermarks (the others are low); subscribers
    /// to a subset of the levels need it to clear their own coarser watermarks.
    pub highs: LevelMask,
}
