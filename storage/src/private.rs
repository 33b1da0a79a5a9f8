//! A data directory readable by its owner only: the directory 0700, its files 0600 (they hold the
//! cluster's whole state, tag names and descriptions included).
//!
//! Without touching the process's umask (it is process-wide): directories and files this crate
//! creates are created with those modes, and sled's own files (`db`, `conf`, `blobs/`, `snap.*`),
//! which sled creates with the default mode, are set once the store is open. A file sled creates
//! later (a snapshot, a blob) may keep the default mode, but sits in a directory no other user can
//! enter.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The identity file's name inside the data directory (`identity` writes it; it is named here,
/// below `identity`, because `restrict` narrows it too).
pub const IDENTITY_FILE: &str = "leafraft-identity";

/// The folder of the snapshot files inside the data directory (`snapshot_files` writes it;
/// named here for the same reason).
pub const SNAPSHOT_DIR: &str = "snapshots";

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and missing parents) with mode 0700, or narrows an existing one to it.
pub fn create_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))
}

/// A new file (truncated if it exists) with mode 0600.
pub fn create_file(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new().write(true).create(true).truncate(true).mode(FILE_MODE).open(path)
}

/// Narrows `dir` to 0700 and what leafraft and sled keep in it to 0600 (directories among them to
/// 0700). Other entries are left alone: `dir` may hold an operator's own files.
pub fn restrict(dir: &Path) -> io::Result<()> {
    fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))?;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let ours = ["db", "conf", "blobs", SNAPSHOT_DIR, crate::MARKER_FILE, IDENTITY_FILE].contains(&name.as_ref())
            || name.starts_with("snap.");
        if ours {
            restrict_entry(&entry.path())?;
        }
    }
    Ok(())
}

fn restrict_entry(path: &Path) -> io::Result<()> {
    if fs::symlink_metadata(path)?.is_dir() {
        fs::set_permissions(path, fs::Permissions::from_mode(DIR_MODE))?;
        for entry in fs::read_dir(path)? {
            restrict_entry(&entry?.path())?;
        }
        Ok(())
    } else if fs::symlink_metadata(path)?.is_file() {
        fs::set_permissions(path, fs::Permissions::from_mode(FILE_MODE))
    } else {
        Ok(())
    }
}
