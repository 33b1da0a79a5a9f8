//! Whether FUSE works on this machine, decided without the code under test.
//!
//! The power-loss faults and `tests/lazyfs_mount.rs` need FUSE. Deciding that by mounting the
//! project's own LazyFS ([`crate::lazyfs`]) made a broken LazyFS look like a machine without FUSE:
//! the test and the CI power-loss run said "FUSE unusable" and passed. This probe mounts a
//! known-good FUSE file system from a Debian package instead (`fuse-overlayfs`, package
//! `fuse-overlayfs`, which Docker's rootless storage also uses), writes a file through it, reads it
//! back and unmounts it with `fusermount3` (package `fuse3`). When the probe passes, FUSE works here,
//! and any failure of LazyFS is LazyFS's own.

use std::path::Path;
use std::process::Command;
use std::process::Stdio;

/// The known-good FUSE file system the probe mounts, and the Debian package that has it.
pub const PROBE_FS: &str = "fuse-overlayfs";
pub const PROBE_PACKAGE: &str = "fuse-overlayfs";

/// Answers `Ok` when a FUSE file system can be mounted, used and unmounted here, else what is
/// missing in one line (the device, a program and its Debian package, or the mount's error).
pub fn usable() -> Result<(), String> {
    match std::fs::metadata("/dev/fuse") {
        Err(e) => return Err(format!("/dev/fuse is missing ({e})")),
        Ok(meta) if !std::os::unix::fs::FileTypeExt::is_char_device(&meta.file_type()) => {
            return Err("/dev/fuse is not a character device".into())
        }
        Ok(_) => {}
    }
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Err(format!("/dev/fuse cannot be opened ({e})"));
    }
    for (program, package) in [(PROBE_FS, PROBE_PACKAGE), ("fusermount3", "fuse3")] {
        if !on_path(program) {
            return Err(format!("{program} is not installed (Debian package {package}), so FUSE cannot be probed"));
        }
    }
    let scratch = tempfile_dir()?;
    let outcome = probe(&scratch);
    let _ = std::fs::remove_dir_all(&scratch);
    outcome
}

fn probe(scratch: &Path) -> Result<(), String> {
    let [lower, upper, work, mnt] = ["lower", "upper", "work", "mnt"].map(|name| scratch.join(name));
    for dir in [&lower, &upper, &work, &mnt] {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {} ({e})", dir.display()))?;
    }
    let options = format!("lowerdir={},upperdir={},workdir={}", lower.display(), upper.display(), work.display());
    let mounted = Command::new(PROBE_FS)
        .arg("-o")
        .arg(&options)
        .arg(&mnt)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {PROBE_FS} ({e})"))?;
    if !mounted.status.success() {
        let why = String::from_utf8_lossy(&mounted.stderr);
        let why = why.lines().rfind(|line| !line.trim().is_empty()).unwrap_or("no message").trim().to_string();
        return Err(format!("mounting a {PROBE_FS} file system failed ({}: {why})", mounted.status));
    }
    let used = std::fs::write(mnt.join("probe"), b"fuse works")
        .and_then(|()| std::fs::read(mnt.join("probe")))
        .map_err(|e| format!("a file on a {PROBE_FS} mount could not be written and read ({e})"))
        .and_then(|read| match read == b"fuse works" {
            true => Ok(()),
            false => Err(format!("a file on a {PROBE_FS} mount read back other bytes: {read:?}")),
        });
    let unmounted = Command::new("fusermount3").arg("-u").arg(&mnt).stdin(Stdio::null()).output();
    used?;
    match unmounted {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(format!(
            "fusermount3 -u failed ({}: {})",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Err(e) => Err(format!("cannot run fusermount3 ({e})")),
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| is_executable(&dir.join(program))))
        .unwrap_or(false)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn tempfile_dir() -> Result<std::path::PathBuf, String> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("leafraft-fuse-probe-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {} ({e})", dir.display()))?;
    Ok(dir)
}
