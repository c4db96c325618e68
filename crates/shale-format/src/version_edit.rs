//! LevelDB's version edit (`db/version_edit.cc`): one MANIFEST record, the
//! change from one version of the set of table files to the next.
//! See `docs/format/manifest.md`.
//!
//! An edit is a sequence of fields, each a varint32 tag followed by its
//! value. Every field is optional and the list fields may repeat.

use std::collections::BTreeSet;

use crate::coding::{put_length_prefixed, put_varint32, put_varint64, Decoder};
use crate::error::{Error, Result};
use crate::internal_key::{InternalKey, SequenceNumber};

/// Number of levels in the LSM tree. Frozen: a MANIFEST naming a level at or
/// above it is corrupt to LevelDB.
pub const NUM_LEVELS: usize = 7;

/// Field tags. Frozen. Tag 8 was LevelDB's long-removed large-value
/// reference and is rejected like any unknown tag.
mod tag {
    pub const COMPARATOR: u32 = 1;
    pub const LOG_NUMBER: u32 = 2;
    pub const NEXT_FILE_NUMBER: u32 = 3;
    pub const LAST_SEQUENCE: u32 = 4;
    pub const COMPACT_POINTER: u32 = 5;
    pub const DELETED_FILE: u32 = 6;
    pub const NEW_FILE: u32 = 7;
    pub const PREV_LOG_NUMBER: u32 = 9;
}

/// What a MANIFEST records about one table file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileMetaData {
    /// File number: the table is `<number>.ldb`.
    pub number: u64,
    /// Size of the file in bytes.
    pub file_size: u64,
    /// Smallest internal key in the table.
    pub smallest: InternalKey,
    /// Largest internal key in the table.
    pub largest: InternalKey,
}

/// One MANIFEST record. Levels are below [`NUM_LEVELS`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VersionEdit {
    /// Name of the comparator the database was created with.
    pub comparator: Option<String>,
    /// Number of the current write-ahead log: older logs are obsolete.
    pub log_number: Option<u64>,
    /// Number of the log being compacted when this edit was written (only
    /// old LevelDB versions set it to non-zero).
    pub prev_log_number: Option<u64>,
    /// The next file number to hand out.
    pub next_file_number: Option<u64>,
    /// The last sequence number used.
    pub last_sequence: Option<SequenceNumber>,
    /// Per level, the key where the next compaction of that level starts.
    pub compact_pointers: Vec<(usize, InternalKey)>,
    /// Files removed, as (level, file number); LevelDB keeps a sorted set and
    /// encodes them in that order.
    pub deleted_files: BTreeSet<(usize, u64)>,
    /// Files added, as (level, metadata), in the order they were added.
    pub new_files: Vec<(usize, FileMetaData)>,
}

impl VersionEdit {
    /// An edit that changes nothing.
    pub fn new() -> VersionEdit {
        VersionEdit::default()
    }

    /// Records that `meta` was added at `level`.
    pub fn add_file(&mut self, level: usize, meta: FileMetaData) {
        self.new_files.push((level, meta));
    }

    /// Records that file `number` was removed from `level`.
    pub fn delete_file(&mut self, level: usize, number: u64) {
        self.deleted_files.insert((level, number));
    }

    /// Records where the next compaction of `level` starts.
    pub fn set_compact_pointer(&mut self, level: usize, key: InternalKey) {
        self.compact_pointers.push((level, key));
    }

    /// Encodes the edit as LevelDB's `EncodeTo` does, field for field.
    ///
    /// The encoding is only readable back when every level is below
    /// [`NUM_LEVELS`] and every internal key is non-empty, as LevelDB's
    /// decoder requires; a larger level is written as `u32::MAX` rather than
    /// wrapped into a valid one.
    pub fn encode(&self) -> Vec<u8> {
        let mut dst = Vec::new();
        if let Some(name) = &self.comparator {
            put_varint32(&mut dst, tag::COMPARATOR);
            put_length_prefixed(&mut dst, name.as_bytes());
        }
        if let Some(number) = self.log_number {
            put_varint32(&mut dst, tag::LOG_NUMBER);
            put_varint64(&mut dst, number);
        }
        if let Some(number) = self.prev_log_number {
            put_varint32(&mut dst, tag::PREV_LOG_NUMBER);
            put_varint64(&mut dst, number);
        }
        if let Some(number) = self.next_file_number {
            put_varint32(&mut dst, tag::NEXT_FILE_NUMBER);
            put_varint64(&mut dst, number);
        }
        if let Some(sequence) = self.last_sequence {
            put_varint32(&mut dst, tag::LAST_SEQUENCE);
            put_varint64(&mut dst, sequence);
        }
        for (level, key) in &self.compact_pointers {
            put_varint32(&mut dst, tag::COMPACT_POINTER);
            put_level(&mut dst, *level);
            put_length_prefixed(&mut dst, key.encoded());
        }
        for &(level, number) in &self.deleted_files {
            put_varint32(&mut dst, tag::DELETED_FILE);
            put_level(&mut dst, level);
            put_varint64(&mut dst, number);
        }
        for (level, meta) in &self.new_files {
            put_varint32(&mut dst, tag::NEW_FILE);
            put_level(&mut dst, *level);
            put_varint64(&mut dst, meta.number);
            put_varint64(&mut dst, meta.file_size);
            put_length_prefixed(&mut dst, meta.smallest.encoded());
            put_length_prefixed(&mut dst, meta.largest.encoded());
        }
        dst
    }

    /// Decodes an edit as LevelDB's `DecodeFrom` does. A corruption names the
    /// field that failed, with LevelDB's wording ("VersionEdit: new-file
    /// entry"), at the offset of that field's tag.
    pub fn decode(src: &[u8]) -> Result<VersionEdit> {
        let mut edit = VersionEdit::default();
        let mut input = Decoder::new(src);
        while !input.is_empty() {
            let start = input.position();
            let fail = |what: &str| Error::corruption(start as u64, format!("VersionEdit: {what}"));
            let tag = input.varint32("tag").map_err(|_| fail("invalid tag"))?;
            match tag {
                tag::COMPARATOR => {
                    let name = input
                        .length_prefixed("comparator name")
                        .ok()
                        .and_then(|name| std::str::from_utf8(name).ok())
                        .ok_or_else(|| fail("comparator name"))?;
                    edit.comparator = Some(name.to_string());
                }
                tag::LOG_NUMBER => {
                    let number = input.varint64("log number");
                    edit.log_number = Some(number.map_err(|_| fail("log number"))?);
                }
                tag::PREV_LOG_NUMBER => {
                    let number = input.varint64("previous log number");
                    edit.prev_log_number = Some(number.map_err(|_| fail("previous log number"))?);
                }
                tag::NEXT_FILE_NUMBER => {
                    let number = input.varint64("next file number");
                    edit.next_file_number = Some(number.map_err(|_| fail("next file number"))?);
                }
                tag::LAST_SEQUENCE => {
                    let sequence = input.varint64("last sequence number");
                    edit.last_sequence = Some(sequence.map_err(|_| fail("last sequence number"))?);
                }
                tag::COMPACT_POINTER => {
                    let pointer = get_level(&mut input)
                        .and_then(|level| Some((level, get_internal_key(&mut input)?)));
                    edit.compact_pointers
                        .push(pointer.ok_or_else(|| fail("compaction pointer"))?);
                }
                tag::DELETED_FILE => {
                    let deleted = get_level(&mut input)
                        .and_then(|level| Some((level, input.varint64("file number").ok()?)));
                    edit.deleted_files
                        .insert(deleted.ok_or_else(|| fail("deleted file"))?);
                }
                tag::NEW_FILE => {
                    let new_file =
                        get_new_file(&mut input).ok_or_else(|| fail("new-file entry"))?;
                    edit.new_files.push(new_file);
                }
                _ => return Err(fail("unknown tag")),
            }
        }
        Ok(edit)
    }
}

/// Levels are written as varint32; one that does not fit saturates, so that
/// decoding rejects it instead of reading another level.
fn put_level(dst: &mut Vec<u8>, level: usize) {
    put_varint32(dst, u32::try_from(level).unwrap_or(u32::MAX));
}

fn get_level(input: &mut Decoder<'_>) -> Option<usize> {
    let level = usize::try_from(input.varint32("level").ok()?).ok()?;
    (level < NUM_LEVELS).then_some(level)
}

/// LevelDB accepts any non-empty bytes as an internal key here; the parts
/// are checked when the key is used.
fn get_internal_key(input: &mut Decoder<'_>) -> Option<InternalKey> {
    let encoded = input.length_prefixed("internal key").ok()?;
    (!encoded.is_empty()).then(|| InternalKey::from_encoded(encoded.to_vec()))
}

fn get_new_file(input: &mut Decoder<'_>) -> Option<(usize, FileMetaData)> {
    let level = get_level(input)?;
    let number = input.varint64("file number").ok()?;
    let file_size = input.varint64("file size").ok()?;
    let smallest = get_internal_key(input)?;
    let largest = get_internal_key(input)?;
    Some((
        level,
        FileMetaData {
            number,
            file_size,
            smallest,
            largest,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::internal_key::ValueType;
    use proptest::prelude::*;

    fn key(user_key: &str, sequence: u64) -> InternalKey {
        InternalKey::new(user_key.as_bytes(), sequence, ValueType::Value)
    }

    fn reason(err: &Error) -> &str {
        match err {
            Error::Corruption { reason, .. } => reason,
            other => panic!("not a corruption: {other:?}"),
        }
    }

    fn sample_edit() -> VersionEdit {
        let mut edit = VersionEdit::new();
        edit.comparator = Some("leveldb.BytewiseComparator".to_string());
        edit.log_number = Some(9);
        edit.prev_log_number = Some(0);
        edit.next_file_number = Some(12);
        edit.last_sequence = Some(1234);
        edit.set_compact_pointer(1, key("m", 5));
        edit.delete_file(2, 7);
        edit.delete_file(0, 8);
        edit.add_file(
            0,
            FileMetaData {
                number: 11,
                file_size: 4096,
                smallest: key("a", 100),
                largest: key("z", 200),
            },
        );
        edit
    }

    #[test]
    fn empty_edit_encodes_to_nothing() {
        assert_eq!(VersionEdit::new().encode(), Vec::<u8>::new());
        assert_eq!(VersionEdit::decode(&[]).expect("valid"), VersionEdit::new());
    }

    #[test]
    fn encoding_follows_leveldb_field_order() {
        let encoded = sample_edit().encode();
        let mut expected = b"\x01\x1aleveldb.BytewiseComparator".to_vec();
        expected.extend_from_slice(&[2, 9]); // log number
        expected.extend_from_slice(&[9, 0]); // previous log number
        expected.extend_from_slice(&[3, 12]); // next file number
        expected.extend_from_slice(&[4, 0xd2, 0x09]); // last sequence 1234
        expected.extend_from_slice(&[5, 1, 9]); // compact pointer, level 1
        expected.extend_from_slice(key("m", 5).encoded());
        expected.extend_from_slice(&[6, 0, 8, 6, 2, 7]); // deleted, sorted
        expected.extend_from_slice(&[7, 0, 11, 0x80, 0x20, 9]); // new file
        expected.extend_from_slice(key("a", 100).encoded());
        expected.push(9);
        expected.extend_from_slice(key("z", 200).encoded());
        assert_eq!(encoded, expected);
        assert_eq!(VersionEdit::decode(&encoded).expect("valid"), sample_edit());
    }

    #[test]
    fn fields_may_repeat_and_later_values_win() {
        let mut bytes = vec![2, 5, 2, 6];
        bytes.extend_from_slice(&[6, 1, 3, 6, 1, 3]);
        let edit = VersionEdit::decode(&bytes).expect("valid");
        assert_eq!(edit.log_number, Some(6));
        assert_eq!(edit.deleted_files.len(), 1);
    }

    #[test]
    fn each_damaged_field_is_named() {
        let cases: &[(&[u8], &str)] = &[
            (&[1, 5, b'a'], "VersionEdit: comparator name"),
            (&[1, 2, 0xff, 0xfe], "VersionEdit: comparator name"),
            (&[2], "VersionEdit: log number"),
            (&[9, 0x80], "VersionEdit: previous log number"),
            (&[3], "VersionEdit: next file number"),
            (&[4, 0xff], "VersionEdit: last sequence number"),
            (&[5, 7, 1, b'k'], "VersionEdit: compaction pointer"),
            (&[5, 1, 0], "VersionEdit: compaction pointer"),
            (&[6, 7, 1], "VersionEdit: deleted file"),
            (&[6, 1], "VersionEdit: deleted file"),
            (&[7, 0, 1, 2, 1, b'a'], "VersionEdit: new-file entry"),
            (
                &[7, 7, 1, 2, 1, b'a', 1, b'b'],
                "VersionEdit: new-file entry",
            ),
            (&[8, 0], "VersionEdit: unknown tag"),
            (&[0x80], "VersionEdit: invalid tag"),
        ];
        for (bytes, expected) in cases {
            let err = VersionEdit::decode(bytes).expect_err("damaged");
            assert_eq!(reason(&err), *expected, "{bytes:?}");
        }
    }

    #[test]
    fn corruption_offset_is_the_failing_fields_tag() {
        let mut bytes = vec![2, 5, 3, 6];
        bytes.extend_from_slice(&[42, 0]);
        match VersionEdit::decode(&bytes).expect_err("unknown tag") {
            Error::Corruption { location, reason } => {
                assert_eq!(location.offset, 4);
                assert_eq!(reason, "VersionEdit: unknown tag");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn out_of_range_level_is_not_wrapped_on_encode() {
        let mut edit = VersionEdit::new();
        edit.delete_file(NUM_LEVELS, 1);
        let err = VersionEdit::decode(&edit.encode()).expect_err("level 7");
        assert_eq!(reason(&err), "VersionEdit: deleted file");
        let mut edit = VersionEdit::new();
        edit.delete_file(NUM_LEVELS - 1, 1);
        assert_eq!(VersionEdit::decode(&edit.encode()).expect("valid"), edit);
    }

    fn arb_key() -> impl Strategy<Value = InternalKey> {
        // Any non-empty bytes: LevelDB does not parse keys in an edit.
        proptest::collection::vec(any::<u8>(), 1..24).prop_map(InternalKey::from_encoded)
    }

    fn arb_file() -> impl Strategy<Value = (usize, FileMetaData)> {
        (
            0..NUM_LEVELS,
            any::<u64>(),
            any::<u64>(),
            arb_key(),
            arb_key(),
        )
            .prop_map(|(level, number, file_size, smallest, largest)| {
                (
                    level,
                    FileMetaData {
                        number,
                        file_size,
                        smallest,
                        largest,
                    },
                )
            })
    }

    prop_compose! {
        fn arb_edit()(
            comparator in proptest::option::of("[ -~]{0,40}"),
            log_number in proptest::option::of(any::<u64>()),
            prev_log_number in proptest::option::of(any::<u64>()),
            next_file_number in proptest::option::of(any::<u64>()),
            last_sequence in proptest::option::of(any::<u64>()),
            compact_pointers in proptest::collection::vec((0..NUM_LEVELS, arb_key()), 0..4),
            deleted_files in proptest::collection::btree_set((0..NUM_LEVELS, any::<u64>()), 0..8),
            new_files in proptest::collection::vec(arb_file(), 0..6),
        ) -> VersionEdit {
            VersionEdit {
                comparator,
                log_number,
                prev_log_number,
                next_file_number,
                last_sequence,
                compact_pointers,
                deleted_files,
                new_files,
            }
        }
    }

    proptest! {
        #[test]
        fn round_trip(edit in arb_edit()) {
            let encoded = edit.encode();
            let decoded = VersionEdit::decode(&encoded).expect("valid");
            prop_assert_eq!(&decoded, &edit);
            prop_assert_eq!(decoded.encode(), encoded);
        }

        #[test]
        fn damaged_edits_never_panic(
            edit in arb_edit(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            keep in proptest::option::of(any::<prop::sample::Index>()),
        ) {
            let mut encoded = edit.encode();
            if !encoded.is_empty() {
                for (at, mask) in flips {
                    let at = at.index(encoded.len());
                    encoded[at] ^= mask;
                }
            }
            if let Some(keep) = keep {
                encoded.truncate(keep.index(encoded.len() + 1));
            }
            if let Ok(decoded) = VersionEdit::decode(&encoded) {
                // Whatever decodes is in range and encodes back to a valid edit.
                prop_assert!(decoded.new_files.iter().all(|(level, _)| *level < NUM_LEVELS));
                prop_assert_eq!(VersionEdit::decode(&decoded.encode()).expect("valid"), decoded);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = VersionEdit::decode(&bytes);
        }
    }
}
