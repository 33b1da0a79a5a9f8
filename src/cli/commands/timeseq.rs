//! `leafraft timeseq create|list|get` and `leafraft id timeseq`: sharded time-sequence IDs
//! (SPEC.md §4a), through the client library.

use std::process::ExitCode;

use leafraft_client::Client;
use leafraft_client::Namespace;
use leafraft_client::NewNamespace;

use super::print_json;
use super::Outcome;
use crate::cli::TimeseqCommand;
use crate::cli::TimeseqIdArgs;

pub async fn run(client: &Client, command: TimeseqCommand) -> Outcome {
    match command {
        TimeseqCommand::Create(fields) => {
            let namespace = NewNamespace {
                namespace: fields.name,
                epoch: fields.epoch,
                time_zone: fields.time_zone,
                shard_bits: fields.shard_bits,
                seq_bits: fields.seq_bits,
                description: fields.description,
            };
            print_json(&client.create_namespace(&namespace).await?)
        }
        TimeseqCommand::List { json: true } => {
            print_json(&serde_json::json!({ "namespaces": client.list_namespaces().await? }))
        }
        TimeseqCommand::List { json: false } => {
            print!("{}", table(&client.list_namespaces().await?));
            Ok(ExitCode::SUCCESS)
        }
        TimeseqCommand::Get { name, json: true } => print_json(&client.get_namespace(&name).await?),
        TimeseqCommand::Get { name, json: false } => {
            print!("{}", details(&client.get_namespace(&name).await?));
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `leafraft id timeseq`: one request, the IDs one per line.
pub async fn ids(client: &Client, args: TimeseqIdArgs) -> Outcome {
    let mut out = String::new();
    if args.string {
        let prefix = args.prefix.unwrap_or_default();
        for id in client.timeseq_strings(&args.namespace, args.shard, args.count, &prefix).await? {
            out.push_str(&id);
            out.push('\n');
        }
    } else {
        for id in client.timeseq_ids(&args.namespace, args.shard, args.count).await? {
            out.push_str(itoa::Buffer::new().format(id));
            out.push('\n');
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

/// `time/shard/seq` bit widths.
fn widths(ns: &Namespace) -> String {
    format!("{}/{}/{}", ns.time_bits, ns.shard_bits, ns.seq_bits)
}

fn current(ns: &Namespace) -> String {
    ns.ranges.as_ref().and_then(|r| r.current.clone()).unwrap_or_else(|| "-".into())
}

/// One line per namespace, as `worker list` and `cluster status` print theirs.
fn table(namespaces: &[Namespace]) -> String {
    let mut out = format!(
        "{:<20} {:<22} {:<8} {:<10} {:<26} {:>12} {:>10}\n",
        "NAMESPACE", "EPOCH", "ZONE", "BITS T/S/Q", "CURRENT RANGE", "ISSUED", "LAST 1S"
    );
    for ns in namespaces {
        let (issued, rate) = ns
            .ranges
            .as_ref()
            .map_or(("-".into(), "-".into()), |r| (r.ids_issued.to_string(), r.last_second_ids.to_string()));
        out.push_str(&format!(
            "{:<20} {:<22} {:<8} {:<10} {:<26} {:>12} {:>10}\n",
            ns.namespace,
            ns.epoch,
            ns.time_zone,
            widths(ns),
            current(ns),
            issued,
            rate
        ));
    }
    out
}

/// One namespace, a field a line.
fn details(ns: &Namespace) -> String {
    let mut lines = vec![
        ("namespace", ns.namespace.clone()),
        ("epoch", ns.epoch.clone()),
        ("time zone", ns.time_zone.clone()),
        ("bits (time/shard/sequence)", widths(ns)),
        ("shards", format!("0..{}", 1u64 << ns.shard_bits.min(63))),
        ("IDs per second", (1u64 << ns.seq_bits.min(63)).to_string()),
        ("description", ns.description.clone()),
        ("created at", ns.created_at.clone()),
    ];
    match &ns.ranges {
        Some(ranges) => {
            lines.push(("current range (second:start-end)", current(ns)));
            lines.push((
                "pending ranges",
                if ranges.pending.is_empty() { "-".into() } else { ranges.pending.join(", ") },
            ));
            lines.push(("IDs issued by this node", ranges.ids_issued.to_string()));
            lines.push(("IDs in its last full second", ranges.last_second_ids.to_string()));
        }
        None => lines.push(("this node's ranges", "none (it has not served this namespace)".into())),
    }
    let width = lines.iter().map(|(key, _)| key.len()).max().unwrap_or(0);
    lines.iter().map(|(key, value)| format!("{key:<width$}  {value}\n")).collect()
}
