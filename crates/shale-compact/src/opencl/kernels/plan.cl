// The output blocks' plan on the device. `sums` is the exclusive prefix sum
// of kept_sizes' `bytes` (total kept entries, interval, per_class as there):
// sums[e] - sums[s] is what entries s..e encode to after their previous
// entry, and the restart points of a block starting at s (s, s + interval,
// ...) are consecutive places of s's residue class, so what they add as
// restarts is one more difference. A block's size is then known for any
// start and end without a scan over its entries: each possible start finds
// its end by a binary search (block_ends), and every restart group its
// place once the host has chosen the blocks (layout_groups). CPU twins:
// steps::plan::BlockSizer and opencl::pack::tests::group_layout.

// Place in `sums` of restart point s's class entry.
inline uint restart_place(uint total, uint interval, uint per_class, uint s) {
    return total + 1 + (s % interval) * per_class + s / interval;
}

// Bytes of the encoded entries s..e (e > s) as one block, before its
// restart array: what BlockBuilder's buffer holds.
inline ulong planned_entries_len(__global const ulong* sums, uint total, uint interval,
                                 uint per_class, uint s, uint e) {
    uint k = (e - s - 1) / interval;
    uint place = restart_place(total, interval, per_class, s);
    return sums[e] - sums[s] + sums[place + k + 1] - sums[place];
}

// BlockBuilder's size estimate of entries s..e (e > s) as one block: the
// entries, then a restart array of one u32 per `interval` entries and its
// length.
inline ulong planned_block_len(__global const ulong* sums, uint total, uint interval,
                               uint per_class, uint s, uint e) {
    ulong restarts = (e - s - 1) / interval + 1;
    return planned_entries_len(sums, total, interval, per_class, s, e) + 4 * restarts + 4;
}

// For each kept entry s as a block's first: where that block ends (ends[2s],
// exclusive) and its size (ends[2s + 1]). It ends after the first entry at
// which it reaches block_size (table_builder::block_is_full), else before
// the first stop after s (an output file cut: stops[] sorted, the kept
// entries a file must end before), else at the end of the slice. A block
// of max_entries entries always reaches block_size (each entry encodes to
// at least 3 bytes), which bounds the search.
__kernel void block_ends(__global const ulong* sums, uint total, uint interval, uint per_class,
                         __global const uint* stops, uint stop_count, uint block_size,
                         uint max_entries, __global uint* ends) {
    uint s = get_global_id(0);
    if (s >= total) {
        return;
    }
    uint lo = 0;
    uint hi = stop_count;
    while (lo < hi) {
        uint mid = lo + (hi - lo) / 2;
        if (stops[mid] <= s) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    uint limit = lo < stop_count ? stops[lo] : total;
    uint last = limit - s > max_entries ? s + max_entries : limit;
    // Smallest e in (s, last] whose block is full, else `last`.
    uint low = s + 1;
    uint high = last;
    while (low < high) {
        uint mid = low + (high - low) / 2;
        if (planned_block_len(sums, total, interval, per_class, s, mid) >= block_size) {
            high = mid;
        } else {
            low = mid + 1;
        }
    }
    ulong len = planned_block_len(sums, total, interval, per_class, s, low);
    ends[2 * s] = low;
    ends[2 * s + 1] = len > 0xffffffffUL ? 0xffffffffu : (uint)len;
}

// The restart groups of the chosen blocks: block b holds kept entries
// blocks[3b]..blocks[3b + 3], starts at output offset blocks[3b + 1] and
// its restart groups are groups blocks[3b + 2]..blocks[3b + 5] (entry
// `blocks_count` closes the list). For each group g: its first entry,
// entry count, output offset, its block's first group and whether it is
// its block's last (encode_groups' inputs). Of the first `key_blocks`
// blocks, the first group also writes the length of its block's first key
// to key_lengths[2b], the last group that of its last key to
// key_lengths[2b + 1] (sizes: kept_sizes'), so that the host can place the
// boundary keys before gather_keys copies them.
__kernel void layout_groups(__global const ulong* sums, uint total, uint interval,
                            uint per_class, __global const uint* blocks, uint blocks_count,
                            uint groups, __global uint* group_first, __global uint* group_count,
                            __global uint* group_offset, __global uint* block_first_group,
                            __global uchar* group_last, __global const uint* sizes,
                            uint key_blocks, __global uint* key_lengths) {
    uint g = get_global_id(0);
    if (g >= groups) {
        return;
    }
    // The last block whose first group is at or before g.
    uint lo = 0;
    uint hi = blocks_count;
    while (hi - lo > 1) {
        uint mid = lo + (hi - lo) / 2;
        if (blocks[3 * mid + 2] <= g) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    uint s = blocks[3 * lo];
    uint end = blocks[3 * lo + 3];
    uint first_group = blocks[3 * lo + 2];
    uint k = g - first_group;
    uint first = s + k * interval;
    uint offset = blocks[3 * lo + 1];
    if (k > 0) {
        offset += (uint)planned_entries_len(sums, total, interval, per_class, s, first);
        // planned_entries_len(s, first) counts the restarts s .. first -
        // interval: exactly the ones before `first`.
    }
    uint group_end = min(first + interval, end);
    uint is_last = g + 1 == blocks[3 * lo + 5] ? 1 : 0;
    group_first[g] = first;
    group_count[g] = group_end - first;
    group_offset[g] = offset;
    block_first_group[g] = first_group;
    group_last[g] = is_last;
    if (lo < key_blocks) {
        if (k == 0) {
            key_lengths[2 * lo] = sizes[3 * first];
        }
        if (is_last) {
            key_lengths[2 * lo + 1] = sizes[3 * (group_end - 1)];
        }
    }
}
