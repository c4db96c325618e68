//! Fuzzes `Block::new` and `BlockIter`.
//!
//! Input: a flags byte, a probe key (length byte + bytes), then either raw
//! block contents (flags bit 0 set) or a recipe for a well-formed block
//! (restart interval, up to 3 byte flips, entries) that is built with
//! `BlockBuilder` and then damaged by the flips. An undamaged built block must
//! read back exactly; anything else must only not panic, hang or overrun.
#![no_main]

mod common;

use std::sync::Arc;

use common::{comparator, derive_entries, flip, read_flips, walk, Input};
use libfuzzer_sys::fuzz_target;
use shale_format::block::Block;
use shale_format::block_builder::BlockBuilder;
use shale_format::iterator::KvIterator;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let raw = flags & 1 != 0;
    let internal = flags & 2 != 0;
    let probe_len = usize::from(input.u8() % 32);
    let probe = input.bytes(probe_len).to_vec();
    let cmp = comparator(internal);

    let (bytes, expected) = if raw {
        (input.rest().to_vec(), None)
    } else {
        let restart_interval = usize::from(input.u8() % 16) + 1;
        let flips = read_flips(&mut input, 3);
        let entries = derive_entries(&mut input, internal, 64 * 1024);
        let mut builder = BlockBuilder::new(restart_interval);
        for (k, v) in &entries {
            builder.add(k, v);
        }
        let mut bytes = builder.finish().to_vec();
        let damaged = flip(&mut bytes, &flips);
        (bytes, (!damaged).then_some(entries))
    };

    let size = bytes.len();
    let block = match Block::new(bytes) {
        Ok(block) => block,
        Err(err) => {
            assert!(expected.is_none(), "clean block rejected: {err}");
            return;
        }
    };
    // Forward, every entry takes at least 3 bytes. Backward, each step lands
    // strictly before the previous entry, but with a damaged restart array
    // not necessarily on an entry boundary, so only by at least 1 byte. More
    // steps than that is a loop.
    let mut iter = block.iter(cmp.clone());
    let walked = walk(&mut iter, size + 1, &probe, &*cmp, expected.as_deref());
    assert!(
        walked.forward_ended && walked.forward.len() <= size / 3,
        "forward walk of a {size}-byte block took {} steps",
        walked.forward.len()
    );
    assert!(
        walked.backward_ended,
        "backward walk of a {size}-byte block did not end"
    );

    // A second, fresh iterator starting with a seek (no prior state).
    let mut fresh = block.iter(Arc::clone(&cmp));
    fresh.seek(&probe);
    if fresh.valid() {
        let _ = (fresh.key(), fresh.value());
        fresh.prev();
    }
    let _ = fresh.status();
});
