//! `Layout`: how one namespace lays out its IDs.
//!
//! Long form, high to low: sign 0, seconds since the epoch (`63 − shard_bits − seq_bits` bits),
//! shard, sequence. String form: prefix, `yyyyMMddHHmmss` in the namespace's fixed UTC offset, the
//! sequence and the shard in decimal, zero-padded to the digits their widths need (6 and 4 for
//! the default 19 and 12 bits). A fixed offset never repeats a local time, so the string form is
//! as unique as the long one.

use chrono::DateTime;
use chrono::FixedOffset;
use chrono::NaiveDateTime;

/// The longest prefix of a string ID.
pub const MAX_PREFIX_LEN: usize = 32;
const TIME_DIGITS: usize = 14;
const TIME_FORMAT: &str = "%Y%m%d%H%M%S";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Unix seconds of second zero.
    pub epoch_s: u64,
    /// The string form's zone, seconds east of UTC.
    pub utc_offset_s: i32,
    pub shard_bits: u8,
    pub seq_bits: u8,
}

/// One ID taken apart; `second` is a Unix second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub second: u64,
    pub shard: u64,
    pub sequence: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    Shard { shard: u64, max: u64 },
    Sequence(u64),
    Second(u64),
    Prefix,
    Malformed(String),
}

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayoutError::Shard { shard, max } => write!(f, "shard {shard} is out of range (0 to {max})"),
            LayoutError::Sequence(sequence) => {
                write!(f, "sequence {sequence} does not fit the namespace's sequence bits")
            }
            LayoutError::Second(second) => write!(f, "second {second} is outside the namespace's time bits"),
            LayoutError::Prefix => write!(f, "the prefix may hold at most 32 of A-Z a-z 0-9 - _"),
            LayoutError::Malformed(what) => write!(f, "not an ID of this namespace: {what}"),
        }
    }
}

impl std::error::Error for LayoutError {}

fn digits(max: u64) -> usize {
    max.checked_ilog10().map_or(1, |log| log as usize + 1)
}

impl Layout {
    #[inline]
    pub fn time_bits(&self) -> u8 {
        63u8.saturating_sub(self.shard_bits).saturating_sub(self.seq_bits)
    }

    #[inline]
    pub fn max_shard(&self) -> u64 {
        (1u64 << self.shard_bits) - 1
    }

    #[inline]
    pub fn max_sequence(&self) -> u64 {
        (1u64 << self.seq_bits) - 1
    }

    #[inline]
    fn max_offset_s(&self) -> u64 {
        (1u64 << self.time_bits()) - 1
    }

    pub fn seq_digits(&self) -> usize {
        digits(self.max_sequence())
    }

    pub fn shard_digits(&self) -> usize {
        digits(self.max_shard())
    }

    #[inline]
    pub fn check_shard(&self, shard: u64) -> Result<(), LayoutError> {
        if shard > self.max_shard() {
            return Err(LayoutError::Shard { shard, max: self.max_shard() });
        }
        Ok(())
    }

    #[inline]
    pub fn encode(&self, parts: Parts) -> Result<u64, LayoutError> {
        self.check_shard(parts.shard)?;
        if parts.sequence > self.max_sequence() {
            return Err(LayoutError::Sequence(parts.sequence));
        }
        let offset = parts.second.checked_sub(self.epoch_s).filter(|&offset| offset <= self.max_offset_s());
        let offset = offset.ok_or(LayoutError::Second(parts.second))?;
        Ok(offset << (self.shard_bits + self.seq_bits) | parts.shard << self.seq_bits | parts.sequence)
    }

    pub fn decode(&self, id: u64) -> Result<Parts, LayoutError> {
        if id >> 63 != 0 {
            return Err(LayoutError::Malformed(format!("{id} has its sign bit set")));
        }
        let offset = id >> (self.shard_bits + self.seq_bits);
        let second = self.epoch_s.checked_add(offset).ok_or(LayoutError::Second(offset))?;
        Ok(Parts { second, shard: (id >> self.seq_bits) & self.max_shard(), sequence: id & self.max_sequence() })
    }

    fn zone(&self) -> Result<FixedOffset, LayoutError> {
        FixedOffset::east_opt(self.utc_offset_s).ok_or(LayoutError::Malformed("the zone offset is invalid".into()))
    }

    /// The string form; the parts are checked as for the long form.
    pub fn format(&self, prefix: &str, parts: Parts) -> Result<String, LayoutError> {
        check_prefix(prefix)?;
        self.encode(parts)?;
        let second = i64::try_from(parts.second).map_err(|_| LayoutError::Second(parts.second))?;
        let time = DateTime::from_timestamp(second, 0).ok_or(LayoutError::Second(parts.second))?;
        let local = time.with_timezone(&self.zone()?).format(TIME_FORMAT);
        let (seq_digits, shard_digits) = (self.seq_digits(), self.shard_digits());
        Ok(format!("{prefix}{local}{:0seq_digits$}{:0shard_digits$}", parts.sequence, parts.shard))
    }

    /// Takes a string ID apart from the right (the prefix may end in digits): its prefix and parts.
    pub fn parse(&self, id: &str) -> Result<(String, Parts), LayoutError> {
        let malformed = || LayoutError::Malformed(id.chars().take(80).collect());
        let tail = TIME_DIGITS + self.seq_digits() + self.shard_digits();
        let split = id.len().checked_sub(tail).filter(|&at| id.is_char_boundary(at)).ok_or_else(malformed)?;
        let (prefix, numbers) = id.split_at(split);
        if !numbers.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed());
        }
        check_prefix(prefix)?;
        let (time, rest) = numbers.split_at(TIME_DIGITS);
        let (sequence, shard) = rest.split_at(self.seq_digits());
        let local = NaiveDateTime::parse_from_str(time, TIME_FORMAT).map_err(|_| malformed())?;
        let utc = local.and_utc().timestamp() - i64::from(self.utc_offset_s);
        let second = u64::try_from(utc).map_err(|_| malformed())?;
        let parts = Parts {
            second,
            shard: shard.parse().map_err(|_| malformed())?,
            sequence: sequence.parse().map_err(|_| malformed())?,
        };
        self.encode(parts)?;
        Ok((prefix.to_string(), parts))
    }

    /// Either form: at most 19 digits is a long ID, anything else a string ID.
    pub fn parse_any(&self, id: &str) -> Result<Parts, LayoutError> {
        if id.len() <= 19 && !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
            let long: u64 = id.parse().map_err(|_| LayoutError::Malformed(id.to_string()))?;
            return self.decode(long);
        }
        self.parse(id).map(|(_, parts)| parts)
    }
}

pub fn check_prefix(prefix: &str) -> Result<(), LayoutError> {
    let ok =
        prefix.len() <= MAX_PREFIX_LEN && prefix.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        return Err(LayoutError::Prefix);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: Layout = Layout { epoch_s: 1_577_836_800, utc_offset_s: 0, shard_bits: 12, seq_bits: 19 };

    #[test]
    fn the_default_layout_matches_the_original_generator() {
        // 2020-01-01T00:00:01Z, shard 5, sequence 7.
        let parts = Parts { second: 1_577_836_801, shard: 5, sequence: 7 };
        assert_eq!(DEFAULT.encode(parts), Ok(1 << 31 | 5 << 19 | 7));
        assert_eq!(DEFAULT.format("ORD", parts).as_deref(), Ok("ORD202001010000010000070005"));
        let shanghai = Layout { utc_offset_s: 8 * 3600, ..DEFAULT };
        assert_eq!(shanghai.format("", parts).as_deref(), Ok("202001010800010000070005"));
        assert_eq!(shanghai.parse("x1202001010800010000070005"), Ok(("x1".to_string(), parts)));
        assert_eq!(shanghai.parse_any("2147483648"), Ok(Parts { second: 1_577_836_801, shard: 0, sequence: 0 }));
    }

    #[test]
    fn out_of_range_parts_and_bad_strings_are_refused() {
        let parts = Parts { second: 1_577_836_801, shard: 4096, sequence: 0 };
        assert_eq!(DEFAULT.encode(parts), Err(LayoutError::Shard { shard: 4096, max: 4095 }));
        assert!(DEFAULT.encode(Parts { shard: 0, sequence: 1 << 19, ..parts }).is_err());
        assert!(DEFAULT.encode(Parts { second: 5, shard: 0, sequence: 0 }).is_err());
        assert!(DEFAULT.format("a b", Parts { shard: 0, ..parts }).is_err());
        assert!(DEFAULT.format(&"p".repeat(33), Parts { shard: 0, ..parts }).is_err());
        for bad in ["", "x", "ORD2020010100000100000700O5", "ORD202013010000010000070005", "é20200101000001000007000"]
        {
            assert!(DEFAULT.parse_any(bad).is_err(), "{bad}");
        }
        assert!(DEFAULT.parse_any("9223372036854775808").is_err(), "sign bit");
        assert!(DEFAULT.parse("ORD202001010000015242880005").is_err(), "sequence over 2^19 - 1");
    }
}
