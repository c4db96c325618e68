//! The fixed parts of a table file: block handles, the block trailer, the
//! footer, and reading one block back with its checksum checked.
//! The layout is in `docs/format/table.md`.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::coding::{put_fixed32, put_varint64, Decoder};
use crate::crc;
use crate::error::{Error, Result};

/// Magic number at the end of every table (frozen).
pub const TABLE_MAGIC_NUMBER: u64 = 0xdb47_7524_8b80_fb57;
/// Longest encoding of a block handle: two varint64s.
pub const MAX_BLOCK_HANDLE_LEN: usize = 20;
/// Size of the footer (frozen).
pub const FOOTER_LEN: usize = 2 * MAX_BLOCK_HANDLE_LEN + 8;
/// Size of the trailer after each block: compression type and masked CRC.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// How a block's contents are stored. The byte values are frozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum CompressionType {
    /// Stored as is.
    None = 0,
    /// Compressed with Snappy (raw format, no framing).
    #[default]
    Snappy = 1,
}

impl CompressionType {
    /// Decodes the trailer byte.
    pub fn from_u8(byte: u8) -> Option<CompressionType> {
        match byte {
            0 => Some(CompressionType::None),
            1 => Some(CompressionType::Snappy),
            _ => None,
        }
    }
}

/// Where a block is: its offset in the file and its size without trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    /// Offset of the first byte of the block.
    pub offset: u64,
    /// Size of the block contents, not counting the 5-byte trailer.
    pub size: u64,
}

impl BlockHandle {
    /// A handle for `size` bytes at `offset`.
    pub fn new(offset: u64, size: u64) -> BlockHandle {
        BlockHandle { offset, size }
    }

    /// Appends the two varints.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// The encoded form as a new vector.
    pub fn encoded(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MAX_BLOCK_HANDLE_LEN);
        self.encode_to(&mut v);
        v
    }

    /// Reads a handle from `decoder`.
    pub fn decode_from(decoder: &mut Decoder<'_>) -> Result<BlockHandle> {
        let offset = decoder.varint64("block handle offset")?;
        let size = decoder.varint64("block handle size")?;
        Ok(BlockHandle { offset, size })
    }

    /// Reads a handle from the start of `bytes` (an index or metaindex
    /// value); trailing bytes are ignored, as LevelDB ignores them.
    pub fn decode(bytes: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode_from(&mut Decoder::new(bytes))
    }
}

/// The last 48 bytes of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footer {
    /// Where the metaindex block is.
    pub metaindex_handle: BlockHandle,
    /// Where the index block is.
    pub index_handle: BlockHandle,
}

impl Footer {
    /// The 48 footer bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.metaindex_handle.encode_to(&mut out);
        self.index_handle.encode_to(&mut out);
        out.resize(2 * MAX_BLOCK_HANDLE_LEN, 0);
        put_fixed32(&mut out, TABLE_MAGIC_NUMBER as u32);
        put_fixed32(&mut out, (TABLE_MAGIC_NUMBER >> 32) as u32);
        out
    }

    /// Decodes a footer from exactly the last 48 bytes of a table; offsets in
    /// errors are relative to the footer's start.
    pub fn decode(bytes: &[u8]) -> Result<Footer> {
        if bytes.len() != FOOTER_LEN {
            return Err(Error::corruption(
                0,
                format!("footer of {} bytes", bytes.len()),
            ));
        }
        let mut magic = Decoder::new(&bytes[FOOTER_LEN - 8..]);
        let low = magic.fixed32("magic")?;
        let high = magic.fixed32("magic")?;
        if (u64::from(high) << 32 | u64::from(low)) != TABLE_MAGIC_NUMBER {
            return Err(Error::corruption(
                (FOOTER_LEN - 8) as u64,
                "not an sstable (bad magic number)",
            ));
        }
        let mut decoder = Decoder::new(&bytes[..FOOTER_LEN - 8]);
        let metaindex_handle = BlockHandle::decode_from(&mut decoder)?;
        let index_handle = BlockHandle::decode_from(&mut decoder)?;
        Ok(Footer {
            metaindex_handle,
            index_handle,
        })
    }
}

/// Masked CRC32C of a block's contents followed by its compression byte, as
/// stored in the trailer.
#[inline]
pub fn block_checksum(contents: &[u8], compression: CompressionType) -> u32 {
    crc::mask(crc::extend(crc::value(contents), &[compression as u8]))
}

/// The 5 trailer bytes for a block.
#[inline]
pub fn block_trailer(contents: &[u8], compression: CompressionType) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = block_checksum(contents, compression).to_le_bytes();
    [compression as u8, crc[0], crc[1], crc[2], crc[3]]
}

/// LevelDB's rule for keeping a compressed block: it must save at least 1/8
/// of the raw size.
#[inline]
pub fn compression_pays(raw_len: usize, compressed_len: usize) -> bool {
    compressed_len < raw_len - raw_len / 8
}

/// The most bytes Snappy compression of `len` bytes writes
/// (`snap::raw::max_compress_len`); 0 past what Snappy can compress.
pub fn snappy_max_compressed_len(len: usize) -> usize {
    snap::raw::max_compress_len(len)
}

/// Snappy-compresses `raw` into `out` (resized as needed) with a per-thread
/// encoder; the compressed length, or `None` on failure.
fn snappy_compress(raw: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    thread_local! {
        static ENCODER: std::cell::RefCell<snap::raw::Encoder> = std::cell::RefCell::new(snap::raw::Encoder::new());
    }
    out.resize(snap::raw::max_compress_len(raw.len()), 0);
    ENCODER.with(|encoder| encoder.borrow_mut().compress(raw, out).ok())
}

/// Compresses `raw` with Snappy when that saves at least 1/8 of its size;
/// returns the bytes to store and how. `scratch` is reused between calls.
pub fn maybe_compress<'a>(
    raw: &'a [u8],
    compression: CompressionType,
    scratch: &'a mut Vec<u8>,
) -> (&'a [u8], CompressionType) {
    if compression == CompressionType::Snappy {
        if let Some(n) = snappy_compress(raw, scratch) {
            if compression_pays(raw.len(), n) {
                return (&scratch[..n], CompressionType::Snappy);
            }
        }
    }
    (raw, CompressionType::None)
}

/// Which data blocks of one table are offered to the compressor: every
/// block until [`CompressionGate::REFUSED_BEFORE_SKIPPING`] tried blocks in
/// a row failed to save an eighth ([`compression_pays`]), then one block in
/// [`CompressionGate::TRY_ONE_IN`], until a tried block pays again.
///
/// Why: LevelDB compresses every block and throws the result away when it
/// saves too little. Where the data does not compress (small or already
/// compressed values: at 32-byte values in db_bench's configuration every
/// block of a 50M-pair database is stored as is), that is a fifth of a
/// compaction's CPU spent for nothing (`docs/results/compaction-tax.md`,
/// "Compression that does not pay is not tried"). RocksDB's auto-skip
/// compressor does the same by prediction; this rule is simpler and
/// deterministic.
///
/// The decision depends only on the table's blocks before it, in order, so
/// every executor that keeps a gate per output file and asks it block by
/// block writes the same bytes. LevelDB reads either kind of block.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompressionGate {
    /// Tried blocks in a row whose compression did not pay.
    refused: u32,
    /// Blocks passed over since the last one tried, while skipping.
    passed: u32,
}

impl CompressionGate {
    /// Tried blocks in a row that must fail to pay before blocks are
    /// passed over.
    pub const REFUSED_BEFORE_SKIPPING: u32 = 4;
    /// While skipping, one block in this many is tried.
    pub const TRY_ONE_IN: u32 = 16;

    /// The compression to try on the table's next data block: `compression`
    /// or [`CompressionType::None`]. Call once per data block, in order,
    /// and [`CompressionGate::record`] the outcome of a tried one.
    #[inline]
    pub fn next_block(&mut self, compression: CompressionType) -> CompressionType {
        if compression == CompressionType::None || self.refused < Self::REFUSED_BEFORE_SKIPPING {
            return compression;
        }
        self.passed += 1;
        if self.passed >= Self::TRY_ONE_IN {
            self.passed = 0;
            return compression;
        }
        CompressionType::None
    }

    /// Records how a block was stored after [`CompressionGate::next_block`]
    /// returned `tried` for it.
    #[inline]
    pub fn record(&mut self, tried: CompressionType, stored: CompressionType) {
        if tried == CompressionType::None {
            return;
        }
        if stored == CompressionType::None {
            self.refused = self.refused.saturating_add(1);
        } else {
            self.refused = 0;
            self.passed = 0;
        }
    }

    /// [`maybe_compress`] of the table's next data block under the gate.
    pub fn compress<'a>(
        &mut self,
        raw: &'a [u8],
        compression: CompressionType,
        scratch: &'a mut Vec<u8>,
    ) -> (&'a [u8], CompressionType) {
        let tried = self.next_block(compression);
        let (stored, kind) = maybe_compress(raw, tried, scratch);
        self.record(tried, kind);
        (stored, kind)
    }
}

/// [`maybe_compress`] for an owned block: returns the bytes to store without
/// copying them when they stay uncompressed.
pub fn maybe_compress_owned(
    raw: Vec<u8>,
    compression: CompressionType,
) -> (Vec<u8>, CompressionType) {
    if compression == CompressionType::Snappy {
        let mut out = Vec::new();
        if let Some(n) = snappy_compress(&raw, &mut out) {
            if compression_pays(raw.len(), n) {
                out.truncate(n);
                return (out, CompressionType::Snappy);
            }
        }
    }
    (raw, CompressionType::None)
}

/// A readable, fixed-size byte source: a file, or bytes in memory. Kept as an
/// interface so that a direct-to-device reader can stand in for a file.
pub trait RandomAccess: Send + Sync {
    /// Fills `buf` with the bytes at `offset`; an error if fewer exist.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;

    /// The whole source as shared, immutable bytes, when it is already in
    /// memory (a memory-mapped file): blocks are then borrowed from it
    /// instead of copied, as LevelDB does with its mmap reads.
    fn mapped(&self) -> Option<&Bytes> {
        None
    }

    /// For a source read with direct I/O (`O_DIRECT`): the alignment that a
    /// read's buffer address, length and offset need for the bytes to go
    /// straight from the disk into the buffer, with no copy. `None` (the
    /// default): any read is the same.
    fn direct_alignment(&self) -> Option<usize> {
        None
    }

    /// Fills `buf` with the bytes at `offset` as far as the source goes;
    /// the number of bytes read (fewer than `buf.len()` only at its end).
    /// A direct read widened to aligned bounds may end past the end of
    /// the source. The default reads all of `buf` or fails.
    fn read_up_to(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.read_exact_at(buf, offset).map(|()| buf.len())
    }
}

fn read_slice_at(data: &[u8], buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    match start
        .checked_add(buf.len())
        .and_then(|end| data.get(start..end))
    {
        Some(src) => {
            buf.copy_from_slice(src);
            Ok(())
        }
        None => Err(std::io::ErrorKind::UnexpectedEof.into()),
    }
}

impl RandomAccess for Vec<u8> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        read_slice_at(self, buf, offset)
    }
}

impl RandomAccess for Arc<Vec<u8>> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        read_slice_at(self, buf, offset)
    }
}

impl RandomAccess for Arc<[u8]> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        read_slice_at(self, buf, offset)
    }
}

impl RandomAccess for Bytes {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        read_slice_at(self, buf, offset)
    }

    fn mapped(&self) -> Option<&Bytes> {
        Some(self)
    }
}

impl RandomAccess for std::fs::File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

/// Upper bound on Snappy's expansion: a 3-byte copy tag yields at most 64
/// bytes. A block claiming more is corrupt, and the bound keeps a forged
/// length from making us allocate gigabytes.
const MAX_SNAPPY_EXPANSION: usize = 22;

/// Reads the block at `handle` from a file of `file_size` bytes, checks its
/// trailer (the CRC only when `verify_checksum`) and decompresses it.
/// Errors carry `file` and absolute offsets.
pub fn read_block(
    source: &dyn RandomAccess,
    file: &str,
    file_size: u64,
    handle: BlockHandle,
    verify_checksum: bool,
) -> Result<Vec<u8>> {
    block_range(file, file_size, handle)?;
    let len = handle.size as usize;
    let mut buf = vec![0u8; len + BLOCK_TRAILER_LEN];
    source
        .read_exact_at(&mut buf, handle.offset)
        .map_err(|e| Error::io(format!("reading {file} at offset {}", handle.offset), e))?;
    decode_block(buf, file, handle, verify_checksum)
}

/// Checks and decompresses a block already read together with its trailer.
pub fn decode_block(
    mut buf: Vec<u8>,
    file: &str,
    handle: BlockHandle,
    verify_checksum: bool,
) -> Result<Vec<u8>> {
    match check_and_decompress(&buf, file, handle, verify_checksum)? {
        Some(decompressed) => Ok(decompressed),
        None => {
            buf.truncate(buf.len() - BLOCK_TRAILER_LEN);
            Ok(buf)
        }
    }
}

/// [`read_block`] without a copy when `source` is [`RandomAccess::mapped`]
/// and the block is stored uncompressed: the result then shares the
/// mapping. Otherwise the same as `read_block`.
pub fn read_block_shared(
    source: &dyn RandomAccess,
    file: &str,
    file_size: u64,
    handle: BlockHandle,
    verify_checksum: bool,
) -> Result<Bytes> {
    let Some(map) = source.mapped() else {
        return read_block(source, file, file_size, handle, verify_checksum).map(Bytes::from);
    };
    let range = block_range(file, file_size.min(map.len() as u64), handle)?;
    let raw = &map[range.clone()];
    match check_and_decompress(raw, file, handle, verify_checksum)? {
        Some(decompressed) => Ok(Bytes::from(decompressed)),
        None => Ok(map.slice(range.start..range.end - BLOCK_TRAILER_LEN)),
    }
}

/// Asks the CPU to start loading the first bytes and the trailer of the
/// block at `handle` in the mapping `map`, so that the loads overlap other
/// work (a point lookup checks the Bloom filter meanwhile). Only a hint:
/// nothing is read, and out-of-range handles are ignored.
#[inline]
pub fn prefetch_mapped_block(map: &Bytes, handle: BlockHandle) {
    let (Ok(start), Ok(end)) = (
        usize::try_from(handle.offset),
        usize::try_from(handle.offset.saturating_add(handle.size)),
    ) else {
        return;
    };
    if end >= map.len() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching is a hint that never faults or reads into the
        // program; both addresses are inside the mapping anyway.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(map.as_ptr().add(start).cast());
            _mm_prefetch::<_MM_HINT_T0>(map.as_ptr().add(end).cast());
        }
    }
}

/// Whether the block at `handle` in the mapping `map` is stored without
/// compression (false when the handle is out of range).
pub fn mapped_block_is_uncompressed(map: &Bytes, handle: BlockHandle) -> bool {
    usize::try_from(handle.offset.saturating_add(handle.size))
        .ok()
        .and_then(|at| map.get(at))
        .is_some_and(|&t| t == CompressionType::None as u8)
}

/// The byte range of the block at `handle` with its trailer, checked
/// against a file of `file_size` bytes.
fn block_range(file: &str, file_size: u64, handle: BlockHandle) -> Result<Range<usize>> {
    let end = handle
        .offset
        .checked_add(handle.size)
        .and_then(|e| e.checked_add(BLOCK_TRAILER_LEN as u64));
    match end {
        // Both fit in usize: they are at most `file_size`, which is in memory.
        Some(end) if end <= file_size => Ok(handle.offset as usize..end as usize),
        _ => Err(Error::corruption(
            handle.offset,
            format!(
                "block handle (size {}) runs past the end of the file ({file_size} bytes)",
                handle.size
            ),
        )
        .at(file, 0)),
    }
}

/// Like [`decode_block`] for a block that is part of a larger buffer: the
/// contents are copied (or decompressed) once into a new vector.
pub fn decode_block_slice(
    raw: &[u8],
    file: &str,
    handle: BlockHandle,
    verify_checksum: bool,
) -> Result<Vec<u8>> {
    match check_and_decompress(raw, file, handle, verify_checksum)? {
        Some(decompressed) => Ok(decompressed),
        None => Ok(raw[..raw.len() - BLOCK_TRAILER_LEN].to_vec()),
    }
}

/// Like [`decode_block_slice`], into `out`, whose allocation is reused: a
/// reader that decodes block after block into the same vector allocates
/// and zero-fills nothing once it has held one block of each size (only
/// bytes past `out`'s old length are zeroed before Snappy writes them).
pub fn decode_block_into(
    raw: &[u8],
    file: &str,
    handle: BlockHandle,
    verify_checksum: bool,
    out: &mut Vec<u8>,
) -> Result<()> {
    match check_block(raw, file, handle, verify_checksum)? {
        (contents, None) => {
            out.clear();
            out.extend_from_slice(contents);
        }
        (compressed, Some(raw_len)) => {
            if out.len() < raw_len {
                out.resize(raw_len, 0);
            } else {
                out.truncate(raw_len);
            }
            snappy_decompress(compressed, out, file, handle)?;
        }
    }
    Ok(())
}

/// The length of the contents of block `raw` (contents + trailer) once
/// decoded, from its trailer and Snappy header; checks its checksum first
/// when `verify_checksum`. With [`decode_block_to`], a caller lays many
/// blocks out in one buffer, each decoded straight into its place.
pub fn decoded_block_len(
    raw: &[u8],
    file: &str,
    handle: BlockHandle,
    verify_checksum: bool,
) -> Result<usize> {
    match check_block(raw, file, handle, verify_checksum)? {
        (contents, None) => Ok(contents.len()),
        (_, Some(raw_len)) => Ok(raw_len),
    }
}

/// Decodes block `raw` (contents + trailer) into `out`, which is exactly
/// [`decoded_block_len`] long; the checksum is not checked again.
pub fn decode_block_to(raw: &[u8], file: &str, handle: BlockHandle, out: &mut [u8]) -> Result<()> {
    let (contents, raw_len) = check_block(raw, file, handle, false)?;
    let expected = raw_len.unwrap_or(contents.len());
    if out.len() != expected {
        return Err(Error::InvalidArgument(format!(
            "decoding a block of {expected} bytes into {} bytes",
            out.len()
        )));
    }
    match raw_len {
        None => out.copy_from_slice(contents),
        Some(_) => snappy_decompress(contents, out, file, handle)?,
    }
    Ok(())
}

/// Checks the trailer of `raw` (contents + trailer). Returns the
/// decompressed contents, or `None` when the contents are stored as is.
fn check_and_decompress(
    raw: &[u8],
    file: &str,
    handle: BlockHandle,
    verify_checksum: bool,
) -> Result<Option<Vec<u8>>> {
    match check_block(raw, file, handle, verify_checksum)? {
        (_, None) => Ok(None),
        (compressed, Some(raw_len)) => {
            let mut out = vec![0u8; raw_len];
            snappy_decompress(compressed, &mut out, file, handle)?;
            Ok(Some(out))
        }
    }
}

/// Checks the trailer of `raw` (contents + trailer): its length, checksum
/// and compression type. Returns the stored contents and, when they are
/// Snappy-compressed, their uncompressed length (bounded, so a corrupt
/// header cannot make a reader allocate without limit).
fn check_block<'a>(
    raw: &'a [u8],
    file: &str,
    handle: BlockHandle,
    verify_checksum: bool,
) -> Result<(&'a [u8], Option<usize>)> {
    let corrupt = |at: u64, reason: String| Error::corruption(at, reason).at(file, 0);
    if raw.len() < BLOCK_TRAILER_LEN {
        return Err(corrupt(
            handle.offset,
            "block shorter than its trailer".into(),
        ));
    }
    let len = raw.len() - BLOCK_TRAILER_LEN;
    let type_byte = raw[len];
    if verify_checksum {
        let stored = u32::from_le_bytes([raw[len + 1], raw[len + 2], raw[len + 3], raw[len + 4]]);
        let actual = crc::mask(crc::extend(crc::value(&raw[..len]), &[type_byte]));
        if stored != actual {
            return Err(corrupt(handle.offset, "block checksum mismatch".into()));
        }
    }
    let contents = &raw[..len];
    match CompressionType::from_u8(type_byte) {
        Some(CompressionType::None) => Ok((contents, None)),
        Some(CompressionType::Snappy) => {
            let raw_len = snap::raw::decompress_len(contents)
                .map_err(|e| corrupt(handle.offset, format!("bad Snappy header: {e}")))?;
            if raw_len > len.saturating_mul(MAX_SNAPPY_EXPANSION) + 64 {
                return Err(corrupt(
                    handle.offset,
                    format!("Snappy block of {len} bytes claims {raw_len} bytes uncompressed"),
                ));
            }
            Ok((contents, Some(raw_len)))
        }
        None => Err(corrupt(
            handle.offset + len as u64,
            format!("bad block compression type {type_byte}"),
        )),
    }
}

/// Decompresses a Snappy block into `out`, which has its uncompressed
/// length.
fn snappy_decompress(
    compressed: &[u8],
    out: &mut [u8],
    file: &str,
    handle: BlockHandle,
) -> Result<()> {
    snap::raw::Decoder::new()
        .decompress(compressed, out)
        .map_err(|e| {
            Error::corruption(handle.offset, format!("corrupted Snappy block: {e}")).at(file, 0)
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_round_trip_and_magic() {
        let footer = Footer {
            metaindex_handle: BlockHandle::new(1000, 30),
            index_handle: BlockHandle::new(1035, u64::MAX / 3),
        };
        let bytes = footer.encode();
        assert_eq!(bytes.len(), FOOTER_LEN);
        assert_eq!(
            &bytes[40..],
            &[0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb]
        );
        assert_eq!(Footer::decode(&bytes).unwrap(), footer);
        let mut bad = bytes.clone();
        bad[47] ^= 1;
        assert!(Footer::decode(&bad).unwrap_err().is_corruption());
        assert!(Footer::decode(&bytes[1..]).unwrap_err().is_corruption());
    }

    #[test]
    fn decode_into_reuses_a_buffer_and_matches_decode_slice() {
        let plain: Vec<u8> = (0..3000u32).map(|i| (i % 7) as u8).collect();
        let (compressed, kind) = maybe_compress_owned(plain.clone(), CompressionType::Snappy);
        assert_eq!(kind, CompressionType::Snappy);
        let stored = |contents: &[u8], kind| {
            let mut raw = contents.to_vec();
            raw.extend_from_slice(&block_trailer(contents, kind));
            raw
        };
        let snappy = stored(&compressed, CompressionType::Snappy);
        let none = stored(b"short", CompressionType::None);
        let handle = |raw: &[u8]| BlockHandle::new(0, (raw.len() - BLOCK_TRAILER_LEN) as u64);
        // Longer, then shorter, then longer again than what the buffer holds.
        let mut out = vec![9u8; 10];
        for raw in [&snappy, &none, &snappy] {
            decode_block_into(raw, "t", handle(raw), true, &mut out).unwrap();
            assert_eq!(
                out,
                decode_block_slice(raw, "t", handle(raw), true).unwrap()
            );
        }
        assert_eq!(out, plain);
        let mut bad = snappy.clone();
        bad[3] ^= 0x40;
        let err = decode_block_into(&bad, "t", handle(&bad), true, &mut out).unwrap_err();
        assert!(err.is_corruption());
    }

    /// An uncompressed block and a file holding just it and its trailer.
    fn one_block_file() -> (Vec<u8>, Vec<u8>) {
        let contents = b"hello block".to_vec();
        let mut file = contents.clone();
        file.extend_from_slice(&block_trailer(&contents, CompressionType::None));
        (contents, file)
    }

    #[test]
    fn mapped_uncompressed_blocks_are_borrowed_and_still_checked() {
        let (contents, file) = one_block_file();
        let size = file.len() as u64;
        let source = Bytes::from(file);
        let handle = BlockHandle::new(0, contents.len() as u64);
        assert!(mapped_block_is_uncompressed(&source, handle));
        assert!(!mapped_block_is_uncompressed(
            &source,
            BlockHandle::new(0, u64::MAX)
        ));
        let block = read_block_shared(&source, "t", size, handle, true).unwrap();
        assert_eq!(block, contents);
        assert_eq!(block.as_ptr(), source.as_ptr(), "borrowed, not copied");

        let mut flipped = source.to_vec();
        flipped[3] ^= 0x10;
        let flipped = Bytes::from(flipped);
        let err = read_block_shared(&flipped, "t", size, handle, true).unwrap_err();
        assert!(err.is_corruption());
        assert!(
            read_block_shared(&source, "t", size, BlockHandle::new(1, 100), true)
                .unwrap_err()
                .is_corruption()
        );
    }

    #[test]
    fn read_block_checks_bounds_checksum_and_type() {
        let (contents, file) = one_block_file();
        let size = file.len() as u64;
        let handle = BlockHandle::new(0, contents.len() as u64);
        assert_eq!(
            read_block(&file, "t", size, handle, true).unwrap(),
            contents
        );

        let past_end = BlockHandle::new(0, u64::MAX - 2);
        assert!(read_block(&file, "t", size, past_end, true)
            .unwrap_err()
            .is_corruption());

        let mut flipped = file.clone();
        flipped[3] ^= 0x10;
        assert!(read_block(&flipped, "t", size, handle, true)
            .unwrap_err()
            .is_corruption());
        // Without verification the flipped byte is returned as is.
        assert!(read_block(&flipped, "t", size, handle, false).is_ok());

        let mut bad_type = file.clone();
        bad_type[contents.len()] = 9;
        let err = read_block(&bad_type, "t", size, handle, false).unwrap_err();
        assert!(err.to_string().contains("compression type 9"), "{err}");
    }

    /// `len` bytes of xorshift noise: Snappy cannot shorten them.
    fn incompressible(len: usize) -> Vec<u8> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }

    #[test]
    fn compression_kept_only_when_it_saves_an_eighth() {
        let mut scratch = Vec::new();
        let compressible = vec![b'a'; 1000];
        let (out, kind) = maybe_compress(&compressible, CompressionType::Snappy, &mut scratch);
        assert_eq!(kind, CompressionType::Snappy);
        assert!(out.len() < 100);
        let random = incompressible(1000);
        let mut scratch = Vec::new();
        let (out, kind) = maybe_compress(&random, CompressionType::Snappy, &mut scratch);
        assert_eq!(kind, CompressionType::None);
        assert_eq!(out, &random[..]);
    }

    #[test]
    fn the_gate_passes_over_blocks_that_do_not_compress_and_tries_again() {
        use CompressionType::{None, Snappy};
        let mut gate = CompressionGate::default();
        // Four refusals in a row, then one block in sixteen is tried.
        let tried: Vec<bool> = (0..40)
            .map(|_| {
                let tried = gate.next_block(Snappy);
                gate.record(tried, None);
                tried == Snappy
            })
            .collect();
        let expected: Vec<bool> = (0..40).map(|i| i < 4 || (i - 3) % 16 == 0).collect();
        assert_eq!(tried, expected);
        // A tried block that pays: every block is tried again.
        while gate.next_block(Snappy) == None {}
        gate.record(Snappy, Snappy);
        for _ in 0..8 {
            assert_eq!(gate.next_block(Snappy), Snappy);
            gate.record(Snappy, Snappy);
        }
        // A refusal now and then does not stop the trying.
        for i in 0..20 {
            assert_eq!(gate.next_block(Snappy), Snappy);
            gate.record(Snappy, if i % 3 == 0 { None } else { Snappy });
        }
        // Without compression there is nothing to gate.
        let mut off = CompressionGate::default();
        for _ in 0..10 {
            assert_eq!(off.next_block(None), None);
            off.record(None, None);
        }
        assert_eq!(off, CompressionGate::default());
    }

    #[test]
    fn the_gate_stores_incompressible_blocks_as_is_and_compressible_ones_compressed() {
        let random = incompressible(1000);
        let compressible = vec![b'a'; 1000];
        let mut gate = CompressionGate::default();
        let mut scratch = Vec::new();
        for _ in 0..10 {
            let (out, kind) = gate.compress(&random, CompressionType::Snappy, &mut scratch);
            assert_eq!((out, kind), (&random[..], CompressionType::None));
        }
        // Skipping now: a compressible block may be stored as is until the
        // next tried one, within TRY_ONE_IN blocks, and compressed after.
        let stored: Vec<CompressionType> = (0..CompressionGate::TRY_ONE_IN + 2)
            .map(|_| {
                gate.compress(&compressible, CompressionType::Snappy, &mut scratch)
                    .1
            })
            .collect();
        let first = stored
            .iter()
            .position(|k| *k == CompressionType::Snappy)
            .expect("a compressible block is tried within TRY_ONE_IN blocks");
        assert!(stored[first..]
            .iter()
            .all(|k| *k == CompressionType::Snappy));
    }

    #[test]
    fn snappy_bomb_is_rejected() {
        // A Snappy header claiming 4 GiB in a 5-byte block.
        let contents = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
        let mut file = contents.clone();
        file.extend_from_slice(&block_trailer(&contents, CompressionType::Snappy));
        let handle = BlockHandle::new(0, contents.len() as u64);
        let err = read_block(&file, "t", file.len() as u64, handle, true).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }

    #[test]
    fn blocks_decode_straight_into_their_place() {
        let contents: Vec<u8> = b"abcdefgh".iter().cycle().take(3000).copied().collect();
        for compression in [CompressionType::None, CompressionType::Snappy] {
            let (stored, kind) = maybe_compress_owned(contents.clone(), compression);
            assert_eq!(kind, compression, "the test data compresses");
            let mut raw = stored.clone();
            raw.extend_from_slice(&block_trailer(&stored, kind));
            let handle = BlockHandle::new(0, stored.len() as u64);
            let len = decoded_block_len(&raw, "t", handle, true).unwrap();
            assert_eq!(len, contents.len());
            let mut place = vec![0u8; len];
            decode_block_to(&raw, "t", handle, &mut place).unwrap();
            assert_eq!(place, contents);
            // A place of the wrong size is refused, not overrun.
            let mut short = vec![0u8; len - 1];
            assert!(decode_block_to(&raw, "t", handle, &mut short).is_err());
            // A flipped bit is found before the size is trusted.
            raw[3] ^= 1;
            let err = decoded_block_len(&raw, "t", handle, true).unwrap_err();
            assert!(err.is_corruption(), "{err}");
        }
    }
}
