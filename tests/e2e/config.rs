//! Configuration precedence of `leafraft serve` (`docs/semantics.md#command-line`): a flag beats its `LEAFRAFT_*`
//! variable, which beats the `--config` TOML file, which beats the default. The binary is started
//! here by hand, since `ProcessCluster` always passes `--node-id`, `--listen` and `--data-dir`.

use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

use crate::harness::free_port;
use crate::harness::run_binary;
use crate::harness::wait_until;
use crate::harness::BIN;

const TIMEOUT: Duration = Duration::from_secs(20);

/// A `leafraft serve` child, killed when dropped (also when the test panics).
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `leafraft serve args` in `cwd` with only the `LEAFRAFT_*` variables in `env`, its
/// stdout and stderr into `log`.
fn serve(cwd: &Path, args: &[&str], env: &[(&str, &str)], log: &Path) -> Serve {
    let out = std::fs::File::create(log).expect("log file");
    let err = out.try_clone().expect("log file handle");
    let mut command = Command::new(BIN);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("LEAFRAFT_") {
            command.env_remove(&key);
        }
    }
    command
        .arg("serve")
        .args(args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "info,openraft=warn")
        .env("NO_COLOR", "1")
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    Serve(command.spawn().unwrap_or_else(|e| panic!("cannot start {BIN}: {e}")))
}

/// Node ID in all three layers (file 7, `LEAFRAFT_NODE_ID=8`, `--node-id 9`): the flag wins.
/// Listen address in file and environment: the environment wins (the file's port stays closed).
/// Data directory and log format only in the file: both used (data there, none in the working
/// directory's default `./leafraft-data`, JSON log lines).
#[tokio::test]
async fn a_flag_beats_the_environment_which_beats_the_config_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file_port, env_port) = (free_port(), free_port());
    let data_dir = dir.path().join("data-from-file");
    let config = dir.path().join("leafraft.toml");
    std::fs::write(
        &config,
        format!(
            "node_id = 7\nlisten = \"127.0.0.1:{file_port}\"\ndata_dir = \"{}\"\nlog_format = \"json\"\n\
             election_timeout_ms = 300\nheartbeat_ms = 50\n",
            data_dir.display()
        ),
    )
    .expect("write the config file");
    let env_listen = format!("127.0.0.1:{env_port}");
    let log = dir.path().join("serve.log");
    let _node = serve(
        dir.path(),
        &["--config", config.to_str().expect("UTF-8 path"), "--node-id", "9"],
        &[("LEAFRAFT_NODE_ID", "8"), ("LEAFRAFT_LISTEN", &env_listen)],
        &log,
    );

    let client = crate::harness::client_of(&env_listen, None);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let status = wait_until(TIMEOUT, "the node to lead itself on the environment's address", || async {
        let status = client.cluster_status().await.map_err(|e| format!("{e}; log:\n{}", read_log()))?;
        match status.leader_id {
            Some(_) => Ok(status),
            None => Err(format!("no leader yet: {status:?}")),
        }
    })
    .await;
    assert_eq!((status.node_id, status.leader_id), (9, Some(9)), "the flag's node ID: {status:?}");
    assert_eq!(status.nodes.get("9"), Some(&env_listen), "advertised at the environment's listen address");
    assert!(TcpStream::connect(("127.0.0.1", file_port)).is_err(), "the file's listen address is in use");

    assert!(std::fs::read_dir(&data_dir).map(|d| d.count() > 0).unwrap_or(false), "no data in the file's data_dir");
    assert!(!dir.path().join("leafraft-data").exists(), "the default data directory was used");
    let log = read_log();
    let first = log.lines().next().unwrap_or_default();
    let line: serde_json::Value =
        serde_json::from_str(first).unwrap_or_else(|e| panic!("the file's log_format json: {e}: {first}"));
    assert!(line.is_object(), "{first}");
}

/// A config file with an unknown key, or that does not exist, is a usage error: exit status 2
/// and an error on stderr whose first line names the file.
#[tokio::test]
async fn a_bad_config_file_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, "node_id = 2\nlisten_addr = \"127.0.0.1:1\"\n").expect("write");
    let missing = dir.path().join("missing.toml");
    for path in [&config, &missing] {
        let path = path.to_str().expect("UTF-8 path");
        let output = run_binary(&["serve", "--config", path], TIMEOUT).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.starts_with("error: ") && first.contains(path), "{stderr}");
    }
}
