//! `leafraft tag create|list|get|update|import`.

use std::process::ExitCode;

use leafraft_client::Client;
use leafraft_client::NewTag;
use leafraft_client::TagUpdate;

use super::print_json;
use super::Failure;
use super::Outcome;
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
            };
            print_json(&client.create_tag(&tag).await?)
        }
        TagCommand::List => print_json(&serde_json::json!({ "tags": client.list_tags().await? })),
        TagCommand::Get { name } => print_json(&client.get_tag(&name).await?),
        TagCommand::Update(fields) => {
            let update = TagUpdate {
                step: fields.step,
                description: fields.description,
                max_id: fields.max_id,
                mode: fields.mode,
            };
            if update.is_empty() {
                return Err(Failure::Usage(
                    "tag update needs at least one of --step, --max-id, --description, --mode".into(),
                ));
            }
            print_json(&client.update_tag(&fields.name, &update).await?)
        }
        TagCommand::Import { file, dry_run } => {
            crate::import::run(client, &file, dry_run).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
