//! Tags over HTTP on a running cluster: replication to every node, linearizable reads on a
//! follower, and the 4xx answers of `docs/api.md#error-codes` for bad input, which change nothing.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::harness::assert_error;
use crate::harness::new_tag;
use crate::harness::wait_until;
use crate::harness::ProcessCluster;

const LEADER_TIMEOUT: Duration = Duration::from_secs(20);

/// The replicated fields of every tag on node `id`, read through the leader.
async fn tags_through_leader(cluster: &mut ProcessCluster, id: u64) -> Vec<Value> {
    let (status, body) = cluster.request(id, Method::GET, "/v1/tags?consistent=true", None, None).await;
    assert_eq!(status.as_u16(), 200, "consistent list on node {id}: {body}");
    let mut tags = body["tags"].as_array().cloned().unwrap_or_default();
    for tag in &mut tags {
        // `buffers` is this node's own state, not replicated.
        tag.as_object_mut().map(|t| t.remove("buffers"));
    }
    tags
}

/// A tag created through a follower is readable on every node: at once with `?consistent=true`
/// on the other follower, and on all nodes from their local replica once applied.
#[tokio::test]
async fn tags_created_through_one_node_are_readable_on_all() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(LEADER_TIMEOUT).await;
    let followers: Vec<u64> = [1, 2, 3].into_iter().filter(|&id| id != leader).collect();
    let (writer, reader) = (followers[0], followers[1]);

    let created = cluster
        .client(writer)
        .create_tag(&new_tag("order", Some(5000), Some(100), Some("orders".into())))
        .await
        .expect("create through a follower");
    assert_eq!((created.tag.as_str(), created.max_id, created.step), ("order", 5000, 100));

    // Linearizable: the other follower answers with the tag right away, without waiting.
    let (status, body) = cluster.request(reader, Method::GET, "/v1/tags/order?consistent=true", None, None).await;
    assert_eq!(status.as_u16(), 200, "consistent read on follower {reader}: {body}");
    assert_eq!((body["max_id"].as_str(), body["step"].as_u64()), (Some("5000"), Some(100)), "{body}");
    assert_eq!(body["description"], "orders");

    // Default step and max_id, and `max_id` as a decimal string.
    cluster.client(leader).create_tag(&new_tag("coupon", None, None, None)).await.expect("create through the leader");
    let (status, body) = cluster
        .request(reader, Method::POST, "/v1/tags", Some(r#"{"tag":"big","max_id":"9007199254740993"}"#), None)
        .await;
    assert_eq!(status.as_u16(), 201, "{body}");
    assert_eq!(body["max_id"], "9007199254740993", "max_id above 2^53 must survive as a string");
    let (status, body) =
        cluster.request(writer, Method::POST, "/v1/tags", Some(r#"{"tag":"num","max_id":12345}"#), None).await;
    assert_eq!((status.as_u16(), &body["max_id"]), (201, &Value::from("12345")), "max_id as a JSON number: {body}");

    for id in [1, 2, 3] {
        let client = cluster.client(id);
        let tags = wait_until(Duration::from_secs(10), &format!("node {id} to apply the four tags"), || async {
            let tags = client.list_tags().await.map_err(|e| e.to_string())?;
            if tags.len() == 4 {
                Ok(tags)
            } else {
                Err(format!("{} tags", tags.len()))
            }
        })
        .await;
        let summary: Vec<(&str, u64, u64)> = tags.iter().map(|t| (t.tag.as_str(), t.max_id, t.step)).collect();
        assert_eq!(
            summary,
            [("big", 9_007_199_254_740_993, 1000), ("coupon", 1, 1000), ("num", 12345, 1000), ("order", 5000, 100)],
            "node {id}"
        );
        let order = client.get_tag("order").await.expect("get order");
        assert_eq!(order.max_id, 5000, "node {id}");
    }
}

/// Every kind of bad input from `docs/api.md#error-codes` gets its 4xx status and code — on a follower, so the
/// answers also survive forwarding — and afterwards the tags and the membership are unchanged.
#[tokio::test]
async fn bad_input_gets_the_spec_error_codes_and_changes_nothing() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(LEADER_TIMEOUT).await;
    let f = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    cluster.client(f).create_tag(&new_tag("order", Some(5000), Some(100), None)).await.expect("create order");
    let before = tags_through_leader(&mut cluster, f).await;
    let membership_before = cluster.status(leader).await.unwrap();

    let post = Method::POST;
    let bad_creates: [(&str, &str); 9] = [
        (r#"{"tag":"bad name"}"#, "a tag name with a space"),
        (r#"{"tag":"a/b"}"#, "a tag name with a slash"),
        (r#"{"tag":""}"#, "an empty tag name"),
        (r#"{"tag":"ok","bogus":1}"#, "an unknown JSON field"),
        (r#"{"tag":"ok","step":0}"#, "step 0"),
        (r#"{"tag":"ok","step":10000001}"#, "step 10,000,001"),
        (r#"{"tag":"ok","max_id":0}"#, "max_id 0"),
        (r#"{"tag":"ok","max_id":"9223372036854775808"}"#, "max_id above 2^63 - 1"),
        (r#"{"tag":"ok""#, "malformed JSON"),
    ];
    for (body, what) in bad_creates {
        let answer = cluster.request(f, post.clone(), "/v1/tags", Some(body), None).await;
        assert_error(&answer, 400, "INVALID_ARGUMENT", what);
    }

    let patch = Method::PATCH;
    let answer = cluster.request(f, patch.clone(), "/v1/tags/order", Some(r#"{"max_id":4999}"#), None).await;
    assert_error(&answer, 409, "MAX_ID_DECREASE", "lowering max_id");
    let answer = cluster.request(f, patch.clone(), "/v1/tags/order", Some(r#"{"step":0}"#), None).await;
    assert_error(&answer, 400, "INVALID_ARGUMENT", "PATCH step 0");
    let answer = cluster.request(f, patch.clone(), "/v1/tags/order", Some(r#"{"bogus":true}"#), None).await;
    assert_error(&answer, 400, "INVALID_ARGUMENT", "PATCH with an unknown field");
    let answer = cluster.request(f, patch.clone(), "/v1/tags/nope", Some(r#"{"step":5}"#), None).await;
    assert_error(&answer, 404, "TAG_NOT_FOUND", "PATCH of an unknown tag");

    let answer = cluster.request(f, post.clone(), "/v1/tags", Some(r#"{"tag":"order","step":7}"#), None).await;
    assert_error(&answer, 409, "TAG_EXISTS", "duplicate create");
    let answer = cluster.request(f, Method::GET, "/v1/tags/nope", None, None).await;
    assert_error(&answer, 404, "TAG_NOT_FOUND", "unknown tag");
    let answer = cluster.request(f, Method::GET, "/v1/tags/nope?consistent=true", None, None).await;
    assert_error(&answer, 404, "TAG_NOT_FOUND", "unknown tag, consistent read");
    let answer = cluster.request(f, Method::GET, "/v1/tags/bad%20name", None, None).await;
    assert_error(&answer, 400, "INVALID_ARGUMENT", "GET of a bad tag name");

    let answer = cluster.request(f, post.clone(), "/v1/cluster/voters", Some(r#"{"node_id":9}"#), None).await;
    assert_error(&answer, 409, "NOT_A_LEARNER", "promoting an unknown node");
    let promote_voter = format!(r#"{{"node_id":{leader}}}"#);
    let answer = cluster.request(f, post.clone(), "/v1/cluster/voters", Some(&promote_voter), None).await;
    assert_error(&answer, 409, "NOT_A_LEARNER", "promoting a voter");
    let answer = cluster.request(f, Method::DELETE, "/v1/cluster/members/9", None, None).await;
    assert_error(&answer, 404, "NODE_NOT_FOUND", "removing an unknown node");
    let answer =
        cluster.request(f, post.clone(), "/v1/cluster/learners", Some(r#"{"node_id":9,"addr":"nohost"}"#), None).await;
    assert_error(&answer, 400, "INVALID_ARGUMENT", "adding a learner with a bad address");

    assert_eq!(tags_through_leader(&mut cluster, f).await, before, "rejected requests changed the tags");
    let membership_after = cluster.status(leader).await.unwrap();
    assert_eq!(
        (&membership_after.voters, &membership_after.learners, &membership_after.nodes),
        (&membership_before.voters, &membership_before.learners, &membership_before.nodes),
        "rejected requests changed the membership"
    );
}

/// The only voter of a single-node cluster cannot be removed: 409 LAST_VOTER, and it stays a
/// working voter.
#[tokio::test]
async fn the_last_voter_cannot_be_removed() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(LEADER_TIMEOUT).await;
    let answer = cluster.request(1, Method::DELETE, "/v1/cluster/members/1", None, None).await;
    assert_error(&answer, 409, "LAST_VOTER", "removing the last voter");
    let status = cluster.status(1).await.unwrap();
    assert_eq!((status.voters, status.leader_id), (vec![1], Some(1)));
    cluster.client(1).create_tag(&new_tag("still-works", None, None, None)).await.expect("a write after the refusal");
}
