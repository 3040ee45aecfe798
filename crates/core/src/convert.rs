//! Narrowing conversions that cannot panic or silently wrap, for lengths and counters that go
//! into smaller wire fields or types: they saturate, and say so by their names.

/// `v` as `u32`, saturating at `u32::MAX`.
pub fn u32_sat(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// `v` as `u16`, saturating at `u16::MAX`.
pub fn u16_sat(v: u64) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

/// `v` as `u32`, saturating at `u32::MAX`.
pub fn usize_u32_sat(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// `v` as `u64`: rounded toward zero, saturating at 0 and `u64::MAX`, NaN to 0.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "float-to-integer `as` saturates (and maps NaN to 0): exactly the behaviour wanted"
)]
pub fn f64_u64_sat(v: f64) -> u64 {
    v as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_conversions_saturate() {
        assert_eq!(u32_sat(u64::MAX), u32::MAX);
        assert_eq!(u32_sat(7), 7);
        assert_eq!(u16_sat(70_000), u16::MAX);
        assert_eq!(usize_u32_sat(usize::MAX), u32::MAX);
        assert_eq!(f64_u64_sat(-1.0), 0);
        assert_eq!(f64_u64_sat(f64::NAN), 0);
        assert_eq!(f64_u64_sat(1e30), u64::MAX);
        assert_eq!(f64_u64_sat(2.9), 2);
    }
}
