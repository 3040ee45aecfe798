//! Mapping between 32-bit wire sequence numbers and 64-bit stream positions.
//!
//! Internally each direction counts positions from 0 (the SYN) upward in a `u64`, which never
//! wraps. On the wire, position `p` is `isn + p` modulo 2^32 (RFC 9293 §3.4). A received number
//! is mapped back to the position nearest to a reference the receiver already knows
//! (`rcv_nxt`, `snd_una`), which is correct while the two are less than 2^31 apart — always true
//! for windows below 1 GiB.

/// The wire sequence number of stream position `pos`.
#[allow(
    clippy::cast_possible_truncation,
    reason = "sequence numbers are positions modulo 2^32 (RFC 9293 §3.4): truncation is the point"
)]
pub fn to_wire(isn: u32, pos: u64) -> u32 {
    isn.wrapping_add(pos as u32)
}

/// The stream position of wire number `wire`, chosen nearest to `reference`.
/// Positions before 0 map to 0.
#[allow(
    clippy::cast_possible_truncation,
    reason = "the reference is compared modulo 2^32, as the wire number is"
)]
pub fn from_wire(isn: u32, wire: u32, reference: u64) -> u64 {
    let rel = wire.wrapping_sub(isn);
    let delta = rel.wrapping_sub(reference as u32) as i32;
    if delta >= 0 {
        reference.saturating_add(delta as u64)
    } else {
        reference.saturating_sub(u64::from(delta.unsigned_abs()))
    }
}

/// `a >= b` in 32-bit sequence-number (or timestamp) space: true when `a` is at most 2^31
/// ahead of `b` (RFC 7323 §5.2 compares timestamps this way).
pub fn wire_ge(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) < 1 << 31
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn test_wrap_around_is_unwrapped() {
        let isn = u32::MAX - 10;
        let pos = 100u64;
        assert_eq!(to_wire(isn, pos), 89);
        assert_eq!(from_wire(isn, 89, 90), 100);
    }

    proptest! {
        #[test]
        fn round_trip_near_reference(isn in any::<u32>(), reference in 0u64..(1 << 40),
                                     offset in -(1i64 << 30)..(1i64 << 30)) {
            let pos = (reference as i64 + offset).max(0) as u64;
            prop_assert_eq!(from_wire(isn, to_wire(isn, pos), reference), pos);
        }
    }
}
