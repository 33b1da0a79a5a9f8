//! Batching of pass-through ID requests: concurrent callers share one HTTP request.
//!
//! Snowflake IDs carry the time they were made, so they are not cached: every caller gets IDs
//! fetched after it asked. While one request is in flight, callers queue; when it returns, one
//! request fetches everything the queue asked for (up to the server's 10,000 per request) and
//! splits the answer. The same batcher serves any "GET ...?count=N answering {"ids":[...]}"
//! endpoint, so time-sequence IDs (`/v1/timeseq/{ns}?shard=S`) can use it, one per (ns, shard).

use std::sync::Arc;
use std::sync::Mutex;

use reqwest::Method;
use tokio::runtime::Handle;
use tokio::sync::oneshot;

use crate::transport::Repeat;
use crate::transport::Transport;
use crate::ClientError;

/// The most IDs one request asks for (the server's bound on `count`).
pub(crate) const MAX_PER_REQUEST: u64 = 10_000;

type Reply = oneshot::Sender<Result<Vec<u64>, ClientError>>;

#[derive(Default)]
struct Queue {
    waiting: Vec<(u64, Reply)>,
    running: bool,
}

pub(crate) struct Batcher {
    /// The path without `count`, e.g. `/v1/snowflake?` or `/v1/timeseq/ns?shard=3&`.
    path: String,
    queue: Mutex<Queue>,
}

impl Batcher {
    pub fn new(path: &str) -> Arc<Batcher> {
        Arc::new(Batcher { path: path.to_string(), queue: Mutex::new(Queue::default()) })
    }

    /// `count` IDs (at most `MAX_PER_REQUEST`), fetched together with whatever else is asked now.
    pub async fn take(
        self: &Arc<Self>,
        transport: &Arc<Transport>,
        runtime: Option<&Handle>,
        count: u64,
    ) -> Result<Vec<u64>, ClientError> {
        let count = count.clamp(1, MAX_PER_REQUEST);
        let (reply, answer) = oneshot::channel();
        let lead = {
            let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            queue.waiting.push((count, reply));
            !std::mem::replace(&mut queue.running, true)
        };
        if lead {
            // Its own task: a caller that gives up must not strand the others' answers.
            let runtime = runtime.cloned().or_else(|| Handle::try_current().ok());
            let Some(runtime) = runtime else {
                return Err(ClientError::Config("no tokio runtime to fetch IDs in".into()));
            };
            runtime.spawn(self.clone().run(transport.clone()));
        }
        answer.await.unwrap_or(Err(ClientError::Closed))
    }

    /// Sends one request per batch until the queue is empty.
    async fn run(self: Arc<Self>, transport: Arc<Transport>) {
        loop {
            let batch = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                if queue.waiting.is_empty() {
                    queue.running = false;
                    return;
                }
                let mut total = 0;
                let fits = queue.waiting.iter().take_while(|(n, _)| {
                    total += n;
                    total <= MAX_PER_REQUEST
                });
                let fits = fits.count().max(1);
                queue.waiting.drain(..fits).collect::<Vec<_>>()
            };
            let total: u64 = batch.iter().map(|(n, _)| n).sum();
            let answer = fetch(&transport, &self.path, total).await;
            match answer {
                Ok(ids) => {
                    let mut ids = ids.into_iter();
                    for (n, reply) in batch {
                        let mine: Vec<u64> = ids.by_ref().take(n as usize).collect();
                        let result = if mine.len() as u64 == n {
                            Ok(mine)
                        } else {
                            Err(ClientError::Transport(format!("asked {total} IDs, the server answered fewer")))
                        };
                        let _gone = reply.send(result);
                    }
                }
                Err(error) => {
                    for (_, reply) in batch {
                        let _gone = reply.send(Err(error.clone()));
                    }
                }
            }
        }
    }
}

/// `count` IDs from `path` (which ends in `?` or `&`), decimal strings in `{"ids":[...]}`; safe to
/// repeat (IDs fetched and lost are a gap).
pub(crate) async fn fetch(transport: &Transport, path: &str, count: u64) -> Result<Vec<u64>, ClientError> {
    #[derive(serde::Deserialize)]
    struct Ids {
        ids: Vec<String>,
    }
    let path = format!("{path}count={count}");
    let answer: Ids = transport.call(Method::GET, &path, None, Repeat::Safe).await?;
    crate::decode::ids(&answer.ids)
}
