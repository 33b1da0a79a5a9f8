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
    ns.ranges.as_ref().and_then(|r| r.current.as_deref()).map_or_else(|| "-".into(), |raw| readable(raw, &ns.time_zone))
}

/// A range as the API gives it, `SECOND:START-END` (Unix second, half-open sequences), as a
/// person reads it: the second in the namespace's zone and the sequences it holds, both ends
/// included (`2026-11-28 10:48:28 +08:00 seq 3-63`). Anything else is shown as it came.
pub fn readable(raw: &str, time_zone: &str) -> String {
    let parsed = raw.split_once(':').and_then(|(second, seqs)| {
        let (start, end) = seqs.split_once('-')?;
        Some((second.parse::<i64>().ok()?, start.parse::<u64>().ok()?, end.parse::<u64>().ok()?))
    });
    let Some((second, start, end)) = parsed else { return raw.to_string() };
    let Some(time) = chrono::DateTime::from_timestamp(second, 0) else { return raw.to_string() };
    let Some(zone) = zone_offset(time_zone) else { return raw.to_string() };
    let when = time.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S");
    let zone = if time_zone == "UTC" { "UTC".to_string() } else { zone.to_string() };
    match end.checked_sub(1).filter(|&last| last >= start) {
        Some(last) => format!("{when} {zone} seq {start}-{last}"),
        None => format!("{when} {zone} seq none"),
    }
}

/// `UTC` or `±HH:MM`, as namespaces name their zone.
fn zone_offset(time_zone: &str) -> Option<chrono::FixedOffset> {
    if time_zone == "UTC" {
        return chrono::FixedOffset::east_opt(0);
    }
    let (sign, rest) = match time_zone.as_bytes().first()? {
        b'+' => (1, &time_zone[1..]),
        b'-' => (-1, &time_zone[1..]),
        _ => return None,
    };
    let (hours, minutes) = rest.split_once(':')?;
    let seconds = hours.parse::<i32>().ok()? * 3600 + minutes.parse::<i32>().ok()? * 60;
    chrono::FixedOffset::east_opt(sign * seconds)
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
            lines.push(("current range (second, sequences)", current(ns)));
            lines.push((
                "pending ranges",
                if ranges.pending.is_empty() {
                    "-".into()
                } else {
                    ranges.pending.iter().map(|raw| readable(raw, &ns.time_zone)).collect::<Vec<_>>().join(", ")
                },
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
        // The first row's range names its zone too: its zone column is its first `+08:00`; the
        // second row's epoch holds one, so there it is the last.
        assert_eq!(column(lines[0], "ZONE"), lines[1].find("+08:00"), "{text}");
        assert_eq!(lines[1].find("+08:00"), column(lines[2], "+08:00"), "{text}");
        assert_eq!(column(lines[0], "BITS"), column(lines[2], "32/12/19"), "{text}");
        assert_eq!(lines[1].len(), lines[2].len(), "{text}");
        assert!(lines[1].contains("2025-11-25 00:00:00 +08:00 seq 0-63"), "{text}");
        assert!(!text.contains("1764000000"), "{text}");
    }

    #[test]
    fn ranges_read_as_a_time_in_the_zone_and_the_sequences_held() {
        assert_eq!(readable("1795808108:3-64", "+08:00"), "2026-11-28 03:35:08 +08:00 seq 3-63");
        assert_eq!(readable("1795808108:3-64", "UTC"), "2026-11-27 19:35:08 UTC seq 3-63");
        assert_eq!(readable("1795808108:0-1", "-05:30"), "2026-11-27 14:05:08 -05:30 seq 0-0");
        assert_eq!(readable("1795808108:7-7", "UTC"), "2026-11-27 19:35:08 UTC seq none");
        // What the CLI does not understand, it shows as it came rather than hiding it.
        assert_eq!(readable("garbled", "UTC"), "garbled");
        assert_eq!(readable("1795808108:3-64", "Mars/Olympus"), "1795808108:3-64");
    }
}
