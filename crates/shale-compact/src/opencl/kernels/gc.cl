// GC: LevelDB's drop rules as a per-element predicate over the merged order
// (shale_compact::gc::keep_entry with gc::is_base_level_for, the CPU twin),
// then stream compaction of the kept entries by an exclusive scan of the
// keep flags (scan.cl) and a scatter.

#define TYPE_DELETION 0
#define TYPE_VALUE 1

// True when no file of a deeper level can hold user key k: for every level,
// the first range whose largest key is >= k must start after k.
inline int is_base_level_for(__global const uchar* k, uint k_len, __global const uchar* range_keys,
                             __global const uint* smallest_offset, __global const uint* smallest_len,
                             __global const uint* largest_offset, __global const uint* largest_len,
                             __global const uint* level_start, uint levels) {
    for (uint level = 0; level < levels; level++) {
        uint lo = level_start[level];
        uint hi = level_start[level + 1];
        uint end = hi;
        while (lo < hi) {
            uint mid = lo + (hi - lo) / 2;
            if (compare_bytes(range_keys + largest_offset[mid], largest_len[mid], k, k_len) < 0) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo < end && compare_bytes(k, k_len, range_keys + smallest_offset[lo], smallest_len[lo]) >= 0) {
            return 0;
        }
    }
    return 1;
}

// keep[i] for merged position i (entry order[i]), from the entry and the one
// before it. A key too short to hold a trailer, or an unknown type, flags
// `error` (the CPU then reports the corruption).
__kernel void gc_keep(__global const uchar* keys, __global const uint* key_offset,
                      __global const uint* key_len, __global const uint* order, uint total,
                      ulong smallest_snapshot, __global const uchar* range_keys,
                      __global const uint* smallest_offset, __global const uint* smallest_len,
                      __global const uint* largest_offset, __global const uint* largest_len,
                      __global const uint* level_start, uint levels, __global uint* keep,
                      __global uint* error) {
    uint i = get_global_id(0);
    if (i >= total) {
        return;
    }
    uint e = order[i];
    if (e >= total) {
        atomic_or(error, 1u);
        keep[i] = 1;
        return;
    }
    __global const uchar* key = keys + key_offset[e];
    uint len = key_len[e];
    if (len < 8) {
        atomic_or(error, 1u);
        keep[i] = 1;
        return;
    }
    ulong tag = load_fixed64(key + len - 8);
    uint type = (uint)(tag & 0xff);
    ulong sequence = tag >> 8;
    if (type != TYPE_DELETION && type != TYPE_VALUE) {
        atomic_or(error, 1u);
        keep[i] = 1;
        return;
    }
    uint user_len = len - 8;
    if (i > 0) {
        uint p = order[i - 1];
        if (p < total && key_len[p] >= 8) {
            __global const uchar* previous = keys + key_offset[p];
            uint previous_len = key_len[p];
            ulong previous_sequence = load_fixed64(previous + previous_len - 8) >> 8;
            if (previous_sequence <= smallest_snapshot &&
                compare_bytes(previous, previous_len - 8, key, user_len) == 0) {
                keep[i] = 0;
                return;
            }
        }
    }
    if (type == TYPE_DELETION && sequence <= smallest_snapshot &&
        is_base_level_for(key, user_len, range_keys, smallest_offset, smallest_len, largest_offset,
                          largest_len, level_start, levels)) {
        keep[i] = 0;
        return;
    }
    keep[i] = 1;
}

// passed[i] = the number of grandparent files whose largest key sorts before
// merged entry i (the grandparent cursor position of
// boundaries::GrandparentCutter, by binary search).
__kernel void grandparent_index(__global const uchar* keys, __global const uint* key_offset,
                                __global const uint* key_len, __global const uint* order,
                                uint total, __global const uchar* gp_keys,
                                __global const uint* gp_offset, __global const uint* gp_len,
                                uint grandparents, __global uint* passed) {
    uint i = get_global_id(0);
    if (i >= total) {
        return;
    }
    uint e = order[i];
    __global const uchar* key = keys + key_offset[e];
    uint len = key_len[e];
    uint lo = 0;
    uint hi = grandparents;
    while (lo < hi) {
        uint mid = lo + (hi - lo) / 2;
        if (compare_internal_keys(key, len, gp_keys + gp_offset[mid], gp_len[mid]) > 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    passed[i] = lo;
}

// The merged entries from `from` on at which the grandparent position
// changes, and entry `from` itself: only there can the grandparent cut
// (boundaries::GrandparentCutter) end a file, since its overlap grows only
// as the position does. out[0] counts them (zeroed before); change c is
// out[1 + 3c] = the entry, out[2 + 3c] = its position, out[3 + 3c] = the
// kept entries before it (`position`, stream compaction's prefix sum), in
// no particular order; at most `capacity` are written (positions only
// grow, so the grandparents' count plus one always suffices).
__kernel void grandparent_changes(__global const uint* passed, __global const ulong* position,
                                  uint from, uint total, uint capacity,
                                  __global uint* out) {
    uint i = get_global_id(0);
    if (i < from || i >= total) {
        return;
    }
    if (i != from && passed[i] == passed[i - 1]) {
        return;
    }
    uint slot = atomic_inc(&out[0]);
    if (slot < capacity) {
        out[1 + 3 * slot] = i;
        out[2 + 3 * slot] = passed[i];
        out[3 + 3 * slot] = (uint)position[i];
    }
}

// kept[position[i]] = order[i] for every kept merged entry i.
__kernel void compact_kept(__global const uint* order, __global const uint* keep,
                           __global const ulong* position, uint total, __global uint* kept) {
    uint i = get_global_id(0);
    if (i < total && keep[i] != 0) {
        kept[(uint)position[i]] = order[i];
    }
}
