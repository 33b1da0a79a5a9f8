//! Scrambled IDs: a keyed permutation of a tag's ID space, so that served IDs reveal neither how
//! many were handed out between two of them nor their order, and only the key turns one back
//! into its sequence number.
//!
//! [`Scrambler::scramble`] is a permutation of `[0, limit)`: an alternating Feistel network over
//! the smallest number of bits that holds `limit` (split into a high and a low part, which may
//! differ by a bit; each round XORs one part with a keyed function of the other, so every round,
//! and so the network, is invertible), with cycle-walking (an output at or above `limit` is
//! permuted again until it falls inside, which ends because the walk follows the input's own
//! cycle of the larger permutation, and that cycle returns to the input; with the bits fitted to
//! `limit`, fewer than two steps on average, and almost never a second for a tag's ID space).
//! Distinct inputs give distinct outputs, so the one rule (no ID twice) holds for scrambled IDs
//! exactly when it holds for the sequence numbers under them. This is not encryption: it hides
//! volume and order from people who see a few IDs, not a secret from someone who sees many.
//!
//! [`ShortForm`] writes a scrambled ID as a fixed-length string over an alphabet without
//! look-alike characters, for IDs shown to people.

/// The number of Feistel rounds, each updating one part: eight make each part depend on every
/// input bit several times over (four full rounds in the classic count, where Luby-Rackoff's
/// bound for random round functions is met; the rest leaves room for the simple round function).
const ROUNDS: usize = 8;

/// How many values [`Scrambler::scramble_all`] runs through the rounds side by side.
const LANES: usize = 8;

/// A keyed permutation of `[0, limit)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scrambler {
    round_keys: [u64; ROUNDS],
    limit: u64,
    /// Bits of the low part; the high part has the rest of the width.
    low_bits: u32,
    low_mask: u64,
    high_mask: u64,
}

/// Why a [`Scrambler`] cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScrambleError {
    /// The domain is empty.
    EmptyDomain,
}

impl Scrambler {
    /// The permutation of `[0, limit)` under `key` (a tag's secret, generated once at creation).
    pub fn new(key: u128, limit: u64) -> Result<Scrambler, ScrambleError> {
        if limit == 0 {
            return Err(ScrambleError::EmptyDomain);
        }
        // Bits needed for `limit - 1`, at least 2: a high and a low part of at least one bit.
        let bits = (u64::BITS - (limit - 1).leading_zeros()).max(2);
        let low_bits = bits.div_ceil(2);
        let high_bits = bits - low_bits;
        let mut round_keys = [0; ROUNDS];
        let mut state = (key as u64) ^ mix((key >> 64) as u64);
        for round_key in &mut round_keys {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            *round_key = mix(state ^ (key >> 64) as u64);
        }
        Ok(Scrambler {
            round_keys,
            limit,
            low_bits,
            low_mask: (1u64 << low_bits) - 1,
            high_mask: (1u64 << high_bits) - 1,
        })
    }

    /// The size of the domain: inputs and outputs are below it.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The image of `n`, `None` when `n` is outside the domain.
    pub fn scramble(&self, n: u64) -> Option<u64> {
        (n < self.limit).then(|| self.walk(n, |x| self.forward(x)))
    }

    /// The `n` that [`Scrambler::scramble`] maps to `id`, `None` when `id` is outside the domain.
    pub fn unscramble(&self, id: u64) -> Option<u64> {
        (id < self.limit).then(|| self.walk(id, |x| self.backward(x)))
    }

    /// The images of every value of `values`, in place: what [`Scrambler::scramble`] gives each,
    /// computed [`LANES`] at a time. A round's two multiplications wait on each other, another
    /// value's do not, so interleaving independent values keeps the multiplier busy (about a
    /// third less time per value for a list). `None`, with `values` unchanged, when one lies
    /// outside the domain.
    pub fn scramble_all(&self, values: &mut [u64]) -> Option<()> {
        if values.iter().any(|&n| n >= self.limit) {
            return None;
        }
        let mut chunks = values.chunks_exact_mut(LANES);
        for chunk in &mut chunks {
            let mut lanes = [0; LANES];
            lanes.copy_from_slice(chunk);
            self.forward_lanes(&mut lanes);
            for (slot, image) in chunk.iter_mut().zip(lanes) {
                // The first step is taken; an image outside the domain walks on alone (rare).
                *slot = if image < self.limit { image } else { self.walk(image, |x| self.forward(x)) };
            }
        }
        for n in chunks.into_remainder() {
            *n = self.walk(*n, |x| self.forward(x));
        }
        Some(())
    }

    /// [`Scrambler::forward`] on each lane, round by round across the lanes.
    fn forward_lanes(&self, lanes: &mut [u64; LANES]) {
        let mut high = lanes.map(|x| x >> self.low_bits);
        let mut low = lanes.map(|x| x & self.low_mask);
        for pair in self.round_keys.chunks_exact(2) {
            for (high, low) in high.iter_mut().zip(&low) {
                *high ^= round(pair[0], *low) & self.high_mask;
            }
            for (low, high) in low.iter_mut().zip(&high) {
                *low ^= round(pair[1], *high) & self.low_mask;
            }
        }
        for ((x, high), low) in lanes.iter_mut().zip(high).zip(low) {
            *x = (high << self.low_bits) | low;
        }
    }

    /// Applies `step` until the value falls inside the domain (cycle-walking).
    fn walk(&self, mut x: u64, step: impl Fn(u64) -> u64) -> u64 {
        loop {
            x = step(x);
            if x < self.limit {
                return x;
            }
        }
    }

    /// Even rounds change the high part from the low one, odd rounds the low part from the high.
    fn forward(&self, x: u64) -> u64 {
        let (mut high, mut low) = (x >> self.low_bits, x & self.low_mask);
        for pair in self.round_keys.chunks_exact(2) {
            high ^= round(pair[0], low) & self.high_mask;
            low ^= round(pair[1], high) & self.low_mask;
        }
        (high << self.low_bits) | low
    }

    /// The rounds of [`Scrambler::forward`] undone in reverse order.
    fn backward(&self, x: u64) -> u64 {
        let (mut high, mut low) = (x >> self.low_bits, x & self.low_mask);
        for pair in self.round_keys.rchunks_exact(2) {
            low ^= round(pair[1], high) & self.low_mask;
            high ^= round(pair[0], low) & self.high_mask;
        }
        (high << self.low_bits) | low
    }
}

/// The round function: the part, keyed, through a 64-bit mixer.
fn round(key: u64, part: u64) -> u64 {
    mix(part ^ key)
}

/// SplitMix64's finalizer: every input bit moves about half of the output bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A scrambled tag's IDs: the permutation of its ID space `[1, id_limit)` (a tag's IDs start at
/// 1, so none is ever 0), and the short string form of that space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdScrambler {
    permutation: Scrambler,
    short: ShortForm,
}

impl IdScrambler {
    /// The IDs `[1, id_limit)` of a tag whose key is `key`.
    pub fn new(key: u128, id_limit: u64) -> Result<IdScrambler, ScrambleError> {
        let size = id_limit.checked_sub(1).filter(|&size| size > 0).ok_or(ScrambleError::EmptyDomain)?;
        Ok(IdScrambler { permutation: Scrambler::new(key, size)?, short: ShortForm::new(size) })
    }

    /// The ID served for the sequence number `id` (what the tag's ranges hold); `None` outside
    /// the ID space.
    pub fn scramble(&self, id: u64) -> Option<u64> {
        let n = id.checked_sub(1)?;
        self.permutation.scramble(n).map(|image| image + 1)
    }

    /// The IDs served for the sequence numbers `ids`, in place (see [`Scrambler::scramble_all`]);
    /// `None`, with `ids` unchanged, when one lies outside the ID space.
    pub fn scramble_all(&self, ids: &mut [u64]) -> Option<()> {
        if ids.iter().any(|&id| id == 0 || id > self.permutation.limit) {
            return None;
        }
        ids.iter_mut().for_each(|id| *id -= 1);
        self.permutation.scramble_all(ids)?;
        ids.iter_mut().for_each(|image| *image += 1);
        Some(())
    }

    /// The sequence number whose served ID is `id`; `None` outside the ID space.
    pub fn unscramble(&self, id: u64) -> Option<u64> {
        let image = id.checked_sub(1)?;
        self.permutation.unscramble(image).map(|n| n + 1)
    }

    /// A served ID as a fixed-length string; `None` outside the ID space.
    pub fn short(&self, id: u64) -> Option<String> {
        self.short.encode(id.checked_sub(1)?)
    }

    /// The served ID a short form stands for (see [`IdScrambler::short`]). Decimal and short
    /// forms can look alike (13 digits are both), so the caller says which one it holds.
    pub fn from_short(&self, text: &str) -> Option<u64> {
        self.short.decode(text).map(|value| value + 1)
    }

    /// How many characters every short form of this space has.
    pub fn short_len(&self) -> usize {
        self.short.len()
    }
}

/// The short string form: digits and capitals without I, L, O and U (Crockford's base 32), read
/// back case-insensitively.
pub const SHORT_ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Fixed-length strings for the values of one domain `[0, limit)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortForm {
    len: usize,
    limit: u64,
}

impl ShortForm {
    /// The form of `[0, limit)`: as many characters as the largest value needs (at least one).
    pub fn new(limit: u64) -> ShortForm {
        let mut len = 1;
        let mut reach: u128 = 32;
        while reach < u128::from(limit) {
            reach *= 32;
            len += 1;
        }
        ShortForm { len, limit }
    }

    /// How many characters every string of the form has.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the form has no characters (never: at least one).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `value` as a string of [`ShortForm::len`] characters, `None` outside the domain.
    pub fn encode(&self, value: u64) -> Option<String> {
        if value >= self.limit {
            return None;
        }
        let mut chars = vec![SHORT_ALPHABET[0]; self.len];
        let mut rest = value;
        for slot in chars.iter_mut().rev() {
            *slot = SHORT_ALPHABET[(rest % 32) as usize];
            rest /= 32;
        }
        Some(chars.into_iter().map(char::from).collect())
    }

    /// The value a string of this form stands for; `None` for a wrong length, a character outside
    /// the alphabet, or a value outside the domain.
    pub fn decode(&self, text: &str) -> Option<u64> {
        if text.len() != self.len {
            return None;
        }
        let mut value: u64 = 0;
        for byte in text.bytes() {
            let digit = SHORT_ALPHABET.iter().position(|c| *c == byte.to_ascii_uppercase())?;
            value = value.checked_mul(32)?.checked_add(digit as u64)?;
        }
        (value < self.limit).then_some(value)
    }
}

#[cfg(test)]
mod tests;
