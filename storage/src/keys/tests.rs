//! Key order and round trips.

use proptest::prelude::*;

use super::*;

proptest! {
    #[test]
    fn log_key_order_is_index_order(a: u64, b: u64) {
        prop_assert_eq!(log_key(a).cmp(&log_key(b)), a.cmp(&b));
    }

    #[test]
    fn snapshot_chunk_key_order_is_chunk_order(a: u32, b: u32) {
        prop_assert_eq!(snapshot_chunk_key(a).cmp(&snapshot_chunk_key(b)), a.cmp(&b));
    }

    #[test]
    fn timeseq_keys_round_trip_and_sort_by_second(name in "[A-Za-z0-9_.:-]{1,128}", a: (u64, u8), b: (u64, u8)) {
        let (second_key, namespace_key) = (timeseq_second_key(a.0, a.1), timeseq_namespace_key(&name));
        prop_assert_eq!(timeseq_second(&second_key), Some(a));
        prop_assert_eq!(timeseq_namespace_name(&namespace_key), Some(name.as_str()));
        // Keys sort by second, then shard: forgetting the seconds below a horizon is the range
        // below its start key.
        prop_assert_eq!(second_key.cmp(&timeseq_second_key(b.0, b.1)), a.cmp(&b));
        prop_assert_eq!(second_key < timeseq_second_start(b.0), a.0 < b.0);
    }

    #[test]
    fn tag_keys_round_trip_and_keep_name_order(a in "[A-Za-z0-9_.:-]{1,128}", b in "[A-Za-z0-9_.:-]{1,128}") {
        let key = tag_key(&a);
        prop_assert_eq!(tag_name(&key), Some(a.as_str()));
        prop_assert_eq!(tag_key(&a).cmp(&tag_key(&b)), a.cmp(&b));
    }
}

#[test]
fn fixed_keys() {
    assert_eq!(log_key(1), [0, 0, 0, 0, 0, 0, 0, 1]);
    assert_eq!(tag_key("orders"), b"tag/orders");
    assert_eq!(tag_name(b"last_applied"), None);
    assert_eq!(snapshot_chunk_key(2), b"snapshot/data/\0\0\0\x02");
    assert_eq!(timeseq_namespace_key("orders"), b"timeseq/ns/orders");
    assert_eq!(timeseq_second_key(0x0102, 7), b"timeseq/seq/\0\0\0\0\0\0\x01\x02\x07");
    assert_eq!(timeseq_second(b"timeseq/seq/\0\0\0\0\0\0\x01"), None, "a second is 8 bytes");
    assert_eq!(timeseq_second(b"timeseq/seq/\0\0\0\0\0\0\0\x01\x02\x03"), None, "a shard is 1 byte");
    assert_eq!(timeseq_second(b"timeseq/clock"), None);
    assert_eq!(timeseq_namespace_name(b"timeseq/clock"), None);
    assert_eq!(timeseq_window_key(0x0102, 0x0a0b), b"timeseq/win/\0\0\0\0\0\0\x01\x02\0\0\0\0\0\0\x0a\x0b");
    assert_eq!(timeseq_window(b"timeseq/win/\0\0\0\0\0\0\x01\x02\0\0\0\0\0\0\x0a\x0b"), Some((0x0102, 0x0a0b)));
    assert_eq!(timeseq_window(b"timeseq/win/\0\0\x01"), None, "a last second is 8 bytes");
    assert_eq!(timeseq_window(b"timeseq/win/\0\0\0\0\0\0\x01\x02orders"), None, "a record is 8 bytes");
    assert_eq!(timeseq_window(b"timeseq/seq/\0\0\0\0\0\0\x01\x02\0\0\0\0\0\0\x0a\x0b"), None);
    assert!(timeseq_window_start(0x0102) <= timeseq_window_key(0x0102, 0));
    assert!(timeseq_window_key(0x0101, u64::MAX) < timeseq_window_start(0x0102));
}
