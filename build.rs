//! Records the commit the binary is built from, for `leafraft --version` and `/v1/cluster`:
//! `LEAFRAFT_COMMIT` is `git rev-parse --short HEAD`, or "unknown" outside a git checkout (a
//! source tarball) or without git.

use std::path::Path;
use std::process::Command;

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=LEAFRAFT_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    // Rebuild when HEAD moves: HEAD itself (a branch switch) and the branch it names (a commit).
    // In a worktree these live in the main repository's git directory, which git knows.
    let head = git(&["rev-parse", "--git-path", "HEAD"]);
    let branch = git(&["symbolic-ref", "-q", "HEAD"]).and_then(|name| git(&["rev-parse", "--git-path", &name]));
    for path in [head, branch].into_iter().flatten() {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (output.status.success() && !text.is_empty()).then_some(text)
}
