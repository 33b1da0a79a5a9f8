//! The ID services' settings: segments (the double buffer, the dynamic step, idle buffers) and
//! snowflake (the layout, the window and the worker lease).

use std::time::Duration;

use super::Settings;
use crate::services::segments::SegmentConfig;
use crate::services::snowflakes::SnowflakeConfig;
use leafraft_ids::snowflake::Layout as SnowflakeLayout;
use leafraft_ids::StepPolicy;

/// `--segment-idle-ms`: a tag's buffers that served nothing for 10 minutes are dropped and their
/// unused tail given back (0: never).
pub const DEFAULT_SEGMENT_IDLE_MS: u64 = 600_000;

pub(super) fn resolve_segments(layers: &Settings) -> Result<SegmentConfig, String> {
    let segment_duration = match layers.segment_duration_ms {
        Some(0) => return Err("--segment-duration-ms must be above 0".into()),
        Some(ms) => Duration::from_millis(ms),
        None => StepPolicy::LEAF.double_below,
    };
    Ok(SegmentConfig {
        wait: Duration::from_millis(layers.segment_wait_ms.unwrap_or(100)),
        step_policy: StepPolicy::leaf(segment_duration, StepPolicy::LEAF.max_step),
        preload: layers.preload.unwrap_or(false),
        idle: match layers.segment_idle_ms.unwrap_or(DEFAULT_SEGMENT_IDLE_MS) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        },
    })
}

pub(super) fn resolve_snowflake(layers: &Settings) -> Result<SnowflakeConfig, String> {
    let leaf = SnowflakeLayout::LEAF;
    let layout = SnowflakeLayout {
        epoch_ms: layers.snowflake_epoch_ms.unwrap_or(leaf.epoch_ms),
        time_bits: layers.snowflake_time_bits.unwrap_or(leaf.time_bits),
        worker_bits: layers.snowflake_worker_bits.unwrap_or(leaf.worker_bits),
        sequence_bits: layers.snowflake_sequence_bits.unwrap_or(leaf.sequence_bits),
    };
    layout.validate().map_err(|e| format!("invalid snowflake layout: {e}"))?;
    let window = Duration::from_millis(layers.snowflake_window_ms.unwrap_or(10_000));
    if window.is_zero() || window > Duration::from_millis(leafraft_state::snowflake::MAX_WINDOW_MS) {
        return Err(format!("--snowflake-window-ms must be 1 to {}", leafraft_state::snowflake::MAX_WINDOW_MS));
    }
    let lease = Duration::from_millis(layers.worker_lease_ms.unwrap_or(60_000));
    if lease <= window {
        return Err("--worker-lease-ms must be longer than --snowflake-window-ms".into());
    }
    Ok(SnowflakeConfig {
        layout,
        window,
        lease,
        max_backward: Duration::from_millis(layers.max_clock_backward_ms.unwrap_or(1000)),
        max_skew: Duration::from_millis(layers.max_clock_skew_ms.unwrap_or(1000)),
        random_sequence: layers.snowflake_random_sequence.unwrap_or(false),
    })
}
