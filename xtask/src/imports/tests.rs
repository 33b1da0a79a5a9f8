//! The import-graph check on synthetic crates: it sees cycles through every way Rust names a
//! module (the check fails on a planted cycle), and stays quiet on
//! containment and on text that only looks like a path.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;

use super::display;
use super::find_cycle;
use super::load_crate;
use super::parents_imported_back;
use super::Crate;

/// A crate from `(file, text)` pairs, rooted at `lib.rs`.
fn synthetic(files: &[(&str, &str)]) -> Crate {
    let files: BTreeMap<PathBuf, String> =
        files.iter().map(|(path, text)| (Path::new("/c").join(path), text.to_string())).collect();
    load_crate(Path::new("/c/lib.rs"), &|path: &Path| files.get(path).cloned())
}

/// The cycle the check reports, as `a -> b -> a`, or `None`.
fn cycle(files: &[(&str, &str)]) -> Option<String> {
    let krate = synthetic(files);
    let edges: BTreeSet<_> = krate.sibling_edges().into_keys().collect();
    find_cycle(&edges).map(|cycle| cycle.iter().map(display).collect::<Vec<_>>().join(" -> "))
}

#[test]
fn a_planted_cycle_between_siblings_fails_the_check() {
    let found = cycle(&[
        ("lib.rs", "mod request;\nmod state_machine;\n"),
        ("request.rs", "use crate::state_machine::Tag;\npub struct Request;\n"),
        ("state_machine.rs", "pub struct Tag;\nfn apply(r: crate::request::Request) {}\n"),
    ]);
    assert_eq!(found.as_deref(), Some("crate::request -> crate::state_machine -> crate::request"));
}

#[test]
fn a_cycle_through_super_groups_and_nested_children_is_lifted_to_the_siblings() {
    // cluster::leader::batch -> cluster::sequencer (a `super::super` group), sequencer -> leader
    // through a re-export in leader's mod.rs: the siblings leader and sequencer form the cycle.
    let found = cycle(&[
        ("lib.rs", "pub mod cluster;\n"),
        ("cluster/mod.rs", "mod leader;\nmod sequencer;\npub use leader::Leader;\n"),
        ("cluster/leader/mod.rs", "mod batch;\npub use batch::Leader;\n"),
        ("cluster/leader/batch.rs", "use super::super::{sequencer::{self, Range}};\npub struct Leader;\n"),
        ("cluster/sequencer.rs", "pub struct Range;\nfn f() -> crate::cluster::Leader { todo!() }\n"),
    ]);
    assert_eq!(found.as_deref(), Some("crate::cluster::leader -> crate::cluster::sequencer -> crate::cluster::leader"));
}

#[test]
fn a_cycle_through_an_alias_and_a_glob_re_export_is_seen() {
    let found = cycle(&[
        ("lib.rs", "mod api;\nmod handlers;\n"),
        ("api.rs", "pub use self::docs::*;\nmod docs { pub struct Health; fn f() { crate::handlers::healthz(); } }\n"),
        ("handlers.rs", "use crate::api as web;\npub fn healthz() -> web::Health { todo!() }\n"),
    ]);
    assert_eq!(found.as_deref(), Some("crate::api -> crate::handlers -> crate::api"));
}

#[test]
fn containment_literals_comments_and_other_crates_are_no_edges() {
    let found = cycle(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        // a's child sees a through `super`, a sees its child: containment.
        ("a.rs", "mod inner;\npub struct A;\nfn f() { inner::g(); }\n"),
        ("a/inner.rs", "use super::A;\npub fn g() {}\n#[cfg(test)]\nmod tests { use super::super::A; }\n"),
        // b names a for real; a names b only in a comment, a string and another crate's path.
        (
            "b.rs",
            "use crate::a::A;\n// crate::b::x\nconst S: &str = \"crate::b::B {\";\nfn g() { other::b::f(); let c = '{'; }\n",
        ),
    ]);
    assert_eq!(found, None);
    let edges: Vec<String> = synthetic(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "// crate::b::B\nconst T: &str = \"crate::b::B\";\n"),
        ("b.rs", "use crate::a;\nfn f<'a>(x: &'a str) { a::nothing(); }\n"),
    ])
    .sibling_edges()
    .into_keys()
    .map(|(from, to)| format!("{} -> {}", display(&from), display(&to)))
    .collect();
    assert_eq!(edges, ["crate::b -> crate::a"]);
}

#[test]
fn path_attributes_and_mod_rs_children_are_followed() {
    let found = cycle(&[
        ("lib.rs", "#[path = \"elsewhere/x.rs\"]\nmod x;\nmod y;\n"),
        ("elsewhere/x.rs", "fn f() { crate::y::g(); }\npub fn h() {}\n"),
        ("y/mod.rs", "mod z;\npub fn g() {}\n"),
        ("y/z.rs", "fn f() { crate::x::h(); }\n"),
    ]);
    assert_eq!(found.as_deref(), Some("crate::x -> crate::y -> crate::x"));
}

/// Every module that imports its parent back, as the check reports the way round.
fn parents_back(files: &[(&str, &str)]) -> Vec<String> {
    parents_imported_back(&synthetic(files))
        .iter()
        .map(|path| path.iter().map(display).collect::<Vec<_>>().join(" -> "))
        .collect()
}

#[test]
fn a_planted_child_that_imports_its_parent_back_fails_the_check() {
    let found = parents_back(&[
        ("lib.rs", "mod cluster;\n"),
        ("cluster.rs", "mod forward;\npub struct Cluster;\nfn f() { forward::send(); }\n"),
        ("cluster/forward.rs", "use super::Cluster;\npub fn send() {}\n"),
    ]);
    assert_eq!(found, ["crate::cluster::forward -> crate::cluster (own code) -> crate::cluster::forward"],);
}

#[test]
fn a_parent_that_reaches_its_child_through_a_sibling_is_seen_from_a_grandchild() {
    // cluster's own code names retry, retry names forward, forward::http names cluster's own code.
    let found = parents_back(&[
        ("lib.rs", "mod cluster;\n"),
        ("cluster/mod.rs", "mod forward;\nmod retry;\npub struct Cluster;\nfn f() { retry::again(); }\n"),
        ("cluster/retry.rs", "pub fn again() { super::forward::send(); }\n"),
        ("cluster/forward.rs", "mod http;\npub fn send() {}\n"),
        ("cluster/forward/http.rs", "fn f(_: crate::cluster::Cluster) {}\n"),
    ]);
    assert_eq!(
        found,
        ["crate::cluster::forward -> crate::cluster (own code) -> crate::cluster::retry -> crate::cluster::forward"],
    );
}

#[test]
fn a_parent_that_only_declares_and_re_exports_its_children_is_not_imported_back() {
    // The handle lives in a child; the parent re-exports it; a sibling names it through the
    // parent's path: that is an edge between siblings, and the parent's own code names nobody.
    let found = parents_back(&[
        ("lib.rs", "mod cluster;\n"),
        ("cluster.rs", "mod handle;\nmod leader;\npub use handle::Cluster;\n"),
        ("cluster/handle.rs", "pub struct Cluster;\n"),
        ("cluster/leader.rs", "use crate::cluster::Cluster;\nimpl Cluster { fn lead(&self) {} }\n"),
    ]);
    assert_eq!(found, Vec::<String>::new());
    // A child may use its parent's own items when the parent names none of the child's.
    let found = parents_back(&[
        ("lib.rs", "mod api;\n"),
        ("api.rs", "mod tags;\npub struct AppState;\n"),
        ("api/tags.rs", "use super::AppState;\nfn f(_: AppState) {}\n"),
    ]);
    assert_eq!(found, Vec::<String>::new());
}
