//! Reading: point lookups through the memtables and the levels, the
//! merged iterator a `DbIterator` walks, seek charging (the seek
//! compaction's trigger) and approximate sizes.

use std::sync::Arc;

use shale_format::concat_iterator::ConcatIterator;
use shale_format::internal_key::{
    InternalKey, ParsedInternalKey, SequenceNumber, ValueType, MAX_SEQUENCE_NUMBER,
};
use shale_format::iterator::KvIterator;
use shale_format::merging_iterator::merging_iterator;
use shale_format::table::BlockReadOptions;
use shale_format::version_edit::NUM_LEVELS;
use shale_format::{Error, Result};

use super::inner::DbInner;
use crate::db_iter::DbIterator;
use crate::memtable::{MemGet, MemTable};
use crate::options::ReadOptions;
use crate::snapshot::Snapshot;
use crate::version::{FileMeta, Version};

/// The block-level part of read options.
fn block_read_options(options: &ReadOptions) -> BlockReadOptions {
    BlockReadOptions {
        verify_checksums: options.verify_checksums,
        fill_cache: options.fill_cache,
    }
}

/// What a read works on, taken under the state lock at once: the
/// memtables, the current version (pinned) and the sequence it reads at.
struct ReadView {
    mem: Arc<MemTable>,
    imm: Option<Arc<MemTable>>,
    version: Arc<Version>,
    sequence: SequenceNumber,
}

impl DbInner {
    /// The memtables, version and sequence a read with `options` sees: the
    /// snapshot's sequence, or the latest.
    fn read_view(&self, options: &ReadOptions) -> ReadView {
        let state = self.lock_state();
        ReadView {
            mem: state.mem.clone(),
            imm: state.imm.clone(),
            version: state.current.clone(),
            sequence: options
                .snapshot
                .as_ref()
                .map_or_else(|| self.visible_sequence(), Snapshot::sequence),
        }
    }

    pub(super) fn get(&self, options: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.read_mark.note();
        let view = self.read_view(options);
        for table in std::iter::once(&view.mem).chain(view.imm.as_ref()) {
            match table.get(key, view.sequence) {
                Some(MemGet::Value(value)) => return Ok(Some(value)),
                Some(MemGet::Deleted) => return Ok(None),
                None => {}
            }
        }
        self.version_get(&view.version, options, key, view.sequence)
    }

    /// Looks `user_key` up in the tables of `version`: L0 newest first, then
    /// one candidate file per deeper level.
    fn version_get(
        &self,
        version: &Version,
        options: &ReadOptions,
        user_key: &[u8],
        sequence: SequenceNumber,
    ) -> Result<Option<Vec<u8>>> {
        let (mut stack, mut heap) = ([0u8; crate::memtable::STACK_KEY_LEN], Vec::new());
        let lookup = crate::memtable::lookup_key(user_key, sequence, &mut stack, &mut heap);
        let read = block_read_options(options);
        let order = &self.order;
        // The first file searched, charged a seek when the search goes on
        // to a second file (LevelDB's `GetStats`).
        let mut first_searched: Option<(usize, Arc<FileMeta>)> = None;
        let mut searched_more = false;
        // `Some(answer)` when `file` decides the key: a value or a deletion.
        let mut search = |level: usize, file: &Arc<FileMeta>| {
            if first_searched.is_none() {
                first_searched = Some((level, file.clone()));
            } else {
                searched_more = true;
            }
            let table = self.table_cache.table(file.number, file.file_size)?;
            let found =
                table.get_entry(
                    lookup,
                    read,
                    |found_key, value| match ParsedInternalKey::parse(found_key) {
                        Ok(parsed) if order.compare_user(parsed.user_key, user_key).is_ne() => {
                            Ok(None)
                        }
                        Ok(parsed) => Ok(Some(match parsed.value_type {
                            ValueType::Value => Some(value.to_vec()),
                            ValueType::Deletion => None,
                        })),
                        Err(err) => Err(err.at(table.name(), 0)),
                    },
                )?;
            Ok::<_, Error>(found.transpose()?.flatten())
        };
        let answer = (|| {
            // L0 files may overlap: search those that hold the key, newest
            // first, since a newer file's entry hides an older one's.
            // Inline up to the stop trigger's default: no allocation per lookup.
            let mut overlapping: smallvec::SmallVec<[&Arc<FileMeta>; 12]> = version.files[0]
                .iter()
                .filter(|f| {
                    order.compare_user(f.smallest.user_key(), user_key).is_le()
                        && order.compare_user(user_key, f.largest.user_key()).is_le()
                })
                .collect();
            overlapping.sort_unstable_by_key(|f| std::cmp::Reverse(f.number));
            for file in overlapping {
                if let Some(answer) = search(0, file)? {
                    return Ok(answer);
                }
            }
            // Deeper levels are sorted and disjoint: at most one file each.
            for level in 1..NUM_LEVELS {
                let index = version.find_file(level, lookup);
                if let Some(file) = version.files[level]
                    .get(index)
                    .filter(|f| order.compare_user(f.smallest.user_key(), user_key).is_le())
                {
                    if let Some(answer) = search(level, file)? {
                        return Ok(answer);
                    }
                }
            }
            Ok(None)
        })();
        if let (Some((level, file)), true) = (first_searched, searched_more) {
            self.charge_seek(version, level, &file);
        }
        answer
    }

    /// Charges `file` (at `level` of `version`) a seek that found nothing;
    /// when its allowance runs out it becomes the version's seek compaction.
    fn charge_seek(&self, version: &Version, level: usize, file: &Arc<FileMeta>) {
        if !self.options.seek_compaction
            || !file.charge_seek()
            || version.seek_compaction.get().is_some()
            || version.seek_compaction.set((level, file.clone())).is_err()
        {
            return;
        }
        self.service().work_available();
    }

    /// The merged internal iterator over memtables and tables of `version`.
    fn internal_iter(
        &self,
        mem: &Arc<MemTable>,
        imm: Option<&Arc<MemTable>>,
        version: &Arc<Version>,
        read: BlockReadOptions,
    ) -> Result<Box<dyn KvIterator + Send>> {
        let mut children: Vec<Box<dyn KvIterator + Send>> = vec![Box::new(mem.iter())];
        if let Some(imm) = imm {
            children.push(Box::new(imm.iter()));
        }
        for file in &version.files[0] {
            let table = self.table_cache.table(file.number, file.file_size)?;
            children.push(Box::new(table.iter_with(read)));
        }
        for level in 1..NUM_LEVELS {
            let files = version.files[level].clone();
            if files.is_empty() {
                continue;
            }
            let largest = files.iter().map(|f| f.largest.encoded().to_vec()).collect();
            let table_cache = self.table_cache.clone();
            // The closure holds the version, so its files outlive the cursor.
            let pinned = version.clone();
            children.push(Box::new(ConcatIterator::new(
                self.order.internal_comparator(),
                largest,
                Box::new(move |i| {
                    let file = &pinned.files[level][i];
                    let table = table_cache.table(file.number, file.file_size)?;
                    Ok(Box::new(table.iter_with(read)) as Box<dyn KvIterator + Send>)
                }),
            )));
        }
        Ok(merging_iterator(self.order.internal_comparator(), children))
    }

    pub(super) fn iter(&self, options: &ReadOptions) -> Result<DbIterator> {
        self.read_mark.note();
        let view = self.read_view(options);
        let read = block_read_options(options);
        let internal = self.internal_iter(&view.mem, view.imm.as_ref(), &view.version, read)?;
        let mut iter = DbIterator::with_order(internal, view.sequence, self.order.clone());
        if let Some(lower) = &options.lower_bound {
            iter = iter.with_lower_bound(lower.clone());
        }
        if let Some(upper) = &options.upper_bound {
            iter = iter.with_upper_bound(upper.clone());
        }
        Ok(iter)
    }

    pub(super) fn approximate_sizes(&self, ranges: &[(&[u8], &[u8])]) -> Vec<u64> {
        let version = self.lock_state().current.clone();
        let offset_of = |user_key: &[u8]| -> u64 {
            let key = InternalKey::new(user_key, MAX_SEQUENCE_NUMBER, ValueType::VALUE_FOR_SEEK);
            let mut total = 0;
            for file in version.files.iter().flatten() {
                if self
                    .order
                    .compare_internal(file.largest.encoded(), key.encoded())
                    .is_le()
                {
                    total += file.file_size;
                } else if self
                    .order
                    .compare_internal(file.smallest.encoded(), key.encoded())
                    .is_lt()
                {
                    if let Ok(table) = self.table_cache.table(file.number, file.file_size) {
                        total += table.approximate_offset_of(key.encoded());
                    }
                }
            }
            total
        };
        ranges
            .iter()
            .map(|(start, end)| offset_of(end).saturating_sub(offset_of(start)))
            .collect()
    }
}
