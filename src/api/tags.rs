//! `/v1/tags`: create, list, get and change tags.

use axum::extract::rejection::PathRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::Path;
use axum::extract::Query;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde::Serialize;

use crate::api::body;
use crate::api::body::MaxId;
use crate::api::body::WholeBody;
use crate::api::respond::rfc3339;
use crate::api::respond::RangeView;
use crate::api::AppState;
use crate::clock::now_ms;
use crate::error::Error;
use crate::services::segments::BufferState;
use leafraft_state::Request;
use leafraft_state::Response;
use leafraft_state::TagMode;
use leafraft_state::TagRecord;

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTag {
    pub tag: String,
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "ser_max_id")]
    pub max_id: Option<MaxId>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "body::step")]
    pub step: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `segment` (default: every node serves from its own ranges) or `monotonic` (the leader
    /// serves, in real-time order across the cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "monotonic")]
    pub mode: Option<String>,
    /// Serve the tag's IDs through a keyed permutation of its ID space, so that they reveal
    /// neither how many were handed out nor their order (segment tags only; fixed at creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scramble: Option<bool>,
    /// A scrambled tag's ID space: IDs in `[1, 2^bits - 1)`, 16 to 63 bits (default 63: every
    /// ID a tag can have). Narrower spaces give shorter IDs, and the tag is exhausted sooner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scramble_bits: Option<u8>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTag {
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "body::step")]
    pub step: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "ser_max_id")]
    pub max_id: Option<MaxId>,
    /// `monotonic` moves a segment tag to monotonic; nothing moves a tag back (`MODE_MISMATCH`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// A mode as the API spells it.
fn parse_mode(mode: Option<&str>) -> Result<Option<TagMode>, Error> {
    mode.map(|text| {
        TagMode::parse(text)
            .ok_or_else(|| Error::invalid(format!("mode must be \"segment\" or \"monotonic\", got {text:?}")))
    })
    .transpose()
}

fn ser_max_id<S: serde::Serializer>(max_id: &Option<MaxId>, s: S) -> Result<S::Ok, S::Error> {
    match max_id {
        Some(MaxId(v)) => s.serialize_str(&v.to_string()),
        None => s.serialize_none(),
    }
}

/// This node's buffer state for one tag, as `/v1/tags/{tag}` shows it: IDs as decimal strings,
/// times in RFC 3339.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BufferView {
    pub current: Option<RangeView>,
    pub cursor: Option<String>,
    pub next: Option<RangeView>,
    pub loading: bool,
    pub step: Option<u64>,
    pub last_claim_at: Option<String>,
    pub ids_issued: u64,
    pub claims: u64,
    /// Requests that found both segments used up and waited for a claim.
    pub waits: u64,
    pub ids_per_sec: f64,
}

impl From<BufferState> for BufferView {
    fn from(state: BufferState) -> BufferView {
        BufferView {
            current: state.current.map(RangeView::from),
            cursor: state.cursor.map(|cursor| cursor.to_string()),
            next: state.next.map(RangeView::from),
            loading: state.loading,
            step: state.step,
            last_claim_at: state.last_claim_at_ms.map(rfc3339),
            ids_issued: state.ids_issued,
            claims: state.claims,
            waits: state.waits,
            ids_per_sec: state.ids_per_sec,
        }
    }
}

/// A tag as the API shows it: `max_id` as a decimal string, times in RFC 3339.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TagView {
    pub tag: String,
    pub max_id: String,
    pub step: u64,
    pub description: String,
    pub created_at: String,
    pub updated_at: String,
    /// `segment` or `monotonic`.
    pub mode: String,
    /// Whether the tag's IDs are served scrambled (absent: not scrambled).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scramble: bool,
    /// A scrambled tag's ID space is `[1, 2^scramble_bits - 1)` (absent for other tags).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scramble_bits: Option<u8>,
    /// This node's buffers for the tag (null until it has served the tag).
    pub buffers: Option<BufferView>,
}

impl TagView {
    pub fn new(tag: &str, record: &TagRecord) -> TagView {
        TagView {
            tag: tag.to_string(),
            max_id: record.max_id.to_string(),
            step: record.step,
            description: record.description.clone(),
            created_at: rfc3339(record.created_at_ms),
            updated_at: rfc3339(record.updated_at_ms),
            mode: record.mode.as_str().to_string(),
            scramble: false,
            scramble_bits: None,
            buffers: None,
        }
    }

    /// The view of a tag as the replica `state` holds it.
    pub fn of(tag: &str, record: &TagRecord, state: &leafraft_state::IdStateMachine) -> TagView {
        let key = state.scramble_keys.get(tag);
        TagView { scramble: key.is_some(), scramble_bits: key.map(|key| key.bits), ..TagView::new(tag, record) }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    #[serde(default)]
    consistent: bool,
}

/// `GET /v1/tags`: a consistent read and a page.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    #[serde(default)]
    consistent: bool,
    limit: Option<usize>,
    after: Option<String>,
}

/// The most tags one page of `GET /v1/tags` holds (and its default).
pub const MAX_PAGE: usize = 1000;

async fn prepare_read(state: &AppState, params: Result<Query<ReadParams>, QueryRejection>) -> Result<(), Error> {
    let params = body::query(params)?;
    linearize_if(state, params.consistent).await
}

async fn linearize_if(state: &AppState, consistent: bool) -> Result<(), Error> {
    state.cluster.ensure_ready()?;
    if consistent {
        state.cluster.linearize().await?;
    }
    Ok(())
}

#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TagList {
    pub tags: Vec<TagView>,
    /// The `after` of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// Every tag, with this node's buffers.
#[utoipa::path(
    get,
    path = "/v1/tags",
    tag = "tags",
    summary = "List tags",
    params(
        ("consistent" = Option<bool>, Query, description = "Read through the leader (linearizable); default false: \
            this node's replica"),
        ("limit" = Option<usize>, Query, description = "Tags per page, 1 to 1000 (default 1000)", minimum = 1, maximum = 1000),
        ("after" = Option<String>, Query, description = "Start after this tag: the `next` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of tags, by name; `next` names where the following page starts", body = TagList),
        (status = 400, description = "`INVALID_ARGUMENT`: bad query string", body = crate::error::ErrorBody),
        (status = 503, description = "`NOT_READY`, or `NO_LEADER` for a consistent read", body = crate::error::ErrorBody),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<TagList>, Error> {
    let params = body::query(params)?;
    let limit = params.limit.unwrap_or(MAX_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(Error::invalid(format!("limit must be between 1 and {MAX_PAGE}, got {limit}")));
    }
    linearize_if(&state, params.consistent).await?;
    let (mut tags, next) = state.cluster.read(|sm| {
        let start = match &params.after {
            Some(after) => std::ops::Bound::Excluded(after.as_str()),
            None => std::ops::Bound::Unbounded,
        };
        let mut page = sm.tags.range::<str, _>((start, std::ops::Bound::Unbounded));
        let tags: Vec<TagView> = page.by_ref().take(limit).map(|(tag, record)| TagView::of(tag, record, sm)).collect();
        let next = page.next().and(tags.last().map(|view| view.tag.clone()));
        (tags, next)
    });
    for view in &mut tags {
        view.buffers = state.segments.view(&view.tag).map(BufferView::from);
    }
    Ok(Json(TagList { tags, next }))
}

/// One tag, with this node's buffers.
#[utoipa::path(
    get,
    path = "/v1/tags/{tag}",
    tag = "tags",
    summary = "Get a tag",
    params(
        ("tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9_.:-]{1,128}$"),
        ("consistent" = Option<bool>, Query, description = "Read through the leader (linearizable)"),
    ),
    responses(
        (status = 200, description = "The tag", body = TagView),
        (status = 400, description = "`INVALID_ARGUMENT`: bad tag name or query string", body = crate::error::ErrorBody),
        (status = 404, description = "`TAG_NOT_FOUND`", body = crate::error::ErrorBody,
            example = json!({"error": {"code": "TAG_NOT_FOUND", "message": "tag 'x' does not exist"}})),
        (status = 503, description = "`NOT_READY`, or `NO_LEADER` for a consistent read", body = crate::error::ErrorBody),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    tag: Result<Path<String>, PathRejection>,
    params: Result<Query<ReadParams>, QueryRejection>,
) -> Result<Json<TagView>, Error> {
    let tag = body::path(tag)?;
    leafraft_state::tag::validate_tag(&tag).map_err(Error::invalid)?;
    prepare_read(&state, params).await?;
    let view = state.cluster.read(|sm| sm.tags.get(&tag).map(|record| TagView::of(&tag, record, sm)));
    let mut view = view.ok_or_else(|| Error::tag_not_found(&tag))?;
    view.buffers = state.segments.view(&tag).map(BufferView::from);
    Ok(Json(view))
}

/// Creates a tag; `max_id` (default 1) lets a user move from Leaf or a database without going back.
#[utoipa::path(
    post,
    path = "/v1/tags",
    tag = "tags",
    summary = "Create a tag",
    request_body = CreateTag,
    responses(
        (status = 201, description = "Created", body = TagView),
        (status = 400, description = "`INVALID_ARGUMENT`: bad name, step (1 to 10,000,000), max_id (1 to 2^63 − 1), \
            description (at most 1024 bytes), unknown field or malformed JSON", body = crate::error::ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong secret", body = crate::error::ErrorBody),
        (status = 409, description = "`TAG_EXISTS` (also for a different mode)", body = crate::error::ErrorBody,
            example = json!({"error": {"code": "TAG_EXISTS", "message": "tag 'order' already exists"}})),
        (status = 503, description = "`NO_LEADER`: the write may or may not have been applied", body = crate::error::ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    WholeBody(bytes): WholeBody,
) -> Result<(StatusCode, Json<TagView>), Error> {
    let create: CreateTag = body::json(&bytes)?;
    let description = create.description.unwrap_or_default();
    let max_id = create.max_id.map_or(1, |MaxId(v)| v);
    let step = create.step.unwrap_or(1000);
    leafraft_state::tag::validate_tag(&create.tag)
        .and_then(|()| leafraft_state::tag::validate_step(step))
        .and_then(|()| leafraft_state::tag::validate_description(&description))
        .map_err(Error::invalid)?;
    let tag = create.tag.clone();
    let scramble = create.scramble.unwrap_or(false);
    let bits = crate::api::scramble::bits(scramble, create.scramble_bits)?;
    let request = match (parse_mode(create.mode.as_deref())?, scramble) {
        (None | Some(TagMode::Segment), false) => {
            Request::CreateTag { tag, max_id, step, description, now_ms: now_ms() }
        }
        (None | Some(TagMode::Segment), true) => crate::api::scramble::create(tag, max_id, step, description, bits)?,
        (Some(TagMode::Monotonic), true) => {
            return Err(Error::invalid(
                "a monotonic tag cannot be scrambled: its IDs promise real-time order, which scrambling hides",
            ))
        }
        (Some(mode), false) => Request::CreateTagInMode { tag, max_id, step, description, now_ms: now_ms(), mode },
    };
    let mut view = tag_reply(&create.tag, state.cluster.write(request).await?)?;
    view.scramble = scramble;
    view.scramble_bits = scramble.then_some(bits);
    tracing::info!(tag = %view.tag, max_id = %view.max_id, step = view.step, "tag created");
    Ok((StatusCode::CREATED, Json(view)))
}

/// Changes step and description, and raises `max_id` (never lowers it).
#[utoipa::path(
    patch,
    path = "/v1/tags/{tag}",
    tag = "tags",
    summary = "Update a tag",
    params(("tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    request_body = UpdateTag,
    responses(
        (status = 200, description = "The tag after the change", body = TagView),
        (status = 400, description = "`INVALID_ARGUMENT`", body = crate::error::ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`: missing or wrong secret", body = crate::error::ErrorBody),
        (status = 404, description = "`TAG_NOT_FOUND`", body = crate::error::ErrorBody),
        (status = 409, description = "`MAX_ID_DECREASE`: max_id may only rise; `MODE_MISMATCH`: a monotonic tag \
            cannot go back to segment", body = crate::error::ErrorBody,
            example = json!({"error": {"code": "MAX_ID_DECREASE", "message": "max_id of tag 'order' may only rise; it is 5000"}})),
        (status = 503, description = "`NO_LEADER`; `MEMBERS_BEHIND`: the move to monotonic is committed, but the \
            members named have not applied it yet (ask again to wait again)", body = crate::error::ErrorBody),
    )
)]
pub async fn update(
    State(state): State<AppState>,
    tag: Result<Path<String>, PathRejection>,
    WholeBody(bytes): WholeBody,
) -> Result<Json<TagView>, Error> {
    let tag = body::path(tag)?;
    leafraft_state::tag::validate_tag(&tag).map_err(Error::invalid)?;
    let update: UpdateTag = body::json(&bytes)?;
    update.step.map_or(Ok(()), leafraft_state::tag::validate_step).map_err(Error::invalid)?;
    update.description.as_deref().map_or(Ok(()), leafraft_state::tag::validate_description).map_err(Error::invalid)?;
    let mode = parse_mode(update.mode.as_deref())?;
    // The mode goes first: a refused move back to segment changes nothing else either.
    if let Some(mode) = mode {
        let mut view = tag_reply(
            &tag,
            state.cluster.write(Request::SetTagMode { tag: tag.clone(), mode, now_ms: now_ms() }).await?,
        )?;
        let key = state.cluster.read(|sm| sm.scramble_keys.get(&tag).copied());
        (view.scramble, view.scramble_bits) = (key.is_some(), key.map(|key| key.bits));
        // Each member stops serving the tag from its segment buffers when it applies the move:
        // answered once all of them have, so that every ID from the answer on is above every ID
        // served before (503 `MEMBERS_BEHIND` otherwise; the move stays committed).
        if mode == TagMode::Monotonic {
            state.cluster.confirm_every_member_applied(&format!("the move of tag '{tag}' to monotonic")).await?;
        }
        if update.step.is_none() && update.description.is_none() && update.max_id.is_none() {
            tracing::info!(tag = %view.tag, mode = %view.mode, "tag mode set");
            return Ok(Json(view));
        }
    }
    let request = Request::UpdateTag {
        tag: tag.clone(),
        step: update.step,
        description: update.description,
        max_id: update.max_id.map(|MaxId(v)| v),
        now_ms: now_ms(),
    };
    let mut view = tag_reply(&tag, state.cluster.write(request).await?)?;
    let key = state.cluster.read(|sm| sm.scramble_keys.get(&tag).copied());
    (view.scramble, view.scramble_bits) = (key.is_some(), key.map(|key| key.bits));
    tracing::info!(tag = %view.tag, max_id = %view.max_id, step = view.step, "tag updated");
    Ok(Json(view))
}

fn tag_reply(tag: &str, response: Response) -> Result<TagView, Error> {
    match response {
        Response::Tag { tag, record } => Ok(TagView::new(&tag, &record)),
        Response::Rejected(rejection) => Err(Error::from_rejection(tag, &rejection)),
        other => Err(Error::no_leader(format!("unexpected answer to a tag write: {other:?}"))),
    }
}
