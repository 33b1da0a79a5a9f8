//! The history checkers that the tests and the chaos runner share: they judge what clients
//! recorded (when each request was sent and answered, and the IDs it got) and trust nothing else.
//! Pure: no I/O, no clock, no dependencies; time is whatever ordered value the caller recorded
//! (`Instant`s in the tests, microseconds since the run began in the chaos runner).
//!
//! - [`order`]: real-time order, a request sent after another was answered got only larger IDs
//!   (`docs/semantics.md#strictly-increasing-tags`, monotonic tags; also per node and per worker in the chaos runner).
//! - [`unique`]: no ID twice, over half-open ranges ([`unique::overlapping_ranges`]) or over
//!   single values ([`unique::duplicates`]).
//!
//! Each check reports every counterexample to a callback, so its caller words (and counts) them.

pub mod order;
pub mod unique;

pub use order::real_time_order;
pub use order::Span;
pub use unique::duplicates;
pub use unique::overlapping_ranges;
pub use unique::Handed;
