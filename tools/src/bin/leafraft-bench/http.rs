//! `leafraft bench http`: a small HTTP load generator. Each worker owns one keep-alive
//! connection and sends requests back to back (or on a schedule, with `rate`), recording latency
//! in an HDR histogram; every ID in the answers is collected, and the report says whether any was
//! returned twice.
//!
//! With a `rate`, workers pace their sends on a schedule and the percentiles are corrected for
//! coordinated omission: a send whose connection was still busy with the previous answer at its
//! scheduled time is charged from that scheduled time, so a stall counts against every request
//! it held back, not only the one it hit (wrk2's rule). A send that left late only because tokio's
//! millisecond timer woke the worker late (its connection was idle) is charged from the actual
//! send: that lateness is the load generator's, and charging it would measure the timer (the
//! counter baseline shows ~1 ms then). Every request scheduled before the deadline is sent, even
//! if the backlog runs past it. `service_*` are the same requests measured from the actual send
//! (the uncorrected numbers), and sends more than 2 ms behind schedule are counted (`late_sends`).
//!
//! With `history`, every answered request is recorded (when it was sent, when its answer came
//! back, its smallest and largest ID) and the whole run is checked for real-time order: what a
//! monotonic tag promises (`docs/semantics.md#strictly-increasing-tags`), judged on the load generator's own records.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::Uri;
use http_body_util::BodyExt;
use http_body_util::Empty;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use leafraft_history::Span;
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::answers::count_duplicates;
use crate::answers::parse_ids;
use crate::answers::push_run;
use crate::answers::real_time_violations;
use crate::answers::Seen;
use crate::report::new_histogram;
use crate::report::Percentiles;

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub urls: Vec<String>,
    pub concurrency: usize,
    pub duration: Duration,
    /// Total requests per second over all workers; `None` sends as fast as answers come.
    pub rate: Option<f64>,
    /// Collect every returned ID and check that none repeats.
    pub check_unique: bool,
    /// Record every answered request and check real-time order over them.
    pub history: bool,
    /// PEM CA certificates that `https://` targets' certificates chain to.
    pub ca: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct HttpReport {
    pub requests: u64,
    pub ok: u64,
    pub errors_by_status: BTreeMap<u16, u64>,
    pub transport_errors: u64,
    pub elapsed_secs: f64,
    pub requests_per_sec: f64,
    pub ids: u64,
    pub ids_per_sec: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub over_5ms: u64,
    /// Latency from the actual send (without the coordinated-omission correction; the same as
    /// `p99_us`/`p999_us` without a rate).
    pub service_p99_us: u64,
    pub service_p999_us: u64,
    /// With a rate: sends more than 2 ms behind their schedule.
    pub late_sends: u64,
    /// `None` when not checked.
    pub duplicates: Option<u64>,
    /// With `history`: the answered requests recorded, and how many of them got IDs below those
    /// of a request answered before they were sent.
    pub history_requests: Option<u64>,
    pub real_time_violations: Option<u64>,
}

/// What a worker keeps of each answer.
#[derive(Debug, Clone, Copy)]
struct Keep {
    ids: bool,
    history: bool,
}

struct Target {
    addr: String,
    host: String,
    path: String,
    sequence: String,
    /// `https://`: the TLS connector and the name to verify.
    tls: Option<Tls>,
}

#[derive(Clone)]
pub struct Tls {
    connector: tokio_rustls::TlsConnector,
    name: rustls::pki_types::ServerName<'static>,
}

/// A TLS client that trusts the PEM CAs in `ca` (only them), over rustls with ring: the stack the
/// service serves with.
fn connector(ca: &std::path::Path) -> Result<tokio_rustls::TlsConnector, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in rustls::pki_types::CertificateDer::pem_file_iter(ca).map_err(|e| format!("--ca: {e}"))? {
        roots.add(certificate.map_err(|e| format!("--ca: {e}"))?).map_err(|e| format!("--ca: {e}"))?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)))
}

fn parse_target(url: &str, ca: Option<&std::path::Path>) -> Result<Target, String> {
    let uri: Uri = url.parse().map_err(|e| format!("bad URL '{url}': {e}"))?;
    let authority = uri.authority().ok_or_else(|| format!("URL '{url}' has no host"))?;
    let https = uri.scheme_str() == Some("https");
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tls = match (https, ca) {
        (false, _) => None,
        (true, None) => return Err(format!("{url}: https needs --ca")),
        (true, Some(ca)) => Some(Tls {
            connector: connector(ca)?,
            name: rustls::pki_types::ServerName::try_from(authority.host().to_string())
                .map_err(|e| format!("{url}: {e}"))?,
        }),
    };
    let path = uri.path_and_query().map_or("/".to_string(), |p| p.as_str().to_string());
    let route = uri.path();
    let sequence = if let Some(tag) = route.strip_prefix("/api/segment/get/") {
        format!("segment:{tag}")
    } else if let Some(rest) = route.strip_prefix("/v1/segment/") {
        format!("segment:{}", rest.trim_end_matches("/ranges"))
    } else if let Some(ns) = route.strip_prefix("/api/timeseq/get/").or_else(|| route.strip_prefix("/v1/timeseq/")) {
        // Both paths of one namespace hand out from one sequence space.
        format!("timeseq:{ns}")
    } else if route.contains("snowflake") {
        "snowflake".to_string()
    } else {
        route.to_string()
    };
    Ok(Target { addr: format!("{}:{port}", authority.host()), host: authority.to_string(), path, sequence, tls })
}

pub async fn run(options: &HttpOptions) -> Result<HttpReport, String> {
    if options.urls.is_empty() || options.concurrency == 0 {
        return Err("need at least one URL and a concurrency above 0".into());
    }
    let targets: Vec<Target> =
        options.urls.iter().map(|url| parse_target(url, options.ca.as_deref())).collect::<Result<_, _>>()?;
    let interval = options.rate.map(|rate| Duration::from_secs_f64(options.concurrency as f64 / rate.max(0.001)));
    let start = Instant::now();
    let deadline = start + options.duration;
    let mut workers = tokio::task::JoinSet::new();
    for i in 0..options.concurrency {
        let target = &targets[i % targets.len()];
        let (addr, host, path, sequence) =
            (target.addr.clone(), target.host.clone(), target.path.clone(), target.sequence.clone());
        let tls = target.tls.clone();
        let keep = Keep { ids: options.check_unique, history: options.history };
        // Stagger scheduled workers so their sends spread over the interval.
        let first = interval.map_or(start, |iv| start + iv.mul_f64(i as f64 / options.concurrency as f64));
        workers.spawn(async move { worker(addr, tls, host, path, sequence, keep, first, interval, deadline).await });
    }
    let mut report = HttpReport::default();
    let mut histogram = new_histogram();
    let mut service = new_histogram();
    let mut seen = Seen::new();
    let mut spans = Vec::new();
    while let Some(res) = workers.join_next().await {
        let worker = res.map_err(|e| format!("a worker failed: {e}"))?;
        report.requests += worker.requests;
        report.ok += worker.ok;
        report.transport_errors += worker.transport_errors;
        report.late_sends += worker.late_sends;
        report.ids += worker.ids;
        for (status, n) in worker.errors_by_status {
            *report.errors_by_status.entry(status).or_default() += n;
        }
        let _ = histogram.add(&worker.histogram);
        let _ = service.add(&worker.service);
        for (sequence, runs) in worker.seen {
            seen.entry(sequence).or_default().extend(runs);
        }
        spans.extend(worker.spans);
    }
    report.elapsed_secs = start.elapsed().as_secs_f64().min(options.duration.as_secs_f64()).max(1e-9);
    report.requests_per_sec = report.ok as f64 / report.elapsed_secs;
    report.ids_per_sec = report.ids as f64 / report.elapsed_secs;
    let p = Percentiles::of(&histogram);
    (report.p50_us, report.p99_us, report.p999_us, report.max_us) = (p.p50, p.p99, p.p999, p.max);
    report.over_5ms = histogram.count_between(5_001, u64::MAX);
    let s = Percentiles::of(&service);
    (report.service_p99_us, report.service_p999_us) = (s.p99, s.p999);
    report.duplicates = options.check_unique.then(|| count_duplicates(&mut seen));
    if options.history {
        for (op, span) in spans.iter_mut().enumerate() {
            span.op = op;
        }
        report.history_requests = Some(spans.len() as u64);
        report.real_time_violations = Some(real_time_violations(&mut spans));
    }
    Ok(report)
}

struct WorkerReport {
    requests: u64,
    ok: u64,
    transport_errors: u64,
    late_sends: u64,
    ids: u64,
    errors_by_status: BTreeMap<u16, u64>,
    /// From the scheduled send when the connection held the request back (see the module doc).
    histogram: hdrhistogram::Histogram<u64>,
    /// From the actual send.
    service: hdrhistogram::Histogram<u64>,
    seen: Seen,
    /// With `Keep::history`: each answered request (its `op` set once all are gathered).
    spans: Vec<Span<Instant>>,
}

#[allow(clippy::too_many_arguments)]
async fn worker(
    addr: String,
    tls: Option<Tls>,
    host: String,
    path: String,
    sequence: String,
    keep: Keep,
    first: Instant,
    interval: Option<Duration>,
    deadline: Instant,
) -> WorkerReport {
    let mut report = WorkerReport {
        requests: 0,
        ok: 0,
        transport_errors: 0,
        late_sends: 0,
        ids: 0,
        errors_by_status: BTreeMap::new(),
        histogram: new_histogram(),
        service: new_histogram(),
        seen: Seen::new(),
        spans: Vec::new(),
    };
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut answer_runs: Vec<(u64, u64)> = Vec::new();
    let mut sender = None;
    let mut next_send = first;
    // At a rate: every send scheduled before the deadline; else: until the deadline.
    while if interval.is_some() { next_send < deadline } else { Instant::now() < deadline } {
        // The instant this request's latency counts from, when it is not its actual send.
        let mut charged_from = None;
        if let Some(interval) = interval {
            let scheduled = next_send;
            next_send += interval;
            if Instant::now() < scheduled {
                tokio::time::sleep_until(scheduled).await;
            } else {
                // The previous answer (or a reconnect) held this connection past this send's time.
                charged_from = Some(scheduled);
            }
            if scheduled.elapsed() > Duration::from_millis(2) {
                report.late_sends += 1;
            }
        }
        if sender.is_none() {
            sender = connect(&addr, tls.as_ref()).await;
            if sender.is_none() {
                report.transport_errors += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        }
        let Some(conn) = sender.as_mut() else { continue };
        let request = match hyper::Request::get(path.as_str()).header("host", host.as_str()).body(Empty::<Bytes>::new())
        {
            Ok(request) => request,
            Err(_) => break,
        };
        report.requests += 1;
        let sent = Instant::now();
        let answer = async {
            let response = conn.send_request(request).await.ok()?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.ok()?.to_bytes();
            Some((status, body))
        }
        .await;
        let answered = Instant::now();
        report.service.saturating_record(micros_between(sent, answered));
        report.histogram.saturating_record(micros_between(charged_from.unwrap_or(sent), answered));
        match answer {
            Some((200, body)) => {
                report.ok += 1;
                answer_runs.clear();
                report.ids += parse_ids(&body, &mut answer_runs);
                if keep.history {
                    report.spans.extend(Span::of_ranges(0, sent, answered, &answer_runs));
                }
                if keep.ids {
                    answer_runs.iter().for_each(|&(start, end)| push_run(&mut runs, start, end));
                }
            }
            Some((status, _)) => *report.errors_by_status.entry(status).or_default() += 1,
            None => {
                report.transport_errors += 1;
                sender = None;
            }
        }
    }
    report.seen.insert(sequence, runs);
    report
}

pub async fn connect(addr: &str, tls: Option<&Tls>) -> Option<hyper::client::conn::http1::SendRequest<Empty<Bytes>>> {
    let stream = TcpStream::connect(addr).await.ok()?;
    let _ = stream.set_nodelay(true);
    let Some(tls) = tls else {
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.ok()?;
        tokio::spawn(connection);
        return Some(sender);
    };
    let stream = tls.connector.connect(tls.name.clone(), stream).await.ok()?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.ok()?;
    tokio::spawn(connection);
    Some(sender)
}

/// Microseconds from `start` to now, at least 1 (the histogram's lowest value).
pub fn micros_since(start: Instant) -> u64 {
    micros_between(start, Instant::now())
}

/// Microseconds from `start` to `end`, at least 1.
fn micros_between(start: Instant, end: Instant) -> u64 {
    u64::try_from(end.saturating_duration_since(start).as_micros()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_time_sequence_paths_of_a_namespace_are_one_sequence() {
        let text = parse_target("http://127.0.0.1:1/api/timeseq/get/orders?shard=7", None).map(|t| t.sequence);
        let list = parse_target("http://127.0.0.1:1/v1/timeseq/orders?shard=1&count=1000", None).map(|t| t.sequence);
        assert_eq!(text, Ok("timeseq:orders".to_string()));
        assert_eq!(list, Ok("timeseq:orders".to_string()));
    }

    /// One connection at 1,000 requests/s against a server that stalls its 100th answer for
    /// 100 ms: the ~100 sends the stall held back carry it (coordinated omission corrected), the
    /// actual-send latency does not, and every send scheduled before the deadline is made.
    #[tokio::test]
    async fn a_stall_counts_against_every_request_it_held_back() {
        use std::sync::atomic::AtomicU64;
        use std::sync::atomic::Ordering;
        let answered = std::sync::Arc::new(AtomicU64::new(0));
        let app = axum::Router::new().route(
            "/x",
            axum::routing::get(move || {
                let answered = answered.clone();
                async move {
                    let n = answered.fetch_add(1, Ordering::Relaxed);
                    if n == 100 {
                        // The stall under test, not a synchronisation.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    n.to_string()
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let addr = listener.local_addr().expect("a bound address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        let options = HttpOptions {
            urls: vec![format!("http://{addr}/x")],
            concurrency: 1,
            duration: Duration::from_secs(1),
            rate: Some(1000.0),
            check_unique: true,
            history: false,
            ca: None,
        };
        let report = tokio::time::timeout(Duration::from_secs(10), run(&options)).await.expect("bounded").expect("run");
        assert_eq!(report.requests, 1000, "{report:?}");
        assert_eq!(report.duplicates, Some(0));
        assert!(report.over_5ms >= 50, "the held-back sends must carry the stall: {report:?}");
        assert!(report.p99_us >= 50_000, "{report:?}");
        assert!(report.service_p99_us < 50_000, "only one answer was slow to come: {report:?}");
    }
}
