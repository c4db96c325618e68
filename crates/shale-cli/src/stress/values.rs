//! Keys and values of `shale stress`, derived from numbers so that the
//! expected state needs only a generation per key (RocksDB's db_stress
//! keeps a "value base" per key the same way).
//!
//! Key `i` is `key` followed by `i` in ten decimal digits, so that key order
//! is index order. The value of generation `g` of key `i` starts with `g`
//! and `i` (little-endian `u32`s, so a wrong value found in the database
//! says which write it came from); its length and the rest of its bytes
//! follow from a hash of both.

/// Bytes at the head of every value: the generation and the key index.
pub const VALUE_HEADER: usize = 8;

const KEY_PREFIX: &[u8] = b"key";
const KEY_DIGITS: usize = 10;

/// The key of index `index`.
pub fn key(index: u32) -> Vec<u8> {
    format!("key{index:0KEY_DIGITS$}").into_bytes()
}

/// The index of `key`, when it is one of ours.
pub fn key_index(key: &[u8]) -> Option<u32> {
    let digits = key.strip_prefix(KEY_PREFIX)?;
    if digits.len() != KEY_DIGITS || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The key for messages: its text and index.
pub fn describe_key(index: u32) -> String {
    format!("{} (index {index})", String::from_utf8_lossy(&key(index)))
}

/// Value lengths, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueSizes {
    pub min: u32,
    pub max: u32,
}

/// SplitMix64: the one hash of the workload.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The value written by generation `generation` of key `index`.
pub fn value(index: u32, generation: u32, sizes: ValueSizes) -> Vec<u8> {
    let seed = mix((u64::from(index) << 32) | u64::from(generation));
    let span = u64::from(sizes.max - sizes.min) + 1;
    let len = (u64::from(sizes.min) + seed % span) as usize;
    let mut out = Vec::with_capacity(len.max(VALUE_HEADER));
    out.extend_from_slice(&generation.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
    let mut state = seed;
    while out.len() < len {
        state = mix(state);
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// What a value found in the database is: the generation and key index in
/// its header, when it has one.
pub fn describe_value(found: &[u8]) -> String {
    let head = |at: usize| {
        found
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_le_bytes)
    };
    let hex: String = found.iter().take(16).map(|b| format!("{b:02x}")).collect();
    let more = if found.len() > 16 { "..." } else { "" };
    match (head(0), head(4)) {
        (Some(generation), Some(index)) => format!(
            "{} bytes {hex}{more} (header: generation {generation} of index {index})",
            found.len()
        ),
        _ => format!("{} bytes {hex}{more}", found.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_in_order() {
        assert_eq!(key(42), b"key0000000042");
        assert_eq!(key_index(&key(42)), Some(42));
        assert_eq!(key_index(&key(u32::MAX)), Some(u32::MAX));
        assert!(key(9) < key(10));
        assert_eq!(key_index(b"key42"), None);
        assert_eq!(key_index(b"kez0000000042"), None);
    }

    #[test]
    fn values_are_deterministic_and_sized() {
        let sizes = ValueSizes { min: 8, max: 100 };
        for generation in 1..200 {
            let v = value(7, generation, sizes);
            assert_eq!(v, value(7, generation, sizes));
            assert!((8..=100).contains(&v.len()));
            assert_eq!(&v[..4], &generation.to_le_bytes());
        }
        assert_ne!(value(7, 1, sizes), value(8, 1, sizes));
        let text = describe_value(&value(7, 3, sizes));
        assert!(text.contains("generation 3 of index 7"), "{text}");
        assert_eq!(describe_value(b"ab"), "2 bytes 6162");
    }
}
