//! The permutation a scrambled tag's IDs are served through (`leafraft_ids::scramble`): the
//! buffers hold sequence numbers; what a client receives is each one's image.

use std::sync::Arc;

use leafraft_ids::scramble::IdScrambler;

use super::Segments;
use crate::error::Error;
use crate::error::ErrorCode;

impl Segments {
    /// The permutation `tag`'s IDs are served through, `None` for a tag that is not scrambled (or
    /// does not exist). The ranges this service hands out hold sequence numbers; what a client
    /// receives for a scrambled tag is each one's image.
    pub fn scrambler(&self, tag: &str) -> Result<Option<Arc<IdScrambler>>, Error> {
        if let Some(buffer) = self.buffers.get(tag) {
            return Ok(buffer.scrambler.clone());
        }
        let key = self.cluster.read(|sm| sm.scramble_keys.get(tag).copied());
        key.map(|key| tag_scrambler(tag, key)).transpose()
    }
}

/// The ID served for the sequence number `id` of a scrambled tag. Every sequence number a tag
/// hands out lies inside its ID space; one outside would be a bug, answered as an error rather
/// than served unscrambled (a plain number could equal another's image).
pub fn scrambled(scrambler: &IdScrambler, id: u64) -> Result<u64, Error> {
    #[cfg(feature = "planted")]
    let id = crate::planted::scramble_input(id);
    scrambler
        .scramble(id)
        .ok_or_else(|| Error::new(ErrorCode::SegmentsNotReady, format!("{id} lies outside the tag's ID space")))
}

/// The IDs served for the sequence numbers `ids` of a scrambled tag, in place: [`scrambled`] on
/// each, computed side by side (`IdScrambler::scramble_all`), for lists.
pub fn scrambled_all(scrambler: &IdScrambler, ids: &mut [u64]) -> Result<(), Error> {
    #[cfg(feature = "planted")]
    ids.iter_mut().for_each(|id| *id = crate::planted::scramble_input(*id));
    scrambler.scramble_all(ids).ok_or_else(|| {
        let outside = ids.iter().find(|&&id| scrambler.scramble(id).is_none()).copied().unwrap_or_default();
        Error::new(ErrorCode::SegmentsNotReady, format!("{outside} lies outside the tag's ID space"))
    })
}

/// The ID a client receives for the sequence number `id`: itself, or its image.
pub(super) fn served(scrambler: Option<&IdScrambler>, id: u64) -> Result<u64, Error> {
    scrambler.map_or(Ok(id), |scrambler| scrambled(scrambler, id))
}

/// The permutation of a scrambled tag's ID space under its key.
pub(super) fn tag_scrambler(tag: &str, key: leafraft_state::ScrambleKey) -> Result<Arc<IdScrambler>, Error> {
    IdScrambler::new(key.key, key.id_limit())
        .map(Arc::new)
        .map_err(|e| Error::new(ErrorCode::SegmentsNotReady, format!("tag '{tag}' cannot be scrambled: {e:?}")))
}
