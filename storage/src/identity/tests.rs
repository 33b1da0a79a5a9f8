//! The identity file: golden bytes, creation, refusal of another node's directory and of damage.

use tempfile::TempDir;

use super::*;

#[test]
fn golden_bytes() {
    let identity = MemberIdentity { node_id: 3, incarnation: 0x0102_0304_0506_0708 };
    let bytes = encode(&identity);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "4c46494401030000000000000008070605040302011a23db7f", "the identity file layout changed");
    assert_eq!(decode(&bytes), Ok(identity));
}

#[test]
fn created_once_then_loaded() {
    let dir = TempDir::new().expect("temp dir");
    let first = load_or_create_identity(dir.path(), 2).expect("create");
    assert_eq!(first.node_id, 2);
    assert_ne!(first.incarnation, 0);
    assert_eq!(load_or_create_identity(dir.path(), 2).expect("load"), first);
    assert!(!dir.path().join(TEMP_FILE).exists());
}

#[test]
fn a_missing_directory_is_created() {
    let parent = TempDir::new().expect("temp dir");
    let dir = parent.path().join("a/b");
    let identity = load_or_create_identity(&dir, 1).expect("create");
    assert_eq!(load_or_create_identity(&dir, 1).expect("load"), identity);
}

#[test]
fn two_directories_get_different_incarnations() {
    let (a, b) = (TempDir::new().expect("temp dir"), TempDir::new().expect("temp dir"));
    let a = load_or_create_identity(a.path(), 1).expect("a");
    let b = load_or_create_identity(b.path(), 1).expect("b");
    assert_ne!(a.incarnation, b.incarnation);
}

#[test]
fn another_nodes_directory_is_refused() {
    let dir = TempDir::new().expect("temp dir");
    load_or_create_identity(dir.path(), 3).expect("create");
    let err = load_or_create_identity(dir.path(), 2).expect_err("node 2 must not use node 3's dir");
    assert!(matches!(err, OpenError::ForeignIdentity { owner: 3, node_id: 2, .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("this data dir belongs to node 3"), "{message}");
    assert!(!message.contains('\n'), "{message}");
}

#[test]
fn a_damaged_file_is_corruption() {
    let dir = TempDir::new().expect("temp dir");
    load_or_create_identity(dir.path(), 1).expect("create");
    let path = dir.path().join(IDENTITY_FILE);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[6] ^= 1;
    std::fs::write(&path, &bytes).expect("write");
    let err = load_or_create_identity(dir.path(), 1).expect_err("a flipped bit must be noticed");
    assert!(matches!(err, OpenError::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
    std::fs::write(&path, b"LF").expect("write");
    assert!(matches!(load_or_create_identity(dir.path(), 1), Err(OpenError::Corrupt { .. })));
}

/// A store without its identity lost the file; making a new one would make the node a new
/// member with the old member's log.
#[test]
fn a_store_without_identity_is_refused() {
    let dir = TempDir::new().expect("temp dir");
    drop(
        crate::open(dir.path(), &crate::StoreOptions { fsync: false, cache_capacity_bytes: 1 << 20, local_node: None })
            .expect("open"),
    );
    let err = load_or_create_identity(dir.path(), 1).expect_err("identity gone");
    assert!(err.to_string().contains("is gone although the directory holds a store"), "{err}");
}
