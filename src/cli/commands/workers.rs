//! `leafraft worker list|release`.

use std::process::ExitCode;

use leafraft_client::Client;
use leafraft_client::Workers;
use serde_json::Value;

use super::print_json;
use super::Outcome;
use crate::cli::table::Align;
use crate::cli::table::Table;
use crate::cli::WorkerCommand;

pub async fn run(client: &Client, command: WorkerCommand) -> Outcome {
    match command {
        WorkerCommand::List { json: true } => print_json(&client.workers().await?),
        WorkerCommand::List { json: false } => {
            print!("{}", table(&client.workers().await?));
            Ok(ExitCode::SUCCESS)
        }
        WorkerCommand::Release { worker_id } => print_json(&client.release_worker(worker_id).await?),
    }
}

/// The registry, one line per worker, then one line on the answering node's own snowflake state
/// in words (a field the node has not measured yet says so instead of printing `null`).
pub fn table(view: &Workers) -> String {
    let mut table = Table::new(&[
        ("WORKER", Align::Right),
        ("HOLDER", Align::Right),
        ("EPOCH", Align::Right),
        ("WINDOW END (ms)", Align::Right),
        ("LAST HEARTBEAT (ms)", Align::Right),
    ]);
    for worker in &view.workers {
        table.row(vec![
            worker.worker_id.to_string(),
            worker.holder.map_or("none (free)".to_string(), |h| h.to_string()),
            worker.epoch.to_string(),
            worker.window_end_ms.to_string(),
            worker.last_heartbeat_ms.to_string(),
        ]);
    }
    let mut out = if view.workers.is_empty() {
        "no snowflake workers yet (a node takes one when it starts serving snowflake IDs)\n".to_string()
    } else {
        table.render()
    };
    out.push_str(&this_node(&view.this_node));
    out.push('\n');
    out
}

/// `this node: worker 0 (epoch 2), clock offset to peers +3 ms (2 checked), serving snowflake IDs`.
fn this_node(node: &Value) -> String {
    let worker = match (node["worker_id"].as_u64(), node["epoch"].as_u64()) {
        (Some(worker), Some(epoch)) => format!("worker {worker} (epoch {epoch})"),
        (Some(worker), None) => format!("worker {worker}"),
        (None, _) => "no worker".to_string(),
    };
    let peers = node["peers_checked"].as_u64().unwrap_or(0);
    let offset = match node["clock_offset_ms"].as_i64() {
        Some(ms) => format!("clock offset to peers {ms:+} ms ({peers} checked)"),
        None if peers == 0 => "clock offset to peers: not measured (no peer answered a check yet)".to_string(),
        None => "clock offset to peers: not measured".to_string(),
    };
    let serving = match node["refused"].as_str() {
        Some(reason) => format!("refusing snowflake IDs: {reason}"),
        None => "serving snowflake IDs".to_string(),
    };
    format!("this node: {worker}, {offset}, {serving}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workers(this_node: Value) -> Workers {
        serde_json::from_value(serde_json::json!({
            "layout": null,
            "workers": [{"worker_id": 0, "holder": 1, "epoch": 2, "window_end_ms": 1700000010000u64,
                          "floor_ms": 0, "last_heartbeat_ms": 1700000000000u64},
                         {"worker_id": 12, "holder": null, "epoch": 1, "window_end_ms": 5, "floor_ms": 0,
                          "last_heartbeat_ms": 4}],
            "this_node": this_node,
        }))
        .unwrap()
    }

    #[test]
    fn a_single_node_says_in_words_what_it_has_not_measured() {
        let text = table(&workers(serde_json::json!({
            "worker_id": 0, "epoch": 2, "window_end_ms": 1, "refused": null, "clock_offset_ms": null,
            "peers_checked": 0, "ids_issued": 5, "clock_checks": 0
        })));
        assert!(!text.contains("null"), "{text}");
        assert!(text.contains("none (free)"), "{text}");
        assert!(text.contains("this node: worker 0 (epoch 2), clock offset to peers: not measured"), "{text}");
        assert!(text.ends_with("serving snowflake IDs\n"), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1].len(), lines[2].len(), "right-aligned rows have one width:\n{text}");
    }

    #[test]
    fn a_refusing_node_says_why_and_its_offset() {
        let text = table(&workers(serde_json::json!({
            "worker_id": null, "refused": "clock is 1500 ms off the peers'", "clock_offset_ms": -1500,
            "peers_checked": 2
        })));
        assert!(text.contains("this node: no worker, clock offset to peers -1500 ms (2 checked), refusing snowflake IDs: clock is 1500 ms off the peers'"), "{text}");
    }
}
