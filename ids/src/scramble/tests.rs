//! The permutation is a bijection of its domain, inverts, stays in range, shows no order, and
//! never changes between releases (golden values).

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

const KEYS: [u128; 3] = [0, 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210, u128::MAX];

#[test]
fn every_small_domain_is_permuted_exhaustively() {
    let limits = (1..=300u64).chain((2..=16).map(|bits| 1u64 << bits)).chain([1000, 4097, 65_535]);
    for limit in limits {
        for key in KEYS {
            let scrambler = Scrambler::new(key, limit).expect("a non-empty domain");
            let outputs: BTreeSet<u64> = (0..limit).map(|n| scrambler.scramble(n).expect("inside")).collect();
            assert_eq!(outputs.len() as u64, limit, "limit {limit}, key {key:x}: two inputs share an output");
            assert!(outputs.iter().all(|&id| id < limit), "limit {limit}: an output left the domain");
            for n in 0..limit {
                let id = scrambler.scramble(n).expect("inside");
                assert_eq!(scrambler.unscramble(id), Some(n), "limit {limit}, key {key:x}, n {n}");
            }
        }
    }
}

#[test]
fn values_outside_the_domain_are_refused_and_an_empty_domain_is_an_error() {
    let scrambler = Scrambler::new(7, 1000).expect("a domain");
    assert_eq!(scrambler.scramble(1000), None);
    assert_eq!(scrambler.unscramble(u64::MAX), None);
    assert_eq!(Scrambler::new(7, 0), Err(ScrambleError::EmptyDomain));
    let whole = Scrambler::new(7, u64::MAX).expect("the largest domain");
    assert_eq!(whole.unscramble(whole.scramble(u64::MAX - 1).expect("inside")), Some(u64::MAX - 1));
}

/// A change of the permutation would let a new release serve, for a new sequence number, an ID
/// an older release served for another: these values never change.
#[test]
fn the_permutation_never_changes() {
    let scrambler = Scrambler::new(KEYS[1], 1 << 63).expect("a domain");
    let golden: Vec<u64> = (1..=4).map(|n| scrambler.scramble(n).expect("inside")).collect();
    assert_eq!(golden, GOLDEN_63_BITS, "the permutation changed: scrambled IDs of old tags would repeat");
    let small = Scrambler::new(KEYS[1], 1_000_000).expect("a domain");
    let golden: Vec<u64> = (1..=4).map(|n| small.scramble(n).expect("inside")).collect();
    assert_eq!(golden, GOLDEN_MILLION);
    // What a tag serves for its first sequence numbers (its ID space ends at 2^63 - 1).
    let tag = IdScrambler::new(KEYS[1], i64::MAX as u64).expect("a tag's space");
    let golden: Vec<u64> = (1..=4).map(|n| tag.scramble(n).expect("inside")).collect();
    assert_eq!(golden, GOLDEN_TAG);
}

const GOLDEN_TAG: [u64; 4] =
    [505_241_665_039_579_422, 8_256_566_276_315_320_855, 5_334_487_220_174_131_400, 2_245_181_531_827_567_574];

const GOLDEN_63_BITS: [u64; 4] =
    [8_256_566_276_315_320_854, 5_334_487_220_174_131_399, 2_245_181_531_827_567_573, 9_038_388_212_671_857_684];
const GOLDEN_MILLION: [u64; 4] = [281_761, 625_891, 228_527, 59_912];

/// Spearman's rank correlation between 10^6 consecutive sequence numbers and their scrambled
/// IDs: no visible order (|rho| < 0.01; a random permutation gives about 0.001).
#[test]
fn a_million_consecutive_numbers_show_no_order() {
    const N: u64 = 1_000_000;
    for (key, start) in [(KEYS[1], 1u64), (42, 5_000_000_000)] {
        let scrambler = Scrambler::new(key, 1 << 63).expect("a domain");
        let mut outputs: Vec<(u64, u64)> =
            (0..N).map(|i| (scrambler.scramble(start + i).expect("inside"), i)).collect();
        outputs.sort_unstable();
        // The input of rank r is i = r (consecutive inputs); the output ranks come from the sort.
        let sum_d2: f64 = outputs
            .iter()
            .enumerate()
            .map(|(output_rank, &(_, input_rank))| {
                let d = output_rank as f64 - input_rank as f64;
                d * d
            })
            .sum();
        let n = N as f64;
        let rho = 1.0 - 6.0 * sum_d2 / (n * (n * n - 1.0));
        assert!(rho.abs() < 0.01, "key {key:x}, from {start}: Spearman's rho {rho}");
    }
}

#[test]
fn short_forms_have_one_length_per_domain_and_read_back() {
    assert_eq!(ShortForm::new(1).len(), 1);
    assert_eq!(ShortForm::new(32).len(), 1);
    assert_eq!(ShortForm::new(33).len(), 2);
    assert_eq!(ShortForm::new(1 << 63).len(), 13);
    assert_eq!(ShortForm::new(u64::MAX).len(), 13);
    let form = ShortForm::new(1_000_000);
    assert_eq!(form.encode(0).as_deref(), Some("0000"));
    assert_eq!(form.encode(999_999).as_deref(), Some("YGHZ"));
    assert_eq!(form.encode(1_000_000), None);
    assert_eq!(form.decode("yghz"), Some(999_999));
    for bad in ["YGH", "YGHZ0", "YGHI", "ZZZZ"] {
        assert_eq!(form.decode(bad), None, "{bad}");
    }
}

proptest! {
    #[test]
    fn any_key_and_domain_inverts_and_stays_inside(key in any::<u128>(), limit in 1u64.., n in any::<u64>()) {
        let scrambler = Scrambler::new(key, limit).expect("a non-empty domain");
        let n = n % limit;
        let id = scrambler.scramble(n).expect("inside");
        prop_assert!(id < limit);
        prop_assert_eq!(scrambler.unscramble(id), Some(n));
    }

    #[test]
    fn distinct_numbers_get_distinct_ids(key in any::<u128>(), limit in 2u64.., a in any::<u64>(), b in any::<u64>()) {
        let scrambler = Scrambler::new(key, limit).expect("a non-empty domain");
        let (a, b) = (a % limit, b % limit);
        prop_assume!(a != b);
        prop_assert_ne!(scrambler.scramble(a), scrambler.scramble(b));
    }

    #[test]
    fn a_list_scrambles_as_each_value_alone(
        key in any::<u128>(),
        limit in prop_oneof![1u64..200, 1u64..],
        seeds in proptest::collection::vec(any::<u64>(), 0..40),
    ) {
        // Small domains make outputs walk often, so the lanes' walks are exercised.
        let scrambler = Scrambler::new(key, limit).expect("a non-empty domain");
        let mut values: Vec<u64> = seeds.iter().map(|seed| seed % limit).collect();
        let one_by_one: Vec<u64> = values.iter().map(|&n| scrambler.scramble(n).expect("inside")).collect();
        prop_assert_eq!(scrambler.scramble_all(&mut values), Some(()));
        prop_assert_eq!(values, one_by_one);
    }

    #[test]
    fn a_list_with_one_value_outside_is_refused_unchanged(key in any::<u128>(), len in 1usize..30, at in any::<usize>()) {
        let space = IdScrambler::new(key, 1 << 20).expect("a space");
        let mut ids: Vec<u64> = (1..=len as u64).collect();
        ids[at % len] = if at % 2 == 0 { 0 } else { 1 << 20 };
        let before = ids.clone();
        prop_assert_eq!(space.scramble_all(&mut ids), None);
        prop_assert_eq!(ids, before);
    }

    #[test]
    fn short_forms_round_trip(limit in 1u64.., value in any::<u64>()) {
        let form = ShortForm::new(limit);
        let value = value % limit;
        let text = form.encode(value).expect("inside");
        prop_assert_eq!(text.len(), form.len());
        prop_assert_eq!(form.decode(&text), Some(value));
    }
}

#[test]
fn a_tags_ids_map_to_ids_and_back_and_never_to_zero() {
    let space = IdScrambler::new(0x5eed_u128 << 70 | 17, 1000).expect("a space");
    let images: BTreeSet<u64> = (1..1000).map(|id| space.scramble(id).expect("inside")).collect();
    assert_eq!(images, (1..1000).collect(), "a permutation of [1, 1000)");
    let mut listed: Vec<u64> = (1..1000).collect();
    assert_eq!(space.scramble_all(&mut listed), Some(()));
    assert!(listed.iter().zip(1..1000).all(|(&image, id)| space.scramble(id) == Some(image)));
    for id in 1..1000 {
        let image = space.scramble(id).expect("inside");
        assert_eq!(space.unscramble(image), Some(id));
        let short = space.short(image).expect("inside");
        assert_eq!(short.len(), space.short_len());
        assert_eq!(space.from_short(&short), Some(image), "{short}");
    }
    for outside in [0, 1000, u64::MAX] {
        assert_eq!(space.scramble(outside), None);
        assert_eq!(space.unscramble(outside), None);
    }
    assert_eq!(space.from_short("V"), None, "wrong length");
    assert_eq!(space.from_short("ZZ"), None, "outside the space");
    assert_eq!(space.from_short("0U"), None, "outside the alphabet");
    assert_eq!(IdScrambler::new(1, 1), Err(ScrambleError::EmptyDomain));
    assert_eq!(IdScrambler::new(1, 0), Err(ScrambleError::EmptyDomain));
}

#[test]
fn the_whole_id_space_of_a_tag_scrambles_inside_itself() {
    let limit = i64::MAX as u64;
    let space = IdScrambler::new(0xdead_beef_u128 * 0x1_0000_0001, limit).expect("a space");
    assert_eq!(space.short_len(), 13);
    for id in [1, 2, 1000, limit / 2, limit - 2, limit - 1] {
        let image = space.scramble(id).expect("inside");
        assert!((1..limit).contains(&image), "{image}");
        assert_eq!(space.unscramble(image), Some(id));
    }
}
