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

#[test]
fn a_window_claim_gives_one_block_in_every_second_above_both_kinds_of_claim() {
    let mut r = registry();
    let now_ms = T0_S * 1000 + 500;
    assert_eq!(r.claim("orders", T0_S + 5, 10, now_ms), Response::TimeseqRange { second: T0_S + 5, start: 0, end: 10 });
    // Above the one-second claim of T0_S + 5, in every second of the window.
    assert_eq!(
        r.claim_window("orders", T0_S, 60, 4, now_ms),
        Response::TimeseqWindow { first_second: T0_S, seconds: 60, start: 10, end: 14 }
    );
    // A one-second claim inside the window starts above the block; outside it at zero.
    let later_ms = now_ms + 50_000;
    assert_eq!(
        r.claim("orders", T0_S + 59, 3, later_ms),
        Response::TimeseqRange { second: T0_S + 59, start: 14, end: 17 }
    );
    assert_eq!(r.claim("orders", T0_S - 1, 3, now_ms), Response::TimeseqRange { second: T0_S - 1, start: 0, end: 3 });
    // An overlapping window starts above the block and the one-second claim of T0_S + 59.
    assert_eq!(
        r.claim_window("orders", T0_S + 9, 60, 5, now_ms),
        Response::TimeseqWindow { first_second: T0_S + 9, seconds: 60, start: 17, end: 22 }
    );
    // Past the first window's end, only the second window counts.
    assert_eq!(
        r.claim("orders", T0_S + 60, 1, now_ms + 50_000),
        Response::TimeseqRange { second: T0_S + 60, start: 22, end: 23 }
    );
    assert_eq!(
        r.claim("orders", T0_S + 69, 1, now_ms + 59_000),
        Response::TimeseqRange { second: T0_S + 69, start: 0, end: 1 }
    );
    // Two windows of the same span are kept as one, at the higher end (above T0_S + 60's claim).
    assert_eq!(r.windows["orders"].len(), 2);
    r.claim_window("orders", T0_S + 9, 60, 5, now_ms);
    assert_eq!(r.windows["orders"].len(), 2);
    assert_eq!(r.windows["orders"][&(T0_S + 68, T0_S + 9)], 28);
}

#[test]
fn window_claims_are_refused_by_the_one_second_rules_and_change_nothing() {
    let mut r = registry();
    let now_ms = T0_S * 1000 + 500;
    r.claim("orders", T0_S, 1, now_ms);
    let before = r.clone();
    let horizon_s = T0_S - RETENTION_S;
    let limit_s = (now_ms + LOOKAHEAD_MS) / 1000;
    let refused = |r: &mut TimeseqRegistry, name: &str, first: u64, seconds: u64, count: u64, now: u64| match r
        .claim_window(name, first, seconds, count, now)
    {
        Response::Rejected(rejection) => rejection,
        other => panic!("{name} {first} {seconds} {count} {now}: {other:?}"),
    };
    assert_eq!(refused(&mut r, "orders", horizon_s - 1, 60, 1, now_ms), Rejection::ClockBackwards { horizon_s });
    let behind_ms = now_ms - 20 * 60 * 1000;
    assert_eq!(refused(&mut r, "orders", behind_ms / 1000, 60, 1, behind_ms), Rejection::ClockBackwards { horizon_s });
    assert_eq!(refused(&mut r, "orders", limit_s + 1, 60, 1, now_ms), Rejection::ClockAhead { limit_s });
    assert_eq!(refused(&mut r, "nope", T0_S, 60, 1, now_ms), Rejection::NamespaceNotFound);
    for (first, seconds, count) in [
        (T0_S, 0, 1),
        (T0_S, MAX_WINDOW_S + 1, 1),
        (T0_S, 60, 0),
        (T0_S, 60, (1 << 19) + 1),
        (5, 60, 1),
        (u64::MAX, 60, 1),
        (u64::MAX - 10, 60, 1),
    ] {
        assert!(matches!(refused(&mut r, "orders", first, seconds, count, now_ms), Rejection::InvalidArgument(_)));
    }
    // The namespace's last second: a window may end on it, not past it.
    let last = r.namespaces["orders"].last_second();
    let late_ms = (last - 5) * 1000;
    assert!(matches!(refused(&mut r, "orders", last - 5, 7, 1, late_ms), Rejection::InvalidArgument(_)));
    assert_eq!(r, before);
    assert!(matches!(r.claim_window("orders", last - 5, 6, 1, late_ms), Response::TimeseqWindow { .. }));
    // The horizon itself and the look-ahead's last second may start a window.
    let mut r = before.clone();
    assert!(matches!(r.claim_window("orders", horizon_s, 60, 1, now_ms), Response::TimeseqWindow { .. }));
    assert!(matches!(r.claim_window("orders", limit_s, 60, 1, now_ms), Response::TimeseqWindow { .. }));
}

#[test]
fn a_window_whose_seconds_are_used_up_is_exhausted_and_caps_at_the_limit() {
    let mut r = registry();
    let now_ms = T0_S * 1000;
    r.claim("orders", T0_S + 30, (1 << 19) - 3, now_ms + 25_000);
    assert_eq!(
        r.claim_window("orders", T0_S, 60, 10, now_ms),
        Response::TimeseqWindow { first_second: T0_S, seconds: 60, start: (1 << 19) - 3, end: 1 << 19 }
    );
    let before = r.clone();
    assert_eq!(
        r.claim_window("orders", T0_S + 59, 1, 1, now_ms + 50_000),
        Response::Rejected(Rejection::SecondExhausted)
    );
    assert_eq!(r.claim("orders", T0_S, 1, now_ms), Response::Rejected(Rejection::SecondExhausted));
    assert_eq!(r, before);
    // The second after the window is free.
    assert!(matches!(r.claim("orders", T0_S + 60, 1, now_ms + 55_000), Response::TimeseqRange { start: 0, .. }));
}

#[test]
fn windows_are_forgotten_once_their_last_second_is_below_the_horizon() {
    let mut r = registry();
    r.claim_window("orders", T0_S, 60, 7, T0_S * 1000);
    let at_ms = |s: u64| (s + RETENTION_S) * 1000;
    r.claim("orders", T0_S + 100, 1, at_ms(T0_S + 59));
    assert_eq!(r.windows["orders"].len(), 1, "the window's last second is the horizon: kept");
    r.claim("orders", T0_S + 100, 1, at_ms(T0_S + 60));
    assert_eq!(r.windows.get("orders"), None);
    assert_eq!(
        r.claim_window("orders", T0_S + 59, 2, 1, at_ms(T0_S + 60)),
        Response::Rejected(Rejection::ClockBackwards { horizon_s: T0_S + 60 })
    );
}
