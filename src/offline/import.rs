//! `leafraft tag import FILE`: moves a Leaf deployment's `leaf_alloc` table over.
//!
//! FILE is the tab-separated output of `SELECT biz_tag, max_id, step, description FROM leaf_alloc`
//! (`mysql -B`, with or without the header line, or `SELECT ... INTO OUTFILE`). Leaf's `max_id`
//! means what leafraft's means (the first ID of the next segment), so it is copied as it is.
//!
//! The work is split in three steps, the first two pure and unit-tested:
//! 1. [`parse`] checks every row (tag name, `max_id` in `1..=2^63-1`, step in `1..=10,000,000`,
//!    description length, no tag twice) and reports every bad row with its line number;
//! 2. [`plan`] compares the rows with the cluster's tags (read through the leader) and decides,
//!    per tag: create, raise `max_id` and/or update step and description, or leave unchanged. A
//!    row whose `max_id` is below the cluster's is a bad row too: `max_id` is never lowered, and
//!    a file that is older than the cluster is refused as a whole rather than half-applied;
//! 3. [`apply`] sends the changed tags in batches of up to 500 (`POST /v1/import/tags`), each one
//!    Raft entry that applies all of its tags or none.
//!
//! If any row is bad in step 1 or 2, nothing is applied. Step 3 is not one transaction (each
//! batch is its own Raft write), but every batch is idempotent (`max_id` is only raised): running
//! the import again after a failure finishes the job, and a finished import run again changes
//! nothing. 100,000 tags take about 250 Raft writes instead of 100,000.
//!
//! Description: a missing fourth column, `NULL` (`mysql -B`) and `\N` (`INTO OUTFILE`) mean "no
//! description": a new tag gets an empty one and an existing tag keeps its own. MySQL's
//! backslash escapes (`\t`, `\n`, `\\`, `\0`, ...) are undone.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use leafraft_client::Client;
use leafraft_client::ClientError;
use leafraft_client::ImportTag;
use leafraft_client::Tag;

/// One good row of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// 1-based line number in the file.
    pub line: usize,
    pub tag: String,
    pub max_id: u64,
    pub step: u64,
    /// `None`: the file says nothing (column missing or NULL).
    pub description: Option<String>,
}

/// A bad row: its line number and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The columns of the header line, when the file has one.
const HEADER: [&str; 4] = ["biz_tag", "max_id", "step", "description"];

/// Parses and checks every row; answers all good rows, or every bad one.
pub fn parse(text: &str) -> Result<Vec<Row>, Vec<RowError>> {
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    let mut first_line_of: HashMap<String, usize> = HashMap::new();
    let mut seen_content = false;
    for (index, raw) in text.split('\n').enumerate() {
        let line = index + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        if raw.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = raw.split('\t').collect();
        if !seen_content {
            seen_content = true;
            if fields[0].trim().eq_ignore_ascii_case(HEADER[0]) {
                let names: Vec<String> = fields.iter().map(|f| f.trim().to_ascii_lowercase()).collect();
                if names.len() < 3 || names.len() > 4 || names.iter().zip(HEADER).any(|(got, want)| got != want) {
                    errors.push(RowError {
                        line,
                        message: format!("the header must be '{}' (description optional)", HEADER.join("<TAB>")),
                    });
                }
                continue;
            }
        }
        match parse_row(line, &fields) {
            Ok(row) => match first_line_of.get(&row.tag) {
                Some(first) => errors
                    .push(RowError { line, message: format!("tag '{}' already appears on line {first}", row.tag) }),
                None => {
                    first_line_of.insert(row.tag.clone(), line);
                    rows.push(row);
                }
            },
            Err(message) => errors.push(RowError { line, message }),
        }
    }
    if errors.is_empty() {
        Ok(rows)
    } else {
        Err(errors)
    }
}

fn parse_row(line: usize, fields: &[&str]) -> Result<Row, String> {
    if fields.len() < 3 || fields.len() > 4 {
        return Err(format!(
            "expected 3 or 4 tab-separated columns (biz_tag, max_id, step, description), found {}",
            fields.len()
        ));
    }
    let tag = fields[0].trim();
    leafraft_state::tag::validate_tag(tag)?;
    let max_id = number("max_id", fields[1], leafraft_state::tag::MAX_ID_LIMIT)?;
    let step = number("step", fields[2], leafraft_state::tag::MAX_STEP)?;
    let description = match fields.get(3) {
        None => None,
        Some(field) if is_null(field) => None,
        Some(field) => Some(unescape(field)),
    };
    if let Some(description) = &description {
        leafraft_state::tag::validate_description(description)?;
    }
    Ok(Row { line, tag: tag.to_string(), max_id, step, description })
}

fn is_null(field: &str) -> bool {
    field == "NULL" || field == "\\N"
}

/// A decimal integer in `1..=max`, reported as written when it is not.
fn number(name: &str, field: &str, max: u64) -> Result<u64, String> {
    let text = field.trim();
    if is_null(text) {
        return Err(format!("{name} is NULL"));
    }
    let value: i128 = text.parse().map_err(|_| format!("{name} '{}' is not an integer", text.escape_debug()))?;
    u64::try_from(value)
        .ok()
        .filter(|value| (1..=max).contains(value))
        .ok_or_else(|| format!("{name} must be between 1 and {max}, got {text}"))
}

/// Undoes MySQL's backslash escapes (`mysql -B` and `SELECT ... INTO OUTFILE`).
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('Z') => out.push('\u{1a}'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// A tag as the cluster has it, for [`plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    pub max_id: u64,
    pub step: u64,
    pub description: String,
}

impl Existing {
    /// The replicated fields of an API answer.
    pub fn from_view(view: &Tag) -> Existing {
        Existing { max_id: view.max_id, step: view.step, description: view.description.clone() }
    }
}

/// What importing one row does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new tag with the row's values.
    Create(Row),
    /// An existing tag gets a higher `max_id` and/or a new step or description (`Some`: changes).
    Update { row: Row, max_id: Option<(u64, u64)>, step: Option<(u64, u64)>, description: Option<(String, String)> },
    /// The cluster already has what the row says.
    Unchanged(Row),
}

impl Change {
    pub fn row(&self) -> &Row {
        match self {
            Change::Create(row) | Change::Unchanged(row) | Change::Update { row, .. } => row,
        }
    }

    /// `create`, `raise` (max_id goes up), `update` (only step or description) or `unchanged`.
    pub fn kind(&self) -> &'static str {
        match self {
            Change::Create(_) => "create",
            Change::Update { max_id: Some(_), .. } => "raise",
            Change::Update { .. } => "update",
            Change::Unchanged(_) => "unchanged",
        }
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let row = self.row();
        write!(f, "{:<9} {}", self.kind(), row.tag)?;
        match self {
            Change::Create(row) => {
                write!(f, ": max_id {}, step {}", row.max_id, row.step)?;
                if let Some(description) = row.description.as_deref().filter(|d| !d.is_empty()) {
                    write!(f, ", description {description:?}")?;
                }
            }
            Change::Update { max_id, step, description, .. } => {
                let mut parts = Vec::new();
                if let Some((from, to)) = max_id {
                    parts.push(format!("max_id {from} -> {to}"));
                }
                if let Some((from, to)) = step {
                    parts.push(format!("step {from} -> {to}"));
                }
                if let Some((from, to)) = description {
                    parts.push(format!("description {from:?} -> {to:?}"));
                }
                write!(f, ": {}", parts.join(", "))?;
            }
            Change::Unchanged(_) => {}
        }
        Ok(())
    }
}

/// Decides what each row does to the cluster's tags; a row that would lower a tag's `max_id`
/// is a bad row (`max_id` is never lowered), and then nothing may be applied.
pub fn plan(rows: &[Row], existing: &BTreeMap<String, Existing>) -> Result<Vec<Change>, Vec<RowError>> {
    let mut changes = Vec::with_capacity(rows.len());
    let mut errors = Vec::new();
    for row in rows {
        let Some(current) = existing.get(&row.tag) else {
            changes.push(Change::Create(row.clone()));
            continue;
        };
        if row.max_id < current.max_id {
            errors.push(RowError {
                line: row.line,
                message: format!(
                    "tag '{}': max_id {} is below the cluster's {}; max_id is never lowered",
                    row.tag, row.max_id, current.max_id
                ),
            });
            continue;
        }
        let max_id = (row.max_id > current.max_id).then_some((current.max_id, row.max_id));
        let step = (row.step != current.step).then_some((current.step, row.step));
        let description = row
            .description
            .as_ref()
            .filter(|d| **d != current.description)
            .map(|d| (current.description.clone(), d.clone()));
        if max_id.is_none() && step.is_none() && description.is_none() {
            changes.push(Change::Unchanged(row.clone()));
        } else {
            changes.push(Change::Update { row: row.clone(), max_id, step, description });
        }
    }
    if errors.is_empty() {
        Ok(changes)
    } else {
        Err(errors)
    }
}

/// How many changes of each kind a plan holds, as one line.
pub fn summary(changes: &[Change]) -> String {
    let count = |kind: &str| changes.iter().filter(|c| c.kind() == kind).count();
    format!(
        "{} create, {} raise, {} update, {} unchanged",
        count("create"),
        count("raise"),
        count("update"),
        count("unchanged")
    )
}

/// The most tags one import request carries, and a bound on its encoded size (the server's is
/// 48 KiB per Raft entry): a row costs its tag, its description and about 40 bytes more.
const BATCH_ROWS: usize = 500;
const BATCH_BYTES: usize = 40 << 10;

/// Sends the changed tags in batches (`POST /v1/import/tags`, one Raft entry each, all of a batch
/// or none of it), in file order, and tells `on_done` about every row (unchanged rows send
/// nothing and are `Ok`); answers how many rows failed.
pub async fn apply(
    client: &Client,
    changes: &[Change],
    mut on_done: impl FnMut(&Change, &Result<(), ClientError>),
) -> usize {
    // Batches in file order, each within BATCH_ROWS and BATCH_BYTES; unchanged rows send nothing.
    let mut batches: Vec<Vec<&Change>> = Vec::new();
    let mut bytes = 0;
    for change in changes {
        if let Change::Unchanged(_) = change {
            on_done(change, &Ok(()));
            continue;
        }
        let row = change.row();
        let cost = row.tag.len() + row.description.as_ref().map_or(0, String::len) + 48;
        match batches.last_mut() {
            Some(batch) if batch.len() < BATCH_ROWS && bytes + cost <= BATCH_BYTES => batch.push(change),
            _ => {
                batches.push(vec![change]);
                bytes = 0;
            }
        }
        bytes += cost;
    }
    let mut failures = 0;
    for batch in batches {
        let result = send(client, &batch).await;
        for change in batch {
            on_done(change, &result);
            failures += usize::from(result.is_err());
        }
    }
    failures
}

async fn send(client: &Client, batch: &[&Change]) -> Result<(), ClientError> {
    let rows: Vec<ImportTag> = batch.iter().map(|change| import_row(change.row())).collect();
    client.import_tags(&rows).await.map(|_| ())
}

/// What a row asks of the cluster: its tag at `max_id` at least, its step, and its description
/// when the file gives one (the plan refused rows that would lower `max_id`).
fn import_row(row: &Row) -> ImportTag {
    ImportTag { tag: row.tag.clone(), max_id: row.max_id, step: row.step, description: row.description.clone() }
}

/// `leafraft tag import FILE [--dry-run]`: prints one line per row (what it does, or would do
/// with `dry_run`) and a summary on stdout, bad rows on stderr; answers the one-line error.
pub async fn run(client: &Client, file: &Path, dry_run: bool) -> Result<(), String> {
    let name = file.display();
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {name}: {e}"))?;
    let bad_rows = |errors: Vec<RowError>| {
        for error in &errors {
            eprintln!("{error}");
        }
        format!("{name}: {} bad row(s); nothing applied", errors.len())
    };
    let rows = parse(&text).map_err(bad_rows)?;
    if rows.is_empty() {
        return Err(format!("{name} holds no rows; nothing applied"));
    }
    let tags = client.list_tags_consistent().await.map_err(|e| format!("cannot read the cluster's tags: {e}"))?;
    let existing: BTreeMap<String, Existing> =
        tags.iter().map(|view| (view.tag.clone(), Existing::from_view(view))).collect();
    let changes = plan(&rows, &existing).map_err(bad_rows)?;
    if dry_run {
        for change in &changes {
            println!("{change}");
        }
        println!("dry run, nothing changed: {}", summary(&changes));
        return Ok(());
    }
    let failures = apply(client, &changes, |change, result| match result {
        Ok(()) => println!("{change}"),
        Err(e) => eprintln!("line {}: tag '{}' not imported: {e}", change.row().line, change.row().tag),
    })
    .await;
    if failures > 0 {
        return Err(format!(
            "{failures} of {} row(s) failed (see above); the others were applied, and importing the file again \
             finishes the job",
            changes.len()
        ));
    }
    println!("imported: {}", summary(&changes));
    Ok(())
}

#[cfg(test)]
mod tests;
