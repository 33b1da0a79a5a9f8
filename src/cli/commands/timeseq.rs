//! `leafraft timeseq create|list|get` and `leafraft id timeseq`: sharded time-sequence IDs
//! (`docs/semantics.md#time-sequence-ids`), through the client library.

use std::process::ExitCode;

use leafraft_client::Client;
use leafraft_client::Namespace;
use leafraft_client::NewNamespace;

use super::print_json;
use super::Outcome;
use crate::cli::table::Align;
use crate::cli::table::Table;
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
pub fn table(namespaces: &[Namespace]) -> String {
    let mut table = Table::new(&[
        ("NAMESPACE", Align::Left),
        ("EPOCH", Align::Left),
        ("ZONE", Align::Left),
        ("BITS T/S/Q", Align::Left),
        ("CURRENT RANGE", Align::Left),
        ("ISSUED", Align::Right),
        ("LAST 1S", Align::Right),
    ]);
    for ns in namespaces {
        let (issued, rate) = ns
            .ranges
            .as_ref()
            .map_or(("-".into(), "-".into()), |r| (r.ids_issued.to_string(), r.last_second_ids.to_string()));
        table.row(vec![
            ns.namespace.clone(),
            ns.epoch.clone(),
            ns.time_zone.clone(),
            widths(ns),
            current(ns),
            issued,
            rate,
        ]);
    }
    table.render()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(name: &str, epoch: &str, ranges: serde_json::Value) -> Namespace {
        serde_json::from_value(serde_json::json!({
            "namespace": name, "epoch": epoch, "time_zone": "+08:00", "time_bits": 32, "shard_bits": 12,
            "seq_bits": 19, "description": "", "created_at": "2026-01-01T00:00:00Z", "ranges": ranges,
        }))
        .unwrap()
    }

    #[test]
    fn columns_line_up_whatever_the_epoch_looks_like() {
        let ranges = serde_json::json!({"current": "1764000000:0-64", "pending": [], "ids_issued": 3,
            "last_second_ids": 3});
        let text = table(&[
            namespace("orders", "2020-01-01T00:00:00Z", ranges),
            namespace("a-much-longer-namespace-name", "2024-06-30T16:00:00+08:00", serde_json::Value::Null),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        let column = |line: &str, what: &str| line.rfind(what);
        assert_eq!(column(lines[0], "ZONE"), column(lines[1], "+08:00"), "{text}");
        assert_eq!(column(lines[1], "+08:00"), column(lines[2], "+08:00"), "{text}");
        assert_eq!(column(lines[0], "BITS"), column(lines[2], "32/12/19"), "{text}");
        assert_eq!(lines[1].len(), lines[2].len(), "{text}");
    }
}
