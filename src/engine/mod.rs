//! The ID engines, re-exported from the workspace crate `leafraft-ids` (`ids/`), which the client
//! library (`leafraft-client`) shares: pure, synchronous, no I/O and no clock reads (time is a
//! parameter). The service layer (`crate::segments`, `crate::snowflakes`) does the Raft calls.
//!
//! **Architecture Invariant:** this module only re-exports; the engines live in `ids/` and depend
//! on nothing (`tidy::the_engines_do_no_io_read_no_clock_and_depend_on_nothing`).

pub use leafraft_ids::*;
