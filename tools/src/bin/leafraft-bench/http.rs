//! `leafraft bench http`: a small HTTP load generator. Each worker owns one keep-alive
//! connection and sends requests back to back (or on a schedule, with `rate`), recording latency
//! in an HDR histogram; every ID in the answers is collected, and the report says whether any was
//! returned twice.
//!
//! With a `rate`, workers pace their sends on a schedule. Latency is measured from the actual
//! send: tokio's timers have millisecond granularity, so charging the scheduled time would
//! measure the timer, not the server (the baseline shows the same ~1 ms then). Sends that leave
//! more than 2 ms behind schedule are counted (`late_sends`), so a saturated server still shows.
//!
//! With `history`, every answered request is recorded (when it was sent, when its answer came
//! back, its smallest and largest ID) and the whole run is checked for real-time order: what a
//! monotonic tag promises (SPEC §4b), judged on the load generator's own records.

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
struct Tls {
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
    histogram: hdrhistogram::Histogram<u64>,
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
        seen: Seen::new(),
        spans: Vec::new(),
    };
    let mut runs: Vec<(u64, u64)> = Vec::new();
    let mut answer_runs: Vec<(u64, u64)> = Vec::new();
    let mut sender = None;
    let mut next_send = first;
    while Instant::now() < deadline {
        if let Some(interval) = interval {
            tokio::time::sleep_until(next_send).await;
            if next_send.elapsed() > Duration::from_millis(2) {
                report.late_sends += 1;
            }
            next_send += interval;
        }
        if Instant::now() >= deadline {
            break;
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
        let micros = u64::try_from(answered.duration_since(sent).as_micros()).unwrap_or(u64::MAX).max(1);
        report.histogram.saturating_record(micros);
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

async fn connect(addr: &str, tls: Option<&Tls>) -> Option<hyper::client::conn::http1::SendRequest<Empty<Bytes>>> {
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
}
