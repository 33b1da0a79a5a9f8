//! The calls of the CLI and of operators: tags, cluster membership, workers, probes, backups, and
//! the pass-through ID endpoints (one request each, nothing cached).
//!
//! Reads fail over like ID requests; writes go to one node and are sent to another only when the
//! first refused the connection (nothing was sent), since the server forwards them to the leader
//! and a write repeated after an unknown outcome could apply twice.

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::transport::Repeat;
use crate::views::ClusterStatus;
use crate::views::DecodedSnowflake;
use crate::views::ImportTag;
use crate::views::Imported;
use crate::views::NewTag;
use crate::views::Tag;
use crate::views::TagUpdate;
use crate::views::Workers;
use crate::Client;
use crate::ClientError;

pub(crate) fn to_json(value: &impl serde::Serialize) -> Result<serde_json::Value, ClientError> {
    serde_json::to_value(value).map_err(|e| ClientError::Config(e.to_string()))
}

impl Client {
    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.shared.transport.call(Method::GET, path, None, Repeat::Safe).await
    }

    pub(crate) async fn write<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<T, ClientError> {
        self.shared.transport.call(method, path, body.as_ref(), Repeat::Never).await
    }

    // --- Tags

    /// `POST /v1/tags`.
    pub async fn create_tag(&self, tag: &NewTag) -> Result<Tag, ClientError> {
        self.write(Method::POST, "/v1/tags", Some(to_json(tag)?)).await
    }

    /// `PATCH /v1/tags/{tag}`.
    pub async fn update_tag(&self, tag: &str, update: &TagUpdate) -> Result<Tag, ClientError> {
        self.write(Method::PATCH, &format!("/v1/tags/{tag}"), Some(to_json(update)?)).await
    }

    /// `POST /v1/import/tags`: one batch (at most 1000 tags, 48 KiB) created or raised in one Raft
    /// entry, all or none. Sent again, a batch changes nothing more.
    pub async fn import_tags(&self, tags: &[ImportTag]) -> Result<Imported, ClientError> {
        self.write(Method::POST, "/v1/import/tags", Some(json!({ "tags": tags }))).await
    }

    /// `GET /v1/tags/{tag}`: the tag, with the answering node's buffers.
    pub async fn get_tag(&self, tag: &str) -> Result<Tag, ClientError> {
        self.get(&format!("/v1/tags/{tag}")).await
    }

    /// `GET /v1/tags`: what the answering node has applied.
    pub async fn list_tags(&self) -> Result<Vec<Tag>, ClientError> {
        self.tags("/v1/tags").await
    }

    /// Every tag, read through the leader (`?consistent=true`): what the cluster has committed.
    pub async fn list_tags_consistent(&self) -> Result<Vec<Tag>, ClientError> {
        self.tags("/v1/tags?consistent=true").await
    }

    /// Every page of `path`, following each answer's `next`.
    async fn tags(&self, path: &str) -> Result<Vec<Tag>, ClientError> {
        #[derive(serde::Deserialize)]
        struct TagList {
            tags: Vec<Tag>,
            #[serde(default)]
            next: Option<String>,
        }
        let separator = if path.contains('?') { '&' } else { '?' };
        let mut all = Vec::new();
        let mut page = self.get::<TagList>(path).await?;
        loop {
            all.append(&mut page.tags);
            let Some(after) = page.next.take() else { return Ok(all) };
            // Tag names are `[A-Za-z0-9_.:-]`: nothing to escape in a query string.
            page = self.get::<TagList>(&format!("{path}{separator}after={after}")).await?;
        }
    }

    // --- IDs, one request each

    /// `count` (1 to 10,000) segment IDs of `tag` from the server's own buffer, no local range:
    /// for one-off use (a command line). Long-running processes use [`Client::segment`].
    pub async fn segment_ids(&self, tag: &str, count: u64) -> Result<Vec<u64>, ClientError> {
        #[derive(serde::Deserialize)]
        struct Ids {
            ids: Vec<String>,
        }
        let ids: Ids = self.get(&format!("/v1/segment/{tag}?count={count}")).await?;
        crate::decode::ids(&ids.ids)
    }

    /// `count` (1 to 10,000) snowflake IDs in one request of their own (not batched).
    pub async fn snowflake_ids(&self, count: u64) -> Result<Vec<u64>, ClientError> {
        #[derive(serde::Deserialize)]
        struct Ids {
            ids: Vec<String>,
        }
        let ids: Ids = self.get(&format!("/v1/snowflake?count={count}")).await?;
        crate::decode::ids(&ids.ids)
    }

    /// A snowflake ID taken apart with the cluster's layout, by a server.
    pub async fn decode_snowflake(&self, id: &str) -> Result<DecodedSnowflake, ClientError> {
        self.get(&format!("/v1/snowflake/decode/{id}")).await
    }

    // --- Workers

    /// `GET /v1/workers`: the registry, the layout, and the answering node's own state.
    pub async fn workers(&self) -> Result<Workers, ClientError> {
        self.get("/v1/workers").await
    }

    /// Frees a worker whose holder is gone for good.
    pub async fn release_worker(&self, worker: u32) -> Result<serde_json::Value, ClientError> {
        self.write(Method::POST, &format!("/v1/workers/{worker}/release"), None).await
    }

    // --- Cluster

    /// `GET /v1/cluster` from the first node that answers: its view, not necessarily the leader's.
    pub async fn cluster_status(&self) -> Result<ClusterStatus, ClientError> {
        self.shared.transport.call(Method::GET, "/v1/cluster", None, Repeat::OneRound).await
    }

    pub async fn add_learner(&self, node_id: u64, addr: &str) -> Result<ClusterStatus, ClientError> {
        self.add_learner_as(node_id, addr, None).await
    }

    /// Adds a learner that says which data dir it runs on (`incarnation`, 16 hex digits), as a
    /// node started with `--join` does.
    pub async fn add_learner_as(
        &self,
        node_id: u64,
        addr: &str,
        incarnation: Option<&str>,
    ) -> Result<ClusterStatus, ClientError> {
        let mut body = json!({"node_id": node_id, "addr": addr});
        if let Some(incarnation) = incarnation {
            body["incarnation"] = serde_json::Value::from(incarnation);
        }
        self.write(Method::POST, "/v1/cluster/learners", Some(body)).await
    }

    pub async fn promote_voter(&self, node_id: u64) -> Result<ClusterStatus, ClientError> {
        self.write(Method::POST, "/v1/cluster/voters", Some(json!({"node_id": node_id}))).await
    }

    pub async fn remove_member(&self, node_id: u64) -> Result<ClusterStatus, ClientError> {
        self.write(Method::DELETE, &format!("/v1/cluster/members/{node_id}"), None).await
    }

    // --- Operations

    /// The bytes of a backup file (`GET /v1/backup`, with the secret).
    pub async fn backup(&self) -> Result<Vec<u8>, ClientError> {
        self.shared.transport.send(Method::GET, "/v1/backup", None, Repeat::Safe).await
    }

    /// `Ok(())` when the first node answers `/readyz` with 200; one attempt per node, no waiting.
    pub async fn ready(&self) -> Result<(), ClientError> {
        let _ready: serde_json::Value =
            self.shared.transport.call(Method::GET, "/readyz", None, Repeat::OneRound).await?;
        Ok(())
    }
}
