//! `leafraft health|backup|recover|bench`: the operator's commands around a running cluster.

use std::path::Path;
use std::path::PathBuf;
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

/// Where `leafraft backup` writes.
pub enum BackupTarget {
    File(PathBuf),
    /// A file named by the copy's time in `dir`, then all but the newest `keep` deleted.
    Dir {
        dir: PathBuf,
        keep: usize,
    },
}

/// Fetch, check, write atomically, and say what was written.
pub async fn backup(client: &Client, target: BackupTarget) -> Outcome {
    let bytes = client.backup().await?;
    let backup = crate::backup::decode(&bytes)
        .map_err(|e| format!("{} answered a backup this binary cannot use: {e}", client.base()))?;
    let out = match &target {
        BackupTarget::File(file) => file.clone(),
        BackupTarget::Dir { dir, .. } => dir.join(backup_name(backup.taken_at_ms)),
    };
    crate::backup::write_file(&out, &bytes).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    eprintln!(
        "backup of cluster {:016x} at log index {} ({} tags, taken at {} ms) written to {} ({} bytes)",
        backup.cluster_id,
        backup.applied_index,
        backup.tags.len(),
        backup.taken_at_ms,
        out.display(),
        bytes.len()
    );
    if let BackupTarget::Dir { dir, keep } = target {
        if keep > 0 {
            for old in older_backups(&dir, keep).map_err(|e| format!("cannot list {}: {e}", dir.display()))? {
                std::fs::remove_file(&old).map_err(|e| format!("cannot delete {}: {e}", old.display()))?;
                eprintln!("deleted {} (--keep {keep})", old.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `leafraft-YYYYMMDDTHHMMSSZ.backup` for a copy taken at `taken_at_ms` (UTC): names that sort
/// by time.
fn backup_name(taken_at_ms: u64) -> String {
    let seconds = taken_at_ms / 1000;
    let (days, in_day) = (seconds / 86_400, seconds % 86_400);
    // Civil date from days since 1970-01-01 (eras of 400 years, years starting in March).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let (hour, minute, second) = (in_day / 3600, in_day % 3600 / 60, in_day % 60);
    format!("leafraft-{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}Z.backup")
}

/// The backups in `dir` (`leafraft-*.backup`) beyond the newest `keep`, oldest first.
fn older_backups(dir: &Path, keep: usize) -> std::io::Result<Vec<PathBuf>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("leafraft-") && name.ends_with(".backup"))
        .collect();
    names.sort();
    let extra = names.len().saturating_sub(keep);
    Ok(names.into_iter().take(extra).map(|name| dir.join(name)).collect())
}

/// The report on stdout, one error line otherwise. `--from DIR` (a directory, such as the
/// backup CronJob's volume) recovers from the newest `leafraft-*.backup` in it, so that a Job can
/// run it with no file name written in: the names are the copies' UTC times, so the last in order
/// is the newest.
pub async fn recover(args: &RecoverArgs) -> Outcome {
    let mut options = args.options();
    if let crate::offline::recover::Source::Backup(path) = &options.source {
        if path.is_dir() {
            let newest = newest_backup(path)
                .map_err(|e| Failure::Error(format!("cannot list {}: {e}", path.display())))?
                .ok_or_else(|| {
                    Failure::Error(format!(
                        "no backup (leafraft-*.backup) in {}: nothing to recover from",
                        path.display()
                    ))
                })?;
            eprintln!("recovering from the newest backup in {}: {}", path.display(), newest.display());
            options.source = crate::offline::recover::Source::Backup(newest);
        }
    }
    let report = crate::offline::recover::run(options).await.map_err(|e| Failure::Error(e.to_string()))?;
    println!("{report}");
    Ok(ExitCode::SUCCESS)
}

/// The newest backup in `dir` (`leafraft-*.backup`, named by the copy's UTC time), if any.
fn newest_backup(dir: &Path) -> std::io::Result<Option<PathBuf>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("leafraft-") && name.ends_with(".backup"))
        .collect();
    names.sort();
    Ok(names.pop().map(|name| dir.join(name)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backup_names_are_the_utc_time_of_the_copy() {
        assert_eq!(backup_name(0), "leafraft-19700101T000000Z.backup");
        // 2026-11-28 04:05:06.789 UTC.
        assert_eq!(backup_name(1_795_838_706_789), "leafraft-20261128T040506Z.backup");
        assert_eq!(backup_name(951_782_400_000), "leafraft-20000229T000000Z.backup");
    }

    #[test]
    fn keep_deletes_the_oldest_backups_only() {
        let dir = tempfile::tempdir().expect("temp dir");
        for name in [
            "leafraft-20260101T000000Z.backup",
            "leafraft-20260102T000000Z.backup",
            "leafraft-20260103T000000Z.backup",
            "other.txt",
        ] {
            std::fs::write(dir.path().join(name), b"x").expect("write");
        }
        assert_eq!(newest_backup(dir.path()).expect("list"), Some(dir.path().join("leafraft-20260103T000000Z.backup")));
        let old = older_backups(dir.path(), 2).expect("list");
        assert_eq!(old, vec![dir.path().join("leafraft-20260101T000000Z.backup")]);
        assert!(older_backups(dir.path(), 5).expect("list").is_empty());
        let empty = tempfile::tempdir().expect("temp dir");
        assert_eq!(newest_backup(empty.path()).expect("list"), None);
    }
}
