//! Pack: kept entries into output tables. A cheap sequential scan over entry
//! sizes fixes every block and file boundary with the same rules the table
//! builder applies one entry at a time; blocks are then encoded, compressed
//! and checksummed in parallel, their keys hashed for the Bloom filter in
//! parallel, and each file is laid out by the same `TableAssembler` the
//! table builder uses. Every block is compressed in parallel; the file's
//! [`CompressionGate`] then decides block by block, in order, as the table
//! builder's does, and a block it passes over that compressed is encoded
//! again as is (rare: only where a file's data turns compressible).

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use shale_format::block_builder::BlockBuilder;
use shale_format::bloom::{bloom_hash, BloomFilterPolicy};
use shale_format::filter_block::{assemble_filters, plan_filters};
use shale_format::format::{
    block_trailer, maybe_compress, CompressionGate, CompressionType, BLOCK_TRAILER_LEN,
};
use shale_format::internal_key::extract_user_key;
use shale_format::options::TableOptions;
use shale_format::table_assembler::TableAssembler;
use shale_format::Result;

use super::Buffers;
use crate::job::{JobIo, OutputSink, OutputTable, PhaseStats};
use crate::pool::Pool;
use crate::steps::plan::PlannedFile;
use crate::steps::unpack::ParsedBlock;
use crate::syncer::Syncer;

use super::merge::Kept;

#[inline]
fn key(blocks: &[Arc<ParsedBlock>], k: Kept) -> &[u8] {
    blocks[k.0 as usize].key(k.1 as usize)
}

#[inline]
fn value(blocks: &[Arc<ParsedBlock>], k: Kept) -> &[u8] {
    blocks[k.0 as usize].value(k.1 as usize)
}

/// A data block ready to be written.
#[derive(Debug)]
struct EncodedBlock {
    contents: Vec<u8>,
    /// How `contents` is stored.
    compression: CompressionType,
    /// Compression type and checksum, computed with the encoding.
    trailer: [u8; BLOCK_TRAILER_LEN],
    first_key: Vec<u8>,
    last_key: Vec<u8>,
    entries: u64,
    /// Bloom hashes of the user keys, when the table has a filter.
    hashes: Vec<u32>,
}

/// A block builder and a compression buffer per thread, reused block after
/// block (the builder for one restart interval at a time).
struct Encoder {
    restart_interval: usize,
    builder: BlockBuilder,
    compressed: Vec<u8>,
}

thread_local! {
    static ENCODER: std::cell::RefCell<Option<Encoder>> = const { std::cell::RefCell::new(None) };
}

fn encode_block(
    blocks: &[Arc<ParsedBlock>],
    kept: &[Kept],
    range: Range<usize>,
    options: &TableOptions,
    compression: CompressionType,
    bloom: bool,
    pool: Option<&Pool<Vec<u8>>>,
) -> EncodedBlock {
    let mut hashes = Vec::with_capacity(if bloom { range.len() } else { 0 });
    let mut contents = pool.map(Pool::take).unwrap_or_default();
    contents.clear();
    let compression = ENCODER.with(|encoder| {
        let mut encoder = encoder.borrow_mut();
        let restart_interval = options.block_restart_interval;
        let encoder = match &mut *encoder {
            Some(e) if e.restart_interval == restart_interval => e,
            slot => slot.insert(Encoder {
                restart_interval,
                // A block ends at the first entry that takes it to
                // `block_size`.
                builder: BlockBuilder::with_capacity(restart_interval, options.block_size * 5 / 4),
                compressed: Vec::new(),
            }),
        };
        encoder.builder.reset();
        for &k in &kept[range.clone()] {
            let key = key(blocks, k);
            encoder.builder.add(key, value(blocks, k));
            if bloom {
                hashes.push(bloom_hash(extract_user_key(key)));
            }
        }
        let raw = encoder.builder.finish();
        let (stored, compression) = maybe_compress(raw, compression, &mut encoder.compressed);
        contents.extend_from_slice(stored);
        compression
    });
    EncodedBlock {
        trailer: block_trailer(&contents, compression),
        contents,
        compression,
        first_key: key(blocks, kept[range.start]).to_vec(),
        last_key: key(blocks, kept[range.end - 1]).to_vec(),
        entries: range.len() as u64,
        hashes,
    }
}

/// An output file being written across slices.
pub struct OpenFile {
    number: u64,
    sink: Box<dyn OutputSink>,
    /// The file is assembled in memory and written when finished.
    assembler: TableAssembler<Vec<u8>>,
    smallest: Vec<u8>,
    largest: Vec<u8>,
    entries: u64,
    block_ranges: Vec<(u64, u64)>,
    block_hashes: Vec<Vec<u32>>,
    /// Which of the file's data blocks stay compressed.
    gate: CompressionGate,
}

/// Encodes the planned blocks in parallel and writes them, finishing files
/// as planned. `open` is the file carried between slices.
#[allow(
    clippy::too_many_arguments,
    reason = "the phases' shared state, passed explicitly"
)]
pub fn write_planned(
    pool: &rayon::ThreadPool,
    blocks: &[Arc<ParsedBlock>],
    kept: &[Kept],
    files: Vec<PlannedFile>,
    open: &mut Option<OpenFile>,
    outputs: &mut Vec<OutputTable>,
    options: &TableOptions,
    bloom: Option<&BloomFilterPolicy>,
    file_capacity: usize,
    io: &dyn JobIo,
    buffers: &Buffers,
    syncer: &Syncer<'_>,
    stats: &mut PhaseStats,
) -> Result<()> {
    // All of this is pack time; waiting for the I/O thread is accounted by
    // the syncer.
    let started = Instant::now();
    let ranges: Vec<Range<usize>> = files
        .iter()
        .flat_map(|f| f.blocks.iter().cloned())
        .collect();
    let mut encoded: Vec<EncodedBlock> = pool.install(|| {
        ranges
            .par_iter()
            .map(|range| {
                encode_block(
                    blocks,
                    kept,
                    range.clone(),
                    options,
                    options.compression,
                    bloom.is_some(),
                    Some(&buffers.encoded),
                )
            })
            .collect()
    });

    let mut encoded = encoded.drain(..).zip(ranges);
    for planned in files {
        for _ in 0..planned.blocks.len() {
            let Some((mut block, range)) = encoded.next() else {
                break;
            };
            let file = match open {
                Some(file) => file,
                None => {
                    let (number, sink) = io.create_output()?;
                    open.insert(OpenFile {
                        number,
                        sink,
                        assembler: TableAssembler::new(
                            options.clone(),
                            syncer.file_buffer(file_capacity),
                        ),
                        smallest: block.first_key.clone(),
                        largest: Vec::new(),
                        entries: 0,
                        block_ranges: Vec::new(),
                        block_hashes: Vec::new(),
                        gate: CompressionGate::default(),
                    })
                }
            };
            let tried = file.gate.next_block(options.compression);
            if tried == CompressionType::None && block.compression != CompressionType::None {
                // Passed over by the gate, yet compressed: stored as is.
                let raw = encode_block(
                    blocks,
                    kept,
                    range,
                    options,
                    CompressionType::None,
                    bloom.is_some(),
                    Some(&buffers.encoded),
                );
                buffers
                    .encoded
                    .give(std::mem::replace(&mut block, raw).contents);
            }
            file.gate.record(tried, block.compression);
            let handle = file.assembler.write_data_block_with_trailer(
                &block.first_key,
                &block.last_key,
                &block.contents,
                &block.trailer,
            )?;
            file.block_ranges.push((
                handle.offset,
                handle.offset + handle.size + BLOCK_TRAILER_LEN as u64,
            ));
            file.block_hashes.push(block.hashes);
            file.largest = block.last_key;
            file.entries += block.entries;
            buffers.encoded.give(block.contents);
        }
        if planned.finish {
            if let Some(file) = open.take() {
                outputs.push(finish_file(pool, file, bloom, syncer, stats)?);
            }
        }
    }
    stats.pack_secs += started.elapsed().as_secs_f64();
    Ok(())
}

/// Builds the filters (in parallel, one per filter range), writes the
/// trailing blocks and syncs the file.
fn finish_file(
    pool: &rayon::ThreadPool,
    file: OpenFile,
    bloom: Option<&BloomFilterPolicy>,
    syncer: &Syncer<'_>,
    stats: &mut PhaseStats,
) -> Result<OutputTable> {
    let filter = bloom.map(|policy| {
        let plan = plan_filters(&file.block_ranges);
        let filters: Vec<Vec<u8>> = pool.install(|| {
            plan.into_par_iter()
                .map(|range| {
                    let hashes: Vec<u32> =
                        file.block_hashes[range].iter().flatten().copied().collect();
                    let mut filter = Vec::new();
                    if !hashes.is_empty() {
                        policy.create_filter_from_hashes(&hashes, &mut filter);
                    }
                    filter
                })
                .collect()
        });
        assemble_filters(&filters)
    });
    let (bytes, file_size) = file.assembler.finish_with_filter_block(filter)?;
    syncer.submit(file.sink, bytes)?;
    stats.bytes_written += file_size;
    stats.entries_out += file.entries;
    Ok(OutputTable {
        number: file.number,
        file_size,
        smallest: file.smallest,
        largest: file.largest,
        entries: file.entries,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::job::CompactionJob;
    use crate::steps::plan::tests::{assert_same_plan, job, next};
    use crate::steps::plan::{plan_boundaries_from_sizes, EntrySize, ScanState};
    use shale_format::block_builder::shared_prefix_len;

    use shale_format::comparator::compare_internal_keys;
    use shale_format::internal_key::{InternalKey, ValueType};

    /// Where blocks and files end, from the kept entries' keys: the executor
    /// computes the sizes inside its fused merge; this key-based form is what
    /// the tests check the fused sizes and the integer scan against. `kept`
    /// lists the entries to write in order;
    /// `stops[j]` is true when the file must end before kept entry `j` (a
    /// grandparent cut seen since the previous kept entry). Returns the planned
    /// files and the range of kept entries left in an unfinished block (carried
    /// to the next slice unless `last`).
    pub(crate) fn plan_boundaries(
        blocks: &[Arc<ParsedBlock>],
        kept: &[Kept],
        stops: &[bool],
        state: &mut ScanState,
        job: &CompactionJob,
        last: bool,
    ) -> (Vec<PlannedFile>, Range<usize>) {
        // Sizes and shared prefixes with the previous kept entry, in parallel;
        // then the one sequential scan over integers.
        let sizes: Vec<EntrySize> = (0..kept.len())
            .into_par_iter()
            .map(|j| {
                let k = key(blocks, kept[j]);
                EntrySize {
                    key_len: k.len() as u32,
                    value_len: value(blocks, kept[j]).len() as u32,
                    shared: if j == 0 {
                        0
                    } else {
                        shared_prefix_len(key(blocks, kept[j - 1]), k) as u32
                    },
                }
            })
            .collect();
        plan_boundaries_from_sizes(&sizes, stops, state, job, last)
    }

    #[test]
    fn sizes_plan_equals_the_key_plan() {
        let mut state = 99;
        for _ in 0..300 {
            let job = job(&mut state);
            let n = (next(&mut state) % 300) as usize;
            let mut keys: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    InternalKey::new(
                        format!("k{:04}", next(&mut state) % 200).as_bytes(),
                        i as u64 + 1,
                        ValueType::Value,
                    )
                    .into_encoded()
                })
                .collect();
            keys.sort_by(|a, b| compare_internal_keys(a, b));
            let entries: Vec<(Vec<u8>, Vec<u8>)> = keys
                .iter()
                .map(|k| (k.clone(), vec![7; (next(&mut state) % 200) as usize]))
                .collect();
            let blocks = vec![Arc::new(ParsedBlock::from_entries(&entries))];
            let kept: Vec<(u32, u32)> = (0..n as u32).map(|e| (0, e)).collect();
            let stops: Vec<bool> = (0..n).map(|_| next(&mut state) % 17 == 0).collect();
            let sizes: Vec<EntrySize> = (0..n)
                .map(|j| EntrySize {
                    key_len: entries[j].0.len() as u32,
                    value_len: entries[j].1.len() as u32,
                    shared: if j == 0 {
                        0
                    } else {
                        shared_prefix_len(&entries[j - 1].0, &entries[j].0) as u32
                    },
                })
                .collect();
            for last in [false, true] {
                let mut a = ScanState {
                    file_open: false,
                    raw_data_bytes: 0,
                };
                let mut b = ScanState {
                    file_open: false,
                    raw_data_bytes: 0,
                };
                let plan_a = plan_boundaries(&blocks, &kept, &stops, &mut a, &job, last);
                let plan_b = plan_boundaries_from_sizes(&sizes, &stops, &mut b, &job, last);
                assert_same_plan((&plan_a, &a), (&plan_b, &b));
            }
        }
    }
}
