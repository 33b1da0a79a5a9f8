//! The one bincode configuration leafraft uses, on the wire (`/raft/*` bodies) and on disk.
//!
//! bincode is positional: a value decodes only with the exact type layout that encoded it.
//! Persisted values therefore carry a format version in front (see the `storage` crate), and
//! types that are persisted only ever gain fields at the end or new enum variants at the end.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Fixed-width little-endian integers: the encoding of a value does not depend on its magnitude,
/// which keeps golden-byte tests readable and sizes predictable.
fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_fixed_int_encoding().with_little_endian()
}

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, bincode::error::EncodeError> {
    bincode::serde::encode_to_vec(value, config())
}

/// Decodes a value and refuses trailing bytes, so a value of a different (longer) layout is an
/// error rather than a silent misparse.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, bincode::error::DecodeError> {
    let (value, read) = bincode::serde::decode_from_slice(bytes, config())?;
    if read != bytes.len() {
        return Err(bincode::error::DecodeError::OtherString(format!(
            "{} trailing bytes after the value",
            bytes.len() - read
        )));
    }
    Ok(value)
}
