//! What the handlers share in their answers: times in RFC 3339, ID lists as decimal strings,
//! ranges of IDs, and the Leaf-compatible text answers (an ID, or Leaf's error line).
//!
//! Below every handler: it names none of them, so any handler may use it.

use std::time::Duration;
use std::time::UNIX_EPOCH;

use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::Deserialize;
use serde::Serialize;

use leafraft_ids::IdRange;

/// The last millisecond of year 9999, the latest time RFC 3339 (four-digit years) can write.
const LAST_RFC3339_MS: u64 = 253_402_300_799_999;

/// A Unix-ms time as RFC 3339 in UTC with milliseconds. Later than year 9999 (reachable through a
/// snowflake layout or a hostile command), ISO 8601's expanded form with a signed year
/// (`+12000-01-01T00:00:00.000Z`); past what a calendar library holds (year 262,143), a note.
pub fn rfc3339(ms: u64) -> String {
    if ms <= LAST_RFC3339_MS {
        return humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string();
    }
    i64::try_from(ms).ok().and_then(chrono::DateTime::from_timestamp_millis).map_or_else(
        || "(after year 262143)".to_string(),
        |time| time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    )
}

/// Appends `"ids":["1","2",...]` (IDs as decimal strings: JavaScript loses precision above 2^53).
pub fn push_id_list(out: &mut String, ids: impl Iterator<Item = u64>) {
    let mut buffer = itoa::Buffer::new();
    out.push_str("\"ids\":[");
    for (i, id) in ids.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        out.push_str(buffer.format(id));
        out.push('"');
    }
    out.push(']');
}

/// A half-open range `[start, end)` of IDs as decimal strings.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RangeView {
    pub start: String,
    pub end: String,
}

impl From<IdRange> for RangeView {
    fn from(range: IdRange) -> RangeView {
        RangeView { start: range.start.to_string(), end: range.end.to_string() }
    }
}

/// An ID as Leaf answers it on its text paths: the bare number, `text/plain; charset=utf-8`
/// (the type axum gives a `String` body: no second header is made and parsed per answer).
pub fn leaf_text(id: String) -> Response {
    id.into_response()
}

/// An error exactly as Leaf answers it: HTTP 500, `Result{id=-N, status=EXCEPTION}`.
pub fn leaf_error(id: i32) -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("Result{{id={id}, status=EXCEPTION}}"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_after_year_9999_are_written_not_panicked_on() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(LAST_RFC3339_MS), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(LAST_RFC3339_MS + 1), "+10000-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(316_516_204_800_000), "+12000-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(u64::MAX), "(after year 262143)");
    }

    #[test]
    fn a_leaf_text_answer_is_plain_text_in_utf_8() {
        let answer = leaf_text("1001".to_string());
        assert_eq!(answer.status(), StatusCode::OK);
        let types: Vec<_> = answer.headers().get_all(CONTENT_TYPE).iter().collect();
        assert_eq!(types, ["text/plain; charset=utf-8"]);
    }

    #[test]
    fn an_id_list_is_decimal_strings() {
        let mut out = String::new();
        push_id_list(&mut out, [1, u64::MAX].into_iter());
        assert_eq!(out, "\"ids\":[\"1\",\"18446744073709551615\"]");
    }
}
