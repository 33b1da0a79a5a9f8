//! `/v1/timeseq` admin side: create, list and get time-sequence namespaces (like `/v1/tags`).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde::Serialize;

use crate::api::body;
use crate::api::body::WholeBody;
use crate::api::respond::rfc3339;
use crate::api::AppState;
use crate::clock::now_ms;
use crate::error::Error;
use crate::services::timeseq::NamespaceState;
use leafraft_state::timeseq as limits;
use leafraft_state::NamespaceRecord;

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateNamespace {
    pub namespace: String,
    /// RFC 3339, a whole second (default 2020-01-01T00:00:00Z).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
    /// `UTC`, `Z` or a fixed offset `+08:00` (named zones with daylight saving repeat local times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_bits: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq_bits: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// This node's ranges for one namespace.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RangesView {
    /// `"second:start-end"` of the range being served, Unix seconds.
    pub current: Option<String>,
    pub pending: Vec<String>,
    pub ids_issued: u64,
    pub last_second_ids: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NamespaceView {
    pub namespace: String,
    pub epoch: String,
    pub time_zone: String,
    pub time_bits: u8,
    pub shard_bits: u8,
    pub seq_bits: u8,
    pub description: String,
    pub created_at: String,
    pub ranges: Option<RangesView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NamespaceList {
    pub namespaces: Vec<NamespaceView>,
}

pub fn time_zone_name(offset_s: i32) -> String {
    if offset_s == 0 {
        return "UTC".into();
    }
    let sign = if offset_s < 0 { '-' } else { '+' };
    let abs = offset_s.unsigned_abs();
    format!("{sign}{:02}:{:02}", abs / 3600, abs % 3600 / 60)
}

fn parse_time_zone(zone: &str) -> Result<i32, Error> {
    if zone == "UTC" || zone == "Z" {
        return Ok(0);
    }
    let bad = || Error::invalid(format!("time_zone must be UTC, Z or a fixed offset like +08:00, got {zone:?}"));
    let (sign, rest) = match zone.as_bytes().first() {
        Some(b'+') => (1, &zone[1..]),
        Some(b'-') => (-1, &zone[1..]),
        _ => return Err(bad()),
    };
    let (hours, minutes) = rest.split_once(':').ok_or_else(bad)?;
    if hours.len() != 2 || minutes.len() != 2 {
        return Err(bad());
    }
    let hours: i32 = hours.parse().map_err(|_| bad())?;
    let minutes: i32 = minutes.parse().map_err(|_| bad())?;
    if minutes >= 60 {
        return Err(bad());
    }
    Ok(sign * (hours * 3600 + minutes * 60))
}

fn parse_epoch(epoch: &str) -> Result<u64, Error> {
    let bad = |why: &str| Error::invalid(format!("epoch {epoch:?} {why}"));
    let time = chrono::DateTime::parse_from_rfc3339(epoch).map_err(|_| bad("is not RFC 3339"))?;
    if time.timestamp_subsec_nanos() != 0 {
        return Err(bad("is not a whole second"));
    }
    u64::try_from(time.timestamp()).map_err(|_| bad("is before 1970"))
}

fn view(name: &str, record: &NamespaceRecord, ranges: Option<NamespaceState>) -> NamespaceView {
    NamespaceView {
        namespace: name.to_string(),
        epoch: rfc3339(record.epoch_s.saturating_mul(1000)),
        time_zone: time_zone_name(record.utc_offset_s),
        time_bits: record.time_bits(),
        shard_bits: record.shard_bits,
        seq_bits: record.seq_bits,
        description: record.description.clone(),
        created_at: rfc3339(record.created_at_ms),
        ranges: ranges.map(|state| RangesView {
            current: state.current.map(|r| format!("{}:{}-{}", r.second, r.start, r.end)),
            pending: state.pending.iter().map(|r| format!("{}:{}-{}", r.second, r.start, r.end)).collect(),
            ids_issued: state.ids_issued,
            last_second_ids: state.last_second_ids,
        }),
    }
}

/// Creates a namespace; its epoch, zone and widths never change.
#[utoipa::path(
    post,
    path = "/v1/timeseq",
    tag = "timeseq",
    summary = "Create a time-sequence namespace",
    request_body = CreateNamespace,
    responses(
        (status = 201, description = "Created", body = NamespaceView),
        (status = 400, description = "`INVALID_ARGUMENT`: bad name, epoch, zone or widths (they must leave 31 to 40 \
            time bits of 63)", body = crate::error::ErrorBody),
        (status = 401, description = "`UNAUTHORIZED`", body = crate::error::ErrorBody),
        (status = 409, description = "`NAMESPACE_EXISTS`", body = crate::error::ErrorBody),
        (status = 503, description = "`NO_LEADER`", body = crate::error::ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    WholeBody(bytes): WholeBody,
) -> Result<(StatusCode, Json<NamespaceView>), Error> {
    let create: CreateNamespace = body::json(&bytes)?;
    let record = NamespaceRecord {
        epoch_s: create.epoch.as_deref().map_or(Ok(limits::DEFAULT_EPOCH_S), parse_epoch)?,
        utc_offset_s: create.time_zone.as_deref().map_or(Ok(0), parse_time_zone)?,
        shard_bits: create.shard_bits.unwrap_or(limits::DEFAULT_SHARD_BITS),
        seq_bits: create.seq_bits.unwrap_or(limits::DEFAULT_SEQ_BITS),
        description: create.description.unwrap_or_default(),
        created_at_ms: now_ms(),
    };
    leafraft_state::tag::validate_tag(&create.namespace).and_then(|()| record.validate()).map_err(Error::invalid)?;
    let request = leafraft_state::Request::CreateNamespace { namespace: create.namespace.clone(), record };
    match state.cluster.write(request).await? {
        leafraft_state::Response::Namespace { namespace, record } => {
            tracing::info!(namespace = %namespace, "time-sequence namespace created");
            Ok((StatusCode::CREATED, Json(view(&namespace, &record, None))))
        }
        leafraft_state::Response::Rejected(rejection) => Err(Error::from_rejection(&create.namespace, &rejection)),
        other => Err(Error::no_leader(format!("unexpected answer to a create: {other:?}"))),
    }
}

/// Every namespace, with this node's ranges.
#[utoipa::path(
    get,
    path = "/v1/timeseq",
    tag = "timeseq",
    summary = "List time-sequence namespaces",
    responses((status = 200, description = "The namespaces", body = NamespaceList))
)]
pub async fn list(State(state): State<AppState>) -> Result<Json<NamespaceList>, Error> {
    state.cluster.ensure_serving()?;
    let mut ranges = state.timeseq.states();
    let namespaces = state.cluster.read(|sm| {
        sm.timeseq.namespaces.iter().map(|(name, record)| view(name, record, ranges.remove(name))).collect()
    });
    Ok(Json(NamespaceList { namespaces }))
}

/// One namespace (the `GET /v1/timeseq/{ns}` without `shard`).
pub fn get(state: &AppState, name: &str) -> Result<NamespaceView, Error> {
    state.cluster.ensure_serving()?;
    let record = state.cluster.read(|sm| sm.timeseq.namespaces.get(name).cloned());
    let record = record.ok_or_else(|| Error::namespace_not_found(name))?;
    Ok(view(name, &record, state.timeseq.states().remove(name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_and_epochs() {
        assert_eq!(parse_time_zone("UTC").ok(), Some(0));
        assert_eq!(parse_time_zone("+08:00").ok(), Some(28_800));
        assert_eq!(parse_time_zone("-05:30").ok(), Some(-19_800));
        for bad in ["Asia/Shanghai", "+8", "+08:60", "08:00", "+0a:00", ""] {
            assert!(parse_time_zone(bad).is_err(), "{bad}");
        }
        assert_eq!(time_zone_name(-19_800), "-05:30");
        assert_eq!(parse_epoch("2020-01-01T00:00:00Z").ok(), Some(limits::DEFAULT_EPOCH_S));
        assert!(parse_epoch("2020-01-01T00:00:00.5Z").is_err());
        assert!(parse_epoch("1969-12-31T23:59:59Z").is_err());
    }
}
