//! Many tags: `GET /v1/tags` in pages with a `next` cursor that the client library
//! follows, and `POST /v1/import/tags`, a batch of tags in one Raft entry, all of it or none.

use std::time::Duration;

use leafraft_client::ImportTag;
use reqwest::Method;
use serde_json::json;
use serde_json::Value;

use crate::harness::assert_error;
use crate::harness::ProcessCluster;

const LEADER_TIMEOUT: Duration = Duration::from_secs(20);

fn names(page: &Value) -> Vec<String> {
    page["tags"].as_array().expect("tags").iter().map(|t| t["tag"].as_str().expect("a name").to_string()).collect()
}

/// 2,500 tags imported through a follower in three batches; pages of at most 1,000 walk them in
/// name order with `next`, and the client library's list follows the pages to all of them.
#[tokio::test]
async fn an_import_in_batches_is_listed_in_pages() {
    let mut cluster = ProcessCluster::start(3);
    let leader = cluster.wait_leader(LEADER_TIMEOUT).await;
    let follower = [1, 2, 3].into_iter().find(|&id| id != leader).expect("a follower");
    let all: Vec<String> = (0..2500).map(|i| format!("biz-{i:05}")).collect();
    for chunk in all.chunks(1000) {
        let rows: Vec<ImportTag> =
            chunk.iter().map(|tag| ImportTag { tag: tag.clone(), max_id: 7, step: 100, description: None }).collect();
        // Each batch stays under the entry's size bound, so it goes through in one write.
        let imported = cluster.client(follower).import_tags(&rows).await.expect("import a batch");
        assert_eq!((imported.created, imported.updated), (1000.min(chunk.len() as u64), 0));
    }
    // Sent again, a batch changes nothing (a retry after a lost answer is harmless).
    let again: Vec<ImportTag> =
        all[..10].iter().map(|tag| ImportTag { tag: tag.clone(), max_id: 7, step: 100, description: None }).collect();
    let imported = cluster.client(leader).import_tags(&again).await.expect("the same batch again");
    assert_eq!((imported.created, imported.updated), (0, 0));

    let mut seen = Vec::new();
    let mut after = None::<String>;
    loop {
        let path = match &after {
            None => "/v1/tags?limit=1000&consistent=true".to_string(),
            Some(after) => format!("/v1/tags?limit=1000&consistent=true&after={after}"),
        };
        let (status, page) = cluster.request(follower, Method::GET, &path, None, None).await;
        assert_eq!(status.as_u16(), 200, "{page}");
        let page_names = names(&page);
        assert!(page_names.len() <= 1000);
        seen.extend(page_names);
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, all, "the pages hold every tag once, in name order");
    let listed = cluster.client(leader).list_tags().await.expect("list through the client");
    assert_eq!(listed.len(), all.len(), "the client follows `next`");

    let (status, page) = cluster.request(leader, Method::GET, "/v1/tags?limit=2&after=biz-00010", None, None).await;
    assert_eq!(status.as_u16(), 200);
    assert_eq!(names(&page), ["biz-00011", "biz-00012"]);
    assert_eq!(page["next"], "biz-00012");
    for bad in ["/v1/tags?limit=0", "/v1/tags?limit=1001", "/v1/tags?limit=x"] {
        let answer = cluster.request(leader, Method::GET, bad, None, None).await;
        assert_error(&answer, 400, "INVALID_ARGUMENT", bad);
    }
}

/// A batch with one bad row, a tag twice, no row or too many rows is refused with 400 and
/// changes nothing; `max_id` of an existing tag is raised, never lowered.
#[tokio::test]
async fn a_bad_import_batch_changes_nothing() {
    let mut cluster = ProcessCluster::start(1);
    cluster.wait_leader(LEADER_TIMEOUT).await;
    let post = |body: Value| body.to_string();
    let bad_row = post(json!({"tags": [
        {"tag": "fine", "max_id": 1, "step": 10},
        {"tag": "bad tag", "max_id": 1, "step": 10},
    ]}));
    let twice = post(json!({"tags": [
        {"tag": "twice", "max_id": 1, "step": 10},
        {"tag": "twice", "max_id": 2, "step": 10},
    ]}));
    let zero_step = post(json!({"tags": [{"tag": "z", "max_id": 1, "step": 0}]}));
    let empty = post(json!({"tags": []}));
    let too_many = post(
        json!({"tags": (0..1001).map(|i| json!({"tag": format!("t{i}"), "max_id": 1, "step": 1})).collect::<Vec<_>>()}),
    );
    let unknown_field = post(json!({"tags": [{"tag": "u", "max_id": 1, "step": 1, "mode": "monotonic"}]}));
    for (what, body) in [
        ("a bad row", bad_row),
        ("a tag twice", twice),
        ("step 0", zero_step),
        ("no tag", empty),
        ("1001 tags", too_many),
        ("an unknown field", unknown_field),
    ] {
        let answer = cluster.request(1, Method::POST, "/v1/import/tags", Some(&body), None).await;
        assert_error(&answer, 400, "INVALID_ARGUMENT", what);
    }
    let (_, list) = cluster.request(1, Method::GET, "/v1/tags?consistent=true", None, None).await;
    assert_eq!(names(&list), Vec::<String>::new(), "a refused batch created nothing");

    let create = post(json!({"tags": [{"tag": "order", "max_id": "5000", "step": 10, "description": "d"}]}));
    let (status, body) = cluster.request(1, Method::POST, "/v1/import/tags", Some(&create), None).await;
    assert_eq!((status.as_u16(), body["created"].as_u64()), (200, Some(1)), "{body}");
    let lower = post(json!({"tags": [{"tag": "order", "max_id": 10, "step": 20}]}));
    let (status, body) = cluster.request(1, Method::POST, "/v1/import/tags", Some(&lower), None).await;
    assert_eq!((status.as_u16(), body["updated"].as_u64()), (200, Some(1)), "{body}");
    let (_, tag) = cluster.request(1, Method::GET, "/v1/tags/order", None, None).await;
    assert_eq!((tag["max_id"].as_str(), tag["step"].as_u64()), (Some("5000"), Some(20)), "never lowered: {tag}");
    assert_eq!(tag["description"], "d", "no description in the row: the tag keeps its own");
}
