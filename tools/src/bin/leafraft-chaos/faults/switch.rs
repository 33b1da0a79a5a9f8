//! `switch-to-monotonic`: the busy segment tag [`crate::workload::SWITCH_TAG`] moved to monotonic
//! once per run, at a moment the seed picks, in a lane of its own, so whatever the main lane is
//! doing then (a follower paused or cut off, a leader dying) goes on around it.
//!
//! `PATCH /v1/tags/{tag}` with `{"mode":"monotonic"}` answers 200 only once every member has
//! applied the move; until then 503 `MEMBERS_BEHIND` (the move is committed; asking again waits
//! again). The runner asks through a node the seed picks (a follower forwards it), and asks again,
//! through the next running node, on `MEMBERS_BEHIND`, `NO_LEADER`, any other 503 or no answer,
//! for at most [`SWITCH_DEADLINE`]. The instant the 200's head arrived, on the runner's monotonic
//! clock (the history's), is what `switch-real-time` judges from: the API promises real-time order
//! only from the 200 on, so judging from the first `PATCH`'s send would fail a correct cluster
//! whenever a member lags (`checker::switch_real_time`'s tests show both).

use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::faults::Record;
use crate::nodes::Nodes;
use crate::workload::SWITCH_TAG;

/// How long the runner keeps asking for the 200 after the first `PATCH`: longer than any one fault
/// of the main lane holds a member back (a lost majority, 15 s, is the longest).
pub const SWITCH_DEADLINE: Duration = Duration::from_secs(60);

/// How long one `PATCH` may take: the node waits up to 3 s for the members, after the write.
const PATCH_TIMEOUT: Duration = Duration::from_secs(15);

/// The move of one run, as the runner saw it. Times are since the run started.
#[derive(Debug, Clone, Default)]
pub struct Switch {
    /// When the first `PATCH` was sent.
    pub first_sent: Duration,
    /// When the 200 arrived; `None`: not within [`SWITCH_DEADLINE`].
    pub confirmed: Option<Duration>,
    /// `PATCH`es sent, the one answered 200 included.
    pub attempts: u32,
    /// The node that answered 200.
    pub through: Option<u64>,
    /// The other answers, by error code (`timeout`, `CONNECT` … for no answer).
    pub refusals: BTreeMap<String, u32>,
    /// A node answered that the move is committed (200 or `MEMBERS_BEHIND`).
    pub committed: bool,
}

impl Switch {
    /// `200 at 12.345s, 3 PATCHes from 9.876s (MEMBERS_BEHIND 2)`.
    pub fn describe(&self) -> String {
        let refusals: Vec<String> = self.refusals.iter().map(|(code, n)| format!("{code} {n}")).collect();
        let refusals = match refusals.is_empty() {
            true => String::new(),
            false => format!(" ({})", refusals.join(", ")),
        };
        let answer = match (self.confirmed, self.through) {
            (Some(at), Some(node)) => format!("200 from node {node} at {:.3}s", at.as_secs_f64()),
            _ => format!("no 200 within {SWITCH_DEADLINE:?}"),
        };
        format!(
            "tag {SWITCH_TAG} to monotonic: {answer}, {} PATCH(es) from {:.3}s{refusals}",
            self.attempts,
            self.first_sent.as_secs_f64()
        )
    }
}

/// When seed `seed` moves the tag in a run whose faults last `duration`: between a fifth and
/// half of it, so the tag is busy on both sides of the move and the main lane's faults overlap it.
pub fn planned(seed: u64, duration: Duration) -> (Duration, u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5717_c4a0);
    (duration.mul_f64(rng.gen_range(0.2..0.5)), rng.gen())
}

/// Waits until `at`, moves the tag, records the move in `record.switch`; answers whether a node
/// said the move is committed (the fault counts as injected only then).
pub async fn run(nodes: &Nodes, record: &Record, at: Instant, pick: u64) -> bool {
    tokio::time::sleep_until(at.into()).await;
    let ev = |text: String| record.event(nodes, text);
    let mut switch = Switch { first_sent: nodes.elapsed(), ..Switch::default() };
    ev(format!("PATCH tag {SWITCH_TAG} to monotonic (asked until a 200, for at most {SWITCH_DEADLINE:?})"));
    let deadline = Instant::now() + SWITCH_DEADLINE;
    let body = json!({"mode": "monotonic"});
    let path = format!("/v1/tags/{SWITCH_TAG}");
    let mut turn = pick;
    while Instant::now() < deadline {
        let running = nodes.running();
        if running.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let node = running[(turn % running.len() as u64) as usize];
        turn = turn.wrapping_add(1);
        switch.attempts += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let answer = nodes.admin_at(node, reqwest::Method::PATCH, &path, body.clone(), PATCH_TIMEOUT.min(left)).await;
        let code = match answer {
            Ok((status, answered, _)) if status.is_success() => {
                switch.confirmed = Some(answered);
                switch.through = Some(node);
                switch.committed = true;
                break;
            }
            Ok((status, _, body)) => {
                let code =
                    body["error"]["code"].as_str().map_or_else(|| format!("HTTP_{}", status.as_u16()), str::to_string);
                if code == "MEMBERS_BEHIND" {
                    switch.committed = true;
                } else if status.is_client_error() {
                    // Refused for good (a bad request, the tag unknown): asking again changes nothing.
                    ev(format!("PATCH tag {SWITCH_TAG} through node {node} refused: {status} {body}"));
                    *switch.refusals.entry(code).or_default() += 1;
                    break;
                }
                code
            }
            Err(e) if e.downcast_ref::<reqwest::Error>().is_some_and(reqwest::Error::is_connect) => "CONNECT".into(),
            Err(e) if e.downcast_ref::<reqwest::Error>().is_some_and(reqwest::Error::is_timeout) => "timeout".into(),
            Err(_) => "broken connection".into(),
        };
        *switch.refusals.entry(code).or_default() += 1;
        // `MEMBERS_BEHIND` came after the node's own wait; anything else may come back at once.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ev(switch.describe());
    let committed = switch.committed;
    *record.switch.lock().unwrap_or_else(|e| e.into_inner()) = Some(switch);
    committed
}

#[cfg(test)]
mod tests {
    use crate::faults::lanes;
    use crate::faults::FaultKind;

    /// The CI set's seeds were picked for their schedules: asking for the move too must leave the
    /// other kinds' schedules as they were, and no schedule rolls the move (it happens once).
    #[test]
    fn the_move_leaves_every_schedule_as_it_was() {
        let all: Vec<FaultKind> = FaultKind::all().collect();
        assert!(all.contains(&FaultKind::SwitchToMonotonic));
        let without: Vec<FaultKind> = all.iter().copied().filter(|k| *k != FaultKind::SwitchToMonotonic).collect();
        for seed in [112, 66, 90, 7] {
            let (main, clocks) = lanes(seed, &all);
            let (main_before, clocks_before) = lanes(seed, &without);
            let with: Vec<String> = main.take(300).chain(clocks.take(300)).map(|plan| format!("{plan:?}")).collect();
            let before: Vec<String> =
                main_before.take(300).chain(clocks_before.take(300)).map(|plan| format!("{plan:?}")).collect();
            assert_eq!(with, before, "seed {seed}");
            assert!(!with.iter().any(|plan| plan.contains("SwitchToMonotonic")), "seed {seed} rolled the move");
        }
        let (main, clocks) = lanes(1, &[FaultKind::SwitchToMonotonic]);
        assert_eq!(main.count() + clocks.count(), 0, "the move alone makes no schedule");
    }

    #[test]
    fn the_move_lands_between_a_fifth_and_half_of_the_run() {
        let duration = std::time::Duration::from_secs(45);
        for seed in 0..200 {
            let (at, _) = super::planned(seed, duration);
            assert!(at >= duration / 5 && at < duration / 2, "seed {seed}: {at:?}");
        }
    }
}
