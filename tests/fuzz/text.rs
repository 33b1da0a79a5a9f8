//! The text parsers: the Leaf `leaf_alloc` export of `leafraft tag import`, config files (TOML)
//! and `--initial-cluster`. They answer rows or errors with line numbers, never panic.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use leafraft::config::Config;
use leafraft::config::Settings;
use leafraft::offline::import;
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

use crate::config;
use crate::mutate::mutated;

const CASES: u32 = 3000;

fn text(corpus: &[&str]) -> impl Strategy<Value = String> {
    let corpus: Vec<Vec<u8>> = corpus.iter().map(|text| text.as_bytes().to_vec()).collect();
    prop_oneof![
        1 => any::<String>(),
        1 => "[ -~\t\n\r\\\\]{0,200}",
        4 => mutated(corpus).prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]
}

const LEAF_EXPORTS: [&str; 3] = [
    "biz_tag\tmax_id\tstep\tdescription\norder\t5001\t1000\tOrders\ninvoice\t1\t2000\tNULL\n",
    "order\t5001\t1000\n\nuser:v2\t9223372036854775807\t10000000\tline\\tbreak\\n\\\\\r\n",
    "order\t5001\t1000\t\\N\n",
];

#[test]
fn fuzz_import_files() {
    let existing: BTreeMap<String, import::Existing> = BTreeMap::new();
    let mut runner = TestRunner::new(config(CASES));
    runner
        .run(&text(&LEAF_EXPORTS), |text| {
            match import::parse(&text) {
                Ok(rows) => {
                    for row in &rows {
                        prop_assert!(row.line >= 1 && leafraft_state::tag::validate_tag(&row.tag).is_ok(), "{row:?}");
                    }
                    let _ = import::plan(&rows, &existing);
                }
                Err(errors) => prop_assert!(!errors.is_empty() && errors.iter().all(|e| e.line >= 1)),
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

const CONFIG_FILES: [&str; 2] = [
    "node_id = 2\nlisten = \"127.0.0.1:9002\"\ninitial_cluster = \"1=127.0.0.1:9001,2=127.0.0.1:9002\"\n\
     data_dir = \"/var/lib/leafraft\"\nfsync = true\nheartbeat_ms = 50\nelection_timeout_ms = 300\n",
    "secret = \"s\"\njoin = \"10.0.0.1:8080\"\nlearner = true\nsnowflake_time_bits = 41\n\
     snowflake_worker_bits = 10\nsnowflake_sequence_bits = 12\nsnowflake_epoch_ms = 1288834974657\n\
     worker_lease_ms = 60000\nsnowflake_window_ms = 10000\nmax_clock_skew_ms = 1000\nlog_format = \"json\"\n",
];

/// Config files: through the file loader (whose error names the line) and, when they parse, the
/// resolution of the defaults and checks. A `listen` that is not an IP address is dropped first:
/// resolving a host name would ask DNS.
#[test]
fn fuzz_config_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("leafraft.toml");
    let mut runner = TestRunner::new(config(CASES));
    runner
        .run(&text(&CONFIG_FILES), |text| {
            std::fs::write(&path, &text).expect("write the config file");
            match Settings::load(&path) {
                Ok(mut file) => {
                    if file.listen.as_deref().is_some_and(|listen| listen.parse::<SocketAddr>().is_err()) {
                        file.listen = None;
                    }
                    if let Ok(config) = Config::resolve(file) {
                        let _ = config.raft_config();
                    }
                }
                Err(message) => prop_assert!(!message.contains('\n'), "a multi-line error: {message}"),
            }
            let _ = leafraft::config::parse_initial_cluster(&text);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
