//! The sender's SACK scoreboard (RFC 6675 §3–4): which ranges above SND.UNA the receiver has
//! reported holding, and the three questions loss recovery asks of it — `IsLost`, `pipe`
//! and where the next hole is.
//!
//! Positions are stream positions (see [`super::seq`]). Ranges are half-open `[start, end)`,
//! sorted and disjoint.

use super::ranges::insert_merged;

/// RFC 6675 §2 DupThresh.
const DUP_THRESH: u64 = 3;

/// Bound on remembered ranges. A receiver reports at most four blocks per ACK and each new
/// block either extends a range or adds one per hole; a window with more holes than this is
/// not plausible, and dropping the highest ranges only makes the sender retransmit more.
const MAX_RANGES: usize = 1024;

/// SACKed ranges above the cumulative acknowledgement.
#[derive(Clone, Debug, Default)]
pub(super) struct Scoreboard {
    ranges: Vec<(u64, u64)>,
}

impl Scoreboard {
    /// RFC 6675 §4 `Update()`: records the SACK blocks of an ACK whose cumulative
    /// acknowledgement is `una`; blocks below `una` or beyond `max` (never sent) are ignored.
    /// Returns true when a block reported data not SACKed before.
    pub(super) fn update(&mut self, una: u64, max: u64, blocks: &[(u64, u64)]) -> bool {
        self.ranges.retain_mut(|r| {
            r.0 = r.0.max(una);
            r.1 > r.0
        });
        let mut grew = false;
        for &(start, end) in blocks {
            let (start, end) = (start.max(una), end.min(max));
            if start >= end {
                continue;
            }
            let before = self.sacked_bytes_above(start);
            insert_merged(&mut self.ranges, start, end, MAX_RANGES);
            grew |= self.sacked_bytes_above(start) > before;
        }
        grew
    }

    /// Forgets everything (the connection no longer uses SACK information).
    pub(super) fn clear(&mut self) {
        self.ranges.clear();
    }

    /// The end of the SACKed range holding `pos`, if `pos` is SACKed.
    pub(super) fn sacked_until(&self, pos: u64) -> Option<u64> {
        let idx = self.ranges.partition_point(|&(_, e)| e <= pos);
        self.ranges
            .get(idx)
            .filter(|&&(s, _)| s <= pos)
            .map(|&(_, e)| e)
    }

    /// The start of the first SACKed range above `pos`, if any.
    pub(super) fn next_sacked(&self, pos: u64) -> Option<u64> {
        let idx = self.ranges.partition_point(|&(s, _)| s <= pos);
        self.ranges.get(idx).map(|&(s, _)| s)
    }

    fn sacked_bytes_above(&self, pos: u64) -> u64 {
        self.ranges
            .iter()
            .filter(|&&(_, e)| e > pos)
            .map(|&(s, e)| e - s.max(pos))
            .sum()
    }

    /// RFC 6675 §4 `IsLost(SeqNum)`: "DupThresh discontiguous SACKed sequences have arrived
    /// above 'SeqNum' or more than (DupThresh - 1) * SMSS bytes with sequence numbers greater
    /// than 'SeqNum' have been SACKed". Ranges stand for the discontiguous sequences.
    pub(super) fn is_lost(&self, pos: u64, smss: u64) -> bool {
        let above = self.ranges.iter().filter(|&&(s, _)| s > pos).count();
        above as u64 >= DUP_THRESH || self.sacked_bytes_above(pos) > (DUP_THRESH - 1) * smss
    }

    /// RFC 6675 §4 `SetPipe()`: of the octets in `[una, max)` not SACKed, each counts once if
    /// not lost and once more if retransmitted in this recovery (below `high_rxt`). The loss
    /// status is the same for every octet of a hole, so the sum runs over holes.
    pub(super) fn pipe(&self, una: u64, max: u64, high_rxt: u64, smss: u64) -> u64 {
        let mut pipe = 0;
        let mut pos = una;
        for &(s, e) in self.ranges.iter().chain(std::iter::once(&(max, max))) {
            let hole_end = s.min(max);
            if hole_end > pos {
                let len = hole_end - pos;
                if !self.is_lost(pos, smss) {
                    pipe += len;
                }
                pipe += high_rxt.clamp(pos, hole_end) - pos;
            }
            pos = pos.max(e);
            if pos >= max {
                break;
            }
        }
        pipe
    }

    /// The first hole (unSACKed range below the highest SACKed position) that starts at or
    /// after `from`, clipped to start at `from`.
    pub(super) fn next_hole(&self, from: u64) -> Option<(u64, u64)> {
        let mut pos = from;
        for &(s, e) in &self.ranges {
            if e <= pos {
                continue;
            }
            if s > pos {
                return Some((pos, s));
            }
            pos = e;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMSS: u64 = 100;

    fn board(blocks: &[(u64, u64)]) -> Scoreboard {
        let mut b = Scoreboard::default();
        b.update(1, 10_000, blocks);
        b
    }

    #[test]
    fn test_update_merges_and_trims_below_una() {
        let mut b = board(&[(201, 301), (301, 401), (601, 701)]);
        assert_eq!(b.ranges, vec![(201, 401), (601, 701)]);
        assert!(!b.update(1, 10_000, &[(201, 301)]), "nothing new");
        assert!(b.update(251, 10_000, &[(701, 801)]));
        assert_eq!(b.ranges, vec![(251, 401), (601, 801)]);
        b.update(650, 10_000, &[]);
        assert_eq!(b.ranges, vec![(650, 801)]);
    }

    #[test]
    fn test_blocks_beyond_what_was_sent_are_ignored() {
        let mut b = Scoreboard::default();
        b.update(1, 500, &[(401, 601), (700, 800)]);
        assert_eq!(b.ranges, vec![(401, 500)]);
    }

    #[test]
    fn test_is_lost_by_bytes_or_by_count() {
        // 3 segments SACKed above 1 in one range: 300 bytes > 2 * SMSS.
        assert!(board(&[(101, 401)]).is_lost(1, SMSS));
        // 2 segments only: not lost.
        assert!(!board(&[(101, 301)]).is_lost(1, SMSS));
        // Three discontiguous single bytes above.
        assert!(board(&[(10, 11), (20, 21), (30, 31)]).is_lost(1, SMSS));
    }

    #[test]
    fn test_pipe_counts_unsacked_not_lost_and_retransmitted() {
        // Sent [1, 1001); SACKed [101, 401) and [501, 601): hole [1, 101) is lost (300 + 100
        // SACKed above), hole [401, 501) is not (100 above), tail [601, 1001) is not.
        let b = board(&[(101, 401), (501, 601)]);
        assert_eq!(b.pipe(1, 1001, 1, SMSS), 100 + 400);
        // The lost hole retransmitted: it counts once more.
        assert_eq!(b.pipe(1, 1001, 101, SMSS), 100 + 400 + 100);
    }

    #[test]
    fn test_next_hole_and_lookups() {
        let b = board(&[(101, 201), (301, 401)]);
        assert_eq!(b.next_hole(1), Some((1, 101)));
        assert_eq!(b.next_hole(150), Some((201, 301)));
        assert_eq!(b.next_hole(401), None, "nothing SACKed above");
        assert_eq!(b.sacked_until(150), Some(201));
        assert_eq!(b.sacked_until(250), None);
        assert_eq!(b.next_sacked(250), Some(301));
    }
}
