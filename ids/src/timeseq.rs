//! Sharded time-sequence IDs, purely: the layout of an ID in its long and string forms
//! ([`Layout`]), the per-node holder of claimed sequence ranges ([`RangeHolder`]) and the size of
//! the next claim ([`RangeSizer`]). Time is always a parameter (Unix seconds).
//!
//! Self-contained on purpose: nothing here uses another engine, so the folder can move into a
//! shared crate.

pub mod holder;
pub mod layout;
pub mod sizer;

pub use holder::Advance;
pub use holder::RangeHolder;
pub use holder::SecondRange;
pub use holder::Take;
pub use layout::Layout;
pub use layout::LayoutError;
pub use layout::Parts;
pub use sizer::RangeSizer;

#[cfg(test)]
mod proptests;
