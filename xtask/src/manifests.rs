//! Checks on the manifests: what each crate may name in `[dependencies]`, and what it may link
//! at all, read from `cargo metadata` so a crate that comes in transitively is caught too (what
//! `cargo tree -e normal -p CRATE` shows).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::Scan;

/// The crates only the chaos runner and the load generators need. (`hyper-util` left this list
/// when the node began serving its connections itself, `src/api/server.rs`; `libc` when it began
/// raising its open-file limit, `src/api/connections.rs`: std has no `getrlimit`.)
const TOOL_ONLY_CRATES: [&str; 7] =
    ["rand", "rand_chacha", "futures", "hdrhistogram", "http-body-util", "base64", "fuser"];

/// Tools' crates the service names only to give them the features the tools' build turns on, so
/// that the README's release build and the chaos suite's make the same artifacts (root
/// `Cargo.toml`). They are already linked (`rand_chacha` through openraft's `rand`); the service's
/// code must not use them.
const FEATURES_ONLY: [&str; 1] = ["rand_chacha"];

/// The service names none of the tools' crates in `[dependencies]` (but [`FEATURES_ONLY`], which
/// its code does not use), and its `src/` holds no tool binary (they live in `tools/`).
pub fn service_links_no_tool(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    scan.read(&text);
    let manifest: toml::Table = toml::from_str(&text).unwrap_or_default();
    let deps = manifest.get("dependencies").and_then(|deps| deps.as_table()).cloned().unwrap_or_default();
    let code = crate::rust_files(root, "src");
    for name in TOOL_ONLY_CRATES.into_iter().filter(|name| deps.contains_key(*name)) {
        if !FEATURES_ONLY.contains(&name) {
            scan.violations
                .push(format!("Cargo.toml: the service depends on the tools' crate {name}: move its users to tools/"));
            continue;
        }
        // A path through it, an import of it (`use rand_chacha as r;` too), or an extern crate.
        let uses = [format!("{name}::"), format!("use {name}"), format!("crate {name}")];
        for (path, _) in code.iter().filter(|(_, text)| uses.iter().any(|used| text.contains(used.as_str()))) {
            scan.violations.push(format!("{path}: uses {name}, which the service names for its features only"));
        }
    }
    for dir in ["src/bin", "src/bench"] {
        if root.join(dir).exists() {
            scan.violations.push(format!("{dir} exists: test tools belong in tools/"));
        }
    }
    scan
}

/// What each library crate may name in `[dependencies]`: the layers of the workspace.
const LAYERS: [(&str, &[&str]); 5] = [
    // The network between nodes: no database, not the service.
    ("raft", &["storage", "sled", "leafraft"]),
    // The log store: the replicated state and the durability record, never the network.
    ("storage", &["raft", "leafraft", "axum", "hyper", "reqwest"]),
    // The pure state: nothing with I/O or async code.
    ("state", &["storage", "sled", "leafraft", "raft", "axum", "hyper", "reqwest", "tokio"]),
    // Between storage and raft, depending on neither.
    ("durability", &["storage", "raft", "sled", "leafraft", "axum", "hyper", "reqwest"]),
    // The error codes: shared by the server and the client, so they depend on nothing.
    ("codes", &["leafraft", "leafraft-client", "serde", "axum"]),
];

pub fn crate_layers(root: &Path) -> Scan {
    let mut scan = Scan::default();
    for (krate, forbidden) in LAYERS {
        let path = format!("{krate}/Cargo.toml");
        let text = std::fs::read_to_string(root.join(&path)).unwrap_or_default();
        scan.read(&text);
        let manifest: toml::Table = toml::from_str(&text).unwrap_or_default();
        let deps = manifest.get("dependencies").and_then(|deps| deps.as_table()).cloned().unwrap_or_default();
        for name in forbidden.iter().filter(|name| deps.contains_key(**name)) {
            scan.violations.push(format!("{path}: the {krate} crate depends on {name}"));
        }
    }
    scan
}

/// Per package: crates its walk must find (proof the graph was read) and crates it must not link.
const LINKS: [(&str, &[&str], &[&str]); 4] = [
    // axum is a dev-dependency only: the stand-in server of the client's tests.
    (
        "leafraft-client",
        &["leafraft-ids", "leafraft-codes", "reqwest"],
        &["openraft", "sled", "axum", "leafraft", "leafraft-state", "raft", "storage"],
    ),
    (
        "leafraft-state",
        &["openraft", "bincode"],
        &["axum", "hyper", "reqwest", "sled", "tower", "raft", "storage", "leafraft"],
    ),
    ("storage", &["leafraft-state", "leafraft-durability", "sled"], &["axum", "hyper", "reqwest", "raft", "leafraft"]),
    // The history checkers link nothing at all.
    ("leafraft-history", &["leafraft-history"], &["serde", "tokio", "leafraft", "leafraft-state"]),
];

/// What the small crates link, through normal (not dev or build) edges.
pub fn linked_crates(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let metadata = match metadata(root) {
        Ok(metadata) => metadata,
        Err(e) => {
            scan.violations.push(format!("cargo metadata: {e}"));
            return scan;
        }
    };
    // What it read: the packages of the graph (files) and their dependency edges (lines).
    scan.files = metadata["packages"].as_array().map_or(0, Vec::len);
    scan.lines = metadata["resolve"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| n["deps"].as_array().map_or(0, Vec::len))
        .sum();
    scan.violations.extend(forbidden_links(&metadata, &LINKS));
    if let Some(history) = normal_closure(&metadata, "leafraft-history") {
        if history.len() != 1 {
            scan.violations.push(format!("leafraft-history links more than itself: {history:?}"));
        }
    }
    scan
}

/// Every violation of `links` in the dependency graph `metadata` (`cargo metadata`'s JSON).
pub fn forbidden_links(metadata: &Value, links: &[(&str, &[&str], &[&str])]) -> Vec<String> {
    let mut violations = Vec::new();
    for (package, expected, forbidden) in links {
        let Some(linked) = normal_closure(metadata, package) else {
            violations.push(format!("{package} is not a package of the workspace"));
            continue;
        };
        for name in expected.iter().filter(|name| !linked.contains(**name)) {
            violations.push(format!("{package}: the walk did not find {name}: the graph was not read"));
        }
        for name in forbidden.iter().filter(|name| linked.contains(**name)) {
            violations.push(format!("{package} links {name}"));
        }
    }
    violations
}

/// `cargo metadata` of the checkout at `root`, this machine's platform only.
pub fn metadata(root: &Path) -> Result<Value, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let rustc = Command::new("rustc").arg("-vV").output().map_err(|e| format!("rustc -vV: {e}"))?;
    let rustc = String::from_utf8_lossy(&rustc.stdout).to_string();
    let host = rustc.lines().find_map(|line| line.strip_prefix("host: ")).ok_or("rustc names no host")?;
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline", "--filter-platform", host])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .output()
        .map_err(|e| format!("cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).to_string());
    }
    serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())
}

/// The names of every package `package` links through normal edges, itself included.
fn normal_closure(metadata: &Value, package: &str) -> Option<BTreeSet<String>> {
    let packages = metadata["packages"].as_array()?;
    let names: BTreeMap<&str, &str> =
        packages.iter().filter_map(|p| Some((p["id"].as_str()?, p["name"].as_str()?))).collect();
    let mut normal: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in metadata["resolve"]["nodes"].as_array()? {
        let deps = node["deps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|dep| dep["dep_kinds"].as_array().into_iter().flatten().any(|kind| kind["kind"].is_null()));
        normal.insert(node["id"].as_str()?, deps.filter_map(|dep| dep["pkg"].as_str()).collect());
    }
    let root = names.iter().find(|(_, name)| **name == package).map(|(id, _)| *id)?;
    let mut seen = BTreeSet::new();
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        if seen.insert(id) {
            todo.extend(normal.get(id).into_iter().flatten().copied());
        }
    }
    Some(seen.iter().filter_map(|id| names.get(id).map(|name| name.to_string())).collect())
}
