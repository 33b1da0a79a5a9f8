//! The series of refused credentials, reloads, TLS handshakes and connections.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::intern;
use super::registered;
use super::Metrics;
use super::RefusalLabels;

/// Refused credentials, reloads and TLS events.
pub(super) struct SecurityMetrics {
    auth_refusals: Family<RefusalLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
    credentials_reload_failures: Family<RoleLabels, Counter>,
    credentials_stale: Gauge,
    tls_handshake_failures: Family<ReasonLabels, Counter>,
    certificate_not_after: Family<FileLabels, Gauge>,
}

impl SecurityMetrics {
    pub(super) fn register(r: &mut Registry) -> SecurityMetrics {
        let auth_refusals = registered(
            r,
            "auth_refusals",
            "Requests refused for a missing or wrong credential or peer certificate, by route and reason",
            Family::default(),
        );
        let reloads = registered(
            r,
            "reloads",
            "Reloads without a restart (tls: certificate, key and CA files; credentials: token files), by result",
            Family::default(),
        );
        let credentials_reload_failures = registered(
            r,
            "credentials_reload_failures",
            "Token files that could not be used on a reload (empty, unreadable or invalid), by role; the last good \
             tokens stay in use",
            Family::default(),
        );
        let credentials_stale = registered(
            r,
            "credentials_stale",
            "1 while the tokens in use are not what the token files say (the last reload failed)",
            Gauge::default(),
        );
        let tls_handshake_failures = registered(
            r,
            "tls_handshake_failures",
            "TLS handshakes that failed, by reason (certificate: a client certificate the peer CA did not sign)",
            Family::default(),
        );
        let certificate_not_after = registered(
            r,
            "tls_certificate_not_after_seconds",
            "When the certificates in use stop being valid, in Unix seconds, by file (tls_cert: the node's own, \
             presented to clients and peers; peer_ca, ca: the earliest in the file); absent without TLS",
            Family::default(),
        );
        SecurityMetrics {
            certificate_not_after,
            auth_refusals,
            reloads,
            credentials_reload_failures,
            credentials_stale,
            tls_handshake_failures,
        }
    }
}

/// The connections to the node's port: how many are open, how often accepting waited at the cap,
/// how many were closed by a timeout, refused for their source or closed to make room. Touched
/// once per connection, never per request.
#[derive(Clone)]
pub struct ConnectionMetrics {
    pub open: Gauge,
    pub limit: Gauge,
    pub per_source_limit: Gauge,
    pub waited_at_limit: Counter,
    pub evicted: Counter,
    closed: Family<ReasonLabels, Counter>,
    refused: Family<ReasonLabels, Counter>,
}

impl ConnectionMetrics {
    pub(super) fn register(r: &mut Registry) -> ConnectionMetrics {
        let open = registered(r, "connections_open", "Connections open to this node's port", Gauge::default());
        let limit = registered(
            r,
            "connections_limit",
            "The most connections held at once (--max-connections)",
            Gauge::default(),
        );
        let waited_at_limit = registered(
            r,
            "connections_waited_at_limit",
            "Times accepting a connection waited because --max-connections were open",
            Counter::default(),
        );
        let closed = registered(
            r,
            "connections_timed_out",
            "Connections closed by a timeout, by which (header_read: no complete request headers in time, also \
             between requests and in the TLS handshake; idle: no byte moved either way)",
            Family::default(),
        );
        let per_source_limit = registered(
            r,
            "connections_per_source_limit",
            "The most connections one source address holds at once (--max-connections-per-source)",
            Gauge::default(),
        );
        let evicted = registered(
            r,
            "connections_evicted",
            "Idle connections (no request in progress) closed to make room for new ones at --max-connections, \
             those idle the longest first",
            Counter::default(),
        );
        let refused = registered(
            r,
            "connections_refused",
            "Connections closed as soon as they were accepted, by reason (per_source: their source address held \
             --max-connections-per-source already)",
            Family::default(),
        );
        ConnectionMetrics { open, limit, per_source_limit, waited_at_limit, evicted, closed, refused }
    }

    /// Counts a connection closed as soon as it was accepted (`per_source`).
    pub fn count_refused(&self, reason: &'static str) {
        self.refused.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Counts a connection closed by the `header_read` or `idle` timeout.
    pub fn count_timeout(&self, which: &'static str) {
        self.closed.get_or_create(&ReasonLabels { reason: which }).inc();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FileLabels {
    /// `tls_cert`, `peer_ca` or `ca`.
    pub file: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RoleLabels {
    pub role: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `tls` or `credentials`.
    pub what: &'static str,
    pub result: &'static str,
}

impl Metrics {
    /// Counts a failed TLS handshake: `certificate` (a client certificate the CA did not sign),
    /// `timeout` or `other`.
    pub fn count_handshake_failure(&self, reason: &'static str) {
        self.security.tls_handshake_failures.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Counts a request refused for its credential (or peer certificate), by route and reason.
    pub fn count_refusal(&self, route: &str, reason: &'static str) {
        self.security.auth_refusals.get_or_create(&RefusalLabels { route: intern(route), reason }).inc();
    }

    /// Counts a reload of `what` (`tls`, `credentials`): `ok`, or `error` (the previous ones stay).
    pub fn count_reload(&self, what: &'static str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.security.reloads.get_or_create(&ReloadLabels { what, result }).inc();
    }

    /// Creates the reload counters of `what` at zero, so that the first failure is an increase
    /// (a counter that first appears at 1 has no increase to alert on).
    pub fn expect_reloads(&self, what: &'static str) {
        for result in ["ok", "error"] {
            drop(self.security.reloads.get_or_create(&ReloadLabels { what, result }));
        }
    }

    /// Counts a token file of `role` that a reload could not use.
    pub fn count_credentials_reload_failure(&self, role: &'static str) {
        self.security.credentials_reload_failures.get_or_create(&RoleLabels { role }).inc();
    }

    /// When the certificates in use stop being valid (`tls::Tls::not_after`): the files loaded
    /// last replace what an earlier load said.
    pub fn set_certificates_not_after(&self, dates: &[(&'static str, i64)]) {
        self.security.certificate_not_after.clear();
        for &(file, date) in dates {
            self.security.certificate_not_after.get_or_create(&FileLabels { file }).set(date);
        }
    }

    /// Whether the tokens in use are older than what the files say.
    pub fn set_credentials_stale(&self, stale: bool) {
        self.security.credentials_stale.set(i64::from(stale));
    }
}
