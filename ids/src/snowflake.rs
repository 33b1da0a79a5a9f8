//! `Generator`: snowflake IDs for one held worker. Pure: the caller passes the clock reading and
//! the committed window; nothing here reads time or does I/O.
//!
//! Invariants (property-tested in `snowflake/tests.rs`):
//! 1. IDs strictly increase: each has a later timestamp, or the same timestamp and a larger
//!    sequence, than the one before.
//! 2. No ID's timestamp lies outside `[floor_ms, window_end_ms]` (the holding's committed range).
//! 3. The timestamp never goes backwards, whatever the clock does: a step back of at most
//!    `SMALL_STEP_BACK_MS` is waited out, a larger one up to `max_backward_ms` is served from the
//!    last timestamp, beyond that the answer is `ClockBackwards`.

/// A clock step back this small is waited out, as Leaf does.
pub const SMALL_STEP_BACK_MS: u64 = 5;

/// How snowflake IDs are laid out: 1 sign bit, then time, worker and sequence bits.
///
/// The one definition: the replicated state records this type (`leafraft_ids::snowflake::Layout` is a
/// re-export) and persists it through the field order `leafraft-state`'s `records` fixes, so the
/// engine itself stays free of serde. The field types are the persisted ones: change none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Unix milliseconds of timestamp zero.
    pub epoch_ms: u64,
    pub time_bits: u8,
    pub worker_bits: u8,
    pub sequence_bits: u8,
}

/// An ID taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// Unix milliseconds.
    pub timestamp_ms: u64,
    pub worker: u64,
    pub sequence: u64,
}

impl Layout {
    /// Leaf's and Twitter's: `twepoch` 1288834974657, 41 + 10 + 12 bits.
    pub const LEAF: Layout = Layout { epoch_ms: 1_288_834_974_657, time_bits: 41, worker_bits: 10, sequence_bits: 12 };

    /// The shortest span the time bits must cover.
    pub const MIN_SPAN_MS: u64 = 30 * 365 * 24 * 3600 * 1000;

    /// Whether a layout may be recorded: the bits add up to 63, 1 to 20 worker bits, at least one
    /// sequence bit and time bits that cover [`Layout::MIN_SPAN_MS`].
    pub fn validate(&self) -> Result<(), String> {
        let total = u32::from(self.time_bits) + u32::from(self.worker_bits) + u32::from(self.sequence_bits);
        if total != 63 {
            return Err(format!("time, worker and sequence bits must add up to 63, they add up to {total}"));
        }
        if self.worker_bits == 0 || self.sequence_bits == 0 || self.worker_bits > 20 {
            return Err("worker bits must be 1 to 20 and sequence bits at least 1".into());
        }
        if self.time_bits < 64 && (1u64 << self.time_bits) < Self::MIN_SPAN_MS {
            return Err(format!("{} time bits cover less than 30 years", self.time_bits));
        }
        Ok(())
    }

    pub fn n_workers(&self) -> u64 {
        1u64 << self.worker_bits
    }

    pub fn max_sequence(&self) -> u64 {
        (1u64 << self.sequence_bits) - 1
    }

    pub fn max_worker(&self) -> u64 {
        (1u64 << self.worker_bits) - 1
    }

    /// The last Unix millisecond the time bits can express.
    pub fn last_timestamp_ms(&self) -> u64 {
        self.epoch_ms.saturating_add((1u64 << self.time_bits) - 1)
    }

    /// Puts the parts together; `None` when a part does not fit its bits.
    pub fn compose(&self, parts: Parts) -> Option<u64> {
        let time = parts.timestamp_ms.checked_sub(self.epoch_ms)?;
        if time >> self.time_bits != 0 || parts.worker > self.max_worker() || parts.sequence > self.max_sequence() {
            return None;
        }
        Some((time << (self.worker_bits + self.sequence_bits)) | (parts.worker << self.sequence_bits) | parts.sequence)
    }

    /// Takes any non-negative 63-bit ID apart.
    pub fn decompose(&self, id: u64) -> Parts {
        let time = id >> (self.worker_bits + self.sequence_bits);
        Parts {
            timestamp_ms: self.epoch_ms.saturating_add(time),
            worker: (id >> self.sequence_bits) & self.max_worker(),
            sequence: id & self.max_sequence(),
        }
    }
}

/// Why the generator issued no ID (a clock step back, or the end of the committed window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratorRefusal {
    /// The clock is behind by at most `SMALL_STEP_BACK_MS`: wait this long and ask again.
    Wait { ms: u64 },
    /// The clock is behind by more than the allowance.
    ClockBackwards { behind_ms: u64 },
    /// The next timestamp would pass the committed window: it must be extended first.
    WindowExhausted,
}

#[derive(Debug, Clone)]
pub struct Generator {
    layout: Layout,
    worker: u64,
    floor_ms: u64,
    window_end_ms: u64,
    max_backward_ms: u64,
    /// The timestamp and sequence of the last ID (`None` before the first).
    last: Option<(u64, u64)>,
    /// The latest clock reading seen: a later, smaller reading means the clock stepped back.
    last_clock_ms: u64,
    /// Leaf's option: start each millisecond's sequence at a small random number.
    random_start: Option<u64>,
}

impl Generator {
    /// A generator for `worker`, issuing timestamps in `[floor_ms, window_end_ms]`.
    /// `random_seed` turns on Leaf's random sequence start.
    pub fn new(
        layout: Layout,
        worker: u64,
        floor_ms: u64,
        window_end_ms: u64,
        max_backward_ms: u64,
        random_seed: Option<u64>,
    ) -> Generator {
        Generator {
            layout,
            worker,
            floor_ms: floor_ms.max(layout.epoch_ms),
            window_end_ms: window_end_ms.min(layout.last_timestamp_ms()),
            max_backward_ms,
            last: None,
            last_clock_ms: 0,
            random_start: random_seed.map(|seed| seed | 1),
        }
    }

    pub fn worker(&self) -> u64 {
        self.worker
    }

    pub fn window_end_ms(&self) -> u64 {
        self.window_end_ms
    }

    /// The timestamp of the last ID issued, if any.
    pub fn last_timestamp_ms(&self) -> Option<u64> {
        self.last.map(|(ts, _)| ts)
    }

    /// Moves the window forward after an extension committed (never backwards).
    pub fn extend_window(&mut self, window_end_ms: u64) {
        self.window_end_ms = self.window_end_ms.max(window_end_ms.min(self.layout.last_timestamp_ms()));
    }

    /// The next ID at clock reading `now_ms` (Unix ms).
    pub fn next(&mut self, now_ms: u64) -> Result<u64, GeneratorRefusal> {
        let behind = self.last_clock_ms.saturating_sub(now_ms);
        let clock = if behind == 0 {
            now_ms
        } else if behind <= SMALL_STEP_BACK_MS {
            return Err(GeneratorRefusal::Wait { ms: behind });
        } else if behind <= self.max_backward_ms {
            // Serve from the last timestamp, borrowing ahead inside the window.
            0
        } else {
            return Err(GeneratorRefusal::ClockBackwards { behind_ms: behind });
        };
        let base = clock.max(self.floor_ms);
        let (ts, sequence) = match self.last {
            Some((last_ts, last_seq)) if base <= last_ts => {
                if last_seq < self.layout.max_sequence() {
                    (last_ts, last_seq + 1)
                } else {
                    (last_ts + 1, self.first_sequence())
                }
            }
            _ => (base, self.first_sequence()),
        };
        if ts > self.window_end_ms {
            return Err(GeneratorRefusal::WindowExhausted);
        }
        let id = self
            .layout
            .compose(Parts { timestamp_ms: ts, worker: self.worker, sequence })
            .ok_or(GeneratorRefusal::WindowExhausted)?;
        self.last = Some((ts, sequence));
        // Only a reading that issued an ID counts: one refused past the window (a clock jumped
        // ahead) must not make the corrected clock look like a step back.
        self.last_clock_ms = self.last_clock_ms.max(now_ms);
        Ok(id)
    }

    fn first_sequence(&mut self) -> u64 {
        let Some(state) = self.random_start.as_mut() else {
            return 0;
        };
        // xorshift64: cheap, and seeded by the caller, so the generator stays pure.
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state % 100).min(self.layout.max_sequence())
    }
}

#[cfg(test)]
mod tests;
