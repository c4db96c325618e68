// Bloom filters by a byte vector (Algorithm 2 of the hierarchical-pipeline
// paper): every key sets one byte per probe, so concurrent writers never
// race on a bit (they all write 1); then each output byte ORs 8 bytes into
// bits. The result equals BloomFilterPolicy::create_filter_from_hashes byte
// for byte (CPU twin: shale_compact::testing::twins::bloom_filter_by_bytes).
//
// Filters cover consecutive ranges of the kept entries: filter f holds
// entries [filter_first[f], filter_first[f + 1]) and has filter_bits[f]
// bits; its byte vector starts at 8 * filter_out[f], its bit array at
// filter_out[f].

__kernel void bloom_set(__global const uchar* keys, __global const uint* key_offset,
                        __global const uint* key_len, __global const uint* kept,
                        __global const uint* filter_first, uint filters,
                        __global const uint* filter_bits, __global const uint* filter_out,
                        uint probes, __global uchar* bytes) {
    uint j = get_global_id(0);
    if (j >= filter_first[filters]) {
        return;
    }
    // The filter holding entry j: the last f with filter_first[f] <= j.
    uint lo = 0;
    uint hi = filters;
    while (lo < hi) {
        uint mid = lo + (hi - lo) / 2;
        if (filter_first[mid + 1] <= j) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    uint f = lo;
    uint e = kept[j];
    uint h = leveldb_hash(keys + key_offset[e], user_key_len(key_len[e]), BLOOM_HASH_SEED);
    uint delta = (h >> 17) | (h << 15);
    uint bits = filter_bits[f];
    __global uchar* vector = bytes + 8 * filter_out[f];
    for (uint p = 0; p < probes; p++) {
        vector[h % bits] = 1;
        h += delta;
    }
}

// bits[b] gathers bytes[8b .. 8b + 8) (bit k from byte 8b + k).
__kernel void bloom_fold(__global const uchar* bytes, uint n, __global uchar* bits) {
    uint b = get_global_id(0);
    if (b >= n) {
        return;
    }
    uchar value = 0;
    for (uint k = 0; k < 8; k++) {
        if (bytes[8 * b + k] != 0) {
            value |= (uchar)(1u << k);
        }
    }
    bits[b] = value;
}
