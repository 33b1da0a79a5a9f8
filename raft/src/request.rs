//! The commands proposed through Raft and the answers applying them gives.
//!
//! `Request` is stored in the Raft log, so its encoding is a persisted format: new variants are
//! appended at the end, existing variants never change their fields, and nothing time-like is
//! read while applying: whatever depends on time travels inside the command (`now_ms`).

use serde::Deserialize;
use serde::Serialize;

use crate::state_machine::TagRecord;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Creates a tag whose next segment starts at `max_id`.
    CreateTag { tag: String, max_id: u64, step: u64, description: String, now_ms: u64 },
    /// Changes a tag's step or description, or raises its `max_id` (never lowers it).
    UpdateTag { tag: String, step: Option<u64>, description: Option<String>, max_id: Option<u64>, now_ms: u64 },
    /// Claims `[max_id, max_id + step)` (shorter at the end of the ID space) and raises `max_id`.
    ClaimSegment { tag: String, step: u64 },
    /// Gives back the never-served tail `[from, expected_max_id)` of the latest claim: lowers
    /// `max_id` to `from` only if `max_id` still equals `expected_max_id`.
    ///
    /// Safety rests on each claim's tail being proposed at most once (never retried): then the
    /// only claim that can end at `expected_max_id` while `max_id` equals it is the releaser's.
    ReleaseSegment { tag: String, from: u64, expected_max_id: u64 },
    // The snowflake worker registry commands are appended here.
}

impl Request {
    /// The tag this request is about, if any.
    pub fn tag(&self) -> Option<&str> {
        match self {
            Request::CreateTag { tag, .. }
            | Request::UpdateTag { tag, .. }
            | Request::ClaimSegment { tag, .. }
            | Request::ReleaseSegment { tag, .. } => Some(tag),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The answer to entries that carry no request (blank and membership entries).
    Empty,
    /// The tag after a create or an update.
    Tag { tag: String, record: TagRecord },
    /// A committed claim: the half-open range `[start, end)` now belongs to the claimer.
    Segment { start: u64, end: u64 },
    /// Whether a release lowered `max_id`.
    Released { applied: bool },
    /// The request was valid to propose but the state did not allow it; nothing changed.
    Rejected(Rejection),
}

/// Why applying a request changed nothing. Mirrors the error codes of the HTTP API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rejection {
    TagNotFound,
    TagExists,
    MaxIdDecrease { current: u64 },
    TagExhausted,
    InvalidArgument(String),
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::TagNotFound => write!(f, "tag does not exist"),
            Rejection::TagExists => write!(f, "tag already exists"),
            Rejection::MaxIdDecrease { current } => write!(f, "max_id may only rise (current {current})"),
            Rejection::TagExhausted => write!(f, "tag has handed out its last ID"),
            Rejection::InvalidArgument(msg) => write!(f, "{msg}"),
        }
    }
}
