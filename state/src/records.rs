//! The records the replicated state keeps and the commands carry: a tag's row, a tag's mode, the
//! snowflake layout and a time-sequence namespace.
//!
//! They sit below the commands (`request`) and the registries that apply them (`state_machine`,
//! `snowflake`, `timeseq`), which all name them: one module that depends on none of those keeps
//! the state's modules free of import cycles. Their encodings are persisted (log entries,
//! snapshots): fields are only ever appended.

use serde::Deserialize;
use serde::Serialize;

use crate::tag;

/// One tag's row: the role of a `leaf_alloc` row in Leaf.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagRecord {
    /// The first ID of the next claim.
    pub max_id: u64,
    /// The configured step: the smallest a claim normally asks for.
    pub step: u64,
    pub description: String,
    /// Proposer's wall clock at creation, carried in the command.
    pub created_at_ms: u64,
    /// Proposer's wall clock at the last update, carried in the command.
    pub updated_at_ms: u64,
    /// Who serves the tag: every node from its own ranges, or only the leader, in real-time
    /// order. Moves only from `Segment` to `Monotonic`.
    pub mode: TagMode,
}

/// A scrambled tag's permutation: its key, and the width of its ID space `[1, 2^bits - 1)`.
/// Fixed when the tag is created; persisted (log entries, snapshots, backups): fields are only
/// ever appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrambleKey {
    pub key: u128,
    pub bits: u8,
}

impl ScrambleKey {
    /// The narrowest ID space a scrambled tag may have: 65,534 IDs.
    pub const MIN_BITS: u8 = 16;
    /// The widest, and the default: every ID a tag can have (`tag::MAX_ID_LIMIT` is `2^63 - 1`).
    pub const MAX_BITS: u8 = 63;

    /// The first ID past the tag's space: `2^bits - 1` (the whole space's is `MAX_ID_LIMIT`).
    pub fn id_limit(self) -> u64 {
        (1u64 << self.bits.clamp(Self::MIN_BITS, Self::MAX_BITS)) - 1
    }

    pub fn validate(self) -> Result<(), String> {
        match (Self::MIN_BITS..=Self::MAX_BITS).contains(&self.bits) {
            true => Ok(()),
            false => Err(format!(
                "a scrambled tag's ID space is {} to {} bits wide, got {}",
                Self::MIN_BITS,
                Self::MAX_BITS,
                self.bits
            )),
        }
    }
}

/// How a tag's IDs are served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TagMode {
    /// Every node serves from ranges it claimed (`ClaimSegment`): unique, increasing per node.
    #[default]
    Segment,
    /// Only the leader serves, from ranges it claimed (`ClaimMonotonic`) in its own term and only
    /// after confirming it still leads: IDs increase in real-time order across the cluster.
    Monotonic,
}

impl TagMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TagMode::Segment => "segment",
            TagMode::Monotonic => "monotonic",
        }
    }

    pub fn parse(text: &str) -> Option<TagMode> {
        match text {
            "segment" => Some(TagMode::Segment),
            "monotonic" => Some(TagMode::Monotonic),
            _ => None,
        }
    }
}

/// How snowflake IDs are laid out: the engine's own type (`leafraft_ids::snowflake::Layout`, its
/// one definition, with the rules a recorded layout passes), persisted in the field order below.
use leafraft_ids::snowflake::Layout as SnowflakeLayout;

/// The persisted shape of a [`SnowflakeLayout`] (bincode is positional: this order is the
/// format). serde's `remote` derive checks it against the type: a field renamed, retyped, added or
/// removed there does not compile here. Fields holding a layout name it with
/// `#[serde(with = "snowflake_layout")]`, or `optional_snowflake_layout` for an `Option`.
#[derive(Serialize, Deserialize)]
#[serde(remote = "SnowflakeLayout")]
pub struct SnowflakeLayoutShape {
    pub epoch_ms: u64,
    pub time_bits: u8,
    pub worker_bits: u8,
    pub sequence_bits: u8,
}

/// `#[serde(with = "snowflake_layout")]`: a [`SnowflakeLayout`] in its persisted shape.
pub mod snowflake_layout {
    pub use super::SnowflakeLayoutShape as Shape;

    pub fn serialize<S: serde::Serializer>(layout: &super::SnowflakeLayout, serializer: S) -> Result<S::Ok, S::Error> {
        Shape::serialize(layout, serializer)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<super::SnowflakeLayout, D::Error> {
        Shape::deserialize(deserializer)
    }
}

/// `#[serde(with = "optional_snowflake_layout")]`: an `Option<SnowflakeLayout>`, encoded as the
/// option of the persisted shape (a newtype adds no bytes in bincode or JSON).
pub mod optional_snowflake_layout {
    use serde::Deserialize;
    use serde::Serialize;

    use super::SnowflakeLayout;

    #[derive(Serialize)]
    struct Out<'a>(#[serde(with = "super::snowflake_layout")] &'a SnowflakeLayout);

    #[derive(Deserialize)]
    struct In(#[serde(with = "super::snowflake_layout")] SnowflakeLayout);

    pub fn serialize<S: serde::Serializer>(layout: &Option<SnowflakeLayout>, serializer: S) -> Result<S::Ok, S::Error> {
        layout.as_ref().map(Out).serialize(serializer)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<SnowflakeLayout>, D::Error> {
        Ok(Option::<In>::deserialize(deserializer)?.map(|In(layout)| layout))
    }
}

/// The widest offset of a namespace's time zone (fixed offsets only: a zone with daylight saving
/// repeats an hour of local time, and two string IDs of the repeated hour could be equal).
pub const MAX_UTC_OFFSET_S: i32 = 18 * 3600;

/// The last second the 14-digit `yyyyMMddHHmmss` can write in any allowed offset
/// (9999-12-31T23:59:59Z minus 18 h).
pub const LAST_WRITABLE_SECOND: u64 = 253_402_300_799 - MAX_UTC_OFFSET_S as u64;

/// One namespace, fixed at creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceRecord {
    /// Unix seconds of second zero.
    pub epoch_s: u64,
    /// The string form's time zone as a fixed offset east of UTC, in seconds.
    pub utc_offset_s: i32,
    pub shard_bits: u8,
    pub seq_bits: u8,
    pub description: String,
    /// Proposer's wall clock at creation, carried in the command.
    pub created_at_ms: u64,
}

impl NamespaceRecord {
    pub fn time_bits(&self) -> u8 {
        63u8.saturating_sub(self.shard_bits).saturating_sub(self.seq_bits)
    }

    /// Sequences per second: `2^seq_bits`.
    pub fn seq_limit(&self) -> u64 {
        1u64 << self.seq_bits
    }

    /// The last Unix second the time bits can carry.
    pub fn last_second(&self) -> u64 {
        self.epoch_s.saturating_add((1u64 << self.time_bits()) - 1)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.shard_bits > 20 {
            return Err(format!("shard_bits must be 0 to 20, got {}", self.shard_bits));
        }
        if !(1..=24).contains(&self.seq_bits) {
            return Err(format!("seq_bits must be 1 to 24, got {}", self.seq_bits));
        }
        let time_bits = 63 - i32::from(self.shard_bits) - i32::from(self.seq_bits);
        if !(31..=40).contains(&time_bits) {
            return Err(format!("shard_bits + seq_bits leave {time_bits} time bits of 63; they must leave 31 to 40"));
        }
        if self.utc_offset_s.abs() > MAX_UTC_OFFSET_S || self.utc_offset_s % 60 != 0 {
            return Err("the time zone must be a whole-minute offset of at most 18 hours".into());
        }
        if self.last_second() > LAST_WRITABLE_SECOND {
            return Err("the epoch and time bits reach past year 9999".into());
        }
        tag::validate_description(&self.description)
    }
}
