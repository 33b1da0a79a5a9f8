//! `Error`: the one error type of the HTTP API, with the stable codes of `docs/api.md` ("Error codes").
//!
//! It crosses node boundaries (a forwarded write answers with it), so it is serializable; on the
//! HTTP side it renders as `{"error": {"code": "...", "message": "..."}}`.

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use serde::Deserialize;
use serde::Serialize;

/// Stable error codes: clients match on these strings. Their names, statuses and meanings are
/// defined once in `leafraft-codes`; the variant order is the order of `leafraft_codes::ALL`
/// (codes cross nodes positionally inside forwarded replies: append only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    NotReady,
    TagNotFound,
    SegmentsNotReady,
    ClockBackwards,
    WorkerUnavailable,
    TagExhausted,
    NoLeader,
    InvalidArgument,
    TagExists,
    MaxIdDecrease,
    NotALearner,
    LastVoter,
    NodeNotFound,
    Unauthorized,
    NotFound,
    /// A join, vote, append or forward between nodes of different clusters, or from a member
    /// whose data dir is not the one the membership records.
    ClusterMismatch,
    /// Promotion of a learner that does not yet replicate the leader's log.
    LearnerNotCaughtUp,
    /// A mode change back to segment (or a segment claim that raced a move to monotonic).
    ModeMismatch,
    // Time sequences (appended: codes cross nodes positionally inside forwarded replies).
    NamespaceNotFound,
    NamespaceExists,
    /// A namespace used every sequence of the current second and the next did not start in time.
    SecondExhausted,
    /// This node's clock is ahead of what the cluster accepts.
    ClockAhead,
    /// A valid credential without the role or the tag the request needs.
    Forbidden,
    /// A command that needs a newer cluster version than the cluster runs (rolling upgrades).
    FeatureNotEnabled,
    /// This node has not compared its clock with its peers' yet (its first moments after start,
    /// after a bounded wait): time-sequence IDs wait for that check. Retry shortly.
    ClockUnchecked,
    /// A change every member enforces on its own (a tag moved to monotonic) is committed, but the
    /// members named have not applied it yet; asking again waits again.
    MembersBehind,
}

impl ErrorCode {
    /// This code's one definition: wire name, HTTP status and meaning (`leafraft-codes`).
    pub fn code(self) -> leafraft_codes::Code {
        match self {
            ErrorCode::NotReady => leafraft_codes::NOT_READY,
            ErrorCode::TagNotFound => leafraft_codes::TAG_NOT_FOUND,
            ErrorCode::SegmentsNotReady => leafraft_codes::SEGMENTS_NOT_READY,
            ErrorCode::ClockBackwards => leafraft_codes::CLOCK_BACKWARDS,
            ErrorCode::WorkerUnavailable => leafraft_codes::WORKER_UNAVAILABLE,
            ErrorCode::TagExhausted => leafraft_codes::TAG_EXHAUSTED,
            ErrorCode::NoLeader => leafraft_codes::NO_LEADER,
            ErrorCode::InvalidArgument => leafraft_codes::INVALID_ARGUMENT,
            ErrorCode::TagExists => leafraft_codes::TAG_EXISTS,
            ErrorCode::MaxIdDecrease => leafraft_codes::MAX_ID_DECREASE,
            ErrorCode::NotALearner => leafraft_codes::NOT_A_LEARNER,
            ErrorCode::LastVoter => leafraft_codes::LAST_VOTER,
            ErrorCode::NodeNotFound => leafraft_codes::NODE_NOT_FOUND,
            ErrorCode::Unauthorized => leafraft_codes::UNAUTHORIZED,
            ErrorCode::NotFound => leafraft_codes::NOT_FOUND,
            ErrorCode::ClusterMismatch => leafraft_codes::CLUSTER_MISMATCH,
            ErrorCode::LearnerNotCaughtUp => leafraft_codes::LEARNER_NOT_CAUGHT_UP,
            ErrorCode::ModeMismatch => leafraft_codes::MODE_MISMATCH,
            ErrorCode::NamespaceNotFound => leafraft_codes::NAMESPACE_NOT_FOUND,
            ErrorCode::NamespaceExists => leafraft_codes::NAMESPACE_EXISTS,
            ErrorCode::SecondExhausted => leafraft_codes::SECOND_EXHAUSTED,
            ErrorCode::ClockAhead => leafraft_codes::CLOCK_AHEAD,
            ErrorCode::Forbidden => leafraft_codes::FORBIDDEN,
            ErrorCode::FeatureNotEnabled => leafraft_codes::FEATURE_NOT_ENABLED,
            ErrorCode::ClockUnchecked => leafraft_codes::CLOCK_UNCHECKED,
            ErrorCode::MembersBehind => leafraft_codes::MEMBERS_BEHIND,
        }
    }

    pub fn as_str(self) -> &'static str {
        self.code().name
    }

    pub fn status(self) -> StatusCode {
        // Every status of `leafraft_codes::ALL` is a valid one (its tests say so).
        StatusCode::from_u16(self.code().status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    /// The code Leaf's paths answer when it is not the one `code` implies (Leaf tells "clock
    /// still behind after waiting", −1, from "clock moved back too far", −3). Local only.
    #[serde(skip)]
    pub leaf_code: Option<i32>,
}

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error { code, message: message.into(), leaf_code: None }
    }

    pub fn with_leaf_code(mut self, leaf_code: i32) -> Error {
        self.leaf_code = Some(leaf_code);
        self
    }

    pub fn invalid(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::InvalidArgument, message)
    }

    pub fn no_leader(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::NoLeader, message)
    }

    pub fn not_ready(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::NotReady, message)
    }

    pub fn tag_not_found(tag: &str) -> Error {
        Error::new(ErrorCode::TagNotFound, format!("tag '{tag}' does not exist"))
    }

    pub fn namespace_not_found(namespace: &str) -> Error {
        Error::new(ErrorCode::NamespaceNotFound, format!("namespace '{namespace}' does not exist"))
    }

    /// Maps a state-machine rejection of a request about `tag` to its API error.
    pub fn from_rejection(tag: &str, rejection: &leafraft_state::Rejection) -> Error {
        use leafraft_state::Rejection;
        match rejection {
            Rejection::TagNotFound => Error::tag_not_found(tag),
            Rejection::TagExists => Error::new(ErrorCode::TagExists, format!("tag '{tag}' already exists")),
            Rejection::MaxIdDecrease { current } => {
                Error::new(ErrorCode::MaxIdDecrease, format!("max_id of tag '{tag}' may only rise; it is {current}"))
            }
            Rejection::TagExhausted => {
                Error::new(ErrorCode::TagExhausted, format!("tag '{tag}' has handed out its last ID"))
            }
            Rejection::InvalidArgument(msg) => Error::invalid(msg.clone()),
            Rejection::NoWorkerAvailable | Rejection::LeaseLost | Rejection::LayoutMissing => {
                Error::new(ErrorCode::WorkerUnavailable, rejection.to_string())
            }
            Rejection::ModeMismatch(msg) => Error::new(ErrorCode::ModeMismatch, msg.clone()),
            Rejection::NamespaceNotFound => Error::namespace_not_found(tag),
            Rejection::NamespaceExists => {
                Error::new(ErrorCode::NamespaceExists, format!("namespace '{tag}' already exists"))
            }
            Rejection::ClockBackwards { .. } => Error::new(
                ErrorCode::ClockBackwards,
                format!("namespace '{tag}': this node's clock is behind the cluster's: {rejection}"),
            ),
            Rejection::ClockAhead { .. } => Error::new(
                ErrorCode::ClockAhead,
                format!("namespace '{tag}': this node's clock is ahead of the cluster's: {rejection}"),
            ),
            Rejection::SecondExhausted => {
                Error::new(ErrorCode::SecondExhausted, format!("namespace '{tag}' used every sequence of the second"))
            }
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Error {}

/// The JSON body of an error answer.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: Error,
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        (self.code.status(), axum::Json(ErrorBody { error: self })).into_response()
    }
}
