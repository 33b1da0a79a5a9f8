//! `/v1/cluster`: the membership as this node sees it, and the membership changes.

use axum::extract::rejection::PathRejection;
use axum::extract::Path;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde::Serialize;

use crate::api::body;
use crate::api::body::WholeBody;
use crate::api::AppState;
use crate::cluster::check_addr;
use crate::cluster::ClusterStatus;
use crate::error::Error;
use leafraft_state::NodeId;

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddLearner {
    #[schema(value_type = u64)]
    pub node_id: NodeId,
    pub addr: String,
    /// The joining node's data dir incarnation (16 hex digits), sent by `--join`; without it the
    /// leader asks the node at `addr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PromoteVoter {
    #[schema(value_type = u64)]
    pub node_id: NodeId,
}

/// The membership, leader, term and log indexes as this node sees them.
#[utoipa::path(
    get,
    path = "/v1/cluster",
    tag = "cluster",
    summary = "Cluster status",
    responses((status = 200, description = "`replication` (matched index and lag per member) on the leader only",
        body = ClusterStatus))
)]
pub async fn status(State(state): State<AppState>) -> Json<ClusterStatus> {
    Json(state.cluster.status())
}

/// Adds a learner and answers once it has caught up (its matched log index within
/// `MAX_PROMOTION_LAG` of the leader's), recording the identity of the disk that answers at `addr`.
#[utoipa::path(
    post,
    path = "/v1/cluster/learners",
    tag = "cluster",
    summary = "Add a learner",
    request_body = AddLearner,
    responses(
        (status = 200, description = "Added and caught up; the cluster status after", body = ClusterStatus),
        (status = 400, description = "`INVALID_ARGUMENT`: addr is not HOST:PORT, or a bad body", body = crate::error::ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong secret", body = crate::error::ErrorBody),
        (status = 409, description = "`CLUSTER_MISMATCH`: the node ID is a member with another data dir, or the node \
            at addr belongs to another cluster", body = crate::error::ErrorBody),
        (status = 503, description = "`NO_LEADER`, also when the learner did not catch up in time (it stays a \
            learner; the voters are unchanged)", body = crate::error::ErrorBody),
    )
)]
pub async fn add_learner(
    State(state): State<AppState>,
    WholeBody(bytes): WholeBody,
) -> Result<Json<ClusterStatus>, Error> {
    let add: AddLearner = body::json(&bytes)?;
    let addr = add.addr.trim().to_string();
    check_addr(&addr)?;
    let incarnation = match add.incarnation.as_deref().map(str::trim) {
        None => 0,
        Some(hex) => u64::from_str_radix(hex, 16)
            .ok()
            .filter(|incarnation| *incarnation != 0)
            .ok_or_else(|| Error::invalid(format!("incarnation '{hex}' is not a nonzero hex number")))?,
    };
    state.cluster.add_learner(add.node_id, addr, incarnation).await?;
    Ok(Json(state.cluster.status()))
}

/// Promotes a learner to voter, only while it replicates the leader's log.
#[utoipa::path(
    post,
    path = "/v1/cluster/voters",
    tag = "cluster",
    summary = "Promote a learner",
    request_body = PromoteVoter,
    responses(
        (status = 200, description = "Promoted; the cluster status after", body = ClusterStatus),
        (status = 400, description = "`INVALID_ARGUMENT`: bad body", body = crate::error::ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong secret", body = crate::error::ErrorBody),
        (status = 409, description = "`NOT_A_LEARNER`; `LEARNER_NOT_CAUGHT_UP` while its matched log index is more than \
            `MAX_PROMOTION_LAG` (100) behind the leader's or it does not answer; `CLUSTER_MISMATCH` when another disk \
            answers at its address", body = crate::error::ErrorBody),
        (status = 503, description = "`NO_LEADER`", body = crate::error::ErrorBody),
    )
)]
pub async fn promote_voter(
    State(state): State<AppState>,
    WholeBody(bytes): WholeBody,
) -> Result<Json<ClusterStatus>, Error> {
    let promote: PromoteVoter = body::json(&bytes)?;
    state.cluster.promote_voter(promote.node_id).await?;
    Ok(Json(state.cluster.status()))
}

/// Takes a voter or learner out of the membership.
#[utoipa::path(
    delete,
    path = "/v1/cluster/members/{id}",
    tag = "cluster",
    summary = "Remove a member",
    params(("id" = u64, Path, description = "The node ID")),
    responses(
        (status = 200, description = "Removed; the cluster status after", body = ClusterStatus),
        (status = 400, description = "`INVALID_ARGUMENT`: bad node ID", body = crate::error::ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong secret", body = crate::error::ErrorBody),
        (status = 404, description = "`NODE_NOT_FOUND`", body = crate::error::ErrorBody),
        (status = 409, description = "`LAST_VOTER`: the change would leave no voter", body = crate::error::ErrorBody),
        (status = 503, description = "`NO_LEADER`", body = crate::error::ErrorBody),
    )
)]
pub async fn remove_member(
    State(state): State<AppState>,
    id: Result<Path<NodeId>, PathRejection>,
) -> Result<Json<ClusterStatus>, Error> {
    let id = body::path(id)?;
    state.cluster.remove_member(id).await?;
    Ok(Json(state.cluster.status()))
}

/// Commits an entry that changes nothing (`Request::Noop`, new in 0.2.0): proves that the cluster
/// commits commands that need cluster version 0.2.0, the check an upgrade ends with.
#[utoipa::path(
    post,
    path = "/v1/cluster/noop",
    tag = "cluster",
    summary = "Commit an entry that changes nothing",
    security((), ("secret" = [])),
    responses(
        (status = 200, description = "Committed; the cluster status after", body = ClusterStatus),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong secret", body = crate::error::ErrorBody),
        (status = 409, description = "`FEATURE_NOT_ENABLED`: the cluster version is below 0.2.0; the message names \
            the members still behind", body = crate::error::ErrorBody),
        (status = 503, description = "`NO_LEADER`", body = crate::error::ErrorBody),
    )
)]
pub async fn noop(State(state): State<AppState>) -> Result<Json<ClusterStatus>, Error> {
    state.cluster.write(leafraft_state::Request::Noop).await?;
    Ok(Json(state.cluster.status()))
}
