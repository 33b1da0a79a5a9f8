//! Every check on this repository, read through a path that contains `test`, and every check on
//! a planted violation: it must read enough to mean something, and fail where it should.

use std::path::Path;

use crate::Check;
use crate::CHECKS;

/// A checkout whose path contains `test` (a temporary directory named so).
fn checkout() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("test-checkout-").tempdir().expect("a temporary directory")
}

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("create the folders");
    std::fs::write(path, text).expect("write a planted file");
}

const WORKSPACE: &str =
    "[workspace]\nmembers = []\n\n[package]\nname = \"planted\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";

/// A function of `lines` lines, in rustfmt's shape.
fn function_of(lines: usize) -> String {
    let body: String = (0..lines - 2).map(|i| format!("    let _x{i} = {i};\n")).collect();
    format!("//! A long function.\n\nfn long() {{\n{body}}}\n")
}

/// Writes into `root` a checkout that breaks the rule of the check `name`.
fn plant(name: &str, root: &Path) {
    write(root, "Cargo.toml", WORKSPACE);
    match name {
        "doc_comments" => write(root, "src/lib.rs", "pub fn undocumented() {}\n"),
        "service_file_length" => write(root, "src/big.rs", &"//! Big.\n".repeat(401)),
        "service_function_length" => write(root, "src/long.rs", &function_of(82)),
        "wall_clock" => write(root, "src/api.rs", "//! x\nfn now() { let _ = std::time::SystemTime::now(); }\n"),
        "clap" => write(root, "src/config.rs", "//! x\nuse clap::Parser;\n"),
        "engine_installers" => write(root, "src/api/tags.rs", "//! x\nfn f() { SegmentBuffer::new(); }\n"),
        "request_paths_never_unwrap" => write(root, "src/api/tags.rs", "//! x\nfn f() { x.unwrap(); }\n"),
        "engines_pure" => write(root, "ids/src/lib.rs", "//! x\nfn f() { std::fs::read(\"x\"); }\n"),
        "engines_not_serde" => write(root, "ids/src/lib.rs", "//! x\n#[derive(serde::Serialize)]\npub struct Range;\n"),
        "apply_pure" => write(root, "state/src/lib.rs", "//! x\nfn f() { std::time::SystemTime::now(); }\n"),
        "state_no_async" => write(root, "state/src/lib.rs", "//! x\nasync fn f() {}\n"),
        "only_storage_engine_sees_sled" => {
            write(root, "storage/src/log_store.rs", "//! x\nfn f() { sled::open(\"x\"); }\n")
        }
        "history_pure" => write(root, "history/src/lib.rs", "//! x\nfn f() { std::fs::read(\"x\"); }\n"),
        "service_links_no_tool" => write(root, "Cargo.toml", &format!("{WORKSPACE}\n[dependencies]\nrand = \"0.8\"\n")),
        "crate_layers" => write(
            root,
            "raft/Cargo.toml",
            "[package]\nname = \"raft\"\n\n[dependencies]\nstorage = { path = \"../storage\" }\n",
        ),
        "linked_crates" => plant_links(root),
        "import_cycles" => {
            write(root, "src/lib.rs", "//! x\nmod a;\nmod b;\n");
            write(root, "src/a.rs", "//! x\nuse crate::b::B;\npub struct A;\n");
            write(root, "src/b.rs", "//! x\npub struct B;\nfn f(_: crate::a::A) {}\n");
        }
        "parents_imported" => {
            write(root, "src/lib.rs", "//! x\nmod cluster;\n");
            write(root, "src/cluster.rs", "//! x\nmod forward;\npub struct Cluster;\nfn f() { forward::send(); }\n");
            write(root, "src/cluster/forward.rs", "//! x\nuse super::Cluster;\npub fn send() {}\n");
        }
        "foreign_reexports" => {
            write(root, "Cargo.toml", "[workspace]\nmembers = [\"state\"]\n");
            write(root, "state/Cargo.toml", "[package]\nname = \"leafraft-state\"\n");
            write(root, "src/lib.rs", "//! x\npub use leafraft_state::Request;\n");
        }
        "citations" => {
            let outside = crate::citations::OUTSIDE_DOCUMENT;
            write(root, "README.md", &format!("As {outside}.md says, and docs/api.md{}.\n", "#no-such-section"));
            write(root, "docs/api.md", "# The HTTP API\n\n## Error codes\n");
        }
        other => panic!("the check {other} has no planted violation: add one here"),
    }
}

/// A workspace in which the client links a crate named `axum` (path crates only: no registry).
fn plant_links(root: &Path) {
    let package = |name: &str, deps: &str| {
        format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n{deps}")
    };
    write(root, "Cargo.toml", "[workspace]\nmembers = [\"client\", \"axum\"]\nresolver = \"2\"\n");
    write(root, "client/Cargo.toml", &package("leafraft-client", "axum = { path = \"../axum\" }\n"));
    write(root, "client/src/lib.rs", "//! x\n");
    write(root, "axum/Cargo.toml", &package("axum", ""));
    write(root, "axum/src/lib.rs", "//! x\n");
}

fn run(check: &Check, root: &Path) -> crate::Scan {
    (check.run)(root)
}

#[test]
fn every_check_reads_enough_of_this_repository_and_finds_nothing_from_a_path_with_test_in_it() {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("the repository");
    let dir = checkout();
    let link = dir.path().join("test");
    std::os::unix::fs::symlink(&repository, &link).expect("a symlink to the repository");
    let mut failures = Vec::new();
    for check in CHECKS {
        let scan = run(check, &link);
        if scan.files < check.min_files || scan.lines < check.min_lines {
            failures.push(format!(
                "{}: read {} files / {} lines, less than {} / {}",
                check.name, scan.files, scan.lines, check.min_files, check.min_lines
            ));
        }
        failures.extend(scan.violations.iter().map(|v| format!("{}: {v}", check.name)));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_check_fails_on_its_planted_violation() {
    for check in CHECKS {
        let dir = checkout();
        plant(check.name, dir.path());
        let scan = run(check, dir.path());
        assert!(!scan.violations.is_empty(), "{} passed on its planted violation: {scan:?}", check.name);
    }
}

#[test]
fn the_planted_links_are_named() {
    let dir = checkout();
    plant_links(dir.path());
    let scan = crate::manifests::linked_crates(dir.path());
    assert!(scan.violations.iter().any(|v| v == "leafraft-client links axum"), "{:?}", scan.violations);
}

#[test]
fn test_code_is_told_apart_by_its_path_in_the_checkout() {
    assert!(crate::is_test_file("state/src/state_machine/tests.rs"));
    assert!(crate::is_test_file("tests/e2e/harness.rs"));
    assert!(!crate::is_test_file("state/src/state_machine.rs"));
    assert!(!crate::is_test_file("src/attestation.rs"));
}

#[test]
fn the_planted_parent_imported_back_is_named_and_a_known_parent_must_stay_known() {
    let dir = checkout();
    plant("parents_imported", dir.path());
    let scan = crate::imports::parents_imported_with(dir.path(), &[]);
    assert_eq!(
        scan.violations,
        ["src/lib.rs: crate::cluster::forward imports its parent back: crate::cluster::forward -> crate::cluster \
          (own code) -> crate::cluster::forward (move what both need out of the parent's own code)"]
    );
    // Listed, the same parent passes; a listed parent nobody imports back must leave the list.
    let known = ["src/lib.rs: crate::cluster"];
    assert_eq!(crate::imports::parents_imported_with(dir.path(), &known).violations, Vec::<String>::new());
    let stale = ["src/lib.rs: crate::cluster", "src/lib.rs: crate::api"];
    let scan = crate::imports::parents_imported_with(dir.path(), &stale);
    assert_eq!(
        scan.violations,
        ["src/lib.rs: crate::api: no child imports it back now: remove it from the list in xtask"]
    );
}

#[test]
fn the_planted_foreign_reexport_is_named_and_own_reexports_pass() {
    let dir = checkout();
    plant("foreign_reexports", dir.path());
    write(
        dir.path(),
        "state/src/lib.rs",
        "//! x\nmod request;\npub use request::Request;\npub(crate) use leafraft_state_helpers::X;\n",
    );
    let scan = crate::sources::foreign_reexports(dir.path());
    assert_eq!(
        scan.violations,
        ["src/lib.rs:2: re-exports the workspace crate leafraft_state: import it from there instead"]
    );
}

#[test]
fn a_crate_named_for_its_features_only_passes_until_the_service_uses_it() {
    let dir = checkout();
    let manifest = format!("{WORKSPACE}\n[dependencies]\nrand_chacha = \"0.3\"\n");
    write(dir.path(), "Cargo.toml", &manifest);
    write(dir.path(), "src/lib.rs", "//! x\n");
    assert_eq!(crate::manifests::service_links_no_tool(dir.path()).violations, Vec::<String>::new());
    write(dir.path(), "src/ids.rs", "//! x\nfn f() { rand_chacha::ChaCha8Rng::from_entropy(); }\n");
    let violations = crate::manifests::service_links_no_tool(dir.path()).violations;
    assert_eq!(violations, ["src/ids.rs: uses rand_chacha, which the service names for its features only"]);
    write(dir.path(), "src/ids.rs", "//! x\nuse rand_chacha as chacha;\n");
    let violations = crate::manifests::service_links_no_tool(dir.path()).violations;
    assert_eq!(violations, ["src/ids.rs: uses rand_chacha, which the service names for its features only"]);
}
