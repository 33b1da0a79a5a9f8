//! The replicated state stays pure (issue 27, acceptance 3): its normal dependency graph holds no
//! HTTP stack or database (what `cargo tree -e normal -p leafraft-state` shows, read here from
//! `cargo metadata` so a transitive dependency is caught too), and its code declares no `async`
//! function or block and awaits nothing.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const FORBIDDEN: [&str; 8] = ["axum", "hyper", "reqwest", "sled", "tower", "raft", "storage", "leafraft"];

/// The names of every package `leafraft-state` links through normal (not dev or build) edges.
fn normal_dependency_closure() -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
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
    let mut normal: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in metadata["resolve"]["nodes"].as_array().expect("resolve nodes") {
        let deps = node["deps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|dep| dep["dep_kinds"].as_array().into_iter().flatten().any(|kind| kind["kind"].is_null()));
        normal.insert(node["id"].as_str().expect("id"), deps.map(|dep| dep["pkg"].as_str().expect("pkg")).collect());
    }
    let root = names.iter().find(|(_, name)| **name == "leafraft-state").map(|(id, _)| *id).expect("leafraft-state");
    let mut seen = BTreeSet::new();
    let mut todo = vec![root];
    while let Some(id) = todo.pop() {
        if seen.insert(id) {
            todo.extend(normal.get(id).into_iter().flatten().copied());
        }
    }
    seen.iter().filter_map(|id| names.get(id).map(|name| name.to_string())).collect()
}

#[test]
fn the_state_links_no_http_stack_and_no_database() {
    let linked = normal_dependency_closure();
    assert!(
        linked.contains("openraft") && linked.contains("bincode"),
        "the walk found the state's dependencies: {linked:?}"
    );
    let forbidden: Vec<&str> = FORBIDDEN.into_iter().filter(|name| linked.contains(*name)).collect();
    assert!(forbidden.is_empty(), "leafraft-state links {forbidden:?}: the state must stay pure");
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a source directory").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_state_code_has_no_async() {
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
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
