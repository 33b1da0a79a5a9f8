//! Who may call which route (`docs/api.md`, "Conventions"): the role a route needs ([`need`]), the bearer token
//! checked against the node's [`Credentials`], and on `/raft/*` with `--peer-ca` the peer's client
//! certificate, which must name the member the request's identity headers claim.
//!
//! Refusals are 401 `UNAUTHORIZED` (no or unknown credential, no certificate) or 403 `FORBIDDEN`
//! (another role, another tag, a certificate of another member), in the API's error shape; on
//! Leaf's paths the same statuses with Leaf's body `Result{id=-4, status=EXCEPTION}`. Each is
//! counted in `leafraft_auth_refusals{route, reason}` and logged at a bounded rate
//! ([`RefusalLog`]: the first of an interval, then a summary), never with the token.

use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::Request;
use axum::http::header::AUTHORIZATION;
use axum::http::header::CONTENT_TYPE;
use axum::http::Method;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::Response;
use raft::network::PeerIdentity;

use super::path_tag::PathTag;
use super::path_tag::TagName;
use crate::api::refusals::RefusalLog;
use crate::api::tls::PeerInfo;
use crate::config::credentials::AuthRefusal;
use crate::config::credentials::Credentials;
use crate::config::credentials::Role;
use crate::error::Error;
use crate::error::ErrorCode;
use crate::metrics::Metrics;

/// The Leaf code of a refused credential on Leaf's paths (Leaf has none; −1 to −3 and −5 are taken).
pub const LEAF_REFUSED: i32 = -4;

/// What a route needs: a role, the tag (or namespace) of an ID request, and whether the answer is
/// Leaf's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need<'a> {
    pub role: Role,
    pub tag: Option<&'a str>,
    pub leaf: bool,
}

/// The role `method` on the route template `route` needs (`path` is the request's, for the tag);
/// `None`: open to everyone (reads of state, health, metrics, decoding).
pub fn need<'a>(method: &Method, route: &str, path: &'a str) -> Option<Need<'a>> {
    rule(reads(method), route).map(|rule| rule.need(path))
}

/// Whether `method` only reads (the methods open to a client's role on ID routes).
pub fn reads(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// What a route template needs, before a request's path is known: [`need`] without the tag.
/// The gate works it out once per route and method kind (`reads`), not per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub role: Role,
    /// Which `/`-separated segment of the path is the tag (or namespace).
    pub tag_segment: Option<usize>,
    pub leaf: bool,
}

impl Rule {
    /// The need of a request to `path` on this rule's route.
    pub fn need(self, path: &str) -> Need<'_> {
        Need { role: self.role, tag: self.tag_segment.and_then(|n| segment(path, n)), leaf: self.leaf }
    }
}

/// `path.split('/').nth(n)` in one pass over the bytes (`split` with a `char` pattern cost more
/// than the rest of the gate's credential check on the one-ID path).
fn segment(path: &str, n: usize) -> Option<&str> {
    let (mut seen, mut start) = (0, 0);
    for (i, byte) in path.bytes().enumerate() {
        if byte == b'/' {
            if seen == n {
                return path.get(start..i);
            }
            seen += 1;
            start = i + 1;
        }
    }
    if seen == n {
        path.get(start..)
    } else {
        None
    }
}

/// The rule of the route template `route` for a method that `reads` or not; `None`: open to
/// everyone.
pub fn rule(reads: bool, route: &str) -> Option<Rule> {
    let rule = |role, tag_segment, leaf| Some(Rule { role, tag_segment, leaf });
    if route.starts_with("/raft/") {
        return rule(Role::Peer, None, false);
    }
    if !reads {
        return rule(Role::Admin, None, false);
    }
    match route {
        // A backup holds every key; unscrambling undoes what a scrambled tag hides.
        "/v1/backup" | "/v1/tags/{tag}/unscramble/{id}" => rule(Role::Admin, None, false),
        "/api/segment/get/{tag}" | "/api/timeseq/get/{ns}" => rule(Role::Client, Some(4), true),
        "/api/snowflake/get/{key}" => rule(Role::Client, None, true),
        "/v1/segment/{tag}" | "/v1/segment/{tag}/ranges" | "/v1/timeseq/{ns}" => rule(Role::Client, Some(3), false),
        "/v1/snowflake" => rule(Role::Client, None, false),
        _ => None,
    }
}

/// Checks the credential of each routed request (run by [`super::gate`]).
pub struct Checker {
    /// The peer secret, admin token and client tokens this node accepts (swapped by `reload`
    /// when the token files change).
    pub credentials: Arc<ArcSwap<Credentials>>,
    /// `--peer-ca`: `/raft/*` needs a client certificate naming the member it claims to be.
    pub mutual_tls: bool,
    pub metrics: Arc<Metrics>,
    /// Where refusals are logged, at a bounded rate.
    pub refusals: Arc<RefusalLog>,
}

impl Checker {
    /// The answer to a request to `route` (a route template, whose rule the gate worked out)
    /// whose credential is refused (counted, and logged at a bounded rate); `None` lets the
    /// request through. On an ID route, the tag decoded from the path goes into the request's
    /// extensions as a [`PathTag`] for the handler: the scope check and the handler see the same
    /// tag. With no credential configured for the route's role, no header is read.
    pub fn refusal(&self, request: &mut Request, route: &'static str, rule: Rule) -> Option<Response> {
        let need = rule.need(request.uri().path());
        let tag = need.tag.map(|segment| PathTag(TagName::decode(segment)));
        let credentials = self.credentials.load();
        let mut verdict = Ok(());
        if credentials.guards(need.role) {
            let bearer = request.headers().get(AUTHORIZATION).and_then(|value| bearer(value.to_str().ok()?));
            // A tag that is not one is in no token's scope (the handler then answers 400).
            let tag_name = tag.as_ref().map(|tag| tag.0.as_ref().map_or("", TagName::as_str));
            verdict = credentials.authorize(need.role, tag_name, bearer);
        }
        drop(credentials);
        if verdict.is_ok() && need.role == Role::Peer && self.mutual_tls {
            verdict = check_peer_certificate(request);
        }
        let Some(refusal) = verdict.err() else {
            if let Some(tag) = tag {
                request.extensions_mut().insert(tag);
            }
            return None;
        };
        self.metrics.count_refusal(route, refusal.reason());
        if self.refusals.note(route, refusal.reason()) {
            let remote = request
                .extensions()
                .get::<ConnectInfo<PeerInfo>>()
                .map_or_else(|| "unknown".to_string(), |info| info.0.remote.to_string());
            let claimed = PeerIdentity::from_headers(request.headers()).ok().flatten().map(|peer| peer.node_id);
            tracing::warn!(
                path = request.uri().path(),
                remote = %remote,
                claimed_node = ?claimed,
                reason = refusal.reason(),
                "refused a request (further refusals are summed up once per interval)"
            );
        }
        Some(refused(refusal, need.leaf))
    }
}

/// The token of an `Authorization: Bearer <token>` value; the scheme's case does not matter
/// (RFC 7235 §2.1).
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// With `--peer-ca`: the connection's client certificate (already verified against the CA by the
/// handshake) must name the node the identity headers say sent the request.
fn check_peer_certificate(request: &Request) -> Result<(), AuthRefusal> {
    let certificate = request
        .extensions()
        .get::<ConnectInfo<PeerInfo>>()
        .and_then(|info| info.0.certificate.clone())
        .ok_or(AuthRefusal::NoCertificate)?;
    let claimed = match PeerIdentity::from_headers(request.headers()) {
        Ok(Some(peer)) => peer.node_id,
        _ => return Err(AuthRefusal::CertificateMismatch),
    };
    if crate::api::tls::names_node(&certificate, claimed) {
        Ok(())
    } else {
        Err(AuthRefusal::CertificateMismatch)
    }
}

/// The answer to a refused request.
pub fn refused(refusal: AuthRefusal, leaf: bool) -> Response {
    let (status, code) = if refusal.is_unauthorized() {
        (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized)
    } else {
        (StatusCode::FORBIDDEN, ErrorCode::Forbidden)
    };
    if leaf {
        let body = format!("Result{{id={LEAF_REFUSED}, status=EXCEPTION}}");
        return (status, [(CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response();
    }
    Error::new(code, refusal.message()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_need_their_role() {
        let get = Method::GET;
        let some = |role, tag, leaf| Some(Need { role, tag, leaf });
        assert_eq!(need(&Method::POST, "/raft/append", "/raft/append"), some(Role::Peer, None, false));
        assert_eq!(need(&Method::POST, "/v1/tags", "/v1/tags"), some(Role::Admin, None, false));
        assert_eq!(need(&Method::PATCH, "/v1/tags/{tag}", "/v1/tags/a"), some(Role::Admin, None, false));
        assert_eq!(need(&get, "/v1/backup", "/v1/backup"), some(Role::Admin, None, false));
        assert_eq!(
            need(&get, "/v1/tags/{tag}/unscramble/{id}", "/v1/tags/a/unscramble/7"),
            some(Role::Admin, None, false)
        );
        assert_eq!(need(&get, "/api/segment/get/{tag}", "/api/segment/get/a"), some(Role::Client, Some("a"), true));
        assert_eq!(need(&get, "/api/timeseq/get/{ns}", "/api/timeseq/get/n"), some(Role::Client, Some("n"), true));
        assert_eq!(need(&get, "/api/snowflake/get/{key}", "/api/snowflake/get/k"), some(Role::Client, None, true));
        assert_eq!(
            need(&get, "/v1/segment/{tag}/ranges", "/v1/segment/b/ranges"),
            some(Role::Client, Some("b"), false)
        );
        assert_eq!(need(&get, "/v1/timeseq/{ns}", "/v1/timeseq/n"), some(Role::Client, Some("n"), false));
        assert_eq!(need(&get, "/v1/snowflake", "/v1/snowflake"), some(Role::Client, None, false));
        for open in ["/v1/tags", "/v1/cluster", "/metrics", "/healthz", "/v1/snowflake/decode/{id}", "/v1/clock"] {
            assert_eq!(need(&get, open, open), None, "{open}");
        }
    }

    #[test]
    fn a_path_segment_is_what_split_finds() {
        for path in ["/api/segment/get/a", "/v1/segment/b/ranges", "/", "", "//", "/a%2Fb/c", "/v1/segment/", "x"] {
            for n in 0..6 {
                assert_eq!(segment(path, n), path.split('/').nth(n), "{path} {n}");
            }
        }
    }

    #[test]
    fn regression_the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer t0k", "bearer t0k", "BEARER t0k", "bEaReR  t0k"] {
            assert_eq!(bearer(value), Some("t0k"), "{value}");
        }
        for value in ["Basic t0k", "Bearer", "Bearer ", "Bearert0k", "t0k"] {
            assert_eq!(bearer(value), None, "{value}");
        }
    }

    #[test]
    fn refusals_are_401_or_403_and_leaf_paths_answer_leafs_body() {
        assert_eq!(refused(AuthRefusal::Missing, false).status(), StatusCode::UNAUTHORIZED);
        assert_eq!(refused(AuthRefusal::Unknown, true).status(), StatusCode::UNAUTHORIZED);
        assert_eq!(refused(AuthRefusal::Tag, true).status(), StatusCode::FORBIDDEN);
        assert_eq!(refused(AuthRefusal::Role, false).status(), StatusCode::FORBIDDEN);
        assert_eq!(refused(AuthRefusal::CertificateMismatch, false).status(), StatusCode::FORBIDDEN);
    }
}
