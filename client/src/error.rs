//! Typed errors: the server's stable codes (SPEC.md §6) kept as they are, plus what can only
//! happen on the client's side (no node answered in time, a closed handle, a bad configuration).

use std::fmt;
use std::time::Duration;

/// The server's stable error codes. A code this version does not know yet is kept in `Other`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    Forbidden,
    NotFound,
    ClusterMismatch,
    LearnerNotCaughtUp,
    ModeMismatch,
    NamespaceExists,
    NamespaceNotFound,
    /// All sequences of a time-sequence namespace's current second are used up.
    SecondExhausted,
    /// The node's clock is ahead of what the cluster accepts (time-sequence claims).
    ClockAhead,
    /// The request needs a newer cluster version than every member runs (SPEC §4d).
    FeatureNotEnabled,
    /// The node has not compared its clock with its peers' yet (its first moments after start):
    /// time-sequence IDs wait for that check. Another node, or a retry shortly, may serve.
    ClockUnchecked,
    /// A change every member must apply before it answers (a tag moved to `monotonic`) has not
    /// reached the members named yet; it stays committed (SPEC §4b).
    MembersBehind,
    /// A code this client does not know (a newer server).
    Other(String),
}

/// Every known code with its wire spelling; `ErrorCode::parse` and `as_str` read it both ways.
const CODES: [(ErrorCode, &str); 26] = [
    (ErrorCode::NotReady, "NOT_READY"),
    (ErrorCode::TagNotFound, "TAG_NOT_FOUND"),
    (ErrorCode::SegmentsNotReady, "SEGMENTS_NOT_READY"),
    (ErrorCode::ClockBackwards, "CLOCK_BACKWARDS"),
    (ErrorCode::WorkerUnavailable, "WORKER_UNAVAILABLE"),
    (ErrorCode::TagExhausted, "TAG_EXHAUSTED"),
    (ErrorCode::NoLeader, "NO_LEADER"),
    (ErrorCode::InvalidArgument, "INVALID_ARGUMENT"),
    (ErrorCode::TagExists, "TAG_EXISTS"),
    (ErrorCode::MaxIdDecrease, "MAX_ID_DECREASE"),
    (ErrorCode::NotALearner, "NOT_A_LEARNER"),
    (ErrorCode::LastVoter, "LAST_VOTER"),
    (ErrorCode::NodeNotFound, "NODE_NOT_FOUND"),
    (ErrorCode::Unauthorized, "UNAUTHORIZED"),
    (ErrorCode::Forbidden, "FORBIDDEN"),
    (ErrorCode::NotFound, "NOT_FOUND"),
    (ErrorCode::ClusterMismatch, "CLUSTER_MISMATCH"),
    (ErrorCode::LearnerNotCaughtUp, "LEARNER_NOT_CAUGHT_UP"),
    (ErrorCode::ModeMismatch, "MODE_MISMATCH"),
    (ErrorCode::NamespaceExists, "NAMESPACE_EXISTS"),
    (ErrorCode::NamespaceNotFound, "NAMESPACE_NOT_FOUND"),
    (ErrorCode::SecondExhausted, "SECOND_EXHAUSTED"),
    (ErrorCode::ClockAhead, "CLOCK_AHEAD"),
    (ErrorCode::FeatureNotEnabled, "FEATURE_NOT_ENABLED"),
    (ErrorCode::ClockUnchecked, "CLOCK_UNCHECKED"),
    (ErrorCode::MembersBehind, "MEMBERS_BEHIND"),
];

impl ErrorCode {
    /// The code as the server spells it (`"TAG_NOT_FOUND"`).
    pub fn parse(code: &str) -> ErrorCode {
        CODES
            .iter()
            .find(|(_, name)| *name == code)
            .map_or_else(|| ErrorCode::Other(code.to_string()), |(c, _)| c.clone())
    }

    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Other(code) => code,
            known => CODES.iter().find(|(c, _)| c == known).map_or("UNKNOWN", |(_, name)| name),
        }
    }

    /// The node could not serve this now, but another node, or the same one a little later, may:
    /// the codes the server answers with 503.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ErrorCode::NotReady
                | ErrorCode::SegmentsNotReady
                | ErrorCode::ClockBackwards
                | ErrorCode::WorkerUnavailable
                | ErrorCode::NoLeader
                | ErrorCode::SecondExhausted
                | ErrorCode::ClockAhead
                | ErrorCode::ClockUnchecked
                | ErrorCode::MembersBehind
        )
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a call can fail with.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// A node answered with an error in the API's shape (`{"error":{"code","message"}}`).
    #[error("{code} ({status}): {message}")]
    Api { status: u16, code: ErrorCode, message: String },
    /// No node could be reached, or one answered something that is not the API's shape.
    #[error("{0}")]
    Transport(String),
    /// The call's time budget (`ClientBuilder::timeout`) ran out; `last` is the last failure seen.
    #[error("no answer within {waited:?}; last: {last}")]
    Timeout { waited: Duration, last: String },
    /// The handle (or the whole client) was closed; its unused IDs were dropped.
    #[error("closed: no more IDs are handed out by this handle")]
    Closed,
    /// The builder was given something unusable, or no tokio runtime is there to refill in.
    #[error("invalid client configuration: {0}")]
    Config(String),
}

impl ClientError {
    /// The server's code, when a server answered with one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Api { code, .. } => Some(code.clone()),
            _ => None,
        }
    }

    /// Another node, or a later attempt, may succeed where this failed.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Api { code, status, .. } => code.is_transient() || *status >= 500,
            ClientError::Transport(_) | ClientError::Timeout { .. } => true,
            ClientError::Closed | ClientError::Config(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_back_as_written_and_unknown_ones_are_kept() {
        for (code, name) in CODES.iter() {
            assert_eq!(ErrorCode::parse(name), *code);
            assert_eq!(code.as_str(), *name);
        }
        assert_eq!(ErrorCode::parse("SOMETHING_NEW"), ErrorCode::Other("SOMETHING_NEW".into()));
        assert_eq!(ErrorCode::Other("SOMETHING_NEW".into()).as_str(), "SOMETHING_NEW");
    }

    #[test]
    fn only_unavailability_is_transient() {
        assert!(ErrorCode::NoLeader.is_transient());
        assert!(!ErrorCode::TagNotFound.is_transient());
        assert!(!ErrorCode::TagExhausted.is_transient());
        assert!(ErrorCode::ClockUnchecked.is_transient());
        assert!(ErrorCode::MembersBehind.is_transient());
        assert!(!ErrorCode::FeatureNotEnabled.is_transient());
        let exhausted = ClientError::Api { status: 409, code: ErrorCode::TagExhausted, message: String::new() };
        assert!(!exhausted.is_transient());
        assert!(ClientError::Transport("refused".into()).is_transient());
    }
}
