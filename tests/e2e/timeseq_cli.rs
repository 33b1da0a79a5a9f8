//! The command line of time-sequence IDs (`docs/semantics.md#command-line`, `docs/semantics.md#time-sequence-ids`), running the real binary against a
//! real node: `timeseq create|list|get`, `id timeseq` in both forms, `decode --namespace`, and the
//! exit codes (0 success, 1 a failure the server answered, 2 a usage error).

use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::harness::run_cli;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[track_caller]
fn assert_exit(out: &Output, code: i32, needle: &str, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{what}: {out:?}");
    assert!(stderr.contains(needle), "{what}: stderr {stderr:?} lacks {needle:?}");
    if code != 0 {
        assert!(out.stdout.is_empty(), "{what} printed {:?}", stdout(out));
    }
}

/// (second, shard, sequence) of a long ID with 12 shard and 19 sequence bits (epoch 2020).
fn parts(id: u64) -> (u64, u64, u64) {
    (1_577_836_800 + (id >> 31), (id >> 19) & 4095, id & ((1 << 19) - 1))
}

#[tokio::test]
async fn the_cli_creates_lists_takes_and_decodes_time_sequence_ids() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(TIMEOUT).await;
    let server = cluster.url(1);

    let out =
        run_cli(&server, &["timeseq", "create", "orders", "--time-zone", "+08:00", "--description", "order IDs"]).await;
    assert!(out.status.success(), "timeseq create: {out:?}");
    let created: Value = serde_json::from_slice(&out.stdout).expect("create prints JSON");
    assert_eq!((created["time_bits"].as_u64(), created["time_zone"].as_str()), (Some(32), Some("+08:00")));
    assert_exit(&run_cli(&server, &["timeseq", "create", "orders"]).await, 1, "NAMESPACE_EXISTS", "a second create");
    let bad = run_cli(&server, &["timeseq", "create", "wide", "--shard-bits", "30", "--seq-bits", "19"]).await;
    assert_exit(&bad, 1, "INVALID_ARGUMENT", "widths over 63 bits");
    assert_exit(&run_cli(&server, &["timeseq", "create"]).await, 2, "NAME", "create without a name");

    // The first IDs wait for the node's first peer clock check; poll, do not sleep.
    let mut seen = BTreeSet::new();
    let first = wait_until(TIMEOUT, "`id timeseq` to succeed", || async {
        let out = run_cli(&server, &["id", "timeseq", "orders", "--shard", "7", "-n", "5"]).await;
        if out.status.success() {
            Ok(stdout(&out))
        } else {
            Err(format!("{out:?}"))
        }
    })
    .await;
    let mut longs: Vec<u64> = first.lines().map(|l| l.parse().unwrap_or_else(|_| panic!("not an ID: {l:?}"))).collect();
    let out = run_cli(&server, &["id", "timeseq", "orders", "--shard", "4095", "--count", "1000"]).await;
    assert!(out.status.success(), "id timeseq -n 1000: {out:?}");
    longs.extend(stdout(&out).lines().map(|l| l.parse::<u64>().expect("a decimal ID")));
    assert_eq!(longs.len(), 1005);
    for (i, id) in longs.iter().enumerate() {
        let (_, shard, _) = parts(*id);
        assert_eq!(shard, if i < 5 { 7 } else { 4095 }, "ID {id}");
        assert!(seen.insert(parts(*id)), "{id} handed out twice");
    }

    let out =
        run_cli(&server, &["id", "timeseq", "orders", "--shard", "9", "-n", "3", "--string", "--prefix", "ORD"]).await;
    assert!(out.status.success(), "id timeseq --string: {out:?}");
    let strings: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(strings.len(), 3, "{strings:?}");
    for id in &strings {
        assert!(id.starts_with("ORD") && id.ends_with("0009") && id.len() == 3 + 14 + 6 + 4, "{id}");
        let out = run_cli(&server, &["decode", id, "--namespace", "orders"]).await;
        assert!(out.status.success(), "decode {id}: {out:?}");
        let decoded: Value = serde_json::from_slice(&out.stdout).expect("decode prints JSON");
        assert_eq!(decoded["shard"], 9, "{decoded}");
        let key = (decoded["seconds"].as_u64().expect("seconds"), 9, decoded["sequence"].as_u64().expect("sequence"));
        assert!(seen.insert(key), "{id} repeats an ID already served");
    }
    let long = longs[0].to_string();
    let out = run_cli(&server, &["decode", &long, "--namespace", "orders"]).await;
    assert!(out.status.success(), "decode {long}: {out:?}");
    let decoded: Value = serde_json::from_slice(&out.stdout).expect("decode prints JSON");
    let (second, shard, sequence) = parts(longs[0]);
    assert_eq!(
        (decoded["seconds"].as_u64(), decoded["shard"].as_u64(), decoded["sequence"].as_u64()),
        (Some(second), Some(shard), Some(sequence)),
        "{decoded}"
    );
    assert_exit(&run_cli(&server, &["decode", &strings[0]]).await, 2, "--namespace", "a string ID without --namespace");
    assert_exit(&run_cli(&server, &["decode", "12x", "--namespace", "orders"]).await, 1, "INVALID_ARGUMENT", "garbage");

    // Usage errors are refused before anything is sent.
    assert_exit(&run_cli(&server, &["id", "timeseq", "orders"]).await, 2, "--shard", "no shard");
    assert_exit(
        &run_cli(&server, &["id", "timeseq", "orders", "--shard", "1", "--prefix", "X"]).await,
        2,
        "--string",
        "a prefix without --string",
    );
    assert_exit(
        &run_cli(&server, &["id", "timeseq", "orders", "--shard", "4096"]).await,
        1,
        "INVALID_ARGUMENT",
        "shard 4096",
    );
    assert_exit(
        &run_cli(&server, &["id", "timeseq", "nope", "--shard", "1"]).await,
        1,
        "NAMESPACE_NOT_FOUND",
        "unknown namespace",
    );

    let out = run_cli(&server, &["timeseq", "list"]).await;
    assert!(out.status.success(), "timeseq list: {out:?}");
    let table = stdout(&out);
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(header.first(), Some(&"NAMESPACE"), "{table}");
    let row: Vec<&str> =
        table.lines().find(|l| l.starts_with("orders ")).expect("a row for orders").split_whitespace().collect();
    assert_eq!(&row[..4], ["orders", "2020-01-01T00:00:00.000Z", "+08:00", "32/12/19"], "{table}");
    let issued: u64 = row[row.len() - 2].parse().expect("IDs issued");
    assert_eq!(issued, 1008, "{table}");
    let out = run_cli(&server, &["timeseq", "list", "--json"]).await;
    let listed: Value = serde_json::from_slice(&out.stdout).expect("list --json prints JSON");
    assert_eq!(listed["namespaces"][0]["namespace"], "orders", "{listed}");
    // The range reads as a time in the namespace's zone and the sequences held, not as the API's
    // `SECOND:START-END`.
    let raw = listed["namespaces"][0]["ranges"]["current"].as_str().expect("a current range").to_string();
    let (second, seqs) = raw.split_once(':').expect("SECOND:START-END");
    let (start, end) = seqs.split_once('-').expect("START-END");
    let end: u64 = end.parse().expect("END");
    let time = chrono::DateTime::from_timestamp(second.parse().expect("SECOND"), 0).expect("a time");
    let zone = chrono::FixedOffset::east_opt(8 * 3600).expect("+08:00");
    let readable = format!("{} +08:00 seq {start}-{}", time.with_timezone(&zone).format("%Y-%m-%d %H:%M:%S"), end - 1);
    assert!(table.contains(&readable) && !table.contains(&raw), "{readable} (not {raw}) in:\n{table}");
    let out = run_cli(&server, &["timeseq", "get", "orders"]).await;
    assert!(out.status.success(), "timeseq get: {out:?}");
    let details = stdout(&out);
    for needle in ["+08:00", "32/12/19", "order IDs", "524288", "1008"] {
        assert!(details.contains(needle), "{needle} missing from:\n{details}");
    }
    let out = run_cli(&server, &["timeseq", "get", "orders", "--json"]).await;
    let got: Value = serde_json::from_slice(&out.stdout).expect("get --json prints JSON");
    assert_eq!(got["ranges"]["ids_issued"], 1008, "{got}");
    assert_exit(
        &run_cli(&server, &["timeseq", "get", "nope"]).await,
        1,
        "NAMESPACE_NOT_FOUND",
        "get of an unknown namespace",
    );
    println!("{} unique time-sequence IDs through the CLI", seen.len());
}
