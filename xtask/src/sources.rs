//! Checks on the text of source files. Each reads the files of its concern, paths relative to the
//! checkout's root, and reports every file that breaks its rule.

use std::path::Path;

use crate::code_lines;
use crate::is_test_file;
use crate::rust_files;
use crate::without_tests;
use crate::Scan;

/// Every Rust source file of the workspace opens with a `//!` doc line (a binary's `main.rs`
/// aside).
pub fn doc_comments(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let mut packages = vec![String::new()];
    packages.extend(crate::workspace_members(root));
    for package in packages {
        for dir in ["src", "tests", "benches", "examples"] {
            let dir = if package.is_empty() { dir.to_string() } else { format!("{package}/{dir}") };
            for (rel, text) in rust_files(root, &dir) {
                scan.read(&text);
                if !rel.ends_with("/main.rs") && !text.starts_with("//!") {
                    scan.violations.push(format!("{rel}: no leading //! doc comment"));
                }
            }
        }
    }
    scan
}

/// The service crate's source files (`src/`), test files left out, each with its code up to an
/// inline `#[cfg(test)] mod tests` (tests may be long; the rules are for the code they test).
fn service_sources(root: &Path) -> Vec<(String, String)> {
    rust_files(root, "src")
        .into_iter()
        .filter(|(rel, _)| !is_test_file(rel))
        .map(|(rel, text)| {
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => text[..at].to_string(),
                None => text,
            };
            (rel, code)
        })
        .collect()
}

/// Service files over 400 lines when they came in, to be split. The list only shrinks: a file
/// that gets under the limit must leave it (the check says so).
const FILES_OVER_400_LINES: [&str; 2] = ["src/cli/args.rs", "src/node/bootstrap.rs"];

/// Service functions (`path::name`) over 80 lines; the list only shrinks.
const FUNCTIONS_OVER_80_LINES: [&str; 2] = ["src/metrics.rs::with_tag_series", "src/node/run.rs::start"];

/// Reports every name in `long` that `known` does not list, and every name `known` lists that is
/// no longer long.
fn only_shrinks(scan: &mut Scan, long: &[String], known: &[&str], what: &str) {
    for name in long.iter().filter(|name| !known.contains(&name.as_str())) {
        scan.violations.push(format!("{name}: {what}"));
    }
    for name in known.iter().filter(|name| !long.iter().any(|l| l == *name)) {
        scan.violations.push(format!("{name} is within the limit now: remove it from the list in xtask"));
    }
}

/// No service file is over 400 lines.
pub fn service_file_length(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let mut long = Vec::new();
    for (rel, _) in service_sources(root) {
        let text = std::fs::read_to_string(root.join(&rel)).unwrap_or_default();
        scan.read(&text);
        if text.lines().count() > 400 {
            long.push(rel);
        }
    }
    only_shrinks(&mut scan, &long, &FILES_OVER_400_LINES, "over 400 lines: split it by concern");
    scan
}

/// No service function is over 80 lines. In rustfmt-formatted code a function ends at the first
/// line that is its own indentation followed by `}`.
pub fn service_function_length(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let mut long = Vec::new();
    for (rel, code) in service_sources(root) {
        scan.read(&code);
        let lines: Vec<&str> = code.lines().collect();
        for (start, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            let Some(name) = function_name(trimmed) else { continue };
            if line.trim_end().ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            if let Some(end) = lines[start + 1..].iter().position(|l| *l == close) {
                if end + 2 > 80 {
                    long.push(format!("{rel}::{name}"));
                }
            }
        }
    }
    only_shrinks(&mut scan, &long, &FUNCTIONS_OVER_80_LINES, "over 80 lines: split it");
    scan
}

/// The name of the function a trimmed line declares, if it declares one.
fn function_name(trimmed: &str) -> Option<&str> {
    let mut rest = trimmed;
    for prefix in ["pub(crate) ", "pub(super) ", "pub ", "async ", "const ", "unsafe "] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}

/// Every service file under `src/` (`dir` relative to it) whose code contains one of `needles`,
/// other than the files `allowed` (relative to `src/`).
fn service_files_using(root: &Path, dir: &str, needles: &[&str], allowed: &[&str], what: &str) -> Scan {
    let mut scan = Scan::default();
    for (rel, code) in service_sources(root) {
        let in_src = rel.strip_prefix("src/").unwrap_or(&rel);
        if !in_src.starts_with(dir) {
            continue;
        }
        scan.read(&code);
        if allowed.contains(&in_src) {
            continue;
        }
        if let Some(needle) = needles.iter().find(|n| code_lines(&code).any(|line| line.contains(**n))) {
            scan.violations.push(format!("{rel}: {needle}: {what}"));
        }
    }
    scan
}

/// The wall clock is read only in `src/clock.rs`.
pub fn wall_clock(root: &Path) -> Scan {
    service_files_using(root, "", &["SystemTime::now"], &["clock.rs"], "the wall clock is read only in src/clock.rs")
}

/// Nothing but `cli/args.rs`, its modules and `main.rs` sees clap.
pub fn clap(root: &Path) -> Scan {
    let allowed = [
        "cli/args.rs",
        "cli/args/security.rs",
        "cli/args/timeseq.rs",
        "cli/args/recover.rs",
        "cli/args/statefulset.rs",
    ];
    let allowed: Vec<&str> = allowed.into_iter().chain(["main.rs"]).collect();
    service_files_using(root, "", &["clap::", "use clap"], &allowed, "clap is for cli/args.rs and main.rs only")
}

/// Only the ID services put anything into an engine.
pub fn engine_installers(root: &Path) -> Scan {
    service_files_using(
        root,
        "",
        &[
            "SegmentBuffer::new",
            "Generator::new",
            ".install_next(",
            "RangeHolder::new",
            ".install_range(",
            ".install_block(",
        ],
        &[
            "services/segments.rs",
            "services/segments/load.rs",
            "services/snowflakes/lease.rs",
            "services/timeseq.rs",
            "services/timeseq/claims.rs",
            "services/timeseq/namespace.rs",
            "services/timeseq/shared.rs",
        ],
        "an engine fed outside the ID services",
    )
}

/// No `unwrap` or `expect` on a request path (`src/api`).
pub fn request_paths_never_unwrap(root: &Path) -> Scan {
    service_files_using(root, "api", &[".unwrap()", ".expect("], &[], "unwrap/expect on a request path")
}

/// The non-test code lines of the files under `dir`, counted in `scan`, as (file, code).
fn library_code(root: &Path, dir: &str, scan: &mut Scan) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (rel, text) in rust_files(root, dir) {
        if is_test_file(&rel) {
            continue;
        }
        scan.read(&text);
        out.push((rel, without_tests(&text).to_string()));
    }
    out
}

/// Every file of `code` with a non-comment line containing one of `needles`.
fn report(scan: &mut Scan, code: &[(String, String)], needles: &[&str], what: &str) {
    for (rel, text) in code {
        for needle in needles.iter().filter(|needle| code_lines(text).any(|line| line.contains(**needle))) {
            scan.violations.push(format!("{rel}: {needle}: {what}"));
        }
    }
}

/// The ID engines (`ids/`) do no I/O, read no clock and depend on nothing but chrono's calendar.
pub fn engines_pure(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let code = library_code(root, "ids/src", &mut scan);
    let forbidden = [
        "SystemTime",
        "Instant::now",
        "Utc::now",
        "Local::now",
        "tokio",
        "std::fs",
        "std::net",
        "reqwest",
        "leafraft::",
    ];
    report(&mut scan, &code, &forbidden, "the engines do no I/O and read no clock");
    let text = std::fs::read_to_string(root.join("ids/Cargo.toml")).unwrap_or_default();
    scan.read(&text);
    let manifest: toml::Table = toml::from_str(&text).unwrap_or_default();
    let deps = manifest.get("dependencies").and_then(|deps| deps.as_table()).cloned().unwrap_or_default();
    for name in deps.keys().filter(|name| *name != "chrono") {
        scan.violations.push(format!("ids/Cargo.toml: depends on {name}"));
    }
    let chrono = deps.get("chrono").map(ToString::to_string).unwrap_or_default();
    if chrono.contains("clock") || !(chrono.is_empty() || chrono.contains("default-features = false")) {
        scan.violations.push(format!("ids/Cargo.toml: chrono with a clock: {chrono}"));
    }
    scan
}

/// No engine type derives serde's traits (the state converts at its own layer).
pub fn engines_not_serde(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let code = library_code(root, "ids/src", &mut scan);
    report(&mut scan, &code, &["Serialize", "Deserialize"], "engine types convert at the service layer");
    scan
}

/// `apply` reads nothing but its input: the state crate reads no clock and no randomness.
pub fn apply_pure(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let code = library_code(root, "state/src", &mut scan);
    report(
        &mut scan,
        &code,
        &["SystemTime", "Instant::now", "rand::", "thread_rng"],
        "the state machine must read nothing but its input",
    );
    scan
}

/// The state crate runs no async code (tests included).
pub fn state_no_async(root: &Path) -> Scan {
    let mut scan = Scan::default();
    for (rel, text) in rust_files(root, "state/src") {
        scan.read(&text);
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let words = code.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            if words.clone().any(|word| word == "async") || code.contains(".await") {
                scan.violations.push(format!("{rel}:{}: async code in the state crate: {}", number + 1, line.trim()));
            }
        }
    }
    scan
}

/// Only the storage engine module (`storage/src/engine*`) calls sled.
pub fn only_storage_engine_sees_sled(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let code = library_code(root, "storage/src", &mut scan);
    let others: Vec<(String, String)> = code
        .into_iter()
        .filter(|(rel, _)| rel != "storage/src/engine.rs" && !rel.starts_with("storage/src/engine/"))
        .collect();
    report(&mut scan, &others, &["sled::"], "only storage/src/engine.rs calls sled");
    scan
}

/// The history checkers (`history/`) do no I/O and read no clock.
pub fn history_pure(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let code = library_code(root, "history/src", &mut scan);
    let forbidden =
        ["std::fs", "std::io", "std::net", "std::process", "std::env", "std::thread", "Instant", "SystemTime"];
    report(&mut scan, &code, &forbidden, "the history checkers trust nothing but their records");
    scan
}

/// No crate re-exports another workspace crate's items (`pub use leafraft_state::Request`): each
/// crate imports what it uses from the crate that defines it, so a name has one home.
pub fn foreign_reexports(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let members = crate::workspace_members(root);
    let crates: Vec<String> = members
        .iter()
        .filter_map(|member| {
            let manifest = crate::manifest(root, &format!("{member}/Cargo.toml"));
            let lib = manifest.get("lib").and_then(|lib| lib.get("name")).and_then(|name| name.as_str());
            let package = manifest.get("package").and_then(|p| p.get("name")).and_then(|name| name.as_str());
            lib.or(package).map(|name| name.replace('-', "_"))
        })
        .collect();
    for package in std::iter::once(String::new()).chain(members) {
        let dir = if package.is_empty() { "src".to_string() } else { format!("{package}/src") };
        for (rel, text) in rust_files(root, &dir) {
            scan.read(&text);
            let code = crate::imports::blank_comments_and_literals(&text);
            for (number, line) in code.lines().enumerate() {
                let Some(tree) = reexported_tree(line) else { continue };
                let first = tree.trim_start_matches(':').trim_start_matches('{').trim_start();
                let first: String = first.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if crates.contains(&first) {
                    scan.violations.push(format!(
                        "{rel}:{}: re-exports the workspace crate {first}: import it from there instead",
                        number + 1
                    ));
                }
            }
        }
    }
    scan
}

/// What follows `pub use` or `pub(..) use` at the start of `line`.
fn reexported_tree(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("pub")?;
    let rest = match rest.strip_prefix('(') {
        Some(restricted) => &restricted[restricted.find(')')? + 1..],
        None => rest,
    };
    rest.trim_start().strip_prefix("use ")
}
