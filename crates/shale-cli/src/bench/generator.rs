//! Keys and values exactly as LevelDB 1.23's db_bench makes them, so that a
//! run of `shale bench` and a run of db_bench (or of
//! `tools/leveldb-bench`) write the same keys, in the same order, with the
//! same bytes of value.
//!
//! * [`Random`] is LevelDB's `util/random.h`: the Park–Miller "minimal
//!   standard" generator, `seed = seed * 16807 % (2^31 - 1)`.
//! * [`ValueGenerator`] is db_bench's `RandomGenerator`: a buffer of a little
//!   over 1 MiB made of 100-byte pieces, each `100 * compression_ratio`
//!   random printable characters repeated to 100 bytes (LevelDB's
//!   `test::CompressibleString`), drawn from `Random(301)`; values are
//!   consecutive slices of it, wrapping to the start.
//! * [`KeyFormat`] writes key number `k` as db_bench's `%016d`.

/// Bytes in the value buffer before the last piece is added (db_bench's
/// `1048576`); the buffer ends a little over it.
pub const VALUE_BUFFER_BYTES: usize = 1 << 20;

/// Length of one compressible piece of the value buffer.
const PIECE_BYTES: usize = 100;

/// The seed of the value buffer's generator in db_bench.
const VALUE_SEED: u32 = 301;

/// Digits in db_bench's key format (`%016d`).
pub const DEFAULT_KEY_SIZE: usize = 16;

/// LevelDB's `Random`: a 31-bit Park–Miller linear congruential generator.
#[derive(Debug, Clone)]
pub struct Random {
    seed: u32,
}

impl Random {
    /// The modulus, 2^31 - 1.
    const M: u32 = 2_147_483_647;
    /// The multiplier, 7^5.
    const A: u64 = 16_807;

    /// A generator seeded as LevelDB does: the low 31 bits, with 0 and
    /// 2^31 - 1 (fixed points of the recurrence) replaced by 1.
    pub fn new(seed: u32) -> Random {
        let mut seed = seed & 0x7fff_ffff;
        if seed == 0 || seed == Self::M {
            seed = 1;
        }
        Random { seed }
    }

    /// The next value, in `[1, 2^31 - 2]`.
    pub fn next(&mut self) -> u32 {
        // (seed * A) mod M without a division: since 2^31 = 1 (mod M), the
        // high bits of the product fold onto the low 31 bits.
        let product = u64::from(self.seed) * Self::A;
        let mut seed = (product >> 31) as u32 + (product & u64::from(Self::M)) as u32;
        if seed > Self::M {
            seed -= Self::M;
        }
        self.seed = seed;
        seed
    }

    /// A value in `[0, n)` (`next() % n`, as LevelDB; `n` must be positive).
    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next() % n.max(1)
    }
}

/// Appends LevelDB's `test::CompressibleString` of `len` bytes to `out`:
/// `len * fraction` (at least 1) random characters from `' '` to `'~'`,
/// repeated to `len` bytes.
fn push_compressible_piece(rnd: &mut Random, fraction: f64, len: usize, out: &mut Vec<u8>) {
    // C++ `static_cast<int>(len * fraction)` truncates toward zero.
    let raw_len = ((len as f64 * fraction) as usize).max(1);
    let raw: Vec<u8> = (0..raw_len).map(|_| b' ' + rnd.uniform(95) as u8).collect();
    let start = out.len();
    while out.len() - start < len {
        out.extend_from_slice(&raw);
    }
    out.truncate(start + len);
}

/// db_bench's `RandomGenerator`: values are consecutive slices of a fixed
/// buffer whose compressibility is set by `compression_ratio`.
#[derive(Debug, Clone)]
pub struct ValueGenerator {
    data: Vec<u8>,
    position: usize,
}

impl ValueGenerator {
    /// Builds the buffer. `compression_ratio` is the fraction of each
    /// 100-byte piece that is random (0.5: values compress to about half).
    pub fn new(compression_ratio: f64) -> ValueGenerator {
        let mut rnd = Random::new(VALUE_SEED);
        let mut data = Vec::with_capacity(VALUE_BUFFER_BYTES + PIECE_BYTES);
        while data.len() < VALUE_BUFFER_BYTES {
            push_compressible_piece(&mut rnd, compression_ratio, PIECE_BYTES, &mut data);
        }
        ValueGenerator { data, position: 0 }
    }

    /// The next `len` bytes of the buffer, starting over at its beginning
    /// when fewer than `len` are left. `len` must be at most
    /// [`ValueGenerator::capacity`] (callers check `--value_size`).
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.position + len > self.data.len() {
            self.position = 0;
        }
        self.position += len;
        &self.data[self.position - len..self.position]
    }

    /// The largest value this generator can return.
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// The whole buffer (for tests and the snappy benchmarks).
    #[cfg(test)]
    pub fn buffer(&self) -> &[u8] {
        &self.data
    }
}

/// How key number `k` is written.
///
/// With the default 16 bytes this is db_bench's `%016d`. A longer
/// `--key_size` keeps the 16 digits and pads on the right with `'0'`, as
/// RocksDB's db_bench pads its keys; a shorter one writes `k` with that many
/// digits (`%0Nd`), keeping the low-order digits so that keys stay distinct
/// and in order — [`KeyFormat::check_capacity`] refuses a `--num` that does
/// not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFormat {
    /// Bytes in each key.
    pub key_size: usize,
}

impl KeyFormat {
    /// Keys of `key_size` bytes.
    pub fn new(key_size: usize) -> KeyFormat {
        KeyFormat { key_size }
    }

    /// Digits used for the number.
    fn digits(&self) -> usize {
        self.key_size.min(DEFAULT_KEY_SIZE)
    }

    /// Fails when keys `0..num` do not all fit in `key_size` digits.
    pub fn check_capacity(&self, num: u64) -> Result<(), String> {
        if self.key_size == 0 {
            return Err("--key_size must be at least 1".into());
        }
        let digits = self.digits() as u32;
        if digits < 20 && num > 10u64.pow(digits) {
            return Err(format!(
                "--key_size={} holds {} distinct keys, fewer than --num={num}",
                self.key_size,
                10u64.pow(digits)
            ));
        }
        Ok(())
    }

    /// Writes key number `k` into `out` (cleared first): its low
    /// `digits()` decimal digits, zero-padded, then '0's up to `key_size`.
    ///
    /// By hand rather than `write!(out, "{k:0digits$}")`: the formatter's
    /// padding path was 2 % of a fill's CPU in a profile, and every put
    /// of a benchmark makes a key.
    pub fn write(&self, k: u64, out: &mut Vec<u8>) {
        out.clear();
        out.resize(self.digits(), b'0');
        let mut rest = k;
        for slot in out.iter_mut().rev() {
            if rest == 0 {
                break;
            }
            // The remainder is a digit.
            *slot = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        out.resize(self.key_size, b'0');
    }

    /// Key number `k` as a new vector.
    #[cfg(test)]
    pub fn key(&self, k: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.key_size);
        self.write(k, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn random_matches_the_park_miller_recurrence() {
        let mut rnd = Random::new(301);
        // 301 * 16807 is below the modulus: the first value is the product.
        assert_eq!(rnd.next(), 5_058_907);
        let mut model: u64 = 5_058_907;
        for _ in 0..10_000 {
            model = model * 16_807 % 2_147_483_647;
            assert_eq!(u64::from(rnd.next()), model);
        }
        // Fixed points are avoided as LevelDB does.
        assert_eq!(Random::new(0).next(), 16_807);
        assert_eq!(Random::new(2_147_483_647).next(), 16_807);
        assert_eq!(Random::new(0x8000_0001).next(), 16_807);
    }

    #[test]
    fn random_known_sequence() {
        // The first draws of LevelDB's Random(301) and of db_bench's first
        // thread, Random(1000).
        let mut rnd = Random::new(301);
        let first: Vec<u32> = (0..3).map(|_| rnd.next()).collect();
        assert_eq!(first, vec![5_058_907, 1_273_187_716, 938_884_104]);
        let mut thread0 = Random::new(1000);
        assert_eq!(thread0.next(), 16_807_000);
        assert_eq!(thread0.uniform(1_000_000), 891_243);
    }

    #[test]
    fn keys_are_zero_padded_decimals() {
        let format = KeyFormat::new(16);
        assert_eq!(format.key(0), b"0000000000000000");
        assert_eq!(format.key(42), b"0000000000000042");
        assert_eq!(format.key(1_234_567_890), b"0000001234567890");
        assert_eq!(KeyFormat::new(20).key(42), b"00000000000000420000");
        assert_eq!(KeyFormat::new(4).key(42), b"0042");
        assert_eq!(KeyFormat::new(4).key(123_456), b"3456");
        let max = u64::MAX.to_string().into_bytes();
        assert_eq!(KeyFormat::new(16).key(u64::MAX), max[max.len() - 16..]);
        for k in [1, 7, 10, 1_000_003, 4_294_967_295, 99_999_999_999] {
            assert_eq!(KeyFormat::new(16).key(k), format!("{k:016}").as_bytes());
        }
        assert!(KeyFormat::new(4).check_capacity(10_000).is_ok());
        assert!(KeyFormat::new(4).check_capacity(10_001).is_err());
        assert!(KeyFormat::new(0).check_capacity(1).is_err());
        assert!(KeyFormat::new(16)
            .check_capacity(u64::from(u32::MAX))
            .is_ok());
    }

    #[test]
    fn keys_sort_as_numbers() {
        let format = KeyFormat::new(16);
        let mut previous = format.key(0);
        for k in [1, 9, 10, 99, 100, 12_345, 999_999_999] {
            let key = format.key(k);
            assert!(key > previous);
            previous = key;
        }
    }

    #[test]
    fn value_buffer_is_db_bench_s() {
        let generator = ValueGenerator::new(0.5);
        // 10486 pieces of 100 bytes: the first to reach 1 MiB.
        assert_eq!(generator.buffer().len(), 1_048_600);
        let data = generator.buffer();
        assert!(data.iter().all(|b| (b' '..=b'~').contains(b)));
        // Each piece is 50 random characters, twice.
        assert_eq!(data[..50], data[50..100]);
        assert_ne!(data[..50], data[100..150]);
        // The first character comes from Random(301)'s first draw.
        assert_eq!(data[0], b' ' + (5_058_907 % 95) as u8);
    }

    #[test]
    fn values_are_consecutive_slices_that_wrap() {
        let mut generator = ValueGenerator::new(0.5);
        let whole = generator.buffer().to_vec();
        assert_eq!(generator.generate(100), &whole[..100]);
        assert_eq!(generator.generate(10), &whole[100..110]);
        // 110 bytes used: 100 fewer than the buffer no longer fit, so the
        // slice starts over at the beginning.
        let big = whole.len() - 100;
        assert!(generator.generate(big) == &whole[..big]);
        assert_eq!(generator.generate(1000).len(), 1000);
    }

    #[test]
    fn compression_ratio_sets_compressibility() {
        for (ratio, low, high) in [(0.5, 0.45, 0.6), (0.25, 0.2, 0.35), (1.0, 0.95, 1.1)] {
            let generator = ValueGenerator::new(ratio);
            let compressed = snap::raw::Encoder::new()
                .compress_vec(generator.buffer())
                .unwrap();
            let fraction = compressed.len() as f64 / generator.buffer().len() as f64;
            assert!(
                (low..high).contains(&fraction),
                "ratio {ratio}: compressed to {fraction}"
            );
        }
    }
}
