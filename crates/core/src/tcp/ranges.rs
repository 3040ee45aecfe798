//! Sorted, disjoint byte ranges `[start, end)` of stream positions: the receiver's
//! out-of-order data and the sender's SACK scoreboard are both kept this way.

/// Inserts `[start, end)` into `ranges` (sorted, disjoint), merging overlapping or adjacent
/// neighbours, and keeps at most `max` ranges (the lowest ones).
pub(super) fn insert_merged(ranges: &mut Vec<(u64, u64)>, start: u64, end: u64, max: usize) {
    let idx = ranges.partition_point(|&(s, _)| s < start);
    ranges.insert(idx, (start, end));
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for &(s, e) in ranges.iter() {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged.truncate(max);
    *ranges = merged;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_overlapping_and_adjacent_ranges_merge() {
        let mut r = vec![(10, 20), (30, 40)];
        insert_merged(&mut r, 20, 30, 8);
        assert_eq!(r, [(10, 40)]);
        insert_merged(&mut r, 50, 60, 8);
        insert_merged(&mut r, 5, 12, 8);
        assert_eq!(r, [(5, 40), (50, 60)]);
        insert_merged(&mut r, 70, 80, 2);
        assert_eq!(
            r,
            [(5, 40), (50, 60)],
            "the highest range is dropped at the bound"
        );
    }
}
