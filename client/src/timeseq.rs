//! Sharded time-sequence IDs (`docs/semantics.md#time-sequence-ids`): the namespace calls and the ID requests, one request
//! each. Nothing is cached: the IDs carry the second they were made in.

use reqwest::Method;

use crate::admin::to_json;
use crate::views::DecodedTimeseq;
use crate::views::Namespace;
use crate::views::NewNamespace;
use crate::Client;
use crate::ClientError;

#[derive(serde::Deserialize)]
struct Ids {
    ids: Vec<String>,
}

impl Client {
    /// `POST /v1/timeseq`: a namespace whose epoch, zone and widths never change.
    pub async fn create_namespace(&self, namespace: &NewNamespace) -> Result<Namespace, ClientError> {
        self.write(Method::POST, "/v1/timeseq", Some(to_json(namespace)?)).await
    }

    /// `GET /v1/timeseq`: every namespace the answering node has applied, with its ranges.
    pub async fn list_namespaces(&self) -> Result<Vec<Namespace>, ClientError> {
        #[derive(serde::Deserialize)]
        struct List {
            namespaces: Vec<Namespace>,
        }
        Ok(self.get::<List>("/v1/timeseq").await?.namespaces)
    }

    /// `GET /v1/timeseq/{ns}`: the namespace, with the answering node's ranges.
    pub async fn get_namespace(&self, namespace: &str) -> Result<Namespace, ClientError> {
        self.get(&format!("/v1/timeseq/{namespace}")).await
    }

    /// `count` (1 to 10,000) long-form IDs of `namespace` for `shard`, in one request.
    pub async fn timeseq_ids(&self, namespace: &str, shard: u64, count: u64) -> Result<Vec<u64>, ClientError> {
        let ids: Ids = self.get(&format!("/v1/timeseq/{namespace}?shard={shard}&count={count}")).await?;
        crate::decode::ids(&ids.ids)
    }

    /// `count` string-form IDs (`prefix + yyyyMMddHHmmss + sequence + shard`) in one request;
    /// the prefix is at most 32 of `A-Z a-z 0-9 - _` (the server refuses anything else).
    pub async fn timeseq_strings(
        &self,
        namespace: &str,
        shard: u64,
        count: u64,
        prefix: &str,
    ) -> Result<Vec<String>, ClientError> {
        if !prefix.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(ClientError::Config(format!("a prefix is letters, digits, - and _ only, got {prefix:?}")));
        }
        let path = format!("/v1/timeseq/{namespace}?shard={shard}&count={count}&format=string&prefix={prefix}");
        Ok(self.get::<Ids>(&path).await?.ids)
    }

    /// A long or string-form ID of `namespace` taken apart by a server.
    pub async fn decode_timeseq(&self, namespace: &str, id: &str) -> Result<DecodedTimeseq, ClientError> {
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(ClientError::Config(format!("not a time-sequence ID: {id:?}")));
        }
        self.get(&format!("/v1/timeseq/{namespace}/decode/{id}")).await
    }
}
