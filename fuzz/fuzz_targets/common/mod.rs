//! Helpers shared by the fuzz targets: a cursor over the fuzzer's bytes,
//! sorted entries derived from them, and a walk over every position a
//! [`KvIterator`] can reach.
#![allow(dead_code)]

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use shale_format::block::Block;
use shale_format::comparator::{BytewiseComparator, Comparator, InternalKeyComparator};
use shale_format::internal_key::{InternalKey, ValueType};
use shale_format::iterator::KvIterator;
use shale_format::table::BlockCache;

/// Reads the fuzzer's bytes front to back; past the end every number is 0
/// and every byte string empty, so a short input is still a valid one.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.data.split_at(n.min(self.data.len()));
        self.data = tail;
        head
    }

    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.data.len())
    }

    pub fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    pub fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | u16::from(self.u8()) << 8
    }

    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u16()) << 16
    }

    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
}

/// The comparator picked by a flag bit.
pub fn comparator(internal: bool) -> Arc<dyn Comparator> {
    if internal {
        Arc::new(InternalKeyComparator)
    } else {
        Arc::new(BytewiseComparator)
    }
}

/// `(position, xor mask)` pairs read from the input; applied by [`flip`].
pub fn read_flips(input: &mut Input<'_>, max: u8) -> Vec<(u32, u8)> {
    let n = input.u8() % (max + 1);
    (0..n).map(|_| (input.u32(), input.u8())).collect()
}

/// Applies flips to `bytes`; true when the bytes changed.
pub fn flip(bytes: &mut [u8], flips: &[(u32, u8)]) -> bool {
    if bytes.is_empty() {
        return false;
    }
    let before = bytes.to_vec();
    for &(at, mask) in flips {
        let at = at as usize % bytes.len();
        bytes[at] ^= mask;
    }
    before != bytes
}

/// Sorted, distinct entries made from the rest of the input: per entry one
/// header byte (key length in the low nibble, a value-length code in the high
/// one), the key bytes and, for internal keys, a sequence byte. Values are
/// patterns, so small inputs still make multi-block tables and compressible
/// blocks. Stops after `max_bytes` of keys and values.
pub fn derive_entries(
    input: &mut Input<'_>,
    internal: bool,
    max_bytes: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut entries = Vec::new();
    let mut total = 0;
    while !input.is_empty() && total < max_bytes {
        let header = input.u8();
        let user_key = input.bytes(usize::from(header & 0x0f)).to_vec();
        let value_len = match header >> 4 {
            code @ 0..=11 => usize::from(code),
            12 => 40,
            13 => 300,
            14 => 1500,
            _ => 5000,
        };
        let seed = input.u8();
        let value: Vec<u8> = (0..value_len)
            .map(|i| seed.wrapping_add((i / 7) as u8))
            .collect();
        let key = if internal {
            let value_type = if seed & 1 == 0 {
                ValueType::Value
            } else {
                ValueType::Deletion
            };
            InternalKey::new(&user_key, u64::from(seed >> 1), value_type).into_encoded()
        } else {
            user_key
        };
        total += key.len() + value.len();
        entries.push((key, value));
    }
    let cmp = comparator(internal);
    entries.sort_by(|a, b| cmp.compare(&a.0, &b.0));
    entries.dedup_by(|a, b| cmp.compare(&a.0, &b.0) == Ordering::Equal);
    entries
}

/// What a walk saw, in the order it saw it.
#[derive(Debug, Default)]
pub struct Walked {
    pub forward: Vec<(Vec<u8>, Vec<u8>)>,
    /// The forward walk ended (rather than hitting the step cap).
    pub forward_ended: bool,
    /// Entries from `seek_to_last` on, in the order `prev` visited them.
    pub backward: Vec<(Vec<u8>, Vec<u8>)>,
    pub backward_ended: bool,
}

fn entry(iter: &dyn KvIterator) -> (Vec<u8>, Vec<u8>) {
    (iter.key().to_vec(), iter.value().to_vec())
}

/// Visits everything `iter` can reach: forward and backward (at most
/// `max_steps` entries each), a seek to `probe` and to keys seen on the way,
/// and a step back and forth around each seek. Calls `status` after every
/// walk. With `expected`, the iterator must yield exactly those entries in
/// `cmp` order and every seek must land where a sorted array says.
pub fn walk(
    iter: &mut dyn KvIterator,
    max_steps: usize,
    probe: &[u8],
    cmp: &dyn Comparator,
    expected: Option<&[(Vec<u8>, Vec<u8>)]>,
) -> Walked {
    let mut walked = Walked::default();

    iter.seek_to_first();
    loop {
        if !iter.valid() {
            walked.forward_ended = true;
            break;
        }
        if walked.forward.len() >= max_steps {
            break;
        }
        walked.forward.push(entry(iter));
        iter.next();
    }
    let forward_status = iter.status();

    iter.seek_to_last();
    loop {
        if !iter.valid() {
            walked.backward_ended = true;
            break;
        }
        if walked.backward.len() >= max_steps {
            break;
        }
        walked.backward.push(entry(iter));
        iter.prev();
    }
    let backward_status = iter.status();

    if let Some(expected) = expected {
        forward_status.expect("clean input: forward walk failed");
        backward_status.expect("clean input: backward walk failed");
        assert!(walked.forward_ended && walked.backward_ended);
        assert_eq!(walked.forward, expected, "clean input: forward walk");
        let mut backward = walked.backward.clone();
        backward.reverse();
        assert_eq!(backward, expected, "clean input: backward walk");
    }

    // Seek targets: the probe, and up to 16 keys seen, spread evenly.
    let mut targets = vec![probe.to_vec()];
    let seen = &walked.forward;
    let stride = seen.len() / 16 + 1;
    targets.extend(seen.iter().step_by(stride).map(|(k, _)| k.clone()));
    for target in &targets {
        iter.seek(target);
        let landed = iter.valid().then(|| entry(iter));
        if let Some(expected) = expected {
            iter.status().expect("clean input: seek failed");
            let at = expected.partition_point(|(k, _)| cmp.compare(k, target) == Ordering::Less);
            assert_eq!(landed.as_ref(), expected.get(at), "clean input: seek");
            if landed.is_some() {
                iter.prev();
                let before = iter.valid().then(|| entry(iter));
                let want = at.checked_sub(1).and_then(|i| expected.get(i));
                assert_eq!(before.as_ref(), want, "clean input: prev after seek");
                if before.is_some() {
                    iter.next();
                    assert!(iter.valid(), "clean input: next after prev");
                    assert_eq!(Some(&entry(iter)), expected.get(at));
                }
            }
        } else if landed.is_some() {
            // Step around without checking what we find.
            iter.prev();
            if iter.valid() {
                let _ = entry(iter);
                iter.next();
                if iter.valid() {
                    let _ = entry(iter);
                    iter.next();
                }
            }
        }
        let _ = iter.status();
    }
    walked
}

/// A block cache that keeps everything: exercises the table's cache path.
#[derive(Default)]
pub struct MapCache(Mutex<HashMap<(u64, u64), Block>>);

impl BlockCache for MapCache {
    fn get(&self, table_id: u64, offset: u64) -> Option<Block> {
        self.0.lock().ok()?.get(&(table_id, offset)).cloned()
    }

    fn insert(&self, table_id: u64, offset: u64, block: Block) {
        if let Ok(mut map) = self.0.lock() {
            map.insert((table_id, offset), block);
        }
    }
}
