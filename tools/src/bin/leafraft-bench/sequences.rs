//! How much of each second's sequence space the time-sequence namespaces used, read from the IDs
//! the `namespaces` run was answered: the blocks the nodes reserve stack up inside a second (one
//! node's block above another's), so the highest sequence answered in a second shows how close
//! that second came to running out, and a `SECOND_EXHAUSTED` answer below that is a waste of
//! the space, not a full second.

use leafraft_ids::timeseq::Layout;

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SequenceUse {
    /// Sequences a second holds per shard (`2^seq_bits`).
    pub limit: u64,
    /// The highest sequence answered in any (namespace, second), plus one.
    pub most_used: u64,
    /// (namespace, second) pairs that answered at least one ID.
    pub seconds: u64,
    /// Answers refused with `SECOND_EXHAUSTED`.
    pub second_exhausted: u64,
}

/// The layout of namespace `ns` as node `node` describes it (`GET /v1/timeseq/{ns}`); its epoch
/// and zone are left at 0: only which second an ID is in matters here, not when that was.
pub async fn layout(http: &reqwest::Client, node: &str, ns: &str) -> Result<Layout, String> {
    #[derive(serde::Deserialize)]
    struct View {
        shard_bits: u8,
        seq_bits: u8,
    }
    let url = format!("http://{node}/v1/timeseq/{ns}");
    let answer = http.get(&url).send().await.map_err(|e| format!("{url}: {e}"))?;
    let view: View = answer.json().await.map_err(|e| format!("{url}: {e}"))?;
    Ok(Layout { epoch_s: 0, utc_offset_s: 0, shard_bits: view.shard_bits, seq_bits: view.seq_bits })
}

impl SequenceUse {
    /// From every (namespace index, ID) answered, sorted, and the run's failures with counts.
    pub fn of(sorted_ids: &[(u32, u64)], layout: Layout, failures: &[(String, u64)]) -> SequenceUse {
        let mut used = SequenceUse { limit: layout.max_sequence() + 1, ..SequenceUse::default() };
        let mut current = None;
        for (ns, parts) in sorted_ids.iter().filter_map(|&(ns, id)| Some((ns, layout.decode(id).ok()?))) {
            let key = (ns, parts.second);
            if current != Some(key) {
                current = Some(key);
                used.seconds += 1;
            }
            used.most_used = used.most_used.max(parts.sequence + 1);
        }
        used.second_exhausted =
            failures.iter().filter(|(failure, _)| failure.contains("SECOND_EXHAUSTED")).map(|(_, n)| n).sum();
        used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_sequence_of_any_second_counts_and_exhaustion_is_read_from_the_failures() {
        let layout = Layout { epoch_s: 0, utc_offset_s: 0, shard_bits: 12, seq_bits: 19 };
        let id = |second: u64, sequence: u64| second << 31 | sequence;
        let ids = [(0, id(7, 0)), (0, id(7, 41)), (0, id(8, 3)), (1, id(7, 99)), (1, id(9, 5))];
        let failures =
            vec![("503 {\"code\":\"SECOND_EXHAUSTED\"".to_string(), 2), ("503 {\"code\":\"NO_LEADER\"".to_string(), 1)];
        let used = SequenceUse::of(&ids, layout, &failures);
        assert_eq!((used.limit, used.most_used, used.seconds, used.second_exhausted), (1 << 19, 100, 4, 2));
    }
}
