//! YCSB's request distributions, as its `core` package defines them
//! (`ZipfianGenerator`, `ScrambledZipfianGenerator`,
//! `SkewedLatestGenerator`, `UniformLongGenerator`, `Utils.fnvhash64`), over
//! a small deterministic random source instead of Java's
//! `ThreadLocalRandom`.

/// YCSB's Zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// Items of the Zipfian generator behind the scrambled one (YCSB's
/// `ScrambledZipfianGenerator.ITEM_COUNT`).
const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// zeta(10^10, 0.99), precomputed by YCSB (`ScrambledZipfianGenerator.ZETAN`).
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// FNV-1a offset basis, 64 bits.
const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;

/// FNV prime, 64 bits.
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 little-endian bytes of
/// `value`, made non-negative as Java's `Math.abs` of a `long` does.
pub fn fnv_hash64(value: u64) -> u64 {
    let mut hash = FNV_OFFSET_BASIS_64;
    let mut rest = value;
    for _ in 0..8 {
        hash ^= rest & 0xff;
        hash = hash.wrapping_mul(FNV_PRIME_64);
        rest >>= 8;
    }
    // Math.abs(Long.MIN_VALUE) stays negative in Java; as u64 that is 2^63.
    (hash as i64).unsigned_abs()
}

/// The random source of one client thread: SplitMix64.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform double in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[low, high]`.
    pub fn uniform(&mut self, low: u64, high: u64) -> u64 {
        let span = high.saturating_sub(low).saturating_add(1);
        low + self.next_u64() % span
    }
}

/// `sum_{i=start}^{n-1} 1 / (i + 1)^theta`, added to `initial`.
fn zeta(start: u64, n: u64, theta: f64, initial: f64) -> f64 {
    (start..n).fold(initial, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

/// YCSB's `ZipfianGenerator`: item `base + i` is drawn with probability
/// proportional to `1 / (i + 1)^theta`, so `base` is the most popular
/// (Gray et al., "Quickly generating billion-record synthetic databases").
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    count_for_zeta: u64,
    eta: f64,
}

impl Zipfian {
    /// Items `min..=max` with constant `theta`, computing zeta(n) (a loop
    /// over the items).
    pub fn new(min: u64, max: u64, theta: f64) -> Zipfian {
        let items = max - min + 1;
        Zipfian::with_zetan(min, max, theta, zeta(0, items, theta, 0.0))
    }

    /// As [`Zipfian::new`] with zeta(n) given.
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            count_for_zeta: items,
            eta: (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan),
        }
    }

    /// The next item of `item_count` (the item count may grow between
    /// calls, as the `latest` distribution needs; zeta is then extended
    /// incrementally).
    pub fn next(&mut self, rng: &mut Rng, item_count: u64) -> u64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            // YCSB recomputes eta from the original item count here too.
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
                / (1.0 - self.zeta2theta / self.zetan);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        self.base + (item_count as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }

    /// The next item of the generator's own item count.
    pub fn next_item(&mut self, rng: &mut Rng) -> u64 {
        let count = self.count_for_zeta;
        self.next(rng, count)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: Zipfian popularity over 10^10
/// items, hashed onto `min..=max` so that the popular items are spread over
/// the key space instead of clustered at its start.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    min: u64,
    item_count: u64,
    zipfian: Zipfian,
}

impl ScrambledZipfian {
    /// Items `min..=max`, constant 0.99.
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            min,
            item_count: max - min + 1,
            zipfian: Zipfian::with_zetan(
                0,
                SCRAMBLED_ITEM_COUNT,
                ZIPFIAN_CONSTANT,
                SCRAMBLED_ZETAN,
            ),
        }
    }

    /// The next item.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        let drawn = self.zipfian.next_item(rng);
        self.min + fnv_hash64(drawn) % self.item_count
    }
}

/// YCSB's `SkewedLatestGenerator`: the most recently inserted items are the
/// most popular (Zipfian over the distance from the latest).
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// For a key space whose latest item is `latest`.
    pub fn new(latest: u64) -> SkewedLatest {
        SkewedLatest {
            zipfian: Zipfian::new(0, latest.max(1) - 1, ZIPFIAN_CONSTANT),
        }
    }

    /// The next item, given the latest item now.
    pub fn next(&mut self, rng: &mut Rng, latest: u64) -> u64 {
        latest.saturating_sub(self.zipfian.next(rng, latest.max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_hash_matches_ycsb() {
        // Hand-checked against the Java definition: FNV-1a of eight zero
        // bytes.
        let mut expected = FNV_OFFSET_BASIS_64;
        for _ in 0..8 {
            expected = expected.wrapping_mul(FNV_PRIME_64);
        }
        assert_eq!(fnv_hash64(0), (expected as i64).unsigned_abs());
        assert_ne!(fnv_hash64(1), fnv_hash64(2));
        assert!(fnv_hash64(12_345) <= i64::MAX as u64 + 1);
    }

    #[test]
    fn uniform_doubles_are_in_range() {
        let mut rng = Rng::new(1);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            let u = rng.next_f64();
            assert!((0.0..1.0).contains(&u));
            sum += u;
        }
        assert!((sum / 10_000.0 - 0.5).abs() < 0.02);
        assert!((0..1000).all(|_| (5..=9).contains(&rng.uniform(5, 9))));
    }

    #[test]
    fn zeta_precomputed_constant_is_consistent() {
        // The incremental form agrees with the direct sum.
        let direct = zeta(0, 1000, ZIPFIAN_CONSTANT, 0.0);
        let stepped = zeta(
            500,
            1000,
            ZIPFIAN_CONSTANT,
            zeta(0, 500, ZIPFIAN_CONSTANT, 0.0),
        );
        assert!((direct - stepped).abs() < 1e-9);
        // zeta grows like ln(n) for theta near 1: 10^10 items give about 26.5.
        assert!(SCRAMBLED_ZETAN > zeta(0, 1_000_000, ZIPFIAN_CONSTANT, 0.0));
    }

    #[test]
    fn zipfian_is_skewed_toward_the_first_items() {
        let items = 1000u64;
        let mut zipfian = Zipfian::new(0, items - 1, ZIPFIAN_CONSTANT);
        let mut rng = Rng::new(42);
        let draws = 100_000;
        let mut counts = vec![0u64; items as usize];
        for _ in 0..draws {
            let item = zipfian.next_item(&mut rng);
            assert!(item < items);
            counts[item as usize] += 1;
        }
        let average = draws as f64 / items as f64;
        // Item 0 gets 1/zeta(1000) of the draws: about 13 %, 130 times the
        // average.
        assert!(counts[0] as f64 > 50.0 * average, "{}", counts[0]);
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
    }

    #[test]
    fn scrambled_zipfian_spreads_a_skewed_popularity() {
        let items = 1000u64;
        let mut generator = ScrambledZipfian::new(0, items - 1);
        let mut rng = Rng::new(7);
        let draws = 100_000;
        let mut counts = vec![0u64; items as usize];
        for _ in 0..draws {
            counts[generator.next(&mut rng) as usize] += 1;
        }
        let average = draws as f64 / items as f64;
        let (hottest, &top) = counts
            .iter()
            .enumerate()
            .max_by_key(|(_, c)| **c)
            .unwrap_or((0, &0));
        assert!(top as f64 > 10.0 * average, "top {top}");
        // The hottest item is not simply the first one: the hash moved it.
        assert_eq!(hottest as u64, fnv_hash64(0) % items);
        let touched = counts.iter().filter(|c| **c > 0).count();
        assert!(touched > 300, "{touched}");
    }

    #[test]
    fn latest_prefers_recent_items() {
        let mut latest = SkewedLatest::new(1000);
        let mut rng = Rng::new(3);
        let mut recent = 0;
        for i in 0..10_000u64 {
            let newest = 1000 + i / 100;
            let item = latest.next(&mut rng, newest);
            assert!(item <= newest);
            if newest - item < 10 {
                recent += 1;
            }
        }
        assert!(recent > 3000, "{recent}");
    }
}
