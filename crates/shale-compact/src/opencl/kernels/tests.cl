// Tiny kernels that run one device helper of common.cl per work item, so the
// Rust tests can compare each helper with its shale-format original on many
// inputs: every device helper is tested on its own, not only through the
// kernels that use it.

// Decodes a varint32 at data[start[i], limit[i]): value[i] and the bytes it
// took in used[i] (0 when decoding failed).
__kernel void test_decode_varint32(__global const uchar* data, __global const uint* start,
                                   __global const uint* limit, uint n,
                                   __global uint* value, __global uint* used) {
    uint i = get_global_id(0);
    if (i >= n) {
        return;
    }
    uint pos = start[i];
    uint v = 0;
    if (decode_varint32(data, &pos, limit[i], &v)) {
        value[i] = v;
        used[i] = pos - start[i];
    } else {
        value[i] = 0;
        used[i] = 0;
    }
}

// Encodes value[i] as a varint at out[5 * i]; used[i] is its length and
// must equal varint_length(value[i]).
__kernel void test_put_varint32(__global const uint* value, uint n, __global uchar* out,
                                __global uint* used, __global uint* length) {
    uint i = get_global_id(0);
    if (i >= n) {
        return;
    }
    uint pos = 5 * i;
    put_varint32(out, &pos, value[i]);
    used[i] = pos - 5 * i;
    length[i] = varint_length(value[i]);
}

// CRC32C (unmasked and masked) of data[start[i], start[i] + len[i]).
__kernel void test_crc32c(__global const uchar* data, __global const uint* start,
                          __global const uint* len, uint n, __global uint* crc,
                          __global uint* masked) {
    uint i = get_global_id(0);
    if (i >= n) {
        return;
    }
    uint c = crc32c_extend(0, data, start[i], len[i]);
    crc[i] = c;
    masked[i] = crc32c_mask(c);
}

// LevelDB's Bloom hash of data[start[i], start[i] + len[i]).
__kernel void test_bloom_hash(__global const uchar* data, __global const uint* start,
                              __global const uint* len, uint n, __global uint* hash) {
    uint i = get_global_id(0);
    if (i >= n) {
        return;
    }
    hash[i] = leveldb_hash(data + start[i], len[i], BLOOM_HASH_SEED);
}

// For pair i, keys a = (start[2i], len[2i]) and b = (start[2i+1], len[2i+1]):
// the internal-key order, the bytewise order, the shared prefix length and
// the user-key prefix of a from `prefix_offset`.
__kernel void test_compare_keys(__global const uchar* data, __global const uint* start,
                                __global const uint* len, uint n, uint prefix_offset,
                                __global int* internal_order, __global int* bytewise_order,
                                __global uint* shared, __global ulong* prefix) {
    uint i = get_global_id(0);
    if (i >= n) {
        return;
    }
    __global const uchar* a = data + start[2 * i];
    __global const uchar* b = data + start[2 * i + 1];
    uint a_len = len[2 * i];
    uint b_len = len[2 * i + 1];
    internal_order[i] = compare_internal_keys(a, a_len, b, b_len);
    bytewise_order[i] = compare_bytes(a, a_len, b, b_len);
    shared[i] = shared_prefix_len(a, a_len, b, b_len);
    prefix[i] = user_key_prefix(a, a_len, prefix_offset);
}
