//! Repository hygiene checked as a test: every Rust source file opens with a `//!` doc line, and
//! the service builds none of the test tools (they live in the `tools` crate).

use std::path::Path;

mod dependencies;
mod imports;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_starts_with_a_doc_comment() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src",
        "state/src",
        "raft/src",
        "storage/src",
        "tests",
        "tools/src",
        "tools/tests",
        "ids/src",
        "client/src",
        "client/tests",
        "client/examples",
        "client/benches",
        "history/src",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    let missing: Vec<_> = files
        .iter()
        .filter(|path| path.file_name().is_some_and(|name| name != "main.rs"))
        .filter(|path| !std::fs::read_to_string(path).unwrap_or_default().starts_with("//!"))
        .collect();
    assert!(missing.is_empty(), "files without a leading //! doc comment: {missing:?}");
}

/// The crates only the chaos runner and the load generators need. The service must not depend on
/// them directly (`cargo tree -e normal -p leafraft --depth 1` shows the same). (`hyper-util`
/// left this list when the node began serving its connections itself, `src/serve.rs`: its tokio
/// IO adapter and timer are what `axum::serve` uses. `libc` left it when the node began raising
/// its open-file limit and keeping its connections under it, `src/connections.rs`: std has no
/// `getrlimit`.)
const TOOL_ONLY_CRATES: [&str; 7] =
    ["rand", "rand_chacha", "futures", "hdrhistogram", "http-body-util", "base64", "fuser"];

#[test]
fn the_service_links_no_test_tool_dependency() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let manifest: toml::Table = toml::from_str(&manifest).unwrap_or_default();
    let dependencies = manifest.get("dependencies").and_then(|deps| deps.as_table()).cloned().unwrap_or_default();
    assert!(!dependencies.is_empty(), "the service's Cargo.toml has no [dependencies] table");
    let tool_deps: Vec<&str> = TOOL_ONLY_CRATES.into_iter().filter(|name| dependencies.contains_key(*name)).collect();
    assert!(tool_deps.is_empty(), "the service depends on test-tool crates {tool_deps:?}: move their users to tools/");
}

#[test]
fn the_service_source_holds_no_test_tool() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for tool_dir in ["src/bin", "src/bench"] {
        assert!(!root.join(tool_dir).exists(), "{tool_dir} exists: test tools belong in tools/");
    }
}

/// Source files of the service crate, test files excluded, with their text up to any inline
/// `#[cfg(test)] mod tests` (tests may be long; the rules are for the code they test).
fn service_sources() -> Vec<(std::path::PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|path| {
            let name = path.file_name().and_then(|name| name.to_str()).unwrap_or_default();
            !matches!(name, "tests.rs" | "proptests.rs" | "tidy.rs") && !relative(path).starts_with("src/tidy/")
        })
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => text[..at].to_string(),
                None => text,
            };
            (path, code)
        })
        .collect()
}

fn relative(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// Files still over the limit, each with its length when the rule came in. The list only
/// shrinks: a file that gets under the limit must leave it (the test says so).
const FILES_OVER_400_LINES: [&str; 0] = [];

#[test]
fn no_service_file_is_over_400_lines() {
    let mut over = Vec::new();
    for (path, _) in service_sources() {
        let lines = std::fs::read_to_string(&path).unwrap_or_default().lines().count();
        if lines > 400 {
            over.push(relative(&path));
        }
    }
    let new: Vec<_> = over.iter().filter(|path| !FILES_OVER_400_LINES.contains(&path.as_str())).collect();
    assert!(new.is_empty(), "files over 400 lines: {new:?}; split them by concern");
    let fixed: Vec<_> = FILES_OVER_400_LINES.iter().filter(|path| !over.iter().any(|p| p == *path)).collect();
    assert!(fixed.is_empty(), "{fixed:?} are no longer over 400 lines: remove them from FILES_OVER_400_LINES");
}

/// Functions over 80 lines, as `path::name`; the list only shrinks.
const FUNCTIONS_OVER_80_LINES: [&str; 0] = [];

/// Every function in rustfmt-formatted code ends at the first line that is its own indentation
/// followed by `}`; answers `path::name` of those longer than `limit` lines.
fn long_functions(limit: usize) -> Vec<String> {
    let mut long = Vec::new();
    for (path, code) in service_sources() {
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
                if end + 2 > limit {
                    long.push(format!("{}::{name}", relative(&path)));
                }
            }
        }
    }
    long
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

#[test]
fn no_service_function_is_over_80_lines() {
    let long = long_functions(80);
    let new: Vec<_> = long.iter().filter(|f| !FUNCTIONS_OVER_80_LINES.contains(&f.as_str())).collect();
    assert!(new.is_empty(), "functions over 80 lines: {new:?}; split them");
    let fixed: Vec<_> = FUNCTIONS_OVER_80_LINES.iter().filter(|f| !long.iter().any(|l| l == *f)).collect();
    assert!(fixed.is_empty(), "{fixed:?} are no longer over 80 lines: remove them from FUNCTIONS_OVER_80_LINES");
}

/// No crate of the workspace (libraries, binaries, integration tests, benches) has an import
/// cycle among its modules, at full-path granularity (`imports`: siblings at every level form a
/// DAG; `imports::tests` plants cycles and sees this fail).
#[test]
fn no_crate_of_the_workspace_has_an_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let roots = imports::workspace_crate_roots(root);
    assert!(roots.len() > 10, "found only {roots:?}");
    let mut cycles = Vec::new();
    for crate_root in roots {
        let krate = imports::load_crate(&crate_root, &|path: &Path| std::fs::read_to_string(path).ok());
        assert!(!krate.modules.is_empty(), "{} read no module", crate_root.display());
        let edges = krate.sibling_edges();
        let graph: std::collections::BTreeSet<_> = edges.keys().cloned().collect();
        if let Some(cycle) = imports::find_cycle(&graph) {
            let path: Vec<String> = cycle.iter().map(imports::display).collect();
            cycles.push(format!("{}: {}", relative(&crate_root), path.join(" -> ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles (move what both sides need down into a module of its own):\n{}",
        cycles.join("\n")
    );
}

/// The code lines (comments dropped) of the service files under `dir` (relative to `src/`).
fn code_lines_under(dir: &str) -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut lines = Vec::new();
    for (path, code) in service_sources() {
        let rel = path.strip_prefix(&src).unwrap_or(&path).display().to_string();
        if !rel.starts_with(dir) {
            continue;
        }
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            lines.push((rel.clone(), line.to_string()));
        }
    }
    lines
}

/// The files under `dir` whose code contains any of `needles`, other than those `allowed`.
fn files_using(dir: &str, needles: &[&str], allowed: &[&str]) -> std::collections::BTreeSet<String> {
    code_lines_under(dir)
        .into_iter()
        .filter(|(file, line)| !allowed.contains(&file.as_str()) && needles.iter().any(|n| line.contains(n)))
        .map(|(file, _)| file)
        .collect()
}

#[test]
fn the_wall_clock_is_read_only_in_clock_rs() {
    let readers = files_using("", &["SystemTime::now"], &["clock.rs"]);
    assert!(readers.is_empty(), "the wall clock is read outside src/clock.rs in {readers:?}");
}

#[test]
fn only_cli_and_main_see_clap() {
    let users = files_using(
        "",
        &["clap::", "use clap"],
        &[
            "cli/args.rs",
            "cli/args/security.rs",
            "cli/args/timeseq.rs",
            "cli/args/recover.rs",
            "cli/args/statefulset.rs",
            "main.rs",
        ],
    );
    assert!(users.is_empty(), "clap is used outside cli/args.rs (and its modules) and main.rs in {users:?}");
}

/// The code lines (comments and inline tests dropped) of the engine crate's sources, `ids/src`.
fn engine_code_lines() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("ids/src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(!files.is_empty(), "no engine sources under ids/src");
    let mut lines = Vec::new();
    for path in
        files.iter().filter(|p| !matches!(p.file_name().and_then(|n| n.to_str()), Some("tests.rs" | "proptests.rs")))
    {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            lines.push((relative(path), line.to_string()));
        }
    }
    lines
}

#[test]
fn the_engines_do_no_io_read_no_clock_and_depend_on_nothing_but_a_calendar() {
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
    let impure: std::collections::BTreeSet<String> = engine_code_lines()
        .into_iter()
        .filter(|(_, line)| forbidden.iter().any(|needle| line.contains(needle)))
        .map(|(file, _)| file)
        .collect();
    assert!(impure.is_empty(), "engine files doing I/O or reading a clock: {impure:?}");
    // No dependency but chrono's calendar (its clock feature off): nothing can bring I/O, a clock
    // or the server in through the back door.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("ids/Cargo.toml")).unwrap_or_default();
    let manifest: toml::Table = toml::from_str(&manifest).unwrap_or_default();
    assert!(manifest.contains_key("package"), "ids/Cargo.toml is missing or unreadable");
    let deps = manifest.get("dependencies").and_then(|deps| deps.as_table()).cloned().unwrap_or_default();
    let names: Vec<&String> = deps.keys().filter(|name| *name != "chrono").collect();
    assert!(names.is_empty(), "the engine crate (ids/) has dependencies {names:?}");
    let chrono = deps.get("chrono").map(ToString::to_string).unwrap_or_default();
    assert!(
        !chrono.contains("clock") && (chrono.is_empty() || chrono.contains("default-features = false")),
        "chrono with a clock: {chrono}"
    );
}

#[test]
fn only_the_id_services_install_into_an_engine() {
    let installers = files_using(
        "",
        &["SegmentBuffer::new", "Generator::new", ".install_next(", "RangeHolder::new", ".install_range("],
        &["segments.rs", "segments/load.rs", "snowflakes/lease.rs", "timeseq/mod.rs", "timeseq/claims.rs"],
    );
    assert!(installers.is_empty(), "engines fed outside the ID services: {installers:?}");
}

#[test]
fn request_paths_never_unwrap() {
    let unwrapping = files_using("api", &[".unwrap()", ".expect("], &[]);
    assert!(unwrapping.is_empty(), "unwrap/expect on a request path in {unwrapping:?}");
}

#[test]
fn the_raft_crate_depends_on_neither_storage_nor_the_service() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (krate, forbidden) in [
        ("raft", &["storage", "sled", "leafraft"][..]),
        // The log store: the replicated state and the durability record, never the network.
        ("storage", &["raft", "leafraft", "axum", "hyper", "reqwest"][..]),
        // The pure state: its whole normal graph is checked by `tidy::dependencies`.
        ("state", &["storage", "sled", "leafraft", "raft", "axum", "hyper", "reqwest", "tokio"][..]),
    ] {
        let manifest = std::fs::read_to_string(root.join(krate).join("Cargo.toml")).unwrap_or_default();
        let manifest: toml::Table = toml::from_str(&manifest).unwrap_or_default();
        let deps = manifest.get("dependencies").and_then(|deps| deps.as_table()).cloned().unwrap_or_default();
        assert!(!deps.is_empty(), "{krate}/Cargo.toml has no [dependencies]");
        for name in forbidden {
            assert!(!deps.contains_key(*name), "the {krate} crate depends on {name}");
        }
    }
}

#[test]
fn apply_reads_no_clock_and_no_randomness() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("state/src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    // The network runs beside Raft, never inside `apply`: it times RPCs.
    let beside_apply = |p: &Path| relative(p).contains("/network");
    for path in files.iter().filter(|p| !p.display().to_string().contains("test") && !beside_apply(p)) {
        let code = std::fs::read_to_string(path).unwrap_or_default();
        let code = code.split("#[cfg(test)]").next().unwrap_or_default();
        for needle in ["SystemTime", "Instant::now", "rand::", "thread_rng"] {
            let used = code.lines().any(|l| !l.trim_start().starts_with("//") && l.contains(needle));
            assert!(!used, "{} uses {needle}: the state machine must read nothing but its input", relative(path));
        }
    }
}

#[test]
fn only_the_storage_engine_module_sees_sled() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("storage/src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let users: Vec<String> = files
        .iter()
        .filter(|path| !path.starts_with(root.join("engine")) && !path.ends_with("engine.rs"))
        .filter(|path| !path.display().to_string().contains("test"))
        .filter(|path| {
            let code = std::fs::read_to_string(path).unwrap_or_default();
            let code = code.split("#[cfg(test)]").next().unwrap_or_default().to_string();
            code.lines().any(|l| !l.trim_start().starts_with("//") && l.contains("sled::"))
        })
        .map(|path| relative(path))
        .collect();
    assert!(users.is_empty(), "storage files other than the engine call sled: {users:?}");
}

#[test]
fn no_engine_type_derives_serialize() {
    let serializing: std::collections::BTreeSet<String> = engine_code_lines()
        .into_iter()
        .filter(|(_, line)| line.contains("Serialize") || line.contains("Deserialize"))
        .map(|(file, _)| file)
        .collect();
    assert!(serializing.is_empty(), "engine types with serde derives (convert at the service layer): {serializing:?}");
}
