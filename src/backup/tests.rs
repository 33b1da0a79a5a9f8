//! Golden bytes of the backup file, and every way a file is refused.

use leafraft_ids::snowflake::Layout as SnowflakeLayout;
use leafraft_state::WorkerLease;

use super::*;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn backup() -> Backup {
    let record = TagRecord {
        max_id: 1001,
        step: 1000,
        description: "ids".into(),
        created_at_ms: 7,
        updated_at_ms: 8,
        mode: leafraft_state::TagMode::Segment,
    };
    let lease = WorkerLease {
        holder: Some(2),
        epoch: 3,
        window_end_ms: 40,
        floor_ms: 20,
        last_extend_ms: 30,
        released_by: None,
    };
    let snowflake =
        SnowflakeRegistry { layout: Some(SnowflakeLayout::LEAF), workers: BTreeMap::from([(5, lease)]), floor_ms: 9 };
    Backup {
        cluster_id: 0x1122_3344_5566_7788,
        taken_at_ms: 1_700_000_000_000,
        applied_index: 42,
        applied_term: 3,
        tags: BTreeMap::from([("t".to_string(), record)]),
        snowflake,
        timeseq: TimeseqRegistry::default(),
        scramble_keys: BTreeMap::new(),
    }
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex literal")).collect()
}

/// A version-1 file (before time sequences) is still read, with no namespaces.
#[test]
fn version_1_is_still_read() {
    let v1 = concat!(
        "6c65616672616674206261636b75700a01887766554433221100",
        "68e5cf8b0100002a0000000000000003000000000000000100000000000000010000000000000074",
        "e903000000000000e8030000000000000300000000000000696473",
        "07000000000000000800000000000000",
        "01c1038d142c010000290a0c010000000000000005000000",
        "0102000000000000000300000000000000280000000000000014000000000000001e0000000000000000",
        "0900000000000000",
        "15e4a309",
    );
    assert_eq!(decode(&unhex(v1)).expect("decode v1"), backup());
}

/// If this fails, the layout changed: bump `FORMAT_VERSION` (and keep reading the old one, or
/// refuse it by name); never just update the literal. A state without scrambled tags is written
/// as version 2, byte for byte what the release before scrambled tags wrote.
#[test]
fn golden_bytes() {
    let expected = concat!(
        "6c65616672616674206261636b75700a", // "leafraft backup\n"
        "02",                               // format version
        "8877665544332211",                 // cluster ID
        "0068e5cf8b010000",                 // taken at
        "2a00000000000000",                 // applied index
        "0300000000000000",                 // applied term
        "0100000000000000",                 // one tag,
        "010000000000000074",               // "t":
        "e903000000000000e8030000000000000300000000000000696473",
        "07000000000000000800000000000000",
        "00000000",                 // mode: segment
        "01c1038d142c010000290a0c", // Leaf's layout
        "010000000000000005000000", // one lease, worker 5:
        "0102000000000000000300000000000000280000000000000014000000000000001e0000000000000000",
        "0900000000000000",   // the registry's floor
        "0100000000000000",   // one namespace,
        "010000000000000074", // "t":
        "00e10b5e00000000807000000c1306000000000000006f72646572730068e5cf8b010000",
        "0100000000000000010000000000000074", // claimed seconds of "t":
        "010000000000000001f1536500000000e803000000000000",
        "f469e5cf8b010000", // newest now_ms
        "0000000000000000", // floor
        "5339cbcf",         // CRC-32
    );
    let mut backup = backup();
    backup.timeseq.namespaces.insert("t".into(), namespace());
    backup.timeseq.next_seq.insert("t".into(), BTreeMap::from([(1_700_000_001, 1000)]));
    backup.timeseq.newest_now_ms = 1_700_000_000_500;
    let bytes = encode(&backup).expect("encode");
    assert_eq!(hex(&bytes), expected);
    assert_eq!(decode(&bytes).expect("decode"), backup);
}

/// Version 3: version 2's fields, then the scrambled tags' keys.
#[test]
fn golden_bytes_with_scrambled_tags() {
    let expected = concat!(
        "6c65616672616674206261636b75700a", // "leafraft backup\n"
        "03",                               // format version
        "8877665544332211",                 // cluster ID
        "0068e5cf8b010000",                 // taken at
        "2a00000000000000",                 // applied index
        "0300000000000000",                 // applied term
        "0100000000000000",                 // one tag,
        "010000000000000074",               // "t":
        "e903000000000000e8030000000000000300000000000000696473",
        "07000000000000000800000000000000",
        "00000000",                 // mode: segment
        "01c1038d142c010000290a0c", // Leaf's layout
        "010000000000000005000000", // one lease, worker 5:
        "0102000000000000000300000000000000280000000000000014000000000000001e0000000000000000",
        "0900000000000000",                 // the registry's floor
        "0000000000000000",                 // no namespace,
        "0000000000000000",                 // no claimed second,
        "0000000000000000",                 // newest now_ms
        "0000000000000000",                 // floor
        "0100000000000000",                 // one scrambled tag,
        "010000000000000074",               // "t":
        "100f0e0d0c0b0a090807060504030201", // its key (u128, little endian)
        "28",                               // its width: 40 bits
        "6c1e9190",                         // CRC-32
    );
    let mut backup = backup();
    let key = leafraft_state::ScrambleKey { key: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10, bits: 40 };
    backup.scramble_keys.insert("t".into(), key);
    let bytes = encode(&backup).expect("encode");
    assert_eq!(hex(&bytes), expected);
    assert_eq!(decode(&bytes).expect("decode"), backup);
}

fn namespace() -> leafraft_state::NamespaceRecord {
    leafraft_state::NamespaceRecord {
        epoch_s: leafraft_state::timeseq::DEFAULT_EPOCH_S,
        utc_offset_s: 8 * 3600,
        shard_bits: 12,
        seq_bits: 19,
        description: "orders".into(),
        created_at_ms: 1_700_000_000_000,
    }
}

#[test]
fn a_flipped_bit_anywhere_is_refused() {
    let bytes = encode(&backup()).expect("encode");
    for at in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        let err = decode(&damaged).expect_err("a damaged file must not decode");
        let expected = match at {
            _ if at < MAGIC.len() => matches!(err, BackupError::NotABackup),
            _ if at == MAGIC.len() => matches!(err, BackupError::UnknownVersion { .. }),
            _ => matches!(err, BackupError::Checksum { .. }),
        };
        assert!(expected, "byte {at}: {err}");
    }
}

#[test]
fn truncated_and_padded_files_are_refused() {
    let bytes = encode(&backup()).expect("encode");
    for len in [0, 5, MAGIC.len(), MAGIC.len() + 1, MAGIC.len() + 4, bytes.len() - 1] {
        assert!(decode(&bytes[..len]).is_err(), "{len} bytes");
    }
    let mut padded = bytes[..bytes.len() - 4].to_vec();
    padded.push(0);
    let checksum = crc32fast::hash(&padded);
    padded.extend_from_slice(&checksum.to_le_bytes());
    assert!(matches!(decode(&padded), Err(BackupError::Damaged(_))), "trailing bytes inside a valid checksum");
}

#[test]
fn errors_are_one_line_and_say_what_to_do() {
    let mut newer = encode(&backup()).expect("encode");
    newer[MAGIC.len()] = FORMAT_VERSION + 1;
    let messages =
        [decode(b"{\"tags\": []}").expect_err("json").to_string(), decode(&newer).expect_err("newer").to_string()];
    assert_eq!(messages[0], "not a leafraft backup file (it does not start with \"leafraft backup\")");
    assert_eq!(
        messages[1],
        "the backup has format version 4; this binary reads versions 1 to 3 (use the leafraft that wrote it)"
    );
    assert!(messages.iter().all(|m| !m.contains('\n')));
}

/// `leafraft backup --out F` wrote F with the umask's mode (0644 under umask 022): every tag of
/// the cluster, readable by every user of the host.
#[test]
fn regression_the_backup_file_is_its_owners_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cluster.backup");
    write_file(&path, b"backup bytes").unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the backup file is {mode:o}");
    assert_eq!(std::fs::read(&path).unwrap(), b"backup bytes");
    // Written again over an existing file: still 0600, with the new content.
    write_file(&path, b"newer").unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(std::fs::read(&path).unwrap(), b"newer");
}
