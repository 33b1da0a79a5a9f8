//! `leafraft health|backup|recover|bench`: the operator's commands around a running cluster.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use leafraft_client::Client;

use super::Failure;
use super::Outcome;
use crate::cli::RecoverArgs;

/// Exit 0 when `/readyz` answers 200 within 5 s, 1 otherwise; one line on stderr either way (a
/// HEALTHCHECK for images without curl or a shell).
pub async fn health(client: &Client) -> Outcome {
    match tokio::time::timeout(Duration::from_secs(5), client.ready()).await {
        Ok(Ok(())) => {
            eprintln!("ready: {}", client.base());
            Ok(ExitCode::SUCCESS)
        }
        Ok(Err(e)) => Err(Failure::Error(format!("not ready: {e}"))),
        Err(_) => Err(Failure::Error(format!("not ready: {}/readyz did not answer within 5 s", client.base()))),
    }
}

/// Fetch, check, write atomically, and say what was written.
pub async fn backup(client: &Client, out: &Path) -> Outcome {
    let bytes = client.backup().await?;
    let backup = crate::backup::decode(&bytes)
        .map_err(|e| format!("{} answered a backup this binary cannot use: {e}", client.base()))?;
    crate::backup::write_file(out, &bytes).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!(
        "backup of cluster {:016x} at log index {} ({} tags, taken at {} ms) written to {} ({} bytes)",
        backup.cluster_id,
        backup.applied_index,
        backup.tags.len(),
        backup.taken_at_ms,
        out.display(),
        bytes.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// The report on stdout, one error line otherwise.
pub async fn recover(args: &RecoverArgs) -> Outcome {
    let report = crate::recover::run(args.options()).await.map_err(|e| Failure::Error(e.to_string()))?;
    println!("{report}");
    Ok(ExitCode::SUCCESS)
}

/// `leafraft bench ...` runs the load generators, which live in the `tools` crate so that
/// nothing of them is linked into the service: the `leafraft-bench` binary next to this one.
pub fn bench(args: Vec<std::ffi::OsString>) -> Outcome {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find this executable to locate leafraft-bench: {e}"))?;
    let tool = exe.with_file_name("leafraft-bench");
    if !tool.exists() {
        return Err(Failure::Error(format!(
            "{} not found: build it with `cargo build --release -p leafraft-tools`",
            tool.display()
        )));
    }
    let status = std::process::Command::new(&tool)
        .args(args)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        code => ExitCode::from(u8::try_from(code.unwrap_or(1)).unwrap_or(1)),
    })
}
