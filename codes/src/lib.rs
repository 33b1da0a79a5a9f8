//! The API's error codes, defined once (`docs/api.md#error-codes` is rendered from [`ALL`] and a
//! test here fails when it is not): the server's `ErrorCode` takes its wire names and statuses
//! from here, the client library (`leafraft-client`) parses with these names, and the OpenAPI
//! document's error table is [`markdown_table`].
//!
//! The order of [`ALL`] is the order of the server's `ErrorCode` variants, which a forwarded
//! reply carries positionally (bincode): append only.

/// One stable error code: clients match on `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    /// The wire spelling (`"TAG_NOT_FOUND"`).
    pub name: &'static str,
    /// The HTTP status of the native API's answer.
    pub status: u16,
    /// When a node answers it, for people.
    pub when: &'static str,
}

impl Code {
    /// The node could not serve this now, but another node, or the same one a little later, may
    /// (the 503 codes).
    pub fn is_transient(&self) -> bool {
        self.status == 503
    }
}

const fn code(name: &'static str, status: u16, when: &'static str) -> Code {
    Code { name, status, when }
}

pub const NOT_READY: Code = code("NOT_READY", 503, "not initialised, no leader known yet, state still loading");
pub const TAG_NOT_FOUND: Code = code("TAG_NOT_FOUND", 404, "unknown tag");
pub const SEGMENTS_NOT_READY: Code =
    code("SEGMENTS_NOT_READY", 503, "both buffers empty after the bounded wait (no quorum)");
pub const CLOCK_BACKWARDS: Code =
    code("CLOCK_BACKWARDS", 503, "the clock is behind beyond the allowance, or skewed from the peers");
pub const WORKER_UNAVAILABLE: Code =
    code("WORKER_UNAVAILABLE", 503, "no snowflake worker held, or its window cannot be extended (no quorum)");
pub const TAG_EXHAUSTED: Code = code(
    "TAG_EXHAUSTED",
    409,
    "the tag has handed out its last ID (Leaf's path: HTTP 500 `Result{id=-5, status=EXCEPTION}`)",
);
pub const NO_LEADER: Code =
    code("NO_LEADER", 503, "a write could not reach a leader in time; it may or may not have been applied");
pub const INVALID_ARGUMENT: Code =
    code("INVALID_ARGUMENT", 400, "bad tag name, count out of range, malformed JSON, unknown field");
pub const TAG_EXISTS: Code = code("TAG_EXISTS", 409, "a tag of that name exists");
pub const MAX_ID_DECREASE: Code = code("MAX_ID_DECREASE", 409, "a `max_id` update that would lower it");
pub const NOT_A_LEARNER: Code = code("NOT_A_LEARNER", 409, "promotion of a node that is not a learner");
pub const LAST_VOTER: Code = code("LAST_VOTER", 409, "removal of the last voter");
pub const NODE_NOT_FOUND: Code = code("NODE_NOT_FOUND", 404, "unknown member");
pub const UNAUTHORIZED: Code = code("UNAUTHORIZED", 401, "missing or unknown credential");
pub const NOT_FOUND: Code = code("NOT_FOUND", 404, "unknown route or worker");
pub const CLUSTER_MISMATCH: Code =
    code("CLUSTER_MISMATCH", 409, "a join, vote, append or request between members of different clusters or disks");
pub const LEARNER_NOT_CAUGHT_UP: Code =
    code("LEARNER_NOT_CAUGHT_UP", 409, "promotion of a learner that does not yet replicate the leader's log");
pub const MODE_MISMATCH: Code = code(
    "MODE_MISMATCH",
    409,
    "a mode change backwards (monotonic to segment), a claim that does not match the tag's mode, or a \
     segment claim that raced the tag's move to monotonic",
);
pub const NAMESPACE_NOT_FOUND: Code = code("NAMESPACE_NOT_FOUND", 404, "unknown time-sequence namespace");
pub const NAMESPACE_EXISTS: Code = code("NAMESPACE_EXISTS", 409, "a time-sequence namespace of that name exists");
pub const SECOND_EXHAUSTED: Code = code(
    "SECOND_EXHAUSTED",
    503,
    "a namespace used every sequence of the current second and the next did not start within 1 s",
);
pub const CLOCK_AHEAD: Code =
    code("CLOCK_AHEAD", 503, "this node's clock is ahead of what the cluster accepts (time-sequence)");
pub const FORBIDDEN: Code = code("FORBIDDEN", 403, "a valid credential without this role or tag");
pub const FEATURE_NOT_ENABLED: Code = code(
    "FEATURE_NOT_ENABLED",
    409,
    "the request needs a newer cluster version than every member runs; names it and the members still behind",
);
pub const CLOCK_UNCHECKED: Code = code(
    "CLOCK_UNCHECKED",
    503,
    "this node has not compared its clock with its peers' yet (its first moments); retry shortly",
);
pub const MEMBERS_BEHIND: Code = code(
    "MEMBERS_BEHIND",
    503,
    "a tag moved to `monotonic` is committed, but the members named have not applied it yet (they \
     could still serve its segment buffers); the move stays committed and repeating the `PATCH` waits again",
);

/// Every code, in the order of the server's `ErrorCode` variants (append only).
pub const ALL: [Code; 26] = [
    NOT_READY,
    TAG_NOT_FOUND,
    SEGMENTS_NOT_READY,
    CLOCK_BACKWARDS,
    WORKER_UNAVAILABLE,
    TAG_EXHAUSTED,
    NO_LEADER,
    INVALID_ARGUMENT,
    TAG_EXISTS,
    MAX_ID_DECREASE,
    NOT_A_LEARNER,
    LAST_VOTER,
    NODE_NOT_FOUND,
    UNAUTHORIZED,
    NOT_FOUND,
    CLUSTER_MISMATCH,
    LEARNER_NOT_CAUGHT_UP,
    MODE_MISMATCH,
    NAMESPACE_NOT_FOUND,
    NAMESPACE_EXISTS,
    SECOND_EXHAUSTED,
    CLOCK_AHEAD,
    FORBIDDEN,
    FEATURE_NOT_ENABLED,
    CLOCK_UNCHECKED,
    MEMBERS_BEHIND,
];

/// The code spelled `name`, if it is one.
pub fn find(name: &str) -> Option<Code> {
    ALL.iter().find(|code| code.name == name).copied()
}

/// The table of `docs/api.md#error-codes` and of the OpenAPI document's description.
pub fn markdown_table() -> String {
    let mut table = String::from("| code | HTTP | when |\n| --- | --- | --- |\n");
    for code in ALL {
        table.push_str(&format!("| `{}` | {} | {} |\n", code.name, code.status, code.when));
    }
    table
}

#[cfg(test)]
mod tests;
