//! Answers for an operation sent again after an attempt that may have taken effect.
//!
//! `Cluster::submit` sends an operation again when the node it went to lost leadership before
//! answering. That node may have committed it, so the next leader can find its effect already
//! there. For writes of tags, `apply` recognises its own earlier copy (by `now_ms`); membership
//! changes carry no such mark, so the errors that only say "this already holds" are read here as
//! the success the first attempt would have answered.

use super::Forwarded;
use crate::error::Error;
use crate::error::ErrorCode;
use leafraft_state::typ;

/// Whether `error`, answered to `op` after an earlier attempt may have taken effect, only says
/// that what `op` asked for holds (`membership` is this node's current view).
pub(super) fn effect_already_holds(op: &Forwarded, error: &Error, membership: &typ::Membership) -> bool {
    match (op, error.code) {
        (Forwarded::RemoveMember { .. }, ErrorCode::NodeNotFound) => true,
        (Forwarded::PromoteVoter { node_id }, ErrorCode::NotALearner) => {
            membership.voter_ids().any(|id| id == *node_id)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::collections::BTreeSet;

    use super::*;
    use leafraft_state::Node;

    fn membership(voters: &[u64], learners: &[u64]) -> typ::Membership {
        let nodes: BTreeMap<u64, Node> =
            voters.iter().chain(learners).map(|&id| (id, Node::new(format!("127.0.0.1:{}", 9000 + id), id))).collect();
        typ::Membership::new(vec![voters.iter().copied().collect::<BTreeSet<_>>()], nodes)
    }

    /// A removal sent again after the leader it went to lost leadership, when that leader had
    /// committed it, answers success instead of NODE_NOT_FOUND (end to end:
    /// `tests/e2e/regression_retried_remove.rs`).
    #[test]
    fn a_retried_remove_holds_when_the_node_is_gone() {
        let now = membership(&[1, 2], &[]);
        let gone = Error::new(ErrorCode::NodeNotFound, "node 3 is not a member");
        assert!(effect_already_holds(&Forwarded::RemoveMember { node_id: 3 }, &gone, &now));
        let last = Error::new(ErrorCode::LastVoter, "node 1 is the last voter");
        assert!(!effect_already_holds(&Forwarded::RemoveMember { node_id: 1 }, &last, &now));
    }

    #[test]
    fn a_retried_promotion_holds_only_when_the_node_is_a_voter() {
        let now = membership(&[1, 2, 3], &[4]);
        let not_a_learner = Error::new(ErrorCode::NotALearner, "node is already a voter");
        assert!(effect_already_holds(&Forwarded::PromoteVoter { node_id: 3 }, &not_a_learner, &now));
        assert!(!effect_already_holds(&Forwarded::PromoteVoter { node_id: 5 }, &not_a_learner, &now));
        let no_leader = Error::no_leader("timed out");
        assert!(!effect_already_holds(&Forwarded::PromoteVoter { node_id: 3 }, &no_leader, &now));
    }
}
