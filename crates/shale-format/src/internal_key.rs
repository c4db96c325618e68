//! Internal keys: a user key followed by 8 little-endian bytes holding
//! `sequence << 8 | value_type`. See `docs/format/table.md` ("Internal keys").

use std::fmt;

use crate::coding::{decode_fixed64, put_fixed64};
use crate::error::{Error, Result};

/// Sequence numbers are 56 bits wide.
pub type SequenceNumber = u64;

/// Largest sequence number that fits beside the type byte.
pub const MAX_SEQUENCE_NUMBER: SequenceNumber = (1 << 56) - 1;

/// Bytes of the sequence/type trailer of an internal key.
pub const INTERNAL_KEY_TRAILER_LEN: usize = 8;

/// What an entry is. The numeric values are written to disk (frozen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ValueType {
    /// A tombstone.
    Deletion = 0,
    /// A value.
    Value = 1,
}

impl ValueType {
    /// The type that sorts first among entries with the same user key and
    /// sequence: used to build seek keys. Types sort by descending value, so
    /// this is the highest one.
    pub const VALUE_FOR_SEEK: ValueType = ValueType::Value;

    /// Decodes the on-disk byte.
    pub fn from_u8(byte: u8) -> Option<ValueType> {
        match byte {
            0 => Some(ValueType::Deletion),
            1 => Some(ValueType::Value),
            _ => None,
        }
    }
}

/// Packs a sequence number and type into the trailer value.
#[inline]
pub fn pack_sequence_and_type(sequence: SequenceNumber, value_type: ValueType) -> u64 {
    debug_assert!(sequence <= MAX_SEQUENCE_NUMBER);
    (sequence << 8) | value_type as u64
}

/// Appends the internal key for `user_key` to `dst`.
#[inline]
pub fn append_internal_key(
    dst: &mut Vec<u8>,
    user_key: &[u8],
    sequence: SequenceNumber,
    value_type: ValueType,
) {
    dst.extend_from_slice(user_key);
    put_fixed64(dst, pack_sequence_and_type(sequence, value_type));
}

/// The user key of an internal key. A key shorter than the trailer (corrupt)
/// yields the empty slice; parse with [`ParsedInternalKey::parse`] to detect it.
#[inline]
pub fn extract_user_key(internal_key: &[u8]) -> &[u8] {
    let end = internal_key.len().saturating_sub(INTERNAL_KEY_TRAILER_LEN);
    &internal_key[..end]
}

/// An internal key split into its parts, borrowing the user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedInternalKey<'a> {
    /// The key the user wrote.
    pub user_key: &'a [u8],
    /// When it was written.
    pub sequence: SequenceNumber,
    /// Value or tombstone.
    pub value_type: ValueType,
}

impl<'a> ParsedInternalKey<'a> {
    /// Splits an encoded internal key; a corruption when it is shorter than
    /// 8 bytes or the type byte is unknown.
    pub fn parse(internal_key: &'a [u8]) -> Result<ParsedInternalKey<'a>> {
        let at = internal_key
            .len()
            .checked_sub(INTERNAL_KEY_TRAILER_LEN)
            .ok_or_else(|| {
                Error::corruption(0, format!("internal key of {} bytes", internal_key.len()))
            })?;
        let tag = decode_fixed64(&internal_key[at..])
            .ok_or_else(|| Error::corruption(at as u64, "internal key trailer"))?;
        let value_type = ValueType::from_u8(tag as u8).ok_or_else(|| {
            Error::corruption(at as u64, format!("unknown value type {}", tag as u8))
        })?;
        Ok(ParsedInternalKey {
            user_key: &internal_key[..at],
            sequence: tag >> 8,
            value_type,
        })
    }
}

/// An owned, encoded internal key.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct InternalKey(Vec<u8>);

impl InternalKey {
    /// Encodes `user_key` with `sequence` and `value_type`.
    pub fn new(user_key: &[u8], sequence: SequenceNumber, value_type: ValueType) -> InternalKey {
        let mut buf = Vec::with_capacity(user_key.len() + INTERNAL_KEY_TRAILER_LEN);
        append_internal_key(&mut buf, user_key, sequence, value_type);
        InternalKey(buf)
    }

    /// Wraps already-encoded bytes without checking them (they may come from
    /// disk; use [`InternalKey::parse`] to check).
    pub fn from_encoded(encoded: Vec<u8>) -> InternalKey {
        InternalKey(encoded)
    }

    /// The encoded bytes.
    pub fn encoded(&self) -> &[u8] {
        &self.0
    }

    /// The user-key part.
    pub fn user_key(&self) -> &[u8] {
        extract_user_key(&self.0)
    }

    /// Splits the key into its parts.
    pub fn parse(&self) -> Result<ParsedInternalKey<'_>> {
        ParsedInternalKey::parse(&self.0)
    }

    /// Consumes the key, returning its bytes.
    pub fn into_encoded(self) -> Vec<u8> {
        self.0
    }
}

impl fmt::Debug for InternalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parse() {
            Ok(p) => write!(
                f,
                "'{}' @ {} : {:?}",
                p.user_key.escape_ascii(),
                p.sequence,
                p.value_type
            ),
            Err(_) => write!(f, "(bad){}", self.0.escape_ascii()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_key_is_corruption() {
        assert!(ParsedInternalKey::parse(b"1234567")
            .unwrap_err()
            .is_corruption());
        assert_eq!(extract_user_key(b"abc"), b"");
    }

    #[test]
    fn unknown_type_is_corruption() {
        let mut key = b"k".to_vec();
        put_fixed64(&mut key, (5 << 8) | 7);
        assert!(ParsedInternalKey::parse(&key).unwrap_err().is_corruption());
    }

    proptest! {
        #[test]
        fn round_trip(user_key in proptest::collection::vec(any::<u8>(), 0..64),
                      seq in 0..=MAX_SEQUENCE_NUMBER, deletion in any::<bool>()) {
            let vt = if deletion { ValueType::Deletion } else { ValueType::Value };
            let key = InternalKey::new(&user_key, seq, vt);
            let parsed = key.parse().unwrap();
            prop_assert_eq!(parsed.user_key, &user_key[..]);
            prop_assert_eq!(parsed.sequence, seq);
            prop_assert_eq!(parsed.value_type, vt);
        }
    }
}
