// Merge by rank (Algorithm 1 of the hierarchical-pipeline paper). Every
// input run is sorted; the output position of element i of run r is its
// index in r plus, for every other run s, the number of elements of s that
// sort before it (binary search). Ties between runs, which distinct entries
// never have, are broken by run index so ranks are unique. CPU twin:
// shale_compact::testing::twins::rank_merge (and the heap merge of
// parallel/merge.rs gives the same order).

// Order of entries a and b: the 8-byte user-key prefix first, then the
// internal keys.
inline int compare_entries(__global const uchar* keys, __global const uint* key_offset,
                           __global const uint* key_len, __global const ulong* prefix,
                           uint a, uint b) {
    ulong pa = prefix[a];
    ulong pb = prefix[b];
    if (pa != pb) {
        return pa < pb ? -1 : 1;
    }
    return compare_internal_keys(keys + key_offset[a], key_len[a], keys + key_offset[b], key_len[b]);
}

// The run holding element i: the last r with run_start[r] <= i.
inline uint run_of(__global const uint* run_start, uint runs, uint i) {
    uint lo = 0;
    uint hi = runs + 1;
    // First index whose start is > i, minus one.
    while (lo < hi) {
        uint mid = lo + (hi - lo) / 2;
        if (run_start[mid] <= i) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo - 1;
}

// Checks that every run is strictly increasing: ranks are a permutation only
// then. Flags `error` otherwise (the job then goes to the CPU).
__kernel void check_runs_sorted(__global const uchar* keys, __global const uint* key_offset,
                                __global const uint* key_len, __global const ulong* prefix,
                                __global const uint* run_start, uint runs, uint total,
                                __global uint* error) {
    uint i = get_global_id(0);
    if (i >= total) {
        return;
    }
    uint r = run_of(run_start, runs, i);
    if (i > run_start[r] && compare_entries(keys, key_offset, key_len, prefix, i - 1, i) >= 0) {
        atomic_or(error, 1u);
    }
}

// order[rank(i)] = i for every element i.
__kernel void rank_merge(__global const uchar* keys, __global const uint* key_offset,
                         __global const uint* key_len, __global const ulong* prefix,
                         __global const uint* run_start, uint runs, uint total,
                         __global uint* order) {
    uint i = get_global_id(0);
    if (i >= total) {
        return;
    }
    uint r = run_of(run_start, runs, i);
    uint rank = i - run_start[r];
    for (uint s = 0; s < runs; s++) {
        if (s == r) {
            continue;
        }
        uint first = run_start[s];
        uint lo = first;
        uint hi = run_start[s + 1];
        // Count the elements of s before i: smaller ones, and equal ones of
        // a run with a smaller index.
        while (lo < hi) {
            uint mid = lo + (hi - lo) / 2;
            int c = compare_entries(keys, key_offset, key_len, prefix, mid, i);
            if (c < 0 || (c == 0 && s < r)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        rank += lo - first;
    }
    order[rank] = i;
}
