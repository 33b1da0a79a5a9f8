//! The model without FUSE: what survives a power cut and what does not.

use std::ffi::OsStr;

use super::model::Lost;
use super::model::MemoryDurable;
use super::model::Model;
use super::model::ROOT;

const ME: (u32, u32) = (0, 0);

fn model() -> Model<MemoryDurable> {
    Model::new(MemoryDurable::default())
}

fn name(text: &str) -> &OsStr {
    OsStr::new(text)
}

fn read_all(model: &mut Model<MemoryDurable>, ino: u64) -> Vec<u8> {
    let len = model.attr(ino).expect("attr").size;
    model.read(ino, 0, u32::try_from(len).expect("small")).expect("read")
}

/// A file whose name is durable, as after `create` + `fsync` of its directory.
fn durable_file(model: &mut Model<MemoryDurable>, file: &str) -> u64 {
    let ino = model.create(ROOT, name(file), false, 0o644, ME).expect("create");
    model.sync_dir(ROOT).expect("sync dir");
    ino
}

#[test]
fn an_unsynced_write_is_lost_content_and_size() {
    let mut fs = model();
    let ino = durable_file(&mut fs, "db");
    fs.write(ino, 0, b"synced").expect("write");
    fs.sync_file(ino).expect("fsync");
    fs.write(ino, 3, b"UNSYNCED and longer").expect("write");
    assert_eq!(read_all(&mut fs, ino), b"synUNSYNCED and longer", "before the cut, the write is visible");

    let lost = fs.power_cut();

    assert_eq!(read_all(&mut fs, ino), b"synced", "the unsynced write is gone, and the size with it");
    assert_eq!(fs.attr(ino).expect("attr").size, 6);
    assert_eq!(lost, Lost { unsynced_bytes: 19, files: 1, entries: 0 });
}

#[test]
fn a_synced_write_survives_and_reads_back_across_pages() {
    let mut fs = model();
    let ino = durable_file(&mut fs, "db");
    // Spans three pages, starting in the middle of the first.
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    fs.write(ino, 1000, &data).expect("write");
    fs.sync_file(ino).expect("fdatasync");
    fs.power_cut();
    let back = read_all(&mut fs, ino);
    assert_eq!(back.len(), 11_000);
    assert!(back[..1000].iter().all(|b| *b == 0), "the hole before the write reads zeros");
    assert_eq!(&back[1000..], &data[..]);
    assert_eq!(fs.read(ino, 10_990, 100).expect("read at the end"), &data[9990..], "a read past the end stops at it");
}

#[test]
fn a_new_file_needs_its_directory_synced() {
    let mut fs = model();
    let kept = fs.create(ROOT, name("kept"), false, 0o644, ME).expect("create");
    fs.write(kept, 0, b"k").expect("write");
    fs.sync_file(kept).expect("fsync");
    fs.sync_dir(ROOT).expect("sync dir");
    let lost = fs.create(ROOT, name("lost"), false, 0o644, ME).expect("create");
    fs.write(lost, 0, b"synced data, unsynced name").expect("write");
    fs.sync_file(lost).expect("fsync of the file alone");

    let report = fs.power_cut();

    assert_eq!(fs.lookup(ROOT, name("lost")), Err(libc::ENOENT), "its name was never made durable");
    assert_eq!(fs.lookup(ROOT, name("kept")), Ok(kept));
    assert_eq!(read_all(&mut fs, kept), b"k");
    assert_eq!(report.entries, 1);
}

#[test]
fn a_durable_name_of_a_never_synced_file_comes_back_empty() {
    let mut fs = model();
    let ino = durable_file(&mut fs, "conf");
    fs.write(ino, 0, b"never synced").expect("write");
    fs.power_cut();
    assert_eq!(fs.lookup(ROOT, name("conf")), Ok(ino));
    assert_eq!(fs.attr(ino).expect("attr").size, 0);
}

#[test]
fn truncation_is_lost_unless_synced_and_cut_bytes_read_zero() {
    let mut fs = model();
    let ino = durable_file(&mut fs, "db");
    fs.write(ino, 0, b"0123456789").expect("write");
    fs.sync_file(ino).expect("fsync");

    fs.truncate(ino, 4).expect("truncate");
    fs.power_cut();
    assert_eq!(read_all(&mut fs, ino), b"0123456789", "an unsynced truncation is undone");

    fs.truncate(ino, 4).expect("truncate");
    fs.truncate(ino, 8).expect("extend");
    assert_eq!(read_all(&mut fs, ino), b"0123\0\0\0\0", "bytes cut off read zero when the file grows again");
    fs.sync_file(ino).expect("fsync");
    fs.power_cut();
    assert_eq!(read_all(&mut fs, ino), b"0123\0\0\0\0", "and stay zero once synced");
}

/// The identity file's pattern: write a temporary file, fsync it, rename it over, fsync the dir.
#[test]
fn rename_is_durable_only_with_its_directory() {
    let mut fs = model();
    let old = durable_file(&mut fs, "identity");
    fs.write(old, 0, b"v1").expect("write");
    fs.sync_file(old).expect("fsync");

    let tmp = fs.create(ROOT, name("identity.tmp"), false, 0o644, ME).expect("create");
    fs.write(tmp, 0, b"v2").expect("write");
    fs.sync_file(tmp).expect("fsync");
    fs.rename(ROOT, name("identity.tmp"), ROOT, name("identity"), false).expect("rename");
    assert_eq!(fs.lookup(ROOT, name("identity")), Ok(tmp));
    fs.power_cut();
    let back = fs.lookup(ROOT, name("identity")).expect("the old name is still there");
    assert_eq!(read_all(&mut fs, back), b"v1", "without the directory's fsync the rename is undone");
    assert_eq!(fs.lookup(ROOT, name("identity.tmp")), Err(libc::ENOENT), "the temporary's name was never durable");

    let tmp = fs.create(ROOT, name("identity.tmp"), false, 0o644, ME).expect("create");
    fs.write(tmp, 0, b"v2").expect("write");
    fs.sync_file(tmp).expect("fsync");
    fs.rename(ROOT, name("identity.tmp"), ROOT, name("identity"), false).expect("rename");
    fs.sync_dir(ROOT).expect("fsync the directory");
    fs.power_cut();
    let back = fs.lookup(ROOT, name("identity")).expect("identity");
    assert_eq!(read_all(&mut fs, back), b"v2");
    assert_eq!(fs.lookup(ROOT, name("identity.tmp")), Err(libc::ENOENT));
}

#[test]
fn an_unsynced_unlink_brings_the_file_back_with_its_synced_bytes() {
    let mut fs = model();
    let ino = durable_file(&mut fs, "snap.1");
    fs.write(ino, 0, b"snapshot").expect("write");
    fs.sync_file(ino).expect("fsync");
    fs.unlink(ROOT, name("snap.1")).expect("unlink");
    assert_eq!(fs.lookup(ROOT, name("snap.1")), Err(libc::ENOENT));
    fs.power_cut();
    let back = fs.lookup(ROOT, name("snap.1")).expect("back");
    assert_eq!(read_all(&mut fs, back), b"snapshot");

    fs.unlink(ROOT, name("snap.1")).expect("unlink");
    fs.sync_dir(ROOT).expect("sync dir");
    fs.power_cut();
    assert_eq!(fs.lookup(ROOT, name("snap.1")), Err(libc::ENOENT), "a synced unlink stays");
}

#[test]
fn directories_and_their_entries() {
    let mut fs = model();
    let data = fs.create(ROOT, name("data"), true, 0o755, ME).expect("mkdir");
    fs.sync_dir(ROOT).expect("sync root");
    let db = fs.create(data, name("db"), false, 0o644, ME).expect("create");
    fs.write(db, 0, b"x").expect("write");
    fs.sync_file(db).expect("fsync");
    assert_eq!(fs.rmdir(ROOT, name("data")), Err(libc::ENOTEMPTY));
    assert_eq!(fs.lookup(data, name("..")), Ok(ROOT));
    let names: Vec<_> = fs.read_dir(data).expect("readdir").into_iter().map(|(_, _, name)| name).collect();
    assert_eq!(names, [".", "..", "db"]);

    fs.power_cut();
    assert_eq!(fs.lookup(ROOT, name("data")), Ok(data), "the directory's name was synced");
    assert_eq!(fs.lookup(data, name("db")), Err(libc::ENOENT), "its own entries were not");
}

#[test]
fn rename_refuses_what_posix_refuses() {
    let mut fs = model();
    let dir = fs.create(ROOT, name("d"), true, 0o755, ME).expect("mkdir");
    fs.create(ROOT, name("f"), false, 0o644, ME).expect("create");
    fs.create(dir, name("inner"), false, 0o644, ME).expect("create");
    assert_eq!(fs.rename(ROOT, name("f"), ROOT, name("d"), false), Err(libc::EISDIR));
    assert_eq!(fs.rename(ROOT, name("d"), ROOT, name("f"), false), Err(libc::ENOTDIR));
    assert_eq!(fs.rename(ROOT, name("d"), dir, name("below"), false), Err(libc::EINVAL));
    fs.create(ROOT, name("g"), false, 0o644, ME).expect("create");
    assert_eq!(fs.rename(ROOT, name("f"), ROOT, name("g"), true), Err(libc::EEXIST));
    assert_eq!(fs.create(ROOT, name("g"), false, 0o644, ME), Err(libc::EEXIST));
}

#[test]
fn files_nobody_can_reach_are_forgotten_but_open_ones_stay_readable() {
    let mut fs = model();
    let ino = fs.create(ROOT, name("tmp"), false, 0o644, ME).expect("create");
    fs.remember(ino);
    fs.opened(ino).expect("open");
    fs.write(ino, 0, b"still open").expect("write");
    fs.unlink(ROOT, name("tmp")).expect("unlink");
    assert_eq!(read_all(&mut fs, ino), b"still open", "an open, unlinked file is still readable");
    assert_eq!(fs.open_handles(), 1);
    fs.released(ino);
    fs.forget(ino, 1);
    assert_eq!(fs.attr(ino).map(|_| ()), Err(libc::ENOENT), "closed and forgotten: gone");
    assert_eq!(fs.open_handles(), 0);
}
