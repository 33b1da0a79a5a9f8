//! `Monotonic`: a strictly increasing tag's IDs (`docs/semantics.md#strictly-increasing-tags`), one request per call.
//!
//! Nothing is kept in this process: a range held here would be older than the IDs other clients
//! get from the leader meanwhile, so handing it out later would break the tag's promise (every
//! ID larger than every ID any client received before the call). Each call is one
//! `GET /v1/segment/{tag}/ranges?count=N`, answered by the leader (a follower forwards it,
//! batched with its other takes) with one range of `N` consecutive IDs.

use std::sync::Arc;

use leafraft_ids::IdRange;

use crate::transport::Repeat;
use crate::transport::Transport;
use crate::ClientError;

/// A handle on one monotonic tag. Cheap to clone; it holds no IDs.
#[derive(Clone)]
pub struct Monotonic {
    tag: String,
    transport: Arc<Transport>,
}

impl std::fmt::Debug for Monotonic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monotonic").field("tag", &self.tag).finish()
    }
}

impl Monotonic {
    pub(crate) fn new(tag: &str, transport: Arc<Transport>) -> Monotonic {
        Monotonic { tag: tag.to_string(), transport }
    }

    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// `count` (1 to 10,000) consecutive IDs, larger than every ID of the tag any client received
    /// before this call. One request; sent again to another node when an attempt fails on the
    /// way (a range answered and lost is a gap, never served again).
    pub async fn next_range(&self, count: u64) -> Result<IdRange, ClientError> {
        #[derive(serde::Deserialize)]
        struct Ranges {
            ranges: Vec<crate::views::Range>,
        }
        let path = format!("/v1/segment/{}/ranges?count={count}", self.tag);
        let answer: Ranges = self.transport.call(reqwest::Method::GET, &path, None, Repeat::Safe).await?;
        let ranges: Vec<IdRange> = answer.ranges.into_iter().map(IdRange::from).collect();
        match ranges.as_slice() {
            [range] if range.start < range.end && range.len() == count => Ok(*range),
            _ => Err(ClientError::Transport(format!("{path}: not one range of {count} IDs: {ranges:?}"))),
        }
    }

    /// `count` (1 to 10,000) increasing IDs, larger than every ID of the tag any client received
    /// before this call: [`Monotonic::next_range`], listed.
    pub async fn next_ids(&self, count: u64) -> Result<Vec<u64>, ClientError> {
        let range = self.next_range(count).await?;
        Ok((range.start..range.end).collect())
    }

    /// One ID, larger than every ID of the tag any client received before this call.
    pub async fn next_id(&self) -> Result<u64, ClientError> {
        Ok(self.next_range(1).await?.start)
    }
}

#[cfg(test)]
mod tests;
