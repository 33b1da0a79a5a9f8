//! The documents that list the codes list exactly these: `docs/api.md`'s table is the rendered
//! one, and the Java, Go and Python clients name every code.

use std::collections::BTreeSet;
use std::path::Path;

use super::*;

fn repo_file(path: &str) -> String {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

#[test]
fn names_are_unique_and_spelled_as_the_wire_spells_them() {
    let names: BTreeSet<&str> = ALL.iter().map(|code| code.name).collect();
    assert_eq!(names.len(), ALL.len());
    for code in ALL {
        assert!(code.name.chars().all(|c| c.is_ascii_uppercase() || c == '_'), "{}", code.name);
        assert!([400, 401, 403, 404, 409, 503].contains(&code.status), "{}: {}", code.name, code.status);
        assert_eq!(find(code.name), Some(code));
    }
    assert_eq!(find("SOMETHING_NEW"), None);
}

#[test]
fn docs_api_md_holds_the_rendered_table() {
    let api = repo_file("docs/api.md");
    let section = api.split("\n## Error codes\n").nth(1).expect("docs/api.md has a section `## Error codes`");
    let section = section.split("\n## ").next().unwrap_or_default();
    assert!(
        section.contains(&markdown_table()),
        "docs/api.md#error-codes differs from leafraft-codes; replace its table with:\n{}",
        markdown_table()
    );
}

#[test]
fn the_other_language_clients_name_every_code() {
    for path in [
        "clients/java/src/main/java/io/leafraft/client/ErrorCode.java",
        "clients/go/leafraft/errors.go",
        "clients/python/leafraft/errors.py",
    ] {
        let text = repo_file(path);
        let missing: Vec<&str> = ALL.iter().map(|code| code.name).filter(|name| !text.contains(name)).collect();
        assert!(missing.is_empty(), "{path} lacks {missing:?}");
    }
}
