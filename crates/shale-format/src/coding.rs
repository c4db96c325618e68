//! Little-endian fixed-width integers, LEB128-style varints and
//! length-prefixed byte strings, as LevelDB's `util/coding.h` writes them.
//! See `docs/format/table.md` ("Integers").

use crate::error::{Error, Result};

/// Longest encoding of a 32-bit varint.
pub const MAX_VARINT32_LEN: usize = 5;
/// Longest encoding of a 64-bit varint.
pub const MAX_VARINT64_LEN: usize = 10;

/// Appends `value` as 4 little-endian bytes.
#[inline]
pub fn put_fixed32(dst: &mut Vec<u8>, value: u32) {
    dst.extend_from_slice(&value.to_le_bytes());
}

/// Appends `value` as 8 little-endian bytes.
#[inline]
pub fn put_fixed64(dst: &mut Vec<u8>, value: u64) {
    dst.extend_from_slice(&value.to_le_bytes());
}

/// Appends `value` as a varint: 7 bits per byte, low bits first, high bit set
/// on every byte but the last.
#[inline]
pub fn put_varint32(dst: &mut Vec<u8>, value: u32) {
    put_varint64(dst, u64::from(value));
}

/// Appends `value` as a varint (up to 10 bytes).
#[inline]
pub fn put_varint64(dst: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        dst.push((value as u8) | 0x80);
        value >>= 7;
    }
    dst.push(value as u8);
}

/// Number of bytes [`put_varint64`] writes for `value`.
#[inline]
pub fn varint_length(mut value: u64) -> usize {
    let mut len = 1;
    while value >= 0x80 {
        value >>= 7;
        len += 1;
    }
    len
}

/// Appends a varint32 length followed by the bytes.
///
/// # Panics
/// Never for data this crate produces; slices longer than 4 GiB cannot be
/// length-prefixed in this format and are rejected by the callers that could
/// see them (builders check sizes first).
#[inline]
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Reads 4 little-endian bytes at the start of `src`; `None` when too short.
#[inline]
pub fn decode_fixed32(src: &[u8]) -> Option<u32> {
    let bytes: [u8; 4] = src.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// Reads 8 little-endian bytes at the start of `src`; `None` when too short.
#[inline]
pub fn decode_fixed64(src: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = src.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Decodes a varint of at most `max_bits` bits from the start of `src`.
/// Returns the value and the number of bytes used, or `None` when the input
/// ends first or the value does not fit.
#[inline]
fn decode_varint(src: &[u8], max_len: usize, max_bits: u32) -> Option<(u64, usize)> {
    let mut result = 0u64;
    for (i, &byte) in src.iter().take(max_len).enumerate() {
        let shift = 7 * i as u32;
        let bits = u64::from(byte & 0x7f);
        if shift + 7 > max_bits && (bits >> (max_bits - shift)) != 0 {
            return None;
        }
        result |= bits << shift;
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Decodes a 32-bit varint; `None` if truncated or overlong.
#[inline]
pub fn decode_varint32(src: &[u8]) -> Option<(u32, usize)> {
    decode_varint(src, MAX_VARINT32_LEN, 32).map(|(v, n)| (v as u32, n))
}

/// Decodes a 64-bit varint; `None` if truncated or overlong.
#[inline]
pub fn decode_varint64(src: &[u8]) -> Option<(u64, usize)> {
    decode_varint(src, MAX_VARINT64_LEN, 64)
}

/// A cursor over encoded bytes. Every read checks bounds and reports a
/// [`Error::Corruption`] at the cursor's offset naming what it tried to read.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Decoder<'a> {
        Decoder { data, pos: 0 }
    }

    /// Offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// True when every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// The bytes not read yet.
    pub fn remaining(&self) -> &'a [u8] {
        self.data.get(self.pos..).unwrap_or_default()
    }

    fn fail<T>(&self, what: &str) -> Result<T> {
        Err(Error::corruption(
            self.pos as u64,
            format!("truncated or malformed {what}"),
        ))
    }

    /// Reads one byte.
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        match self.data.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => self.fail(what),
        }
    }

    /// Reads a little-endian u32.
    pub fn fixed32(&mut self, what: &str) -> Result<u32> {
        match decode_fixed32(self.remaining()) {
            Some(v) => {
                self.pos += 4;
                Ok(v)
            }
            None => self.fail(what),
        }
    }

    /// Reads a little-endian u64.
    pub fn fixed64(&mut self, what: &str) -> Result<u64> {
        match decode_fixed64(self.remaining()) {
            Some(v) => {
                self.pos += 8;
                Ok(v)
            }
            None => self.fail(what),
        }
    }

    /// Reads a 32-bit varint.
    pub fn varint32(&mut self, what: &str) -> Result<u32> {
        match decode_varint32(self.remaining()) {
            Some((v, n)) => {
                self.pos += n;
                Ok(v)
            }
            None => self.fail(what),
        }
    }

    /// Reads a 64-bit varint.
    pub fn varint64(&mut self, what: &str) -> Result<u64> {
        match decode_varint64(self.remaining()) {
            Some((v, n)) => {
                self.pos += n;
                Ok(v)
            }
            None => self.fail(what),
        }
    }

    /// Reads exactly `len` bytes.
    pub fn bytes(&mut self, len: usize, what: &str) -> Result<&'a [u8]> {
        let end = match self.pos.checked_add(len) {
            Some(end) if end <= self.data.len() => end,
            _ => return self.fail(what),
        };
        let out = &self.data[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// Reads a varint32 length and that many bytes. The length is checked
    /// against the bytes present before anything is allocated.
    pub fn length_prefixed(&mut self, what: &str) -> Result<&'a [u8]> {
        let start = self.pos;
        let len = self.varint32(what)? as usize;
        let result = self.bytes(len, what);
        if result.is_err() {
            self.pos = start;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varint_boundaries() {
        for &v in &[0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert_eq!(buf.len(), varint_length(v));
            assert_eq!(decode_varint64(&buf), Some((v, buf.len())));
            assert_eq!(decode_varint64(&buf[..buf.len() - 1]), None);
        }
    }

    #[test]
    fn varint32_rejects_values_over_32_bits() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::from(u32::MAX) + 1);
        assert_eq!(decode_varint32(&buf), None);
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::from(u32::MAX));
        assert_eq!(decode_varint32(&buf), Some((u32::MAX, 5)));
    }

    #[test]
    fn varint64_rejects_eleven_bytes_and_overflow() {
        assert_eq!(decode_varint64(&[0xff; 11]), None);
        // Ten bytes whose last carries more than the one bit that fits.
        let mut buf = vec![0xffu8; 9];
        buf.push(0x02);
        assert_eq!(decode_varint64(&buf), None);
    }

    #[test]
    fn length_prefixed_rejects_long_length_without_allocating() {
        let mut buf = Vec::new();
        put_varint32(&mut buf, u32::MAX);
        buf.extend_from_slice(b"abc");
        let mut d = Decoder::new(&buf);
        let err = d.length_prefixed("key").unwrap_err();
        assert!(err.is_corruption());
        assert_eq!(d.position(), 0);
    }

    proptest! {
        #[test]
        fn fixed_and_varint_round_trip(a in any::<u32>(), b in any::<u64>(), c in any::<u32>(), d in any::<u64>(),
                                       s in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut buf = Vec::new();
            put_fixed32(&mut buf, a);
            put_fixed64(&mut buf, b);
            put_varint32(&mut buf, c);
            put_varint64(&mut buf, d);
            put_length_prefixed(&mut buf, &s);
            let mut dec = Decoder::new(&buf);
            prop_assert_eq!(dec.fixed32("a").unwrap(), a);
            prop_assert_eq!(dec.fixed64("b").unwrap(), b);
            prop_assert_eq!(dec.varint32("c").unwrap(), c);
            prop_assert_eq!(dec.varint64("d").unwrap(), d);
            prop_assert_eq!(dec.length_prefixed("s").unwrap(), &s[..]);
            prop_assert!(dec.is_empty());
        }

        #[test]
        fn decoders_never_panic(data in proptest::collection::vec(any::<u8>(), 0..32)) {
            let mut dec = Decoder::new(&data);
            while !dec.is_empty() {
                if dec.length_prefixed("x").is_err() && dec.varint64("y").is_err() && dec.u8("z").is_err() {
                    break;
                }
            }
        }
    }
}
