//! Table tests of the time-sequence registry.

use super::*;

const T0_S: u64 = 1_800_000_000;

fn record(created_at_ms: u64) -> NamespaceRecord {
    NamespaceRecord {
        epoch_s: DEFAULT_EPOCH_S,
        utc_offset_s: 0,
        shard_bits: DEFAULT_SHARD_BITS,
        seq_bits: DEFAULT_SEQ_BITS,
        description: String::new(),
        created_at_ms,
    }
}

fn registry() -> TimeseqRegistry {
    let mut registry = TimeseqRegistry::default();
    assert!(matches!(registry.create("orders", record(1)), Response::Namespace { .. }));
    registry
}

#[test]
fn claims_of_one_second_follow_each_other_and_stop_at_the_limit() {
    let mut r = registry();
    let now_ms = T0_S * 1000;
    assert_eq!(r.claim("orders", T0_S, 1000, now_ms), Response::TimeseqRange { second: T0_S, start: 0, end: 1000 });
    assert_eq!(r.claim("orders", T0_S, 10, now_ms), Response::TimeseqRange { second: T0_S, start: 1000, end: 1010 });
    assert_eq!(
        r.claim("orders", T0_S, 1 << 19, now_ms),
        Response::TimeseqRange { second: T0_S, start: 1010, end: 1 << 19 }
    );
    assert_eq!(r.claim("orders", T0_S, 1, now_ms), Response::Rejected(Rejection::SecondExhausted));
    // Another second starts at zero.
    assert_eq!(r.claim("orders", T0_S + 1, 5, now_ms), Response::TimeseqRange { second: T0_S + 1, start: 0, end: 5 });
}

#[test]
fn seconds_below_the_horizon_or_past_the_lookahead_are_refused_and_change_nothing() {
    let mut r = registry();
    let now_ms = T0_S * 1000 + 500;
    r.claim("orders", T0_S, 1, now_ms);
    let before = r.clone();
    let horizon_s = T0_S - RETENTION_S;
    assert_eq!(
        r.claim("orders", horizon_s - 1, 1, now_ms),
        Response::Rejected(Rejection::ClockBackwards { horizon_s })
    );
    // A node whose clock is 20 minutes behind is told so, whatever its own now_ms says.
    let behind_ms = now_ms - 20 * 60 * 1000;
    assert_eq!(
        r.claim("orders", behind_ms / 1000, 1, behind_ms),
        Response::Rejected(Rejection::ClockBackwards { horizon_s })
    );
    let limit_s = (now_ms + LOOKAHEAD_MS) / 1000;
    assert_eq!(r.claim("orders", limit_s + 1, 1, now_ms), Response::Rejected(Rejection::ClockAhead { limit_s }));
    assert_eq!(r.claim("nope", T0_S, 1, now_ms), Response::Rejected(Rejection::NamespaceNotFound));
    assert!(matches!(r.claim("orders", T0_S, 0, now_ms), Response::Rejected(Rejection::InvalidArgument(_))));
    assert!(matches!(r.claim("orders", 5, 1, now_ms), Response::Rejected(Rejection::InvalidArgument(_))));
    assert_eq!(r, before);
    // The horizon itself is still claimable, and the lookahead's last second.
    assert!(matches!(r.claim("orders", horizon_s, 1, now_ms), Response::TimeseqRange { .. }));
    assert!(matches!(r.claim("orders", limit_s, 1, now_ms), Response::TimeseqRange { .. }));
}

#[test]
fn forgotten_seconds_are_only_those_below_the_horizon() {
    let mut r = registry();
    r.claim("orders", T0_S, 7, T0_S * 1000);
    r.claim("orders", T0_S + RETENTION_S, 1, (T0_S + RETENTION_S) * 1000);
    assert_eq!(r.next_seq["orders"].get(&T0_S), Some(&7), "the horizon itself is kept");
    r.claim("orders", T0_S + RETENTION_S + 1, 1, (T0_S + RETENTION_S + 1) * 1000);
    assert_eq!(r.next_seq["orders"].get(&T0_S), None);
    let horizon_s = T0_S + 1;
    assert_eq!(
        r.claim("orders", T0_S, 1, (T0_S + RETENTION_S + 1) * 1000),
        Response::Rejected(Rejection::ClockBackwards { horizon_s })
    );
}

/// Forgetting walks every namespace, so it runs only once the horizon rose: a claim under the
/// same horizon leaves the seconds alone, and the first claim under a higher one forgets every
/// second below it, in every namespace, whatever the mark said.
#[test]
fn seconds_are_forgotten_once_per_rise_of_the_horizon() {
    let mut r = registry();
    assert!(matches!(r.create("other", record(1)), Response::Namespace { .. }));
    let now_ms = (T0_S + RETENTION_S) * 1000;
    r.claim("other", T0_S, 1, now_ms);
    assert_eq!(r.forgotten_below.horizon_s(), T0_S);
    // Planted below the mark, which no claim can do: a claim under the same horizon does not look.
    r.next_seq.get_mut("other").expect("claimed").insert(T0_S - 1, 1);
    r.claim("orders", T0_S + 5, 1, now_ms + 999);
    assert_eq!(r.next_seq["other"].get(&(T0_S - 1)), Some(&1), "no forget under the same horizon");
    r.claim("orders", T0_S + 5, 1, now_ms + 1000);
    assert_eq!(r.forgotten_below.horizon_s(), T0_S + 1);
    assert_eq!(r.next_seq.get("other"), None, "both seconds forgotten, and the empty namespace");
    // A refused claim moves nothing, also not the mark.
    let horizon_s = T0_S + 1;
    assert_eq!(r.claim("orders", T0_S, 1, now_ms + 1000), Response::Rejected(Rejection::ClockBackwards { horizon_s }));
    assert_eq!(r.forgotten_below.horizon_s(), horizon_s);
}

/// The mark is not state: a registry read back from its bytes (mark 0) equals the one written,
/// and its first claim forgets as every claim did before the mark existed.
#[test]
fn the_forget_mark_is_neither_persisted_nor_compared() {
    let mut r = registry();
    r.claim("orders", T0_S, 1, T0_S * 1000);
    let bytes = crate::codec::encode(&r).expect("encode");
    let read: TimeseqRegistry = crate::codec::decode(&bytes).expect("decode");
    assert_eq!(read.forgotten_below.horizon_s(), 0);
    assert_ne!(r.forgotten_below.horizon_s(), 0);
    assert_eq!(read, r);
    assert_eq!(crate::codec::encode(&read).expect("encode"), bytes);
}

#[test]
fn namespaces_are_validated_and_created_once() {
    let mut r = registry();
    assert!(matches!(r.create("orders", record(1)), Response::Namespace { .. }), "a retried create");
    assert_eq!(r.create("orders", record(2)), Response::Rejected(Rejection::NamespaceExists));
    let bad = [
        NamespaceRecord { shard_bits: 21, seq_bits: 10, ..record(1) },
        NamespaceRecord { seq_bits: 0, ..record(1) },
        NamespaceRecord { seq_bits: 25, shard_bits: 0, ..record(1) },
        NamespaceRecord { shard_bits: 20, seq_bits: 20, ..record(1) },
        NamespaceRecord { shard_bits: 0, seq_bits: 1, ..record(1) },
        NamespaceRecord { utc_offset_s: 19 * 3600, ..record(1) },
        NamespaceRecord { utc_offset_s: 30, ..record(1) },
        NamespaceRecord { epoch_s: LAST_WRITABLE_SECOND - 100, ..record(1) },
        NamespaceRecord { description: "d".repeat(tag::MAX_DESCRIPTION_LEN + 1), ..record(1) },
    ];
    for record in bad {
        let answer = r.create("other", record.clone());
        assert!(matches!(answer, Response::Rejected(Rejection::InvalidArgument(_))), "{record:?}: {answer:?}");
    }
    assert!(matches!(r.create("bad name", record(1)), Response::Rejected(Rejection::InvalidArgument(_))));
    assert_eq!(r.namespaces.len(), 1);
    assert!(matches!(
        r.create("wide", NamespaceRecord { utc_offset_s: -5 * 3600 - 1800, ..record(1) }),
        Response::Namespace { .. }
    ));
}

#[test]
fn a_restore_fills_only_an_empty_registry_and_its_floor_refuses_older_seconds() {
    let mut r = TimeseqRegistry::default();
    let namespaces = BTreeMap::from([("orders".to_string(), record(1))]);
    assert_eq!(r.restore(&namespaces, T0_S + 100), Response::TimeseqRestored { namespaces: 1 });
    let now_ms = (T0_S + 95) * 1000;
    assert_eq!(
        r.claim("orders", T0_S + 99, 1, now_ms),
        Response::Rejected(Rejection::ClockBackwards { horizon_s: T0_S + 100 })
    );
    assert!(matches!(r.claim("orders", T0_S + 100, 1, now_ms), Response::TimeseqRange { .. }));
    assert!(matches!(r.restore(&namespaces, 0), Response::Rejected(Rejection::InvalidArgument(_))));
    assert_eq!(r.floor_s, T0_S + 100);
}
