//! Generator tests: bit packing, the clock rules, and a property test over arbitrary clock
//! readings (jumps both ways, stalls, bursts over the per-millisecond limit).

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;

const LEAF: Layout = Layout { epoch_ms: 1_288_834_974_657, time_bits: 41, worker_bits: 10, sequence_bits: 12 };
const T0: u64 = 1_700_000_000_000;

fn generator(floor: u64, window_end: u64) -> Generator {
    Generator::new(LEAF, 7, floor, window_end, 1000, None)
}

#[test]
fn parts_round_trip() {
    let parts = Parts { timestamp_ms: T0, worker: 1023, sequence: 4095 };
    let id = LEAF.compose(parts).unwrap();
    assert_eq!(LEAF.decompose(id), parts);
    assert!(id < 1 << 63);
    assert_eq!(LEAF.compose(Parts { worker: 1024, ..parts }), None);
    assert_eq!(LEAF.compose(Parts { timestamp_ms: LEAF.epoch_ms - 1, ..parts }), None);
    assert_eq!(LEAF.compose(Parts { timestamp_ms: LEAF.last_timestamp_ms() + 1, ..parts }), None);
}

#[test]
fn sequence_exhaustion_moves_to_the_next_millisecond() {
    let mut generator = generator(0, T0 + 10);
    let ids: Vec<u64> = (0..4096 + 10).map(|_| generator.next(T0).unwrap()).collect();
    assert_eq!(LEAF.decompose(ids[4095]), Parts { timestamp_ms: T0, worker: 7, sequence: 4095 });
    assert_eq!(LEAF.decompose(ids[4096]), Parts { timestamp_ms: T0 + 1, worker: 7, sequence: 0 });
}

#[test]
fn the_window_bounds_borrowing() {
    let mut generator = generator(0, T0);
    for _ in 0..4096 {
        generator.next(T0).unwrap();
    }
    assert_eq!(generator.next(T0), Err(GeneratorRefusal::WindowExhausted));
    generator.extend_window(T0 + 1);
    assert!(generator.next(T0).is_ok());
}

#[test]
fn a_new_holding_starts_at_its_floor() {
    let mut generator = generator(T0 + 5000, T0 + 20_000);
    assert_eq!(LEAF.decompose(generator.next(T0).unwrap()).timestamp_ms, T0 + 5000);
}

#[test]
fn small_steps_back_are_waited_out_larger_ones_borrowed_then_refused() {
    let mut generator = generator(0, T0 + 100_000);
    let first = generator.next(T0 + 10_000).unwrap();
    assert_eq!(generator.next(T0 + 9_997), Err(GeneratorRefusal::Wait { ms: 3 }));
    let borrowed = generator.next(T0 + 9_500).unwrap();
    assert!(borrowed > first);
    assert_eq!(LEAF.decompose(borrowed).timestamp_ms, T0 + 10_000);
    assert_eq!(generator.next(T0 + 8_999), Err(GeneratorRefusal::ClockBackwards { behind_ms: 1001 }));
    let later = generator.next(T0 + 10_001).unwrap();
    assert!(later > borrowed);
}

#[test]
fn a_reading_refused_past_the_window_is_not_remembered() {
    let mut generator = generator(0, T0 + 10_000);
    let first = generator.next(T0).unwrap();
    // The clock jumps an hour ahead: refused, nothing issued.
    assert_eq!(generator.next(T0 + 3_600_000), Err(GeneratorRefusal::WindowExhausted));
    // Set right again, it is not a step back of an hour.
    let next = generator.next(T0 + 1).unwrap();
    assert!(next > first);
}

#[test]
fn random_start_stays_small_and_increasing() {
    let mut generator = Generator::new(LEAF, 1, 0, T0 + 100, 1000, Some(42));
    let mut last = 0;
    for ms in 0..50 {
        let id = generator.next(T0 + ms).unwrap();
        assert!(id > last);
        assert!(LEAF.decompose(id).sequence < 100);
        last = id;
    }
}

#[derive(Debug, Clone)]
enum Tick {
    /// Move the clock by this many ms (may be negative) and take `n` IDs.
    Take {
        step: i64,
        n: u16,
    },
    Extend {
        by: u64,
    },
}

fn tick() -> impl Strategy<Value = Tick> {
    prop_oneof![
        8 => (prop_oneof![Just(0i64), -3i64..=3, -2000i64..2000, Just(-20_000), Just(20_000)], 1u16..5000)
            .prop_map(|(step, n)| Tick::Take { step, n }),
        1 => (0u64..5000).prop_map(|by| Tick::Extend { by }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    /// For arbitrary clock readings, IDs are unique and strictly increasing, never outside the
    /// floor and window, and decode back to this worker with a timestamp that never decreases.
    #[test]
    fn ids_increase_and_stay_in_the_window(ticks in vec(tick(), 1..60), floor_offset in 0u64..3000, random in any::<bool>()) {
        let floor = T0 + floor_offset;
        let mut window_end = T0 + 4000;
        let seed = random.then_some(7);
        let mut generator = Generator::new(LEAF, 9, floor, window_end, 1000, seed);
        let mut clock = T0 as i64;
        let mut last_id = 0u64;
        let mut last_ts = 0u64;
        for tick in ticks {
            match tick {
                Tick::Extend { by } => {
                    window_end += by;
                    generator.extend_window(window_end);
                }
                Tick::Take { step, n } => {
                    clock += step;
                    for _ in 0..n {
                        match generator.next(clock as u64) {
                            Ok(id) => {
                                prop_assert!(id > last_id, "{id} after {last_id}");
                                let parts = LEAF.decompose(id);
                                prop_assert_eq!(parts.worker, 9);
                                prop_assert!(floor <= parts.timestamp_ms && parts.timestamp_ms <= window_end);
                                prop_assert!(parts.timestamp_ms >= last_ts);
                                prop_assert_eq!(LEAF.compose(parts), Some(id));
                                last_id = id;
                                last_ts = parts.timestamp_ms;
                            }
                            Err(GeneratorRefusal::Wait { ms }) => prop_assert!(ms <= SMALL_STEP_BACK_MS),
                            Err(GeneratorRefusal::ClockBackwards { behind_ms }) => prop_assert!(behind_ms > 1000),
                            Err(GeneratorRefusal::WindowExhausted) => break,
                        }
                    }
                }
            }
        }
    }
}
