//! The one bincode configuration leafraft uses, on the wire (`/raft/*` bodies) and on disk.
//!
//! bincode is positional: a value decodes only with the exact type layout that encoded it.
//! Persisted values therefore carry a format version in front (see the `storage` crate), and
//! types that are persisted only ever gain fields at the end or new enum variants at the end.
//!
//! # Bounded decoding
//! bincode allocates the length a `String` or `Vec<u8>` claims before it checks that the bytes
//! are there, so 16 hostile bytes could ask for a petabyte. Every decode here therefore runs with
//! bincode's byte limit (`with_limit`), chosen from the length of the input: through the serde
//! path bincode counts exactly the bytes it reads plus the lengths strings and byte vectors claim,
//! so a value encoded into `n` bytes never needs a limit above `n`, and no claim can exceed the
//! smallest [`LIMITS`] tier that holds the input (at most 64 times the input, 4 KiB for anything
//! up to 4 KiB). Inputs over [`MAX_DECODE_BYTES`] are refused outright.

use bincode::config::Configuration;
use bincode::config::Fixint;
use bincode::config::LittleEndian;
use bincode::error::DecodeError;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde::Serialize;

/// The largest input [`decode`] accepts: a whole state-machine snapshot (the largest value
/// leafraft decodes) of about a million tags with full-length descriptions. Everything on the
/// wire is far smaller: see [`MAX_RPC_BYTES`].
pub const MAX_DECODE_BYTES: usize = 1 << 30;

/// The largest snapshot chunk openraft sends (`snapshot_max_chunk_size`, set explicitly in the
/// node's Raft configuration).
pub const SNAPSHOT_CHUNK_BYTES: u64 = 3 << 20;

/// The most entries one `AppendEntries` carries (`max_payload_entries`, set explicitly in the
/// node's Raft configuration).
pub const MAX_PAYLOAD_ENTRIES: u64 = 300;

/// The largest encoded `Request` a node proposes: a tag of 128 bytes with a description of
/// 1024 takes 1.2 KiB; an import batch (`ImportTags`) is refused above this, which holds about
/// 600 tags of typical length. Forwarded writes over it are refused before they reach the log.
pub const MAX_REQUEST_BYTES: usize = 48 << 10;

/// The longest member address (`HOST:PORT`): a 253-byte DNS name, a colon and a port, with room
/// for a bracketed IPv6 address.
pub const MAX_ADDR_LEN: usize = 261;

/// The largest legitimate `/raft/*` body or answer: a snapshot chunk (3 MiB) with its metadata,
/// or `MAX_PAYLOAD_ENTRIES` entries, each a request of at most `MAX_REQUEST_BYTES` or a
/// membership of up to 64 members with the longest addresses (about 5.4 MiB in all); 16 MiB
/// leaves room for both. `codec/tests.rs` checks the worst cases against it.
pub const MAX_RPC_BYTES: usize = 16 << 20;

/// The limit tiers: the smallest one at least as long as the input bounds what it may claim.
pub const LIMITS: [usize; 4] = [4 << 10, 256 << 10, 16 << 20, MAX_DECODE_BYTES];

type Base = Configuration<LittleEndian, Fixint>;

/// Fixed-width little-endian integers: the encoding of a value does not depend on its magnitude,
/// which keeps golden-byte tests readable and sizes predictable.
fn config() -> Base {
    bincode::config::standard().with_fixed_int_encoding().with_little_endian()
}

pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, bincode::error::EncodeError> {
    bincode::serde::encode_to_vec(value, config())
}

/// Decodes a value, refuses trailing bytes (so a value of a different, longer layout is an error
/// rather than a silent misparse) and never lets a claimed length allocate more than the tier of
/// the input's own length (see the module documentation).
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    match bytes.len() {
        n if n <= LIMITS[0] => decode_within::<T, { LIMITS[0] }>(bytes),
        n if n <= LIMITS[1] => decode_within::<T, { LIMITS[1] }>(bytes),
        n if n <= LIMITS[2] => decode_within::<T, { LIMITS[2] }>(bytes),
        n if n <= LIMITS[3] => decode_within::<T, { LIMITS[3] }>(bytes),
        n => Err(DecodeError::OtherString(format!("{n} bytes is over the {MAX_DECODE_BYTES}-byte decoding limit"))),
    }
}

/// Decodes a value that borrows from `bytes` (strings as `&str`, no allocation per string), with
/// the same limits and the same refusal of trailing bytes as [`decode`].
pub fn decode_borrowed<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, DecodeError> {
    match bytes.len() {
        n if n <= LIMITS[0] => decode_borrowed_within::<T, { LIMITS[0] }>(bytes),
        n if n <= LIMITS[1] => decode_borrowed_within::<T, { LIMITS[1] }>(bytes),
        n if n <= LIMITS[2] => decode_borrowed_within::<T, { LIMITS[2] }>(bytes),
        n if n <= LIMITS[3] => decode_borrowed_within::<T, { LIMITS[3] }>(bytes),
        n => Err(DecodeError::OtherString(format!("{n} bytes is over the {MAX_DECODE_BYTES}-byte decoding limit"))),
    }
}

fn decode_borrowed_within<'de, T: Deserialize<'de>, const LIMIT: usize>(bytes: &'de [u8]) -> Result<T, DecodeError> {
    let (value, read) = bincode::serde::borrow_decode_from_slice(bytes, config().with_limit::<LIMIT>())?;
    if read != bytes.len() {
        return Err(DecodeError::OtherString(format!("{} trailing bytes after the value", bytes.len() - read)));
    }
    Ok(value)
}

fn decode_within<T: DeserializeOwned, const LIMIT: usize>(bytes: &[u8]) -> Result<T, DecodeError> {
    let (value, read) = bincode::serde::decode_from_slice(bytes, config().with_limit::<LIMIT>())?;
    if read != bytes.len() {
        return Err(DecodeError::OtherString(format!("{} trailing bytes after the value", bytes.len() - read)));
    }
    Ok(value)
}

#[cfg(test)]
mod tests;
