//! Segment IDs over HTTP: Leaf's `/api/segment/get/{tag}` and the native `/v1/segment/*`.
//!
//! Bodies of the batch answers are written by hand with `itoa`: a `count=1000` answer is
//! mostly decimal strings, and tag names need no JSON escaping (`[A-Za-z0-9_.:-]`).

use axum::extract::rejection::QueryRejection;
use axum::extract::Query;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderValue;
use axum::response::IntoResponse;
use axum::response::Response;

use crate::api::body;
use crate::api::body::CountParams;
use crate::api::path_tag::PathTag;
use crate::api::path_tag::TagName;
use crate::api::respond::leaf_error;
use crate::api::respond::leaf_text;
use crate::api::respond::push_id_list;
use crate::api::AppState;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::services::segments::scramble::scrambled;
use crate::services::segments::scramble::scrambled_all;
use leafraft_ids::scramble::IdScrambler;
use leafraft_ids::IdRange;
use leafraft_state::TagMode;

/// Leaf's segment codes: −1 not initialised, −2 unknown tag, −3 both segments not ready; −5 is
/// leafraft's for an exhausted tag.
pub fn leaf_segment_code(code: ErrorCode) -> i32 {
    match code {
        ErrorCode::TagNotFound | ErrorCode::InvalidArgument => -2,
        ErrorCode::SegmentsNotReady => -3,
        ErrorCode::TagExhausted => -5,
        _ => -1,
    }
}

/// One segment ID as text, as Leaf's `/api/segment/get/{key}`.
#[utoipa::path(
    get,
    path = "/api/segment/get/{tag}",
    tag = "leaf",
    summary = "One segment ID (Leaf-compatible)",
    params(("tag" = String, Path, description = "The business tag (Leaf's biz_tag)", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    responses(
        (status = 200, description = "The ID in decimal", content_type = "text/plain", body = String, example = "1001"),
        (status = 500, description = "Leaf's error: -1 not ready, -2 unknown tag, -3 both segments not ready, -5 tag \
            exhausted", content_type = "text/plain", body = String, example = "Result{id=-2, status=EXCEPTION}"),
    )
)]
pub async fn leaf_get(State(state): State<AppState>, tag: PathTag) -> Response {
    let Ok(tag) = tag.0 else {
        return leaf_error(leaf_segment_code(ErrorCode::InvalidArgument));
    };
    // A ready ID answers without the waiting path's (large) future in this one, which axum boxes
    // whole for every request; only a request that has to wait boxes that path.
    let id = match state.segments.ready_id(tag.as_str()) {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Box::pin(state.segments.next_id(tag.as_str())).await,
        Err(e) => Err(e),
    };
    match id {
        Ok(id) => leaf_text(itoa::Buffer::new().format(id).to_owned()),
        Err(e) => leaf_error(leaf_segment_code(e.code)),
    }
}

/// `/v1/segment/{tag}`'s query: `count`, and for a scrambled tag the form of its IDs.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdsParams {
    #[serde(default, deserialize_with = "body::count")]
    pub count: Option<u64>,
    /// `long` (default: decimal) or `short` (a scrambled tag's fixed-length strings).
    pub format: Option<String>,
}

/// Whether IDs are written in their short form (`format=short`, scrambled tags only).
fn short_form(format: Option<&str>, scrambler: Option<&IdScrambler>, tag: &str) -> Result<bool, Error> {
    match (format, scrambler) {
        (None | Some("long"), _) => Ok(false),
        (Some("short"), Some(_)) => Ok(true),
        (Some("short"), None) => {
            Err(Error::invalid(format!("format=short is for scrambled tags; tag '{tag}' is not scrambled")))
        }
        (Some(other), _) => Err(Error::invalid(format!("format must be \"long\" or \"short\", got {other:?}"))),
    }
}

fn tag_and_count(tag: PathTag, params: Result<Query<CountParams>, QueryRejection>) -> Result<(TagName, u64), Error> {
    Ok((tag.valid()?, body::query(params)?.count.unwrap_or(1)))
}

/// `{"tag":"...","ids":["7KQ2...",...]}`: a scrambled tag's IDs in their short form.
fn short_ids_body(tag: &str, scrambler: &IdScrambler, ids: impl Iterator<Item = u64>) -> Result<String, Error> {
    let mut out = String::with_capacity(32 + tag.len());
    out.push_str("{\"tag\":\"");
    out.push_str(tag);
    out.push_str("\",\"ids\":[");
    for (i, id) in ids.enumerate() {
        if i > 0 {
            out.push(',');
        }
        let short = scrambler
            .short(scrambled(scrambler, id)?)
            .ok_or_else(|| Error::new(ErrorCode::SegmentsNotReady, format!("{id} has no short form")))?;
        out.push('"');
        out.push_str(&short);
        out.push('"');
    }
    out.push_str("]}");
    Ok(out)
}

fn json(body: String) -> Response {
    let mut response = body.into_response();
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// `count` segment IDs of a tag as a JSON list.
#[utoipa::path(
    get,
    path = "/v1/segment/{tag}",
    tag = "ids",
    summary = "Segment IDs",
    params(
        ("tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9_.:-]{1,128}$"),
        ("count" = Option<u64>, Query, description = "How many IDs, 1 to 10000 (default 1)", minimum = 1, maximum = 10000),
        ("format" = Option<String>, Query, description = "`long` (default, decimal) or, for a scrambled tag, `short` \
            (fixed-length strings over digits and capitals without I, L, O, U)"),
    ),
    responses(
        (status = 200, description = "Strictly increasing IDs from this node's buffers; for a monotonic tag, from \
            the leader, larger than every ID of the tag any client received before the request was sent; for a \
            scrambled tag, each one's image under the tag's permutation (unique, in no visible order)",
            body = crate::api::schemas::SegmentIds),
        (status = 400, description = "`INVALID_ARGUMENT`: bad tag name or count", body = crate::error::ErrorBody,
            example = json!({"error": {"code": "INVALID_ARGUMENT", "message": "count must be 1 to 10000"}})),
        (status = 404, description = "`TAG_NOT_FOUND`", body = crate::error::ErrorBody,
            example = json!({"error": {"code": "TAG_NOT_FOUND", "message": "tag 'x' does not exist"}})),
        (status = 409, description = "`TAG_EXHAUSTED`: the tag has handed out its last ID", body = crate::error::ErrorBody),
        (status = 503, description = "`NOT_READY` or `SEGMENTS_NOT_READY` (both buffers empty after the bounded wait)",
            body = crate::error::ErrorBody),
    )
)]
pub async fn ids(
    State(state): State<AppState>,
    tag: PathTag,
    params: Result<Query<IdsParams>, QueryRejection>,
) -> Result<Response, Error> {
    let tag = tag.valid()?;
    let params = body::query(params)?;
    let count = params.count.unwrap_or(1);
    let tag = tag.as_str();
    if params.format.is_none() {
        // One ID from a ready buffer: no list of ranges, no boxed wait (as on Leaf's path).
        if count == 1 {
            if let Some(id) = state.segments.ready_id(tag)? {
                return Ok(json(ids_body(tag, 1, std::iter::once(id))));
            }
        }
    }
    let scrambler = state.segments.scrambler(tag)?;
    let short = short_form(params.format.as_deref(), scrambler.as_deref(), tag)?;
    let ranges = Box::pin(state.segments.next_ids(tag, count)).await?;
    let n_ids: u64 = ranges.iter().map(IdRange::len).sum();
    let ids = ranges.iter().flat_map(|range| range.start..range.end);
    let body = match &scrambler {
        // A scrambled tag has its key from its creation, so `scrambler` was read before the IDs
        // were taken without a race: no tag gains or loses one.
        Some(scrambler) if short => short_ids_body(tag, scrambler, ids)?,
        Some(scrambler) => {
            let mut images: Vec<u64> = ids.collect();
            scrambled_all(scrambler, &mut images)?;
            ids_body(tag, n_ids, images.into_iter())
        }
        None => ids_body(tag, n_ids, ids),
    };
    Ok(json(body))
}

/// `{"tag":"...","ids":["1",...]}` for `n_ids` IDs.
fn ids_body(tag: &str, n_ids: u64, ids: impl Iterator<Item = u64>) -> String {
    let mut out = String::with_capacity(32 + tag.len() + usize::try_from(n_ids).unwrap_or(0) * 22);
    out.push_str("{\"tag\":\"");
    out.push_str(tag);
    out.push_str("\",");
    push_id_list(&mut out, ids);
    out.push('}');
    out
}

/// `count` segment IDs of a tag as half-open ranges, for clients that cache locally.
#[utoipa::path(
    get,
    path = "/v1/segment/{tag}/ranges",
    tag = "ids",
    summary = "Segment IDs as ranges",
    params(
        ("tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9_.:-]{1,128}$"),
        ("count" = Option<u64>, Query, description = "How many IDs in total, 1 to 10000 (default 1)", minimum = 1,
            maximum = 10000),
    ),
    responses(
        (status = 200, description = "Increasing half-open ranges `[start, end)` totalling `count` IDs; for a \
            monotonic tag, from the leader, one range of `count` consecutive IDs, larger than every ID of the tag any \
            client received before the request was sent", body = crate::api::schemas::SegmentRanges),
        (status = 400, description = "`INVALID_ARGUMENT`: bad tag name or count", body = crate::error::ErrorBody),
        (status = 404, description = "`TAG_NOT_FOUND`", body = crate::error::ErrorBody),
        (status = 409, description = "`TAG_EXHAUSTED`; `MODE_MISMATCH` for a scrambled tag (its IDs form no \
            range); or `FEATURE_NOT_ENABLED` for a monotonic tag while the cluster version is below 0.3.0",
            body = crate::error::ErrorBody),
        (status = 503, description = "`NOT_READY` or `SEGMENTS_NOT_READY`", body = crate::error::ErrorBody),
    )
)]
pub async fn ranges(
    State(state): State<AppState>,
    tag: PathTag,
    params: Result<Query<CountParams>, QueryRejection>,
) -> Result<Response, Error> {
    let (tag, count) = tag_and_count(tag, params)?;
    let tag = tag.as_str();
    if state.segments.scrambler(tag)?.is_some() {
        return Err(Error::new(
            ErrorCode::ModeMismatch,
            format!("tag '{tag}' is scrambled: its IDs are no contiguous range; ask /v1/segment/{tag}?count=N"),
        ));
    }
    let ranges = match state.cluster.tag_mode(tag) {
        Some(TagMode::Monotonic) => vec![monotonic_range(&state, tag, count).await?],
        _ => match state.segments.next_ranges(tag, count).await {
            // The tag moved to monotonic under this request.
            Err(e) if e.code == ErrorCode::ModeMismatch => vec![monotonic_range(&state, tag, count).await?],
            other => other?,
        },
    };
    let mut out = String::with_capacity(32 + tag.len() + ranges.len() * 48);
    let mut buffer = itoa::Buffer::new();
    out.push_str("{\"tag\":\"");
    out.push_str(tag);
    out.push_str("\",\"ranges\":[");
    for (i, range) in ranges.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"start\":\"");
        out.push_str(buffer.format(range.start));
        out.push_str("\",\"end\":\"");
        out.push_str(buffer.format(range.end));
        out.push_str("\"}");
    }
    out.push_str("]}");
    Ok(json(out))
}

/// One range of `count` consecutive IDs of a monotonic tag, from the leader (`docs/semantics.md#strictly-increasing-tags`).
async fn monotonic_range(state: &AppState, tag: &str, count: u64) -> Result<IdRange, Error> {
    if count == 0 || count > body::MAX_COUNT {
        return Err(Error::invalid(format!("count must be between 1 and {}, got {count}", body::MAX_COUNT)));
    }
    state.segments.monotonic().take_range(tag, count).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_codes() {
        assert_eq!(leaf_segment_code(ErrorCode::NotReady), -1);
        assert_eq!(leaf_segment_code(ErrorCode::TagNotFound), -2);
        assert_eq!(leaf_segment_code(ErrorCode::SegmentsNotReady), -3);
        assert_eq!(leaf_segment_code(ErrorCode::TagExhausted), -5);
    }
}
