//! `GET /v1/backup`: a consistent copy of the replicated state (`leafraft backup` writes it to a
//! file; `leafraft recover --from FILE` reads it). Needs the secret when the node has one: the
//! copy holds every tag.

use axum::extract::State;
use axum::http::header::CONTENT_DISPOSITION;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::response::Response;

use crate::api::AppState;
use crate::backup;
use crate::backup::Backup;
use crate::error::Error;

/// The state is read after a read index through the leader, so it holds every command committed
/// before the request; `taken_at_ms` is this node's clock read *before* asking, so every claim
/// committed before that instant is in the copy (the recovery margin counts from it).
#[utoipa::path(
    get,
    path = "/v1/backup",
    tag = "operations",
    summary = "Back up the replicated state",
    description = "A consistent copy of the tags and the snowflake registry at a known applied log index, read through \
                   the leader, versioned and checksummed (layout: `src/backup.rs`). Restore it with \
                   `leafraft recover --from FILE` (docs/operations.md).",
    responses(
        (status = 200, description = "The backup file", content_type = "application/vnd.leafraft.backup",
            body = crate::api::schemas::BackupFile),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong secret", body = crate::error::ErrorBody),
        (status = 503, description = "`NO_LEADER`: the leader could not confirm a read index in time",
            body = crate::error::ErrorBody),
    )
)]
pub async fn backup(State(state): State<AppState>) -> Result<Response, Error> {
    let taken_at_ms = crate::clock::now_ms();
    state.cluster.linearize().await?;
    let backup = state.cluster.read(|sm| Backup {
        cluster_id: sm.cluster_id,
        taken_at_ms,
        applied_index: sm.last_applied.map_or(0, |id| id.index),
        applied_term: sm.last_applied.map_or(0, |id| id.leader_id.term),
        tags: sm.tags.clone(),
        snowflake: sm.snowflake.clone(),
        timeseq: sm.timeseq.clone(),
        scramble_keys: sm.scramble_keys.clone(),
    });
    let bytes = backup::encode(&backup).map_err(|e| Error::not_ready(e.to_string()))?;
    tracing::info!(applied_index = backup.applied_index, tags = backup.tags.len(), bytes = bytes.len(), "backup taken");
    let file_name =
        format!("attachment; filename=\"leafraft-{:016x}-{}.backup\"", backup.cluster_id, backup.applied_index);
    Ok(([(CONTENT_TYPE, backup::CONTENT_TYPE.to_string()), (CONTENT_DISPOSITION, file_name)], bytes).into_response())
}
