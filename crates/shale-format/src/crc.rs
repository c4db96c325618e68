//! CRC-32C (Castagnoli) as LevelDB stores it: masked, so that a CRC computed
//! over bytes that themselves contain CRCs does not degenerate.
//! See `docs/format/table.md` ("Block trailer") and `docs/format/log.md`.

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC-32C of `data`.
#[inline]
pub fn value(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// CRC-32C of the concatenation of the bytes that gave `crc` and `data`.
#[inline]
pub fn extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// The stored form of a CRC: rotated right by 15 bits plus a constant.
#[inline]
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
#[inline]
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // From the CRC-32C test vectors (RFC 3720, B.4) that LevelDB also uses.
        assert_eq!(value(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(value(&[0xffu8; 32]), 0x62a8_ab43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(value(&ascending), 0x46dd_794e);
        assert_eq!(value(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn extend_matches_whole() {
        assert_eq!(extend(value(b"hello "), b"world"), value(b"hello world"));
    }

    #[test]
    fn mask_round_trips_and_changes_value() {
        let crc = value(b"foo");
        assert_ne!(mask(crc), crc);
        assert_ne!(mask(mask(crc)), crc);
        assert_eq!(unmask(mask(crc)), crc);
        assert_eq!(unmask(unmask(mask(mask(crc)))), crc);
    }
}
