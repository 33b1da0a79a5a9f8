//! Release versions: what each member runs, and the cluster version the members agreed on.
//!
//! A member reports the release it runs in a header of every `/raft/*` message
//! (`network::identity::VERSION_HEADER`); a member that sends none runs [`Version::BASELINE`], the
//! first release, which had no such header. The cluster version is replicated state
//! (`Request::SetClusterVersion`): it only rises, and only once every member reports at least the
//! new version, because a command that needs it is proposed only from then on and a member of an
//! older release could not decode it (bincode is positional: an unknown `Request` variant is an
//! error, never a misread).

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde::Serialize;

/// A release number, `major.minor.patch`, ordered as releases are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Version {
    /// The first release (0.1.0), recorded in `releases/0.1.0`: its members send no version
    /// header, and a store it wrote has no cluster version, so both read as this.
    pub const BASELINE: Version = Version::new(0, 1, 0);

    /// The release that introduced `Request::ClaimBatch` and the batched forwarding of monotonic
    /// takes between nodes: neither is used before the cluster version reaches it.
    pub const CLAIM_BATCHES: Version = Version::new(0, 3, 0);

    /// The release that introduced scrambled tags (`Request::CreateScrambledTag`,
    /// `Request::RestoreScrambleKeys`): neither is proposed before the cluster version reaches it.
    pub const SCRAMBLED_TAGS: Version = Version::new(0, 3, 0);

    /// The release that keeps a member's current snapshot in a file beside its store
    /// (`storage::snapshot_files`) instead of as chunks inside it, which the baseline release
    /// reads: a member whose cluster is older still writes chunks, so it can go back to that
    /// release. A local layout, not a command: members need not agree on it.
    pub const SNAPSHOT_FILES: Version = Version::new(0, 3, 0);

    /// The release this binary is (the workspace version in `Cargo.toml`).
    pub const OWN: Version = Version::new(
        parse_u32(env!("CARGO_PKG_VERSION_MAJOR")),
        parse_u32(env!("CARGO_PKG_VERSION_MINOR")),
        parse_u32(env!("CARGO_PKG_VERSION_PATCH")),
    );

    pub const fn new(major: u32, minor: u32, patch: u32) -> Version {
        Version { major, minor, patch }
    }
}

/// The version of a member or a store that records none: the baseline, which had none.
impl Default for Version {
    fn default() -> Version {
        Version::BASELINE
    }
}

/// A decimal number at compile time (the version parts Cargo gives); a build error otherwise.
const fn parse_u32(text: &str) -> u32 {
    let bytes = text.as_bytes();
    assert!(!bytes.is_empty(), "empty version part");
    let mut value: u32 = 0;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "version part is not a number");
        value = value * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    value
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for Version {
    type Err = String;

    /// `major.minor.patch`, each a decimal number (no pre-release or build suffix: leafraft's
    /// releases have none).
    fn from_str(text: &str) -> Result<Version, String> {
        let mut parts = text.split('.').map(|part| part.parse::<u32>().ok());
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(Some(major)), Some(Some(minor)), Some(Some(patch)), None) => Ok(Version::new(major, minor, patch)),
            _ => Err(format!("{text:?} is not a version (major.minor.patch)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_print_and_order_as_releases_do() {
        assert_eq!("0.2.0".parse::<Version>(), Ok(Version::new(0, 2, 0)));
        assert_eq!(Version::new(1, 10, 3).to_string(), "1.10.3");
        assert!(Version::new(0, 10, 0) > Version::new(0, 9, 9));
        assert!(Version::new(1, 0, 0) > Version::new(0, 99, 0));
        for bad in ["", "1", "1.2", "1.2.3.4", "1.x.3", "1.2.-3", "v1.2.3", "1.2.3-rc1"] {
            assert!(bad.parse::<Version>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn this_binary_is_newer_than_the_baseline() {
        assert_eq!(Version::OWN.to_string(), env!("CARGO_PKG_VERSION"));
        assert!(Version::OWN > Version::BASELINE);
    }
}
