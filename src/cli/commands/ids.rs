//! `leafraft id segment|snowflake` and `leafraft decode`: one request each (a command line that
//! kept a local range would drop most of it on exit).

use std::process::ExitCode;

use leafraft_client::Client;

use super::print_json;
use super::Outcome;
use crate::cli::IdCommand;

pub async fn run(client: &Client, command: IdCommand) -> Outcome {
    let ids = match command {
        IdCommand::Segment { tag, count } => client.segment_ids(&tag, count).await?,
        IdCommand::Snowflake { count } => client.snowflake_ids(count).await?,
    };
    let mut out = String::with_capacity(ids.len() * 20);
    for id in ids {
        out.push_str(itoa::Buffer::new().format(id));
        out.push('\n');
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

pub async fn decode(client: &Client, id: &str) -> Outcome {
    print_json(&client.decode_snowflake(id).await?)
}
