//! Hostile inputs: arbitrary bytes, and valid encodings with a few mutations (bit flips, set
//! bytes, a length field replaced by a huge one, cuts, insertions, removals), the way a coverage
//! fuzzer mutates its seed corpus.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

#[derive(Debug, Clone)]
pub enum Mutation {
    Flip(Index, u8),
    Set(Index, u8),
    /// Eight bytes at the index become `2^shift` (or `u64::MAX` for 64): a huge claimed length.
    Huge(Index, u8),
    Truncate(Index),
    Insert(Index, Vec<u8>),
    Remove(Index, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 0u8..8).prop_map(|(at, bit)| Mutation::Flip(at, bit)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set(at, byte)),
        (any::<Index>(), 16u8..=64).prop_map(|(at, shift)| Mutation::Huge(at, shift)),
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), vec(any::<u8>(), 1..16)).prop_map(|(at, bytes)| Mutation::Insert(at, bytes)),
        (any::<Index>(), 1u8..16).prop_map(|(at, len)| Mutation::Remove(at, len)),
    ]
}

pub fn apply(bytes: &mut Vec<u8>, mutation: &Mutation) {
    if bytes.is_empty() {
        if let Mutation::Insert(_, inserted) = mutation {
            bytes.extend_from_slice(inserted);
        }
        return;
    }
    let len = bytes.len();
    match mutation {
        Mutation::Flip(at, bit) => bytes[at.index(len)] ^= 1 << bit,
        Mutation::Set(at, byte) => bytes[at.index(len)] = *byte,
        Mutation::Huge(at, shift) if len >= 8 => {
            let value = if *shift >= 64 { u64::MAX } else { 1u64 << shift };
            let at = at.index(len - 7);
            bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
        }
        Mutation::Huge(..) => {}
        Mutation::Truncate(at) => bytes.truncate(at.index(len)),
        Mutation::Insert(at, inserted) => {
            let at = at.index(len + 1);
            bytes.splice(at..at, inserted.iter().copied());
        }
        Mutation::Remove(at, n) => {
            let at = at.index(len);
            bytes.drain(at..(at + usize::from(*n)).min(len));
        }
    }
}

/// One of `corpus`, mutated one to four times.
pub fn mutated(corpus: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (proptest::sample::select(corpus), vec(mutation(), 1..5)).prop_map(|(mut bytes, mutations)| {
        for mutation in &mutations {
            apply(&mut bytes, mutation);
        }
        bytes
    })
}

/// Arbitrary bytes, short and long, or a mutated valid encoding (most of the cases).
pub fn hostile(corpus: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => vec(any::<u8>(), 0..64),
        1 => vec(any::<u8>(), 0..4096),
        6 => mutated(corpus),
    ]
}
