//! Versioned values: every value the store persists is `[FORMAT_VERSION] ++ leafraft_state::codec::encode(value)`.
//!
//! bincode is positional, so a byte layout can only be read by the layout that wrote it. The leading
//! version byte lets a binary recognise a value written by a newer binary and refuse it clearly
//! instead of misreading it. Raw snapshot chunks are the one exception: they are slices of a
//! versioned snapshot blob, whose first byte is the version.

use leafraft_state::IdStateMachine;
use leafraft_state::Version;
use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The layout version of every persisted value. Bump it when any persisted type changes its
/// layout, and either keep a decoder for the old one or refuse it by name.
///
/// Version 2 added the member incarnation to every membership (`leafraft_state::Node`) and the cluster ID
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
    let body = leafraft_state::codec::encode(value)?;
    let mut bytes = Vec::with_capacity(1 + body.len());
    bytes.push(FORMAT_VERSION);
    bytes.extend_from_slice(&body);
    Ok(bytes)
}

/// The version byte of a snapshot whose state has a cluster version past the baseline: the
/// version-2 snapshot (`IdStateMachine` as the baseline release encodes it) followed by the
/// cluster version, the time-sequence window blocks (`TimeseqRegistry::windows`) and the
/// scrambled tags' keys (`IdStateMachine::scramble_keys`), which exist only past the baseline. A
/// state still at the baseline is encoded as version 2, byte for byte what the baseline release
/// writes, so a baseline member installs every snapshot until the cluster version moves; from
/// then on every member reads version 3.
pub const SNAPSHOT_WITH_CLUSTER_VERSION: u8 = 3;

/// The snapshot data of `state` (see [`SNAPSHOT_WITH_CLUSTER_VERSION`]).
pub fn encode_snapshot(state: &IdStateMachine) -> Result<Vec<u8>, CodecError> {
    if state.cluster_version == Version::BASELINE {
        return encode(state);
    }
    let body =
        leafraft_state::codec::encode(&(state, state.cluster_version, &state.timeseq.windows, &state.scramble_keys))?;
    let mut bytes = Vec::with_capacity(1 + body.len());
    bytes.push(SNAPSHOT_WITH_CLUSTER_VERSION);
    bytes.extend_from_slice(&body);
    Ok(bytes)
}

/// Reads snapshot data of either version; a version-2 snapshot is at the baseline cluster version.
pub fn decode_snapshot(bytes: &[u8]) -> Result<IdStateMachine, CodecError> {
    match bytes.split_first() {
        Some((&SNAPSHOT_WITH_CLUSTER_VERSION, body)) => {
            let (mut state, version, windows, scramble_keys): (
                IdStateMachine,
                Version,
                _,
                BTreeMap<String, leafraft_state::ScrambleKey>,
            ) = leafraft_state::codec::decode(body)?;
            state.cluster_version = version;
            state.timeseq.windows = windows;
            state.scramble_keys = scramble_keys;
            Ok(state)
        }
        _ => decode(bytes),
    }
}

/// [`decode`] for a value that borrows its strings from `bytes`.
pub fn decode_borrowed<'de, T: serde::Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, CodecError> {
    Ok(leafraft_state::codec::decode_borrowed(body_of(bytes)?)?)
}

pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    Ok(leafraft_state::codec::decode(body_of(bytes)?)?)
}

/// The bincode after a value's format version byte; a value of another version is refused.
fn body_of(bytes: &[u8]) -> Result<&[u8], CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != FORMAT_VERSION {
        return Err(CodecError::UnknownVersion { found: version });
    }
    Ok(body)
}

#[cfg(test)]
mod tests;
