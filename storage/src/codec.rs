//! Versioned values: every value the store persists is `[FORMAT_VERSION] ++ raft::codec::encode(value)`.
//!
//! bincode is positional, so a byte layout can only be read by the layout that wrote it. The leading
//! version byte lets a binary recognise a value written by a newer binary and refuse it clearly
//! instead of misreading it. Raw snapshot chunks are the one exception: they are slices of a
//! versioned snapshot blob, whose first byte is the version.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The layout version of every persisted value. Bump it when any persisted type changes its
/// layout, and either keep a decoder for the old one or refuse it by name.
///
/// Version 2 added the member incarnation to every membership (`raft::Node`) and the cluster ID
/// to the state machine. Version 1 was never released and is refused (`OpenError::OutdatedVersion`):
/// its members carry no incarnation, so a store of it could not take part in identity checks.
pub const FORMAT_VERSION: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("empty value (no format version byte)")]
    Empty,
    #[error("format version {found} is not supported (this binary reads version {FORMAT_VERSION})")]
    UnknownVersion { found: u8 },
    #[error("cannot encode: {0}")]
    Encode(#[from] bincode::error::EncodeError),
    #[error("cannot decode: {0}")]
    Decode(#[from] bincode::error::DecodeError),
}

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    let body = raft::codec::encode(value)?;
    let mut bytes = Vec::with_capacity(1 + body.len());
    bytes.push(FORMAT_VERSION);
    bytes.extend_from_slice(&body);
    Ok(bytes)
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != FORMAT_VERSION {
        return Err(CodecError::UnknownVersion { found: version });
    }
    Ok(raft::codec::decode(body)?)
}

#[cfg(test)]
mod tests;
