//! `leafraft id segment|snowflake|timeseq` and `leafraft decode`: one request each (a command
//! line that kept a local range would drop most of it on exit).

use std::process::ExitCode;

use leafraft_client::Client;

use super::print_json;
use super::Failure;
use super::Outcome;
use crate::cli::IdCommand;

pub async fn run(client: &Client, command: IdCommand) -> Outcome {
    let ids = match command {
        IdCommand::Segment { tag, count } => client.segment_ids(&tag, count).await?,
        IdCommand::Snowflake { count } => client.snowflake_ids(count).await?,
        IdCommand::Timeseq(args) => return super::timeseq::ids(client, args).await,
    };
    let mut out = String::with_capacity(ids.len() * 20);
    for id in ids {
        out.push_str(itoa::Buffer::new().format(id));
        out.push('\n');
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// A snowflake ID, or with `namespace` a time-sequence ID of either form.
pub async fn decode(client: &Client, id: &str, namespace: Option<&str>) -> Outcome {
    match namespace {
        Some(namespace) => print_json(&client.decode_timeseq(namespace, id).await?),
        None if id.bytes().all(|b| b.is_ascii_digit()) => print_json(&client.decode_snowflake(id).await?),
        None => Err(Failure::Usage(format!(
            "{id:?} is not a snowflake ID; a time-sequence ID (long or string form) needs --namespace NS"
        ))),
    }
}
