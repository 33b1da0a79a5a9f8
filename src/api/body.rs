//! Request bodies and query strings parsed into `INVALID_ARGUMENT` on any mistake, instead of
//! axum's plain-text rejections.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::Path;
use axum::extract::Query;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde::Deserializer;

use crate::error::Error;

pub fn json<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::invalid(format!("malformed JSON body: {e}")))
}

pub fn query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, Error> {
    query.map(|Query(value)| value).map_err(|e| Error::invalid(format!("bad query string: {}", e.body_text())))
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
                raft::tag::MAX_ID_LIMIT
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
        let value = u64::try_from(value).ok().filter(|v| raft::tag::validate_max_id(*v).is_ok()).ok_or_else(|| {
            serde::de::Error::custom(format!("max_id must be between 1 and {}", raft::tag::MAX_ID_LIMIT))
        })?;
        Ok(MaxId(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_id_accepts_numbers_and_strings() {
        assert_eq!(serde_json::from_str::<MaxId>("5").unwrap(), MaxId(5));
        assert_eq!(serde_json::from_str::<MaxId>("\"9223372036854775807\"").unwrap(), MaxId(i64::MAX as u64));
        for bad in ["0", "-1", "\"9223372036854775808\"", "1.5", "\"x\"", "null"] {
            assert!(serde_json::from_str::<MaxId>(bad).is_err(), "{bad}");
        }
    }
}
