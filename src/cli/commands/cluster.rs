//! `leafraft cluster status|add|remove`.

use std::process::ExitCode;

use leafraft_client::Client;
use leafraft_client::ClusterStatus;

use super::print_json;
use super::Outcome;
use crate::cli::table::Align;
use crate::cli::table::Table;
use crate::cli::ClusterCommand;

pub async fn run(client: &Client, command: ClusterCommand) -> Outcome {
    let status = match command {
        ClusterCommand::Status { json: true } => return print_json(&client.cluster_status().await?),
        ClusterCommand::Status { json: false } => client.cluster_status().await?,
        ClusterCommand::Add { node_id, addr, learner } => {
            eprintln!(
                "adding node {node_id} at {addr} as a learner: waiting until it answers there and has replicated the \
                 leader's log (the server's --learner-timeout-ms, 60 s by default; the voters do not change meanwhile)"
            );
            let status = client.add_learner(node_id, &addr).await?;
            if learner {
                status
            } else {
                eprintln!(
                    "node {node_id} has caught up; promoting it to voter (only while it is at most {} entries \
                     behind the leader)",
                    crate::cluster::MAX_PROMOTION_LAG
                );
                client.promote_voter(node_id).await?
            }
        }
        ClusterCommand::Remove { node_id } => client.remove_member(node_id).await?,
    };
    print_status(client, &status);
    Ok(ExitCode::SUCCESS)
}

fn print_status(client: &Client, status: &ClusterStatus) {
    print!("{}", table(status, &client.base()));
}

/// The answering node's view: a summary line, one line per member, and on any node but the
/// leader a line saying where MATCHED and LAG can be read (only the leader tracks replication).
/// `server` is the URL the command asked (its scheme is reused for the leader's address).
pub fn table(status: &ClusterStatus, server: &str) -> String {
    let or_dash = |value: Option<u64>| value.map_or("-".to_string(), |v| v.to_string());
    let mut out = format!(
        "node {} is {}; leader {}; term {}; commit {}; applied {}\n",
        status.node_id,
        status.role,
        status.leader_id.map_or("unknown".to_string(), |id| id.to_string()),
        status.term,
        or_dash(status.commit_index),
        or_dash(status.applied_index),
    );
    let mut columns = vec![("NODE", Align::Right), ("ADDRESS", Align::Left), ("ROLE", Align::Left)];
    if status.replication.is_some() {
        columns.extend([("MATCHED", Align::Right), ("LAG", Align::Right)]);
    }
    let mut table = Table::new(&columns);
    for (id, addr) in &status.nodes {
        let node_id: u64 = id.parse().unwrap_or(0);
        let role = if status.leader_id == Some(node_id) {
            "leader"
        } else if status.voters.contains(&node_id) {
            "voter"
        } else {
            "learner"
        };
        let mut row = vec![id.clone(), addr.clone(), role.to_string()];
        if let Some(replication) = &status.replication {
            let replication = replication.get(id);
            row.push(or_dash(replication.and_then(|r| r.matched_index)));
            row.push(or_dash(replication.map(|r| r.lag)));
        }
        table.row(row);
    }
    out.push_str(&table.render());
    if status.replication.is_none() {
        out.push_str(&only_the_leader_knows(status, server));
    }
    out
}

fn only_the_leader_knows(status: &ClusterStatus, server: &str) -> String {
    let scheme = server.split_once("://").map_or("http", |(scheme, _)| scheme);
    let leader = status.leader_id.and_then(|id| status.nodes.get(&id.to_string()));
    match leader {
        Some(addr) => format!(
            "matched index and lag: only the leader knows them; ask it: leafraft cluster status --server {scheme}://{addr}\n"
        ),
        None => "matched index and lag: only the leader knows them, and this node knows no leader yet\n".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(node_id: u64, replication: serde_json::Value) -> ClusterStatus {
        serde_json::from_value(serde_json::json!({
            "node_id": node_id, "role": if node_id == 1 { "leader" } else { "follower" }, "leader_id": 1,
            "term": 3, "voters": [1, 2, 3], "learners": [],
            "nodes": {"1": "127.0.0.1:8081", "2": "127.0.0.1:8082", "3": "127.0.0.1:8083"},
            "commit_index": 12, "applied_index": 12, "replication": replication,
        }))
        .unwrap()
    }

    #[test]
    fn the_leader_shows_matched_and_lag() {
        let replication = serde_json::json!({"1": {"matched_index": 12, "lag": 0},
            "2": {"matched_index": 12, "lag": 0}, "3": {"matched_index": 9, "lag": 3}});
        let text = table(&status(1, replication), "http://127.0.0.1:8081");
        assert!(text.contains("MATCHED"), "{text}");
        assert!(
            text.lines().any(|line| line.starts_with("   3  127.0.0.1:8083  voter") && line.ends_with("9    3")),
            "{text}"
        );
        assert!(!text.contains("only the leader"), "{text}");
    }

    #[test]
    fn a_follower_says_only_the_leader_knows_and_where_to_ask() {
        let text = table(&status(2, serde_json::Value::Null), "https://127.0.0.1:8082");
        assert!(!text.contains("MATCHED"), "{text}");
        assert!(
            text.contains(
                "only the leader knows them; ask it: leafraft cluster status --server https://127.0.0.1:8081"
            ),
            "{text}"
        );
        assert!(text.contains("   1  127.0.0.1:8081  leader"), "{text}");
    }
}
