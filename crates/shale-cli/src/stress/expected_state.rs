//! The expected state of `shale stress`: what every key must hold, kept in
//! a file outside the database so that it survives the process being
//! killed (RocksDB's `ExpectedState` file).
//!
//! Layout: a 64-byte header (magic, key count, value sizes), then one
//! little-endian `u64` slot per key. A slot holds the committed value (a
//! generation and whether the key exists; the value bytes follow from them,
//! see `values.rs`) and, while a write is in flight, the pending value:
//!
//! ```text
//! bit 63      pending flag
//! bits 32-62  pending value:   generation << 1 | exists
//! bits 0-31   committed value: generation << 1 | exists
//! ```
//!
//! A writer marks the slot pending with the new value before it writes to
//! the database, and commits it after the write is acknowledged. Each slot
//! update is one aligned 8-byte `pwrite`, so a kill never leaves half a
//! slot. After a kill a pending key may hold the old or the new value;
//! every other key must hold exactly its committed value. The file lives in
//! the page cache once written: a process kill loses none of it (a power
//! loss could; that is not what it is for).
//!
//! The in-memory copy is the one read; the file is read only at open.
//! Writers take the key's lock ([`ExpectedState::lock`]) around
//! mark-pending, the database write and commit, and readers take it around
//! the read and its check, so the database and the copy agree whenever a
//! key's lock is free.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::values::ValueSizes;
use super::StressError;

const MAGIC: &[u8; 8] = b"SHSTRES1";
const HEADER_BYTES: u64 = 64;
const SLOT_BYTES: u64 = 8;
const PENDING: u64 = 1 << 63;
/// Generations fit in 30 bits beside the exists bit and the pending flag.
pub const MAX_GENERATION: u32 = (1 << 30) - 1;

/// A value a key may hold: generation 0 is "never written".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Expected {
    pub generation: u32,
    pub exists: bool,
}

impl Expected {
    fn encode(self) -> u64 {
        (u64::from(self.generation) << 1) | u64::from(self.exists)
    }

    fn decode(bits: u64) -> Expected {
        Expected {
            generation: ((bits & 0x7fff_ffff) >> 1) as u32,
            exists: bits & 1 == 1,
        }
    }
}

/// One key's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub committed: Expected,
    /// The value of a write in flight (or cut short by a kill).
    pub pending: Option<Expected>,
}

impl Slot {
    fn encode(self) -> u64 {
        let pending = self
            .pending
            .map_or(0, |p| PENDING | ((p.encode() & 0x7fff_ffff) << 32));
        pending | (self.committed.encode() & 0xffff_ffff)
    }

    fn decode(bits: u64) -> Slot {
        Slot {
            committed: Expected::decode(bits & 0xffff_ffff),
            pending: (bits & PENDING != 0).then(|| Expected::decode((bits >> 32) & 0x7fff_ffff)),
        }
    }
}

/// What a run asks of the file: values it must have (when given) or, for a
/// new file, the values to create it with.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub max_key: Option<u32>,
    pub sizes: Option<ValueSizes>,
}

/// The expected-state file, its in-memory copy and the per-key locks.
#[derive(Debug)]
pub struct ExpectedState {
    file: File,
    path: PathBuf,
    slots: Vec<AtomicU64>,
    /// In memory only: the worker (from 1) whose acknowledged write of the
    /// key no sync covers yet, which the file still holds as pending; 0
    /// for none (`shale stress --sync_one_in`).
    unsynced: Vec<AtomicU32>,
    locks: Vec<Mutex<()>>,
    sizes: ValueSizes,
}

pub const DEFAULT_MAX_KEY: u32 = 10_000;
pub const DEFAULT_SIZES: ValueSizes = ValueSizes { min: 8, max: 100 };

impl ExpectedState {
    /// Opens the file at `path`, or creates it (every key never written)
    /// when it does not exist and `create` is set. A file whose key count
    /// or value sizes differ from what `shape` gives is refused.
    pub fn open(path: &Path, shape: Shape, create: bool) -> Result<ExpectedState, StressError> {
        let io = |source| StressError::ExpectedStateIo {
            path: path.to_path_buf(),
            source,
        };
        let bad = |reason: String| StressError::ExpectedState {
            path: path.to_path_buf(),
            reason,
        };
        if !path.exists() {
            if !create {
                return Err(bad("not found".into()));
            }
            let max_key = shape.max_key.unwrap_or(DEFAULT_MAX_KEY);
            let sizes = shape.sizes.unwrap_or(DEFAULT_SIZES);
            // Written under a temporary name and renamed, so that a kill
            // while creating never leaves a short file behind.
            let temp = path.with_extension("tmp");
            let file = File::create(&temp).map_err(io)?;
            let mut header = [0u8; HEADER_BYTES as usize];
            header[..8].copy_from_slice(MAGIC);
            header[8..12].copy_from_slice(&max_key.to_le_bytes());
            header[12..16].copy_from_slice(&sizes.min.to_le_bytes());
            header[16..20].copy_from_slice(&sizes.max.to_le_bytes());
            file.write_all_at(&header, 0).map_err(io)?;
            file.set_len(HEADER_BYTES + u64::from(max_key) * SLOT_BYTES)
                .map_err(io)?;
            file.sync_all().map_err(io)?;
            std::fs::rename(&temp, path).map_err(io)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        let bytes = std::fs::read(path).map_err(io)?;
        let field = |at: usize| -> Result<u32, StressError> {
            bytes
                .get(at..at + 4)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_le_bytes)
                .ok_or_else(|| bad("shorter than its header".into()))
        };
        if bytes.get(..8) != Some(MAGIC.as_slice()) {
            return Err(bad("not a shale stress expected-state file".into()));
        }
        let max_key = field(8)?;
        let sizes = ValueSizes {
            min: field(12)?,
            max: field(16)?,
        };
        if shape.max_key.is_some_and(|m| m != max_key) {
            return Err(bad(format!(
                "made for --max_key={max_key}; remove it to start over with another"
            )));
        }
        if shape.sizes.is_some_and(|s| s != sizes) {
            return Err(bad(format!(
                "made for values of {} to {} bytes; remove it to start over with others",
                sizes.min, sizes.max
            )));
        }
        let expected_len = HEADER_BYTES + u64::from(max_key) * SLOT_BYTES;
        if bytes.len() as u64 != expected_len {
            return Err(bad(format!(
                "{} bytes, expected {expected_len} for {max_key} keys",
                bytes.len()
            )));
        }
        let slots = bytes[HEADER_BYTES as usize..]
            .chunks_exact(SLOT_BYTES as usize)
            .map(|chunk| {
                let mut raw = [0u8; 8];
                raw.copy_from_slice(chunk);
                AtomicU64::new(u64::from_le_bytes(raw))
            })
            .collect();
        Ok(ExpectedState {
            file,
            path: path.to_path_buf(),
            slots,
            unsynced: (0..max_key).map(|_| AtomicU32::new(0)).collect(),
            locks: (0..max_key).map(|_| Mutex::new(())).collect(),
            sizes,
        })
    }

    /// Number of keys: indexes `0..max_key`.
    pub fn max_key(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Value lengths the file was made for.
    pub fn sizes(&self) -> ValueSizes {
        self.sizes
    }

    /// The slot of key `index`.
    pub fn slot(&self, index: u32) -> Slot {
        Slot::decode(self.slots[index as usize].load(Ordering::Acquire))
    }

    /// Locks key `index` against the other threads. Keys locked together
    /// are taken in ascending order, so that threads never deadlock.
    pub fn lock(&self, index: u32) -> MutexGuard<'_, ()> {
        // A poisoned lock guards nothing: the slot is the state.
        self.locks[index as usize]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The next value written to key `index`: one generation on.
    /// REQUIRES: the key's lock is held.
    pub fn next(&self, index: u32, exists: bool) -> Result<Expected, StressError> {
        let generation = self.slot(index).committed.generation + 1;
        if generation > MAX_GENERATION {
            return Err(StressError::ExpectedState {
                path: self.path.clone(),
                reason: format!("key index {index} ran out of generations"),
            });
        }
        Ok(Expected { generation, exists })
    }

    /// Records that `value` is about to be written to key `index`.
    /// REQUIRES: the key's lock is held.
    pub fn mark_pending(&self, index: u32, value: Expected) -> Result<(), StressError> {
        let committed = self.slot(index).committed;
        self.store(
            index,
            Slot {
                committed,
                pending: Some(value),
            },
        )
    }

    /// Records that the pending write of key `index` was acknowledged.
    /// REQUIRES: the key's lock is held.
    pub fn commit(&self, index: u32) -> Result<(), StressError> {
        let slot = self.slot(index);
        self.store(
            index,
            Slot {
                committed: slot.pending.unwrap_or(slot.committed),
                pending: None,
            },
        )
    }

    /// Records that the pending write of key `index`, by worker `owner`,
    /// was acknowledged but not synced: committed in memory (what the
    /// running workers check reads against), still pending in the file
    /// (what a check after a power loss goes by), until
    /// [`ExpectedState::commit_durable`].
    /// REQUIRES: the key's lock is held.
    pub fn commit_unsynced(&self, index: u32, owner: u32) {
        let slot = self.slot(index);
        let committed = Slot {
            committed: slot.pending.unwrap_or(slot.committed),
            pending: None,
        };
        self.slots[index as usize].store(committed.encode(), Ordering::Release);
        self.unsynced[index as usize].store(owner, Ordering::Release);
    }

    /// The worker whose unsynced write key `index` holds (0: none).
    pub fn unsynced_owner(&self, index: u32) -> u32 {
        self.unsynced[index as usize].load(Ordering::Acquire)
    }

    /// A sync covered the unsynced write of key `index`, if any (only if
    /// `owner`'s, when given): the file commits it too.
    /// REQUIRES: the key's lock is held.
    pub fn commit_durable(&self, index: u32, owner: Option<u32>) -> Result<(), StressError> {
        let current = self.unsynced_owner(index);
        if current == 0 || owner.is_some_and(|owner| owner != current) {
            return Ok(());
        }
        self.unsynced[index as usize].store(0, Ordering::Release);
        self.store(index, self.slot(index))
    }

    /// Settles a write cut short: `landed` tells whether the database holds
    /// its value.
    pub fn resolve(&self, index: u32, landed: bool) -> Result<(), StressError> {
        let slot = self.slot(index);
        let committed = match (landed, slot.pending) {
            (true, Some(pending)) => pending,
            _ => slot.committed,
        };
        self.store(
            index,
            Slot {
                committed,
                pending: None,
            },
        )
    }

    fn store(&self, index: u32, slot: Slot) -> Result<(), StressError> {
        let bits = slot.encode();
        // The file first: once the copy says so, readers rely on it.
        self.file
            .write_all_at(
                &bits.to_le_bytes(),
                HEADER_BYTES + u64::from(index) * SLOT_BYTES,
            )
            .map_err(|source| StressError::ExpectedStateIo {
                path: self.path.clone(),
                source,
            })?;
        self.slots[index as usize].store(bits, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]
    use super::*;

    #[test]
    fn slots_round_trip() {
        let cases = [
            Slot {
                committed: Expected::default(),
                pending: None,
            },
            Slot {
                committed: Expected {
                    generation: MAX_GENERATION,
                    exists: true,
                },
                pending: Some(Expected {
                    generation: MAX_GENERATION,
                    exists: false,
                }),
            },
            Slot {
                committed: Expected {
                    generation: 5,
                    exists: false,
                },
                pending: Some(Expected {
                    generation: 6,
                    exists: true,
                }),
            },
        ];
        for slot in cases {
            assert_eq!(Slot::decode(slot.encode()), slot);
        }
        assert_eq!(Slot::decode(0).committed, Expected::default());
    }

    #[test]
    fn pending_survives_reopen_and_is_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("expected");
        let shape = Shape {
            max_key: Some(10),
            sizes: None,
        };
        let state = ExpectedState::open(&path, shape, true).unwrap();
        let first = state.next(3, true).unwrap();
        state.mark_pending(3, first).unwrap();
        state.commit(3).unwrap();
        let second = state.next(3, false).unwrap();
        state.mark_pending(3, second).unwrap();
        drop(state);

        let state = ExpectedState::open(&path, shape, false).unwrap();
        assert_eq!(state.max_key(), 10);
        assert_eq!(state.sizes(), DEFAULT_SIZES);
        let slot = state.slot(3);
        assert_eq!(slot.committed, first);
        assert_eq!(slot.pending, Some(second));
        state.resolve(3, true).unwrap();
        assert_eq!(state.slot(3).committed, second);
        assert_eq!(state.slot(3).pending, None);

        let other = Shape {
            max_key: Some(11),
            sizes: None,
        };
        let error = ExpectedState::open(&path, other, true).unwrap_err();
        assert!(error.to_string().contains("max_key=10"), "{error}");
        let missing = ExpectedState::open(&dir.path().join("none"), shape, false);
        assert!(missing.is_err());
    }
}
