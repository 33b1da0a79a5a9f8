//! Fuzzing on stable Rust: proptest feeds arbitrary and mutated bytes to every decoder
//! (every `/raft/*` body and answer, every persisted type, the import parser, config files) and
//! arbitrary strings to every HTTP path, query and body through the real router of an in-process
//! node. A decode may fail but never panic or allocate more than its input allows; a request may
//! be refused but never with a panic or a 5xx other than 503 (and Leaf's 500 on Leaf's paths).
//!
//! `cargo test --test fuzz` runs a few thousand cases per property; `LEAFRAFT_FUZZ_CASES=N`
//! changes that, and `scripts/fuzz.sh --minutes N` runs the properties again and again, each run
//! with fresh random seeds, until the time is up. The stored values' own decoding (format version
//! byte, store open) is fuzzed in `storage/src/fuzz.rs`.

mod alloc;
mod corpus;
mod decoders;
mod mutate;
mod node;
mod router;
mod text;

use proptest::test_runner::Config;

/// `default_cases` cases, or `LEAFRAFT_FUZZ_CASES` when set. Failures are not persisted to files:
/// the report names the seed and the shrunk input.
pub fn config(default_cases: u32) -> Config {
    let cases = std::env::var("LEAFRAFT_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default_cases);
    Config { cases, failure_persistence: None, ..Config::default() }
}
