//! The log format's tests: records written by [`LogWriter`] and read back,
//! damaged, truncated and read from an initial offset, after LevelDB's
//! `db/log_test.cc`.

use super::*;
use crate::log_writer::LogWriter;
use proptest::prelude::*;

/// What reading a whole log produced.
#[derive(Debug, Default)]
struct Outcome {
    /// Each record with its `last_record_offset`.
    records: Vec<(u64, Vec<u8>)>,
    dropped: u64,
    reasons: Vec<String>,
}

impl Outcome {
    fn payloads(&self) -> Vec<&[u8]> {
        self.records.iter().map(|(_, r)| r.as_slice()).collect()
    }
}

fn reason_of(err: &Error) -> String {
    match err {
        Error::Corruption { reason, .. } => reason.clone(),
        other => panic!("reporter got a non-corruption error: {other:?}"),
    }
}

fn read_from<R: Read>(src: R, verify_checksums: bool, initial_offset: u64) -> Outcome {
    let mut outcome = Outcome::default();
    let mut drops = Vec::new();
    {
        let reporter = |bytes: u64, err: Error| drops.push((bytes, err));
        let mut reader = LogReader::new(src, reporter, verify_checksums, initial_offset);
        while let Some(record) = reader.read_record().expect("no I/O error") {
            outcome.records.push((reader.last_record_offset(), record));
        }
        assert_eq!(reader.read_record().expect("no I/O error"), None);
    }
    for (bytes, err) in drops {
        outcome.dropped += bytes;
        outcome.reasons.push(reason_of(&err));
    }
    outcome
}

fn read(log: &[u8]) -> Outcome {
    read_from(log, true, 0)
}

/// Writes `records`, returning the log and each record's offset.
fn write(records: &[&[u8]]) -> (Vec<u8>, Vec<u64>) {
    let mut writer = LogWriter::new(Vec::new());
    let mut offsets = Vec::new();
    for record in records {
        offsets.push(record_start(writer.file_len()));
        writer.add_record(record).expect("write to a Vec");
    }
    (writer.into_inner(), offsets)
}

/// Where the next record's header goes when the log is `len` bytes long:
/// past the zero padding when the block has no room for a header.
fn record_start(len: u64) -> u64 {
    let left = BLOCK_SIZE as u64 - len % BLOCK_SIZE as u64;
    if left < HEADER_SIZE as u64 {
        len + left
    } else {
        len
    }
}

/// `n` bytes of `pattern` repeated.
fn big(pattern: &str, n: usize) -> Vec<u8> {
    pattern.bytes().cycle().take(n).collect()
}

/// Recomputes the checksum of the fragment whose header is at `at`.
fn fix_checksum(log: &mut [u8], at: usize, len: usize) {
    let crc = crc::mask(crc::value(&log[at + 6..at + HEADER_SIZE + len]));
    log[at..at + 4].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn empty_log_has_no_records() {
    let outcome = read(&[]);
    assert!(outcome.records.is_empty());
    assert_eq!(outcome.dropped, 0);
}

#[test]
fn small_records_round_trip_with_offsets() {
    let (log, offsets) = write(&[b"foo", b"bar", b"", b"xxxx"]);
    let outcome = read(&log);
    assert_eq!(outcome.payloads(), vec![&b"foo"[..], b"bar", b"", b"xxxx"]);
    let read_offsets: Vec<u64> = outcome.records.iter().map(|(o, _)| *o).collect();
    assert_eq!(read_offsets, offsets);
    assert_eq!(offsets, vec![0, 10, 20, 27]);
}

#[test]
fn many_records_cross_many_blocks() {
    let records: Vec<Vec<u8>> = (0..20_000).map(|i| i.to_string().into_bytes()).collect();
    let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    let (log, _) = write(&refs);
    assert!(log.len() > 5 * BLOCK_SIZE);
    assert_eq!(read(&log).payloads(), refs);
}

#[test]
fn large_records_are_fragmented_and_reassembled() {
    let medium = big("medium", 50_000);
    let large = big("large", 100_000);
    let (log, offsets) = write(&[b"small", &medium, &large]);
    // "medium" starts in block 0 and ends in block 1.
    assert_eq!(log[offsets[1] as usize + 6], RecordType::First as u8);
    assert_eq!(log[BLOCK_SIZE + 6], RecordType::Last as u8);
    // "large" spans blocks 1 to 4: a whole block of Middle in between.
    assert_eq!(log[2 * BLOCK_SIZE + 6], RecordType::Middle as u8);
    let outcome = read(&log);
    assert_eq!(outcome.payloads(), vec![&b"small"[..], &medium, &large]);
    assert_eq!(outcome.dropped, 0);
}

#[test]
fn every_trailer_length_reads_back() {
    // `leftover` bytes remain in block 0 after the first record: with 7
    // the writer emits an empty First fragment there, below 7 it pads.
    for leftover in 0..=HEADER_SIZE + 1 {
        let first = big("foo", BLOCK_SIZE - HEADER_SIZE - leftover);
        let (log, offsets) = write(&[&first, b"", b"bar"]);
        let padded = if leftover < HEADER_SIZE { 0 } else { leftover };
        assert_eq!(offsets[1], (BLOCK_SIZE - padded) as u64);
        let outcome = read(&log);
        assert_eq!(outcome.records[1].0, offsets[1]);
        assert_eq!(
            outcome.payloads(),
            vec![&first[..], b"", b"bar"],
            "{leftover}"
        );
        assert_eq!(outcome.dropped, 0);

        let (log, _) = write(&[&first, b"bar"]);
        let outcome = read(&log);
        assert_eq!(outcome.payloads(), vec![&first[..], b"bar"], "{leftover}");
        assert_eq!(outcome.dropped, 0);

        // The log ends where the trailer would have been.
        let (log, _) = write(&[&first]);
        let outcome = read(&log);
        assert_eq!(outcome.payloads(), vec![&first[..]], "{leftover}");
        assert_eq!(outcome.dropped, 0);
    }
}

#[test]
fn exactly_a_header_left_gets_an_empty_first_fragment() {
    let first = big("foo", BLOCK_SIZE - 2 * HEADER_SIZE);
    let (log, _) = write(&[&first, b"bar"]);
    let at = BLOCK_SIZE - HEADER_SIZE;
    assert_eq!(&log[at + 4..BLOCK_SIZE], &[0, 0, RecordType::First as u8]);
    assert_eq!(log[BLOCK_SIZE + 6], RecordType::Last as u8);
}

#[test]
fn reopened_writer_appends_readable_records() {
    let (mut log, _) = write(&[b"hello"]);
    let len = log.len() as u64;
    let mut writer = LogWriter::with_offset(&mut log, len);
    writer.add_record(b"world").expect("write");
    let outcome = read(&log);
    assert_eq!(outcome.payloads(), vec![&b"hello"[..], b"world"]);
}

#[test]
fn checksum_mismatch_drops_the_rest_of_the_block() {
    let (mut log, _) = write(&[b"foo"]);
    log[0] = log[0].wrapping_add(10);
    let outcome = read(&log);
    assert!(outcome.records.is_empty());
    assert_eq!(outcome.dropped, 10);
    assert_eq!(outcome.reasons, vec!["checksum mismatch"]);
    // Without verification the damaged header is taken as it is.
    assert_eq!(read_from(&log[..], false, 0).payloads(), vec![&b"foo"[..]]);
}

#[test]
fn checksum_mismatch_resyncs_at_the_next_block() {
    let second = big("second", 2 * BLOCK_SIZE);
    let (mut log, _) = write(&[b"first", &second, b"third", b"fourth"]);
    log[HEADER_SIZE + 1] ^= 1;
    let outcome = read(&log);
    // "second" lost its First fragment; its Middle and Last are reported
    // as fragments without a start; the records after it survive.
    assert_eq!(outcome.payloads(), vec![&b"third"[..], b"fourth"]);
    assert_eq!(outcome.reasons[0], "checksum mismatch");
    assert_eq!(outcome.reasons.len(), 3);
    assert!(outcome.reasons[1..]
        .iter()
        .all(|r| r.starts_with("missing start of fragmented record")));
}

#[test]
fn unknown_record_type_is_reported() {
    let (mut log, _) = write(&[b"foo"]);
    log[6] = 100;
    fix_checksum(&mut log, 0, 3);
    let outcome = read(&log);
    assert!(outcome.records.is_empty());
    assert_eq!(outcome.dropped, 3);
    assert_eq!(outcome.reasons, vec!["unknown record type 100"]);
}

#[test]
fn zero_type_with_payload_is_an_unknown_type() {
    let (mut log, _) = write(&[b"foo", b"bar"]);
    log[6] = RecordType::Zero as u8;
    fix_checksum(&mut log, 0, 3);
    let outcome = read(&log);
    assert_eq!(outcome.payloads(), vec![&b"bar"[..]]);
    assert_eq!(outcome.reasons, vec!["unknown record type 0"]);
}

#[test]
fn preallocated_zeros_are_skipped_silently() {
    let (mut log, _) = write(&[b"foo"]);
    log.resize(BLOCK_SIZE, 0);
    let mut writer = LogWriter::with_offset(&mut log, BLOCK_SIZE as u64);
    writer.add_record(b"bar").expect("write");
    let outcome = read(&log);
    assert_eq!(outcome.payloads(), vec![&b"foo"[..], b"bar"]);
    assert_eq!(outcome.dropped, 0);
}

#[test]
fn truncated_trailing_record_is_dropped_silently() {
    let (log, _) = write(&[b"before", b"foo"]);
    // Cut into the payload, at the end of the header, and into the header.
    for cut in [1, 3, 4, 8, 9] {
        let outcome = read(&log[..log.len() - cut]);
        assert_eq!(outcome.payloads(), vec![&b"before"[..]], "cut {cut}");
        assert_eq!(outcome.dropped, 0, "cut {cut}");
    }
}

/// A flipped bit that makes a length run past the end of the file is not
/// a torn write when the record's bytes are all there: reported (LevelDB
/// drops it silently, with every later record of the block), and dropped.
#[test]
fn a_length_damaged_past_the_end_of_the_file_is_reported() {
    let (log, offsets) = write(&[b"first", b"second record", b"third"]);
    for (record, &start) in offsets.iter().enumerate() {
        let at = start as usize + 4;
        for bit in 0..16 {
            let mut damaged = log.clone();
            damaged[at + bit / 8] ^= 1 << (bit % 8);
            let claimed = usize::from(u16::from_le_bytes([damaged[at], damaged[at + 1]]));
            if at + 3 + claimed <= log.len() {
                continue; // shorter, or still inside the file: a checksum mismatch
            }
            let outcome = read(&damaged);
            let context = format!("record {record}, length bit {bit}");
            assert_eq!(outcome.records.len(), record, "{context}");
            assert_eq!(outcome.reasons, vec!["bad record length"], "{context}");
            // Without checksums a torn write cannot be told apart: silent,
            // unless the length is impossible (past the block's end).
            let unchecked = read_from(&damaged[..], false, 0);
            let impossible = start as usize % BLOCK_SIZE + HEADER_SIZE + claimed > BLOCK_SIZE;
            assert_eq!(unchecked.dropped > 0, impossible, "{context}");
        }
    }
    // A torn last record stays silent whatever its length says.
    let (log, _) = write(&[b"kept", &big("torn", 1000)]);
    let outcome = read(&log[..log.len() - 500]);
    assert_eq!(outcome.payloads(), vec![&b"kept"[..]]);
    assert!(outcome.reasons.is_empty(), "{:?}", outcome.reasons);
}

#[test]
fn bad_length_inside_a_full_block_is_reported() {
    let (mut log, _) = write(&[&big("bar", BLOCK_SIZE - HEADER_SIZE), b"foo"]);
    log[4] = log[4].wrapping_add(1);
    let outcome = read(&log);
    assert_eq!(outcome.payloads(), vec![&b"foo"[..]]);
    assert_eq!(outcome.dropped, BLOCK_SIZE as u64);
    assert_eq!(outcome.reasons, vec!["bad record length"]);
}

#[test]
fn unexpected_middle_and_last_are_reported() {
    for (record_type, reason) in [
        (RecordType::Middle, "missing start of fragmented record(1)"),
        (RecordType::Last, "missing start of fragmented record(2)"),
    ] {
        let (mut log, _) = write(&[b"foo"]);
        log[6] = record_type as u8;
        fix_checksum(&mut log, 0, 3);
        let outcome = read(&log);
        assert!(outcome.records.is_empty());
        assert_eq!(outcome.dropped, 3);
        assert_eq!(outcome.reasons, vec![reason]);
    }
}

#[test]
fn first_without_end_is_reported_when_a_new_record_starts() {
    let large = big("bar", 100_000);
    for (second, reason) in [
        (&b"bar"[..], "partial record without end(1)"),
        (&large[..], "partial record without end(2)"),
    ] {
        let (mut log, _) = write(&[b"foo", second]);
        log[6] = RecordType::First as u8;
        fix_checksum(&mut log, 0, 3);
        let outcome = read(&log);
        assert_eq!(outcome.payloads(), vec![second]);
        assert_eq!(outcome.dropped, 3);
        assert_eq!(outcome.reasons, vec![reason]);
    }
}

#[test]
fn empty_first_before_a_new_record_is_not_reported() {
    // Old LevelDB writers could leave an empty First at a block's end.
    let (mut log, _) = write(&[b"", b"bar"]);
    log[6] = RecordType::First as u8;
    fix_checksum(&mut log, 0, 0);
    let outcome = read(&log);
    assert_eq!(outcome.payloads(), vec![&b"bar"[..]]);
    assert_eq!(outcome.dropped, 0);
}

#[test]
fn missing_or_partial_last_fragment_is_ignored() {
    let (log, _) = write(&[b"ok", &big("bar", BLOCK_SIZE)]);
    // The Last fragment is block 1's only content: cut all of it, or
    // only its final byte.
    assert_eq!(log.len(), BLOCK_SIZE + HEADER_SIZE + 16);
    for keep in [BLOCK_SIZE, log.len() - 1] {
        let outcome = read(&log[..keep]);
        assert_eq!(outcome.payloads(), vec![&b"ok"[..]]);
        assert_eq!(outcome.dropped, 0);
    }
}

#[test]
fn damage_in_a_middle_block_does_not_join_records() {
    let (mut log, _) = write(&[&big("foo", BLOCK_SIZE), &big("bar", BLOCK_SIZE), b"correct"]);
    // Block 1 holds the end of "foo" and the start of "bar".
    log[BLOCK_SIZE..2 * BLOCK_SIZE].fill(b'x');
    let outcome = read(&log);
    assert_eq!(outcome.payloads(), vec![&b"correct"[..]]);
    let block = BLOCK_SIZE as u64;
    assert!(outcome.dropped >= 2 * block && outcome.dropped <= 2 * block + 100);
}

#[test]
fn initial_offset_inside_a_record_skips_its_remaining_fragments() {
    let (log, _) = write(&[&big("foo", 3 * BLOCK_SIZE), b"correct"]);
    let outcome = read_from(&log[..], true, BLOCK_SIZE as u64);
    assert_eq!(outcome.payloads(), vec![&b"correct"[..]]);
    assert_eq!(outcome.dropped, 0);
}

/// Sizes chosen so records start and end near block boundaries.
fn offset_test_log() -> (Vec<u8>, Vec<Vec<u8>>, Vec<u64>) {
    let sizes = [
        10_000,
        10_000,
        2 * BLOCK_SIZE - 1_000,
        1,
        13_716,
        BLOCK_SIZE - HEADER_SIZE,
        0,
        5,
    ];
    let records: Vec<Vec<u8>> = sizes
        .iter()
        .zip(b'a'..)
        .map(|(&n, fill)| vec![fill; n])
        .collect();
    let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    let (log, offsets) = write(&refs);
    (log, records, offsets)
}

fn check_initial_offset(log: &[u8], records: &[Vec<u8>], offsets: &[u64], initial: u64) {
    let outcome = read_from(log, true, initial);
    let first = offsets
        .iter()
        .position(|&o| o >= initial)
        .unwrap_or(offsets.len());
    let expected: Vec<(u64, Vec<u8>)> = offsets[first..]
        .iter()
        .copied()
        .zip(records[first..].iter().cloned())
        .collect();
    assert_eq!(
        outcome.records.len(),
        expected.len(),
        "initial offset {initial}"
    );
    assert!(outcome.records == expected, "initial offset {initial}");
}

#[test]
fn initial_offsets_start_at_the_first_record_at_or_after_them() {
    let (log, records, offsets) = offset_test_log();
    let block = BLOCK_SIZE as u64;
    let mut initials = vec![
        0,
        1,
        block - 7,
        block - 6,
        block - 5,
        block - 4,
        block,
        block + 1,
        2 * block + 1,
        3 * block - 3,
        3 * block,
        log.len() as u64,
        log.len() as u64 + 1,
        log.len() as u64 + 10 * block,
    ];
    for &o in &offsets {
        initials.extend([o.saturating_sub(1), o, o + 1]);
    }
    for initial in initials {
        check_initial_offset(&log, &records, &offsets, initial);
    }
}

/// A source that returns at most `chunk` bytes per read, or fails after
/// `fail_after` bytes.
#[derive(Debug)]
struct Choppy<'a> {
    data: &'a [u8],
    chunk: usize,
    fail_after: Option<usize>,
    pos: usize,
}

impl Read for Choppy<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.fail_after.is_some_and(|limit| self.pos >= limit) {
            return Err(io::Error::other("disk on fire"));
        }
        let n = buf.len().min(self.chunk).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[test]
fn read_error_is_returned_and_ends_the_log() {
    let (log, _) = write(&[b"foo", &big("bar", 2 * BLOCK_SIZE)]);
    let src = Choppy {
        data: &log,
        chunk: 1000,
        fail_after: Some(BLOCK_SIZE + 10),
        pos: 0,
    };
    let mut reader = LogReader::new(src, IgnoreCorruption, true, 0);
    assert_eq!(
        reader.read_record().expect("first block").as_deref(),
        Some(&b"foo"[..])
    );
    let err = reader.read_record().expect_err("second block fails");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert_eq!(reader.read_record().expect("at end"), None);
}

/// Found by `fuzz/fuzz_targets/log_reader.rs`: an initial offset in the last
/// 6 bytes of the last block below 2^64 overflowed when rounding up to the
/// next block.
#[test]
fn initial_offset_in_the_last_block_below_u64_max_does_not_overflow() {
    let (log, _) = write(&[b"foo", b"bar"]);
    for initial in [u64::MAX, u64::MAX - 5, u64::MAX - BLOCK_SIZE as u64 + 1] {
        let outcome = read_from(&log[..], true, initial);
        assert!(outcome.records.is_empty(), "{initial}: {outcome:?}");
        assert_eq!(outcome.dropped, 0, "{initial}");
    }
    let outcome = read_from(&[][..], false, u64::MAX);
    assert!(outcome.records.is_empty());
}

fn record_content(index: usize, len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect()
}

fn record_size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..20,
        4 => 0usize..3 * BLOCK_SIZE,
        2 => (BLOCK_SIZE - 2 * HEADER_SIZE - 2)..(BLOCK_SIZE + 2),
        1 => Just(1 << 20),
    ]
}

/// True when `found` appears in `written` in order (not necessarily
/// adjacent).
fn is_subsequence(found: &[&[u8]], written: &[Vec<u8>]) -> bool {
    let mut rest = written.iter();
    found
        .iter()
        .all(|record| rest.any(|candidate| candidate.as_slice() == *record))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_records_round_trip(
        sizes in proptest::collection::vec(record_size(), 0..12),
        seed in any::<u64>(),
        chunk in 1usize..(2 * BLOCK_SIZE),
        reopen_at in any::<prop::sample::Index>(),
    ) {
        let records: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| record_content(i, n, seed))
            .collect();
        // Write in two sessions, the second reopening the log.
        let split = reopen_at.index(records.len() + 1);
        let mut writer = LogWriter::new(Vec::new());
        let mut offsets = Vec::new();
        for record in &records[..split] {
            offsets.push(record_start(writer.file_len()));
            writer.add_record(record).expect("write");
        }
        let mut log = writer.into_inner();
        let len = log.len() as u64;
        let mut writer = LogWriter::with_offset(&mut log, len);
        for record in &records[split..] {
            offsets.push(record_start(writer.file_len()));
            writer.add_record(record).expect("write");
        }

        let src = Choppy { data: &log, chunk, fail_after: None, pos: 0 };
        let outcome = read_from(src, true, 0);
        prop_assert_eq!(outcome.dropped, 0);
        let expected: Vec<(u64, Vec<u8>)> = offsets.into_iter().zip(records).collect();
        prop_assert!(outcome.records == expected);
    }

    #[test]
    fn random_initial_offsets(initial in 0u64..(4 * BLOCK_SIZE as u64)) {
        let (log, records, offsets) = offset_test_log();
        check_initial_offset(&log, &records, &offsets, initial);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn damage_never_yields_an_unwritten_record(
        sizes in proptest::collection::vec(
            prop_oneof![3 => 0usize..64, 1 => 0usize..2 * BLOCK_SIZE], 1..16),
        seed in any::<u64>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 0u8..8), 0..6),
        zeroed in proptest::option::of((any::<prop::sample::Index>(), 1usize..64)),
        keep in proptest::option::of(any::<prop::sample::Index>()),
        initial in prop_oneof![3 => Just(0u64), 1 => 0u64..(3 * BLOCK_SIZE as u64)],
    ) {
        let records: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| record_content(i, n, seed))
            .collect();
        let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
        let (mut log, _) = write(&refs);
        for (at, bit) in flips {
            let at = at.index(log.len());
            log[at] ^= 1 << bit;
        }
        if let Some((at, len)) = zeroed {
            let at = at.index(log.len());
            let end = (at + len).min(log.len());
            log[at..end].fill(0);
        }
        if let Some(keep) = keep {
            log.truncate(keep.index(log.len() + 1));
        }

        let outcome = read_from(&log[..], true, initial);
        prop_assert!(is_subsequence(&outcome.payloads(), &records));
        // Without checksums anything may come back, but nothing panics.
        read_from(&log[..], false, initial);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..BLOCK_SIZE + 100),
        verify_checksums in any::<bool>(),
        initial in 0u64..(4 * BLOCK_SIZE as u64),
    ) {
        read_from(&bytes[..], verify_checksums, initial);
    }
}

/// Writers that each copy their own record (`write_record_at`) can leave,
/// when a crash comes, a record claimed and not copied (or copied but for
/// its first header) before records copied whole. Readers skip the zero
/// header, the rest of its block and the unfinished record's later
/// fragments, without a report, and read on.
#[test]
fn a_record_claimed_and_not_copied_is_skipped_unreported() {
    use crate::log_writer::{record_end, write_record_at};
    let acked = vec![1u8; 100];
    let unfinished = vec![2u8; 50_000]; // ends in the next block
    let skipped = vec![3u8; 200];
    let crossing = vec![4u8; 40_000]; // from that block into the one after
    let later = vec![5u8; 300];
    // Not copied at all, the next block starts with a zero header too, and
    // the records there are skipped, the crossing one's last fragment
    // with them. Copied but for its first header, its last fragment opens
    // the next block and is skipped alone.
    for (copied_all_but_first_header, expected) in [(false, vec![1, 5]), (true, vec![1, 3, 4, 5])] {
        let mut log = vec![0u8; 8 * BLOCK_SIZE];
        let mut end = 0u64;
        let mut places = Vec::new();
        for record in [&acked, &unfinished, &skipped, &crossing, &later] {
            let start = end;
            end = record_end(start, record.len());
            places.push((start, end));
            let range = start as usize..end as usize;
            if std::ptr::eq(record, &unfinished) {
                if copied_all_but_first_header {
                    write_record_at(&mut log[range], start, record);
                    log[start as usize..start as usize + HEADER_SIZE].fill(0);
                }
                continue;
            }
            write_record_at(&mut log[range], start, record);
        }
        assert_eq!(places[2].0 / BLOCK_SIZE as u64, 1);
        assert_eq!(places[3].1 / BLOCK_SIZE as u64, 2);
        let outcome = read(&log);
        let read_back: Vec<u8> = outcome.payloads().iter().map(|r| r[0]).collect();
        assert_eq!(read_back, expected);
        assert!(outcome
            .payloads()
            .iter()
            .all(|r| [100, 200, 40_000, 300].contains(&r.len())));
        assert_eq!(outcome.dropped, 0, "{:?}", outcome.reasons);
    }
}
