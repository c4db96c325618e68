// Unpack: one work item per restart group of an input data block (the
// smallest unit whose keys do not depend on another: keys are
// prefix-compressed only within a group). CPU twin:
// shale_compact::steps::unpack::parse_restart_group.
//
// Two passes: unpack_count sizes every group (entries, bytes of full keys)
// and validates it; after an exclusive scan of both counts, unpack_parse
// writes the full keys into the key arena and one tuple per entry
// <key offset, key length, value offset, value length, user-key prefix>.
// Values are not copied: value offsets point into `data`, where the blocks
// were uploaded (lazy value movement).

// Largest full-key bytes one group may expand to; larger groups are sent
// back to the CPU (prefix compression can make keys far longer than the
// bytes stored).
#define MAX_GROUP_KEY_BYTES (1u << 24)

__kernel void unpack_count(__global const uchar* data, __global const uint* group_start,
                           __global const uint* group_limit, uint groups,
                           __global uint* entry_count, __global uint* key_bytes,
                           __global uint* error) {
    uint g = get_global_id(0);
    if (g >= groups) {
        return;
    }
    uint pos = group_start[g];
    uint limit = group_limit[g];
    uint count = 0;
    uint bytes = 0;
    uint previous_len = 0;
    int ok = 1;
    while (pos < limit) {
        uint shared, non_shared, value_len;
        if (!decode_varint32(data, &pos, limit, &shared) ||
            !decode_varint32(data, &pos, limit, &non_shared) ||
            !decode_varint32(data, &pos, limit, &value_len)) {
            ok = 0;
            break;
        }
        if ((ulong)non_shared + (ulong)value_len > (ulong)(limit - pos)) {
            ok = 0;
            break;
        }
        if (count == 0 ? shared != 0 : shared > previous_len) {
            ok = 0;
            break;
        }
        uint key_len = shared + non_shared;
        if (key_len > MAX_GROUP_KEY_BYTES - bytes) {
            ok = 0;
            break;
        }
        bytes += key_len;
        previous_len = key_len;
        count++;
        pos += non_shared + value_len;
    }
    if (!ok) {
        atomic_or(error, 1u);
        count = 0;
        bytes = 0;
    }
    entry_count[g] = count;
    key_bytes[g] = bytes;
}

__kernel void unpack_parse(__global const uchar* data, __global const uint* group_start,
                           __global const uint* group_limit, uint groups,
                           __global const ulong* entry_base, __global const ulong* key_base,
                           uint prefix_offset, __global uchar* keys,
                           __global uint* key_offset, __global uint* key_len,
                           __global uint* value_offset, __global uint* value_len,
                           __global ulong* prefix) {
    uint g = get_global_id(0);
    if (g >= groups) {
        return;
    }
    uint pos = group_start[g];
    uint limit = group_limit[g];
    uint e = (uint)entry_base[g];
    uint k = (uint)key_base[g];
    uint previous = k;
    while (pos < limit) {
        uint shared, non_shared, length;
        // unpack_count validated the group: these cannot fail.
        if (!decode_varint32(data, &pos, limit, &shared) ||
            !decode_varint32(data, &pos, limit, &non_shared) ||
            !decode_varint32(data, &pos, limit, &length)) {
            return;
        }
        uint start = k;
        for (uint i = 0; i < shared; i++) {
            keys[k++] = keys[previous + i];
        }
        for (uint i = 0; i < non_shared; i++) {
            keys[k++] = data[pos + i];
        }
        pos += non_shared;
        uint len = shared + non_shared;
        key_offset[e] = start;
        key_len[e] = len;
        value_offset[e] = pos;
        value_len[e] = length;
        prefix[e] = user_key_prefix(keys + start, len, prefix_offset);
        pos += length;
        previous = start;
        e++;
    }
}

// The restart groups of every block, in two passes (the rules of
// steps::unpack::restart_groups_into). `blocks_plan` holds the blocks'
// contents offsets in `data`, then their lengths. First, one work item per
// block: its restart count, or 0 when the block is too short for one or
// the count does not fit the block (a block has at least one restart).
__kernel void restart_counts(__global const uchar* data, __global const uint* blocks_plan,
                             uint blocks, __global uint* count) {
    uint b = get_global_id(0);
    if (b >= blocks) {
        return;
    }
    uint at = blocks_plan[b];
    uint size = blocks_plan[blocks + b];
    uint n = 0u;
    if (size >= 4u) {
        n = load_fixed32(data + at + size - 4u);
        if (n > (size - 4u) / 4u) {
            n = 0u;
        }
    }
    count[b] = n;
}

// Then, one work item per block: its groups' absolute [start, limit) in
// `data`, from group first[b] on (an exclusive scan of the counts). When
// the restart points are out of order it sets *error (the flag
// unpack_count sets too) and makes every group of the block empty, so
// that the kernels after it read nothing outside the block.
__kernel void restart_groups(__global const uchar* data, __global const uint* blocks_plan,
                             uint blocks, __global const uint* first,
                             __global uint* group_start, __global uint* group_limit,
                             __global uint* error) {
    uint b = get_global_id(0);
    if (b >= blocks) {
        return;
    }
    uint at = blocks_plan[b];
    uint size = blocks_plan[blocks + b];
    uint n = load_fixed32(data + at + size - 4u);
    uint restarts = size - (1u + n) * 4u;
    uint previous_end = 0u;
    uint out = first[b];
    for (uint g = 0; g < n; g++) {
        uint start = load_fixed32(data + at + restarts + 4u * g);
        uint limit = g + 1u < n ? load_fixed32(data + at + restarts + 4u * (g + 1u)) : restarts;
        if (start != previous_end || limit < start || limit > restarts) {
            *error = 1u;
            for (uint e = 0; e < n; e++) {
                group_start[out + e] = at;
                group_limit[out + e] = at;
            }
            return;
        }
        group_start[out + g] = at + start;
        group_limit[out + g] = at + limit;
        previous_end = limit;
    }
}
