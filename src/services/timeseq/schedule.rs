//! When a node claims its windows and how large: the first window's length, the moment of each
//! renewal and the block's growth and decay. Pure functions of names, node and numbers (only
//! timing, sizes and who claims depend on them, never which sequences a node may serve).

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

/// How long before its next window a member that is not the namespace's home (`home_member`)
/// claims that window itself when the home's shared claim has not reached it (`shared.rs`):
/// the home sends it 5.5 to 9.5 s ahead, so this leaves the shared claim seconds to commit and
/// the member's own claim 3 s.
pub(super) const FALLBACK_AHEAD_MS: u64 = 3_000;

/// The smallest block a window reserves per second (a namespace asked for one ID a second on
/// this node gets a few: the request that finds the block used up takes a one-second claim).
const MIN_WINDOW_BLOCK: u64 = 4;

/// How long before its next window `namespace` renews: between `WINDOW_AHEAD_MS` and
/// `WINDOW_SPREAD_MS` less, fixed per name (CRC-32 of it; only timing depends on it).
pub(super) fn renewal_ahead_ms(namespace: &str) -> u64 {
    WINDOW_AHEAD_MS - u64::from(crc32fast::hash(namespace.as_bytes())) % WINDOW_SPREAD_MS
}

/// The second of each minute at which the windows of `namespace` start, on every member: a
/// hash of its name (CRC-32; only timing depends on it). Namespaces first used in the same
/// second still renew spread over the minute, and the members of one namespace hold windows
/// that end together, so one claim (the home member's) can renew them all.
pub fn window_phase(namespace: &str) -> u64 {
    u64::from(crc32fast::hash(namespace.as_bytes())) % WINDOW_S
}

/// How long a first window from `first_second` is: up to the next second at which the
/// namespace's windows start (1 to `WINDOW_S` seconds), so that every later window, a full
/// `WINDOW_S` each, starts there on every member.
pub(super) fn first_window_s(phase: u64, first_second: u64) -> u64 {
    (phase + WINDOW_S - first_second % WINDOW_S - 1) % WINDOW_S + 1
}

/// The member whose claim renews the windows of `namespace` for every member: one of `members`
/// (sorted) by a hash of the name, so each member is home to its share of the namespaces.
/// `None` without members.
pub fn home_member(namespace: &str, members: &[u64]) -> Option<u64> {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(b"home:");
    hasher.update(namespace.as_bytes());
    let len = u64::try_from(members.len()).ok().filter(|&len| len > 0)?;
    let index = usize::try_from(u64::from(hasher.finalize()) % len).ok()?;
    members.get(index).copied()
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

    /// A first window ends where the namespace's windows start; the next one, a full window,
    /// ends there again a minute later.
    #[test]
    fn first_windows_end_at_the_namespace_phase() {
        for phase in [0, 1, 17, 59] {
            for first in 1_800_000_000..1_800_000_000 + 2 * WINDOW_S {
                let len = first_window_s(phase, first);
                assert!((1..=WINDOW_S).contains(&len), "{phase} {first} {len}");
                assert_eq!((first + len) % WINDOW_S, phase, "{phase} {first} {len}");
            }
        }
        assert_eq!(first_window_s(17, 1_800_000_040 - 1_800_000_040 % 60 + 17), WINDOW_S, "on the phase: a full one");
    }

    /// Phases spread namespaces over the minute; homes spread them over the members.
    #[test]
    fn phases_and_homes_spread_by_name() {
        let names: Vec<String> = (0..6000).map(|i| format!("ns-{i:05}")).collect();
        let mut per_ten_s = [0usize; 6];
        for name in &names {
            per_ten_s[(window_phase(name) / 10) as usize] += 1;
        }
        assert!(per_ten_s.iter().all(|n| (850..=1150).contains(n)), "{per_ten_s:?}");
        let members = [1, 2, 3];
        let mut per_member = [0usize; 3];
        for name in &names {
            let home = home_member(name, &members).expect("a home");
            per_member[(home - 1) as usize] += 1;
        }
        assert!(per_member.iter().all(|n| (1800..=2200).contains(n)), "{per_member:?}");
        assert_eq!(home_member("orders", &[]), None);
        assert_eq!(home_member("orders", &[7]), Some(7));
        assert_eq!(home_member("orders", &members), home_member("orders", &members), "fixed per name");
    }
}
