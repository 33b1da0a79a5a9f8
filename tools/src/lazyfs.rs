//! A FUSE file system that forgets what was never synced: power loss for the chaos runner.
//!
//! Writes, new files, renames and deletions are visible at once but kept in memory; `fsync` /
//! `fdatasync` of a file makes its bytes and size durable, `fsync` of a directory its entries.
//! [`LazyMount::power_cut`] drops everything else, as a power cut drops a disk's volatile cache
//! and the page cache: the method of LazyFS, which the Jepsen analyses use. `sync_file_range`
//! never reaches a FUSE file system, so, as on a real power cut, it makes nothing durable here.
//!
//! The durable bytes live in a backing directory, one file per inode ([`backing`]); the rules
//! are in [`model`], testable without FUSE; [`fuse`] answers the kernel. Test tooling only: the
//! service never links it.

mod backing;
mod fuse;
pub mod model;

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

pub use model::Lost;

/// The name mounts show in `/proc/mounts` (and what stale-mount cleanup looks for).
pub const FS_NAME: &str = "leafraft-lazyfs";

/// One mounted file system; unmounted when dropped.
pub struct LazyMount {
    shared: Arc<fuse::Shared>,
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
}

impl LazyMount {
    /// Mounts an empty file system at `mountpoint` (created if absent), its durable bytes kept in
    /// `backing` (created, must be empty).
    pub fn mount(mountpoint: &Path, backing: &Path) -> std::io::Result<LazyMount> {
        fuse_present()?;
        std::fs::create_dir_all(mountpoint)?;
        let durable = backing::BackingDir::create(backing.to_path_buf())?;
        let shared = Arc::new(fuse::Shared { model: Mutex::new(model::Model::new(durable)), closed: Condvar::new() });
        let mut config = fuser::Config::default();
        config.mount_options =
            vec![fuser::MountOption::FSName(FS_NAME.into()), fuser::MountOption::Subtype(FS_NAME.into())];
        let session = fuser::spawn_mount(fuse::Handler(Arc::clone(&shared)), mountpoint, &config)?;
        Ok(LazyMount { shared, session: Some(session), mountpoint: mountpoint.to_path_buf() })
    }

    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// Drops every write, file and directory entry never synced. The processes using the mount
    /// must be dead: this waits (up to `settle`) for the kernel to close their files, so no late
    /// write of theirs lands after the cut.
    pub fn power_cut(&self, settle: Duration) -> Lost {
        let deadline = Instant::now() + settle;
        let mut model = self.shared.lock();
        while model.open_handles() > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            model = self.shared.closed.wait_timeout(model, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        model.power_cut()
    }
}

impl Drop for LazyMount {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
    }
}

/// The device and, unless root, the setuid helper a mount needs.
fn fuse_present() -> std::io::Result<()> {
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Err(std::io::Error::new(e.kind(), format!("/dev/fuse cannot be opened ({e})")));
    }
    // SAFETY: geteuid(2) only reads the process's credentials.
    let root = unsafe { libc::geteuid() } == 0;
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join("fusermount3").exists()))
        .unwrap_or(false);
    if !root && !on_path {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "fusermount3 is not installed (Debian package fuse3)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
