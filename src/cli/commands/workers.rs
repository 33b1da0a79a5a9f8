//! `leafraft worker list|release`.

use std::process::ExitCode;

use leafraft_client::Client;
use leafraft_client::Workers;

use super::print_json;
use super::Outcome;
use crate::cli::WorkerCommand;

pub async fn run(client: &Client, command: WorkerCommand) -> Outcome {
    match command {
        WorkerCommand::List { json: true } => print_json(&client.workers().await?),
        WorkerCommand::List { json: false } => {
            print_workers(&client.workers().await?);
            Ok(ExitCode::SUCCESS)
        }
        WorkerCommand::Release { worker_id } => print_json(&client.release_worker(worker_id).await?),
    }
}

fn print_workers(view: &Workers) {
    println!("{:<8} {:<8} {:<8} {:<16} {:<16}", "WORKER", "HOLDER", "EPOCH", "WINDOW END", "LAST HEARTBEAT");
    for worker in &view.workers {
        println!(
            "{:<8} {:<8} {:<8} {:<16} {:<16}",
            worker.worker_id,
            worker.holder.map_or("-".to_string(), |h| h.to_string()),
            worker.epoch,
            worker.window_end_ms,
            worker.last_heartbeat_ms,
        );
    }
    let this = &view.this_node;
    println!(
        "this node: worker {}, clock offset to peers {} ms, refused: {}",
        this["worker_id"], this["clock_offset_ms"], this["refused"]
    );
}
