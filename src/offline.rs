//! The tools that work on files and on a stopped cluster rather than serve: [`import`] moves a
//! Leaf `leaf_alloc` table over (`leafraft tag import`); [`recover`] forms a new cluster from a
//! survivor or a backup after a lost majority (`leafraft recover`).

pub mod import;
pub mod recover;
