//! `leafraft cluster status|add|remove`.

use std::process::ExitCode;

use leafraft_client::Client;
use leafraft_client::ClusterStatus;

use super::print_json;
use super::Outcome;
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
    print_status(&status);
    Ok(ExitCode::SUCCESS)
}

fn print_status(status: &ClusterStatus) {
    let or_dash = |value: Option<u64>| value.map_or("-".to_string(), |v| v.to_string());
    println!(
        "node {} is {}; leader {}; term {}; commit {}; applied {}",
        status.node_id,
        status.role,
        status.leader_id.map_or("unknown".to_string(), |id| id.to_string()),
        status.term,
        or_dash(status.commit_index),
        or_dash(status.applied_index),
    );
    println!("{:<8} {:<24} {:<8} {:<10} {:<8}", "NODE", "ADDRESS", "ROLE", "MATCHED", "LAG");
    for (id, addr) in &status.nodes {
        let node_id: u64 = id.parse().unwrap_or(0);
        let role = if status.leader_id == Some(node_id) {
            "leader"
        } else if status.voters.contains(&node_id) {
            "voter"
        } else {
            "learner"
        };
        let replication = status.replication.as_ref().and_then(|r| r.get(id));
        let matched = or_dash(replication.and_then(|r| r.matched_index));
        let lag = or_dash(replication.map(|r| r.lag));
        println!("{id:<8} {addr:<24} {role:<8} {matched:<10} {lag:<8}");
    }
}
