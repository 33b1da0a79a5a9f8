//! One keep-alive HTTP/1 connection to one node for the scenario benchmarks (`namespaces`,
//! `first-ids`): GETs of any path, a bound on each answer, and a fresh connection after a failed
//! one. No retries: a request that fails is reported as failed.

use std::collections::BTreeMap;
use std::time::Duration;

use http_body_util::BodyExt;
use http_body_util::Empty;
use hyper::body::Bytes;

use crate::http::connect;

pub struct Conn {
    addr: String,
    sender: Option<hyper::client::conn::http1::SendRequest<Empty<Bytes>>>,
    timeout: Duration,
}

/// How a request ended when it did not end in a 2xx answer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Failure {
    /// The answer's status and the start of its body (Leaf's paths answer 500 with a code).
    Status(u16, String),
    Connect,
    Transport,
    Timeout,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Status(status, body) => write!(f, "{status} {body}"),
            Failure::Connect => write!(f, "cannot connect"),
            Failure::Transport => write!(f, "connection lost"),
            Failure::Timeout => write!(f, "no answer in time"),
        }
    }
}

/// Failures counted by kind, for the report.
pub type Failures = BTreeMap<Failure, u64>;

impl Conn {
    pub fn new(addr: &str, timeout: Duration) -> Conn {
        Conn { addr: addr.to_string(), sender: None, timeout }
    }

    /// GETs `path`: the body of a 2xx answer, or how it failed.
    pub async fn get(&mut self, path: &str) -> Result<Bytes, Failure> {
        let answer = tokio::time::timeout(self.timeout, self.exchange(path)).await.unwrap_or(Err(Failure::Timeout));
        if matches!(answer, Err(Failure::Transport | Failure::Timeout)) {
            // The connection may still carry the late answer: never reuse it.
            self.sender = None;
        }
        answer
    }

    async fn exchange(&mut self, path: &str) -> Result<Bytes, Failure> {
        if self.sender.is_none() {
            self.sender = Some(connect(&self.addr, None).await.ok_or(Failure::Connect)?);
        }
        let sender = self.sender.as_mut().ok_or(Failure::Connect)?;
        let request = hyper::Request::get(path)
            .header("host", self.addr.as_str())
            .body(Empty::<Bytes>::new())
            .map_err(|_| Failure::Transport)?;
        let response = sender.send_request(request).await.map_err(|_| Failure::Transport)?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|_| Failure::Transport)?.to_bytes();
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let text: String = String::from_utf8_lossy(&body).chars().take(60).collect();
        Err(Failure::Status(status, text))
    }
}

/// Parses an answer that is one decimal ID (Leaf's paths).
pub fn decimal_id(body: &[u8]) -> Option<u64> {
    std::str::from_utf8(body).ok()?.trim().parse().ok()
}

/// How many values of `values` occur more than once (each extra occurrence counts), after sorting.
pub fn duplicates<T: Ord>(values: &mut [T]) -> u64 {
    values.sort_unstable();
    values.windows(2).filter(|pair| pair[0] == pair[1]).count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_extra_occurrence() {
        assert_eq!(duplicates(&mut [3, 1, 2, 3, 3, 1]), 3);
        assert_eq!(duplicates::<u64>(&mut []), 0);
        assert_eq!(duplicates(&mut [(1u32, 7u64), (2, 7)]), 0);
    }

    #[test]
    fn reads_a_leaf_answer() {
        assert_eq!(decimal_id(b"1234\n"), Some(1234));
        assert_eq!(decimal_id(b"Result{id=-3, status=EXCEPTION}"), None);
    }
}
