//! The ID engines: pure, synchronous, no I/O and no clock reads (time is a parameter), so they
//! can be property-tested. The service layer (`crate::segments`) does the Raft calls.
//!
//! **Architecture Invariant:** nothing in `engine` uses anything else from this crate.

pub mod segment;
pub mod snowflake;
pub mod step;
pub mod timeseq;

pub use segment::IdRange;
pub use segment::SegmentBuffer;
pub use segment::Take;
pub use step::StepPolicy;
