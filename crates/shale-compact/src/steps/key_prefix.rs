//! The merge prefix of a key: the first 8 bytes of its user key past the
//! bytes every key of the job shares, as one integer, so most comparisons
//! of a merge are one integer comparison (`parallel`'s merge items, the
//! device's unpack and merge kernels: `user_key_prefix` in
//! `opencl/kernels/common.cl`).

use shale_format::comparator::bytewise_window;
use shale_format::internal_key::extract_user_key;

/// 8 bytes of the user key of `internal_key` from `offset` on, big-endian,
/// padded with zeros. When every key of a job shares its first `offset`
/// bytes, `prefix(a) < prefix(b)` implies `a < b` in internal-key order; the
/// offset skips a shared prefix (such as the zeros of db_bench's padded
/// decimal keys) that would make every prefix equal.
#[inline]
pub fn user_key_prefix(internal_key: &[u8], offset: usize) -> u64 {
    bytewise_window(
        extract_user_key(internal_key)
            .get(offset..)
            .unwrap_or_default(),
    )
}
