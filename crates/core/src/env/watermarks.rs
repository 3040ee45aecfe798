//! Generalized watermarks: levels, violation and clearing (papers/001 §3, Figure 1).
//!
//! > "each parameter is associated with a set of levels … Each level is either a low
//! > watermark or a high watermark. A level with a high watermark is violated when the
//! > parameter value crosses it from below. … A level with a low watermark is violated when
//! > the parameter value crosses it from above." (§3)
//!
//! > "A high watermark is *cleared* if any low watermark below it is violated. … Similarly a
//! > low watermark is *cleared* if any high watermark above it is violated." (§3)
//!
//! Precisely, for a change of the value from `old` to `new` (and no dead band):
//! a high level `L` is violated when `old < L <= new`; a low level `L` when `old > L >= new`.
//! Reaching a level counts as crossing it. This is kept as one bit per level, its *side*: a
//! high level's bit is set while the value is at or above it, a low level's while the value
//! is at or below it; a violation is a bit going from 0 to 1. A dead band `d` delays each
//! flip until the value is `d` beyond the level (see [`Watermarks::sides`]).
//!
//! Clearing resets violations *detected by earlier updates* (the "previously detected
//! violations" of §3): a level is reported cleared only if it was violated and not yet
//! cleared.
//!
//! Levels are indexed in increasing order of value, so index order is value order and the
//! sets of levels below or above a level are bit ranges of a [`LevelMask`].

use super::error::EnvError;
use std::fmt;

/// Most levels one parameter can have (the width of a [`LevelMask`]).
pub const MAX_LEVELS: usize = 128;

/// Whether a level is a high or a low watermark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LevelKind {
    /// Violated when the value crosses it from below.
    High,
    /// Violated when the value crosses it from above.
    Low,
}

/// One level of a parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Level {
    /// The level's value.
    pub value: f64,
    /// High or low watermark.
    pub kind: LevelKind,
}

impl Level {
    /// A high watermark at `value`.
    pub const fn high(value: f64) -> Level {
        Level {
            value,
            kind: LevelKind::High,
        }
    }

    /// A low watermark at `value`.
    pub const fn low(value: f64) -> Level {
        Level {
            value,
            kind: LevelKind::Low,
        }
    }
}

/// A set of level indices (0 ..= 127), as a bit set.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct LevelMask(u128);

impl LevelMask {
    /// No level.
    pub const EMPTY: LevelMask = LevelMask(0);
    /// Every level (used to subscribe to all of a parameter's levels).
    pub const ALL: LevelMask = LevelMask(u128::MAX);

    /// The set whose bit `i` is bit `i` of `bits`.
    pub const fn from_bits(bits: u128) -> LevelMask {
        LevelMask(bits)
    }

    /// The raw bits.
    pub const fn bits(self) -> u128 {
        self.0
    }

    /// The set holding `levels`; indices of [`MAX_LEVELS`] or more are ignored.
    pub fn of(levels: &[u16]) -> LevelMask {
        levels.iter().fold(LevelMask::EMPTY, |m, &l| m.with(l))
    }

    /// `self` with level `level` added (unchanged if `level` is out of range).
    pub fn with(self, level: u16) -> LevelMask {
        LevelMask(self.0 | 1u128.checked_shl(u32::from(level)).unwrap_or(0))
    }

    /// Whether `level` is in the set.
    pub fn contains(self, level: u16) -> bool {
        !self.intersect(LevelMask::EMPTY.with(level)).is_empty()
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Number of levels in the set.
    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    /// Levels in both sets.
    pub const fn intersect(self, other: LevelMask) -> LevelMask {
        LevelMask(self.0 & other.0)
    }

    /// Levels in either set.
    pub const fn union(self, other: LevelMask) -> LevelMask {
        LevelMask(self.0 | other.0)
    }

    /// Levels of `self` not in `other`.
    pub const fn minus(self, other: LevelMask) -> LevelMask {
        LevelMask(self.0 & !other.0)
    }

    /// The levels with index below `n` (all of them when `n >= 128`).
    pub fn below(n: usize) -> LevelMask {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        LevelMask(1u128.checked_shl(n).map_or(u128::MAX, |b| b - 1))
    }

    /// The levels with index `n` or above.
    pub fn from_index(n: usize) -> LevelMask {
        LevelMask(!LevelMask::below(n).0)
    }

    /// The lowest index in the set.
    pub fn lowest(self) -> Option<u16> {
        (!self.is_empty()).then(|| crate::convert::u16_sat(u64::from(self.0.trailing_zeros())))
    }

    /// The highest index in the set.
    pub fn highest(self) -> Option<u16> {
        (!self.is_empty()).then(|| crate::convert::u16_sat(u64::from(127 - self.0.leading_zeros())))
    }

    /// The indices in increasing order.
    pub fn iter(self) -> impl Iterator<Item = u16> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            Some(crate::convert::u16_sat(u64::from(i)))
        })
    }
}

impl fmt::Debug for LevelMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// The levels of one parameter, in increasing order of value (`set_dev_param_wms`, §5.2).
#[derive(Clone, Debug, PartialEq)]
pub struct Watermarks {
    levels: Vec<Level>,
    highs: LevelMask,
    lows: LevelMask,
}

impl Watermarks {
    /// Checks and stores `levels`: at most [`MAX_LEVELS`], finite, strictly increasing.
    pub fn new(levels: Vec<Level>) -> Result<Watermarks, EnvError> {
        if levels.len() > MAX_LEVELS {
            return Err(EnvError::TooManyLevels {
                count: levels.len(),
                max: MAX_LEVELS,
            });
        }
        let mut prev = f64::NEG_INFINITY;
        let (mut highs, mut lows) = (LevelMask::EMPTY, LevelMask::EMPTY);
        for (index, (level, i)) in levels.iter().zip(0u16..).enumerate() {
            if !level.value.is_finite() || level.value <= prev {
                return Err(EnvError::LevelsNotIncreasing { index });
            }
            prev = level.value;
            match level.kind {
                LevelKind::High => highs = highs.with(i),
                LevelKind::Low => lows = lows.with(i),
            }
        }
        Ok(Watermarks {
            levels,
            highs,
            lows,
        })
    }

    /// No levels: nothing is ever violated.
    pub fn none() -> Watermarks {
        Watermarks {
            levels: Vec::new(),
            highs: LevelMask::EMPTY,
            lows: LevelMask::EMPTY,
        }
    }

    /// The levels, lowest first.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// Number of levels.
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    /// Whether there are no levels.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The high watermarks.
    pub fn highs(&self) -> LevelMask {
        self.highs
    }

    /// The low watermarks.
    pub fn lows(&self) -> LevelMask {
        self.lows
    }

    /// The `k`-th high watermark from the bottom, counting from 1 (the paper's `HIGH_k`).
    pub fn high(&self, k: usize) -> Option<u16> {
        self.highs.iter().nth(k.checked_sub(1)?)
    }

    /// The `k`-th low watermark from the bottom, counting from 1 (the paper's `LOW_k`).
    pub fn low(&self, k: usize) -> Option<u16> {
        self.lows.iter().nth(k.checked_sub(1)?)
    }

    /// Levels at or below `x`.
    fn count_le(&self, x: f64) -> usize {
        self.levels.partition_point(|l| l.value <= x)
    }

    /// Levels strictly below `x`.
    fn count_lt(&self, x: f64) -> usize {
        self.levels.partition_point(|l| l.value < x)
    }

    /// The side bits for `value` with no history: highs at or below it, lows at or above it.
    pub fn plain_sides(&self, value: f64) -> LevelMask {
        let highs_on = LevelMask::below(self.count_le(value)).intersect(self.highs);
        let lows_on = LevelMask::from_index(self.count_lt(value)).intersect(self.lows);
        highs_on.union(lows_on)
    }

    /// The side bits after the value moves to `value`, from side bits `prev`, with a dead band
    /// of `dead_band` (>= 0): a high level's bit turns on when `value >= L + dead_band` and off
    /// when `value < L - dead_band`; a low level's bit turns on when `value <= L - dead_band`
    /// and off when `value > L + dead_band`; otherwise it keeps its previous state. With a
    /// zero dead band this is [`Watermarks::plain_sides`]. O(log levels).
    pub fn sides(&self, prev: LevelMask, value: f64, dead_band: f64) -> LevelMask {
        let (lo, hi) = (value - dead_band, value + dead_band);
        let highs_on = LevelMask::below(self.count_le(lo)).intersect(self.highs);
        let highs_off = LevelMask::from_index(self.count_le(hi)).intersect(self.highs);
        let lows_on = LevelMask::from_index(self.count_lt(hi)).intersect(self.lows);
        let lows_off = LevelMask::below(self.count_lt(lo)).intersect(self.lows);
        prev.minus(highs_off.union(lows_off))
            .union(highs_on.union(lows_on))
            .intersect(self.highs.union(self.lows))
    }
}

/// The outcome of one update of a parameter: levels violated and levels cleared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transition {
    /// Levels violated by this update.
    pub violated: LevelMask,
    /// Levels that were violated by an earlier update and are cleared by this one.
    pub cleared: LevelMask,
}

/// The §3 rules applied to a change of side bits `old_sides` -> `new_sides`, with `state` the
/// levels violated and not yet cleared; returns the transition and the new state.
pub fn transition(
    old_sides: LevelMask,
    new_sides: LevelMask,
    state: LevelMask,
    highs: LevelMask,
    lows: LevelMask,
) -> (Transition, LevelMask) {
    let violated = new_sides.minus(old_sides);
    let cleared = clearing(state, violated, highs, lows);
    let state = state.minus(cleared).union(violated);
    (Transition { violated, cleared }, state)
}

/// The levels of `state` that the violation of `violated` clears: lows below the highest
/// violated high, and highs above the lowest violated low (§3).
pub fn clearing(
    state: LevelMask,
    violated: LevelMask,
    highs: LevelMask,
    lows: LevelMask,
) -> LevelMask {
    let mut cleared = LevelMask::EMPTY;
    if let Some(top) = violated.intersect(highs).highest() {
        cleared = cleared.union(LevelMask::below(usize::from(top)).intersect(lows));
    }
    if let Some(bottom) = violated.intersect(lows).lowest() {
        let above = LevelMask::from_index(usize::from(bottom).saturating_add(1));
        cleared = cleared.union(above.intersect(highs));
    }
    cleared.intersect(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_mask_ranges_and_iteration() {
        assert_eq!(LevelMask::below(0), LevelMask::EMPTY);
        assert_eq!(LevelMask::below(128), LevelMask::ALL);
        assert_eq!(LevelMask::below(3), LevelMask::of(&[0, 1, 2]));
        assert_eq!(LevelMask::from_index(126), LevelMask::of(&[126, 127]));
        assert_eq!(LevelMask::from_index(200), LevelMask::EMPTY);
        let m = LevelMask::of(&[5, 0, 127, 300]);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![0, 5, 127]);
        assert_eq!((m.lowest(), m.highest()), (Some(0), Some(127)));
        assert_eq!(LevelMask::EMPTY.highest(), None);
    }

    #[test]
    fn test_levels_must_increase() {
        let bad = Watermarks::new(vec![Level::high(2.0), Level::low(1.0)]);
        assert_eq!(bad, Err(EnvError::LevelsNotIncreasing { index: 1 }));
        assert!(Watermarks::new(vec![Level::high(f64::NAN)]).is_err());
        let many = (0..129).map(|i| Level::high(f64::from(i))).collect();
        assert!(matches!(
            Watermarks::new(many),
            Err(EnvError::TooManyLevels { .. })
        ));
    }

    #[test]
    fn test_high_k_and_low_k_count_from_the_bottom() {
        let w = Watermarks::new(vec![
            Level::low(10.0),
            Level::high(20.0),
            Level::low(30.0),
            Level::high(40.0),
        ]);
        let w = w.unwrap_or_else(|_| Watermarks::none());
        assert_eq!(w.high(1), Some(1));
        assert_eq!(w.high(2), Some(3));
        assert_eq!(w.low(2), Some(2));
        assert_eq!(w.high(0), None);
        assert_eq!(w.high(3), None);
    }

    #[test]
    fn test_reaching_a_level_crosses_it() {
        let w = Watermarks::new(vec![Level::low(10.0), Level::high(20.0)])
            .unwrap_or_else(|_| Watermarks::none());
        assert_eq!(w.plain_sides(20.0), LevelMask::of(&[1]));
        assert_eq!(w.plain_sides(10.0), LevelMask::of(&[0]));
        assert_eq!(w.plain_sides(15.0), LevelMask::EMPTY);
    }

    #[test]
    fn test_dead_band_delays_flips_both_ways() {
        let w = Watermarks::new(vec![Level::high(20.0)]).unwrap_or_else(|_| Watermarks::none());
        let off = LevelMask::EMPTY;
        let on = LevelMask::of(&[0]);
        assert_eq!(w.sides(off, 21.0, 2.0), off, "inside the band above");
        assert_eq!(w.sides(off, 22.0, 2.0), on);
        assert_eq!(w.sides(on, 19.0, 2.0), on, "inside the band below");
        assert_eq!(w.sides(on, 17.9, 2.0), off);
    }
}
