//! `Client`: a typed HTTP client of the public API, used by the CLI, by joining nodes and by
//! the end-to-end tests.

use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::api::CreateTag;
use crate::api::MaxId;
use crate::api::TagView;
use crate::api::UpdateTag;
use crate::cluster::ClusterStatus;
use crate::error::ErrorBody;
use crate::error::ErrorCode;

#[derive(Debug)]
pub enum ClientError {
    /// The server answered with an error in the API's shape.
    Api { status: u16, code: ErrorCode, message: String },
    /// The server answered something else, or could not be reached.
    Transport(String),
}

impl ClientError {
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Api { code, .. } => Some(*code),
            ClientError::Transport(_) => None,
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Api { status, code, message } => write!(f, "{} ({status}): {message}", code.as_str()),
            ClientError::Transport(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ClientError {}

/// An error and its causes on one line (reqwest's own message omits why a connection failed).
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    secret: Option<String>,
    http: reqwest::Client,
}

impl Client {
    /// `server` is `http://host:port` (a bare `host:port` gets `http://`).
    pub fn new(server: &str, secret: Option<String>) -> Client {
        let server = server.trim_end_matches('/');
        let base = if server.contains("://") { server.to_string() } else { format!("http://{server}") };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(90))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Client { base, secret, http }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let bytes = self.send(method, path, body).await?;
        serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::Transport(format!("{}{path}: unexpected answer: {e}", self.base)))
    }

    /// The body of a successful answer as bytes; an error answer in the API's shape otherwise.
    async fn send<B: Serialize>(&self, method: Method, path: &str, body: Option<&B>) -> Result<Vec<u8>, ClientError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url);
        if let Some(secret) = &self.secret {
            request = request.bearer_auth(secret);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| ClientError::Transport(format!("{url}: {}", chain(&e))))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| ClientError::Transport(format!("{url}: {e}")))?;
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => {
                Err(ClientError::Api { status: status.as_u16(), code: body.error.code, message: body.error.message })
            }
            Err(_) => Err(ClientError::Transport(format!(
                "{url}: HTTP {status}: {}",
                String::from_utf8_lossy(&bytes).chars().take(200).collect::<String>()
            ))),
        }
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.call::<(), T>(Method::GET, path, None).await
    }

    // --- Tags

    pub async fn create_tag(
        &self,
        tag: &str,
        max_id: Option<u64>,
        step: Option<u64>,
        description: Option<String>,
    ) -> Result<TagView, ClientError> {
        let body = CreateTag { tag: tag.to_string(), max_id: max_id.map(MaxId), step, description, mode: None };
        self.call(Method::POST, "/v1/tags", Some(&body)).await
    }

    pub async fn update_tag(&self, tag: &str, update: &UpdateTag) -> Result<TagView, ClientError> {
        self.call(Method::PATCH, &format!("/v1/tags/{tag}"), Some(update)).await
    }

    pub async fn get_tag(&self, tag: &str) -> Result<TagView, ClientError> {
        self.get(&format!("/v1/tags/{tag}")).await
    }

    pub async fn list_tags(&self) -> Result<Vec<TagView>, ClientError> {
        #[derive(serde::Deserialize)]
        struct TagList {
            tags: Vec<TagView>,
        }
        let list: TagList = self.get("/v1/tags").await?;
        Ok(list.tags)
    }

    /// Every tag, read through the leader (`?consistent=true`): what the cluster has committed.
    pub async fn list_tags_consistent(&self) -> Result<Vec<TagView>, ClientError> {
        #[derive(serde::Deserialize)]
        struct TagList {
            tags: Vec<TagView>,
        }
        let list: TagList = self.get("/v1/tags?consistent=true").await?;
        Ok(list.tags)
    }

    // --- IDs

    /// `count` segment IDs of `tag`, as the decimal strings the API answers.
    pub async fn segment_ids(&self, tag: &str, count: u64) -> Result<Vec<String>, ClientError> {
        #[derive(serde::Deserialize)]
        struct Ids {
            ids: Vec<String>,
        }
        let ids: Ids = self.get(&format!("/v1/segment/{tag}?count={count}")).await?;
        Ok(ids.ids)
    }

    /// `count` snowflake IDs, as the decimal strings the API answers.
    pub async fn snowflake_ids(&self, count: u64) -> Result<Vec<String>, ClientError> {
        #[derive(serde::Deserialize)]
        struct Ids {
            ids: Vec<String>,
        }
        let ids: Ids = self.get(&format!("/v1/snowflake?count={count}")).await?;
        Ok(ids.ids)
    }

    pub async fn decode_snowflake(&self, id: &str) -> Result<serde_json::Value, ClientError> {
        self.get(&format!("/v1/snowflake/decode/{id}")).await
    }

    pub async fn workers(&self) -> Result<serde_json::Value, ClientError> {
        self.get("/v1/workers").await
    }

    pub async fn release_worker(&self, worker: u32) -> Result<serde_json::Value, ClientError> {
        self.call::<(), _>(Method::POST, &format!("/v1/workers/{worker}/release"), None).await
    }

    // --- Cluster

    pub async fn cluster_status(&self) -> Result<ClusterStatus, ClientError> {
        self.get("/v1/cluster").await
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
        let mut body = serde_json::json!({"node_id": node_id, "addr": addr});
        if let Some(incarnation) = incarnation {
            body["incarnation"] = serde_json::Value::from(incarnation);
        }
        self.call(Method::POST, "/v1/cluster/learners", Some(&body)).await
    }

    pub async fn promote_voter(&self, node_id: u64) -> Result<ClusterStatus, ClientError> {
        let body = serde_json::json!({"node_id": node_id});
        self.call(Method::POST, "/v1/cluster/voters", Some(&body)).await
    }

    pub async fn remove_member(&self, node_id: u64) -> Result<ClusterStatus, ClientError> {
        self.call::<(), _>(Method::DELETE, &format!("/v1/cluster/members/{node_id}"), None).await
    }

    /// The bytes of a backup file (`GET /v1/backup`, with the secret).
    pub async fn backup(&self) -> Result<Vec<u8>, ClientError> {
        self.send::<()>(Method::GET, "/v1/backup", None).await
    }

    /// `Ok(())` when `/readyz` answers 200.
    pub async fn ready(&self) -> Result<(), ClientError> {
        let _: serde_json::Value = self.get("/readyz").await?;
        Ok(())
    }
}
