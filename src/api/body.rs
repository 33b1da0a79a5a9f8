//! Request bodies and query strings parsed into `INVALID_ARGUMENT` on any mistake, instead of
//! axum's plain-text rejections.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::rejection::PathRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::FromRequest;
use axum::extract::Path;
use axum::extract::Query;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde::Deserializer;

use crate::error::Error;
use crate::error::ErrorBody;

/// The largest request body a handler reads (axum's default body limit).
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// A request body, read whole. Where axum answers `text/plain`, this answers the API's error
/// shape with code `INVALID_ARGUMENT`: HTTP 413 for a body over [`MAX_BODY_BYTES`] (the status
/// says what HTTP clients and proxies expect; the code is the one `docs/api.md#error-codes` gives bad input), HTTP 400 for
/// one that breaks off (a body stalled past the idle timeout, a connection gone).
pub struct WholeBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for WholeBody {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<WholeBody, Response> {
        Bytes::from_request(request, state).await.map(WholeBody).map_err(unread_body)
    }
}

fn unread_body(rejection: BytesRejection) -> Response {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        let error = Error::invalid(format!("the request body is larger than {MAX_BODY_BYTES} bytes"));
        return (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(ErrorBody { error })).into_response();
    }
    Error::invalid("the request body did not arrive whole (it stalled past --idle-timeout-ms, or the connection broke)")
        .into_response()
}

pub fn json<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|e| match e.classify() {
        // Well-formed JSON with a value that does not fit: the message says which and what fits.
        serde_json::error::Category::Data => Error::invalid(format!("invalid request body: {e}")),
        _ => Error::invalid(format!("malformed JSON body: {e}")),
    })
}

pub fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, Error> {
    query.map(|Query(value)| value).map_err(|e| {
        let text = e.body_text();
        // axum says "Failed to deserialize query string: count: count must be ..."; the field's
        // own message already names it.
        let detail = text.strip_prefix("Failed to deserialize query string: ").unwrap_or(&text);
        let detail = match detail.split_once(": ") {
            Some((field, message)) if message.starts_with(field) => message,
            _ => detail,
        };
        Error::invalid(format!("bad query string: {detail}"))
    })
}

/// How many IDs a request may ask for (`count`), as the ID services bound it.
pub const MAX_COUNT: u64 = crate::services::segments::MAX_COUNT;

/// `?count=N` of the ID endpoints (`count` below says what it accepts).
#[derive(Debug, Deserialize)]
pub struct CountParams {
    #[serde(default, deserialize_with = "count")]
    pub count: Option<u64>,
}

/// `count` in a query string: an integer from 1 to [`MAX_COUNT`], said so when it is not one
/// (instead of "invalid digit found in string"). The range itself is checked where it is used.
pub fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    integer(deserializer, || format!("count must be an integer from 1 to {MAX_COUNT}"))
}

/// `step` in a tag's body: an integer from 1 to `leafraft_state::tag::MAX_STEP` (not "expected u64").
pub fn step<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    integer(deserializer, || format!("step must be an integer from 1 to {}", leafraft_state::tag::MAX_STEP))
}

/// `shard` in a time-sequence request: 0 to 2^shard_bits − 1 of the namespace.
pub fn shard<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    integer(deserializer, || {
        "shard must be an integer from 0 to 2^shard_bits - 1 (4095 with the default 12 bits)".into()
    })
}

/// A non-negative integer given as a number (JSON) or as text (a query string); anything else
/// fails with `allowed` and what was given. A visitor, not an untagged enum: that buffered each
/// value and formatted an error for every variant tried, several allocations on every ID request
/// for its `count` or `shard`; `allowed` is only written out for a refusal.
fn integer<'de, D: Deserializer<'de>>(deserializer: D, allowed: fn() -> String) -> Result<Option<u64>, D::Error> {
    deserializer.deserialize_option(Integer { allowed })
}

struct Integer {
    allowed: fn() -> String,
}

impl Integer {
    fn fail<E: serde::de::Error>(&self, given: impl std::fmt::Display) -> E {
        E::custom(format!("{}, got {given}", (self.allowed)()))
    }
}

impl<'de> serde::de::Visitor<'de> for Integer {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&(self.allowed)())
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<u64>, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Option<u64>, E> {
        Ok(Some(n))
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Option<u64>, E> {
        u64::try_from(n).map(Some).map_err(|_| self.fail(n))
    }

    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Option<u64>, E> {
        Err(self.fail(n))
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Option<u64>, E> {
        text.trim().parse::<u64>().map(Some).map_err(|_| self.fail(format_args!("{text:?}")))
    }
}

pub fn path<T>(path: Result<Path<T>, PathRejection>) -> Result<T, Error> {
    path.map(|Path(value)| value).map_err(|e| Error::invalid(format!("bad path: {}", e.body_text())))
}

/// A `max_id` given as a JSON number or a decimal string (JavaScript cannot hold every `i64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaxId(pub u64);

/// In the OpenAPI document: a JSON integer or a decimal string, 1 to 2^63 − 1.
impl utoipa::PartialSchema for MaxId {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::KnownFormat;
        use utoipa::openapi::schema::ObjectBuilder;
        use utoipa::openapi::schema::OneOfBuilder;
        use utoipa::openapi::schema::SchemaFormat;
        use utoipa::openapi::schema::Type;
        let integer = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(1));
        let string = ObjectBuilder::new().schema_type(Type::String).pattern(Some("^[0-9]{1,19}$"));
        OneOfBuilder::new()
            .item(integer)
            .item(string)
            .description(Some(format!(
                "A max_id as a JSON number or a decimal string (JavaScript cannot hold every 64-bit integer), \
                 1 to {}",
                leafraft_state::tag::MAX_ID_LIMIT
            )))
            .examples([serde_json::json!("5000")])
            .into()
    }
}

impl utoipa::ToSchema for MaxId {}

impl<'de> Deserialize<'de> for MaxId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<MaxId, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum NumberOrString {
            // Not `i128`: serde's untagged enums buffer the value, and that buffer has no 128-bit
            // integers, so an `i128` variant rejected every JSON number.
            Unsigned(u64),
            Signed(i64),
            String(String),
        }
        let value = match NumberOrString::deserialize(deserializer)? {
            NumberOrString::Unsigned(n) => i128::from(n),
            NumberOrString::Signed(n) => i128::from(n),
            NumberOrString::String(s) => {
                s.trim().parse::<i128>().map_err(|_| serde::de::Error::custom(format!("'{s}' is not an integer")))?
            }
        };
        let value = u64::try_from(value).ok().filter(|v| leafraft_state::tag::validate_max_id(*v).is_ok()).ok_or_else(
            || serde::de::Error::custom(format!("max_id must be between 1 and {}", leafraft_state::tag::MAX_ID_LIMIT)),
        )?;
        Ok(MaxId(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Params {
        #[serde(default, deserialize_with = "count")]
        count: Option<u64>,
        #[serde(default, deserialize_with = "step")]
        step: Option<u64>,
    }

    #[test]
    fn integers_say_what_is_allowed_when_they_are_not_one() {
        let query = |text: &str| {
            let uri: axum::http::Uri = format!("http://node/v1/segment/t?{text}").parse().unwrap();
            query(Query::<Params>::try_from_uri(&uri))
        };
        assert_eq!(query("count=7").unwrap().count, Some(7));
        assert_eq!(query("").unwrap().count, None);
        let message = query("count=-1").unwrap_err().to_string();
        assert!(
            message.ends_with("bad query string: count must be an integer from 1 to 10000, got \"-1\""),
            "{message}"
        );
        assert!(query("count=abc").unwrap_err().to_string().contains("count must be an integer"));
        let body = |text: &str| serde_json::from_str::<Params>(text);
        assert_eq!(body(r#"{"step":1000}"#).unwrap().step, Some(1000));
        assert_eq!(body(r#"{}"#).unwrap().step, None);
        let message = body(r#"{"step":-5}"#).unwrap_err().to_string();
        assert!(message.starts_with("step must be an integer from 1 to 10000000, got -5"), "{message}");
        assert!(body(r#"{"step":"x"}"#).unwrap_err().to_string().starts_with("step must be an integer"));
        assert!(body(r#"{"step":1.5}"#).unwrap_err().to_string().contains("got 1.5"));
        assert_eq!(body(r#"{"step":null}"#).unwrap().step, None);
        assert_eq!(body(r#"{"step":" 12 "}"#).unwrap().step, Some(12), "text is trimmed");
        assert_eq!(query("count=%2012").unwrap().count, Some(12));
        assert_eq!(body(&format!(r#"{{"step":{}}}"#, u64::MAX)).unwrap().step, Some(u64::MAX));
        assert!(body(r#"{"step":18446744073709551616}"#).unwrap_err().to_string().starts_with("step must be"));
        for other in [r#"{"step":true}"#, r#"{"step":[1]}"#, r#"{"step":{"n":1}}"#] {
            let message = body(other).unwrap_err().to_string();
            assert!(message.contains("expected step must be an integer from 1 to 10000000"), "{other}: {message}");
        }
    }

    #[test]
    fn max_id_accepts_numbers_and_strings() {
        assert_eq!(serde_json::from_str::<MaxId>("5").unwrap(), MaxId(5));
        assert_eq!(serde_json::from_str::<MaxId>("\"9223372036854775807\"").unwrap(), MaxId(i64::MAX as u64));
        for bad in ["0", "-1", "\"9223372036854775808\"", "1.5", "\"x\"", "null"] {
            assert!(serde_json::from_str::<MaxId>(bad).is_err(), "{bad}");
        }
    }
}
