//! A `Version`: the set of live tables per level at one moment, immutable once
//! built. Readers hold an `Arc<Version>` so the files they read outlive any
//! compaction that replaces them. Building a version from a base and edits is
//! [`VersionBuilder`]; choosing what to compact from a version is in
//! `compaction/picker.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, Ordering as AtomicOrdering};
use std::sync::{Arc, OnceLock};

use shale_format::comparator::KeyOrder;
use shale_format::internal_key::InternalKey;
use shale_format::version_edit::{FileMetaData, VersionEdit, NUM_LEVELS};
use shale_format::{Error, Result};

/// One live table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// File number (`NNNNNN.ldb`).
    pub number: u64,
    /// Size in bytes.
    pub file_size: u64,
    /// Smallest internal key.
    pub smallest: InternalKey,
    /// Largest internal key.
    pub largest: InternalKey,
    /// Reads that may still search this file in vain before it is
    /// compacted (see [`FileMeta::charge_seek`]).
    pub allowed_seeks: SeekBudget,
}

/// A file's remaining seek allowance. Shared by every version holding the
/// file; not part of the file's identity (ignored by `==`).
#[derive(Debug)]
pub struct SeekBudget(AtomicI64);

impl SeekBudget {
    /// LevelDB's rule: one seek costs about as much as compacting 16 KiB,
    /// and a file of `file_size` bytes is worth compacting once it has been
    /// searched in vain that many times (at least 100).
    pub fn for_file_size(file_size: u64) -> SeekBudget {
        SeekBudget(AtomicI64::new(
            i64::try_from(file_size / 16384)
                .unwrap_or(i64::MAX)
                .max(100),
        ))
    }
}

impl Clone for SeekBudget {
    fn clone(&self) -> SeekBudget {
        SeekBudget(AtomicI64::new(self.0.load(AtomicOrdering::Relaxed)))
    }
}

impl PartialEq for SeekBudget {
    fn eq(&self, _other: &SeekBudget) -> bool {
        true
    }
}

impl Eq for SeekBudget {}

impl FileMeta {
    /// From a MANIFEST record.
    pub fn from_meta(meta: &FileMetaData) -> FileMeta {
        FileMeta {
            number: meta.number,
            file_size: meta.file_size,
            smallest: meta.smallest.clone(),
            largest: meta.largest.clone(),
            allowed_seeks: SeekBudget::for_file_size(meta.file_size),
        }
    }

    /// Records a read that searched this file without an answer and went
    /// on to another file; true when the allowance has run out.
    pub fn charge_seek(&self) -> bool {
        self.allowed_seeks.0.fetch_sub(1, AtomicOrdering::Relaxed) <= 1
    }

    /// To a MANIFEST record.
    pub fn to_meta(&self) -> FileMetaData {
        FileMetaData {
            number: self.number,
            file_size: self.file_size,
            smallest: self.smallest.clone(),
            largest: self.largest.clone(),
        }
    }

    /// True when the file's user-key range intersects `[begin, end]`
    /// (`None` = unbounded) in `order`.
    pub fn overlaps_user_range(
        &self,
        order: &KeyOrder,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> bool {
        let before =
            end.is_some_and(|end| order.compare_user(self.smallest.user_key(), end).is_gt());
        let after =
            begin.is_some_and(|begin| order.compare_user(self.largest.user_key(), begin).is_lt());
        !before && !after
    }
}

/// The live tables per level, each level in order of smallest key (as
/// LevelDB keeps them). L0 files may overlap (readers that need them newest
/// first sort by file number); files of L1 and deeper are disjoint.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// Files of each level.
    pub files: [Vec<Arc<FileMeta>>; NUM_LEVELS],
    /// The first file of this version whose seek allowance ran out, with
    /// its level: the seek-triggered compaction to run when no level needs
    /// a size compaction.
    pub seek_compaction: OnceLock<(usize, Arc<FileMeta>)>,
    /// The database's order of user keys, which orders the files.
    pub order: KeyOrder,
}

/// Sum of file sizes.
pub fn total_file_size(files: &[Arc<FileMeta>]) -> u64 {
    files.iter().map(|f| f.file_size).sum()
}

impl Version {
    /// A version with no files, for a database ordered by `order`.
    pub fn empty(order: KeyOrder) -> Version {
        Version {
            order,
            ..Version::default()
        }
    }

    /// Number of files at `level`.
    pub fn num_files(&self, level: usize) -> usize {
        self.files[level].len()
    }

    /// Bytes at `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        total_file_size(&self.files[level])
    }

    /// Index of the first file at `level` (>= 1) whose largest key is >=
    /// `internal_key`; the file count when there is none.
    pub fn find_file(&self, level: usize, internal_key: &[u8]) -> usize {
        self.files[level].partition_point(|f| {
            self.order
                .compare_internal(f.largest.encoded(), internal_key)
                .is_lt()
        })
    }

    /// Files at `level` whose user-key range intersects `[begin, end]`. For
    /// L0 the range grows to cover every file that overlaps a chosen one, as
    /// LevelDB's `GetOverlappingInputs` does, so newer and older versions of a
    /// key are never split. Returned in the level's order.
    pub fn overlapping_inputs(
        &self,
        level: usize,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        let mut begin = begin.map(<[u8]>::to_vec);
        let mut end = end.map(<[u8]>::to_vec);
        'restart: loop {
            let mut inputs = Vec::new();
            for file in &self.files[level] {
                if !file.overlaps_user_range(&self.order, begin.as_deref(), end.as_deref()) {
                    continue;
                }
                if level == 0 {
                    let smallest = file.smallest.user_key();
                    let largest = file.largest.user_key();
                    let order = &self.order;
                    if begin
                        .as_deref()
                        .is_some_and(|b| order.compare_user(smallest, b).is_lt())
                    {
                        begin = Some(smallest.to_vec());
                        continue 'restart;
                    }
                    if end
                        .as_deref()
                        .is_some_and(|e| order.compare_user(largest, e).is_gt())
                    {
                        end = Some(largest.to_vec());
                        continue 'restart;
                    }
                }
                inputs.push(file.clone());
            }
            return inputs;
        }
    }

    /// True when some file at `level` overlaps the user-key range.
    pub fn overlaps(&self, level: usize, begin: Option<&[u8]>, end: Option<&[u8]>) -> bool {
        self.files[level]
            .iter()
            .any(|f| f.overlaps_user_range(&self.order, begin, end))
    }

    /// Every file number in this version.
    pub fn live_files(&self) -> impl Iterator<Item = u64> + '_ {
        self.files.iter().flatten().map(|f| f.number)
    }

    /// One line per level: `files[ n0 n1 ... ]`, for logs.
    pub fn level_summary(&self) -> String {
        let counts: Vec<String> = self.files.iter().map(|l| l.len().to_string()).collect();
        format!("files[ {} ]", counts.join(" "))
    }
}

/// Applies edits to a base version (LevelDB's `VersionSet::Builder`).
#[derive(Debug)]
pub struct VersionBuilder {
    base: Arc<Version>,
    deleted: [BTreeSet<u64>; NUM_LEVELS],
    added: [BTreeMap<u64, Arc<FileMeta>>; NUM_LEVELS],
}

impl VersionBuilder {
    /// Starts from `base`.
    pub fn new(base: Arc<Version>) -> VersionBuilder {
        VersionBuilder {
            base,
            deleted: Default::default(),
            added: Default::default(),
        }
    }

    /// Records the file changes of `edit`.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<()> {
        for &(level, number) in &edit.deleted_files {
            check_level(level)?;
            self.deleted[level].insert(number);
            self.added[level].remove(&number);
        }
        for (level, meta) in &edit.new_files {
            check_level(*level)?;
            self.deleted[*level].remove(&meta.number);
            self.added[*level].insert(meta.number, Arc::new(FileMeta::from_meta(meta)));
        }
        Ok(())
    }

    /// The resulting version. A corruption error when files of a level >= 1
    /// overlap (a MANIFEST no correct writer produces).
    pub fn build(self) -> Result<Version> {
        let mut version = Version::empty(self.base.order.clone());
        let order = &version.order;
        for level in 0..NUM_LEVELS {
            let mut files: Vec<Arc<FileMeta>> = self.base.files[level]
                .iter()
                .filter(|f| {
                    !self.deleted[level].contains(&f.number)
                        && !self.added[level].contains_key(&f.number)
                })
                .cloned()
                .chain(self.added[level].values().cloned())
                .collect();
            files.sort_by(|a, b| {
                order
                    .compare_internal(a.smallest.encoded(), b.smallest.encoded())
                    .then(a.number.cmp(&b.number))
            });
            if level > 0 {
                for pair in files.windows(2) {
                    if !order
                        .compare_internal(pair[0].largest.encoded(), pair[1].smallest.encoded())
                        .is_lt()
                    {
                        return Err(Error::corruption(
                            0,
                            format!(
                                "overlapping files {} and {} at level {level}",
                                pair[0].number, pair[1].number
                            ),
                        ));
                    }
                }
            }
            version.files[level] = files;
        }
        Ok(version)
    }
}

fn check_level(level: usize) -> Result<()> {
    if level >= NUM_LEVELS {
        return Err(Error::corruption(0, format!("file at level {level}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_format::internal_key::ValueType;

    fn meta(number: u64, smallest: &[u8], largest: &[u8]) -> FileMetaData {
        FileMetaData {
            number,
            file_size: 100,
            smallest: InternalKey::new(smallest, 10, ValueType::Value),
            largest: InternalKey::new(largest, 5, ValueType::Value),
        }
    }

    #[test]
    fn builder_adds_deletes_and_orders() {
        let mut edit = VersionEdit::default();
        edit.add_file(0, meta(3, b"a", b"m"));
        edit.add_file(0, meta(7, b"k", b"z"));
        edit.add_file(1, meta(5, b"n", b"p"));
        edit.add_file(1, meta(4, b"a", b"c"));
        let mut builder = VersionBuilder::new(Arc::new(Version::default()));
        builder.apply(&edit).unwrap();
        let v = Arc::new(builder.build().unwrap());
        assert_eq!(
            v.files[0].iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![3, 7]
        );
        assert_eq!(
            v.files[1].iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![4, 5]
        );

        let mut edit = VersionEdit::default();
        edit.delete_file(0, 3);
        let mut builder = VersionBuilder::new(v.clone());
        builder.apply(&edit).unwrap();
        let v2 = builder.build().unwrap();
        assert_eq!(v2.files[0].len(), 1);
        assert_eq!(v.files[0].len(), 2, "base unchanged");
    }

    #[test]
    fn overlapping_level_files_are_corruption() {
        let mut edit = VersionEdit::default();
        edit.add_file(2, meta(1, b"a", b"m"));
        edit.add_file(2, meta(2, b"k", b"z"));
        let mut builder = VersionBuilder::new(Arc::new(Version::default()));
        builder.apply(&edit).unwrap();
        assert!(builder.build().unwrap_err().is_corruption());
    }

    #[test]
    fn l0_overlap_expands_range() {
        let mut edit = VersionEdit::default();
        edit.add_file(0, meta(1, b"a", b"c"));
        edit.add_file(0, meta(2, b"b", b"f"));
        edit.add_file(0, meta(3, b"e", b"h"));
        edit.add_file(0, meta(4, b"x", b"y"));
        let mut builder = VersionBuilder::new(Arc::new(Version::default()));
        builder.apply(&edit).unwrap();
        let v = builder.build().unwrap();
        let got: BTreeSet<u64> = v
            .overlapping_inputs(0, Some(b"a"), Some(b"a"))
            .iter()
            .map(|f| f.number)
            .collect();
        assert_eq!(got, BTreeSet::from([1, 2, 3]));
        let got = v.overlapping_inputs(0, None, None);
        assert_eq!(got.len(), 4);
    }
}
