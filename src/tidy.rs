//! Repository hygiene checked as a test: every Rust source file opens with a `//!` doc line.

use std::path::Path;

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
    for dir in ["src", "raft/src", "storage/src", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let missing: Vec<_> = files
        .iter()
        .filter(|path| path.file_name().is_some_and(|name| name != "main.rs"))
        .filter(|path| !std::fs::read_to_string(path).unwrap_or_default().starts_with("//!"))
        .collect();
    assert!(missing.is_empty(), "files without a leading //! doc comment: {missing:?}");
}
