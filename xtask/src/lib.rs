//! The repository's structural checks, outside the product crates.
//!
//! Each check reads a checkout from its root and answers a [`Scan`]: how many files and lines it
//! read and what it found wrong. Paths are relative to the root, so where the checkout lives
//! (a folder named `test`, a symlink) changes nothing. The tests run every check on this
//! repository, asserting it read at least [`Check::min_files`] files and [`Check::min_lines`]
//! lines, and each on a planted violation (`tests.rs`), asserting that it fails: no check can
//! pass by reading nothing. `cargo run -p xtask` prints the same for people.
//!
//! # Layout
//! - [`sources`]: checks on the text of source files (doc comments, sizes, who reads the clock,
//!   who sees clap, sled or the engines, unwraps on request paths, purity of state and history,
//!   re-exports of another workspace crate).
//! - [`manifests`]: checks on `Cargo.toml` files and on `cargo metadata`'s dependency graph.
//! - [`imports`]: the module import graph of every crate, the cycle check on it and the check
//!   that no module imports its parent back.
//! - [`citations`]: documents and code cite the repository's own contract (`docs/`), and every
//!   `docs/*.md#anchor` they cite exists.

use std::path::Path;
use std::path::PathBuf;

pub mod citations;
pub mod imports;
pub mod manifests;
pub mod sources;

/// What one check read and found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Scan {
    pub files: usize,
    pub lines: usize,
    /// One line per violation, naming the file (relative to the root) and what is wrong.
    pub violations: Vec<String>,
}

impl Scan {
    /// Counts `text` as one file read.
    pub fn read(&mut self, text: &str) {
        self.files += 1;
        self.lines += text.lines().count();
    }
}

/// One structural check and how much it must read of this repository.
pub struct Check {
    pub name: &'static str,
    pub run: fn(&Path) -> Scan,
    pub min_files: usize,
    pub min_lines: usize,
}

/// Every check, in the order `cargo run -p xtask` prints them.
pub const CHECKS: &[Check] = &[
    Check { name: "doc_comments", run: sources::doc_comments, min_files: 300, min_lines: 50_000 },
    Check { name: "service_file_length", run: sources::service_file_length, min_files: 100, min_lines: 15_000 },
    Check { name: "service_function_length", run: sources::service_function_length, min_files: 100, min_lines: 15_000 },
    Check { name: "wall_clock", run: sources::wall_clock, min_files: 100, min_lines: 15_000 },
    Check { name: "clap", run: sources::clap, min_files: 100, min_lines: 15_000 },
    Check { name: "engine_installers", run: sources::engine_installers, min_files: 100, min_lines: 15_000 },
    Check {
        name: "request_paths_never_unwrap",
        run: sources::request_paths_never_unwrap,
        min_files: 20,
        min_lines: 3_000,
    },
    Check { name: "engines_pure", run: sources::engines_pure, min_files: 8, min_lines: 800 },
    Check { name: "engines_not_serde", run: sources::engines_not_serde, min_files: 8, min_lines: 800 },
    Check { name: "apply_pure", run: sources::apply_pure, min_files: 10, min_lines: 1_500 },
    Check { name: "state_no_async", run: sources::state_no_async, min_files: 10, min_lines: 2_000 },
    Check {
        name: "only_storage_engine_sees_sled",
        run: sources::only_storage_engine_sees_sled,
        min_files: 10,
        min_lines: 1_500,
    },
    Check { name: "history_pure", run: sources::history_pure, min_files: 3, min_lines: 200 },
    Check { name: "service_links_no_tool", run: manifests::service_links_no_tool, min_files: 1, min_lines: 50 },
    Check { name: "crate_layers", run: manifests::crate_layers, min_files: 5, min_lines: 80 },
    Check { name: "linked_crates", run: manifests::linked_crates, min_files: 100, min_lines: 300 },
    Check { name: "import_cycles", run: imports::import_cycles, min_files: 300, min_lines: 50_000 },
    Check { name: "parents_imported", run: imports::parents_imported, min_files: 300, min_lines: 50_000 },
    Check { name: "foreign_reexports", run: sources::foreign_reexports, min_files: 200, min_lines: 40_000 },
    Check { name: "citations", run: citations::citations, min_files: 300, min_lines: 50_000 },
];

/// The workspace members the root `Cargo.toml` lists (`state`, `raft`, ...).
pub fn workspace_members(root: &Path) -> Vec<String> {
    let manifest = manifest(root, "Cargo.toml");
    let members = manifest.get("workspace").and_then(|w| w.get("members")).and_then(|m| m.as_array());
    members.into_iter().flatten().filter_map(|m| m.as_str().map(str::to_string)).collect()
}

/// A `Cargo.toml` parsed (empty when missing or unreadable: the checks then read nothing and fail
/// their minimums).
pub fn manifest(root: &Path, path: &str) -> toml::Table {
    std::fs::read_to_string(root.join(path)).ok().and_then(|text| toml::from_str(&text).ok()).unwrap_or_default()
}

/// Every `.rs` file under `root/dir`, as (path relative to `root`, text), sorted by path.
pub fn rust_files(root: &Path, dir: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    walk(root, &root.join(dir), &|path| path.extension().is_some_and(|ext| ext == "rs"), &mut found);
    found.sort();
    found
}

/// Files under `dir` that `keep` accepts, with paths relative to `root`; `target/` and hidden
/// folders are never entered.
pub fn walk(root: &Path, dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                walk(root, &path, keep, out);
            }
        } else if keep(&path) {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            out.push((relative(root, &path), text));
        }
    }
}

/// `path` relative to `root`, with `/` separators.
pub fn relative(root: &Path, path: &Path) -> String {
    let rel: PathBuf = path.strip_prefix(root).map(Path::to_path_buf).unwrap_or_else(|_| path.to_path_buf());
    rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/")
}

/// Whether a source file (relative path) is test code: `tests.rs`, `proptests.rs`, or in a
/// `tests` folder. Decided on the path inside the checkout, never on where the checkout lives.
pub fn is_test_file(rel: &str) -> bool {
    let mut parts = rel.split('/');
    let name = parts.next_back().unwrap_or_default();
    matches!(name, "tests.rs" | "proptests.rs") || rel.split('/').any(|part| part == "tests")
}

/// The code of a source file without its inline tests (everything from the first `#[cfg(test)]`).
pub fn without_tests(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or_default()
}

/// The lines of `code` that are not `//` comments.
pub fn code_lines(code: &str) -> impl Iterator<Item = &str> {
    code.lines().filter(|line| !line.trim_start().starts_with("//"))
}

#[cfg(test)]
mod tests;
