//! Time-sequence IDs over HTTP: `/v1/timeseq/{ns}` (IDs, or the namespace without `shard`), its
//! decode, and the Leaf-style text path `/api/timeseq/get/{ns}`.

use axum::extract::rejection::PathRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::Path;
use axum::extract::Query;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde::Serialize;

use crate::api::body;
use crate::api::namespaces;
use crate::api::path_tag::PathTag;
use crate::api::respond::leaf_error;
use crate::api::respond::leaf_text;
use crate::api::respond::rfc3339;
use crate::api::AppState;
use crate::error::Error;
use crate::error::ErrorCode;
use leafraft_ids::timeseq::layout::check_prefix;
use leafraft_ids::timeseq::Layout;
use leafraft_ids::timeseq::Parts;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdParams {
    #[serde(default, deserialize_with = "body::shard")]
    pub shard: Option<u64>,
    #[serde(default, deserialize_with = "body::count")]
    pub count: Option<u64>,
    pub format: Option<String>,
    pub prefix: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TimeseqIds {
    pub namespace: String,
    /// Decimal strings (long form) or string-form IDs.
    pub ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DecodedTimeseqId {
    pub id: String,
    /// Unix seconds.
    pub seconds: u64,
    pub time: String,
    pub shard: u64,
    pub sequence: u64,
}

/// How an answer writes its IDs.
enum Form {
    Long,
    String(String),
}

fn form(params: &IdParams) -> Result<Form, Error> {
    let prefix = params.prefix.clone().unwrap_or_default();
    check_prefix(&prefix).map_err(|e| Error::invalid(e.to_string()))?;
    match params.format.as_deref() {
        None | Some("long") if params.prefix.is_none() => Ok(Form::Long),
        None | Some("string") => Ok(Form::String(prefix)),
        Some("long") => Err(Error::invalid("a prefix applies only to format=string")),
        Some(other) => Err(Error::invalid(format!("format must be long or string, got {other:?}"))),
    }
}

fn write(layout: &Layout, form: &Form, parts: &[Parts]) -> Result<Vec<String>, Error> {
    parts.iter().map(|parts| write_one(layout, form, *parts)).collect()
}

fn write_one(layout: &Layout, form: &Form, parts: Parts) -> Result<String, Error> {
    let written = match form {
        Form::Long => layout.encode(parts).map(|id| itoa::Buffer::new().format(id).to_string()),
        Form::String(prefix) => layout.format(prefix, parts),
    };
    // An error here means the clock left the namespace's time bits: nothing was valid to serve.
    written.map_err(|e| Error::new(ErrorCode::ClockAhead, e.to_string()))
}

async fn next(state: &AppState, namespace: &str, params: &IdParams, count: u64) -> Result<Vec<String>, Error> {
    let shard = params.shard.ok_or_else(|| Error::invalid("shard is required"))?;
    let form = form(params)?;
    let parts = state.timeseq.next_ids(namespace, shard, count).await?;
    write(&state.timeseq.layout(namespace)?, &form, &parts)
}

/// IDs of a namespace for one shard; without `shard`, the namespace itself.
#[utoipa::path(
    get,
    path = "/v1/timeseq/{ns}",
    tag = "timeseq",
    summary = "Time-sequence IDs (or the namespace, without shard)",
    params(
        ("ns" = String, Path, description = "The namespace", pattern = "^[A-Za-z0-9_.:-]{1,128}$"),
        ("shard" = Option<u64>, Query, description = "The caller's shard, 0 to 2^shard_bits − 1; without it the \
            namespace is answered"),
        ("count" = Option<u64>, Query, description = "1 to 10000 (default 1)", minimum = 1, maximum = 10000),
        ("format" = Option<String>, Query, description = "long (default) or string"),
        ("prefix" = Option<String>, Query, description = "String form prefix: at most 32 of A-Z a-z 0-9 - _"),
    ),
    responses(
        (status = 200, description = "The IDs, or the namespace (`NamespaceView`) without shard", body = TimeseqIds),
        (status = 400, description = "`INVALID_ARGUMENT`", body = crate::error::ErrorBody),
        (status = 404, description = "`NAMESPACE_NOT_FOUND`", body = crate::error::ErrorBody),
        (status = 503, description = "`CLOCK_BACKWARDS`, `CLOCK_AHEAD`, `SECOND_EXHAUSTED`, `NO_LEADER`, `NOT_READY`",
            body = crate::error::ErrorBody),
    )
)]
pub async fn ids(
    State(state): State<AppState>,
    namespace: PathTag,
    params: Result<Query<IdParams>, QueryRejection>,
) -> Result<Response, Error> {
    let namespace = namespace.valid()?.as_str().to_string();
    let params = body::query(params)?;
    if params.shard.is_none() && params.count.is_none() && params.format.is_none() && params.prefix.is_none() {
        return Ok(Json(namespaces::get(&state, &namespace)?).into_response());
    }
    let ids = next(&state, &namespace, &params, params.count.unwrap_or(1)).await?;
    Ok(Json(TimeseqIds { namespace, ids }).into_response())
}

/// Leaf-style codes: −1 not ready, −2 unknown namespace or bad input, −3 no range (no quorum,
/// second exhausted), −4 clock refused.
fn leaf_timeseq_code(code: ErrorCode) -> i32 {
    match code {
        ErrorCode::NamespaceNotFound | ErrorCode::InvalidArgument => -2,
        ErrorCode::SecondExhausted | ErrorCode::NoLeader => -3,
        ErrorCode::ClockBackwards | ErrorCode::ClockAhead | ErrorCode::ClockUnchecked => -4,
        _ => -1,
    }
}

/// One ID as text, with Leaf's error bodies.
#[utoipa::path(
    get,
    path = "/api/timeseq/get/{ns}",
    tag = "leaf",
    summary = "One time-sequence ID as text (Leaf-style)",
    params(
        ("ns" = String, Path, description = "The namespace"),
        ("shard" = u64, Query, description = "The caller's shard"),
        ("format" = Option<String>, Query, description = "long (default) or string"),
        ("prefix" = Option<String>, Query, description = "String form prefix"),
    ),
    responses(
        (status = 200, description = "The ID", content_type = "text/plain", body = String),
        (status = 500, description = "Leaf's error: -1 not ready, -2 unknown namespace or bad input, -3 no range \
            (no quorum or second exhausted), -4 clock refused", content_type = "text/plain", body = String,
            example = "Result{id=-2, status=EXCEPTION}"),
    )
)]
pub async fn leaf_get(
    State(state): State<AppState>,
    namespace: PathTag,
    params: Result<Query<IdParams>, QueryRejection>,
) -> Response {
    let (Ok(namespace), Ok(Query(params))) = (namespace.0, params) else {
        return leaf_error(-2);
    };
    match next_one(&state, namespace.as_str(), &params).await {
        Ok(id) => leaf_text(id),
        Err(e) => leaf_error(leaf_timeseq_code(e.code)),
    }
}

async fn next_one(state: &AppState, namespace: &str, params: &IdParams) -> Result<String, Error> {
    let shard = params.shard.ok_or_else(|| Error::invalid("shard is required"))?;
    let form = form(params)?;
    let (parts, layout) = state.timeseq.next_id(namespace, shard).await?;
    write_one(&layout, &form, parts)
}

/// Takes an ID of either form apart.
#[utoipa::path(
    get,
    path = "/v1/timeseq/{ns}/decode/{id}",
    tag = "timeseq",
    summary = "Decode a time-sequence ID (long or string form)",
    params(("ns" = String, Path, description = "The namespace"), ("id" = String, Path, description = "The ID")),
    responses(
        (status = 200, description = "Its parts", body = DecodedTimeseqId),
        (status = 400, description = "`INVALID_ARGUMENT`: not an ID of this namespace", body = crate::error::ErrorBody),
        (status = 404, description = "`NAMESPACE_NOT_FOUND`", body = crate::error::ErrorBody),
    )
)]
pub async fn decode(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<DecodedTimeseqId>, Error> {
    let (namespace, id) = body::path(path)?;
    let layout = state.timeseq.layout(&namespace)?;
    let parts = layout.parse_any(&id).map_err(|e| Error::invalid(e.to_string()))?;
    Ok(Json(DecodedTimeseqId {
        id,
        seconds: parts.second,
        time: rfc3339(parts.second.saturating_mul(1000)),
        shard: parts.shard,
        sequence: parts.sequence,
    }))
}
