//! CPU twins of the OpenCL kernels whose algorithm the parallel executor
//! does not already use elsewhere (every kernel has one, so that a device
//! result can be checked against the CPU's): the rank merge
//! (Algorithm 1 of the hierarchical-pipeline paper), the exclusive scan and
//! stream compaction, and the byte-vector Bloom filter (Algorithm 2). The
//! device tests compare each kernel with its twin, and the twins' own tests
//! tie them to the algorithms the executors use (the heap merge, the keep
//! predicate, `BloomFilterPolicy::create_filter_from_hashes`).

use std::cmp::Ordering;

use rayon::prelude::*;
use shale_format::bloom::{filter_bits, for_each_probe, probes_for_bits_per_key};

/// Merges sorted runs by rank: elements are numbered run after run
/// (`run_lengths` gives each run's length); element `i` of run `r` goes to
/// its index in `r` plus, for every other run `s`, the number of elements of
/// `s` that sort before it (those comparing less, and equal ones when
/// `s < r`). `compare(a, b)` orders two elements by number. Returns the
/// merged order (element numbers by rank).
pub fn rank_merge(
    run_lengths: &[usize],
    compare: impl Fn(usize, usize) -> Ordering + Sync,
) -> Vec<u32> {
    let mut starts = Vec::with_capacity(run_lengths.len() + 1);
    let mut total = 0;
    for &len in run_lengths {
        starts.push(total);
        total += len;
    }
    starts.push(total);
    let ranks: Vec<usize> = (0..total)
        .into_par_iter()
        .map(|i| {
            let r = starts.partition_point(|&s| s <= i) - 1;
            let mut rank = i - starts[r];
            for s in (0..run_lengths.len()).filter(|&s| s != r) {
                let (mut lo, mut hi) = (starts[s], starts[s + 1]);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    let before = match compare(mid, i) {
                        Ordering::Less => true,
                        Ordering::Equal => s < r,
                        Ordering::Greater => false,
                    };
                    if before {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                rank += lo - starts[s];
            }
            rank
        })
        .collect();
    let mut order = vec![u32::MAX; total];
    for (i, rank) in ranks.into_iter().enumerate() {
        order[rank] = i as u32;
    }
    order
}

/// Exclusive prefix sums and the total.
pub fn exclusive_scan(values: &[u32]) -> (Vec<u64>, u64) {
    let mut sum = 0u64;
    let out = values
        .iter()
        .map(|&v| {
            let at = sum;
            sum += u64::from(v);
            at
        })
        .collect();
    (out, sum)
}

/// Stream compaction: the elements of `order` whose `keep` flag is set, in
/// order, placed by an exclusive scan of the flags and a scatter.
pub fn compact(order: &[u32], keep: &[u32]) -> Vec<u32> {
    let (position, total) = exclusive_scan(keep);
    let mut kept = vec![0; total as usize];
    for i in 0..order.len() {
        if keep[i] != 0 {
            kept[position[i] as usize] = order[i];
        }
    }
    kept
}

/// A LevelDB Bloom filter over keys given by their Bloom hashes, built as
/// the device does: one byte per bit position (set to 1 by every probe that
/// hits it), then folded 8 bytes to a byte. Equals
/// `BloomFilterPolicy::new(bits_per_key).create_filter_from_hashes`.
pub fn bloom_filter_by_bytes(hashes: &[u32], bits_per_key: u32) -> Vec<u8> {
    let probes = probes_for_bits_per_key(bits_per_key);
    let bits = filter_bits(hashes.len(), bits_per_key);
    let mut bytes = vec![0u8; bits];
    for &hash in hashes {
        for_each_probe(hash, probes, bits, |bit| bytes[bit] = 1);
    }
    let mut filter: Vec<u8> = bytes
        .chunks_exact(8)
        .map(|eight| {
            eight
                .iter()
                .enumerate()
                .fold(0u8, |acc, (k, &b)| acc | (u8::from(b != 0) << k))
        })
        .collect();
    filter.push(probes);
    filter
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::gc::{is_base_level_for, keep_entry};
    use crate::parallel::merge::{merge_sequential, Item};
    use crate::steps::unpack::ParsedBlock;
    use shale_format::bloom::{bloom_hash, BloomFilterPolicy};
    use shale_format::comparator::compare_internal_keys;
    use shale_format::internal_key::{InternalKey, ParsedInternalKey, ValueType};

    /// A small deterministic generator (no extra dependency for tests).
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    fn runs(seed: u64) -> Vec<Vec<Vec<u8>>> {
        let mut state = seed;
        let mut sequence = 1;
        (0..(next(&mut state) % 7 + 1))
            .map(|_| {
                let mut run: Vec<Vec<u8>> = (0..next(&mut state) % 50)
                    .map(|_| {
                        sequence += 1;
                        let user = format!("k{:03}", next(&mut state) % 60);
                        InternalKey::new(user.as_bytes(), sequence, ValueType::Value).into_encoded()
                    })
                    .collect();
                run.sort_by(|a, b| compare_internal_keys(a, b));
                run
            })
            .collect()
    }

    #[test]
    fn rank_merge_equals_the_heap_merge() {
        for seed in 1..200 {
            let runs = runs(seed);
            let flat: Vec<&Vec<u8>> = runs.iter().flatten().collect();
            let lengths: Vec<usize> = runs.iter().map(Vec::len).collect();
            let order = rank_merge(&lengths, |a, b| compare_internal_keys(flat[a], flat[b]));

            let blocks: Vec<Arc<ParsedBlock>> = runs
                .iter()
                .map(|run| {
                    let entries: Vec<(Vec<u8>, Vec<u8>)> =
                        run.iter().map(|k| (k.clone(), Vec::new())).collect();
                    Arc::new(ParsedBlock::from_entries(&entries))
                })
                .collect();
            let items: Vec<Vec<Item>> = runs
                .iter()
                .enumerate()
                .map(|(b, run)| {
                    (0..run.len())
                        .map(|e| Item {
                            prefix: 0,
                            block: b as u32,
                            entry: e as u32,
                        })
                        .collect()
                })
                .collect();
            let slices: Vec<&[Item]> = items.iter().map(Vec::as_slice).collect();
            let heap: Vec<&[u8]> = merge_sequential(&blocks, &slices)
                .iter()
                .map(|item| blocks[item.block as usize].key(item.entry as usize))
                .collect();
            let ranked: Vec<&[u8]> = order.iter().map(|&i| flat[i as usize].as_slice()).collect();
            assert_eq!(ranked, heap, "seed {seed}");
        }
    }

    #[test]
    fn ties_are_broken_by_run_index() {
        // Equal elements in three runs: lower runs first, each run in order.
        let order = rank_merge(&[2, 1, 2], |_, _| Ordering::Equal);
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn compaction_keeps_flagged_elements_in_order() {
        let order = [5, 3, 9, 1, 0];
        assert_eq!(compact(&order, &[1, 0, 1, 1, 0]), vec![5, 9, 1]);
        assert_eq!(exclusive_scan(&[3, 0, 2]), (vec![0, 3, 3], 5));
        // The scan-and-scatter form of gc equals the predicate applied in order.
        let keys: Vec<Vec<u8>> = (0..40u64)
            .map(|i| {
                InternalKey::new(
                    format!("{}", i / 3).as_bytes(),
                    100 - i,
                    if i % 5 == 0 {
                        ValueType::Deletion
                    } else {
                        ValueType::Value
                    },
                )
                .into_encoded()
            })
            .collect();
        let keep: Vec<u32> = (0..keys.len())
            .map(|i| {
                let entry = ParsedInternalKey::parse(&keys[i]).unwrap_or_else(|_| unreachable!());
                let previous = (i > 0).then(|| {
                    ParsedInternalKey::parse(&keys[i - 1]).unwrap_or_else(|_| unreachable!())
                });
                u32::from(keep_entry(
                    &entry,
                    previous.map(|p| (p.user_key, p.sequence)),
                    90,
                    |k| is_base_level_for(&[], k),
                ))
            })
            .collect();
        let order: Vec<u32> = (0..keys.len() as u32).collect();
        let kept = compact(&order, &keep);
        let expected: Vec<u32> = order
            .iter()
            .copied()
            .filter(|&i| keep[i as usize] != 0)
            .collect();
        assert_eq!(kept, expected);
    }

    #[test]
    fn byte_vector_bloom_equals_the_policy() {
        let mut state = 7;
        for n in [0usize, 1, 2, 7, 8, 63, 64, 100, 1000] {
            for bits_per_key in [1u32, 5, 10, 16, 23] {
                let hashes: Vec<u32> = (0..n)
                    .map(|_| bloom_hash(&next(&mut state).to_le_bytes()))
                    .collect();
                let mut expected = Vec::new();
                BloomFilterPolicy::new(bits_per_key)
                    .create_filter_from_hashes(&hashes, &mut expected);
                assert_eq!(
                    bloom_filter_by_bytes(&hashes, bits_per_key),
                    expected,
                    "n={n} bits={bits_per_key}"
                );
            }
        }
    }
}
