//! Regression: every credential file is read by one format (`#` comments,
//! blank lines, one token where one is expected). On 0.3.0 before the fix, only the client-token
//! file skipped comments: writing `# rotated by ops` into the admin-token file (or `#new` into
//! `--secret-file`) made that text the admin token on the next reload, a file holding only a
//! comment started a node with the comment as its admin token, a comment above the token was
//! joined to it (locking every admin out), and a client-token line without `NAME:` was quoted
//! whole in the start error and the reload warning.

use std::path::Path;
use std::time::Duration;

use reqwest::Method;

use crate::certs::write_atomically;
use crate::harness::ProcessCluster;
use crate::regression_credentials::series_sum;

const TIMEOUT: Duration = Duration::from_secs(20);
/// How long a node that must refuse its files gets to exit: it reads them before anything else.
const REFUSAL: Duration = Duration::from_secs(10);

async fn metric(cluster: &mut ProcessCluster, series: &str) -> f64 {
    series_sum(&cluster.get_text(1, "/metrics").await.1, series)
}

/// Replaces `file` with `text` and waits until the node has read its files again (the reload
/// counter moved, whatever the result).
async fn rewrite_and_wait(cluster: &mut ProcessCluster, file: &Path, text: &str) {
    let series = r#"leafraft_reloads_total{what="credentials""#;
    let before = metric(cluster, series).await;
    write_atomically(file, text);
    let url = cluster.url(1);
    crate::harness::wait_until(TIMEOUT, "the node to read its credential files again", || {
        let url = url.clone();
        async move {
            let metrics = reqwest::get(format!("{url}/metrics")).await.map_err(|e| e.to_string())?;
            let now = series_sum(&metrics.text().await.map_err(|e| e.to_string())?, series);
            (now > before).then_some(()).ok_or(format!("{now} reloads"))
        }
    })
    .await;
}

/// The status of creating `tag` with `token` as the bearer token.
async fn create_tag(cluster: &mut ProcessCluster, tag: &str, token: &str) -> u16 {
    let body = format!(r#"{{"tag":"{tag}"}}"#);
    cluster.request(1, Method::POST, "/v1/tags", Some(&body), Some(token)).await.0.as_u16()
}

/// A running node whose admin token comes from `--admin-token-file` or `--secret-file`: a
/// comment, two tokens, or a comment above the token never become a token on a reload; the
/// last good token stays, `leafraft_credentials_stale` is 1 and a warning names the file
/// without quoting it.
#[tokio::test]
async fn regression_a_comment_written_into_a_token_file_never_becomes_the_token() {
    for (flag, comment) in [("--admin-token-file", "# rotated by ops"), ("--secret-file", "#new")] {
        let mut cluster = ProcessCluster::new();
        let file = cluster.temp_path("token");
        write_atomically(&file, "adm-SECRET-1\n");
        let path = file.display().to_string();
        cluster.start_node(1, &[flag, &path]);
        cluster.wait_ready(1, TIMEOUT).await;
        assert_eq!(create_tag(&mut cluster, "alpha", "adm-SECRET-1").await, 201, "{flag}: the first token");

        rewrite_and_wait(&mut cluster, &file, &format!("{comment}\n")).await;
        assert_eq!(create_tag(&mut cluster, "beta", comment).await, 401, "{flag}: the comment became the token");
        assert_eq!(create_tag(&mut cluster, "beta", "adm-SECRET-1").await, 201, "{flag}: the last good token");
        assert_eq!(metric(&mut cluster, "leafraft_credentials_stale ").await, 1.0, "{flag}: stale");

        // A comment above the new token: the token alone is taken.
        rewrite_and_wait(&mut cluster, &file, &format!("{comment}\r\nadm-SECRET-2\r\n")).await;
        assert_eq!(create_tag(&mut cluster, "gamma", "adm-SECRET-2").await, 201, "{flag}: the token under a comment");
        // (With --secret-file, the old token stays the peer secret: 403 rather than 401.)
        assert_ne!(create_tag(&mut cluster, "delta", "adm-SECRET-1").await, 201, "{flag}: the old admin token");
        assert_eq!(metric(&mut cluster, "leafraft_credentials_stale ").await, 0.0, "{flag}: fresh");

        // Two tokens are refused, never joined.
        rewrite_and_wait(&mut cluster, &file, "adm-SECRET-3\nadm-SECRET-4\n").await;
        for half in ["adm-SECRET-3", "adm-SECRET-4"] {
            assert_eq!(create_tag(&mut cluster, "delta", half).await, 401, "{flag}: one of two tokens");
        }
        assert_eq!(create_tag(&mut cluster, "delta", "adm-SECRET-2").await, 201, "{flag}: the last good token");
        assert_eq!(metric(&mut cluster, "leafraft_credentials_stale ").await, 1.0, "{flag}: stale");

        let log = cluster.log(1);
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains("credentials reload failed")).collect();
        assert_eq!(warnings.len(), 2, "{flag}: one warning per refused file:\n{log}");
        for warning in warnings {
            assert!(
                warning.contains("WARN") && warning.contains(&path),
                "{flag}: the warning names the file: {warning}"
            );
        }
        for secret in [comment, "adm-SECRET"] {
            assert!(!log.contains(secret), "{flag}: {secret:?} is in the log:\n{log}");
        }
    }
}

/// A node refuses to start (exit 2, one line naming the file, not quoting it) on a token file
/// holding only a comment or two tokens; a comment above the one token is a comment.
#[tokio::test]
async fn regression_a_token_file_of_comments_or_two_tokens_refuses_to_start() {
    let mut cluster = ProcessCluster::new();
    for flag in ["--admin-token-file", "--secret-file", "--peer-secret-file"] {
        for text in ["# rotated by ops\n", "tok-a\ntok-b\n"] {
            let file = cluster.temp_path("token");
            write_atomically(&file, text);
            let path = file.display().to_string();
            cluster.start_node(1, &[flag, &path]);
            let status = cluster.wait_exit(1, REFUSAL).await;
            let log = cluster.log(1);
            assert_eq!(status.code(), Some(2), "{flag} holding {text:?}: {status}; log:\n{log}");
            assert_eq!(log.lines().count(), 1, "one line: {log}");
            assert!(log.contains(&path), "the line names the file: {log}");
            assert!(!log.contains("rotated") && !log.contains("tok-"), "the line quotes the file: {log}");
        }
    }
    let file = cluster.temp_path("token");
    write_atomically(&file, "# admin token\nadm-SECRET-2\n");
    cluster.start_node(1, &["--admin-token-file", &file.display().to_string()]);
    cluster.wait_ready(1, TIMEOUT).await;
    assert_eq!(create_tag(&mut cluster, "alpha", "adm-SECRET-2").await, 201, "the token under the comment");
}

/// A client-token line without `NAME:` is all secret: neither the start error nor the reload
/// warning quotes it.
#[tokio::test]
async fn regression_a_client_token_line_without_a_name_is_never_quoted() {
    const LINE: &str = "s3cr3t-without-a-name";
    let mut cluster = ProcessCluster::new();
    let file = cluster.temp_path("clients");
    let path = file.display().to_string();
    write_atomically(&file, &format!("# teams\n{LINE}\n"));
    cluster.start_node(1, &["--client-token-file", &path]);
    let status = cluster.wait_exit(1, REFUSAL).await;
    let log = cluster.log(1);
    assert_eq!(status.code(), Some(2), "{status}; log:\n{log}");
    assert!(log.contains(&path) && log.contains("line 2"), "the line names the file and the line: {log}");
    assert!(!log.contains(LINE), "the start error quotes the secret: {log}");

    write_atomically(&file, "team:good-t0ken\n");
    cluster.start_node(1, &["--client-token-file", &path]);
    cluster.wait_ready(1, TIMEOUT).await;
    rewrite_and_wait(&mut cluster, &file, &format!("{LINE}\n")).await;
    assert_eq!(metric(&mut cluster, "leafraft_credentials_stale ").await, 1.0, "stale");
    let log = cluster.log(1);
    assert!(log.contains("credentials reload failed") && log.contains(&path), "a warning names the file: {log}");
    assert!(!log.contains(LINE), "the reload warning quotes the secret: {log}");
}
