//! Scrambled tags at the HTTP edge: their creation's command (with the key drawn here), and
//! `/v1/tags/{tag}/unscramble/{id}`, the sequence number behind an ID (admin only).

use axum::extract::rejection::PathRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::Path;
use axum::extract::Query;
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde::Serialize;

use crate::api::body;
use crate::api::AppState;
use crate::clock::now_ms;
use crate::error::Error;
use leafraft_state::Request;
use leafraft_state::ScrambleKey;

/// A scrambled ID and the sequence number it was served for.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Unscrambled {
    /// The ID as asked, in decimal.
    pub id: String,
    /// The sequence number the tag's ranges held for it (decimal).
    pub sequence: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnscrambleParams {
    /// `long` (default: the ID in decimal) or `short` (its fixed-length string form).
    format: Option<String>,
}

/// The sequence number behind a scrambled ID: admin only, since it undoes what scrambling hides.
#[utoipa::path(
    get,
    path = "/v1/tags/{tag}/unscramble/{id}",
    tag = "tags",
    summary = "Unscramble an ID (admin)",
    params(
        ("tag" = String, Path, description = "A scrambled tag", pattern = "^[A-Za-z0-9_.:-]{1,128}$"),
        ("id" = String, Path, description = "One of its IDs, in decimal or (with `format=short`) its short form"),
        ("format" = Option<String>, Query, description = "`long` (default) or `short`"),
    ),
    responses(
        (status = 200, description = "The ID and its sequence number", body = Unscrambled,
            example = json!({"id": "5170235712375528671", "sequence": "1001"})),
        (status = 400, description = "`INVALID_ARGUMENT`: bad tag name, format, or an ID outside the tag's ID space",
            body = crate::error::ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong admin token", body = crate::error::ErrorBody),
        (status = 404, description = "`TAG_NOT_FOUND`", body = crate::error::ErrorBody),
        (status = 409, description = "`MODE_MISMATCH`: the tag is not scrambled", body = crate::error::ErrorBody),
        (status = 503, description = "`NOT_READY`", body = crate::error::ErrorBody),
    )
)]
pub async fn unscramble(
    State(state): State<AppState>,
    path: Result<Path<(String, String)>, PathRejection>,
    params: Result<Query<UnscrambleParams>, QueryRejection>,
) -> Result<Json<Unscrambled>, Error> {
    let (tag, id) = body::path(path)?;
    leafraft_state::tag::validate_tag(&tag).map_err(Error::invalid)?;
    let params = body::query(params)?;
    state.cluster.ensure_ready()?;
    let Some(scrambler) = state.segments.scrambler(&tag)? else {
        return Err(if state.cluster.read(|sm| sm.tags.contains_key(&tag)) {
            Error::new(crate::error::ErrorCode::ModeMismatch, format!("tag '{tag}' is not scrambled"))
        } else {
            Error::tag_not_found(&tag)
        });
    };
    let served = match params.format.as_deref() {
        None | Some("long") => id.parse::<u64>().ok(),
        Some("short") => scrambler.from_short(&id),
        Some(other) => return Err(Error::invalid(format!("format must be \"long\" or \"short\", got {other:?}"))),
    };
    let sequence = served.and_then(|served| scrambler.unscramble(served).map(|sequence| (served, sequence)));
    let Some((served, sequence)) = sequence else {
        return Err(Error::invalid(format!("{id:?} is not an ID of tag '{tag}'")));
    };
    Ok(Json(Unscrambled { id: served.to_string(), sequence: sequence.to_string() }))
}

/// The width of a new tag's ID space: `scramble_bits` (default 63), which only a scrambled tag
/// may have.
pub fn bits(scramble: bool, scramble_bits: Option<u8>) -> Result<u8, Error> {
    match (scramble, scramble_bits) {
        (true, bits) => Ok(bits.unwrap_or(ScrambleKey::MAX_BITS)),
        (false, None) => Ok(ScrambleKey::MAX_BITS),
        (false, Some(_)) => Err(Error::invalid("scramble_bits is for scrambled tags: add \"scramble\": true")),
    }
}

/// The command that creates a scrambled tag, with a key drawn now.
pub fn create(tag: String, max_id: u64, step: u64, description: String, bits: u8) -> Result<Request, Error> {
    let key = ScrambleKey { key: new_scramble_key()?, bits };
    key.validate().map_err(Error::invalid)?;
    if max_id >= key.id_limit() {
        return Err(Error::invalid(format!(
            "max_id {max_id} lies outside a {bits}-bit ID space (IDs below {})",
            key.id_limit()
        )));
    }
    Ok(Request::CreateScrambledTag { tag, max_id, step, description, now_ms: now_ms(), key })
}

/// A scrambled tag's key: 128 bits from the operating system's generator, drawn once.
fn new_scramble_key() -> Result<u128, Error> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| Error::not_ready(format!("cannot draw a key for the scrambled tag: {e}")))?;
    Ok(u128::from_le_bytes(bytes))
}
