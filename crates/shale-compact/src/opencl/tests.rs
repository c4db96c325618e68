//! Device tests: every helper of `common.cl` through its tiny test kernel,
//! every kernel against its CPU twin, and the executor against `streaming`
//! (including forced fallbacks). They need an OpenCL device (PoCL in CI):
//! without one they print why and pass, unless `SHALE_REQUIRE_ALL=1`
//! ([`crate::testing::required`]) makes a missing device a failure.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use shale_format::block_builder::{shared_prefix_len, BlockBuilder};
use shale_format::bloom::{bloom_hash, BloomFilterPolicy};
use shale_format::coding::{decode_varint32, put_varint32, varint_length};
use shale_format::comparator::compare_internal_keys;
use shale_format::crc;
use shale_format::format::{block_checksum, block_trailer, CompressionType};
use shale_format::internal_key::{InternalKey, ParsedInternalKey, ValueType};

use super::executor::BUILD_OPTIONS;
use super::session::{mem, Arg, Session};
use super::*;
use crate::gc::{is_base_level_for, keep_entry};
use crate::job::{CompactionJob, CompactionOutput, Executor};
use crate::job::{DeviceCosts, JobFile, PhaseStats, TableSettings, UserKeyRange};
use crate::mem_io::MemIo;
use crate::steps::key_prefix::user_key_prefix;
use crate::steps::unpack::{parse_restart_group, EntryRef};
use crate::streaming::StreamingExecutor;
use crate::testing;
use crate::testing::twins;
use crate::ExecutorKind::{OpenCl, Streaming};

/// The test device, or `None` (with the reason printed) when there is none
/// and the tests are not required ([`crate::testing::skip`]).
pub(super) fn test_device() -> Option<Arc<DeviceContext>> {
    match device(DeviceSelector::default()) {
        Ok(device) => Some(device),
        Err(e) => {
            let missing = format!("no OpenCL device: {e}");
            testing::skip("an OpenCL test", &missing, testing::PROVIDE_OPENCL);
            None
        }
    }
}

/// Runs `body` with a session on the test device.
fn with_session(body: impl FnOnce(&mut Session<'_>)) {
    let Some(device) = test_device() else { return };
    let (program, _) = device
        .program(&kernel_source(), BUILD_OPTIONS, &ProgramCache::Off)
        .unwrap();
    let arena = device.new_arena();
    let mut session =
        Session::new(&device, &arena, program, Default::default(), 1 << 30, None).unwrap();
    body(&mut session);
}

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// Random bytes, fewer than `max` of them.
    fn bytes_below(&mut self, max: u64) -> Vec<u8> {
        let len = self.below(max) as usize;
        self.bytes(len)
    }
}

/// Byte strings laid end to end: (arena, starts, lengths).
fn arena(items: &[Vec<u8>]) -> (Vec<u8>, Vec<u32>, Vec<u32>) {
    let mut bytes = Vec::new();
    let mut starts = Vec::new();
    let mut lens = Vec::new();
    for item in items {
        starts.push(bytes.len() as u32);
        lens.push(item.len() as u32);
        bytes.extend_from_slice(item);
    }
    (bytes, starts, lens)
}

#[test]
fn varint_helpers_match_shale_format() {
    with_session(|s| {
        let mut rng = Rng(3);
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for _ in 0..3000 {
            let value = match rng.below(4) {
                0 => rng.below(128) as u32,
                1 => rng.below(1 << 21) as u32,
                _ => rng.next() as u32,
            };
            let mut encoded = Vec::new();
            put_varint32(&mut encoded, value);
            match rng.below(5) {
                0 => encoded.truncate(rng.below(encoded.len() as u64) as usize),
                1 => encoded.push(rng.next() as u8),
                _ => {}
            }
            inputs.push(encoded);
        }
        // Overlong and too-large encodings.
        inputs.push(vec![0xff, 0xff, 0xff, 0xff, 0x1f]);
        inputs.push(vec![0xff, 0xff, 0xff, 0xff, 0x0f]);
        inputs.push(vec![0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
        let (bytes, starts, lens) = arena(&inputs);
        let limits: Vec<u32> = starts.iter().zip(&lens).map(|(s, l)| s + l).collect();
        let n = inputs.len();
        let data = s.upload("t", &bytes).unwrap();
        let start = s.upload("t", &starts).unwrap();
        let limit = s.upload("t", &limits).unwrap();
        let value = s.alloc::<u32>("t", n).unwrap();
        let used = s.alloc::<u32>("t", n).unwrap();
        s.launch(
            "test_decode_varint32",
            n,
            None,
            0,
            &[
                mem(&data),
                mem(&start),
                mem(&limit),
                Arg::U32(n as u32),
                mem(&value),
                mem(&used),
            ],
        )
        .unwrap();
        let value = s.download("t", &value, n).unwrap();
        let used = s.download("t", &used, n).unwrap();
        for (i, input) in inputs.iter().enumerate() {
            let expected = decode_varint32(input).map_or((0, 0), |(v, u)| (v, u as u32));
            assert_eq!((value[i], used[i]), expected, "{input:02x?}");
        }

        let values: Vec<u32> = (0..2000)
            .map(|i| {
                if i % 3 == 0 {
                    rng.next() as u32
                } else {
                    rng.below(1 << (i % 32)) as u32
                }
            })
            .collect();
        let n = values.len();
        let input = s.upload("t", &values).unwrap();
        let out = s.alloc::<u8>("t", 5 * n).unwrap();
        let used = s.alloc::<u32>("t", n).unwrap();
        let length = s.alloc::<u32>("t", n).unwrap();
        s.launch(
            "test_put_varint32",
            n,
            None,
            0,
            &[
                mem(&input),
                Arg::U32(n as u32),
                mem(&out),
                mem(&used),
                mem(&length),
            ],
        )
        .unwrap();
        let out = s.download("t", &out, 5 * n).unwrap();
        let used = s.download("t", &used, n).unwrap();
        let length = s.download("t", &length, n).unwrap();
        for (i, &v) in values.iter().enumerate() {
            let mut expected = Vec::new();
            put_varint32(&mut expected, v);
            assert_eq!(&out[5 * i..5 * i + used[i] as usize], expected.as_slice());
            assert_eq!(length[i] as usize, varint_length(u64::from(v)));
        }
    });
}

/// Blocks for the Snappy kernel: empty and tiny, incompressible, table
/// blocks of sorted keys and repetitive values, long runs (copies past 64
/// bytes), repeats farther than 2047 bytes back (3-byte copies), and blocks
/// past 64 KiB (several fragments, the last one short).
fn snappy_inputs(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut items: Vec<Vec<u8>> = vec![
        Vec::new(),
        vec![7],
        b"abcdefghijklmnop".to_vec(),
        b"abcdefghijklmnopq".to_vec(),
        vec![0; 17],
        vec![0; 4096],
        vec![0xab; 65536],
        vec![0xab; 65537],
        vec![0; 65536 + 16],
    ];
    let far = rng.bytes(3000);
    items.push([far.as_slice(), far.as_slice(), far.as_slice()].concat());
    let mut big = rng.bytes(20_000);
    big.extend_from_slice(&vec![1u8; 60_000]);
    big.extend(std::iter::repeat_n(b"0123456789".as_slice(), 9000).flatten());
    items.push(big);
    for i in 0..400 {
        let len = match i % 4 {
            0 => rng.below(64) as usize,
            _ => rng.below(9000) as usize,
        };
        let item = match i % 5 {
            0 => rng.bytes(len),
            1 => (0..len).map(|_| b"ab"[rng.below(2) as usize]).collect(),
            2 => {
                // A data block as a table holds it.
                let mut keys: Vec<Vec<u8>> = (0..len / 40 + 1)
                    .map(|_| format!("user{:012}", rng.below(1 << 30)).into_bytes())
                    .collect();
                keys.sort();
                keys.dedup();
                let value = vec![b'v'; 16];
                super::slices::encode_block(keys.iter().map(|k| (k.as_slice(), value.as_slice())))
            }
            3 => {
                let unit_len = 1 + rng.below(300) as usize;
                let unit = rng.bytes(unit_len);
                unit.iter().copied().cycle().take(len).collect()
            }
            _ => {
                let mut v = rng.bytes(len);
                for j in (0..len).step_by(97) {
                    v[j..(j + 40).min(len)].fill(b'x');
                }
                v
            }
        };
        items.push(item);
    }
    items
}

#[test]
fn snappy_kernel_matches_the_snap_encoder_byte_for_byte() {
    with_session(|s| {
        let mut rng = Rng(29);
        let items = snappy_inputs(&mut rng);
        let n = items.len();
        let (bytes, starts, lens) = arena(&items);
        let mut out_offsets = Vec::with_capacity(n);
        let mut room = 0u32;
        for item in &items {
            out_offsets.push(room);
            room += snap::raw::max_compress_len(item.len()) as u32;
        }
        let largest = items.iter().map(Vec::len).max().unwrap_or(0);
        // The hash table of the largest fragment.
        let stride = largest.min(65536).next_power_of_two().clamp(256, 16384);
        let data = s.upload("t", &bytes).unwrap();
        let plan = s
            .upload("t", &[starts, lens, out_offsets.clone()].concat())
            .unwrap();
        let out = s.alloc::<u8>("t", room as usize).unwrap();
        // Fewer work items than blocks: each compresses several in turn,
        // with one table.
        let workers = n.div_ceil(3);
        let tables = s.alloc::<u16>("t", workers * stride).unwrap();
        let out_len = s.alloc::<u32>("t", n).unwrap();
        s.launch(
            "snappy_compress",
            workers,
            None,
            0,
            &[
                mem(&data),
                mem(&plan),
                Arg::U32(n as u32),
                mem(&out),
                mem(&tables),
                Arg::U32(stride as u32),
                Arg::U32(workers as u32),
                mem(&out_len),
            ],
        )
        .unwrap();
        let out = s.download("t", &out, room as usize).unwrap();
        let out_len = s.download("t", &out_len, n).unwrap();
        let mut decoder = snap::raw::Decoder::new();
        let mut compressed_some = false;
        for (i, item) in items.iter().enumerate() {
            let at = out_offsets[i] as usize;
            let device = &out[at..at + out_len[i] as usize];
            let expected = snap::raw::Encoder::new().compress_vec(item).unwrap();
            assert_eq!(
                device,
                expected.as_slice(),
                "block {i} of {} bytes",
                item.len()
            );
            assert_eq!(decoder.decompress_vec(device).unwrap(), *item);
            compressed_some |= device.len() < item.len() / 2;
        }
        assert!(compressed_some, "no input compressed");
    });
}

#[test]
fn snappy_decompression_accepts_what_snap_accepts_and_gives_its_bytes() {
    with_session(|s| {
        let mut rng = Rng(31);
        let mut inputs: Vec<Vec<u8>> = snappy_inputs(&mut rng)
            .iter()
            .map(|raw| snap::raw::Encoder::new().compress_vec(raw).unwrap())
            .collect();
        // Damaged copies: a byte changed, cut short, or a byte appended.
        let valid = inputs.len();
        for i in 0..1500 {
            let mut bad = inputs[i % valid].clone();
            match i % 3 {
                0 if !bad.is_empty() => {
                    let at = rng.below(bad.len() as u64) as usize;
                    bad[at] ^= 1 << rng.below(8);
                }
                1 => bad.truncate(rng.below(bad.len() as u64 + 1) as usize),
                _ => bad.push(rng.next() as u8),
            }
            inputs.push(bad);
        }
        // What the host would give the device: blocks whose header parses
        // (to a size this test can hold).
        let mut blocks = Vec::new();
        for input in &inputs {
            if let Ok(len) = snap::raw::decompress_len(input) {
                if len <= 1 << 20 {
                    blocks.push((input, len));
                }
            }
        }
        let n = blocks.len();
        let mut data = Vec::new();
        let mut plan = vec![0u32; 5 * n];
        for (b, (input, _)) in blocks.iter().enumerate() {
            plan[b] = data.len() as u32;
            plan[n + b] = input.len() as u32;
            plan[4 * n + b] = b as u32;
            data.extend_from_slice(input);
        }
        for (b, &(_, len)) in blocks.iter().enumerate() {
            plan[2 * n + b] = data.len() as u32;
            plan[3 * n + b] = len as u32;
            data.resize(data.len() + len, 0xee);
        }
        let buffer = s.upload("t", &data).unwrap();
        let plan_buffer = s.upload("t", &plan).unwrap();
        // Every checksum good: each block is decoded.
        let ok = s.upload("t", &vec![1u32; n]).unwrap();
        s.launch(
            "snappy_decompress",
            n,
            None,
            0,
            &[
                mem(&buffer),
                mem(&plan_buffer),
                Arg::U32(n as u32),
                mem(&ok),
            ],
        )
        .unwrap();
        let out = s.download("t", &buffer, data.len()).unwrap();
        let ok = s.download("t", &ok, n).unwrap();
        let mut rejected = 0;
        for (b, &(input, len)) in blocks.iter().enumerate() {
            let expected = snap::raw::Decoder::new().decompress_vec(input);
            assert_eq!(ok[b] == 1, expected.is_ok(), "block {b}: {expected:?}");
            if let Ok(expected) = expected {
                let at = plan[2 * n + b] as usize;
                assert_eq!(&out[at..at + len], expected.as_slice(), "block {b}");
            } else {
                rejected += 1;
            }
        }
        assert!(rejected > 100 && rejected < n, "{rejected} of {n} rejected");
    });
}

#[test]
fn crc32c_and_block_checksums_match_shale_format() {
    with_session(|s| {
        let mut rng = Rng(11);
        let mut items: Vec<Vec<u8>> = vec![
            Vec::new(),
            vec![0; 32],
            vec![0xff; 32],
            b"123456789".to_vec(),
        ];
        for _ in 0..500 {
            let len = rng.below(5000) as usize;
            items.push(rng.bytes(len));
        }
        let (bytes, starts, lens) = arena(&items);
        let n = items.len();
        let data = s.upload("t", &bytes).unwrap();
        let start = s.upload("t", &starts).unwrap();
        let len = s.upload("t", &lens).unwrap();
        let crc_out = s.alloc::<u32>("t", n).unwrap();
        let masked = s.alloc::<u32>("t", n).unwrap();
        s.launch(
            "test_crc32c",
            n,
            None,
            0,
            &[
                mem(&data),
                mem(&start),
                mem(&len),
                Arg::U32(n as u32),
                mem(&crc_out),
                mem(&masked),
            ],
        )
        .unwrap();
        let crc_out = s.download("t", &crc_out, n).unwrap();
        let masked = s.download("t", &masked, n).unwrap();
        let kinds: Vec<u8> = (0..n).map(|i| (i % 2) as u8).collect();
        let kind = s.upload("t", &kinds).unwrap();
        let sums = s.alloc::<u32>("t", n).unwrap();
        s.launch(
            "block_checksum",
            n,
            None,
            0,
            &[
                mem(&data),
                mem(&start),
                mem(&len),
                mem(&kind),
                Arg::U32(n as u32),
                mem(&sums),
            ],
        )
        .unwrap();
        let sums = s.download("t", &sums, n).unwrap();
        for (i, item) in items.iter().enumerate() {
            assert_eq!(crc_out[i], crc::value(item));
            assert_eq!(masked[i], crc::mask(crc::value(item)));
            let kind = if kinds[i] == 0 {
                CompressionType::None
            } else {
                CompressionType::Snappy
            };
            assert_eq!(sums[i], block_checksum(item, kind));
        }

        // check_block_crc over blocks with trailers, some corrupted.
        let mut raw = Vec::new();
        let mut offsets = Vec::new();
        let mut contents_len = Vec::new();
        let mut expect = Vec::new();
        for (i, item) in items.iter().enumerate() {
            offsets.push(raw.len() as u32);
            contents_len.push(item.len() as u32);
            let start = raw.len();
            raw.extend_from_slice(item);
            raw.extend_from_slice(&block_trailer(item, CompressionType::None));
            let corrupt = i % 3 == 1;
            if corrupt {
                let at = start + rng.below((item.len() + 5) as u64) as usize;
                raw[at] ^= 1 << rng.below(8);
            }
            expect.push(u32::from(!corrupt));
        }
        let data = s.upload("t", &raw).unwrap();
        let offset = s.upload("t", &offsets).unwrap();
        let len = s.upload("t", &contents_len).unwrap();
        let ok = s.alloc::<u32>("t", n).unwrap();
        s.launch(
            "check_block_crc",
            n,
            None,
            0,
            &[
                mem(&data),
                mem(&offset),
                mem(&len),
                Arg::U32(n as u32),
                mem(&ok),
            ],
        )
        .unwrap();
        assert_eq!(s.download("t", &ok, n).unwrap(), expect);
    });
}

#[test]
fn bloom_hash_and_key_order_match_shale_format() {
    with_session(|s| {
        let mut rng = Rng(17);
        let mut items: Vec<Vec<u8>> = vec![
            Vec::new(),
            vec![0x62],
            vec![0xc3, 0x97],
            vec![0xe2, 0x99, 0xa5],
            vec![0xe1, 0x80, 0xb9, 0x32],
        ];
        for _ in 0..2000 {
            let len = rng.below(70) as usize;
            items.push(rng.bytes(len));
        }
        let (bytes, starts, lens) = arena(&items);
        let n = items.len();
        let data = s.upload("t", &bytes).unwrap();
        let start = s.upload("t", &starts).unwrap();
        let len = s.upload("t", &lens).unwrap();
        let hash = s.alloc::<u32>("t", n).unwrap();
        s.launch(
            "test_bloom_hash",
            n,
            None,
            0,
            &[
                mem(&data),
                mem(&start),
                mem(&len),
                Arg::U32(n as u32),
                mem(&hash),
            ],
        )
        .unwrap();
        let hash = s.download("t", &hash, n).unwrap();
        for (i, item) in items.iter().enumerate() {
            assert_eq!(hash[i], bloom_hash(item), "{item:02x?}");
        }

        // Pairs of internal keys with shared prefixes, equal user keys,
        // short (corrupt) keys and bytes >= 0x80.
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for _ in 0..3000 {
            let user: Vec<u8> = match rng.below(4) {
                0 => format!("user{:03}", rng.below(20)).into_bytes(),
                1 => rng.bytes_below(12),
                2 => vec![0x80 | rng.next() as u8; rng.below(20) as usize],
                _ => b"user".to_vec(),
            };
            let key = if rng.below(20) == 0 {
                rng.bytes_below(8)
            } else {
                InternalKey::new(
                    &user,
                    rng.below(50),
                    if rng.below(2) == 0 {
                        ValueType::Value
                    } else {
                        ValueType::Deletion
                    },
                )
                .into_encoded()
            };
            keys.push(key);
        }
        let (bytes, starts, lens) = arena(&keys);
        let pairs = keys.len() / 2;
        for prefix_offset in [0u32, 2, 4] {
            let data = s.upload("t", &bytes).unwrap();
            let start = s.upload("t", &starts).unwrap();
            let len = s.upload("t", &lens).unwrap();
            let internal = s.alloc::<i32>("t", pairs).unwrap();
            let bytewise = s.alloc::<i32>("t", pairs).unwrap();
            let shared = s.alloc::<u32>("t", pairs).unwrap();
            let prefix = s.alloc::<u64>("t", pairs).unwrap();
            s.launch(
                "test_compare_keys",
                pairs,
                None,
                0,
                &[
                    mem(&data),
                    mem(&start),
                    mem(&len),
                    Arg::U32(pairs as u32),
                    Arg::U32(prefix_offset),
                    mem(&internal),
                    mem(&bytewise),
                    mem(&shared),
                    mem(&prefix),
                ],
            )
            .unwrap();
            let internal = s.download("t", &internal, pairs).unwrap();
            let bytewise = s.download("t", &bytewise, pairs).unwrap();
            let shared = s.download("t", &shared, pairs).unwrap();
            let prefix = s.download("t", &prefix, pairs).unwrap();
            for i in 0..pairs {
                let (a, b) = (&keys[2 * i], &keys[2 * i + 1]);
                assert_eq!(
                    internal[i],
                    compare_internal_keys(a, b) as i32,
                    "{a:02x?} {b:02x?}"
                );
                assert_eq!(bytewise[i], a.cmp(b) as i32);
                assert_eq!(shared[i] as usize, shared_prefix_len(a, b));
                assert_eq!(prefix[i], user_key_prefix(a, prefix_offset as usize));
            }
        }
    });
}

#[test]
fn scan_matches_its_twin() {
    with_session(|s| {
        let mut rng = Rng(23);
        for n in [
            0usize,
            1,
            2,
            3,
            4,
            5,
            255,
            256,
            257,
            1000,
            1023,
            1024,
            1025,
            4097,
            65_536,
            65_537 + 300,
            300_000,
        ] {
            let values: Vec<u32> = (0..n).map(|_| rng.below(1 << 20) as u32).collect();
            let input = s.upload("t", &values).unwrap();
            let (offsets, total) = scan::exclusive_scan_u32(s, "t", &input, n).unwrap();
            let (expected, expected_total) = twins::exclusive_scan(&values);
            assert_eq!(total, expected_total, "n={n}");
            assert_eq!(s.download("t", &offsets, n).unwrap(), expected, "n={n}");
        }
    });
}

/// Input blocks built by the block builder, laid out as the pipeline lays
/// them out; the restart groups of each.
struct BlockSet {
    data: Vec<u8>,
    group_start: Vec<u32>,
    group_limit: Vec<u32>,
    /// Per block, where its contents start in `data`.
    block_start: Vec<usize>,
    entries: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
}

fn block_set(rng: &mut Rng, blocks: usize) -> BlockSet {
    let mut set = BlockSet {
        data: Vec::new(),
        group_start: Vec::new(),
        group_limit: Vec::new(),
        block_start: Vec::new(),
        entries: Vec::new(),
    };
    for _ in 0..blocks {
        let interval = 1 + rng.below(16) as usize;
        let mut builder = BlockBuilder::new(interval);
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = (0..rng.below(60))
            .map(|i| {
                let key = InternalKey::new(
                    format!(
                        "key{:05}{}",
                        rng.below(100_000),
                        "x".repeat(rng.below(30) as usize)
                    )
                    .as_bytes(),
                    i,
                    ValueType::Value,
                )
                .into_encoded();
                let value_len = rng.below(200) as usize;
                (key, rng.bytes(value_len))
            })
            .collect();
        entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        for (k, v) in &entries {
            builder.add(k, v);
        }
        let contents = builder.into_contents();
        let base = set.data.len();
        set.block_start.push(base);
        // Groups from the restart array.
        let size = contents.len();
        let restarts = u32::from_le_bytes(contents[size - 4..].try_into().unwrap()) as usize;
        let restarts_offset = size - (1 + restarts) * 4;
        let restart = |i: usize| {
            u32::from_le_bytes(
                contents[restarts_offset + 4 * i..restarts_offset + 4 * i + 4]
                    .try_into()
                    .unwrap(),
            )
        };
        for g in 0..restarts {
            set.group_start.push(base as u32 + restart(g));
            set.group_limit.push(
                base as u32
                    + if g + 1 < restarts {
                        restart(g + 1)
                    } else {
                        restarts_offset as u32
                    },
            );
        }
        set.data.extend_from_slice(&contents);
        set.entries.push(entries);
    }
    set
}

#[test]
fn unpack_matches_parse_restart_group() {
    with_session(|s| {
        let mut rng = Rng(29);
        let set = block_set(&mut rng, 40);
        let groups = set.group_start.len();
        let data = s.upload("t", &set.data).unwrap();
        let start = s.upload("t", &set.group_start).unwrap();
        let limit = s.upload("t", &set.group_limit).unwrap();
        let count = s.alloc::<u32>("t", groups).unwrap();
        let key_bytes = s.alloc::<u32>("t", groups).unwrap();
        let error = s.alloc_zeroed::<u32>("t", 1).unwrap();
        s.launch(
            "unpack_count",
            groups,
            None,
            0,
            &[
                mem(&data),
                mem(&start),
                mem(&limit),
                Arg::U32(groups as u32),
                mem(&count),
                mem(&key_bytes),
                mem(&error),
            ],
        )
        .unwrap();
        s.check_flag("bad group", &error).unwrap();
        let (entry_base, n) = scan::exclusive_scan_u32(s, "t", &count, groups).unwrap();
        let (key_base, key_total) = scan::exclusive_scan_u32(s, "t", &key_bytes, groups).unwrap();
        let n = n as usize;
        let keys = s.alloc::<u8>("t", key_total as usize).unwrap();
        let tuples: Vec<_> = (0..4).map(|_| s.alloc::<u32>("t", n).unwrap()).collect();
        let prefix = s.alloc::<u64>("t", n).unwrap();
        s.launch(
            "unpack_parse",
            groups,
            None,
            0,
            &[
                mem(&data),
                mem(&start),
                mem(&limit),
                Arg::U32(groups as u32),
                mem(&entry_base),
                mem(&key_base),
                Arg::U32(3),
                mem(&keys),
                mem(&tuples[0]),
                mem(&tuples[1]),
                mem(&tuples[2]),
                mem(&tuples[3]),
                mem(&prefix),
            ],
        )
        .unwrap();
        let keys = s.download("t", &keys, key_total as usize).unwrap();
        let t: Vec<Vec<u32>> = tuples
            .iter()
            .map(|b| s.download("t", b, n).unwrap())
            .collect();
        let prefix = s.download("t", &prefix, n).unwrap();
        // The CPU twin over the same groups.
        let mut cpu_keys = Vec::new();
        let mut cpu_entries: Vec<EntryRef> = Vec::new();
        for g in 0..groups {
            parse_restart_group(
                &set.data,
                set.group_start[g] as usize,
                set.group_limit[g] as usize,
                &mut cpu_keys,
                &mut cpu_entries,
            )
            .unwrap();
        }
        assert_eq!(keys, cpu_keys);
        assert_eq!(cpu_entries.len(), n);
        for (e, cpu) in cpu_entries.iter().enumerate() {
            assert_eq!(
                (t[0][e], t[1][e], t[2][e], t[3][e]),
                (cpu.key_offset, cpu.key_len, cpu.value_offset, cpu.value_len)
            );
            let key = &cpu_keys[cpu.key_offset as usize..(cpu.key_offset + cpu.key_len) as usize];
            assert_eq!(prefix[e], user_key_prefix(key, 3));
        }
        assert_eq!(n, set.entries.iter().map(Vec::len).sum::<usize>());

        // A damaged group is reported, not parsed.
        let mut bad = set.data.clone();
        let g = (0..groups)
            .find(|&g| set.group_limit[g] > set.group_start[g])
            .unwrap();
        bad[set.group_start[g] as usize] = 5; // shared bytes in a group's first entry
        let data = s.upload("t", &bad).unwrap();
        let error = s.alloc_zeroed::<u32>("t", 1).unwrap();
        s.launch(
            "unpack_count",
            groups,
            None,
            0,
            &[
                mem(&data),
                mem(&start),
                mem(&limit),
                Arg::U32(groups as u32),
                mem(&count),
                mem(&key_bytes),
                mem(&error),
            ],
        )
        .unwrap();
        assert!(s.check_flag("bad group", &error).is_err());
    });
}

#[test]
fn rank_merge_matches_its_twin() {
    with_session(|s| {
        let mut rng = Rng(31);
        for round in 0..30 {
            let runs = 1 + rng.below(12) as usize;
            let mut all: Vec<Vec<u8>> = Vec::new();
            let mut lengths = Vec::new();
            let mut sequence = 1;
            for _ in 0..runs {
                let mut run: Vec<Vec<u8>> = (0..rng.below(if round % 5 == 0 { 3000 } else { 40 }))
                    .map(|_| {
                        sequence += 1;
                        let user = match rng.below(3) {
                            0 => format!("k{:04}", rng.below(500)).into_bytes(),
                            1 => format!("k{:04}", rng.below(500)).into_bytes()[..3].to_vec(),
                            _ => rng.bytes_below(10),
                        };
                        InternalKey::new(&user, sequence, ValueType::Value).into_encoded()
                    })
                    .collect();
                run.sort_by(|a, b| compare_internal_keys(a, b));
                lengths.push(run.len());
                all.extend(run);
            }
            let n = all.len();
            let (bytes, offsets, lens) = arena(&all);
            let prefixes: Vec<u64> = all.iter().map(|k| user_key_prefix(k, 0)).collect();
            let mut run_start = vec![0u32];
            for &l in &lengths {
                run_start.push(run_start.last().unwrap() + l as u32);
            }
            let keys = s.upload("t", &bytes).unwrap();
            let offset = s.upload("t", &offsets).unwrap();
            let len = s.upload("t", &lens).unwrap();
            let prefix = s.upload("t", &prefixes).unwrap();
            let starts = s.upload("t", &run_start).unwrap();
            let error = s.alloc_zeroed::<u32>("t", 1).unwrap();
            let common = [
                mem(&keys),
                mem(&offset),
                mem(&len),
                mem(&prefix),
                mem(&starts),
                Arg::U32(runs as u32),
                Arg::U32(n as u32),
            ];
            let mut args = common.to_vec();
            args.push(mem(&error));
            s.launch("check_runs_sorted", n, None, 0, &args).unwrap();
            s.check_flag("unsorted", &error).unwrap();
            let order = s.alloc::<u32>("t", n).unwrap();
            let mut args = common.to_vec();
            args.push(mem(&order));
            s.launch("rank_merge", n, None, 0, &args).unwrap();
            let order = s.download("t", &order, n).unwrap();
            assert_eq!(
                order,
                twins::rank_merge(&lengths, |a, b| compare_internal_keys(&all[a], &all[b])),
                "round {round}"
            );
        }
    });
}

#[test]
fn gc_and_grandparent_kernels_match_the_cpu_rules() {
    with_session(|s| {
        let mut rng = Rng(37);
        for round in 0..20 {
            let n = 1 + rng.below(800) as usize;
            let mut keys: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    let kind = if rng.below(3) == 0 {
                        ValueType::Deletion
                    } else {
                        ValueType::Value
                    };
                    InternalKey::new(
                        format!("u{:03}", rng.below(120)).as_bytes(),
                        i as u64 + 1,
                        kind,
                    )
                    .into_encoded()
                })
                .collect();
            keys.sort_by(|a, b| compare_internal_keys(a, b));
            // The merged order is a permutation of the stored entries.
            let mut order: Vec<u32> = (0..n as u32).collect();
            for i in (1..n).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let mut stored = vec![Vec::new(); n];
            for (rank, &e) in order.iter().enumerate() {
                stored[e as usize] = keys[rank].clone();
            }
            let snapshot = rng.below(n as u64 + 10);
            let mut levels: Vec<Vec<UserKeyRange>> = Vec::new();
            for _ in 0..rng.below(4) {
                let mut at = 0;
                let mut level = Vec::new();
                for _ in 0..rng.below(6) {
                    at += rng.below(30);
                    let smallest = format!("u{at:03}").into_bytes();
                    at += rng.below(15);
                    level.push(UserKeyRange {
                        smallest,
                        largest: format!("u{at:03}").into_bytes(),
                    });
                    at += 1;
                }
                levels.push(level);
            }
            let (bytes, offsets, lens) = arena(&stored);
            let keys_buffer = s.upload("t", &bytes).unwrap();
            let offset = s.upload("t", &offsets).unwrap();
            let len = s.upload("t", &lens).unwrap();
            let order_buffer = s.upload("t", &order).unwrap();
            let mut range_keys = Vec::new();
            let mut arrays = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
            let mut level_start = vec![0u32];
            for level in &levels {
                for range in level {
                    arrays[0].push(range_keys.len() as u32);
                    arrays[1].push(range.smallest.len() as u32);
                    range_keys.extend_from_slice(&range.smallest);
                    arrays[2].push(range_keys.len() as u32);
                    arrays[3].push(range.largest.len() as u32);
                    range_keys.extend_from_slice(&range.largest);
                }
                level_start.push(arrays[0].len() as u32);
            }
            let range_keys = s.upload("t", &range_keys).unwrap();
            let arrays: Vec<_> = arrays.iter().map(|a| s.upload("t", a).unwrap()).collect();
            let level_start = s.upload("t", &level_start).unwrap();
            let keep = s.alloc::<u32>("t", n).unwrap();
            let error = s.alloc_zeroed::<u32>("t", 1).unwrap();
            s.launch(
                "gc_keep",
                n,
                None,
                0,
                &[
                    mem(&keys_buffer),
                    mem(&offset),
                    mem(&len),
                    mem(&order_buffer),
                    Arg::U32(n as u32),
                    Arg::U64(snapshot),
                    mem(&range_keys),
                    mem(&arrays[0]),
                    mem(&arrays[1]),
                    mem(&arrays[2]),
                    mem(&arrays[3]),
                    mem(&level_start),
                    Arg::U32(levels.len() as u32),
                    mem(&keep),
                    mem(&error),
                ],
            )
            .unwrap();
            s.check_flag("bad key", &error).unwrap();
            let keep = s.download("t", &keep, n).unwrap();
            let expected: Vec<u32> = (0..n)
                .map(|i| {
                    let entry = ParsedInternalKey::parse(&keys[i]).unwrap();
                    let previous = (i > 0).then(|| ParsedInternalKey::parse(&keys[i - 1]).unwrap());
                    u32::from(keep_entry(
                        &entry,
                        previous.map(|p| (p.user_key, p.sequence)),
                        snapshot,
                        |k| is_base_level_for(&levels, k),
                    ))
                })
                .collect();
            assert_eq!(keep, expected, "round {round}");

            // Grandparent positions by binary search.
            let grandparents: Vec<Vec<u8>> = (0..rng.below(10))
                .map(|g| {
                    InternalKey::new(
                        format!("u{:03}", g * 13 + rng.below(10)).as_bytes(),
                        5,
                        ValueType::Value,
                    )
                    .into_encoded()
                })
                .collect();
            let (gp_bytes, gp_offsets, gp_lens) = arena(&grandparents);
            let gp_keys = s.upload("t", &gp_bytes).unwrap();
            let gp_offset = s.upload("t", &gp_offsets).unwrap();
            let gp_len = s.upload("t", &gp_lens).unwrap();
            let passed = s.alloc::<u32>("t", n).unwrap();
            s.launch(
                "grandparent_index",
                n,
                None,
                0,
                &[
                    mem(&keys_buffer),
                    mem(&offset),
                    mem(&len),
                    mem(&order_buffer),
                    Arg::U32(n as u32),
                    mem(&gp_keys),
                    mem(&gp_offset),
                    mem(&gp_len),
                    Arg::U32(grandparents.len() as u32),
                    mem(&passed),
                ],
            )
            .unwrap();
            let passed = s.download("t", &passed, n).unwrap();
            for i in 0..n {
                let expected =
                    grandparents.partition_point(|g| compare_internal_keys(&keys[i], g).is_gt());
                assert_eq!(passed[i] as usize, expected);
            }

            // Stream compaction.
            let keep_buffer = s.upload("t", &keep).unwrap();
            let (position, total) = scan::exclusive_scan_u32(s, "t", &keep_buffer, n).unwrap();
            let kept = s.alloc::<u32>("t", total as usize).unwrap();
            s.launch(
                "compact_kept",
                n,
                None,
                0,
                &[
                    mem(&order_buffer),
                    mem(&keep_buffer),
                    mem(&position),
                    Arg::U32(n as u32),
                    mem(&kept),
                ],
            )
            .unwrap();
            assert_eq!(
                s.download("t", &kept, total as usize).unwrap(),
                twins::compact(&order, &keep)
            );

            // Where the grandparent position changes, from a random entry
            // on, with the kept entries before each.
            let from = rng.below(n as u64 + 1) as usize;
            let capacity = grandparents.len() + 1;
            let passed_buffer = s.upload("t", &passed).unwrap();
            let changes = s.alloc_zeroed::<u32>("t", 1 + 3 * capacity).unwrap();
            s.launch(
                "grandparent_changes",
                n,
                None,
                0,
                &[
                    mem(&passed_buffer),
                    mem(&position),
                    Arg::U32(from as u32),
                    Arg::U32(n as u32),
                    Arg::U32(capacity as u32),
                    mem(&changes),
                ],
            )
            .unwrap();
            let changes = s.download("t", &changes, 1 + 3 * capacity).unwrap();
            let mut found: Vec<[u32; 3]> = changes[1..1 + 3 * changes[0] as usize]
                .chunks_exact(3)
                .map(|c| [c[0], c[1], c[2]])
                .collect();
            found.sort_unstable();
            let expected: Vec<[u32; 3]> = (from..n)
                .filter(|&i| i == from || passed[i] != passed[i - 1])
                .map(|i| {
                    let before = keep[..i].iter().filter(|&&k| k != 0).count();
                    [i as u32, passed[i], before as u32]
                })
                .collect();
            assert_eq!(found, expected, "round {round}, from {from}");
        }
    });
}

#[test]
fn encoded_blocks_match_the_block_builder_and_filters_the_policy() {
    with_session(|s| {
        let mut rng = Rng(41);
        let n = 700;
        let mut keys: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                InternalKey::new(
                    format!(
                        "key{:06}{}",
                        rng.below(1_000_000),
                        "z".repeat(rng.below(20) as usize)
                    )
                    .as_bytes(),
                    i,
                    ValueType::Value,
                )
                .into_encoded()
            })
            .collect();
        keys.sort_by(|a, b| compare_internal_keys(a, b));
        let values: Vec<Vec<u8>> = (0..n).map(|_| rng.bytes_below(300)).collect();
        // Values live in a "data" buffer as in the pipeline.
        let (data, value_offsets, value_lens) = arena(&values);
        let (key_bytes, key_offsets, key_lens) = arena(&keys);
        // Kept entries: every other one, in order.
        let kept: Vec<u32> = (0..n as u32).filter(|i| i % 3 != 1).collect();
        let m = kept.len();
        let keys_buffer = s.upload("t", &key_bytes).unwrap();
        let key_offset = s.upload("t", &key_offsets).unwrap();
        let key_len = s.upload("t", &key_lens).unwrap();
        let value_len = s.upload("t", &value_lens).unwrap();
        let value_offset = s.upload("t", &value_offsets).unwrap();
        let data = s.upload("t", &data).unwrap();
        let kept_buffer = s.upload("t", &kept).unwrap();
        for interval in [1usize, 3, 16] {
            // Sizes, encoded lengths and their prefix sums.
            let per_class = m.div_ceil(interval);
            let classes = interval * per_class;
            let lengths = m + 1 + classes + 1;
            let sizes = s.alloc::<u32>("t", 3 * m).unwrap();
            let encoded = s.alloc::<u32>("t", lengths).unwrap();
            s.launch(
                "kept_sizes",
                classes + 1,
                None,
                0,
                &[
                    mem(&keys_buffer),
                    mem(&key_offset),
                    mem(&key_len),
                    mem(&value_len),
                    mem(&kept_buffer),
                    Arg::U32(m as u32),
                    Arg::U32(interval as u32),
                    Arg::U32(per_class as u32),
                    mem(&sizes),
                    mem(&encoded),
                ],
            )
            .unwrap();
            let flat = s.download("t", &sizes, 3 * m).unwrap();
            let host_sizes: Vec<crate::steps::plan::EntrySize> = flat
                .chunks_exact(3)
                .map(|c| crate::steps::plan::EntrySize {
                    key_len: c[0],
                    value_len: c[1],
                    shared: c[2],
                })
                .collect();
            for (j, size) in host_sizes.iter().enumerate() {
                let e = kept[j] as usize;
                let shared = if j == 0 {
                    0
                } else {
                    shared_prefix_len(&keys[kept[j - 1] as usize], &keys[e])
                };
                assert_eq!(
                    (
                        size.key_len as usize,
                        size.value_len as usize,
                        size.shared as usize
                    ),
                    (keys[e].len(), values[e].len(), shared)
                );
            }
            let sums = scan::exclusive_scan_u32_on_device(s, "t", &encoded, lengths).unwrap();

            // Every entry's block end, against one BlockSizer per start.
            for block_size in [40usize, 512, 4096] {
                let stops: Vec<u32> = (1..m as u32).filter(|_| rng.below(40) == 0).collect();
                let mut job = testing::job(vec![]);
                job.table.block_size = block_size;
                job.table.block_restart_interval = interval;
                let expected = crate::steps::plan::tests::block_ends(&host_sizes, &stops, &job);
                let stops_buffer = s.upload("t", &stops).unwrap();
                let ends = s.alloc::<u32>("t", 2 * m).unwrap();
                s.launch(
                    "block_ends",
                    m,
                    None,
                    0,
                    &[
                        mem(&sums),
                        Arg::U32(m as u32),
                        Arg::U32(interval as u32),
                        Arg::U32(per_class as u32),
                        mem(&stops_buffer),
                        Arg::U32(stops.len() as u32),
                        Arg::U32(block_size as u32),
                        Arg::U32(block_size.div_ceil(3) as u32),
                        mem(&ends),
                    ],
                )
                .unwrap();
                let ends = s.download("t", &ends, 2 * m).unwrap();
                let ends: Vec<crate::steps::plan::BlockEnd> = ends
                    .chunks_exact(2)
                    .map(|c| crate::steps::plan::BlockEnd {
                        end: c[0],
                        len: c[1],
                    })
                    .collect();
                assert_eq!(
                    ends, expected,
                    "interval {interval}, blocks of {block_size}"
                );
            }

            // Blocks of random lengths, their groups placed on the device.
            let mut blocks = Vec::new();
            let mut at = 0;
            while at < m {
                let end = (at + 1 + rng.below(60) as usize).min(m);
                blocks.push(at..end);
                at = end;
            }
            let gap = [0, 5][rng.below(2) as usize];
            let layout = super::pack::tests::group_layout(&host_sizes, &blocks, interval, gap);
            let groups = layout.first.len();
            let mut records = Vec::new();
            let mut group = 0;
            for (range, bytes) in blocks.iter().zip(&layout.blocks) {
                records.extend([range.start as u32, bytes.start as u32, group as u32]);
                group += range.len().div_ceil(interval);
            }
            let out_len = layout.blocks.last().unwrap().end + gap;
            records.extend([m as u32, out_len as u32, group as u32]);
            assert_eq!(group, groups);
            let records = s.upload("t", &records).unwrap();
            let g: Vec<_> = (0..4)
                .map(|_| s.alloc::<u32>("t", groups).unwrap())
                .collect();
            let last = s.alloc::<u8>("t", groups).unwrap();
            // Boundary key lengths of all but the last block.
            let key_blocks = blocks.len() - 1;
            let key_lengths = s.alloc::<u32>("t", 2 * key_blocks).unwrap();
            s.launch(
                "layout_groups",
                groups,
                None,
                0,
                &[
                    mem(&sums),
                    Arg::U32(m as u32),
                    Arg::U32(interval as u32),
                    Arg::U32(per_class as u32),
                    mem(&records),
                    Arg::U32(blocks.len() as u32),
                    Arg::U32(groups as u32),
                    mem(&g[0]),
                    mem(&g[1]),
                    mem(&g[2]),
                    mem(&g[3]),
                    mem(&last),
                    mem(&sizes),
                    Arg::U32(key_blocks as u32),
                    mem(&key_lengths),
                ],
            )
            .unwrap();
            let expected_lengths: Vec<u32> = blocks[..key_blocks]
                .iter()
                .flat_map(|r| [r.start, r.end - 1])
                .map(|j| keys[kept[j] as usize].len() as u32)
                .collect();
            assert_eq!(
                s.download("t", &key_lengths, 2 * key_blocks).unwrap(),
                expected_lengths
            );
            for (buffer, expected) in g.iter().zip([
                &layout.first,
                &layout.count,
                &layout.offset,
                &layout.block_first_group,
            ]) {
                assert_eq!(&s.download("t", buffer, groups).unwrap(), expected);
            }
            assert_eq!(s.download("t", &last, groups).unwrap(), layout.last);
            let out = s.alloc::<u8>("t", out_len).unwrap();
            s.launch(
                "encode_groups",
                groups,
                None,
                0,
                &[
                    mem(&keys_buffer),
                    mem(&key_offset),
                    mem(&data),
                    mem(&value_offset),
                    mem(&kept_buffer),
                    mem(&sizes),
                    mem(&g[0]),
                    mem(&g[1]),
                    mem(&g[2]),
                    mem(&g[3]),
                    mem(&last),
                    Arg::U32(groups as u32),
                    mem(&out),
                ],
            )
            .unwrap();
            let out = s.download("t", &out, out_len).unwrap();
            for (b, range) in blocks.iter().enumerate() {
                let mut builder = BlockBuilder::new(interval);
                for &e in &kept[range.clone()] {
                    builder.add(&keys[e as usize], &values[e as usize]);
                }
                assert_eq!(
                    &out[layout.blocks[b].clone()],
                    builder.into_contents().as_slice(),
                    "interval {interval} block {b}"
                );
            }
        }

        // Bloom filters over consecutive ranges of the kept entries.
        for bits_per_key in [1u32, 10, 17] {
            let policy = BloomFilterPolicy::new(bits_per_key);
            let mut first = vec![0u32];
            while (*first.last().unwrap() as usize) < m {
                let next = (*first.last().unwrap() as usize + 1 + rng.below(200) as usize).min(m);
                first.push(next as u32);
            }
            let filters = first.len() - 1;
            let mut bits = Vec::new();
            let mut out_at = Vec::new();
            let mut total = 0;
            for f in 0..filters {
                let b = shale_format::bloom::filter_bits(
                    (first[f + 1] - first[f]) as usize,
                    bits_per_key,
                );
                bits.push(b as u32);
                out_at.push(total as u32);
                total += b / 8;
            }
            let first_buffer = s.upload("t", &first).unwrap();
            let bits_buffer = s.upload("t", &bits).unwrap();
            let out_buffer = s.upload("t", &out_at).unwrap();
            let vector = s.alloc_zeroed::<u8>("t", total * 8).unwrap();
            let probes = shale_format::bloom::probes_for_bits_per_key(bits_per_key);
            s.launch(
                "bloom_set",
                m,
                None,
                0,
                &[
                    mem(&keys_buffer),
                    mem(&key_offset),
                    mem(&key_len),
                    mem(&kept_buffer),
                    mem(&first_buffer),
                    Arg::U32(filters as u32),
                    mem(&bits_buffer),
                    mem(&out_buffer),
                    Arg::U32(u32::from(probes)),
                    mem(&vector),
                ],
            )
            .unwrap();
            let folded = s.alloc::<u8>("t", total).unwrap();
            s.launch(
                "bloom_fold",
                total,
                None,
                0,
                &[mem(&vector), Arg::U32(total as u32), mem(&folded)],
            )
            .unwrap();
            let folded = s.download("t", &folded, total).unwrap();
            for f in 0..filters {
                let hashes: Vec<u32> = kept[first[f] as usize..first[f + 1] as usize]
                    .iter()
                    .map(|&e| {
                        bloom_hash(shale_format::internal_key::extract_user_key(
                            &keys[e as usize],
                        ))
                    })
                    .collect();
                let mut expected = Vec::new();
                policy.create_filter_from_hashes(&hashes, &mut expected);
                let mut device =
                    folded[out_at[f] as usize..out_at[f] as usize + bits[f] as usize / 8].to_vec();
                device.push(probes);
                assert_eq!(device, expected, "bits_per_key {bits_per_key} filter {f}");
                assert_eq!(
                    twins::bloom_filter_by_bytes(&hashes, bits_per_key),
                    expected
                );
            }
        }
    });
}

// ---- The executor against the reference ----

/// Makes a value, or `None` for a tombstone.
type ValueMaker = dyn Fn(&mut Rng) -> Option<Vec<u8>>;

/// A job of `runs` overlapping L0 tables with overwrites, a snapshot, a
/// deeper range and grandparents; `value` makes each value or tombstone.
fn make_job(
    seed: u64,
    runs: usize,
    entries: usize,
    input: &TableSettings,
    output: TableSettings,
    value: &ValueMaker,
) -> (CompactionJob, HashMap<u64, Arc<Vec<u8>>>) {
    let mut rng = Rng(seed);
    let mut files = HashMap::new();
    let mut inputs = Vec::new();
    let mut sequence = 1;
    for r in 0..runs {
        let mut table: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for _ in 0..entries {
            let user = format!("user{:06}", rng.below(entries as u64 * 2)).into_bytes();
            let (kind, value) = match value(&mut rng) {
                Some(value) => (ValueType::Value, value),
                None => (ValueType::Deletion, Vec::new()),
            };
            table.insert(
                InternalKey::new(&user, sequence, kind).into_encoded(),
                value,
            );
            sequence += 1;
        }
        let mut sorted: Vec<(Vec<u8>, Vec<u8>)> = table.into_iter().collect();
        sorted.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        let bytes = testing::build_table(&sorted, input);
        let number = r as u64 + 1;
        inputs.push(testing::table_file(number, &bytes, &sorted));
        files.insert(number, Arc::new(bytes));
    }
    let grandparents = (0..8u64)
        .map(|g| JobFile {
            number: 0,
            file_size: 3000,
            smallest: InternalKey::new(
                format!("user{:06}", g * 40).as_bytes(),
                1,
                ValueType::Value,
            )
            .into_encoded(),
            largest: InternalKey::new(
                format!("user{:06}", g * 40 + 30).as_bytes(),
                1,
                ValueType::Value,
            )
            .into_encoded(),
        })
        .collect();
    let job = CompactionJob {
        id: seed,
        max_output_file_size: 8 << 10,
        grandparents,
        max_grandparent_overlap_bytes: 5000,
        smallest_snapshot: sequence / 2,
        deeper_levels: vec![vec![UserKeyRange {
            smallest: b"user000100".to_vec(),
            largest: b"user000200".to_vec(),
        }]],
        table: output,
        ..testing::job(testing::level0(inputs))
    };
    (job, files)
}

fn run_job(
    executor: &dyn Executor,
    job: &CompactionJob,
    files: &HashMap<u64, Arc<Vec<u8>>>,
) -> (CompactionOutput, BTreeMap<u64, Vec<u8>>) {
    let io = MemIo::new(files.clone());
    let output = executor.run(job, &io).unwrap();
    let written = io.outputs.lock().unwrap().clone();
    (output, written)
}

fn assert_same_as_streaming(
    executor: &dyn Executor,
    job: &CompactionJob,
    files: &HashMap<u64, Arc<Vec<u8>>>,
) -> CompactionOutput {
    let (expected, expected_files) = run_job(&StreamingExecutor, job, files);
    let (actual, actual_files) = run_job(executor, job, files);
    assert_eq!(actual.outputs, expected.outputs);
    assert!(actual_files == expected_files, "tables differ");
    assert_eq!(actual.stats.entries_out, expected.stats.entries_out);
    actual
}

fn executor(options: OpenClOptions) -> Option<OpenClExecutor> {
    test_device()?;
    Some(
        OpenClExecutor::new(OpenClOptions {
            cpu_threads: 2,
            ..options
        })
        .unwrap(),
    )
}

/// The device costs a device job reported.
fn device_costs(stats: &PhaseStats) -> DeviceCosts {
    stats
        .costs
        .device
        .expect("a device job reports its costs to the host")
}

/// `device`, then a CPU executor for what it refuses: how the worker and
/// the tools run it (the engine's service does the same).
fn on_cpu_too(device: &Arc<OpenClExecutor>) -> crate::chain::FallbackChain {
    crate::chain::FallbackChain::new(vec![device.clone(), Arc::new(StreamingExecutor)])
}

/// Asserts that `device` refuses `job` (a refusal, or an executor failure,
/// saying `why`) and leaves no file behind.
fn assert_refused(
    device: &OpenClExecutor,
    job: &CompactionJob,
    files: &HashMap<u64, Arc<Vec<u8>>>,
    why: &str,
) {
    let io = MemIo::new(files.clone());
    match device.run(job, &io) {
        Err(
            shale_format::Error::Refused { executor, reason }
            | shale_format::Error::ExecutorFailed { executor, reason },
        ) => {
            assert_eq!(executor, OpenCl.name());
            assert!(reason.contains(why), "{reason}");
        }
        other => panic!("expected a refusal saying {why:?}, got {other:?}"),
    }
    assert!(
        io.outputs.lock().unwrap().is_empty(),
        "a refused job leaves no file"
    );
}

fn settings(snappy: bool, bloom: Option<u32>, block_size: usize, restart: usize) -> TableSettings {
    TableSettings {
        block_size,
        block_restart_interval: restart,
        bloom_bits_per_key: bloom,
        snappy,
    }
}

fn small_values(rng: &mut Rng) -> Option<Vec<u8>> {
    if rng.below(6) == 0 {
        return None;
    }
    let len = rng.below(120) as usize;
    Some(rng.bytes(len))
}

#[test]
fn device_jobs_match_streaming_for_every_policy() {
    for policy in [
        PlacementPolicy::AllDevice,
        PlacementPolicy::CCompaction,
        PlacementPolicy::QCompaction,
    ] {
        let Some(executor) = executor(OpenClOptions {
            policy,
            ..OpenClOptions::default()
        }) else {
            return;
        };
        for (seed, snappy, bloom, block_size, restart) in [
            (1, false, Some(10), 4096, 16),
            (2, true, None, 256, 1),
            (3, true, Some(3), 1024, 5),
        ] {
            let (job, files) = make_job(
                seed,
                5,
                300,
                &settings(snappy, Some(10), 512, 4),
                settings(snappy, bloom, block_size, restart),
                &small_values,
            );
            let output = assert_same_as_streaming(&executor, &job, &files);
            assert_eq!(output.executor, OpenCl.name(), "{policy}");
            assert!(output.outputs.len() > 1, "the job cuts several files");
        }
        let stats = executor.stats();
        assert_eq!(stats.slices, 3, "{policy}: one slice per job, none refused");
        assert!(
            stats.kernels.contains_key("rank_merge") && stats.kernels.contains_key("encode_groups")
        );
        assert_eq!(
            stats.kernels.contains_key("gc_keep"),
            policy != PlacementPolicy::CCompaction
        );
    }
}

#[test]
fn empty_results_write_no_file() {
    let Some(executor) = executor(OpenClOptions {
        ..OpenClOptions::default()
    }) else {
        return;
    };
    // Only tombstones, all droppable: nothing is kept.
    let (mut job, files) = make_job(
        5,
        2,
        50,
        &TableSettings::default(),
        TableSettings::default(),
        &|_| None,
    );
    job.smallest_snapshot = u64::MAX >> 8;
    job.deeper_levels.clear();
    let output = assert_same_as_streaming(&executor, &job, &files);
    assert_eq!(output.executor, OpenCl.name());
    assert!(output.outputs.is_empty());
}

#[test]
fn placement_on_the_cpu_gives_the_same_tables() {
    let Some(executor) = executor(OpenClOptions {
        max_device_files: 2,
        ..OpenClOptions::default()
    }) else {
        return;
    };
    let executor = Arc::new(executor);
    let (job, files) = make_job(
        7,
        4,
        200,
        &TableSettings::default(),
        TableSettings::default(),
        &small_values,
    );
    assert_refused(&executor, &job, &files, "placed on the CPU");
    let output = assert_same_as_streaming(&on_cpu_too(&executor), &job, &files);
    assert_eq!(output.executor, Streaming.name());
    assert!(output.fallback.unwrap().contains("max_device_files"));
    assert_eq!(executor.stats().slices, 0, "nothing ran on the device");

    let Some(executor) = executor_with_budget(Some(1)) else {
        return;
    };
    let executor = Arc::new(executor);
    let output = assert_same_as_streaming(&on_cpu_too(&executor), &job, &files);
    assert_eq!(output.executor, Streaming.name());
    let fallback = output.fallback.unwrap();
    assert!(fallback.contains("placed on the CPU") && fallback.contains("budget"));
}

fn executor_with_budget(budget: Option<u64>) -> Option<OpenClExecutor> {
    executor(OpenClOptions {
        memory_budget: budget,
        ..OpenClOptions::default()
    })
}

#[test]
fn a_failing_kernel_hands_the_job_to_the_cpu() {
    let (job, files) = make_job(
        9,
        3,
        200,
        &settings(true, Some(10), 512, 4),
        TableSettings::default(),
        &small_values,
    );
    for kernel in [
        "check_block_crc",
        "unpack_parse",
        "scan_groups_u32",
        "rank_merge",
        "gc_keep",
        "encode_groups",
        "bloom_fold",
    ] {
        let Some(executor) = executor(OpenClOptions {
            inject_kernel_failure: Some(kernel.to_string()),
            ..OpenClOptions::default()
        }) else {
            return;
        };
        let executor = Arc::new(executor);
        let output = assert_same_as_streaming(&on_cpu_too(&executor), &job, &files);
        assert_eq!(output.executor, Streaming.name(), "{kernel}");
        let fallback = output.fallback.unwrap();
        assert!(fallback.contains("the device failed") && fallback.contains(kernel));
    }
    // On its own, the executor refuses the job: it never falls back.
    let Some(alone) = executor(OpenClOptions {
        inject_kernel_failure: Some("rank_merge".into()),
        ..OpenClOptions::default()
    }) else {
        return;
    };
    assert_refused(&alone, &job, &files, "rank_merge");
}

#[test]
fn running_past_the_budget_hands_the_job_to_the_cpu() {
    // Snappy input of very repetitive values: the decompressed blocks alone
    // are far above the estimate placement uses, so placement lets the job
    // on the device and the allocations pass the budget.
    let repetitive = |rng: &mut Rng| Some(vec![b'a' + rng.below(3) as u8; 2000]);
    let (job, files) = make_job(
        11,
        3,
        100,
        &settings(true, None, 4096, 16),
        TableSettings::default(),
        &repetitive,
    );
    let Some(executor) = executor_with_budget(Some(estimated_device_bytes(&job))) else {
        return;
    };
    let executor = Arc::new(executor);
    let output = assert_same_as_streaming(&on_cpu_too(&executor), &job, &files);
    assert_eq!(output.executor, Streaming.name());
    let fallback = output.fallback.unwrap();
    assert!(fallback.contains("the device failed") && fallback.contains("budget"));
}

/// A job whose first input file `damage` changes: run with the CPU behind
/// it, the corruption is reported; run on the device alone, the job is
/// refused saying `why` and leaves no file. Undamaged, it gives streaming's
/// tables.
fn assert_corruption_caught(
    seed: u64,
    input: &TableSettings,
    value: &ValueMaker,
    damage: impl FnOnce(&mut [u8]),
    why: &str,
) {
    let Some(executor) = executor(OpenClOptions::default()) else {
        return;
    };
    let executor = Arc::new(executor);
    let (job, files) = make_job(seed, 2, 200, input, TableSettings::default(), value);
    let mut damaged = files.clone();
    let mut bytes = files[&1].as_ref().clone();
    damage(&mut bytes);
    damaged.insert(1, Arc::new(bytes));
    let error = on_cpu_too(&executor)
        .run(&job, &MemIo::new(damaged.clone()))
        .unwrap_err();
    assert!(
        matches!(error, shale_format::Error::Corruption { .. }),
        "{error}"
    );
    assert_refused(&executor, &job, &damaged, why);
    assert_same_as_streaming(executor.as_ref(), &job, &files);
}

/// Flips one byte at offset 100, in the file's first block.
fn flip_byte_100(bytes: &mut [u8]) {
    bytes[100] ^= 0x40;
}

#[test]
fn corrupt_input_is_reported_by_the_cpu_path() {
    // Uncompressed input: the device's CRC check sees the bad block first.
    assert_corruption_caught(
        13,
        &settings(false, None, 4096, 16),
        &small_values,
        flip_byte_100,
        "checksum",
    );
}

#[test]
fn a_corrupt_compressed_block_is_found_before_it_is_decompressed() {
    // Values that compress: every block is stored with Snappy, goes up as
    // stored, and the device checks its CRC32C before it decompresses it.
    let repeated = |rng: &mut Rng| Some(vec![b'a' + (rng.below(4) as u8); 40]);
    assert_corruption_caught(
        14,
        &settings(true, None, 4096, 16),
        &repeated,
        flip_byte_100,
        "checksum",
    );
}

#[test]
fn a_compressed_block_that_does_not_decode_is_refused_with_a_good_checksum() {
    use shale_format::format::{decode_block, BlockHandle, Footer, FOOTER_LEN};
    use shale_format::iterator::KvIterator;
    let repeated = |rng: &mut Rng| Some(vec![b'a' + (rng.below(4) as u8); 40]);
    // The first data block starts the file; its size is the index's first
    // entry. Its Snappy header kept, its body copies from before the start,
    // and its checksum made good again: only decoding finds it.
    let break_snappy = |bytes: &mut [u8]| {
        let footer = Footer::decode(&bytes[bytes.len() - FOOTER_LEN..]).unwrap();
        let index = footer.index_handle;
        let stored =
            bytes[index.offset as usize..(index.offset + index.size) as usize + 5].to_vec();
        let index =
            shale_format::block::Block::new(decode_block(stored, "t", index, true).unwrap())
                .unwrap();
        let mut first = index.iter(Arc::new(shale_format::comparator::BytewiseComparator));
        first.seek_to_first();
        let size = BlockHandle::decode(first.value()).unwrap().size as usize;
        assert_eq!(bytes[size], CompressionType::Snappy as u8);
        let header = (0..5).find(|&i| bytes[i] < 0x80).unwrap() + 1;
        bytes[header..size].fill(0xff);
        let checksum = block_checksum(&bytes[..size], CompressionType::Snappy);
        bytes[size + 1..size + 5].copy_from_slice(&checksum.to_le_bytes());
    };
    assert_corruption_caught(
        15,
        &settings(true, None, 4096, 16),
        &repeated,
        break_snappy,
        "bad Snappy data",
    );
}

#[test]
fn slices_give_the_same_tables_and_overlap_reading_with_the_device() {
    // Overlapping runs with Snappy input, Bloom filters, grandparents and
    // 8 KiB output files; slices of 1 to 64 KiB cut through input blocks
    // and carry open output files from slice to slice.
    let (job, files) = make_job(
        21,
        4,
        600,
        &settings(true, Some(10), 512, 4),
        settings(true, Some(10), 1024, 8),
        &small_values,
    );
    for (slice, policy) in [
        (1 << 10, PlacementPolicy::AllDevice),
        (4 << 10, PlacementPolicy::CCompaction),
        (64 << 10, PlacementPolicy::AllDevice),
    ] {
        let Some(executor) = executor(OpenClOptions {
            max_slice_input_bytes: Some(slice),
            policy,
            ..OpenClOptions::default()
        }) else {
            return;
        };
        let output = assert_same_as_streaming(&executor, &job, &files);
        assert_eq!(output.executor, OpenCl.name());
        let stats = executor.stats();
        // A slice takes every run's entries up to its limit: a few times
        // the slice size in all.
        let expected_slices = job.input_bytes() / (8 * slice);
        assert!(
            stats.slices >= expected_slices.max(2),
            "{} slices of {slice} bytes for {} input bytes",
            stats.slices,
            job.input_bytes()
        );
        // Every stage reports its busy time, and the summary adds up.
        let s = &output.stats;
        for stage in ["read", "device", "write"] {
            assert!(s.stage_busy_secs[stage] > 0.0, "{stage}: {s:?}");
            assert!(s.stage_cpu_secs[stage] > 0.0, "{stage}: {s:?}");
        }
        // The stages' CPU is the executor's threads' CPU, split.
        let cpu: f64 = s.stage_cpu_secs.values().sum();
        let counted = device_costs(s).host_thread_cpu_nanos as f64 / 1e9;
        assert!((cpu - counted).abs() < 1e-6, "{cpu} against {counted}");
        assert!(s.pipeline_summary().unwrap().contains("; CPU device"));
        assert!(s.stage_busy_secs["device"] <= s.total_secs);
        assert_eq!(s.bytes_read, job.input_bytes());
        assert!(s.costs.work["upload"].bytes > 0 && s.costs.work["download"].bytes > 0);
    }
}

#[test]
fn a_device_failure_after_written_files_discards_them() {
    // Small slices: the first slices' files are written while later ones
    // are on the device. gather_keys runs once per slice; its ninth launch
    // fails, after 8 KiB output files from about 24 KiB of input were
    // written.
    let (job, files) = make_job(
        23,
        2,
        400,
        &settings(false, None, 512, 4),
        settings(false, Some(10), 1024, 8),
        &small_values,
    );
    let Some(executor) = executor(OpenClOptions {
        max_slice_input_bytes: Some(1 << 10),
        inject_kernel_failure: Some("gather_keys#8".into()),
        ..OpenClOptions::default()
    }) else {
        return;
    };
    let executor = Arc::new(executor);
    let io = MemIo::new(files.clone());
    let output = on_cpu_too(&executor).run(&job, &io).unwrap();
    assert_eq!(output.executor, Streaming.name());
    assert!(output.fallback.unwrap().contains("gather_keys"));
    let kept: Vec<u64> = io.outputs.lock().unwrap().keys().copied().collect();
    let reported: Vec<u64> = output.outputs.iter().map(|t| t.number).collect();
    assert_eq!(kept, reported, "only the CPU's files remain");
    assert!(
        reported[0] > 1001,
        "the device had written files 1000 and 1001 before it failed: {reported:?}, {:?}",
        executor.stats()
    );
    let (expected, expected_files) = run_job(&StreamingExecutor, &job, &files);
    assert_eq!(output.outputs.len(), expected.outputs.len());
    for (a, e) in output.outputs.iter().zip(&expected.outputs) {
        assert_eq!(
            io.outputs.lock().unwrap()[&a.number],
            expected_files[&e.number]
        );
    }
}

#[test]
fn device_jobs_reuse_memory_and_wait_only_for_results() {
    // One slice per job, Snappy and Bloom filters: every pack step runs.
    let (job, files) = make_job(
        31,
        4,
        500,
        &settings(true, Some(10), 512, 4),
        settings(true, Some(10), 1024, 8),
        &small_values,
    );
    let Some(executor) = executor(OpenClOptions {
        policy: PlacementPolicy::AllDevice,
        ..OpenClOptions::default()
    }) else {
        return;
    };
    let first_output = assert_same_as_streaming(&executor, &job, &files);
    let pinned_after_first = executor.stats().pinned_host_bytes;
    let output_files = first_output.outputs.len() as u64;
    let first = first_output.stats;
    let second = assert_same_as_streaming(&executor, &job, &files).stats;
    let third = assert_same_as_streaming(&executor, &job, &files).stats;
    eprintln!("first job: {}", device_costs(&first).summary());
    eprintln!("second job: {}", device_costs(&second).summary());
    let d = device_costs(&first);
    assert!(d.kernel_launches > 10 && d.transfers > 5, "{d:?}");
    assert!(d.device_allocations > 0, "{d:?}");
    // The same job again finds every buffer it needs kept from the first,
    // on the device and in pinned host memory.
    assert_eq!(
        device_costs(&second).device_allocations,
        0,
        "{:?}",
        device_costs(&second)
    );
    assert_eq!(
        device_costs(&third).device_allocations,
        0,
        "{:?}",
        device_costs(&third)
    );
    assert!(pinned_after_first > 0);
    assert_eq!(executor.stats().pinned_host_bytes, pinned_after_first);
    // The jobs say so too: the first mapped it all, the others none.
    assert_eq!(device_costs(&first).pinned_bytes_mapped, pinned_after_first);
    assert_eq!(device_costs(&second).pinned_bytes_mapped, 0);
    assert_eq!(device_costs(&third).pinned_bytes_mapped, 0);
    // The host blocks to read results it needs (sizes, error flags once
    // per phase, the blocks' restart counts, each file's blocks, and with
    // Snappy the compressed lengths), not once per kernel: the filters of
    // all files are one pair of launches and one download. Only waits that
    // found the command still running count, so the figure depends on the
    // machine's load (16-19 for this job's 13 files on an idle 2-core
    // machine and under two busy loops; 21 once in a CI run, with other
    // tests on the same PoCL device, before `Session::settle` waited for
    // the last command first): the bound is the launches, which a wait
    // per kernel would reach.
    assert!(output_files > 2, "{output_files} files");
    assert!(
        d.host_waits < d.kernel_launches,
        "{} waits for {} launches and {output_files} files",
        d.host_waits,
        d.kernel_launches
    );
    // (Per-file filters made this job 46 launches and 102 transfers; the
    // block plan on the device, its prefix sum and two kernels, 22 → 27.)
    assert!(
        d.kernel_launches < 30 && d.transfers <= 30 + 2 * output_files,
        "{output_files} files: {}",
        d.summary()
    );
    // What went up and came down is counted, and matches the transfer times.
    assert!(d.bytes_uploaded >= job.input_bytes(), "{d:?}");
    assert!(d.bytes_downloaded > 0 && d.host_bytes_copied > 0, "{d:?}");
    // The large transfers (the input blocks up, the finished files' blocks
    // down) go from and into pinned memory: the driver copies nothing of
    // them on the host.
    assert!(
        d.bytes_uploaded_pinned * 10 >= d.bytes_uploaded * 8,
        "{}",
        d.summary()
    );
    assert!(
        d.bytes_downloaded_pinned * 10 >= d.bytes_downloaded * 7,
        "{}",
        d.summary()
    );
    // The same work each time; only allocations (and how often the host
    // found the device already done) differ.
    let work = |c: &DeviceCosts| {
        (
            c.kernel_launches,
            c.transfers,
            c.bytes_uploaded,
            c.bytes_downloaded,
            c.bytes_uploaded_pinned,
            c.bytes_downloaded_pinned,
            c.host_bytes_copied,
        )
    };
    assert_eq!(work(&device_costs(&first)), work(&device_costs(&second)));
    // The executor's totals are the jobs' sums.
    let total = executor.stats().device;
    assert_eq!(total.kernel_launches, 3 * d.kernel_launches);
    assert_eq!(total.device_allocations, d.device_allocations);
    assert!(executor.stats().kept_device_bytes > 0);
    // The executor's own threads' CPU time is counted per job and summed.
    for job in [&first, &second, &third] {
        assert!(
            device_costs(job).host_thread_cpu_nanos > 0,
            "{:?}",
            job.costs
        );
    }
    assert_eq!(
        total.host_thread_cpu_nanos,
        [&first, &second, &third]
            .iter()
            .map(|s| device_costs(s).host_thread_cpu_nanos)
            .sum::<u64>()
    );
    // Jobs a little smaller than the first, each different (other keys,
    // fewer entries, other block counts), find every buffer they need kept:
    // their small arrays share one size class, their large ones fit what
    // the first job left.
    for (seed, entries) in [(32, 450), (33, 400), (34, 470)] {
        let (job, files) = make_job(
            seed,
            4,
            entries,
            &settings(true, Some(10), 512, 4),
            settings(true, Some(10), 1024, 8),
            &small_values,
        );
        let stats = assert_same_as_streaming(&executor, &job, &files).stats;
        assert_eq!(
            device_costs(&stats).device_allocations,
            0,
            "{entries} entries: {}",
            device_costs(&stats).summary()
        );
    }
}

#[test]
fn uncompressed_output_blocks_get_their_trailers_in_place_from_the_device() {
    let Some(executor) = executor(OpenClOptions {
        policy: PlacementPolicy::AllDevice,
        ..OpenClOptions::default()
    }) else {
        return;
    };
    for (output, on_device) in [
        (settings(false, Some(10), 1024, 8), true),
        (settings(true, Some(10), 1024, 8), false),
    ] {
        let (job, files) = make_job(
            33,
            3,
            400,
            &settings(true, None, 512, 4),
            output,
            &small_values,
        );
        // Byte for byte: every trailer the device wrote in place is the
        // one streaming writes, and each file's blocks come back and go
        // out as one piece.
        let stats = assert_same_as_streaming(&executor, &job, &files).stats;
        assert_eq!(
            stats.costs.work.contains_key("block_trailers"),
            on_device,
            "{:?}",
            stats.costs.work.keys().collect::<Vec<_>>()
        );
    }
}

/// An output whose sync fails (a full disk, an I/O error).
struct FailsToSync(Box<dyn crate::job::OutputSink>);

impl std::io::Write for FailsToSync {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl crate::job::OutputSink for FailsToSync {
    fn finish(self: Box<Self>) -> shale_format::Result<()> {
        Err(shale_format::Error::io(
            "syncing a compaction output",
            std::io::Error::other("the test's disk failed"),
        ))
    }
}

/// `MemIo` whose output numbered `fail` cannot be synced.
struct FailsOneOutput {
    inner: MemIo,
    fail: u64,
}

impl crate::job::JobIo for FailsOneOutput {
    fn open_input(
        &self,
        file: &crate::job::JobFile,
    ) -> shale_format::Result<Arc<dyn shale_format::format::RandomAccess>> {
        self.inner.open_input(file)
    }
    fn create_output(&self) -> shale_format::Result<(u64, Box<dyn crate::job::OutputSink>)> {
        let (number, sink) = self.inner.create_output()?;
        if number == self.fail {
            return Ok((number, Box::new(FailsToSync(sink))));
        }
        Ok((number, sink))
    }
    fn discard_output(&self, number: u64) -> shale_format::Result<()> {
        self.inner.discard_output(number)
    }
}

#[test]
fn an_output_that_cannot_be_synced_fails_the_job_with_its_error() {
    // Files of one slice are written several at once: the third file's
    // sync fails while others of its slice are written beside it.
    let (job, files) = make_job(
        41,
        3,
        500,
        &settings(false, None, 512, 4),
        settings(false, Some(10), 1024, 8),
        &small_values,
    );
    let Some(executor) = executor(OpenClOptions {
        policy: PlacementPolicy::AllDevice,
        ..OpenClOptions::default()
    }) else {
        return;
    };
    // The same job written whole first: it has files past the third.
    let whole = assert_same_as_streaming(&executor, &job, &files);
    assert!(whole.outputs.len() > 4, "{} files", whole.outputs.len());
    let io = FailsOneOutput {
        inner: MemIo::new(files.clone()),
        fail: 1002,
    };
    let err = executor.run(&job, &io).unwrap_err();
    assert!(err.to_string().contains("the test's disk failed"), "{err}");
}

/// An input read as with `O_DIRECT`: reads of any kind work, but the ones
/// `read_up_to` takes must be aligned (address, length, offset); they are
/// counted in `aligned_reads`, and what lies past the file's end comes back
/// as garbage, as a disk's block would.
struct DirectLike {
    bytes: Arc<Vec<u8>>,
    aligned_reads: Arc<std::sync::atomic::AtomicU64>,
}

const DIRECT_LIKE_ALIGNMENT: usize = 4096;

impl shale_format::format::RandomAccess for DirectLike {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.bytes.read_exact_at(buf, offset)
    }
    fn direct_alignment(&self) -> Option<usize> {
        Some(DIRECT_LIKE_ALIGNMENT)
    }
    fn read_up_to(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        assert_eq!(buf.as_ptr() as usize % DIRECT_LIKE_ALIGNMENT, 0, "address");
        assert_eq!(buf.len() % DIRECT_LIKE_ALIGNMENT, 0, "length");
        assert_eq!(offset as usize % DIRECT_LIKE_ALIGNMENT, 0, "offset");
        self.aligned_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let start = (offset as usize).min(self.bytes.len());
        let n = buf.len().min(self.bytes.len() - start);
        buf[..n].copy_from_slice(&self.bytes[start..start + n]);
        buf[n..].fill(0xa5);
        Ok(n)
    }
}

/// Inputs opened as [`DirectLike`].
struct DirectLikeIo {
    inner: MemIo,
    aligned_reads: Arc<std::sync::atomic::AtomicU64>,
}

impl crate::job::JobIo for DirectLikeIo {
    fn open_input(
        &self,
        file: &crate::job::JobFile,
    ) -> shale_format::Result<Arc<dyn shale_format::format::RandomAccess>> {
        let bytes = self
            .inner
            .inputs
            .get(&file.number)
            .cloned()
            .ok_or_else(|| {
                shale_format::Error::NotFound(format!("no input table {}", file.number))
            })?;
        Ok(Arc::new(DirectLike {
            bytes,
            aligned_reads: self.aligned_reads.clone(),
        }))
    }
    fn create_output(&self) -> shale_format::Result<(u64, Box<dyn crate::job::OutputSink>)> {
        self.inner.create_output()
    }
    fn discard_output(&self, number: u64) -> shale_format::Result<()> {
        self.inner.discard_output(number)
    }
}

#[test]
fn inputs_read_with_direct_io_go_straight_into_aligned_places() {
    if test_device().is_none() {
        return;
    }
    // Stored and Snappy inputs, several slices (so reads land at many
    // places in the slice buffers), and inputs smaller than one alignment.
    for (seed, entries, compressed, slice_bytes) in [
        (51, 600, false, 64 << 10),
        (52, 600, true, 64 << 10),
        (53, 40, false, 1 << 20),
    ] {
        let (job, files) = make_job(
            seed,
            4,
            entries,
            &settings(compressed, Some(10), 512, 4),
            settings(false, Some(10), 1024, 8),
            &small_values,
        );
        let (expected, expected_files) = run_job(&StreamingExecutor, &job, &files);
        let executor = OpenClExecutor::new(OpenClOptions {
            policy: PlacementPolicy::AllDevice,
            cpu_threads: 2,
            max_slice_input_bytes: Some(slice_bytes),
            ..OpenClOptions::default()
        })
        .unwrap();
        let aligned_reads = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let io = DirectLikeIo {
            inner: MemIo::new(files.clone()),
            aligned_reads: aligned_reads.clone(),
        };
        let output = executor.run(&job, &io).unwrap();
        let written = io.inner.outputs.lock().unwrap().clone();
        assert_eq!(output.outputs, expected.outputs, "seed {seed}");
        assert!(written == expected_files, "seed {seed}: tables differ");
        let reads = aligned_reads.load(std::sync::atomic::Ordering::Relaxed);
        assert!(reads >= 4, "seed {seed}: {reads} aligned reads");
    }
}

#[test]
fn a_device_job_stays_within_its_device_memory_estimate() {
    // Small values that Snappy shrinks: the most device bytes per input
    // byte (every entry's tuple, sizes and plan arrays against few stored
    // bytes), in one slice.
    // Half random, half repeated, as `shale bench` makes them.
    let compressible = |rng: &mut Rng| -> Option<Vec<u8>> {
        let mut value = rng.bytes(16);
        value.resize(32, b'a');
        Some(value)
    };
    let (job, files) = make_job(
        77,
        3,
        40_000,
        &settings(true, Some(10), 4096, 16),
        settings(true, Some(10), 4096, 16),
        &compressible,
    );
    let Some(executor) = executor(OpenClOptions {
        policy: PlacementPolicy::AllDevice,
        ..OpenClOptions::default()
    }) else {
        return;
    };
    assert_same_as_streaming(&executor, &job, &files);
    let stats = executor.stats();
    assert_eq!(stats.slices, 1, "{stats:?}");
    let per_input_byte = stats.peak_job_device_bytes as f64 / job.input_bytes() as f64;
    eprintln!(
        "{} device bytes for {} input bytes: {per_input_byte:.2} per byte",
        stats.peak_job_device_bytes,
        job.input_bytes()
    );
    assert!(
        stats.peak_job_device_bytes <= estimated_device_bytes(&job),
        "{per_input_byte:.2} device bytes per input byte, over the estimate of {DEVICE_BYTES_PER_INPUT_BYTE}"
    );
}

#[test]
fn a_restart_interval_past_a_slice_gives_the_same_tables() {
    // Restart groups longer than a slice's entries, and one entry each.
    for restart in [1, 100_000] {
        let (job, files) = make_job(
            78,
            3,
            300,
            &settings(false, None, 512, 4),
            settings(false, Some(10), 2048, restart),
            &small_values,
        );
        let Some(executor) = executor(OpenClOptions {
            policy: PlacementPolicy::AllDevice,
            max_slice_input_bytes: Some(4 << 10),
            ..OpenClOptions::default()
        }) else {
            return;
        };
        let output = assert_same_as_streaming(&executor, &job, &files);
        assert_eq!(output.executor, OpenCl.name());
        assert!(executor.stats().slices > 2, "{:?}", executor.stats());
    }
}
