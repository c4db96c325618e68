//! Keys and values exactly as `tools/leveldb-bench/leveldb_bench.cc` (and
//! `crates/shale-cli/src/bench/generator.rs`) make them, so that the three
//! engines of scripts/compare write the same keys, in the same order, with
//! the same value bytes.

/// LevelDB's `util/random.h`: the Park-Miller generator, multiplier 7^5.
#[derive(Debug, Clone)]
pub struct Random {
    seed: u32,
}

impl Random {
    /// The modulus, 2^31 - 1.
    const M: u32 = 2_147_483_647;
    /// The multiplier, 7^5.
    const A: u64 = 16_807;

    /// Seeded as LevelDB does: the low 31 bits, with the recurrence's fixed
    /// points 0 and 2^31 - 1 replaced by 1.
    pub fn new(seed: u32) -> Random {
        let mut seed = seed & 0x7fff_ffff;
        if seed == 0 || seed == Self::M {
            seed = 1;
        }
        Random { seed }
    }

    pub fn next(&mut self) -> u32 {
        // (seed * A) mod M without a division: 2^31 = 1 (mod M), so the high
        // bits of the product fold onto the low 31 bits.
        let product = u64::from(self.seed) * Self::A;
        let mut folded = (product >> 31) as u32 + (product & u64::from(Self::M)) as u32;
        if folded > Self::M {
            folded -= Self::M;
        }
        self.seed = folded;
        folded
    }

    /// `next() % n`, as LevelDB (`n` is at least 1: --num is checked).
    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next() % n.max(1)
    }
}

/// Bytes in the value buffer before its last piece (db_bench's 1048576).
const VALUE_BUFFER_BYTES: usize = 1 << 20;
/// One compressible piece of the value buffer.
const PIECE_BYTES: usize = 100;
/// The value buffer's seed in db_bench.
const VALUE_SEED: u32 = 301;

/// db_bench's `RandomGenerator`: values are consecutive slices of a buffer
/// of 100-byte pieces, each `100 * compression_ratio` random characters
/// `' '..='~'` repeated, wrapping to the start.
#[derive(Debug)]
pub struct ValueGenerator {
    data: Vec<u8>,
    position: usize,
}

impl ValueGenerator {
    /// `value_size` only matters above 1 MiB: leveldb_bench would read past
    /// its buffer there (as LevelDB's db_bench does not: it grows the buffer
    /// to the value size), so the buffer grows to it. At or below 1 MiB the
    /// bytes are leveldb_bench's.
    pub fn new(compression_ratio: f64, value_size: usize) -> ValueGenerator {
        let mut rnd = Random::new(VALUE_SEED);
        // C++ `static_cast<size_t>(100 * ratio)` truncates toward zero.
        let raw_len = ((PIECE_BYTES as f64 * compression_ratio) as usize).max(1);
        let target = VALUE_BUFFER_BYTES.max(value_size);
        let mut data = Vec::with_capacity(target + PIECE_BYTES);
        while data.len() < target {
            let raw: Vec<u8> = (0..raw_len).map(|_| b' ' + rnd.uniform(95) as u8).collect();
            let start = data.len();
            while data.len() - start < PIECE_BYTES {
                data.extend_from_slice(&raw);
            }
            data.truncate(start + PIECE_BYTES);
        }
        ValueGenerator { data, position: 0 }
    }

    pub fn generate(&mut self, len: usize) -> &[u8] {
        if self.position + len > self.data.len() {
            self.position = 0;
        }
        self.position += len;
        &self.data[self.position - len..self.position]
    }
}

/// Key number `k` in leveldb_bench's `MakeKey`: `%0*d` with
/// `min(key_size, 16)` digits, keeping the last digits when longer, then
/// padded on the right with `'0'` (or cut) to `key_size` bytes.
#[derive(Debug)]
pub struct KeyFormat {
    key_size: usize,
    buffer: String,
}

impl KeyFormat {
    pub fn new(key_size: usize) -> KeyFormat {
        KeyFormat {
            key_size,
            buffer: String::with_capacity(32),
        }
    }

    pub fn make(&mut self, k: u64) -> &[u8] {
        use std::fmt::Write as _;
        let digits = self.key_size.min(16);
        self.buffer.clear();
        // Writing to a String cannot fail.
        let _ = write!(self.buffer, "{k:0digits$}");
        if self.buffer.len() > digits {
            self.buffer.drain(..self.buffer.len() - digits);
        }
        while self.buffer.len() < self.key_size {
            self.buffer.push('0');
        }
        self.buffer.truncate(self.key_size);
        self.buffer.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_matches_leveldb_sequence() {
        // LevelDB's Random(301): 301 * 16807 = 5058907, and on.
        let mut rnd = Random::new(301);
        assert_eq!(rnd.next(), 5_058_907);
        assert_eq!(rnd.next(), (5_058_907u64 * 16_807 % 2_147_483_647) as u32);
        assert_eq!(Random::new(0).next(), 16_807);
    }

    #[test]
    fn keys_are_sixteen_digits_and_padded() {
        let mut keys = KeyFormat::new(16);
        assert_eq!(keys.make(42), b"0000000000000042");
        let mut long = KeyFormat::new(20);
        assert_eq!(long.make(7), b"00000000000000070000");
        let mut short = KeyFormat::new(4);
        assert_eq!(short.make(123_456), b"3456");
    }

    #[test]
    fn values_are_half_compressible_slices() {
        let mut values = ValueGenerator::new(0.5, 100);
        let first = values.generate(100).to_vec();
        // 50 random characters repeated twice.
        assert_eq!(first[..50], first[50..]);
        assert!(first.iter().all(|byte| (b' '..=b'~').contains(byte)));
    }
}
