//! `IdStateMachine`: the replicated state of leafraft and its deterministic `apply`.
//!
//! Invariants (each guarded by tests in `state_machine/tests.rs`):
//! 1. A claim hands out `[max_id, max_id + step)` and raises `max_id` past it, so two claims of
//!    one tag never overlap unless `max_id` went down in between.
//! 2. `max_id` goes down only through a `ReleaseSegment` whose `expected_max_id` equals it.
//! 3. `max_id` never exceeds `MAX_ID_LIMIT` (`i64::MAX`); a tag at the limit is exhausted.
//! 4. `apply` reads nothing but its arguments: no clock, no randomness, no local config.
//! 5. The snowflake registry keeps its own invariants: see `crate::snowflake`.
//! 6. `cluster_id`, once nonzero, never changes.
//! 7. A restore applies only to a state with no tag and no worker, all of it or nothing.
//! 8. The time-sequence registry keeps its own invariants: see `crate::timeseq`.
//! 9. `cluster_version` only rises.

use std::collections::BTreeMap;

use openraft::EntryPayload;
use serde::Deserialize;
use serde::Serialize;

use crate::records::ScrambleKey;
pub use crate::records::TagMode;
pub use crate::records::TagRecord;
use crate::request::Claim;
use crate::request::Rejection;
use crate::request::Request;
use crate::request::Response;
use crate::snowflake::SnowflakeRegistry;
use crate::tag;
use crate::timeseq::TimeseqRegistry;
use crate::typ;
use crate::version::Version;
use leafraft_ids::snowflake::Layout as SnowflakeLayout;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdStateMachine {
    pub last_applied: Option<typ::LogId>,
    pub membership: typ::StoredMembership,
    pub tags: BTreeMap<String, TagRecord>,
    pub snowflake: SnowflakeRegistry,
    /// The ID of the cluster this state belongs to, fixed once at formation (0: not set yet).
    /// Peers compare it on every Raft RPC so that two clusters on the same hosts never mix.
    pub cluster_id: u64,
    /// The time-sequence namespaces and the claimed sequences inside the retention horizon.
    pub timeseq: TimeseqRegistry,
    /// The release every member runs at least, agreed through Raft (only rises): the commands
    /// it allows may be proposed. Not part of this type's own encoding, which is the snapshot
    /// format of the baseline release; the store persists it as a key of its own and appends it
    /// to a snapshot once it moved past the baseline (`storage::codec::encode_snapshot`), so a
    /// baseline member can read every snapshot until then.
    #[serde(skip)]
    pub cluster_version: Version,
    /// The key of each scrambled tag (`Request::CreateScrambledTag`), set with the tag and never
    /// changed or removed. Like `cluster_version`, not part of this type's own encoding: the
    /// store keeps each key under a key of its own and appends them to a snapshot after the
    /// cluster version (`storage::codec::encode_snapshot`).
    #[serde(skip)]
    pub scramble_keys: BTreeMap<String, ScrambleKey>,
}

impl IdStateMachine {
    /// Applies one committed log entry and answers what it did.
    pub fn apply(&mut self, entry: &typ::Entry) -> Response {
        self.last_applied = Some(entry.log_id);
        match &entry.payload {
            EntryPayload::Blank => Response::Empty,
            EntryPayload::Membership(membership) => {
                self.membership = typ::StoredMembership::new(Some(entry.log_id), membership.clone());
                Response::Empty
            }
            EntryPayload::Normal(request) => self.apply_request(request),
        }
    }

    /// The business logic of one request, separate from log bookkeeping so it can be
    /// property-tested on its own.
    pub fn apply_request(&mut self, request: &Request) -> Response {
        match request {
            Request::CreateTag { tag, max_id, step, description, now_ms } => {
                self.create_tag(tag, *max_id, *step, description, *now_ms)
            }
            Request::UpdateTag { tag, step, description, max_id, now_ms } => {
                self.update_tag(tag, *step, description.as_deref(), *max_id, *now_ms)
            }
            Request::ClaimSegment { tag, step } => self.claim(tag, *step, TagMode::Segment),
            Request::ReleaseSegment { tag, from, expected_max_id } => {
                self.release_segment(tag, *from, *expected_max_id)
            }
            Request::SetSnowflakeLayout { layout } => self.snowflake.set_layout(*layout),
            Request::AcquireWorker { node, now_ms, lease_ms, window_ms } => {
                self.snowflake.acquire(*node, *now_ms, *lease_ms, *window_ms)
            }
            Request::ExtendWorker { worker, epoch, window_end_ms, now_ms } => {
                self.snowflake.extend(*worker, *epoch, *window_end_ms, *now_ms)
            }
            Request::ReleaseWorker { worker, epoch, used_until_ms } => {
                self.snowflake.release(*worker, *epoch, *used_until_ms)
            }
            Request::SetClusterId { cluster_id } => self.set_cluster_id(*cluster_id),
            Request::Restore { tags, layout, snowflake_floor_ms } => self.restore(tags, *layout, *snowflake_floor_ms),
            Request::CreateTagInMode { tag, max_id, step, description, now_ms, mode } => {
                match self.create_tag(tag, *max_id, *step, description, *now_ms) {
                    Response::Tag { tag, .. } => self.set_tag_mode(&tag, *mode, *now_ms),
                    other => other,
                }
            }
            Request::SetTagMode { tag, mode, now_ms } => self.set_tag_mode(tag, *mode, *now_ms),
            Request::ClaimMonotonic { tag, step } => self.claim(tag, *step, TagMode::Monotonic),
            Request::CreateNamespace { namespace, record } => self.timeseq.create(namespace, record.clone()),
            Request::ClaimTimeseq { namespace, second, count, now_ms } => {
                self.timeseq.claim(namespace, *second, *count, *now_ms)
            }
            Request::RestoreTimeseq { namespaces, floor_s } => self.timeseq.restore(namespaces, *floor_s),
            Request::ImportTags { rows, now_ms } => self.import_tags(rows, *now_ms),
            Request::SetClusterVersion { version } => {
                self.cluster_version = self.cluster_version.max(*version);
                Response::ClusterVersion { version: self.cluster_version }
            }
            Request::Noop => Response::Empty,
            Request::ClaimBatch { claims } => self.claim_batch(claims),
            Request::ReleaseBatch { releases } => Response::Batch(
                releases
                    .iter()
                    .map(|release| self.release_segment(&release.tag, release.from, release.expected_max_id))
                    .collect(),
            ),
            Request::CreateScrambledTag { tag, max_id, step, description, now_ms, key } => {
                self.create_scrambled_tag(tag, *max_id, *step, description, *now_ms, *key)
            }
            Request::RestoreScrambleKeys { keys } => self.restore_scramble_keys(keys),
        }
    }

    /// A segment tag with its key (see [`Request::CreateScrambledTag`]).
    fn create_scrambled_tag(
        &mut self,
        name: &str,
        max_id: u64,
        step: u64,
        description: &str,
        now_ms: u64,
        key: ScrambleKey,
    ) -> Response {
        if let Err(msg) = key.validate().and_then(|()| match max_id < key.id_limit() {
            true => Ok(()),
            false => Err(format!("max_id {max_id} lies outside the tag's ID space, below {}", key.id_limit())),
        }) {
            return Response::Rejected(Rejection::InvalidArgument(msg));
        }
        // A tag that exists is this create's earlier copy only if it has this very key: a plain
        // tag that served plain IDs must never start serving scrambled ones (or the other way).
        if self.tags.contains_key(name) && self.scramble_keys.get(name) != Some(&key) {
            return Response::Rejected(Rejection::TagExists);
        }
        let response = self.create_tag(name, max_id, step, description, now_ms);
        if matches!(response, Response::Tag { .. }) {
            self.scramble_keys.insert(name.to_string(), key);
        }
        response
    }

    /// The keys of a recovered cluster (see [`Request::RestoreScrambleKeys`]).
    fn restore_scramble_keys(&mut self, keys: &BTreeMap<String, ScrambleKey>) -> Response {
        if !self.scramble_keys.is_empty() {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "scramble keys are restored only while no tag has one; {} tags have one",
                self.scramble_keys.len()
            )));
        }
        for (name, key) in keys {
            if let Err(msg) = key.validate() {
                return Response::Rejected(Rejection::InvalidArgument(msg));
            }
            match self.tags.get(name) {
                Some(record) if record.mode == TagMode::Segment => {}
                Some(_) => {
                    return Response::Rejected(Rejection::ModeMismatch(format!(
                        "tag '{name}' is monotonic: a scrambled tag is a segment tag"
                    )))
                }
                None => return Response::Rejected(Rejection::TagNotFound),
            }
        }
        self.scramble_keys = keys.clone();
        Response::Empty
    }

    /// Applies each claim as its own command would be applied, in order (see
    /// [`Request::ClaimBatch`]).
    fn claim_batch(&mut self, claims: &[Claim]) -> Response {
        let mut answers = Vec::with_capacity(claims.len());
        for claim in claims {
            #[cfg(feature = "planted")]
            if !answers.is_empty() && crate::planted::apply_only_first_claim() {
                // The planted bug: every claim after the first is answered as if applied to a
                // copy, and the state keeps none of it.
                answers.push(self.clone().apply_claim(claim));
                continue;
            }
            answers.push(self.apply_claim(claim));
        }
        Response::Batch(answers)
    }

    fn apply_claim(&mut self, claim: &Claim) -> Response {
        match claim {
            Claim::Segment { tag, step } => self.claim(tag, *step, TagMode::Segment),
            Claim::Monotonic { tag, step } => self.claim(tag, *step, TagMode::Monotonic),
            Claim::Timeseq { namespace, second, count, now_ms } => {
                self.timeseq.claim(namespace, *second, *count, *now_ms)
            }
            Claim::TimeseqWindow { namespace, first_second, seconds, count, now_ms } => {
                self.timeseq.claim_window(namespace, *first_second, *seconds, *count, *now_ms)
            }
            Claim::TimeseqSharedWindow { namespace, first_second, seconds, now_ms, blocks } => {
                self.timeseq.claim_shared_window(namespace, *first_second, *seconds, *now_ms, blocks)
            }
        }
    }

    /// The cluster ID is set once; a second proposal (another leader's, a retry) changes nothing
    /// and learns the recorded one.
    fn set_cluster_id(&mut self, cluster_id: u64) -> Response {
        if self.cluster_id == 0 {
            self.cluster_id = cluster_id;
        }
        Response::ClusterId { cluster_id: self.cluster_id }
    }

    /// Fills an empty state with a recovered cluster's tags, layout and snowflake floor.
    fn restore(
        &mut self,
        tags: &BTreeMap<String, TagRecord>,
        layout: Option<SnowflakeLayout>,
        snowflake_floor_ms: u64,
    ) -> Response {
        if !self.tags.is_empty() || !self.snowflake.workers.is_empty() {
            return Response::Rejected(Rejection::InvalidArgument(format!(
                "a restore applies only to an empty cluster; this one holds {} tags and {} workers",
                self.tags.len(),
                self.snowflake.workers.len()
            )));
        }
        let checked = tags.iter().try_for_each(|(name, record)| {
            tag::validate_tag(name)
                .and_then(|()| tag::validate_max_id(record.max_id))
                .and_then(|()| tag::validate_step(record.step))
                .and_then(|()| tag::validate_description(&record.description))
        });
        let checked = checked.and_then(|()| match (layout, self.snowflake.layout) {
            (Some(restored), Some(recorded)) if restored != recorded => {
                Err(format!("the restored snowflake layout {restored:?} differs from the recorded {recorded:?}"))
            }
            (Some(restored), _) => restored.validate(),
            (None, _) => Ok(()),
        });
        if let Err(msg) = checked {
            return Response::Rejected(Rejection::InvalidArgument(msg));
        }
        self.tags = tags.clone();
        if layout.is_some() {
            self.snowflake.layout = layout;
        }
        self.snowflake.floor_ms = self.snowflake.floor_ms.max(snowflake_floor_ms);
        Response::Restored { tags: tags.len() as u64 }
    }

    fn create_tag(&mut self, name: &str, max_id: u64, step: u64, description: &str, now_ms: u64) -> Response {
        let checked = tag::validate_tag(name)
            .and_then(|()| tag::validate_max_id(max_id))
            .and_then(|()| tag::validate_step(step))
            .and_then(|()| tag::validate_description(description));
        if let Err(msg) = checked {
            return Response::Rejected(Rejection::InvalidArgument(msg));
        }
        let record = TagRecord {
            max_id,
            step,
            description: description.to_string(),
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            mode: TagMode::Segment,
        };
        if let Some(existing) = self.tags.get(name) {
            // A create sent again after a leader change may commit twice, claims in between. A
            // copy carries the same `now_ms`, step and description, and no claim or release ever
            // takes `max_id` below where the create put it: then it is answered with the tag,
            // as the first copy was, and changes nothing.
            let same_create = existing.created_at_ms == now_ms
                && existing.step == step
                && existing.description == description
                && existing.max_id >= max_id;
            if same_create {
                return Response::Tag { tag: name.to_string(), record: existing.clone() };
            }
            return Response::Rejected(Rejection::TagExists);
        }
        self.tags.insert(name.to_string(), record.clone());
        Response::Tag { tag: name.to_string(), record }
    }

    /// See [`Request::ImportTags`]: every row is checked before any is applied.
    fn import_tags(&mut self, rows: &[crate::ImportRow], now_ms: u64) -> Response {
        let mut seen = std::collections::BTreeSet::new();
        for (i, row) in rows.iter().enumerate() {
            let checked = tag::validate_tag(&row.tag)
                .and_then(|()| tag::validate_max_id(row.max_id))
                .and_then(|()| tag::validate_step(row.step))
                .and_then(|()| row.description.as_deref().map_or(Ok(()), tag::validate_description))
                .and_then(
                    |()| if seen.insert(row.tag.as_str()) { Ok(()) } else { Err("the tag is there twice".into()) },
                );
            if let Err(msg) = checked {
                return Response::Rejected(Rejection::InvalidArgument(format!(
                    "import row {} ({}): {msg}",
                    i + 1,
                    row.tag
                )));
            }
        }
        let (mut created, mut updated) = (0, 0);
        for row in rows {
            match self.tags.get_mut(&row.tag) {
                None => {
                    let record = TagRecord {
                        max_id: row.max_id,
                        step: row.step,
                        description: row.description.clone().unwrap_or_default(),
                        created_at_ms: now_ms,
                        updated_at_ms: now_ms,
                        mode: TagMode::Segment,
                    };
                    self.tags.insert(row.tag.clone(), record);
                    created += 1;
                }
                Some(record) => {
                    let max_id = record.max_id.max(row.max_id);
                    let description = row.description.as_deref().unwrap_or(&record.description);
                    if (max_id, row.step, description) != (record.max_id, record.step, record.description.as_str()) {
                        record.description = description.to_string();
                        record.max_id = max_id;
                        record.step = row.step;
                        record.updated_at_ms = now_ms;
                        updated += 1;
                    }
                }
            }
        }
        Response::Imported { created, updated }
    }

    fn update_tag(
        &mut self,
        name: &str,
        step: Option<u64>,
        description: Option<&str>,
        max_id: Option<u64>,
        now_ms: u64,
    ) -> Response {
        let checked = step
            .map_or(Ok(()), tag::validate_step)
            .and_then(|()| description.map_or(Ok(()), tag::validate_description))
            .and_then(|()| max_id.map_or(Ok(()), tag::validate_max_id));
        if let Err(msg) = checked {
            return Response::Rejected(Rejection::InvalidArgument(msg));
        }
        let Some(record) = self.tags.get_mut(name) else {
            return Response::Rejected(Rejection::TagNotFound);
        };
        if let Some(new_max_id) = max_id {
            if new_max_id < record.max_id {
                // A raise sent again after a leader change may commit twice, claims moving
                // `max_id` past it in between. The copy carries the `now_ms` of the tag's last
                // update and asks for the step and description it already has: its effect holds,
                // so it is answered with the tag and changes nothing.
                let same_update = record.updated_at_ms == now_ms
                    && step.is_none_or(|step| step == record.step)
                    && description.is_none_or(|description| description == record.description);
                if same_update {
                    return Response::Tag { tag: name.to_string(), record: record.clone() };
                }
                return Response::Rejected(Rejection::MaxIdDecrease { current: record.max_id });
            }
        }
        if let Some(step) = step {
            record.step = step;
        }
        if let Some(description) = description {
            record.description = description.to_string();
        }
        if let Some(new_max_id) = max_id {
            record.max_id = new_max_id;
        }
        record.updated_at_ms = now_ms;
        Response::Tag { tag: name.to_string(), record: record.clone() }
    }

    /// Sets a tag's mode; only ever towards `Monotonic` (a copy of the same change is answered
    /// with the tag and changes nothing).
    fn set_tag_mode(&mut self, name: &str, mode: TagMode, now_ms: u64) -> Response {
        let Some(record) = self.tags.get_mut(name) else {
            return Response::Rejected(Rejection::TagNotFound);
        };
        match (record.mode, mode) {
            (TagMode::Segment, TagMode::Monotonic) if self.scramble_keys.contains_key(name) => {
                return Response::Rejected(Rejection::ModeMismatch(
                    "a scrambled tag cannot become monotonic: its IDs are in no order".to_string(),
                ))
            }
            (TagMode::Monotonic, TagMode::Segment) => {
                return Response::Rejected(Rejection::ModeMismatch(
                    "a monotonic tag cannot go back to segment mode".to_string(),
                ))
            }
            (TagMode::Segment, TagMode::Monotonic) => {
                record.mode = mode;
                record.updated_at_ms = record.updated_at_ms.max(now_ms);
            }
            _ => {}
        }
        Response::Tag { tag: name.to_string(), record: record.clone() }
    }

    /// Claims `[max_id, max_id + step)` for a claimer of the tag's mode: nodes serving their own
    /// ranges (`Segment`) or the leader of a monotonic tag (`Monotonic`); the other is refused.
    fn claim(&mut self, name: &str, step: u64, mode: TagMode) -> Response {
        if let Err(msg) = tag::validate_step(step) {
            return Response::Rejected(Rejection::InvalidArgument(msg));
        }
        let Some(record) = self.tags.get_mut(name) else {
            return Response::Rejected(Rejection::TagNotFound);
        };
        if record.mode != mode {
            return Response::Rejected(Rejection::ModeMismatch(format!(
                "tag '{name}' is a {} tag; this claim is for {} tags",
                record.mode.as_str(),
                mode.as_str()
            )));
        }
        // A scrambled tag's IDs end where its permutation's space does.
        let limit = self.scramble_keys.get(name).map_or(tag::MAX_ID_LIMIT, |key| key.id_limit());
        let start = record.max_id;
        if start >= limit {
            return Response::Rejected(Rejection::TagExhausted);
        }
        // The last claim may be shorter than the step: `max_id` stops at the limit.
        let end = start.checked_add(step).map_or(limit, |end| end.min(limit));
        record.max_id = end;
        Response::Segment { start, end }
    }

    fn release_segment(&mut self, name: &str, from: u64, expected_max_id: u64) -> Response {
        let Some(record) = self.tags.get_mut(name) else {
            return Response::Rejected(Rejection::TagNotFound);
        };
        let applies = record.max_id == expected_max_id && 1 <= from && from < expected_max_id;
        if applies {
            record.max_id = from;
        }
        Response::Released { applied: applies }
    }
}

#[cfg(test)]
mod batches;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
