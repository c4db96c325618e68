// Exclusive prefix sums (the "scan" of stream compaction), in three steps the
// host chains (opencl/scan.rs): scan each work group's slice in local memory
// and write the group's total; scan the totals (recursively); add each
// group's scanned total to its slice. Sums are 64-bit so the host can detect
// totals that would overflow 32-bit offsets.

// Inclusive Hillis-Steele scan of one work group's values in `tmp`.
inline ulong scan_local(ulong value, __local ulong* tmp) {
    uint lid = get_local_id(0);
    uint size = get_local_size(0);
    tmp[lid] = value;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint offset = 1; offset < size; offset <<= 1) {
        ulong add = lid >= offset ? tmp[lid - offset] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        tmp[lid] += add;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    return tmp[lid];
}

// Each work item scans SCAN_ITEMS consecutive values on its own, and the
// group scans its items' sums in local memory: a group covers
// SCAN_ITEMS * its size values, with a quarter of the barrier rounds per
// value of one value per item. (opencl/scan.rs has the same constant.)
#define SCAN_ITEMS 4

// The first of this work item's SCAN_ITEMS values.
inline ulong scan_first_value() {
    return ((ulong)get_group_id(0) * get_local_size(0) + get_local_id(0)) * SCAN_ITEMS;
}

// Given this work item's values own[] (from `first`, zero past n): writes
// out[i] = sum of the group's values before i, and block_sums[g] = the
// group's total.
inline void scan_own_values(const ulong* own, ulong first, uint n, __global ulong* out,
                            __global ulong* block_sums, __local ulong* tmp) {
    ulong sum = 0;
    for (uint k = 0; k < SCAN_ITEMS; k++) {
        sum += own[k];
    }
    ulong inclusive = scan_local(sum, tmp);
    ulong running = inclusive - sum;
    for (uint k = 0; k < SCAN_ITEMS; k++) {
        if (first + k < n) {
            out[first + k] = running;
        }
        running += own[k];
    }
    if (get_local_id(0) == get_local_size(0) - 1) {
        block_sums[get_group_id(0)] = inclusive;
    }
}

// The first level, over 32-bit values.
__kernel void scan_groups_u32(__global const uint* values, uint n, __global ulong* out,
                              __global ulong* block_sums, __local ulong* tmp) {
    ulong first = scan_first_value();
    ulong own[SCAN_ITEMS];
    for (uint k = 0; k < SCAN_ITEMS; k++) {
        own[k] = first + k < n ? (ulong)values[first + k] : 0;
    }
    scan_own_values(own, first, n, out, block_sums, tmp);
}

// The upper levels, over 64-bit values (the group totals).
__kernel void scan_groups_u64(__global const ulong* values, uint n, __global ulong* out,
                              __global ulong* block_sums, __local ulong* tmp) {
    ulong first = scan_first_value();
    ulong own[SCAN_ITEMS];
    for (uint k = 0; k < SCAN_ITEMS; k++) {
        own[k] = first + k < n ? values[first + k] : 0;
    }
    scan_own_values(own, first, n, out, block_sums, tmp);
}

// out[i] += scanned_sums[i / group_size].
__kernel void scan_add_group_offsets(__global ulong* out, uint n, uint group_size,
                                     __global const ulong* scanned_sums) {
    uint i = get_global_id(0);
    if (i < n) {
        out[i] += scanned_sums[i / group_size];
    }
}
