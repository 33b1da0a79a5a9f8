//! Tag names and the numeric limits of segments, checked at the API and again in `apply`.

/// IDs are positive signed 64-bit integers, so `max_id` never exceeds `i64::MAX` and the largest
/// ID ever handed out is `i64::MAX - 1`.
pub const MAX_ID_LIMIT: u64 = i64::MAX as u64;

/// The largest step a tag may be configured with or a claim may ask for. Ten times Leaf's
/// `MAX_STEP` (1,000,000, the dynamic step's ceiling in `ids/src/step.rs`): a tag configured
/// above Leaf's ceiling keeps its own step, which the dynamic step never goes below.
pub const MAX_STEP: u64 = 10_000_000;

/// The longest description a tag may carry, in bytes.
pub const MAX_DESCRIPTION_LEN: usize = 1024;

/// The longest tag name, in bytes.
pub const MAX_TAG_LEN: usize = 128;

/// Checks a tag name against `[A-Za-z0-9_.:-]{1,128}`.
pub fn validate_tag(tag: &str) -> Result<(), String> {
    if tag.is_empty() || tag.len() > MAX_TAG_LEN {
        return Err(format!("tag must be 1 to {MAX_TAG_LEN} characters long"));
    }
    let ok = tag.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if !ok {
        return Err(format!("tag '{}' may only contain A-Z a-z 0-9 _ . : -", tag.escape_debug()));
    }
    Ok(())
}

pub fn validate_step(step: u64) -> Result<(), String> {
    if step == 0 || step > MAX_STEP {
        return Err(format!("step must be between 1 and {MAX_STEP}, got {step}"));
    }
    Ok(())
}

pub fn validate_max_id(max_id: u64) -> Result<(), String> {
    if max_id == 0 || max_id > MAX_ID_LIMIT {
        return Err(format!("max_id must be between 1 and {MAX_ID_LIMIT}, got {max_id}"));
    }
    Ok(())
}

pub fn validate_description(description: &str) -> Result<(), String> {
    if description.len() > MAX_DESCRIPTION_LEN {
        return Err(format!("description must be at most {MAX_DESCRIPTION_LEN} bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_names() {
        for ok in ["a", "order_v2", "a.b:c-d", &"x".repeat(128)] {
            assert!(validate_tag(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "ä", &"x".repeat(129), "a\n"] {
            assert!(validate_tag(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn limits() {
        assert!(validate_step(0).is_err());
        assert!(validate_step(1).is_ok());
        assert!(validate_step(MAX_STEP).is_ok());
        assert!(validate_step(MAX_STEP + 1).is_err());
        assert!(validate_max_id(0).is_err());
        assert!(validate_max_id(MAX_ID_LIMIT).is_ok());
        assert!(validate_max_id(MAX_ID_LIMIT + 1).is_err());
    }
}
