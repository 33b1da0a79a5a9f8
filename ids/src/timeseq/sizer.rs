//! `RangeSizer`: how many sequences a node claims at once, from its own recent rate (the role of
//! Leaf's dynamic step).
//!
//! A claim covers about a quarter second at the rate of the last full second, between `min` and
//! `max`. Small claims waste little: what a node holds when its second ends is never served (a
//! gap), and a namespace's seconds are shared by every node, so a node holding too much starves
//! the others within that second.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeSizer {
    pub min: u64,
    pub max: u64,
}

impl RangeSizer {
    /// Sizes for a namespace with `2^seq_bits` sequences per second: at most a sixteenth of it.
    pub fn for_seq_bits(seq_bits: u8) -> RangeSizer {
        let limit = 1u64 << seq_bits;
        let max = (limit / 16).max(1);
        RangeSizer { min: 64.min(max), max }
    }

    /// The size of the next claim when the last full second served `last_second_ids`.
    pub fn size(&self, last_second_ids: u64) -> u64 {
        (last_second_ids / 4).clamp(self.min, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_rate_within_bounds() {
        let sizer = RangeSizer::for_seq_bits(19);
        assert_eq!(sizer, RangeSizer { min: 64, max: 32_768 });
        assert_eq!(sizer.size(0), 64);
        assert_eq!(sizer.size(40_000), 10_000);
        assert_eq!(sizer.size(10_000_000), 32_768);
        assert_eq!(RangeSizer::for_seq_bits(1), RangeSizer { min: 1, max: 1 });
    }
}
