//! Regression: how credentials behave when an operator changes them. An emptied or
//! whitespace-filled token file never opens a role (the last good tokens stay, a warning and
//! `/metrics` say so); a node started on an empty token file refuses to start, naming the file;
//! the scope check sees the decoded tag the handler serves; refusals are logged at most once per
//! interval, and counted one by one.

use std::time::Duration;

use reqwest::Method;

use crate::certs::write_atomically;
use crate::harness::assert_error;
use crate::harness::ProcessCluster;

const TIMEOUT: Duration = Duration::from_secs(20);
const ADMIN: &str = "admin-t0ken";
const CLIENT: &str = "client-t0ken";

/// The value of the series starting with `prefix` in `metrics` (summed over every label set the
/// prefix leaves open), 0 when absent.
pub fn series_sum(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn credential_reloads(cluster: &mut ProcessCluster) -> f64 {
    let metrics = cluster.get_text(1, "/metrics").await.1;
    series_sum(&metrics, r#"leafraft_reloads_total{what="credentials""#)
}

/// Replaces `file` with `text` and waits until the node has read it again (its reload counter
/// moved, whatever the result).
async fn rewrite_and_wait(cluster: &mut ProcessCluster, file: &std::path::Path, text: &str) {
    let before = credential_reloads(cluster).await;
    write_atomically(file, text);
    let url = cluster.url(1);
    crate::harness::wait_until(TIMEOUT, "the node to read its token files again", || {
        let url = url.clone();
        async move {
            let metrics = reqwest::get(format!("{url}/metrics")).await.map_err(|e| e.to_string())?;
            let metrics = metrics.text().await.map_err(|e| e.to_string())?;
            let now = series_sum(&metrics, r#"leafraft_reloads_total{what="credentials""#);
            (now > before).then_some(()).ok_or(format!("{now} reloads"))
        }
    })
    .await;
}

/// Every protected route refuses a request without a token.
async fn every_protected_route_refuses(cluster: &mut ProcessCluster, what: &str) {
    let answer = cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"opened"}"#), None).await;
    assert_error(&answer, 401, "UNAUTHORIZED", &format!("create a tag without a token after {what}"));
    let (status, _) = cluster.get_text_as(1, "/v1/backup", None).await;
    assert_eq!(status.as_u16(), 401, "a backup without a token after {what}");
    let answer = cluster.request(1, Method::GET, "/v1/segment/alpha", None, None).await;
    assert_error(&answer, 401, "UNAUTHORIZED", &format!("IDs without a token after {what}"));
    let (status, text) = cluster.get_text_as(1, "/api/segment/get/alpha", None).await;
    assert_eq!((status.as_u16(), text.as_str()), (401, "Result{id=-4, status=EXCEPTION}"), "after {what}");
}

/// Emptying the admin or the client token file (`: > file`, or only whitespace) keeps the last
/// good tokens: every protected route still refuses a missing token, the old tokens still work,
/// and the node says so at WARN and on `/metrics`.
#[tokio::test]
async fn regression_emptied_token_files_never_open_a_role() {
    let mut cluster = ProcessCluster::new();
    let (admin_file, clients_file) = (cluster.temp_path("admin"), cluster.temp_path("clients"));
    let clients = format!("team:{CLIENT}:alpha\n");
    write_atomically(&admin_file, &format!("{ADMIN}\n"));
    write_atomically(&clients_file, &clients);
    let (admin_arg, clients_arg) = (admin_file.display().to_string(), clients_file.display().to_string());
    cluster.start_node(1, &["--admin-token-file", &admin_arg, "--client-token-file", &clients_arg]);
    cluster.wait_ready(1, TIMEOUT).await;
    let (status, body) = cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"alpha"}"#), Some(ADMIN)).await;
    assert_eq!(status.as_u16(), 201, "{body}");

    for (file, role, good) in [(&admin_file, "admin", format!("{ADMIN}\n")), (&clients_file, "client", clients)] {
        for emptied in ["", " \n\t\n  "] {
            let what = format!("writing {emptied:?} into the {role} token file");
            rewrite_and_wait(&mut cluster, file, emptied).await;
            every_protected_route_refuses(&mut cluster, &what).await;
            let (status, _) = cluster.get_text_as(1, "/api/segment/get/alpha", Some(CLIENT)).await;
            assert_ne!(status.as_u16(), 401, "the last good client token still works after {what}");
            let metrics = cluster.get_text(1, "/metrics").await.1;
            let failures = format!(r#"leafraft_credentials_reload_failures_total{{role="{role}"}}"#);
            assert!(series_sum(&metrics, &failures) >= 1.0, "{failures} after {what}:\n{metrics}");
            assert_eq!(series_sum(&metrics, "leafraft_credentials_stale "), 1.0, "stale after {what}");
            rewrite_and_wait(&mut cluster, file, &good).await;
            let metrics = cluster.get_text(1, "/metrics").await.1;
            assert_eq!(series_sum(&metrics, "leafraft_credentials_stale "), 0.0, "fresh again after {what}");
        }
    }
    let log = cluster.log(1);
    assert!(log.contains("WARN") && log.contains("has no token"), "a warning names the emptied file: {log}");
    assert!(!log.contains(ADMIN) && !log.contains(CLIENT), "no token in the log");
}

/// A node started with an empty (or whitespace-only) token file exits non-zero with one line
/// naming the file, before it serves anything.
#[tokio::test]
async fn regression_an_empty_token_file_refuses_to_start() {
    let mut cluster = ProcessCluster::new();
    for (flag, text) in [("--admin-token-file", ""), ("--client-token-file", " \n\n"), ("--secret-file", "\t")] {
        let file = cluster.temp_path(&format!("empty{}", flag.len()));
        write_atomically(&file, text);
        let path = file.display().to_string();
        cluster.start_node(1, &[flag, &path]);
        let status = cluster.wait_exit(1, TIMEOUT).await;
        let log = cluster.log(1);
        assert!(!status.success(), "{flag} on an empty file: {status}; log:\n{log}");
        assert_eq!(log.lines().count(), 1, "one line: {log}");
        assert!(log.contains(&path), "the line names the file: {log}");
    }
}

/// A token scoped to the tag `a:b` takes IDs of `/v1/segment/a%3Ab` (the tag the handler serves);
/// a token line naming a tag outside the tag alphabet (`oth%65r`) is refused at start.
#[tokio::test]
async fn regression_scope_check_sees_the_decoded_tag() {
    let mut cluster = ProcessCluster::new();
    cluster.start_node(1, &["--admin-token", ADMIN, "--client-token", &format!("team:{CLIENT}:a:b")]);
    cluster.wait_ready(1, TIMEOUT).await;
    let (status, body) = cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"a:b"}"#), Some(ADMIN)).await;
    assert_eq!(status.as_u16(), 201, "{body}");
    let url = cluster.url(1);
    for path in ["/v1/segment/a%3Ab", "/v1/segment/a:b", "/api/segment/get/a%3ab"] {
        let http = reqwest::Client::new();
        crate::harness::wait_until(TIMEOUT, &format!("{path} to be served to the scoped token"), || {
            let request = http.get(format!("{url}{path}")).bearer_auth(CLIENT).send();
            async move {
                let status = request.await.map_err(|e| e.to_string())?.status().as_u16();
                match status {
                    200 => Ok(()),
                    403 => panic!("{path}: 403 for the tag the token is scoped to"),
                    _ => Err(format!("HTTP {status}")),
                }
            }
        })
        .await;
    }
    cluster.terminate(1, TIMEOUT).await;
    cluster.start_node(1, &["--client-token", &format!("team:{CLIENT}:oth%65r")]);
    let status = cluster.wait_exit(1, TIMEOUT).await;
    assert!(!status.success(), "a tag outside the alphabet in a token line: {}", cluster.log(1));
}

/// 1,000 refused requests between nodes write a bounded number of log lines: at least the
/// first at once (with the sender's address, also on the plain listener) and one summary line
/// once its interval is over, at most those and a summary of an interval the burst straddled;
/// every refusal is counted on `/metrics`.
#[tokio::test]
async fn regression_refusals_are_logged_once_per_interval() {
    /// `refusals::INTERVAL`.
    const INTERVAL: Duration = Duration::from_secs(10);
    let mut cluster = ProcessCluster::new();
    cluster.start_node(1, &["--peer-secret", "peer-s3cret", "--admin-token", ADMIN]);
    cluster.wait_ready(1, TIMEOUT).await;
    let url = cluster.url(1);
    let http = reqwest::Client::new();
    for _ in 0..20 {
        let batch = (0..50).map(|_| http.post(format!("{url}/raft/vote")).body("x").send());
        for answer in futures_join(batch).await {
            assert_eq!(answer.expect("an answer").status().as_u16(), 401);
        }
    }
    let metrics = cluster.get_text(1, "/metrics").await.1;
    let series = r#"leafraft_auth_refusals_total{route="/raft/vote",reason="missing"}"#;
    assert_eq!(series_sum(&metrics, series), 1000.0, "{series}:\n{metrics}");
    let log = cluster.log(1);
    let first = refusal_lines(&log).into_iter().next().unwrap_or_else(|| panic!("no line about the refusals:\n{log}"));
    assert!(first.contains("refused a request") && first.contains("remote=127.0.0.1:"), "{first}");
    // The rest is summed up once its interval is over: one line per interval with refusals.
    crate::harness::wait_until(2 * INTERVAL + TIMEOUT, "the summary of the refusals", || {
        let summarised = summarised(&refusal_lines(&cluster.log(1)));
        async move { (summarised >= 999).then_some(()).ok_or(format!("{summarised} summed up")) }
    })
    .await;
    let lines = refusal_lines(&cluster.log(1));
    let firsts = lines.iter().filter(|line| line.contains("refused a request")).count();
    // Two when the burst fell in one interval; four when it straddled two.
    assert!((1..=2).contains(&firsts) && lines.len() <= 2 * firsts, "{} lines:\n{}", lines.len(), lines.join("\n"));
}

/// The log lines about refusals.
fn refusal_lines(log: &str) -> Vec<String> {
    log.lines().filter(|line| line.contains("refus")).map(str::to_string).collect()
}

/// The refusals the summary lines among `lines` count.
fn summarised(lines: &[String]) -> u64 {
    lines
        .iter()
        .filter(|line| line.contains("refusals in the last"))
        .filter_map(|line| line.split("total=").nth(1)?.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Every future of `futures`, run at once, answered in order.
async fn futures_join<F: std::future::Future + Send + 'static>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(task.await.expect("task"));
    }
    out
}

/// The status page tells browsers to load nothing from elsewhere and never to frame it.
#[tokio::test]
async fn regression_the_status_page_forbids_framing_and_foreign_content() {
    let mut cluster = ProcessCluster::new();
    cluster.start_node(1, &[]);
    cluster.wait_ready(1, TIMEOUT).await;
    let answer = reqwest::get(format!("{}/", cluster.url(1))).await.expect("the status page");
    assert_eq!(answer.status().as_u16(), 200);
    let header = |name: &str| answer.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    assert_eq!(header("x-frame-options"), "DENY");
    let policy = header("content-security-policy");
    for directive in ["default-src 'none'", "frame-ancestors 'none'", "form-action 'self'"] {
        assert!(policy.contains(directive), "{directive} missing from {policy:?}");
    }
}

/// The data directory is its owner's only: the directory 0700, the identity file, sled's files
/// and the store's marker 0600, also for a directory an older release made 0755.
#[tokio::test]
async fn regression_the_data_directory_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let mut cluster = ProcessCluster::new();
    let dir = cluster.data_dir(1);
    std::fs::create_dir_all(&dir).expect("create the data directory");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod 0755");
    cluster.start_node(1, &[]);
    cluster.wait_ready(1, TIMEOUT).await;
    let (status, body) = cluster.request(1, Method::POST, "/v1/tags", Some(r#"{"tag":"alpha"}"#), None).await;
    assert_eq!(status.as_u16(), 201, "{body}");
    cluster.terminate(1, TIMEOUT).await;
    let mode = |path: &std::path::Path| std::fs::metadata(path).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    let files = crate::harness::files_below(&dir);
    assert!(files.iter().any(|f| f.ends_with("leafraft-identity")) && files.iter().any(|f| f.ends_with("db")));
    for file in files {
        assert_eq!(mode(&file) & 0o077, 0, "{} is {:o}", file.display(), mode(&file));
    }
}
