// Snappy compression on the device, byte for byte what the `snap` crate's
// `raw::Encoder` writes (and so what every other executor stores): the same
// fragments of 64 KiB, hash table sizes, hash, skipping heuristic and
// tag choices. Written by hand because the output must be identical, not
// merely valid Snappy: table files are compared byte for byte with the
// `streaming` executor's.

#define SNAPPY_MAX_FRAGMENT 65536u
#define SNAPPY_MAX_TABLE 16384u
#define SNAPPY_INPUT_MARGIN 15u
#define SNAPPY_MIN_NON_LITERAL (1u + 1u + SNAPPY_INPUT_MARGIN)

// Entries of the hash table for a fragment of `len` bytes (256 to 16384,
// the first power of two at or above `len`).
inline uint snappy_table_size(uint len) {
    uint size = 256u;
    while (size < SNAPPY_MAX_TABLE && size < len) {
        size *= 2u;
    }
    return size;
}

inline uint snappy_load32(__global const uchar* p) {
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

inline ulong snappy_load64(__global const uchar* p) {
    return (ulong)snappy_load32(p) | ((ulong)snappy_load32(p + 4) << 32);
}

inline uint snappy_hash(uint x, uint shift) {
    return (x * 0x1E35A7BDu) >> shift;
}

// Literal src[start, end) at out[d]; returns the new d.
inline uint snappy_emit_literal(__global const uchar* src, uint start, uint end,
                                __global uchar* out, uint d) {
    uint len = end - start;
    uint n = len - 1u;
    if (n <= 59u) {
        out[d++] = (uchar)(n << 2);
    } else if (n < 256u) {
        out[d++] = (uchar)(60u << 2);
        out[d++] = (uchar)n;
    } else {
        out[d++] = (uchar)(61u << 2);
        out[d++] = (uchar)(n & 0xffu);
        out[d++] = (uchar)(n >> 8);
    }
    for (uint i = 0; i < len; i++) {
        out[d + i] = src[start + i];
    }
    return d + len;
}

inline uint snappy_emit_copy2(uint offset, uint len, __global uchar* out, uint d) {
    out[d] = (uchar)(((len - 1u) << 2) | 2u);
    out[d + 1] = (uchar)(offset & 0xffu);
    out[d + 2] = (uchar)(offset >> 8);
    return d + 3u;
}

inline uint snappy_emit_copy(uint offset, uint len, __global uchar* out, uint d) {
    while (len >= 68u) {
        d = snappy_emit_copy2(offset, 64u, out, d);
        len -= 64u;
    }
    if (len > 64u) {
        d = snappy_emit_copy2(offset, 60u, out, d);
        len -= 60u;
    }
    if (len <= 11u && offset <= 2047u) {
        out[d] = (uchar)(((offset >> 8) << 5) | ((len - 4u) << 2) | 1u);
        out[d + 1] = (uchar)(offset & 0xffu);
        return d + 2u;
    }
    return snappy_emit_copy2(offset, len, out, d);
}

// One fragment src[0, len) (len >= SNAPPY_MIN_NON_LITERAL) with a zeroed
// table of `1 << (32 - shift)` entries; returns the new d.
inline uint snappy_compress_fragment(__global const uchar* src, uint len,
                                     __global ushort* table, uint shift,
                                     __global uchar* out, uint d) {
    uint s = 1u;
    uint s_limit = len - SNAPPY_INPUT_MARGIN;
    uint next_emit = 0u;
    uint next_hash = snappy_hash(snappy_load32(src + s), shift);
    for (;;) {
        uint skip = 32u;
        uint candidate;
        uint s_next = s;
        for (;;) {
            s = s_next;
            uint between = skip >> 5;
            s_next = s + between;
            skip += between;
            if (s_next > s_limit) {
                goto done;
            }
            candidate = table[next_hash];
            table[next_hash] = (ushort)s;
            next_hash = snappy_hash(snappy_load32(src + s_next), shift);
            if (snappy_load32(src + s) == snappy_load32(src + candidate)) {
                break;
            }
        }
        d = snappy_emit_literal(src, next_emit, s, out, d);
        for (;;) {
            uint base = s;
            s += 4u;
            uint c = candidate + 4u;
            while (s < len && src[s] == src[c]) {
                s++;
                c++;
            }
            d = snappy_emit_copy(base - candidate, s - base, out, d);
            next_emit = s;
            if (s >= s_limit) {
                goto done;
            }
            ulong x = snappy_load64(src + s - 1u);
            uint prev_hash = snappy_hash((uint)x, shift);
            table[prev_hash] = (ushort)(s - 1u);
            uint cur_hash = snappy_hash((uint)(x >> 8), shift);
            candidate = table[cur_hash];
            table[cur_hash] = (ushort)s;
            if ((uint)(x >> 8) != snappy_load32(src + candidate)) {
                next_hash = snappy_hash((uint)(x >> 16), shift);
                s += 1u;
                break;
            }
        }
    }
done:
    if (next_emit < len) {
        d = snappy_emit_literal(src, next_emit, len, out, d);
    }
    return d;
}

// Blocks data[offset, offset + len) for b < blocks, each Snappy-compressed
// into out[out_offset, ...) (room for 32 + len + len / 6 bytes,
// `snap::raw::max_compress_len`), its length in out_len[b]. `plan` holds
// the blocks' offsets, then their lengths, then their out_offsets (one
// upload). Work item w < workers compresses blocks w, w + workers, ...
// with its own hash table: tables[w * table_stride, ...), at least
// snappy_table_size of the largest fragment, so that the scratch is bounded
// by the work items, not by the blocks. (A launch rounds the global size up
// to whole work groups: `workers`, not get_global_size, counts them.)
__kernel void snappy_compress(__global const uchar* data, __global const uint* plan,
                              uint blocks, __global uchar* out, __global ushort* tables,
                              uint table_stride, uint workers, __global uint* out_len) {
    uint w = get_global_id(0);
    if (w >= workers) {
        return;
    }
    __global ushort* table = tables + (ulong)w * table_stride;
    for (uint b = w; b < blocks; b += workers) {
        __global const uchar* input = data + plan[b];
        uint total = plan[blocks + b];
        __global uchar* o = out + plan[2u * blocks + b];
        // The uncompressed length, as a varint.
        uint d = 0u;
        uint v = total;
        while (v >= 0x80u) {
            o[d++] = (uchar)(v | 0x80u);
            v >>= 7;
        }
        o[d++] = (uchar)v;
        for (uint start = 0u; start < total; start += SNAPPY_MAX_FRAGMENT) {
            uint n = min(total - start, SNAPPY_MAX_FRAGMENT);
            __global const uchar* src = input + start;
            if (n < SNAPPY_MIN_NON_LITERAL) {
                d = snappy_emit_literal(src, 0u, n, o, d);
                continue;
            }
            uint size = snappy_table_size(n);
            for (uint i = 0; i < size; i++) {
                table[i] = 0;
            }
            uint shift = 32u - (31u - clz(size));
            d = snappy_compress_fragment(src, n, table, shift, o, d);
        }
        out_len[b] = d;
    }
}

// One work item per finished block: its bytes as stored, to
// stored[dst, ...), followed by its trailer (the kind byte and the masked
// CRC32C of the bytes and that byte), as a table file holds it. `plan`
// holds the blocks' sources, then their lengths with the kind in the top
// bit (1: Snappy, from `compressed`; 0: none, from `raw`), then their dsts
// (one upload).
__kernel void place_stored_blocks(__global const uchar* raw, __global const uchar* compressed,
                                  __global const uint* plan, uint blocks,
                                  __global uchar* stored) {
    uint b = get_global_id(0);
    if (b >= blocks) {
        return;
    }
    uint len_kind = plan[blocks + b];
    uchar kind = (uchar)(len_kind >> 31);
    uint n = len_kind & 0x7fffffffu;
    uint dst = plan[2u * blocks + b];
    __global const uchar* from = (kind != 0 ? compressed : raw) + plan[b];
    __global uchar* to = stored + dst;
    for (uint i = 0; i < n; i++) {
        to[i] = from[i];
    }
    put_block_trailer(stored, dst, n, kind);
}

// Snappy decompression of src[0, src_len) into dst[0, dst_len), where
// dst_len is the length the header gives. Returns 1 when the input is
// valid Snappy of exactly that length, else 0, accepting exactly what the
// `snap` crate's decoder accepts (the host's decoder): a header varint of
// 1 to 5 bytes; literals and copies within the input; copy offsets from 1
// to the bytes written so far; the output filled exactly.
inline uint snappy_decompress_block(__global const uchar* src, uint src_len,
                                    __global uchar* dst, uint dst_len) {
    if (src_len == 0u) {
        return 0u;
    }
    // The header: the uncompressed length, as a varint of at most 5 bytes.
    ulong header = 0;
    uint s = 0u;
    uint shift = 0u;
    for (;;) {
        if (s >= src_len || s >= 10u) {
            return 0u;
        }
        uchar byte = src[s++];
        header |= (ulong)(byte & 0x7fu) << shift;
        if ((byte & 0x80u) == 0) {
            break;
        }
        shift += 7u;
    }
    if (s > 5u || header != (ulong)dst_len) {
        return 0u;
    }
    uint d = 0u;
    while (s < src_len) {
        uchar tag = src[s++];
        if ((tag & 3u) == 0u) {
            uint len = (uint)(tag >> 2) + 1u;
            if (len >= 61u) {
                uint count = len - 60u;
                if (src_len - s < count) {
                    return 0u;
                }
                ulong value = 0;
                for (uint i = 0; i < count; i++) {
                    value |= (ulong)src[s + i] << (8u * i);
                }
                s += count;
                if (value + 1u > (ulong)(src_len - s) || value + 1u > (ulong)(dst_len - d)) {
                    return 0u;
                }
                len = (uint)value + 1u;
            } else if (len > src_len - s || len > dst_len - d) {
                return 0u;
            }
            for (uint i = 0; i < len; i++) {
                dst[d + i] = src[s + i];
            }
            s += len;
            d += len;
            continue;
        }
        uint len;
        uint offset;
        if ((tag & 3u) == 1u) {
            if (s + 1u > src_len) {
                return 0u;
            }
            len = 4u + ((tag >> 2) & 7u);
            offset = ((uint)(tag >> 5) << 8) | src[s];
            s += 1u;
        } else if ((tag & 3u) == 2u) {
            if (s + 2u > src_len) {
                return 0u;
            }
            len = (uint)(tag >> 2) + 1u;
            offset = (uint)src[s] | ((uint)src[s + 1] << 8);
            s += 2u;
        } else {
            if (s + 4u > src_len) {
                return 0u;
            }
            len = (uint)(tag >> 2) + 1u;
            offset = (uint)src[s] | ((uint)src[s + 1] << 8) | ((uint)src[s + 2] << 16) |
                     ((uint)src[s + 3] << 24);
            s += 4u;
        }
        if (offset == 0u || offset > d || len > dst_len - d) {
            return 0u;
        }
        // Byte by byte: a copy may overlap what it writes.
        for (uint i = 0; i < len; i++) {
            dst[d + i] = dst[d + i - offset];
        }
        d += len;
    }
    return d == dst_len ? 1u : 0u;
}

// One work item per compressed block: `plan` holds the blocks' compressed
// offsets in `data`, then their compressed lengths, then where their
// contents go in `data`, then the contents' lengths (each block's header,
// parsed on the host), then the blocks' indices in `ok`. A block whose
// ok[index] is 1 (its checksum is good) is decompressed, and its ok[index]
// set to 0 when its Snappy data does not decode.
__kernel void snappy_decompress(__global uchar* data, __global const uint* plan, uint blocks,
                                __global uint* ok) {
    uint b = get_global_id(0);
    if (b >= blocks) {
        return;
    }
    uint index = plan[4u * blocks + b];
    if (ok[index] == 1u &&
        snappy_decompress_block(data + plan[b], plan[blocks + b], data + plan[2u * blocks + b],
                                plan[3u * blocks + b]) == 0u) {
        ok[index] = 0u;
    }
}
