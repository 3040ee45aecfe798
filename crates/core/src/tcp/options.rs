//! Values of the TCP options beyond MSS and window scale: SACK (RFC 2018) and timestamps
//! (RFC 7323 §3). Their bytes are read and written by [`super::wire`]; this file holds the
//! types, which check their own invariants so that no value built by hand can make `emit`
//! or the sender misbehave.

/// RFC 2018 §3: "The SACK option is to be used to convey extended acknowledgment
/// information" — at most four blocks fit the 40 bytes of option space, three when the
/// timestamp option is present.
pub const MAX_SACK_BLOCKS: usize = 4;

/// One SACK block: the wire sequence numbers of the first byte received and of the byte just
/// after the last one (RFC 2018 §3 "Left Edge of Block" / "Right Edge of Block").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SackBlock {
    /// First sequence number of the block.
    pub left: u32,
    /// Sequence number just after the block.
    pub right: u32,
}

/// Up to [`MAX_SACK_BLOCKS`] SACK blocks, most recent first (RFC 2018 §4). A fixed array keeps
/// headers `Copy` and allocation-free; the count can only be raised through
/// [`SackBlocks::push`], which refuses a fifth block. Equality compares the held blocks only.
#[derive(Clone, Copy, Debug, Default)]
pub struct SackBlocks {
    blocks: [SackBlock; MAX_SACK_BLOCKS],
    len: u8,
}

impl SackBlocks {
    /// No blocks.
    pub const EMPTY: SackBlocks = SackBlocks {
        blocks: [SackBlock { left: 0, right: 0 }; MAX_SACK_BLOCKS],
        len: 0,
    };

    /// Appends a block; returns false (and changes nothing) when four are already held.
    pub fn push(&mut self, block: SackBlock) -> bool {
        let Some(slot) = self.blocks.get_mut(usize::from(self.len)) else {
            return false;
        };
        *slot = block;
        self.len += 1;
        true
    }

    /// The blocks, most recent first.
    pub fn as_slice(&self) -> &[SackBlock] {
        self.blocks.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Number of blocks.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// No blocks.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first `n` blocks only.
    pub(super) fn truncated(mut self, n: usize) -> SackBlocks {
        self.len = self.len.min(u8::try_from(n).unwrap_or(u8::MAX));
        self
    }
}

impl PartialEq for SackBlocks {
    fn eq(&self, other: &SackBlocks) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for SackBlocks {}

/// The timestamp option's two fields (RFC 7323 §3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timestamps {
    /// TSval: the sender's timestamp clock when the segment was sent.
    pub value: u32,
    /// TSecr: the most recent TSval received from the peer (TS.Recent), or 0 in a SYN.
    pub echo: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_sack_blocks_refuse_a_fifth_block() {
        let mut b = SackBlocks::EMPTY;
        for i in 0..4u32 {
            assert!(b.push(SackBlock {
                left: i * 10,
                right: i * 10 + 5
            }));
        }
        assert!(!b.push(SackBlock { left: 1, right: 2 }));
        assert_eq!(b.len(), 4);
        assert_eq!(
            b.as_slice()[3],
            SackBlock {
                left: 30,
                right: 35
            }
        );
        assert_eq!(b.truncated(3).len(), 3);
    }
}
