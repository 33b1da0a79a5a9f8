//! `cargo bench --bench snowflake`: how close one worker's generator gets to the layout's limit
//! (4,096 IDs per millisecond by default) against the real clock. The committed window is kept
//! at the clock, so the generator cannot borrow ahead: every ID's timestamp is a millisecond
//! that has already started, and the ratio is IDs per elapsed millisecond over the limit
//! (bar: >= 95 %).

use std::time::Duration;
use std::time::Instant;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use leafraft_ids::snowflake::Generator;
use leafraft_ids::snowflake::Layout;

const LEAF: Layout = Layout { epoch_ms: 1_288_834_974_657, time_bits: 41, worker_bits: 10, sequence_bits: 12 };
const RUN: Duration = Duration::from_secs(2);

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn main() {
    let start_ms = now_ms();
    let mut generator = Generator::new(LEAF, 1, 0, start_ms, 1000, None);
    let started = Instant::now();
    let mut n_ids: u64 = 0;
    let mut last = 0;
    while started.elapsed() < RUN {
        let now = now_ms();
        generator.extend_window(now);
        if let Ok(id) = generator.next(now) {
            assert!(id > last, "IDs must strictly increase");
            last = id;
            n_ids += 1;
        }
    }
    let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
    let per_ms = n_ids as f64 / elapsed_ms;
    let limit = (LEAF.max_sequence() + 1) as f64;
    println!("snowflake generator: {n_ids} IDs in {elapsed_ms:.0} ms = {per_ms:.0} IDs/ms");
    println!("ratio to the layout's limit of {limit} per ms: {:.1}% (bar: >= 95%)", per_ms / limit * 100.0);
}
