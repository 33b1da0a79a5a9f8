//! Deliberate bugs that prove the chaos checker can fail (`leafraft-chaos --plant NAME`).
//!
//! A checker that never says FAIL proves nothing. These bugs are switched on by the environment
//! variable `LEAFRAFT_PLANTED_BUG` in **debug builds only**: in a release build [`active`] is a
//! constant `None`, the variable is never read and the branches that use it compile away.

use crate::engine::segment::IdRange;

/// A bug the chaos suite must catch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedBug {
    /// `serve-twice`: a follower answers its 100th segment request's IDs again, to the next
    /// request of the same tag.
    ServeTwice,
    /// `uncommitted-claim`: a follower fills its buffer from its local `max_id` without a
    /// committed `ClaimSegment`, as if a claim were acknowledged before it commits.
    UncommittedClaim,
}

impl PlantedBug {
    pub const NAMES: [&'static str; 2] = ["serve-twice", "uncommitted-claim"];

    pub fn parse(name: &str) -> Option<PlantedBug> {
        match name {
            "serve-twice" => Some(PlantedBug::ServeTwice),
            "uncommitted-claim" => Some(PlantedBug::UncommittedClaim),
            _ => None,
        }
    }
}

/// The bug planted in this process, if any (read once).
#[cfg(debug_assertions)]
pub fn active() -> Option<PlantedBug> {
    static ACTIVE: std::sync::OnceLock<Option<PlantedBug>> = std::sync::OnceLock::new();
    *ACTIVE.get_or_init(|| {
        let name = std::env::var("LEAFRAFT_PLANTED_BUG").ok()?;
        let bug = PlantedBug::parse(&name);
        tracing::warn!(bug = %name, known = bug.is_some(), "LEAFRAFT_PLANTED_BUG is set: this node is broken on purpose");
        bug
    })
}

/// Release builds carry no planted bug.
#[cfg(not(debug_assertions))]
pub fn active() -> Option<PlantedBug> {
    None
}

/// `serve-twice`: the follower's 100th segment answer, kept to be served again.
#[derive(Default)]
pub struct Replay {
    state: std::sync::Mutex<ReplayState>,
}

#[derive(Default)]
struct ReplayState {
    /// Requests counted so far.
    requests: u64,
    /// The 100th answer with its tag, until it is replayed.
    kept: Option<(String, Vec<IdRange>)>,
}

impl Replay {
    /// Counts one request of `tag`; answers the kept ranges when they are of this tag.
    pub fn replayed(&self, tag: &str) -> Option<Vec<IdRange>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.requests += 1;
        match &state.kept {
            Some((kept, _)) if kept == tag => state.kept.take().map(|(_, ranges)| ranges),
            _ => None,
        }
    }

    /// Keeps the answer of the 100th request.
    pub fn record(&self, tag: &str, ranges: &[IdRange]) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.requests == 100 {
            state.kept = Some((tag.to_string(), ranges.to_vec()));
        }
    }
}
