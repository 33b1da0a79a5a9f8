//! leafraft's ID engines: pure, synchronous, no I/O and no clock reads (time is a parameter), so
//! they can be property-tested with real threads.
//!
//! - [`SegmentBuffer`]: Leaf's double buffer for one tag, an atomic cursor on the hot path.
//! - [`StepPolicy`]: Leaf's dynamic step (how many IDs the next range asks for), with Leaf's
//!   thresholds for segment buffers and the sequencer's for monotonic tags.
//! - [`scramble`]: a keyed permutation of a tag's ID space (scrambled IDs) and their short
//!   string form.
//! - [`snowflake`]: the snowflake bit [`Layout`](snowflake::Layout) (compose and decompose) and the
//!   `Generator` of one held worker.
//!
//! Both the server (`leafraft`, which installs Raft-committed claims) and the client library
//! (`leafraft-client`, which installs ranges the server answered) run these same engines.
//!
//! **Architecture Invariant:** this crate depends on nothing (no I/O, no clock, no other crate of
//! the workspace); `xtask` (`engines_pure`) checks it.

pub mod scramble;
pub mod segment;
pub mod snowflake;
pub mod step;
pub mod timeseq;

pub use segment::IdRange;
pub use segment::SegmentBuffer;
pub use segment::Take;
pub use step::StepPolicy;
