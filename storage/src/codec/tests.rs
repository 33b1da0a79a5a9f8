//! Golden bytes of every persisted type: a layout change fails here loudly, before it can make a
//! stored value unreadable. If a change is intended, bump `FORMAT_VERSION` and keep a decoder for
//! the old version; never just update a literal.
//!
//! History: before any release, v1 was extended in place twice, when the snowflake registry was
//! appended to the state machine and when `WorkerLease` gained `released_by` (trailing bytes
//! only; every other literal stayed the same). v2 appended `incarnation` to every
//! member (`leafraft_state::Node`) and `cluster_id` to the state machine, and added `SetClusterId`; every
//! literal changed its first byte, and those holding a membership gained the incarnations. v1 is
//! refused by name (`OpenError::OutdatedVersion`), not converted. Before any release, v2 was then
//! extended in place: the snowflake registry gained `floor_ms` (trailing bytes of the registry) and
//! `Request` gained `Restore` (the recovery); then (strictly increasing tags)
//! `TagRecord` gained `mode` (four trailing bytes of every tag record, also inside `Restore` and
//! the snapshot) and `Request` gained `CreateTagInMode`, `SetTagMode` and `ClaimMonotonic`.
//! Issue 13 appended the time-sequence registry to
//! the state machine (trailing bytes of the snapshot data) and `CreateNamespace`, `ClaimTimeseq`
//! and `RestoreTimeseq` to `Request`. Issue 17 (batched import) appended `ImportTags`.
//! Issue 24 added the store's incarnation record (a `u64` under its own key; nothing else changed).
//! Release 0.1.0 (`releases/0.1.0`) froze v2: from then on every release reads it. Release 0.2.0
//! appended `SetClusterVersion` and `Noop` to `Request` and the `cluster_version` key,
//! and snapshots past the baseline cluster version take version byte 3 (the v2 body followed by
//! the cluster version); every other v2 literal is unchanged. Release 0.3.0 appended
//! `ClaimBatch` and then `ReleaseBatch` to `Request` and `Batch` to `Response`, and stores the time-sequence registry
//! split into v2 values of its own once the cluster version reaches 0.3.0 (`timeseq_split_values`;
//! the whole registry's literal is unchanged). Then it appended `TimeseqWindow` to `Claim`
//! (inside `ClaimBatch` only) and to `Response`, the window blocks as v2 records of their own
//! (`timeseq/win/...`, `timeseq_window_records`), and the window blocks to the version-3 snapshot
//! after the cluster version (`snapshot_data_with_a_cluster_version`), and then
//! `TimeseqSharedWindow` to `Claim` (inside `ClaimBatch` only, `shared_window_claim`).

use std::fmt::Debug;

use leafraft_ids::snowflake::Layout as SnowflakeLayout;
use leafraft_state::typ;
use leafraft_state::IdStateMachine;
use leafraft_state::Request;
use leafraft_state::SnowflakeRegistry;
use leafraft_state::TagRecord;
use leafraft_state::TimeseqRegistry;
use leafraft_state::WorkerLease;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::*;
use crate::fixtures::*;
use crate::snapshot_files::SnapshotFile;
use crate::state_machine_store::timeseq::shard_of;
use crate::state_machine_store::timeseq::ShardValue;
use crate::state_machine_store::timeseq::SortedShard;
use crate::state_machine_store::timeseq::StoredWindow;
use crate::state_machine_store::timeseq::TimeseqClock;
use crate::state_machine_store::timeseq::WindowRecord;
use crate::state_machine_store::SnapshotRecord;
use std::collections::BTreeMap;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex literal")).collect()
}

fn golden<T: Serialize + DeserializeOwned + PartialEq + Debug>(what: &str, value: &T, expected: &str) {
    let bytes = encode(value).expect("encode");
    assert_eq!(hex(&bytes), expected, "the stored layout of {what} changed");
    assert_eq!(&decode::<T>(&unhex(expected)).expect("decode the golden bytes"), value, "{what}");
}

fn tag_record() -> TagRecord {
    TagRecord {
        max_id: 1001,
        step: 1000,
        description: "ids".into(),
        created_at_ms: 7,
        updated_at_ms: 8,
        mode: leafraft_state::TagMode::Segment,
    }
}

fn stored_membership() -> typ::StoredMembership {
    typ::StoredMembership::new(Some(log_id(1, 1)), membership(&[1]))
}

fn state_machine() -> IdStateMachine {
    let mut sm =
        IdStateMachine { last_applied: Some(log_id(2, 9)), membership: stored_membership(), ..Default::default() };
    sm.tags.insert("t".into(), tag_record());
    sm.snowflake = snowflake_registry();
    sm.cluster_id = 0x0a0b_0c0d;
    sm.timeseq = timeseq_registry();
    sm
}

fn timeseq_registry() -> TimeseqRegistry {
    let mut registry = TimeseqRegistry { newest_now_ms: 1_700_000_000_500, floor_s: 9, ..Default::default() };
    registry.namespaces.insert("n".into(), namespace_record());
    registry.next_seq.insert("n".into(), [(1_700_000_001, 1000)].into());
    registry
}

fn snowflake_registry() -> SnowflakeRegistry {
    let mut registry = SnowflakeRegistry { layout: Some(SnowflakeLayout::LEAF), floor_ms: 50, ..Default::default() };
    let lease = WorkerLease {
        holder: Some(2),
        epoch: 3,
        window_end_ms: 40,
        floor_ms: 20,
        last_extend_ms: 30,
        released_by: Some(4),
    };
    registry.workers.insert(5, lease);
    registry
}

#[test]
fn format_marker() {
    golden("format marker", &(), "02");
}

/// The member incarnation a store records it was created for (`keys::INCARNATION`).
#[test]
fn store_incarnation() {
    golden("store incarnation", &0x0102_0304_0506_0708u64, "020807060504030201");
}

#[test]
fn vote() {
    golden("vote", &typ::Vote::new_committed(3, 2), "020300000000000000020000000000000001");
}

/// The committed log id, `last_purged` and `last_applied` are all a `LogId`.
#[test]
fn log_id_value() {
    golden("log id", &log_id(3, 42), "02030000000000000001000000000000002a00000000000000");
}

#[test]
fn blank_entry() {
    golden("blank entry", &blank(3, 43), "02030000000000000001000000000000002b0000000000000000000000");
}

#[test]
fn membership_entry_value() {
    golden("membership entry", &membership_entry(3, 44, &[1, 2]), "02030000000000000001000000000000002c00000000000000020000000100000000000000020000000000000001000000000000000200000000000000020000000000000001000000000000000e000000000000003132372e302e302e313a38303831011000000000000002000000000000000e000000000000003132372e302e302e313a383038320210000000000000");
}

#[test]
fn normal_entries_of_every_request() {
    let expected = [
        "02030000000000000001000000000000002d00000000000000010000000000000006000000000000006f72646572730100000000000000e8030000000000000a000000000000006f7264657273206964730068e5cf8b010000",
        "02030000000000000001000000000000002d00000000000000010000000100000006000000000000006f726465727301d0070000000000000109000000000000006f72646572206964730105000000000000000168e5cf8b010000",
        "02030000000000000001000000000000002d00000000000000010000000200000006000000000000006f7264657273d007000000000000",
        "02030000000000000001000000000000002d00000000000000010000000300000006000000000000006f7264657273ed03000000000000d507000000000000",
        "02030000000000000001000000000000002d000000000000000100000004000000c1038d142c010000290a0c",
        "02030000000000000001000000000000002d00000000000000010000000500000002000000000000000068e5cf8b01000060ea0000000000001027000000000000",
        "02030000000000000001000000000000002d00000000000000010000000600000003000000040000000000000020b6e5cf8b010000108fe5cf8b010000",
        "02030000000000000001000000000000002d0000000000000001000000070000000300000004000000000000000198a2e5cf8b010000",
        "02030000000000000001000000000000002d0000000000000001000000080000000d0c0b0a00000000",
        "02030000000000000001000000000000002d00000000000000010000000900000002000000000000000700000000000000636f75706f6e73ffffffffffffff7fe80300000000000004000000000000006b6570740068e5cf8b0100000168e5cf8b0100000000000006000000000000006f7264657273581b000000000000e80300000000000004000000000000006b6570740068e5cf8b0100000168e5cf8b0100000000000001c1038d142c010000290a0c6016f0cf8b010000",
        "02030000000000000001000000000000002d00000000000000010000000a00000005000000000000007469636b730100000000000000e80300000000000005000000000000007469636b730068e5cf8b01000001000000",
        "02030000000000000001000000000000002d00000000000000010000000b00000006000000000000006f7264657273010000000268e5cf8b010000",
        "02030000000000000001000000000000002d00000000000000010000000c00000005000000000000007469636b73e803000000000000",
        "02030000000000000001000000000000002d00000000000000010000000d00000006000000000000006f726465727300e10b5e00000000807000000c1306000000000000006f72646572730068e5cf8b010000",
        "02030000000000000001000000000000002d00000000000000010000000e00000006000000000000006f726465727301f1536500000000e803000000000000f469e5cf8b010000",
        "02030000000000000001000000000000002d00000000000000010000000f000000010000000000000006000000000000006f726465727300e10b5e00000000807000000c1306000000000000006f72646572730068e5cf8b01000064f1536500000000",
        "02030000000000000001000000000000002d000000000000000100000010000000020000000000000006000000000000006f72646572738813000000000000d0070000000000000005000000000000007469636b730100000000000000e803000000000000010100000000000000740368e5cf8b010000",
        "02030000000000000001000000000000002d000000000000000100000011000000000000000200000000000000",
        "02030000000000000001000000000000002d000000000000000100000012000000",
        "02030000000000000001000000000000002d00000000000000010000001300000003000000000000000000000006000000000000006f7264657273d0070000000000000100000005000000000000007469636b73e8030000000000000200000006000000000000006f726465727301f1536500000000e803000000000000f469e5cf8b010000",
        "02030000000000000001000000000000002d000000000000000100000014000000020000000000000006000000000000006f72646572737c15000000000000581b00000000000005000000000000007469636b730200000000000000e903000000000000",
        "02030000000000000001000000000000002d0000000000000001000000150000000700000000000000636f75706f6e730100000000000000e8030000000000000700000000000000636f75706f6e730468e5cf8b010000100f0e0d0c0b0a09080706050403020128",
        "02030000000000000001000000000000002d00000000000000010000001600000001000000000000000700000000000000636f75706f6e7307000000000000000c0d0e0f000000003f",
    ];
    let requests = every_request();
    assert_eq!(requests.len(), expected.len());
    for (request, expected) in requests.into_iter().zip(expected) {
        let what = format!("{request:?}");
        golden(&what, &normal(3, 45, request), expected);
    }
}

/// `every_request()` holds every variant: each encodes with its declared position as discriminant
/// (fixint, little-endian `u32`), and the discriminant after the last one decodes to no request,
/// so no variant was left off the end (a variant left off in between fails `declared_position`'s
/// order check).
#[test]
fn every_request_holds_every_variant_of_request() {
    let requests = every_request();
    for (position, request) in requests.iter().enumerate() {
        let bytes = leafraft_state::codec::encode(request).expect("encode");
        let discriminant = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
        assert_eq!(discriminant as usize, position, "{request:?}");
    }
    let next = u32::try_from(requests.len()).expect("few variants").to_le_bytes();
    // An unknown discriminant, not a known variant whose fields are missing (`UnexpectedEnd`).
    match leafraft_state::codec::decode::<Request>(&next) {
        Err(bincode::error::DecodeError::UnexpectedEnd { .. }) | Ok(_) => {
            panic!("Request has a variant after the last one every_request() lists")
        }
        Err(_) => {}
    }
}

#[test]
fn unset_update_fields() {
    let request = Request::UpdateTag { tag: "t".into(), step: None, description: None, max_id: None, now_ms: 1 };
    golden(
        "update with nothing set",
        &normal(1, 2, request),
        "0201000000000000000100000000000000020000000000000001000000010000000100000000000000740000000100000000000000",
    );
}

#[test]
fn tag_record_value() {
    golden(
        "tag record",
        &tag_record(),
        "02e903000000000000e80300000000000003000000000000006964730700000000000000080000000000000000000000",
    );
}

#[test]
fn stored_membership_value() {
    golden("membership", &stored_membership(), "0201010000000000000001000000000000000100000000000000010000000000000001000000000000000100000000000000010000000000000001000000000000000e000000000000003132372e302e302e313a383038310110000000000000");
}

#[test]
fn snapshot_meta_record() {
    let meta = typ::SnapshotMeta {
        last_log_id: Some(log_id(2, 9)),
        last_membership: stored_membership(),
        snapshot_id: "2-9-0".into(),
    };
    golden("snapshot meta", &SnapshotRecord { meta, seq: 0, len: 100, chunks: 1 }, "020102000000000000000100000000000000090000000000000001010000000000000001000000000000000100000000000000010000000000000001000000000000000100000000000000010000000000000001000000000000000e000000000000003132372e302e302e313a3830383101100000000000000500000000000000322d392d300000000000000000640000000000000001000000");
}

/// The record naming a snapshot file (`snapshot/file`): the meta, the seq naming the file, its
/// length and CRC-32.
#[test]
fn snapshot_file_record() {
    let meta = typ::SnapshotMeta {
        last_log_id: Some(log_id(2, 9)),
        last_membership: stored_membership(),
        snapshot_id: "2-9-0".into(),
    };
    golden("snapshot file record", &SnapshotFile { meta, seq: 7, len: 100, crc32: 0xdead_beef }, "020102000000000000000100000000000000090000000000000001010000000000000001000000000000000100000000000000010000000000000001000000000000000100000000000000010000000000000001000000000000000e000000000000003132372e302e302e313a3830383101100000000000000500000000000000322d392d3007000000000000006400000000000000efbeadde");
}

#[test]
fn snowflake_registry_value() {
    golden("snowflake registry", &snowflake_registry(), "0201c1038d142c010000290a0c0100000000000000050000000102000000000000000300000000000000280000000000000014000000000000001e000000000000000104000000000000003200000000000000");
}

#[test]
fn snapshot_data() {
    golden("snapshot data", &state_machine(), "020102000000000000000100000000000000090000000000000001010000000000000001000000000000000100000000000000010000000000000001000000000000000100000000000000010000000000000001000000000000000e000000000000003132372e302e302e313a3830383101100000000000000100000000000000010000000000000074e903000000000000e8030000000000000300000000000000696473070000000000000008000000000000000000000001c1038d142c010000290a0c0100000000000000050000000102000000000000000300000000000000280000000000000014000000000000001e0000000000000001040000000000000032000000000000000d0c0b0a00000000010000000000000001000000000000006e00e10b5e00000000807000000c1306000000000000006f72646572730068e5cf8b010000010000000000000001000000000000006e010000000000000001f1536500000000e803000000000000f469e5cf8b0100000900000000000000");
}

/// A state at the baseline cluster version is snapshotted in the baseline's own format (the
/// literal of `snapshot_data`), so a baseline member can install it; past the baseline, the
/// version-3 snapshot is that body followed by the cluster version.
#[test]
fn snapshot_data_with_a_cluster_version() {
    let at_baseline = state_machine();
    assert_eq!(encode_snapshot(&at_baseline).expect("encode"), encode(&at_baseline).expect("encode"));
    assert_eq!(decode_snapshot(&encode(&at_baseline).expect("encode")).expect("decode"), at_baseline);

    let moved = IdStateMachine { cluster_version: leafraft_state::Version::new(0, 2, 0), ..state_machine() };
    let bytes = encode_snapshot(&moved).expect("encode");
    let baseline_body = encode(&at_baseline).expect("encode");
    assert_eq!(bytes[0], SNAPSHOT_WITH_CLUSTER_VERSION);
    assert_eq!(&bytes[1..baseline_body.len()], &baseline_body[1..], "the baseline body, unchanged");
    assert_eq!(
        hex(&bytes[baseline_body.len()..]),
        concat!("000000000200000000000000", "0000000000000000", "0000000000000000"),
        "then the cluster version, no window blocks and no scrambled tags' keys"
    );
    assert_eq!(decode_snapshot(&bytes).expect("decode"), moved);
    // With window blocks: they follow the cluster version.
    let mut windowed = moved.clone();
    windowed.timeseq.windows.insert("n".into(), BTreeMap::from([((1_700_000_059, 1_700_000_000), 16)]));
    let bytes = encode_snapshot(&windowed).expect("encode");
    assert_eq!(&bytes[1..baseline_body.len()], &baseline_body[1..], "the baseline body, unchanged");
    assert_eq!(
        hex(&bytes[baseline_body.len()..]),
        concat!(
            "000000000200000000000000",
            "010000000000000001000000000000006e01000000000000003bf153650000000000f15365000000001000000000000000",
            "0000000000000000",
        ),
        "then the cluster version, the window blocks and no scrambled tags' keys"
    );
    assert_eq!(decode_snapshot(&bytes).expect("decode"), windowed);
    assert_ne!(decode_snapshot(&bytes).expect("decode"), moved, "the window blocks are part of the state");

    let mut scrambled = moved.clone();
    let key = leafraft_state::ScrambleKey { key: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10, bits: 40 };
    scrambled.scramble_keys.insert("t".into(), key);
    let bytes = encode_snapshot(&scrambled).expect("encode");
    assert_eq!(
        hex(&bytes[baseline_body.len()..]),
        concat!(
            "000000000200000000000000",         // the cluster version
            "0000000000000000",                 // no window blocks
            "0100000000000000",                 // one scrambled tag,
            "010000000000000074",               // "t":
            "100f0e0d0c0b0a090807060504030201", // its key
            "28",                               // and its width: 40 bits
        ),
    );
    assert_eq!(decode_snapshot(&bytes).expect("decode"), scrambled);
    let err = decode::<IdStateMachine>(&bytes).expect_err("the generic decoder refuses version 3");
    assert_eq!(err.to_string(), "format version 3 is not supported (this binary reads version 2)");
}

#[test]
fn cluster_version_value() {
    golden("cluster version", &leafraft_state::Version::new(0, 2, 0), "02000000000200000000000000");
}

#[test]
fn timeseq_registry_value() {
    golden("time-sequence registry", &timeseq_registry(), "02010000000000000001000000000000006e00e10b5e00000000807000000c1306000000000000006f72646572730068e5cf8b010000010000000000000001000000000000006e010000000000000001f1536500000000e803000000000000f469e5cf8b0100000900000000000000");
}

/// The split layout of the registry (from cluster version 0.3.0): `timeseq/clock`,
/// `timeseq/ns/<name>` and `timeseq/seq/<second><name>`; keys in `keys::tests::fixed_keys`.
#[test]
fn timeseq_split_values() {
    let clock = TimeseqClock { newest_now_ms: 1_700_000_000_500, floor_s: 9 };
    golden("time-sequence clock", &clock, "02f469e5cf8b0100000900000000000000");
    golden(
        "time-sequence namespace",
        &namespace_record(),
        "0200e10b5e00000000807000000c1306000000000000006f72646572730068e5cf8b010000",
    );
    let shard = ShardValue::from([("n".to_string(), 1000), ("orders".to_string(), 7)]);
    golden(
        "shard of a second",
        &shard,
        "02020000000000000001000000000000006ee80300000000000006000000000000006f72646572730700000000000000",
    );
    // Built without a map when a whole registry is written: the same bytes.
    let sorted = SortedShard(&[("n", 1000), ("orders", 7)]);
    assert_eq!(encode(&sorted).expect("encode"), encode(&shard).expect("encode"));
    // Which shard a name falls in is part of the layout, as fixed as the bytes.
    let shards: Vec<u8> = ["n", "orders", "golden-ts", ""].into_iter().map(shard_of).collect();
    assert_eq!(shards, [18, 46, 3, 0]);
}

/// The window blocks (from cluster version 0.3.0): `timeseq/win/<last second><record>` → the
/// (namespace, last second, first second, highest end) of each window an apply named; the key in
/// `keys::tests::fixed_keys`. Written from borrowed names, read back as owned ones: the same bytes.
#[test]
fn timeseq_window_records() {
    let record: WindowRecord =
        vec![("orders".into(), 1_700_000_059, 1_700_000_000, 16), ("orders".into(), 1_700_000_089, 1_700_000_030, 4)];
    let expected = concat!(
        "020200000000000000",
        "06000000000000006f72646572733bf153650000000000f15365000000001000000000000000",
        "06000000000000006f726465727359f15365000000001ef15365000000000400000000000000",
    );
    golden("a record of window blocks", &record, expected);
    let borrowed: Vec<StoredWindow> =
        record.iter().map(|(name, last, first, end)| (name.as_str(), *last, *first, *end)).collect();
    assert_eq!(hex(&encode(&borrowed).expect("encode")), expected);
}

/// A window claim travels only inside a batch: its bytes there, and its answer's.
#[test]
fn window_claim_and_its_answer() {
    let claim = leafraft_state::Claim::TimeseqWindow {
        namespace: "orders".into(),
        first_second: 1_700_000_000,
        seconds: 60,
        count: 16,
        now_ms: 1_699_999_992_500,
    };
    golden(
        "window claim",
        &claim,
        "020300000006000000000000006f726465727300f15365000000003c000000000000001000000000000000b44ae5cf8b010000",
    );
    golden("window claim in a batch", &normal(3, 45, Request::ClaimBatch { claims: vec![claim] }), "02030000000000000001000000000000002d00000000000000010000001300000001000000000000000300000006000000000000006f726465727300f15365000000003c000000000000001000000000000000b44ae5cf8b010000");
    let answer =
        leafraft_state::Response::TimeseqWindow { first_second: 1_700_000_000, seconds: 60, start: 32, end: 48 };
    golden("window answer", &answer, "021100000000f15365000000003c0000000000000020000000000000003000000000000000");
    golden(
        "window answer in a batch",
        &leafraft_state::Response::Batch(vec![answer]),
        "021000000001000000000000001100000000f15365000000003c0000000000000020000000000000003000000000000000",
    );
}

/// A shared window claim travels only inside a batch: its bytes there; its answer is a batch of
/// window answers, one per block.
#[test]
fn shared_window_claim() {
    let claim = leafraft_state::Claim::TimeseqSharedWindow {
        namespace: "orders".into(),
        first_second: 1_700_000_000,
        seconds: 60,
        now_ms: 1_699_999_992_500,
        blocks: vec![
            leafraft_state::SharedBlock { member: 1, count: 16 },
            leafraft_state::SharedBlock { member: 3, count: 4 },
        ],
    };
    golden(
        "shared window claim",
        &claim,
        "020400000006000000000000006f726465727300f15365000000003c00000000000000b44ae5cf8b01000002000000000000000100000000000000100000000000000003000000000000000400000000000000",
    );
    golden("shared window claim in a batch", &normal(3, 46, Request::ClaimBatch { claims: vec![claim] }), "02030000000000000001000000000000002e00000000000000010000001300000001000000000000000400000006000000000000006f726465727300f15365000000003c00000000000000b44ae5cf8b01000002000000000000000100000000000000100000000000000003000000000000000400000000000000");
}

#[test]
fn unknown_version_is_refused() {
    let mut bytes = encode(&log_id(3, 42)).expect("encode");
    bytes[0] = FORMAT_VERSION + 1;
    let err = decode::<typ::LogId>(&bytes).expect_err("a newer version must not decode");
    assert!(matches!(err, CodecError::UnknownVersion { found } if found == FORMAT_VERSION + 1));
    assert_eq!(err.to_string(), "format version 3 is not supported (this binary reads version 2)");
    bytes[0] = 0;
    assert!(matches!(decode::<typ::LogId>(&bytes), Err(CodecError::UnknownVersion { found: 0 })));
}

#[test]
fn empty_and_trailing_bytes_are_refused() {
    assert!(matches!(decode::<typ::LogId>(&[]), Err(CodecError::Empty)));
    let mut bytes = encode(&log_id(3, 42)).expect("encode");
    bytes.push(0);
    assert!(matches!(decode::<typ::LogId>(&bytes), Err(CodecError::Decode(_))));
}
