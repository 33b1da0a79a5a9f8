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
}
