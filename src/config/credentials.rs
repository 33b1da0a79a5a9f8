//! Credentials by role (`docs/api.md`, "Conventions"), and the one decision of who may do what.
//!
//! - **peer** (`--peer-secret`): `/raft/*`, the traffic between members; with `--peer-ca` also a
//!   client certificate naming the member (checked in `api::auth`).
//! - **admin** (`--admin-token`): tag, namespace, worker and membership writes, import and
//!   `GET /v1/backup`. An admin token may also take IDs of every tag (an operator checking a tag
//!   needs no second key).
//! - **client** (`--client-token NAME:TOKEN[:tag1,tag2]`, repeatable): ID endpoints; a token with
//!   tags takes IDs of those tags (segment tags and time-sequence namespaces) only, and snowflake
//!   IDs, which belong to no tag.
//!
//! A role without a configured credential is open (as every route was without `--secret`); once
//! configured, a role stays guarded: an emptied token file keeps the last good tokens
//! (`config::security`, `reload`). Peer and admin can be left open only on a loopback listener or
//! with `--insecure` (`Config::resolve`); client routes are open whenever no client token is
//! configured (`docs/api.md`, "Conventions").
//! `--secret S` is the shorthand for `--peer-secret S --admin-token S`.
//!
//! A request without a credential, or with one this node does not know, is refused with 401
//! `UNAUTHORIZED`; a known credential of another role, or a client token scoped to other tags, with
//! 403 `FORBIDDEN`. Every comparison runs in constant time over every configured credential, and
//! no credential is ever formatted: [`Secret`]'s `Debug` is redacted.

use std::fmt;
use std::sync::Arc;

use subtle::ConstantTimeEq;

/// A token or secret. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(text: &str) -> Secret {
        Secret(Arc::from(text))
    }

    /// The value, to send it (never to log it).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Constant time in the length of the shorter value (subtle's `ct_eq`).
    fn matches(&self, given: &[u8]) -> bool {
        bool::from(self.0.as_bytes().ct_eq(given))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The one format of every credential file (`--secret-file`, `--peer-secret-file`,
/// `--admin-token-file`, `--client-token-file`), read the same way at start and on a reload:
///
/// - UTF-8; a byte-order mark at the start is ignored (editors on Windows write one, and it would
///   otherwise become part of the first token, which no client could then send);
/// - lines end with LF or CRLF; spaces and tabs around a line are ignored;
/// - blank lines and lines whose first other character is `#` are comments;
/// - every other line is one entry, taken whole: a token, or in the client-token file one
///   `NAME:TOKEN[:tag1,tag2]`. Lines are never joined.
///
/// Answers the entries with their line numbers (from 1), so that errors can point at a line
/// without quoting it: an entry may be a secret.
pub fn credential_entries(text: &str) -> Vec<(usize, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.split('\n')
        .enumerate()
        .map(|(index, line)| (index + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .collect()
}

/// Why the text of a single-token file (or a value) is not one token. No variant holds the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotOneToken {
    /// Empty, or only blank lines and comments.
    Empty,
    /// More than one entry line (their line numbers): lines are never joined into one token.
    Several(Vec<usize>),
    /// A character a `Bearer` header cannot carry (on this line).
    Unsendable(usize),
}

impl fmt::Display for NotOneToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotOneToken::Empty => f.write_str("has no token (only blank lines and # comments)"),
            NotOneToken::Several(lines) => {
                let lines = lines.iter().map(usize::to_string).collect::<Vec<_>>().join(", ");
                write!(f, "holds more than one token (lines {lines}); it takes exactly one, comments start with #")
            }
            NotOneToken::Unsendable(line) => write!(f, "line {line}: {UNSENDABLE}"),
        }
    }
}

/// What a token may be made of, said without quoting it.
pub const UNSENDABLE: &str = "a token is visible ASCII without spaces (what an Authorization: Bearer header carries)";

/// Whether `token` can be sent as `Authorization: Bearer <token>`: visible ASCII, no spaces. A
/// token with a space or a non-ASCII character could never be presented (header values are
/// ASCII, and `Bearer a b` is not one token), so such a file is a mistake, not a token.
pub fn is_sendable_token(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic())
}

/// The one token of a single-token file's text (admin token, peer secret, `--secret`).
pub fn single_token(text: &str) -> Result<&str, NotOneToken> {
    match credential_entries(text).as_slice() {
        [] => Err(NotOneToken::Empty),
        [(_, token)] if is_sendable_token(token) => Ok(token),
        [(line, _)] => Err(NotOneToken::Unsendable(*line)),
        several => Err(NotOneToken::Several(several.iter().map(|(line, _)| *line).collect())),
    }
}

/// One `--client-token NAME:TOKEN[:tag1,tag2]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientToken {
    /// Who holds it (for logs and operators; never the token).
    pub name: String,
    pub token: Secret,
    /// The tags (and time-sequence namespaces) it may take IDs of; `None`: every one.
    pub tags: Option<Vec<String>>,
}

impl ClientToken {
    /// Parses `NAME:TOKEN[:tag1,tag2]`. An error never quotes the text: without its `:` a
    /// line is all token, and even its "name" may be a secret then.
    pub fn parse(text: &str) -> Result<ClientToken, String> {
        const FORM: &str = "a client token is NAME:TOKEN[:tag1,tag2] with a NAME of letters, digits, '_', '.', '-'";
        let Some((name, rest)) = text.trim().split_once(':') else {
            return Err(format!("{FORM}; this one has no NAME: part"));
        };
        let mut parts = rest.splitn(2, ':');
        let (name, token) = (name.trim(), parts.next().unwrap_or_default().trim());
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !valid_name {
            return Err(FORM.into());
        }
        if token.is_empty() {
            return Err(format!("{FORM}; this one has an empty TOKEN"));
        }
        if !is_sendable_token(token) {
            return Err(format!("the client token of {name}: {UNSENDABLE}"));
        }
        let tags = match parts.next() {
            None => None,
            Some(list) => {
                let tags: Vec<String> =
                    list.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect();
                if tags.is_empty() {
                    return Err(format!("the client token of {name}: an empty tag list (leave it out for every tag)"));
                }
                for tag in &tags {
                    leafraft_state::tag::validate_tag(tag).map_err(|e| format!("the client token of {name}: {e}"))?;
                }
                Some(tags)
            }
        };
        Ok(ClientToken { name: name.to_string(), token: Secret::new(token), tags })
    }
}

/// The roles a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Peer,
    Admin,
    Client,
}

/// Why a request was refused: the `reason` label of `leafraft_auth_refusals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthRefusal {
    /// No credential (401).
    Missing,
    /// A credential this node does not know (401).
    Unknown,
    /// A known credential of another role (403).
    Role,
    /// A client token scoped to other tags (403).
    Tag,
    /// `/raft/*` without a client certificate while `--peer-ca` is set (401).
    NoCertificate,
    /// A peer certificate that does not name the member the request claims to come from (403).
    CertificateMismatch,
}

impl AuthRefusal {
    pub fn reason(self) -> &'static str {
        match self {
            AuthRefusal::Missing => "missing",
            AuthRefusal::Unknown => "unknown",
            AuthRefusal::Role => "role",
            AuthRefusal::Tag => "tag",
            AuthRefusal::NoCertificate => "no_certificate",
            AuthRefusal::CertificateMismatch => "certificate_mismatch",
        }
    }

    /// 401 for no (valid) credential, 403 for a valid one that does not cover the request.
    pub fn is_unauthorized(self) -> bool {
        matches!(self, AuthRefusal::Missing | AuthRefusal::Unknown | AuthRefusal::NoCertificate)
    }

    pub fn message(self) -> &'static str {
        match self {
            AuthRefusal::Missing => "this request needs Authorization: Bearer <token>",
            AuthRefusal::Unknown => "unknown token",
            AuthRefusal::Role => "this token does not have the role this request needs",
            AuthRefusal::Tag => "this client token is not for this tag",
            AuthRefusal::NoCertificate => "peers must present a client certificate (--peer-ca)",
            AuthRefusal::CertificateMismatch => "the client certificate does not name the member the request claims",
        }
    }
}

/// Every credential a node accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub peer: Option<Secret>,
    pub admin: Option<Secret>,
    pub clients: Vec<ClientToken>,
}

/// What a presented token is: every role it matched (one token may be both the peer secret and
/// the admin token, as `--secret` makes it).
struct Holder<'a> {
    peer: bool,
    admin: bool,
    client: Option<&'a ClientToken>,
}

impl Credentials {
    /// Whether anything is configured at all.
    pub fn is_empty(&self) -> bool {
        self.peer.is_none() && self.admin.is_none() && self.clients.is_empty()
    }

    /// Whether `role` needs a credential on this node.
    pub fn guards(&self, role: Role) -> bool {
        match role {
            Role::Peer => self.peer.is_some(),
            Role::Admin => self.admin.is_some(),
            Role::Client => !self.clients.is_empty(),
        }
    }

    /// Compares `given` with every configured credential, with no early exit.
    fn identify(&self, given: &str) -> Holder<'_> {
        let given = given.as_bytes();
        let peer = self.peer.as_ref().is_some_and(|s| s.matches(given));
        let admin = self.admin.as_ref().is_some_and(|s| s.matches(given));
        let mut client = None;
        for token in &self.clients {
            if token.token.matches(given) && client.is_none() {
                client = Some(token);
            }
        }
        Holder { peer, admin, client }
    }

    /// Whether the bearer token `given` may make a request that needs `role` (and, for IDs, of
    /// `tag`). Does not look at certificates (`api::auth` does, for `/raft/*`).
    pub fn authorize(&self, role: Role, tag: Option<&str>, given: Option<&str>) -> Result<(), AuthRefusal> {
        if !self.guards(role) {
            return Ok(());
        }
        let given = given.ok_or(AuthRefusal::Missing)?;
        let holder = self.identify(given);
        let allowed = match role {
            Role::Peer => holder.peer,
            Role::Admin => holder.admin,
            Role::Client => {
                if holder.admin {
                    true
                } else if let Some(token) = holder.client {
                    return match (&token.tags, tag) {
                        (Some(tags), Some(tag)) if !tags.iter().any(|t| t == tag) => Err(AuthRefusal::Tag),
                        _ => Ok(()),
                    };
                } else {
                    false
                }
            }
        };
        match allowed {
            true => Ok(()),
            false if holder.peer || holder.admin || holder.client.is_some() => Err(AuthRefusal::Role),
            false => Err(AuthRefusal::Unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials() -> Credentials {
        Credentials {
            peer: Some(Secret::new("peer")),
            admin: Some(Secret::new("admin")),
            clients: vec![
                ClientToken::parse("billing:bill:invoice,refund").unwrap(),
                ClientToken::parse("all:every").unwrap(),
            ],
        }
    }

    #[test]
    fn each_token_works_for_its_role_only() {
        let c = credentials();
        assert_eq!(c.authorize(Role::Peer, None, Some("peer")), Ok(()));
        assert_eq!(c.authorize(Role::Peer, None, Some("admin")), Err(AuthRefusal::Role));
        assert_eq!(c.authorize(Role::Peer, None, Some("bill")), Err(AuthRefusal::Role));
        assert_eq!(c.authorize(Role::Peer, None, None), Err(AuthRefusal::Missing));
        assert_eq!(c.authorize(Role::Peer, None, Some("peerx")), Err(AuthRefusal::Unknown));
        assert_eq!(c.authorize(Role::Admin, None, Some("admin")), Ok(()));
        assert_eq!(c.authorize(Role::Admin, None, Some("peer")), Err(AuthRefusal::Role));
        assert_eq!(c.authorize(Role::Admin, None, Some("every")), Err(AuthRefusal::Role));
        assert_eq!(c.authorize(Role::Client, Some("invoice"), Some("bill")), Ok(()));
        assert_eq!(c.authorize(Role::Client, Some("order"), Some("bill")), Err(AuthRefusal::Tag));
        assert_eq!(c.authorize(Role::Client, None, Some("bill")), Ok(()), "snowflake has no tag");
        assert_eq!(c.authorize(Role::Client, Some("order"), Some("every")), Ok(()));
        assert_eq!(c.authorize(Role::Client, Some("order"), Some("admin")), Ok(()), "admin takes IDs");
        assert_eq!(c.authorize(Role::Client, Some("order"), Some("peer")), Err(AuthRefusal::Role));
        assert_eq!(c.authorize(Role::Client, Some("order"), Some("nope")), Err(AuthRefusal::Unknown));
    }

    #[test]
    fn an_unguarded_role_is_open() {
        let c = Credentials { admin: Some(Secret::new("admin")), ..Credentials::default() };
        assert_eq!(c.authorize(Role::Client, Some("order"), None), Ok(()));
        assert_eq!(c.authorize(Role::Peer, None, Some("whatever")), Ok(()));
        assert_eq!(c.authorize(Role::Admin, None, None), Err(AuthRefusal::Missing));
    }

    #[test]
    fn client_tokens_parse_and_bad_ones_are_refused() {
        let t = ClientToken::parse("team-a:tok:x, y").unwrap();
        assert_eq!((t.name.as_str(), t.token.expose(), t.tags), ("team-a", "tok", Some(vec!["x".into(), "y".into()])));
        assert_eq!(ClientToken::parse("b:t").unwrap().tags, None);
        for bad in ["", "name", "name:", ":tok", "na me:tok", "n:t:", "n:t: , ", "n:t:oth%65r", "n:t:a/b"] {
            assert!(ClientToken::parse(bad).is_err(), "{bad}");
        }
        assert!(!format!("{:?}", ClientToken::parse("n:hunter2").unwrap()).contains("hunter2"));
    }
}
