//! What the workspace's small crates may link, read from `cargo metadata` so a dependency that
//! comes in transitively is caught too (what `cargo tree -e normal -p CRATE` shows): the client
//! stays free of the server's dependencies, the pure replicated state of any HTTP stack,
//! database or async code, and the history checkers of everything.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The names of every package `package` links through normal (not dev or build) edges.
fn normal_dependency_closure(package: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    // This machine's platform only: other platforms' crates need not be downloaded.
    let rustc = Command::new("rustc").arg("-vV").output().expect("rustc -vV runs");
    let rustc = String::from_utf8_lossy(&rustc.stdout).to_string();
    let host = rustc.lines().find_map(|line| line.strip_prefix("host: ")).expect("rustc names its host");
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline", "--filter-platform", host])
        .args(["--manifest-path", manifest])
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata answers JSON");
    let names: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().expect("id"), p["name"].as_str().expect("name")))
        .collect();
    // Each package's normal dependencies (dev- and build-only edges left out).
    let mut normal: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in metadata["resolve"]["nodes"].as_array().expect("resolve nodes") {
        let deps = node["deps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|dep| dep["dep_kinds"].as_array().into_iter().flatten().any(|kind| kind["kind"].is_null()));
        normal.insert(node["id"].as_str().expect("id"), deps.map(|dep| dep["pkg"].as_str().expect("pkg")).collect());
    }
    let root = names.iter().find(|(_, name)| **name == package).map(|(id, _)| *id).expect("the package is a member");
    let mut seen = BTreeSet::new();
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        if seen.insert(id) {
            todo.extend(normal.get(id).into_iter().flatten().copied());
        }
    }
    seen.iter().filter_map(|id| names.get(id).map(|name| name.to_string())).collect()
}

/// Fails naming what of `forbidden` `package` links; `expected` proves the walk found its graph.
fn assert_links_none_of(package: &str, expected: &[&str], forbidden: &[&str]) {
    let linked = normal_dependency_closure(package);
    assert!(expected.iter().all(|name| linked.contains(*name)), "the walk found {package}'s dependencies: {linked:?}");
    let found: Vec<&str> = forbidden.iter().copied().filter(|name| linked.contains(*name)).collect();
    assert!(found.is_empty(), "{package} links {found:?}");
}

#[test]
fn the_client_links_none_of_the_servers_dependencies() {
    // axum is a dev-dependency only: the stand-in server of the client's tests, bench and example.
    let forbidden = ["openraft", "sled", "axum", "leafraft", "leafraft-state", "raft", "storage"];
    assert_links_none_of("leafraft-client", &["leafraft-ids", "reqwest"], &forbidden);
}

#[test]
fn the_state_links_no_http_stack_and_no_database() {
    let forbidden = ["axum", "hyper", "reqwest", "sled", "tower", "raft", "storage", "leafraft"];
    assert_links_none_of("leafraft-state", &["openraft", "bincode"], &forbidden);
}

#[test]
fn the_storage_links_no_http_stack() {
    let forbidden = ["axum", "hyper", "reqwest", "raft", "leafraft"];
    assert_links_none_of("storage", &["leafraft-state", "leafraft-durability", "sled"], &forbidden);
}

#[test]
fn the_state_code_has_no_async() {
    let mut files = Vec::new();
    super::rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("state/src"), &mut files);
    assert!(files.len() > 5, "found only {files:?}");
    let mut found = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read a source file");
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let words = code.split(|c: char| !(c.is_alphanumeric() || c == '_'));
            if words.clone().any(|word| word == "async") || code.contains(".await") {
                found.push(format!("{}:{}: {}", path.display(), number + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "async code in the state crate:\n{}", found.join("\n"));
}

/// The history checkers the tests and the chaos runner share (`history/`) trust nothing but the
/// records they are given: they link no crate at all, and their code (tests aside) does no I/O
/// and reads no clock.
#[test]
fn the_history_checkers_link_nothing_and_read_no_clock() {
    let linked = normal_dependency_closure("leafraft-history");
    assert_eq!(linked, BTreeSet::from(["leafraft-history".to_string()]), "leafraft-history links more than itself");
    let mut files = Vec::new();
    super::rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("history/src"), &mut files);
    assert!(files.len() >= 3, "found only {files:?}");
    let forbidden =
        ["std::fs", "std::io", "std::net", "std::process", "std::env", "std::thread", "Instant", "SystemTime"];
    let mut found = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read a source file");
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        for (number, line) in code.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            for needle in forbidden.iter().filter(|needle| code.contains(**needle)) {
                found.push(format!("{}:{}: {needle}: {}", path.display(), number + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "I/O or a clock in the history checkers:\n{}", found.join("\n"));
}
