//! `POST /v1/import/tags`: many tags created or raised in one Raft entry (what `leafraft tag
//! import` sends, a batch at a time), all of the batch or none of it.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde::Serialize;

use crate::api::body;
use crate::api::body::MaxId;
use crate::api::body::WholeBody;
use crate::api::AppState;
use crate::clock::now_ms;
use crate::error::Error;
use leafraft_state::ImportRow;
use leafraft_state::Request;
use leafraft_state::Response;

/// The most tags one import request carries.
pub const MAX_IMPORT_ROWS: usize = 1000;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportTags {
    /// 1 to 1000 tags, each at most once; their encoded size is bounded too (48 KiB).
    pub tags: Vec<ImportTag>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportTag {
    pub tag: String,
    /// A new tag starts here; an existing one is raised to at least this (never lowered).
    pub max_id: MaxId,
    pub step: u64,
    /// Missing: a new tag gets an empty description, an existing one keeps its own.
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Imported {
    /// Tags that did not exist.
    pub created: u64,
    /// Existing tags whose `max_id`, step or description changed.
    pub updated: u64,
}

/// Creates or raises a batch of tags in one Raft entry: every tag of it, or none when one is
/// invalid.
#[utoipa::path(
    post,
    path = "/v1/import/tags",
    tag = "tags",
    summary = "Import tags (a batch)",
    request_body = ImportTags,
    responses(
        (status = 200, description = "Applied: how many tags were created and how many changed", body = Imported),
        (status = 400, description = "`INVALID_ARGUMENT`: no tag, more than 1000, a batch over 48 KiB, a bad row \
            (named with its position), a tag twice; nothing applied", body = crate::error::ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong secret", body = crate::error::ErrorBody),
        (status = 503, description = "`NO_LEADER`: the batch may or may not have been applied (applying it again \
            is harmless)", body = crate::error::ErrorBody),
    )
)]
pub async fn import(State(state): State<AppState>, WholeBody(bytes): WholeBody) -> Result<Json<Imported>, Error> {
    let body: ImportTags = body::json(&bytes)?;
    if body.tags.is_empty() || body.tags.len() > MAX_IMPORT_ROWS {
        return Err(Error::invalid(format!("an import carries 1 to {MAX_IMPORT_ROWS} tags, got {}", body.tags.len())));
    }
    let rows = body
        .tags
        .into_iter()
        .map(|t| ImportRow { tag: t.tag, max_id: t.max_id.0, step: t.step, description: t.description })
        .collect();
    let request = Request::ImportTags { rows, now_ms: now_ms() };
    let size = leafraft_state::codec::encode(&request)
        .map_err(|e| Error::invalid(format!("cannot encode the batch: {e}")))?
        .len();
    if size > leafraft_state::codec::MAX_REQUEST_BYTES {
        return Err(Error::invalid(format!(
            "the batch takes {size} bytes, over the {} a Raft entry may; send fewer tags per request",
            leafraft_state::codec::MAX_REQUEST_BYTES
        )));
    }
    match state.cluster.write(request).await? {
        Response::Imported { created, updated } => {
            tracing::info!(created, updated, "tags imported");
            Ok(Json(Imported { created, updated }))
        }
        Response::Rejected(rejection) => Err(Error::from_rejection("", &rejection)),
        other => Err(Error::no_leader(format!("unexpected answer to an import: {other:?}"))),
    }
}
