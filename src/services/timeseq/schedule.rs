//! When a node claims its windows and how large: the first window's length, the moment of each
//! renewal and the block's growth and decay. Pure functions of names, node and numbers (only
//! timing and sizes depend on them, never which sequences a node may serve).

/// The window a node reserves a block in every second of, per namespace in use (at most
/// `leafraft_state::timeseq::MAX_WINDOW_S`): the longest allowed, so a namespace in steady use
/// costs one claim per node a minute; its cost is a block per second that may go unserved (a
/// gap, in a space of 2^seq_bits per second), and a rate that changes is followed once a window.
pub(super) const WINDOW_S: u64 = leafraft_state::timeseq::MAX_WINDOW_S;

/// How long before a window starts its claim is sent at the earliest: inside the look-ahead
/// (10 s; the claim's own `now_ms` is read later still).
pub(super) const WINDOW_AHEAD_MS: u64 = 9_500;

/// The span the renewals are spread over: each namespace renews at its own moment, a hash of its
/// name, between `WINDOW_AHEAD_MS` and this much less before its window. Namespaces first used
/// in the same second have windows that end in the same second, and renewing them all in one
/// tick (30,000 claims at 10,000 namespaces on three nodes) slowed every request for seconds;
/// the latest moment still leaves 5.5 s for a claim to commit before its window's first second.
const WINDOW_SPREAD_MS: u64 = 4_000;

/// The shortest first window: a namespace's first window on a node lasts between this and
/// `WINDOW_S`, by a hash of its name and the node, so that namespaces first used in the same
/// second renew over the whole of a window instead of in one wave (30,000 claims within seconds
/// at 10,000 namespaces on three nodes), and later windows, a full `WINDOW_S` each, keep that
/// spread. Long enough that the first renewal (up to `WINDOW_AHEAD_MS` before the window ends)
/// comes after the first wave of claims.
const MIN_FIRST_WINDOW_S: u64 = 15;

/// The smallest block a window reserves per second (a namespace asked for one ID a second on
/// this node gets a few: the request that finds the block used up takes a one-second claim).
const MIN_WINDOW_BLOCK: u64 = 4;

/// How long before its next window `namespace` renews: between `WINDOW_AHEAD_MS` and
/// `WINDOW_SPREAD_MS` less, fixed per name (CRC-32 of it; only timing depends on it).
pub(super) fn renewal_ahead_ms(namespace: &str) -> u64 {
    WINDOW_AHEAD_MS - u64::from(crc32fast::hash(namespace.as_bytes())) % WINDOW_SPREAD_MS
}

/// How long the first window of `namespace` on node `node_id` is: between `MIN_FIRST_WINDOW_S`
/// and `WINDOW_S`, fixed per (name, node) (CRC-32 of both; only timing depends on it).
pub(super) fn first_window_s(namespace: &str, node_id: u64) -> u64 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(namespace.as_bytes());
    hasher.update(&node_id.to_le_bytes());
    let span = WINDOW_S - MIN_FIRST_WINDOW_S + 1;
    MIN_FIRST_WINDOW_S + u64::from(hasher.finalize()) % span
}

/// The block of the next window: Leaf's dynamic step over windows. It starts at the busiest
/// second since the last window claim plus half, rounded up to a power of two; grows at once
/// (at least doubling) when that is more than the last block, shrinks by half only when it is
/// below a quarter of it; between `MIN_WINDOW_BLOCK` and `max`.
pub(super) fn window_block(last_block: u64, peak: u64, max: u64) -> u64 {
    let wanted = peak.saturating_add(peak / 2).max(MIN_WINDOW_BLOCK).next_power_of_two();
    let block = if last_block == 0 {
        wanted
    } else if wanted > last_block {
        wanted.max(last_block.saturating_mul(2))
    } else if wanted.saturating_mul(4) <= last_block {
        last_block / 2
    } else {
        last_block
    };
    block.clamp(MIN_WINDOW_BLOCK.min(max), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_blocks_grow_at_once_and_decay_by_halves() {
        let max = 32_768;
        assert_eq!(window_block(0, 0, max), MIN_WINDOW_BLOCK, "a first window knows little");
        assert_eq!(window_block(0, 1, max), 4);
        assert_eq!(window_block(0, 100, max), 256);
        assert_eq!(window_block(4, 3, max), 4, "3 and half of it fit in 4");
        assert_eq!(window_block(4, 4, max), 8, "grows at least twofold");
        assert_eq!(window_block(8, 100, max), 256);
        assert_eq!(window_block(256, 120, max), 256, "kept while above a quarter");
        assert_eq!(window_block(256, 20, max), 128, "halves once the need is a quarter");
        assert_eq!(window_block(4, 0, max), 4, "never below the minimum");
        assert_eq!(window_block(0, 1_000_000, max), max);
        assert_eq!(window_block(1, 0, 1), 1, "a namespace of one sequence a second");
    }

    #[test]
    fn renewals_are_spread_over_the_span_by_name() {
        let moments: Vec<u64> = (0..1000).map(|i| renewal_ahead_ms(&format!("ns-{i:05}"))).collect();
        assert!(moments.iter().all(|ms| (WINDOW_AHEAD_MS - WINDOW_SPREAD_MS..=WINDOW_AHEAD_MS).contains(ms)));
        // Spread: each of the span's eight half-seconds holds some of them, none most.
        let mut per_slot = [0usize; 8];
        for ms in &moments {
            per_slot[((WINDOW_AHEAD_MS - ms) / 500).min(7) as usize] += 1;
        }
        assert!(per_slot.iter().all(|n| (60..=190).contains(n)), "{per_slot:?}");
        assert_eq!(renewal_ahead_ms("orders"), renewal_ahead_ms("orders"), "fixed per name");
    }

    /// First windows end spread over the span, per node too, so the renewals after them are
    /// spread over a whole window and stay so.
    #[test]
    fn first_windows_are_spread_by_name_and_node() {
        let lengths: Vec<u64> = (0..3000).map(|i| first_window_s(&format!("ns-{:05}", i / 3), i % 3)).collect();
        assert!(lengths.iter().all(|s| (MIN_FIRST_WINDOW_S..=WINDOW_S).contains(s)));
        // Each of the span's nine five-second slots holds some of them, none most.
        let mut per_slot = [0usize; 10];
        for s in &lengths {
            per_slot[((s - MIN_FIRST_WINDOW_S) / 5) as usize] += 1;
        }
        assert!(per_slot[..9].iter().all(|n| (200..=450).contains(n)), "{per_slot:?}");
        assert_ne!(
            (0..3).map(|node| first_window_s("orders", node)).collect::<Vec<_>>(),
            vec![first_window_s("orders", 0); 3],
            "the nodes of one namespace differ"
        );
        assert_eq!(first_window_s("orders", 2), first_window_s("orders", 2), "fixed per name and node");
    }
}
