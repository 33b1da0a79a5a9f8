//! Forming the new cluster: a real Raft node, in this process, on the new data directory. It
//! initialises itself alone, commits a fresh cluster ID and the one `Restore`, and shuts down
//! cleanly, so `leafraft serve` later finds an ordinary one-member store.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use leafraft_state::Node;
use leafraft_state::NodeId;
use leafraft_state::Request;
use leafraft_state::Response;
use openraft::ServerState;

use crate::config::Config;
use crate::config::Settings;
use crate::offline::recover::RecoverError;

/// How long the lone node may take to elect itself and commit.
const FORM_TIMEOUT: Duration = Duration::from_secs(30);

/// Creates the member identity and the store in `dir` (which must not hold one), and commits
/// `SetClusterId { cluster_id }` and the `restores` (tags and snowflake, time sequences, scramble
/// keys) as node `node_id` reachable at `advertise`.
pub async fn form(
    dir: &Path,
    node_id: NodeId,
    advertise: &str,
    cluster_id: u64,
    restores: impl IntoIterator<Item = Request>,
) -> Result<(), RecoverError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| RecoverError(format!("{what}: {e}"));
    let owned = dir.to_path_buf();
    let (identity, store) = tokio::task::spawn_blocking(move || {
        storage::identity::open_member(&owned, node_id, &storage::StoreOptions::default())
    })
    .await
    .map_err(|e| fail("creating the new store failed", &e))?
    .map_err(|e| fail("cannot create the new store", &e))?;

    let layers = Settings { node_id: Some(node_id), ..Settings::default() };
    let raft_config = Config::resolve(layers).and_then(|config| config.raft_config()).map_err(RecoverError)?;
    // A lone member sends no Raft RPC: an HTTP transport that is never used, no guard.
    let identity_check = Arc::new(raft::network::IdentityCheck::new(node_id, identity.incarnation));
    let network = raft::network::NetworkFactory::new(reqwest::Client::new(), None, identity_check);
    let raft = crate::node::assembly::start_raft(node_id, Arc::new(raft_config), &store, network, None)
        .await
        .map_err(RecoverError)?;
    let committed = commit(&raft, node_id, Node::new(advertise, identity.incarnation), cluster_id, restores).await;
    // Stop in order whatever happened: a half-formed store is refused as non-empty next time.
    let stopped = raft.shutdown().await.map_err(|e| fail("raft did not shut down cleanly", &e));
    let flushed = store.flush().await.map_err(|e| fail("cannot flush the new store", &e));
    drop(store);
    committed.and(stopped).and(flushed)
}

async fn commit(
    raft: &raft::Raft,
    node_id: NodeId,
    node: Node,
    cluster_id: u64,
    restores: impl IntoIterator<Item = Request>,
) -> Result<(), RecoverError> {
    let fail = |what: &str, e: &dyn std::fmt::Display| RecoverError(format!("{what}: {e}"));
    raft.initialize(BTreeMap::from([(node_id, node)]))
        .await
        .map_err(|e| fail("cannot initialise the new cluster", &e))?;
    raft.wait(Some(FORM_TIMEOUT))
        .state(ServerState::Leader, "the new cluster's one member to lead")
        .await
        .map_err(|e| fail("the new cluster elected no leader", &e))?;
    match raft.client_write(Request::SetClusterId { cluster_id }).await {
        Ok(reply) if reply.data == (Response::ClusterId { cluster_id }) => {}
        Ok(reply) => return Err(RecoverError(format!("the cluster ID was not recorded: {:?}", reply.data))),
        Err(e) => return Err(fail("cannot commit the cluster ID", &e)),
    }
    for restore in restores {
        match raft.client_write(restore).await {
            Ok(reply)
                if matches!(
                    reply.data,
                    Response::Restored { .. }
                        | Response::TimeseqRestored { .. }
                        | Response::ClusterVersion { .. }
                        | Response::Empty
                ) => {}
            Ok(reply) => return Err(RecoverError(format!("the restore was refused: {:?}", reply.data))),
            Err(e) => return Err(fail("cannot commit the restore", &e)),
        }
    }
    Ok(())
}
