// Pack: the kept entries into data blocks. kept_sizes gives every kept
// entry's lengths and shared prefix, and each entry's encoded size both as
// it follows the previous entry and as a restart point, for the device's
// block plan (plan.cl); encode_groups then writes every restart group in
// parallel, one work item per group (the paper's Pack unit), and the last
// group of each block writes the block's restart array. CPU twin:
// shale_format::block_builder.

inline uint encoded_entry_len(uint shared, uint key_len, uint value_len) {
    uint non_shared = key_len - shared;
    return varint_length(shared) + varint_length(non_shared) + varint_length(value_len) +
           non_shared + value_len;
}

// For kept entry j < total: sizes[3j] = key length, sizes[3j+1] = value
// length, sizes[3j+2] = bytes shared with the previous kept entry's key (0
// for the first); bytes[j] = its encoded length after the previous entry;
// bytes[total + 1 + p(j)] = what it adds as a restart point, where p(j) =
// (j % interval) * per_class + j / interval lays each residue class of
// `interval` out contiguously (so one prefix sum gives every class's
// running sum). bytes[total], bytes[total + 1 + interval * per_class] and
// the places of j >= total are 0. Launched over interval * per_class + 1
// items (at least total + 1).
__kernel void kept_sizes(__global const uchar* keys, __global const uint* key_offset,
                         __global const uint* key_len, __global const uint* value_len,
                         __global const uint* kept, uint total, uint interval, uint per_class,
                         __global uint* sizes, __global uint* bytes) {
    uint j = get_global_id(0);
    uint classes = interval * per_class;
    if (j > classes) {
        return;
    }
    if (j == classes) {
        bytes[total] = 0;
        bytes[total + 1 + classes] = 0;
        return;
    }
    uint restart_place = total + 1 + (j % interval) * per_class + j / interval;
    if (j >= total) {
        bytes[restart_place] = 0;
        return;
    }
    uint e = kept[j];
    uint shared = 0;
    if (j > 0) {
        uint p = kept[j - 1];
        shared = shared_prefix_len(keys + key_offset[p], key_len[p], keys + key_offset[e], key_len[e]);
    }
    uint klen = key_len[e];
    uint vlen = value_len[e];
    sizes[3 * j] = klen;
    sizes[3 * j + 1] = vlen;
    sizes[3 * j + 2] = shared;
    uint after = encoded_entry_len(shared, klen, vlen);
    bytes[j] = after;
    bytes[restart_place] = encoded_entry_len(0, klen, vlen) - after;
}

// Group g holds kept entries [group_first[g], group_first[g] + group_count[g])
// and starts at out[group_offset[g]]; its block's first group is
// block_first_group[g]; group_last[g] != 0 for the last group of a block.
__kernel void encode_groups(__global const uchar* keys, __global const uint* key_offset,
                            __global const uchar* data, __global const uint* value_offset,
                            __global const uint* kept, __global const uint* sizes,
                            __global const uint* group_first, __global const uint* group_count,
                            __global const uint* group_offset,
                            __global const uint* block_first_group,
                            __global const uchar* group_last, uint groups,
                            __global uchar* out) {
    uint g = get_global_id(0);
    if (g >= groups) {
        return;
    }
    uint pos = group_offset[g];
    uint first = group_first[g];
    uint end = first + group_count[g];
    for (uint j = first; j < end; j++) {
        uint e = kept[j];
        uint key_len = sizes[3 * j];
        uint value_len = sizes[3 * j + 1];
        uint shared = j == first ? 0 : sizes[3 * j + 2];
        uint non_shared = key_len - shared;
        put_varint32(out, &pos, shared);
        put_varint32(out, &pos, non_shared);
        put_varint32(out, &pos, value_len);
        __global const uchar* key = keys + key_offset[e] + shared;
        for (uint i = 0; i < non_shared; i++) {
            out[pos++] = key[i];
        }
        __global const uchar* value = data + value_offset[e];
        for (uint i = 0; i < value_len; i++) {
            out[pos++] = value[i];
        }
    }
    if (group_last[g]) {
        uint block_group = block_first_group[g];
        uint block_start = group_offset[block_group];
        uint restarts = g - block_group + 1;
        for (uint r = 0; r < restarts; r++) {
            put_fixed32(out, pos, group_offset[block_group + r] - block_start);
            pos += 4;
        }
        put_fixed32(out, pos, restarts);
    }
}

// Copies the keys of kept entries which[w] to out[out_offset[w]], for the
// host's index entries and file bounds.
__kernel void gather_keys(__global const uchar* keys, __global const uint* key_offset,
                          __global const uint* key_len, __global const uint* kept,
                          __global const uint* which, __global const uint* out_offset, uint n,
                          __global uchar* out) {
    uint w = get_global_id(0);
    if (w >= n) {
        return;
    }
    uint e = kept[which[w]];
    __global const uchar* key = keys + key_offset[e];
    uint len = key_len[e];
    uint at = out_offset[w];
    for (uint i = 0; i < len; i++) {
        out[at + i] = key[i];
    }
}
