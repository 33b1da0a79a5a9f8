//! The ID engines, re-exported from the workspace crate `leafraft-ids` (`ids/`), which the client
//! library (`leafraft-client`) shares: pure, synchronous, no I/O and no clock reads (time is a
//! parameter). The service layer (`crate::segments`, `crate::snowflakes`, `crate::timeseq`) does
//! the Raft calls.

pub use leafraft_ids::*;
