//! Starting `leafraft serve` processes, written once for the end-to-end tests
//! (`tests/e2e/harness.rs`), the chaos runner (`tools/.../leafraft-chaos/nodes.rs`) and the
//! benchmarks that run nodes as processes (`leafraft-bench`'s `claims` and `failover`).
//!
//! [`Serve`] builds the command: `BINARY serve ARGS`, nothing on stdin, stdout and stderr into
//! one log file (or nowhere), no `LEAFRAFT_*` variable of the caller's environment (a node's
//! configuration is exactly its arguments and [`Serve::env`]), no colours, and on Linux the
//! kernel's SIGKILL when the thread that started it ends, so not even an aborted run leaves
//! nodes behind. [`ServeProcess`] is the running node: signals, exit, and a kill when dropped.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::Path;
use std::process::Child;
use std::process::Command;
use std::process::ExitStatus;
use std::process::Stdio;

/// A `leafraft serve` command line being put together.
pub struct Serve {
    command: Command,
}

impl Serve {
    /// `binary serve`.
    pub fn new(binary: impl AsRef<OsStr>) -> Serve {
        Serve::under(&[], binary)
    }

    /// `prefix... binary serve`: the node runs under another program (a network namespace's
    /// `ip netns exec`, say).
    pub fn under(prefix: &[String], binary: impl AsRef<OsStr>) -> Serve {
        let mut command = match prefix.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(binary.as_ref());
                command
            }
            None => Command::new(binary.as_ref()),
        };
        command.arg("serve").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).env("NO_COLOR", "1");
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("LEAFRAFT_") {
                command.env_remove(&key);
            }
        }
        die_with_parent(&mut command);
        Serve { command }
    }

    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Serve {
        self.command.arg(arg);
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(&mut self, args: I) -> &mut Serve {
        self.command.args(args);
        self
    }

    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Serve {
        self.command.env(key, value);
        self
    }

    /// stdout and stderr, together, appended to the file at `path` (created if missing).
    pub fn log_to(&mut self, path: &Path) -> io::Result<&mut Serve> {
        let out = File::options().create(true).append(true).open(path)?;
        let err = out.try_clone()?;
        self.command.stdout(out).stderr(err);
        Ok(self)
    }

    /// The child's open-file limit, soft and hard.
    pub fn open_files(&mut self, limit: u64) -> &mut Serve {
        use std::os::unix::process::CommandExt;
        let limit = libc::rlimit { rlim_cur: limit as libc::rlim_t, rlim_max: limit as libc::rlim_t };
        // SAFETY: the closure runs between fork and exec and only calls `setrlimit`, which is
        // async-signal-safe, and reads `errno`.
        unsafe {
            self.command.pre_exec(move || match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                -1 => Err(io::Error::last_os_error()),
                _ => Ok(()),
            });
        }
        self
    }

    /// Runs the node as the user and group `uid`.
    pub fn run_as(&mut self, uid: u32) -> &mut Serve {
        use std::os::unix::process::CommandExt;
        self.command.uid(uid).gid(uid);
        self
    }

    pub fn spawn(&mut self) -> io::Result<ServeProcess> {
        Ok(ServeProcess { child: self.command.spawn()? })
    }
}

/// A running (or exited, not yet dropped) `leafraft serve` process. Dropping it kills and reaps it.
#[derive(Debug)]
pub struct ServeProcess {
    child: Child,
}

impl ServeProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (SIGTERM, SIGSTOP, ...) to the process.
    pub fn signal(&self, signal: libc::c_int) -> io::Result<()> {
        let pid = libc::pid_t::try_from(self.child.id()).map_err(io::Error::other)?;
        // SAFETY: `kill` has no memory-safety preconditions; `pid` is our own child, not reaped
        // until `self` is dropped or has seen its exit, so the number cannot belong to another.
        match unsafe { libc::kill(pid, signal) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// kill -9, then reaps it; answers how it ended.
    pub fn kill(&mut self) -> io::Result<ExitStatus> {
        let _ = self.child.kill();
        self.child.wait()
    }

    /// Its exit status, if it has exited (reaping it).
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Whether it has not exited.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Makes the kernel SIGKILL the child when the thread that started it ends.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and only calls `prctl`, which is
    // async-signal-safe, and reads `errno`.
    unsafe {
        command.pre_exec(|| match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
            -1 => Err(io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

#[cfg(test)]
mod tests;
