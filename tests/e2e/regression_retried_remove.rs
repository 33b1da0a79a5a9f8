//! Regression, found by review: a membership change sent again after the node it went to
//! lost leadership before answering can find its own effect already there. A removal then answered
//! NODE_NOT_FOUND for a removal that had taken effect. It now answers success.
//!
//! A stand-in plays the leader (see `stand_in.rs`): its first answer to the forwarded removal is
//! "not the leader", the second NODE_NOT_FOUND, exactly what node 1 sees when leader 2 committed
//! the removal and lost leadership, and a new leader then found it done.

use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use leafraft::cluster::ForwardError;
use leafraft::cluster::Forwarded;
use leafraft::error::Error;
use leafraft::error::ErrorCode;
use reqwest::Method;

use crate::stand_in::with_stand_in_leader;

#[tokio::test]
async fn regression_a_retried_remove_that_applied_answers_node_not_found() {
    let forwards = Arc::new(AtomicU32::new(0));
    let seen = forwards.clone();
    let mut cluster = with_stand_in_leader(move |op| {
        let seen = seen.clone();
        async move {
            if !matches!(op, Forwarded::RemoveMember { node_id: 2 }) {
                // Node 1's own background writes and reads wait for ever.
                return std::future::pending().await;
            }
            match seen.fetch_add(1, Ordering::SeqCst) {
                0 => Err(ForwardError::NotLeader),
                _ => Err(ForwardError::Failed(Error::new(ErrorCode::NodeNotFound, "node 2 is not a member"))),
            }
        }
    })
    .await;

    let answer = cluster.request(1, Method::DELETE, "/v1/cluster/members/2", None, None).await;
    assert_eq!(forwards.load(Ordering::SeqCst), 2, "the removal was not sent twice");
    assert_eq!(answer.0.as_u16(), 200, "a removal that took effect answered {}", answer.1);
}
