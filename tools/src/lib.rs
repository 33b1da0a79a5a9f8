//! What the tools' binaries share.

pub mod fuse_probe;
pub mod lazyfs;

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes the kernel SIGKILL the child when the thread that started it ends, so nodes die with the
/// tool that started them even when it is killed.
pub fn die_with_parent(command: &mut Command) {
    // SAFETY: the closure runs between fork and exec and only calls `prctl`, which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}
