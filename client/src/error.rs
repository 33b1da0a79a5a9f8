//! Typed errors: the server's stable codes (`docs/api.md#error-codes`, defined once in the
//! `leafraft-codes` crate) kept as they are, plus what can only
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
    /// The request needs a newer cluster version than every member runs
    /// (`docs/semantics.md#cluster-identity-and-versions`).
    FeatureNotEnabled,
    /// The node has not compared its clock with its peers' yet (its first moments after start):
    /// time-sequence IDs wait for that check. Another node, or a retry shortly, may serve.
    ClockUnchecked,
    /// A change every member must apply before it answers (a tag moved to `monotonic`) has not
    /// reached the members named yet; it stays committed (`docs/semantics.md#strictly-increasing-tags`).
    MembersBehind,
    /// A code this client does not know (a newer server).
    Other(String),
}

/// Every known code with its wire spelling; `ErrorCode::parse` and `as_str` read it both ways.
const CODES: [(ErrorCode, &str); 26] = [
    (ErrorCode::NotReady, leafraft_codes::NOT_READY.name),
    (ErrorCode::TagNotFound, leafraft_codes::TAG_NOT_FOUND.name),
    (ErrorCode::SegmentsNotReady, leafraft_codes::SEGMENTS_NOT_READY.name),
    (ErrorCode::ClockBackwards, leafraft_codes::CLOCK_BACKWARDS.name),
    (ErrorCode::WorkerUnavailable, leafraft_codes::WORKER_UNAVAILABLE.name),
    (ErrorCode::TagExhausted, leafraft_codes::TAG_EXHAUSTED.name),
    (ErrorCode::NoLeader, leafraft_codes::NO_LEADER.name),
    (ErrorCode::InvalidArgument, leafraft_codes::INVALID_ARGUMENT.name),
    (ErrorCode::TagExists, leafraft_codes::TAG_EXISTS.name),
    (ErrorCode::MaxIdDecrease, leafraft_codes::MAX_ID_DECREASE.name),
    (ErrorCode::NotALearner, leafraft_codes::NOT_A_LEARNER.name),
    (ErrorCode::LastVoter, leafraft_codes::LAST_VOTER.name),
    (ErrorCode::NodeNotFound, leafraft_codes::NODE_NOT_FOUND.name),
    (ErrorCode::Unauthorized, leafraft_codes::UNAUTHORIZED.name),
    (ErrorCode::Forbidden, leafraft_codes::FORBIDDEN.name),
    (ErrorCode::NotFound, leafraft_codes::NOT_FOUND.name),
    (ErrorCode::ClusterMismatch, leafraft_codes::CLUSTER_MISMATCH.name),
    (ErrorCode::LearnerNotCaughtUp, leafraft_codes::LEARNER_NOT_CAUGHT_UP.name),
    (ErrorCode::ModeMismatch, leafraft_codes::MODE_MISMATCH.name),
    (ErrorCode::NamespaceExists, leafraft_codes::NAMESPACE_EXISTS.name),
    (ErrorCode::NamespaceNotFound, leafraft_codes::NAMESPACE_NOT_FOUND.name),
    (ErrorCode::SecondExhausted, leafraft_codes::SECOND_EXHAUSTED.name),
    (ErrorCode::ClockAhead, leafraft_codes::CLOCK_AHEAD.name),
    (ErrorCode::FeatureNotEnabled, leafraft_codes::FEATURE_NOT_ENABLED.name),
    (ErrorCode::ClockUnchecked, leafraft_codes::CLOCK_UNCHECKED.name),
    (ErrorCode::MembersBehind, leafraft_codes::MEMBERS_BEHIND.name),
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
        leafraft_codes::find(self.as_str()).is_some_and(|code| code.is_transient())
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
    fn every_code_the_server_defines_is_known_here() {
        assert_eq!(CODES.len(), leafraft_codes::ALL.len());
        for code in leafraft_codes::ALL {
            let parsed = ErrorCode::parse(code.name);
            assert!(!matches!(parsed, ErrorCode::Other(_)), "{} is unknown to the client", code.name);
            assert_eq!(parsed.is_transient(), code.status == 503, "{}", code.name);
        }
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
