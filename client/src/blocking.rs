//! A blocking wrapper for code without an async runtime: it owns a small tokio runtime (one
//! worker thread) that refills the buffers in the background. Taking an ID that the buffer holds
//! never enters the runtime.

use std::sync::Arc;

use tokio::runtime::Runtime;

use crate::ClientBuilder;
use crate::ClientError;

/// The blocking counterpart of [`crate::Client`]. Do not use it inside an async runtime (it
/// blocks the thread); use [`crate::Client`] there.
#[derive(Clone, Debug)]
pub struct Client {
    inner: crate::Client,
    runtime: Arc<Runtime>,
}

/// The blocking counterpart of [`crate::Segment`].
#[derive(Clone, Debug)]
pub struct Segment {
    inner: crate::Segment,
    runtime: Arc<Runtime>,
}

/// The blocking counterpart of [`crate::Monotonic`]: one request per call.
#[derive(Clone, Debug)]
pub struct Monotonic {
    inner: crate::Monotonic,
    runtime: Arc<Runtime>,
}

impl ClientBuilder {
    /// Builds a [`blocking::Client`](Client) with its own runtime.
    pub fn build_blocking(self) -> Result<Client, ClientError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("leafraft-client")
            .enable_all()
            .build()
            .map_err(|e| ClientError::Config(format!("cannot start the client's runtime: {e}")))?;
        let inner = self.runtime(runtime.handle().clone()).build()?;
        Ok(Client { inner, runtime: Arc::new(runtime) })
    }
}

impl Client {
    pub fn segment(&self, tag: &str) -> Segment {
        Segment { inner: self.inner.segment(tag), runtime: self.runtime.clone() }
    }

    pub fn monotonic(&self, tag: &str) -> Monotonic {
        Monotonic { inner: self.inner.monotonic(tag), runtime: self.runtime.clone() }
    }

    /// `count` snowflake IDs (batched with other threads asking at the same time).
    pub fn snowflake(&self, count: u64) -> Result<Vec<u64>, ClientError> {
        self.runtime.block_on(self.inner.snowflake(count))
    }

    /// The async client inside, for the calls this wrapper does not repeat (run them with
    /// [`Client::block_on`]).
    pub fn inner(&self) -> &crate::Client {
        &self.inner
    }

    /// Runs a future of the async client to completion on this client's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    pub fn close(&self) {
        self.inner.close();
    }
}

impl Segment {
    pub fn next_id(&self) -> Result<u64, ClientError> {
        match self.inner.try_next_id() {
            Some(id) => Ok(id),
            None => self.runtime.block_on(self.inner.next_id()),
        }
    }

    pub fn next_ids(&self, count: u64) -> Result<Vec<u64>, ClientError> {
        self.runtime.block_on(self.inner.next_ids(count))
    }

    pub fn close(&self) {
        self.inner.close();
    }
}

impl Monotonic {
    pub fn next_range(&self, count: u64) -> Result<leafraft_ids::IdRange, ClientError> {
        self.runtime.block_on(self.inner.next_range(count))
    }

    pub fn next_ids(&self, count: u64) -> Result<Vec<u64>, ClientError> {
        self.runtime.block_on(self.inner.next_ids(count))
    }

    pub fn next_id(&self) -> Result<u64, ClientError> {
        self.runtime.block_on(self.inner.next_id())
    }
}
