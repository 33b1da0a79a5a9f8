//! `/v1/cluster`: the membership as this node sees it, and the membership changes.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde::Serialize;

use crate::api::body;
use crate::api::AppState;
use crate::cluster::ClusterStatus;
use crate::error::Error;
use raft::NodeId;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddLearner {
    pub node_id: NodeId,
    pub addr: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromoteVoter {
    pub node_id: NodeId,
}

pub async fn status(State(state): State<AppState>) -> Json<ClusterStatus> {
    Json(state.cluster.status())
}

pub async fn add_learner(State(state): State<AppState>, bytes: Bytes) -> Result<Json<ClusterStatus>, Error> {
    let add: AddLearner = body::json(&bytes)?;
    let addr = add.addr.trim().to_string();
    let valid = addr.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !valid {
        return Err(Error::invalid(format!("addr '{addr}' is not HOST:PORT")));
    }
    state.cluster.add_learner(add.node_id, addr).await?;
    Ok(Json(state.cluster.status()))
}

pub async fn promote_voter(State(state): State<AppState>, bytes: Bytes) -> Result<Json<ClusterStatus>, Error> {
    let promote: PromoteVoter = body::json(&bytes)?;
    state.cluster.promote_voter(promote.node_id).await?;
    Ok(Json(state.cluster.status()))
}

pub async fn remove_member(
    State(state): State<AppState>,
    id: Result<Path<NodeId>, PathRejection>,
) -> Result<Json<ClusterStatus>, Error> {
    let id = body::path(id)?;
    state.cluster.remove_member(id).await?;
    Ok(Json(state.cluster.status()))
}
