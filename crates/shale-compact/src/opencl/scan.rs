//! Exclusive prefix sums on the device (kernels in `kernels/scan.cl`): each
//! work item sums a few consecutive values, each work group scans its
//! items' sums in local memory, the group totals are scanned
//! the same way (recursively), and each slice gets its group's offset added.
//! CPU twin: `crate::testing::twins::exclusive_scan`.

use opencl3::memory::Buffer;

use super::device_error::DeviceError;
use super::session::{mem, Arg, Session};

/// Work-group size of the scan (smaller when the device allows less).
const SCAN_GROUP: usize = 256;

/// Values each work item scans on its own (`SCAN_ITEMS` in `scan.cl`).
const SCAN_ITEMS: usize = 4;

/// Exclusive prefix sums of the first `n` values of `values` (u32), as u64
/// offsets, and their total.
pub(crate) fn exclusive_scan_u32(
    session: &mut Session<'_>,
    what: &str,
    values: &Buffer<u32>,
    n: usize,
) -> Result<(Buffer<u64>, u64), DeviceError> {
    let (out, total) = scan(session, what, mem(values), n, "scan_groups_u32", 4, true)?;
    Ok((out, total.unwrap_or(0)))
}

/// [`exclusive_scan_u32`] without reading the total back: nothing waits.
pub(crate) fn exclusive_scan_u32_on_device(
    session: &mut Session<'_>,
    what: &str,
    values: &Buffer<u32>,
    n: usize,
) -> Result<Buffer<u64>, DeviceError> {
    Ok(scan(session, what, mem(values), n, "scan_groups_u32", 4, false)?.0)
}

fn scan(
    session: &mut Session<'_>,
    what: &str,
    values: Arg,
    n: usize,
    kernel: &'static str,
    value_bytes: u64,
    read_total: bool,
) -> Result<(Buffer<u64>, Option<u64>), DeviceError> {
    let out = session.alloc::<u64>(what, n)?;
    if n == 0 {
        return Ok((out, Some(0)));
    }
    let group = session.group_size(kernel, SCAN_GROUP)?;
    let per_group = group * SCAN_ITEMS;
    let groups = n.div_ceil(per_group);
    let sums = session.alloc::<u64>(what, groups)?;
    session.launch(
        kernel,
        n.div_ceil(SCAN_ITEMS),
        Some(group),
        n as u64 * value_bytes,
        &[
            values,
            Arg::U32(n as u32),
            mem(&out),
            mem(&sums),
            Arg::Local(group * 8),
        ],
    )?;
    if groups == 1 {
        let total = if read_total {
            Some(session.read_one(what, &sums, 0)?)
        } else {
            None
        };
        return Ok((out, total));
    }
    let (scanned, total) = scan(
        session,
        what,
        mem(&sums),
        groups,
        "scan_groups_u64",
        8,
        read_total,
    )?;
    session.launch(
        "scan_add_group_offsets",
        n,
        None,
        n as u64 * 8,
        &[
            mem(&out),
            Arg::U32(n as u32),
            Arg::U32(per_group as u32),
            mem(&scanned),
        ],
    )?;
    Ok((out, total))
}
