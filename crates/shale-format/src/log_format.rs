//! The frozen constants of LevelDB's log format (`db/log_format.h`), shared by
//! [`crate::log_writer`] and [`crate::log_reader`]. Write-ahead logs and
//! MANIFEST files are both written in it. See `docs/format/log.md`.
//!
//! A log is a sequence of 32 KiB blocks. Each block holds physical records
//! (fragments):
//!
//! ```text
//! masked crc32c (fixed32) | length (u16 LE) | type (u8) | payload (length bytes)
//! ```
//!
//! The checksum covers the type byte and the payload. A logical record that
//! does not fit in the rest of a block is split into a `First` fragment,
//! zero or more `Middle` fragments and a `Last` fragment. When fewer than
//! [`HEADER_SIZE`] bytes are left in a block, they are filled with zeros and
//! the next fragment starts in the next block.

/// Size of a log block. Frozen: LevelDB readers rely on it.
pub const BLOCK_SIZE: usize = 32768;

/// Size of a physical record header: checksum (4), length (2), type (1).
pub const HEADER_SIZE: usize = 4 + 2 + 1;

/// The kind of a physical record. The numeric values are written to disk
/// (frozen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RecordType {
    /// Reserved for preallocated files: a zero-length record of this type is
    /// skipped silently by readers.
    Zero = 0,
    /// A whole logical record.
    Full = 1,
    /// The first fragment of a logical record.
    First = 2,
    /// A fragment that is neither first nor last.
    Middle = 3,
    /// The last fragment of a logical record.
    Last = 4,
}

/// The largest record type a reader accepts.
pub const MAX_RECORD_TYPE: RecordType = RecordType::Last;

impl RecordType {
    /// Decodes the on-disk type byte; `None` for an unknown type.
    pub fn from_u8(byte: u8) -> Option<RecordType> {
        match byte {
            0 => Some(RecordType::Zero),
            1 => Some(RecordType::Full),
            2 => Some(RecordType::First),
            3 => Some(RecordType::Middle),
            4 => Some(RecordType::Last),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_bytes_round_trip_and_unknown_types_are_rejected() {
        for byte in 0..=MAX_RECORD_TYPE as u8 {
            let record_type = RecordType::from_u8(byte).expect("known type");
            assert_eq!(record_type as u8, byte);
        }
        for byte in (MAX_RECORD_TYPE as u8 + 1)..=u8::MAX {
            assert_eq!(RecordType::from_u8(byte), None);
        }
    }
}
