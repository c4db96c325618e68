//! Fuzzes `Table::open`, `TableIter`, `Table::get` and the other readers.
//!
//! Input: a flags byte, a probe key (length byte + bytes), then either a raw
//! table file (flags bit 0 set) or a recipe for a well-formed table (block
//! size, restart interval, compression, up to 3 byte flips, entries) built
//! with `TableBuilder` and then damaged by the flips. The other flag bits
//! pick checksum verification (for the table and per read), bytewise or
//! internal keys, a Bloom filter, a block cache and whether reads fill it. An undamaged built table must read back exactly; anything
//! else must only not panic, hang or overrun.
#![no_main]

mod common;

use std::sync::Arc;

use common::{comparator, derive_entries, flip, read_flips, walk, Input, MapCache};
use libfuzzer_sys::fuzz_target;
use shale_format::bloom::{BloomFilterPolicy, FilterPolicy, InternalFilterPolicy};
use shale_format::format::CompressionType;
use shale_format::iterator::KvIterator;
use shale_format::options::TableOptions;
use shale_format::table::{BlockCache, BlockReadOptions, ReadTableOptions, Table};
use shale_format::table_builder::TableBuilder;

/// Entries a walk may visit. Damaged index entries can point at the same
/// data block over and over, so a table may legitimately yield more entries
/// than it holds; the cap only keeps one run short.
const MAX_STEPS: usize = 50_000;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let raw = flags & 1 != 0;
    let verify_checksums = flags & 2 != 0;
    let internal = flags & 4 != 0;
    let with_filter = flags & 8 != 0;
    let with_cache = flags & 16 != 0;
    let read = BlockReadOptions {
        verify_checksums: flags & 32 != 0,
        fill_cache: flags & 64 != 0,
    };
    let probe_len = usize::from(input.u8() % 32);
    let probe = input.bytes(probe_len).to_vec();

    let cmp = comparator(internal);
    let filter_policy: Option<Arc<dyn FilterPolicy>> = with_filter.then(|| {
        let bloom = BloomFilterPolicy::new(10);
        if internal {
            Arc::new(InternalFilterPolicy::new(bloom)) as Arc<dyn FilterPolicy>
        } else {
            Arc::new(bloom) as Arc<dyn FilterPolicy>
        }
    });

    let (file, expected) = if raw {
        (input.rest().to_vec(), None)
    } else {
        let block_size = 1usize << (input.u8() % 8 + 6);
        let restart_interval = usize::from(input.u8() % 16) + 1;
        let compression = if input.u8() & 1 == 0 {
            CompressionType::None
        } else {
            CompressionType::Snappy
        };
        let flips = read_flips(&mut input, 3);
        let entries = derive_entries(&mut input, internal, 256 * 1024);
        let options = TableOptions {
            comparator: cmp.clone(),
            block_size,
            block_restart_interval: restart_interval,
            compression,
            filter_policy: filter_policy.clone(),
        };
        let mut builder = TableBuilder::new(options, Vec::new());
        for (k, v) in &entries {
            builder.add(k, v).expect("sorted, distinct entries");
        }
        let (mut file, size) = builder.finish().expect("finish into a Vec");
        assert_eq!(size, file.len() as u64);
        let damaged = flip(&mut file, &flips);
        (file, (!damaged).then_some(entries))
    };

    let size = file.len() as u64;
    let cache = with_cache.then(|| (Arc::new(MapCache::default()) as Arc<dyn BlockCache>, 7));
    let options = ReadTableOptions {
        comparator: cmp.clone(),
        filter_policy,
        verify_checksums,
        block_cache: cache,
    };
    let table = match Table::open(Arc::new(file), size, "fuzz.ldb", options) {
        Ok(table) => table,
        Err(err) => {
            assert!(expected.is_none(), "clean table rejected: {err}");
            return;
        }
    };
    let _ = (table.name(), table.file_size(), format!("{table:?}"));

    let mut iter = table.iter_with(read);
    let walked = walk(&mut iter, MAX_STEPS, &probe, &*cmp, expected.as_deref());

    // Point lookups: the probe and some keys the walk saw.
    let mut keys = vec![probe.clone()];
    let stride = walked.forward.len() / 16 + 1;
    keys.extend(
        walked
            .forward
            .iter()
            .step_by(stride)
            .map(|(k, _)| k.clone()),
    );
    for key in &keys {
        let found = table.get_with(key, read);
        let _ = table.approximate_offset_of(key);
        if let Some(expected) = &expected {
            let found = found.expect("clean table: get failed");
            let at = expected.partition_point(|(k, _)| cmp.compare(k, key).is_lt());
            match expected.get(at) {
                // The key itself is present: the filter must not hide it.
                Some(entry) if cmp.compare(&entry.0, key).is_eq() => {
                    assert_eq!(found.as_ref(), Some(entry), "clean table: get");
                }
                // Otherwise get may stop early (filter, or the key falls in
                // the gap after a block), but never returns something else.
                want => {
                    if let Some(found) = &found {
                        assert_eq!(Some(found), want, "clean table: get of absent key");
                    }
                }
            }
        }
    }

    // Every block the index names, read and walked on its own.
    if let Ok(handles) = table.block_handles() {
        for handle in handles.into_iter().take(64) {
            if let Ok(block) = table.read_data_block(handle, read) {
                let mut block_iter = block.iter(cmp.clone());
                block_iter.seek_to_first();
                let mut steps = 0;
                while block_iter.valid() && steps <= block.size() {
                    block_iter.next();
                    steps += 1;
                }
                assert!(!block_iter.valid(), "block walk did not end");
                let _ = block_iter.status();
            } else {
                assert!(expected.is_none(), "clean table: data block unreadable");
            }
        }
    } else {
        assert!(expected.is_none(), "clean table: index unreadable");
    }
});
