//! `leafraft tag create|list|get|update|import`.

use std::process::ExitCode;

use leafraft_client::Client;
use leafraft_client::NewTag;
use leafraft_client::Tag;
use leafraft_client::TagUpdate;

use super::print_json;
use super::Failure;
use super::Outcome;
use crate::cli::table::Align;
use crate::cli::table::Table;
use crate::cli::TagCommand;

pub async fn run(client: &Client, command: TagCommand) -> Outcome {
    match command {
        TagCommand::Create(fields) => {
            let tag = NewTag {
                tag: fields.name,
                max_id: fields.max_id,
                step: fields.step,
                description: fields.description,
                mode: fields.mode,
                scramble: fields.scramble.then_some(true),
                scramble_bits: fields.scramble_bits,
            };
            print_json(&client.create_tag(&tag).await?)
        }
        TagCommand::List { json: true } => print_json(&serde_json::json!({ "tags": client.list_tags().await? })),
        TagCommand::List { json: false } => {
            print!("{}", table(&client.list_tags().await?));
            Ok(ExitCode::SUCCESS)
        }
        TagCommand::Get { name } => print_json(&client.get_tag(&name).await?),
        TagCommand::Update(fields) => {
            let update = TagUpdate {
                step: fields.step,
                description: fields.description,
                max_id: fields.max_id,
                mode: fields.mode,
            };
            if fields.scramble || fields.scramble_bits.is_some() {
                return Err(Failure::Usage("--scramble is set at creation only; a tag never changes it".into()));
            }
            if update.is_empty() {
                return Err(Failure::Usage(
                    "tag update needs at least one of --step, --max-id, --description, --mode".into(),
                ));
            }
            print_json(&client.update_tag(&fields.name, &update).await?)
        }
        TagCommand::Import { file, dry_run } => {
            crate::offline::import::run(client, &file, dry_run).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// One line per tag: what the cluster holds, then what the answering node serves of it.
pub fn table(tags: &[Tag]) -> String {
    let mut table = Table::new(&[
        ("TAG", Align::Left),
        ("MODE", Align::Left),
        ("MAX_ID", Align::Right),
        ("STEP", Align::Right),
        ("THIS NODE", Align::Left),
        ("ISSUED HERE", Align::Right),
        ("DESCRIPTION", Align::Left),
    ]);
    for tag in tags {
        let mode = if tag.mode.is_empty() { "segment" } else { tag.mode.as_str() };
        let (here, issued) = match (&tag.buffers, mode) {
            (Some(b), _) => (buffers(b), b.ids_issued.to_string()),
            (None, "monotonic") => ("served by the leader's sequencer".to_string(), "-".to_string()),
            (None, _) => ("no buffers yet (loaded on the first request)".to_string(), "0".to_string()),
        };
        table.row(vec![
            tag.tag.clone(),
            mode.to_string(),
            tag.max_id.to_string(),
            tag.step.to_string(),
            here,
            issued,
            tag.description.clone(),
        ]);
    }
    table.render()
}

/// The current range and where its cursor is, and the next range when one is loaded.
fn buffers(b: &leafraft_client::views::Buffers) -> String {
    let current = match (b.current, b.cursor) {
        (Some(r), Some(cursor)) => format!("[{}, {}) at {cursor}", r.start, r.end),
        (Some(r), None) => format!("[{}, {})", r.start, r.end),
        (None, _) => "no current range".to_string(),
    };
    match (b.next, b.loading) {
        (Some(next), _) => format!("{current}, next [{}, {})", next.start, next.end),
        (None, true) => format!("{current}, next loading"),
        (None, false) => current,
    }
}
