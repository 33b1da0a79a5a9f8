//! The client must stay small: none of the server's heavy dependencies (openraft, sled, axum) nor
//! the server itself in its normal (non-dev) dependency graph. Read from `cargo metadata`, so a
//! dependency that comes in transitively is caught too (what `cargo tree -p leafraft-client -e
//! normal` shows).

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

const FORBIDDEN: [&str; 6] = ["openraft", "sled", "axum", "leafraft", "raft", "storage"];

#[test]
fn the_client_links_none_of_the_servers_dependencies() {
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
    let root = names.iter().find(|(_, name)| **name == "leafraft-client").map(|(id, _)| *id).expect("leafraft-client");

    let mut seen = BTreeSet::new();
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        if seen.insert(id) {
            todo.extend(normal.get(id).into_iter().flatten().copied());
        }
    }
    let linked: BTreeSet<&str> = seen.iter().filter_map(|id| names.get(id).copied()).collect();
    assert!(linked.contains("leafraft-ids"), "the client runs the server's engine crate: {linked:?}");
    assert!(linked.contains("reqwest"), "the walk found the client's dependencies: {linked:?}");
    let forbidden: Vec<&str> = FORBIDDEN.into_iter().filter(|name| linked.contains(name)).collect();
    assert!(forbidden.is_empty(), "leafraft-client links {forbidden:?}: keep the server's dependencies out");
}
