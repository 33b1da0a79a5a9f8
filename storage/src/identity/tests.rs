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

/// The store records the incarnation it was created for.
#[test]
fn a_store_is_bound_to_the_incarnation_it_was_created_for() {
    let dir = TempDir::new().expect("temp dir");
    let options = StoreOptions { fsync: false, ..StoreOptions::default() };
    let (identity, store) = open_member(dir.path(), 1, &options).expect("create");
    assert_eq!(store.recorded_incarnation(dir.path()).expect("read"), Some(identity.incarnation));
    drop(store);
    let (again, _store) = open_member(dir.path(), 1, &options).expect("reopen");
    assert_eq!(again, identity);
}

/// A store deleted next to its identity file comes back under a new incarnation (the peers'
/// wiped-member path), never as the old one.
#[test]
fn a_store_created_next_to_an_old_identity_takes_a_new_incarnation() {
    let dir = TempDir::new().expect("temp dir");
    let options = StoreOptions { fsync: false, ..StoreOptions::default() };
    let (old, store) = open_member(dir.path(), 1, &options).expect("create");
    drop(store);
    for entry in fs::read_dir(dir.path()).expect("list") {
        let path = entry.expect("entry").path();
        if path.file_name() != Some(IDENTITY_FILE.as_ref()) {
            if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) }.expect("delete");
        }
    }
    let (new, store) = open_member(dir.path(), 1, &options).expect("open the new store");
    assert_ne!(new.incarnation, old.incarnation);
    assert_eq!(store.recorded_incarnation(dir.path()).expect("read"), Some(new.incarnation));
    assert_eq!(load_or_create_identity(dir.path(), 1).expect("load"), new, "the new incarnation is durable");
}

/// A store next to the identity file of another disk is refused; a store from before stores
/// recorded an incarnation records the identity's.
#[test]
fn a_store_of_another_incarnation_is_refused_and_an_old_store_is_bound() {
    let dir = TempDir::new().expect("temp dir");
    let options = StoreOptions { fsync: false, ..StoreOptions::default() };
    let identity = load_or_create_identity(dir.path(), 1).expect("create");
    let store = crate::open(dir.path(), &options).expect("a store without a record, as before stores recorded one");
    drop(store);
    let (bound, store) = open_member(dir.path(), 1, &options).expect("bind the old store");
    assert_eq!(bound, identity);
    store.record_incarnation(dir.path(), identity.incarnation ^ 1).expect("record another disk's");
    drop(store);
    let Err(err) = open_member(dir.path(), 1, &options) else { panic!("another disk's store must be refused") };
    assert!(matches!(err, OpenError::IncarnationMismatch { .. }), "{err}");
    assert!(err.to_string().contains("mixes two disks"), "{err}");
}
