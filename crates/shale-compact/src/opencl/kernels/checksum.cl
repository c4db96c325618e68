// Block checksums: LevelDB's block trailer is the compression type byte and
// the masked CRC32C of the block contents followed by that byte
// (shale_format::format::block_checksum).

// One work item per input block, read with its trailer at data[offset[b]]:
// contents_len[b] bytes of contents, the type byte, the stored masked CRC.
// ok[b] = 1 when the stored CRC matches.
__kernel void check_block_crc(__global const uchar* data, __global const uint* offset,
                              __global const uint* contents_len, uint blocks,
                              __global uint* ok) {
    uint b = get_global_id(0);
    if (b >= blocks) {
        return;
    }
    uint start = offset[b];
    uint len = contents_len[b];
    // The type byte directly follows the contents: one CRC over both.
    uint actual = crc32c_mask(crc32c_extend(0, data, start, len + 1));
    uint stored = load_fixed32(data + start + len + 1);
    ok[b] = actual == stored ? 1u : 0u;
}

// One work item per finished block data[offset[b], offset[b] + len[b]) to be
// stored with compression type kind[b]: the masked CRC for its trailer.
__kernel void block_checksum(__global const uchar* data, __global const uint* offset,
                             __global const uint* len, __global const uchar* kind, uint blocks,
                             __global uint* checksum) {
    uint b = get_global_id(0);
    if (b >= blocks) {
        return;
    }
    uint crc = crc32c_extend(0, data, offset[b], len[b]);
    // Continue the CRC over the one type byte.
    uint c = ~crc;
    c = CRC32C_TABLE[(c ^ kind[b]) & 0xffu] ^ (c >> 8);
    checksum[b] = crc32c_mask(~c);
}

// Writes the trailer of the block data[offset, offset + len) stored as
// `kind` right after it: the type byte, then the masked CRC32C of the
// block and that byte, little-endian, as a table file holds it.
inline void put_block_trailer(__global uchar* data, uint offset, uint len, uchar kind) {
    uint c = ~crc32c_extend(0, data, offset, len);
    // Continue the CRC over the type byte.
    c = CRC32C_TABLE[(c ^ kind) & 0xffu] ^ (c >> 8);
    uint masked = crc32c_mask(~c);
    uint at = offset + len;
    data[at] = kind;
    data[at + 1] = (uchar)(masked & 0xffu);
    data[at + 2] = (uchar)((masked >> 8) & 0xffu);
    data[at + 3] = (uchar)((masked >> 16) & 0xffu);
    data[at + 4] = (uchar)(masked >> 24);
}

// One work item per finished block data[offset[b], offset[b] + len[b]),
// stored uncompressed: writes its trailer in place after it (type byte 0),
// so that the blocks come back exactly as a table file holds them.
__kernel void block_trailers(__global uchar* data, __global const uint* offset,
                             __global const uint* len, uint blocks) {
    uint b = get_global_id(0);
    if (b < blocks) {
        put_block_trailer(data, offset[b], len[b], 0);
    }
}
