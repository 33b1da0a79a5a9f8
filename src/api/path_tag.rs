//! [`PathTag`]: the tag (or time-sequence namespace) of an ID route, percent-decoded once from the
//! request path and checked against the tag alphabet by the gate. The scope check of a client
//! token and the handler both use this one value, so a token scoped to `a:b` is asked about
//! exactly the tag `/v1/segment/a%3Ab` serves.
//!
//! Held inline (a tag is at most 128 ASCII bytes): moving it to the handler through the request's
//! extensions costs one allocation, as the `Path<String>` it replaces did.

use std::convert::Infallible;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use leafraft_state::tag::MAX_TAG_LEN;

use crate::error::Error;

/// A valid tag name, decoded.
#[derive(Clone)]
pub struct TagName {
    len: u8,
    bytes: [u8; MAX_TAG_LEN],
}

impl TagName {
    /// Percent-decodes one path segment and checks it is a tag name.
    pub fn decode(segment: &str) -> Result<TagName, String> {
        let decoded = percent_encoding::percent_decode_str(segment)
            .decode_utf8()
            .map_err(|_| "the tag in the path is not UTF-8 once decoded".to_string())?;
        leafraft_state::tag::validate_tag(&decoded)?;
        let mut bytes = [0; MAX_TAG_LEN];
        bytes[..decoded.len()].copy_from_slice(decoded.as_bytes());
        let len = u8::try_from(decoded.len()).map_err(|_| "the tag is too long".to_string())?;
        Ok(TagName { len, bytes })
    }

    pub fn as_str(&self) -> &str {
        // Only the tag alphabet (ASCII) is ever stored.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl std::fmt::Debug for TagName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tag of an ID route as the gate decoded it, or why it is not a tag (an `INVALID_ARGUMENT`).
#[derive(Debug, Clone)]
pub struct PathTag(pub Result<TagName, String>);

impl PathTag {
    /// The tag, or `INVALID_ARGUMENT`.
    pub fn valid(self) -> Result<TagName, Error> {
        self.0.map_err(Error::invalid)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for PathTag {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<PathTag, Infallible> {
        // The gate puts it there on every route with a tag; without the gate there is none.
        Ok(parts.extensions.remove::<PathTag>().unwrap_or_else(|| PathTag(Err("no tag in the path".to_string()))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_is_decoded_once_and_checked() {
        assert_eq!(TagName::decode("a%3Ab").map(|t| t.as_str().to_string()), Ok("a:b".to_string()));
        assert_eq!(TagName::decode("a%3ab").map(|t| t.as_str().to_string()), Ok("a:b".to_string()));
        assert_eq!(TagName::decode("order").map(|t| t.as_str().to_string()), Ok("order".to_string()));
        let longest = "x".repeat(MAX_TAG_LEN);
        assert_eq!(TagName::decode(&longest).map(|t| t.as_str().len()), Ok(MAX_TAG_LEN));
        for bad in ["", "a%2Fb", "a b", "%FF", "%zz", &"x".repeat(MAX_TAG_LEN + 1), "%C3%A9"] {
            assert!(TagName::decode(bad).is_err(), "{bad}");
        }
    }
}
