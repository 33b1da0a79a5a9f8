//! The module import graph of a crate, at full-path granularity, and the cycle check on it.
//!
//! A crate is read from its root file the way rustc finds modules (`mod a;` in `x.rs` is
//! `x/a.rs` or `x/a/mod.rs`, `#[path]` honoured, inline `mod a { .. }` blocks too). Every path a
//! module names in code or in a `use` tree (groups, `self`, `super::super`, aliases) that starts
//! with `crate`, `super`, `self`, a child module or a name a `use` brought in is resolved to the
//! module that holds it, through re-exports (`pub use`, globs) where the name is not defined.
//!
//! Modules compiled only for tests (`#[cfg(test)] mod tests;` and everything in them) are read
//! but their edges are not counted: a test reaches across the crate to build its inputs (a codec
//! test builds requests), which is no dependency of the code it tests.
//!
//! A module's own ancestors and descendants are containment, not dependency (`mod.rs` declares
//! its children and they see it through `super::`). Every other edge is lifted to the two
//! siblings under the common ancestor (`a::b::c -> a::d` is `a::b -> a::d`): at every level of
//! the tree the sibling modules must form a DAG. That is what "no import cycle" means here.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;

use crate::Scan;

/// A module path from the crate root: `[]` is the root, `["api", "openapi"]` is `api::openapi`.
pub type ModPath = Vec<String>;

/// What one module declares and names.
#[derive(Debug, Default)]
pub struct Module {
    /// Compiled only for tests (`#[cfg(test)]` on it or on an ancestor).
    test_only: bool,
    /// Names of items defined here (types, functions, constants, modules, macros).
    defined: BTreeSet<String>,
    /// Child modules (file or inline).
    children: BTreeSet<String>,
    /// Names brought in by `use`, each with its path as written (relative to this module).
    imports: BTreeMap<String, Vec<String>>,
    /// Paths of `use x::*` globs, as written.
    globs: Vec<Vec<String>>,
    /// Every path named in code or in a `use` tree, as written.
    paths: Vec<Vec<String>>,
}

/// The modules of one crate.
#[derive(Debug, Default)]
pub struct Crate {
    pub modules: BTreeMap<ModPath, Module>,
}

/// Reads the crate whose root file is `root`; `read` answers a file's text (`None`: no such file).
pub fn load_crate(root: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Crate {
    let mut krate = Crate::default();
    let dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
    if let Some(text) = read(root) {
        load_file(&mut krate, (Vec::new(), false), &text, &dir, read);
    }
    krate
}

/// Loads one file's module at `path`, whose child files live under `child_dir`.
fn load_file(
    krate: &mut Crate,
    at: (ModPath, bool),
    text: &str,
    child_dir: &Path,
    read: &dyn Fn(&Path) -> Option<String>,
) {
    let code = blank_comments_and_literals(text);
    load_block(krate, at, text, &code, child_dir, read);
}

/// Loads the module whose text (and blanked code, same offsets) is given, with its inline and
/// file children.
fn load_block(
    krate: &mut Crate,
    (path, test_only): (ModPath, bool),
    text: &str,
    code: &str,
    child_dir: &Path,
    read: &dyn Fn(&Path) -> Option<String>,
) {
    let mut own = String::with_capacity(code.len());
    let mut module = Module { test_only, ..Module::default() };
    let mut at = 0;
    while let Some((start, name, body)) = next_mod(code, at) {
        own.push_str(&code[at..start]);
        module.children.insert(name.clone());
        let mut child = path.clone();
        child.push(name.clone());
        let child = (child, test_only || attributes(&text[..start]).iter().any(|a| a == "#[cfg(test)]"));
        match body {
            ModBody::Inline(open, close) => {
                let (text, code) = (&text[open..close], &code[open..close]);
                load_block(krate, child, text, code, &child_dir.join(&name), read);
                at = close + 1;
            }
            ModBody::File(end) => {
                let explicit = attributes(&text[..start])
                    .iter()
                    .find_map(|a| Some(child_dir.join(a.strip_prefix("#[path = \"")?.strip_suffix("\"]")?)));
                let candidates = match explicit {
                    Some(file) => vec![file],
                    None => vec![child_dir.join(format!("{name}.rs")), child_dir.join(&name).join("mod.rs")],
                };
                for file in candidates {
                    if let Some(child_text) = read(&file) {
                        let grand_dir = match file.file_name().and_then(|n| n.to_str()) {
                            Some("mod.rs") => file.parent().map(Path::to_path_buf).unwrap_or_default(),
                            _ => child_dir.join(&name),
                        };
                        load_file(krate, child, &child_text, &grand_dir, read);
                        break;
                    }
                }
                at = end;
            }
        }
    }
    own.push_str(&code[at..]);
    scan_module(&own, &mut module);
    krate.modules.insert(path, module);
}

enum ModBody {
    /// `mod a { .. }`: the offsets just inside the braces.
    Inline(usize, usize),
    /// `mod a;`: the offset after the semicolon.
    File(usize),
}

/// The next `mod NAME;` or `mod NAME { .. }` at or after `from`: its start, name and body.
fn next_mod(code: &str, from: usize) -> Option<(usize, String, ModBody)> {
    let mut search = from;
    while let Some(found) = find_word(code, "mod", search) {
        search = found + 3;
        let rest = &code[found + 3..];
        let name: String = rest.trim_start().chars().take_while(|c| is_ident(*c)).collect();
        if name.is_empty() {
            continue;
        }
        let after_name = found + 3 + (rest.len() - rest.trim_start().len()) + name.len();
        let tail = code[after_name..].trim_start();
        let tail_at = code.len() - tail.len();
        if tail.starts_with(';') {
            return Some((found, name, ModBody::File(tail_at + 1)));
        }
        if tail.starts_with('{') {
            let close = matching_brace(code, tail_at)?;
            return Some((found, name, ModBody::Inline(tail_at + 1, close)));
        }
    }
    None
}

/// The attributes (`#[..]` lines) directly before an item that starts at the end of `before`.
fn attributes(before: &str) -> Vec<String> {
    let mut lines = before.split('\n').rev();
    let item_line = lines.next().unwrap_or_default().trim();
    if item_line.starts_with("#[") {
        return Vec::new();
    }
    lines.map(str::trim).take_while(|line| line.starts_with("#[")).map(str::to_string).collect()
}

/// The offset of the `}` matching the `{` at `open`.
fn matching_brace(code: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (offset, byte) in code.as_bytes()[open..].iter().enumerate() {
        match byte {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + offset);
                }
            }
            _ => {}
        }
    }
    None
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The next occurrence of `word` at or after `from` that is a whole identifier.
fn find_word(code: &str, word: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(found) = code.get(at..)?.find(word).map(|o| o + at) {
        let before = code[..found].chars().next_back();
        let after = code[found + word.len()..].chars().next();
        if !before.is_some_and(is_ident) && !after.is_some_and(is_ident) {
            return Some(found);
        }
        at = found + word.len();
    }
    None
}

/// `text` with comments, string and character literals replaced by spaces (offsets kept), so
/// that braces, `use` and `::` inside them are not read as code.
pub fn blank_comments_and_literals(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut out[from..to.min(bytes.len())] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    while i < bytes.len() {
        let end = match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => text[i..].find('\n').map_or(bytes.len(), |o| i + o),
            b'/' if bytes.get(i + 1) == Some(&b'*') => text[i + 2..].find("*/").map_or(bytes.len(), |o| i + 2 + o + 2),
            b'"' => string_end(bytes, i + 1),
            b'r' if raw_string_start(bytes, i).is_some() && !prev_is_ident(bytes, i) => {
                let (hashes, quote) = raw_string_start(bytes, i).unwrap_or((0, i));
                let closing = format!("\"{}", "#".repeat(hashes));
                text[quote + 1..].find(&closing).map_or(bytes.len(), |o| quote + 1 + o + closing.len())
            }
            b'\'' => char_literal_end(bytes, i).unwrap_or(i + 1),
            _ => i + 1,
        };
        if end > i + 1 || matches!(bytes[i], b'"') {
            blank(&mut out, i, end);
        }
        i = end.max(i + 1);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn prev_is_ident(bytes: &[u8], i: usize) -> bool {
    i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_')
}

/// For `r"` or `r#.."` at `i`: the number of hashes and the offset of the opening quote.
fn raw_string_start(bytes: &[u8], i: usize) -> Option<(usize, usize)> {
    let hashes = bytes[i + 1..].iter().take_while(|b| **b == b'#').count();
    (bytes.get(i + 1 + hashes) == Some(&b'"')).then_some((hashes, i + 1 + hashes))
}

/// The offset after the closing quote of a string whose contents start at `from`.
fn string_end(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The offset after a character literal at `i` (`None`: a lifetime or label).
fn char_literal_end(bytes: &[u8], i: usize) -> Option<usize> {
    if bytes.get(i + 1) == Some(&b'\\') {
        let close = bytes[i + 2..].iter().position(|b| *b == b'\'')?;
        return Some(i + 2 + close + 1);
    }
    let width = std::str::from_utf8(&bytes[i + 1..]).ok()?.chars().next()?.len_utf8();
    (bytes.get(i + 1 + width) == Some(&b'\'')).then_some(i + 2 + width)
}

/// Fills `module` from its own code (children's bodies removed): definitions, `use` trees and
/// the paths named in code.
fn scan_module(own: &str, module: &mut Module) {
    for keyword in ["struct", "enum", "fn", "trait", "type", "const", "static", "union", "macro_rules!"] {
        let mut at = 0;
        while let Some(found) = find_word(own, keyword.trim_end_matches('!'), at) {
            at = found + keyword.len();
            let rest = own[found..].strip_prefix(keyword).unwrap_or_default().trim_start();
            let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
            if !name.is_empty() {
                module.defined.insert(name);
            }
        }
    }
    let mut rest_code = String::with_capacity(own.len());
    let mut at = 0;
    while let Some(found) = find_word(own, "use", at) {
        let Some(semi) = own[found..].find(';').map(|o| found + o) else { break };
        rest_code.push_str(&own[at..found]);
        let mut leaves = Vec::new();
        use_tree(own[found + 3..semi].trim(), &[], &mut leaves);
        for (path, alias) in leaves {
            match alias.as_deref() {
                Some("*") => module.globs.push(path.clone()),
                Some("_") => {}
                Some(name) => {
                    module.imports.insert(name.to_string(), path.clone());
                }
                None => {}
            }
            module.paths.push(path);
        }
        at = semi + 1;
    }
    rest_code.push_str(&own[at..]);
    module.paths.extend(code_paths(&rest_code));
}

/// The leaves of a `use` tree (after `use`), each with the name it binds (`*` for a glob).
fn use_tree(tree: &str, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
    let tree = tree.trim().trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let mut base = prefix.to_vec();
        base.extend(segments(&tree[..open]));
        let inner = tree[open + 1..].trim_end().strip_suffix('}').unwrap_or(&tree[open + 1..]);
        for part in split_top_level(inner) {
            use_tree(part, &base, out);
        }
        return;
    }
    let (path_text, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path, Some(alias.trim().to_string())),
        None => (tree, None),
    };
    let mut path = prefix.to_vec();
    path.extend(segments(path_text));
    if path.last().is_some_and(|last| last == "self") {
        path.pop();
    }
    let bound = alias.or_else(|| path.last().cloned());
    if path.last().is_some_and(|last| last == "*") {
        path.pop();
        out.push((path, Some("*".to_string())));
    } else if !path.is_empty() {
        out.push((path, bound));
    }
}

fn segments(text: &str) -> Vec<String> {
    text.split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// `a, b::{c, d}, e` split at its top-level commas.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

/// Every `a::b(::c)*` path in code (generic arguments between segments are not followed).
fn code_paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if !(c.is_ascii_alphabetic() || c == '_') || prev_is_ident(bytes, i) || (i > 0 && bytes[i - 1] == b':') {
            i += 1;
            continue;
        }
        let mut path = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_') {
                j += 1;
            }
            path.push(code[start..j].to_string());
            if code[j..].starts_with("::") && code[j + 2..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                j += 2;
            } else {
                break;
            }
        }
        if path.len() > 1 {
            paths.push(path);
        }
        i = j.max(i + 1);
    }
    paths
}

impl Crate {
    /// The module a path written in module `from` leads to (`None`: outside this crate).
    fn resolve(&self, from: &ModPath, written: &[String], depth: usize) -> Option<ModPath> {
        if depth > 8 {
            return None;
        }
        let (mut base, rest) = self.anchor(from, written, depth)?;
        let mut rest = rest.to_vec();
        while let Some(next) = rest.first() {
            let mut child = base.clone();
            child.push(next.clone());
            if self.modules.contains_key(&child) {
                base = child;
                rest.remove(0);
                continue;
            }
            return Some(self.through_reexport(&base, next, depth).unwrap_or(base));
        }
        Some(base)
    }

    /// Where a written path starts: its anchor module and the segments after the anchor.
    fn anchor<'p>(&self, from: &ModPath, written: &'p [String], depth: usize) -> Option<(ModPath, &'p [String])> {
        let first = written.first()?;
        let module = self.modules.get(from)?;
        match first.as_str() {
            "crate" => Some((Vec::new(), &written[1..])),
            "self" => Some((from.clone(), &written[1..])),
            "super" => {
                let mut base = from.clone();
                let mut rest = written;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                Some((base, rest))
            }
            name if module.children.contains(name) => Some((from.clone(), written)),
            name => {
                let imported = module.imports.get(name)?;
                if imported.first() == Some(first) {
                    return None;
                }
                let target = self.resolve(from, imported, depth + 1)?;
                Some((target, &written[1..]))
            }
        }
    }

    /// The module `name`, not defined in `module`, comes from through a `use` there.
    fn through_reexport(&self, module: &ModPath, name: &str, depth: usize) -> Option<ModPath> {
        let entry = self.modules.get(module)?;
        if entry.defined.contains(name) {
            return None;
        }
        if let Some(path) = entry.imports.get(name) {
            return self.resolve(module, path, depth + 1);
        }
        entry.globs.iter().find_map(|glob| {
            let target = self.resolve(module, glob, depth + 1)?;
            let found = self.modules.get(&target)?;
            (found.defined.contains(name) || found.imports.contains_key(name) || found.children.contains(name))
                .then_some(target)
        })
    }

    /// The dependency edges between sibling modules (see the module docs), each with the file
    /// path that made it, for the message.
    pub fn sibling_edges(&self) -> BTreeMap<(ModPath, ModPath), ModPath> {
        let mut edges = BTreeMap::new();
        for (from, module) in self.modules.iter().filter(|(_, module)| !module.test_only) {
            for written in &module.paths {
                let Some(to) = self.resolve(from, written, 0) else { continue };
                if to.starts_with(from) || from.starts_with(&to) {
                    continue;
                }
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                let key = (from[..=common].to_vec(), to[..=common].to_vec());
                edges.entry(key).or_insert_with(|| from.clone());
            }
        }
        edges
    }
}

impl Crate {
    /// Every resolved (module, module it names) pair of code that is not test-only, with the
    /// written path's module for messages.
    fn named(&self) -> Vec<(ModPath, ModPath)> {
        let mut pairs = Vec::new();
        for (from, module) in self.modules.iter().filter(|(_, module)| !module.test_only) {
            for written in &module.paths {
                if let Some(to) = self.resolve(from, written, 0) {
                    pairs.push((from.clone(), to));
                }
            }
        }
        pairs
    }

    /// The import graph with each parent's own code as one more node beside its children
    /// ([`own_code`]): at every level, the children and the parent's own code, with the edges
    /// among them. An item a parent only re-exports (`pub use child::X`) is the child's, not
    /// the parent's.
    pub fn level_edges(&self) -> BTreeSet<(ModPath, ModPath)> {
        let mut edges = BTreeSet::new();
        for (from, to) in self.named() {
            if from == to {
                continue;
            }
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            let end = |path: &ModPath| if path.len() == common { own_code(path) } else { path[..=common].to_vec() };
            edges.insert((end(&from), end(&to)));
        }
        edges
    }
}

/// The node that stands for the own code of `module` (its file without its children) among its
/// children: `module` with the segment `(own code)` added.
pub fn own_code(module: &ModPath) -> ModPath {
    let mut node = module.clone();
    node.push(OWN_CODE.to_string());
    node
}

const OWN_CODE: &str = "(own code)";

/// The modules that import their parent back: a module (or anything under it) names an item
/// defined in its parent's own code, while that code, directly or through siblings, names the
/// module. Each as `child -> parent -> .. -> child`.
pub fn parents_imported_back(krate: &Crate) -> Vec<Vec<ModPath>> {
    let edges = krate.level_edges();
    let mut found = Vec::new();
    for (child, parent) in edges.iter().filter(|(_, to)| to.last().is_some_and(|last| last == OWN_CODE)) {
        if let Some(mut path) = path_between(&edges, parent, child) {
            path.insert(0, child.clone());
            found.push(path);
        }
    }
    found
}

/// A path from `from` to `to` in the graph of `edges` (both ends included), breadth first.
fn path_between(edges: &BTreeSet<(ModPath, ModPath)>, from: &ModPath, to: &ModPath) -> Option<Vec<ModPath>> {
    let mut came_from: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(node) = queue.pop_front() {
        if node == to {
            let mut path = vec![to.clone()];
            let mut at = to;
            while let Some(previous) = came_from.get(at) {
                path.push((*previous).clone());
                at = previous;
            }
            path.reverse();
            return Some(path);
        }
        for (_, next) in edges.range((node.clone(), Vec::new())..).take_while(|(f, _)| f == node) {
            if next != from && !came_from.contains_key(next) {
                came_from.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    None
}

/// The first cycle in the directed graph of `edges`, as the modules along it.
pub fn find_cycle(edges: &BTreeSet<(ModPath, ModPath)>) -> Option<Vec<ModPath>> {
    let mut graph: BTreeMap<&ModPath, Vec<&ModPath>> = BTreeMap::new();
    for (from, to) in edges {
        graph.entry(from).or_default().push(to);
    }
    fn visit<'g>(
        node: &'g ModPath,
        graph: &BTreeMap<&'g ModPath, Vec<&'g ModPath>>,
        path: &mut Vec<&'g ModPath>,
        done: &mut BTreeSet<&'g ModPath>,
    ) -> Option<Vec<ModPath>> {
        if let Some(at) = path.iter().position(|n| *n == node) {
            let mut cycle: Vec<ModPath> = path[at..].iter().map(|n| (*n).clone()).collect();
            cycle.push(node.clone());
            return Some(cycle);
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    let nodes: Vec<&ModPath> = graph.keys().copied().collect();
    nodes.into_iter().find_map(|node| visit(node, &graph, &mut Vec::new(), &mut done))
}

/// `crate::a::b` for messages (a parent's own code is `crate::a::b (own code)`).
pub fn display(path: &ModPath) -> String {
    let own = path.last().is_some_and(|last| last == OWN_CODE);
    let module = if own { &path[..path.len() - 1] } else { &path[..] };
    let name = std::iter::once("crate").chain(module.iter().map(String::as_str)).collect::<Vec<_>>().join("::");
    if own {
        format!("{name} {OWN_CODE}")
    } else {
        name
    }
}

/// The root files of every crate of the workspace (libraries, binaries, integration tests,
/// benches, examples) under `root`: the root package and every member its `Cargo.toml` lists.
pub fn workspace_crate_roots(root: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for package in std::iter::once(String::new()).chain(crate::workspace_members(root)) {
        let dir = root.join(package);
        for file in ["src/lib.rs", "src/main.rs"] {
            roots.push(dir.join(file));
        }
        for targets in ["src/bin", "tests", "benches", "examples"] {
            let Ok(entries) = std::fs::read_dir(dir.join(targets)) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    roots.push(path.join("main.rs"));
                } else if path.extension().is_some_and(|ext| ext == "rs") {
                    roots.push(path);
                }
            }
        }
    }
    roots.retain(|path| path.exists());
    roots.sort();
    roots
}

/// No crate of the workspace (libraries, binaries, integration tests, benches, examples) has an
/// import cycle among its modules at full-path granularity: at every level of every module tree
/// the siblings form a DAG.
pub fn import_cycles(root: &Path) -> Scan {
    let mut violations = Vec::new();
    let mut scan = scan_crates(root, |rel, krate| {
        let edges: BTreeSet<_> = krate.sibling_edges().into_keys().collect();
        if let Some(cycle) = find_cycle(&edges) {
            let path: Vec<String> = cycle.iter().map(display).collect();
            violations.push(format!(
                "{rel}: import cycle {} (move what both sides need into a module of its own)",
                path.join(" -> ")
            ));
        }
    });
    scan.violations = violations;
    scan
}

/// Loads every crate of the workspace, counting what it reads, and hands each to `visit` with
/// its root file's path relative to `root`.
fn scan_crates(root: &Path, mut visit: impl FnMut(&str, &Crate)) -> Scan {
    let scan = std::cell::RefCell::new(Scan::default());
    for crate_root in workspace_crate_roots(root) {
        let read = |path: &Path| {
            let text = std::fs::read_to_string(path).ok()?;
            scan.borrow_mut().read(&text);
            Some(text)
        };
        let krate = load_crate(&crate_root, &read);
        visit(&crate::relative(root, &crate_root), &krate);
    }
    scan.into_inner()
}

/// The parents whose children still import them back, as `crate root file: module`, when this
/// check came: this list may only shrink. The service's root, `cluster` and `monotonic` are not
/// on it.
const PARENTS_IMPORTED_BACK: [&str; 21] = [
    "benches/claims.rs: crate::fixtures",
    "raft/src/lib.rs: crate",
    "raft/src/lib.rs: crate::network",
    "src/lib.rs: crate::api",
    "src/lib.rs: crate::api::connections",
    "src/lib.rs: crate::api::status",
    "src/lib.rs: crate::api::tls",
    "src/lib.rs: crate::cli",
    "src/lib.rs: crate::cli::args",
    "src/lib.rs: crate::cli::commands",
    "src/lib.rs: crate::config",
    "src/lib.rs: crate::metrics",
    "src/lib.rs: crate::node::bootstrap",
    "src/lib.rs: crate::offline::recover",
    "src/lib.rs: crate::services::segments",
    "state/src/lib.rs: crate",
    "storage/src/lib.rs: crate",
    "tests/cluster/main.rs: crate::fixtures",
    "tools/src/bin/leafraft-chaos/main.rs: crate::checker",
    "tools/src/bin/leafraft-chaos/main.rs: crate::faults",
    "xtask/src/lib.rs: crate",
];

/// No module of any crate of the workspace imports its parent back (see
/// [`parents_imported_back`]): a parent's own code and its children form a DAG too, so a walk
/// down the tree never has to climb back into a file it came through. The parents listed in
/// [`PARENTS_IMPORTED_BACK`] are known; a parent that leaves the list must not return.
pub fn parents_imported(root: &Path) -> Scan {
    parents_imported_with(root, &PARENTS_IMPORTED_BACK)
}

/// [`parents_imported`] with `known` as the list of parents still imported back.
pub fn parents_imported_with(root: &Path, known: &[&str]) -> Scan {
    let mut violations = Vec::new();
    let mut parents = BTreeSet::new();
    let mut scan = scan_crates(root, |rel, krate| {
        for path in parents_imported_back(krate) {
            let parent = &path[1][..path[1].len() - 1];
            let key = format!("{rel}: {}", display(&parent.to_vec()));
            if !known.contains(&key.as_str()) {
                let shown: Vec<String> = path.iter().map(display).collect();
                violations.push(format!(
                    "{rel}: {} imports its parent back: {} (move what both need out of the parent's own code)",
                    shown[0],
                    shown.join(" -> ")
                ));
            }
            parents.insert(key);
        }
    });
    for gone in known.iter().filter(|key| !parents.contains(**key)) {
        violations.push(format!("{gone}: no child imports it back now: remove it from the list in xtask"));
    }
    scan.violations = violations;
    scan
}

#[cfg(test)]
mod tests;
