//! A Rust client of leafraft: IDs served from local ranges, as
//! tddl-sequence and tinyid-client do it.
//!
//! A [`Segment`] handle keeps a range of a tag's IDs in this process and hands them out with one
//! atomic add, the same double buffer the server runs (`leafraft-ids`). When 10 % of the current
//! range is used, the next range is fetched in the background (`GET
//! /v1/segment/{tag}/ranges?count=N`); its size follows Leaf's dynamic step (bounded by
//! [`ClientBuilder::range_size`]). A request that fails on one node goes to the next; the node
//! list comes from `/v1/cluster`. Snowflake IDs are not cached (they carry the time they were
//! made); concurrent callers of [`Client::snowflake`] share one request. Neither are a
//! monotonic tag's ([`Client::monotonic`]): each call is one request for one range from the
//! leader, above every ID any client received before it.
//!
//! ```no_run
//! # async fn run() -> Result<(), leafraft_client::ClientError> {
//! use std::time::Duration;
//!
//! let client = leafraft_client::Client::builder()
//!     .nodes(["127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"])
//!     .timeout(Duration::from_secs(5))
//!     .build()?;
//! let orders = client.segment("order");
//! let id: u64 = orders.next_id().await?; // from the local range: no request while it lasts
//! let batch: Vec<u64> = orders.next_ids(100).await?;
//! let stamp: Vec<u64> = client.snowflake(1).await?;
//! # let _ = (id, batch, stamp);
//! # Ok(())
//! # }
//! ```
//!
//! Without an async runtime, [`blocking::Client`] owns a small one:
//!
//! ```no_run
//! let client = leafraft_client::Client::builder().nodes(["127.0.0.1:8081"]).build_blocking()?;
//! let id = client.segment("order").next_id()?;
//! # let _ = id;
//! # Ok::<(), leafraft_client::ClientError>(())
//! ```
//!
//! # What is guaranteed
//! - No ID is handed out twice: every ID comes from a range the cluster committed to this
//!   request alone, and the local buffer hands each of its IDs out once, to one caller.
//! - IDs are not in a global order: two processes (or one process after a failover between
//!   nodes) interleave ranges. One handle uses its ranges in the order they came.
//! - Gaps: [`Segment::close`], [`Client::close`] and dropping the last handle drop the unused
//!   IDs of the current and next range. They are never served again, by anyone: a restarted
//!   process starts from a fresh range, and the server never hands a range out twice.
//! - No unbounded wait: a call that cannot be served within the [timeout](ClientBuilder::timeout)
//!   answers [`ClientError::Timeout`], or the server's own error ([`ErrorCode::TagNotFound`],
//!   [`ErrorCode::TagExhausted`], ...) as soon as one is definite.
//! - Only what is safe to repeat is repeated on another node: ID requests and reads. A write is
//!   sent to a second node only when the first refused the connection.
//!
//! Errors keep the server's codes: [`ClientError::Api`] carries an [`ErrorCode`].

mod admin;
mod batch;
pub mod blocking;
mod client;
pub mod decode;
mod error;
mod monotonic;
#[cfg(feature = "conformance-plant")]
#[doc(hidden)]
pub mod plant;
mod segment;
mod timeseq;
mod transport;
pub mod views;

pub use client::Client;
pub use client::ClientBuilder;
pub use error::ClientError;
pub use error::ErrorCode;
pub use monotonic::Monotonic;
pub use segment::NextId;
pub use segment::Segment;
pub use views::ClusterStatus;
pub use views::DecodedTimeseq;
pub use views::ImportTag;
pub use views::Imported;
pub use views::Namespace;
pub use views::NewNamespace;
pub use views::NewTag;
pub use views::Tag;
pub use views::TagUpdate;
pub use views::Workers;
