//! The repository owns its contract: code and documents cite `docs/` (`docs/api.md#error-codes`),
//! never a specification or an issue tracker outside the repository, and every
//! `docs/<name>.md#<anchor>` they cite names a heading that exists.

use std::collections::BTreeSet;
use std::path::Path;

use crate::Scan;

/// The name of the specification that lived outside the repository (spelled in two halves so that
/// this file does not cite it).
pub const OUTSIDE_DOCUMENT: &str = concat!("SP", "EC");

/// Where an outside citation may stay: the change log tells history.
const HISTORY: &str = "CHANGELOG.md";

pub fn citations(root: &Path) -> Scan {
    let mut scan = Scan::default();
    let mut files = Vec::new();
    crate::walk(root, root, &|path| path.extension().is_some_and(|ext| ext == "rs" || ext == "md"), &mut files);
    files.sort();
    for (rel, text) in &files {
        scan.read(text);
        if rel == HISTORY {
            continue;
        }
        for (number, line) in text.lines().enumerate() {
            if line.contains(OUTSIDE_DOCUMENT) || cites_an_issue(line) {
                scan.violations.push(format!("{rel}:{}: cites outside the repository: {}", number + 1, line.trim()));
            }
            for anchor in cited_anchors(line) {
                if !anchor_exists(root, &anchor) {
                    scan.violations.push(format!("{rel}:{}: {anchor} names no heading", number + 1));
                }
            }
        }
    }
    scan
}

/// `issue N` (a tracker's number).
fn cites_an_issue(line: &str) -> bool {
    line.match_indices("issue ").any(|(at, _)| line[at + 6..].starts_with(|c: char| c.is_ascii_digit()))
}

/// Every `docs/<name>.md#<anchor>` in `line`.
fn cited_anchors(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in line.match_indices("docs/") {
        let rest = &line[at..];
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || "/._#-".contains(c))).unwrap_or(rest.len());
        let cited = rest[..end].trim_end_matches('.');
        if cited.contains(".md#") {
            found.push(cited.to_string());
        }
    }
    found
}

/// Whether `docs/<name>.md#<anchor>` names a heading of that file (GitHub's anchor of its text).
fn anchor_exists(root: &Path, cited: &str) -> bool {
    let Some((file, anchor)) = cited.split_once('#') else { return false };
    let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
    let anchors: BTreeSet<String> = text
        .lines()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|heading| github_anchor(heading.trim_start_matches('#')))
        .collect();
    anchors.contains(anchor)
}

/// The anchor GitHub gives a heading: lower case, spaces to `-`, punctuation other than `-` and
/// `_` dropped.
fn github_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}
