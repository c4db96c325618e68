//! Pages of a log's mapping made writable ahead of its writer, on a thread
//! of their own.
//!
//! The first write to each page of a mapped log faults: the kernel finds
//! or allocates the page, zeroes it and lets the file system mark the
//! block written (`page_mkwrite`). On ext4 that is about 5.5 us per 4 KiB
//! page, paid by the writer in the middle of a `Put` (one in ~14 256-byte
//! writes), and sometimes much more when the fault waits for the file
//! system's journal behind a flush or a compaction. A log asks this thread
//! to fault in the next pages (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14)
//! before the writer reaches them, so the writer finds them mapped.
//!
//! Only the kernel's page tables change: populating never writes a byte
//! of the file, so whether it runs before, during or after the writer's
//! copies changes nothing that can be read, and a page it did not reach
//! in time is faulted in by the writer as without it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, OnceLock};

use memmap2::MmapRaw;

/// One range of a mapping to fault in. The mapping stays mapped while the
/// request holds it.
struct Request {
    map: Arc<MmapRaw>,
    offset: usize,
    len: usize,
}

/// Requests sent and not yet done.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// False once the kernel said it cannot populate (before Linux 5.14):
/// requests stop, and writers fault pages in as they reach them.
static SUPPORTED: AtomicBool = AtomicBool::new(true);

/// The thread's queue; the thread starts with the first request and
/// lives as long as the process, asleep while there is nothing to do.
fn queue() -> Option<&'static Sender<Request>> {
    static QUEUE: OnceLock<Option<Sender<Request>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (sender, receiver) = channel::<Request>();
            std::thread::Builder::new()
                .name("shale-wal-prefault".into())
                .spawn(move || {
                    shale_compact::nice::lower_current_thread(19);
                    while let Ok(request) = receiver.recv() {
                        populate(&request);
                        drop(request);
                        PENDING.fetch_sub(1, Ordering::Release);
                    }
                })
                .ok()
                .map(|_| sender)
        })
        .as_ref()
}

/// Asks for `len` bytes of `map` from `offset` on to be faulted in for
/// writing. Both are rounded out to whole pages inside the mapping.
pub(super) fn request(map: &Arc<MmapRaw>, offset: usize, len: usize) {
    if !SUPPORTED.load(Ordering::Relaxed) || len == 0 {
        return;
    }
    if let Some(queue) = queue() {
        PENDING.fetch_add(1, Ordering::Relaxed);
        let request = Request {
            map: Arc::clone(map),
            offset,
            len,
        };
        // The thread outlives every sender; a failed send only means no
        // prefault.
        if queue.send(request).is_err() {
            PENDING.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Waits until every request sent so far is done.
#[cfg(test)]
pub(super) fn wait_idle() {
    while PENDING.load(Ordering::Acquire) != 0 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn populate(request: &Request) {
    let page = page_size();
    let start = request.offset - request.offset % page;
    let end = request
        .offset
        .saturating_add(request.len)
        .next_multiple_of(page)
        .min(request.map.len());
    if start >= end {
        return;
    }
    // A few pages per call: the call holds the process's memory map
    // locked for reading, and a thread that maps or unmaps memory
    // meanwhile (an allocation, a table read) waits for it.
    let slice = SLICE_PAGES * page;
    let mut at = start;
    while at < end {
        let len = slice.min(end - at);
        // SAFETY: `at..at + len` lies inside the mapping, which `request`
        // keeps mapped; populating changes page tables only, never the
        // bytes mapped (see the module's documentation), so it races with
        // no writer.
        let rc = unsafe {
            libc::madvise(
                request.map.as_mut_ptr().add(at).cast(),
                len,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if rc != 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
                // An older kernel: the advice is unknown.
                SUPPORTED.store(false, Ordering::Relaxed);
            }
            // Other errors (no memory, a page beyond the end of a log
            // trimmed in the meantime) leave the rest to the writer's own
            // faults.
            return;
        }
        at += len;
    }
}

/// Pages faulted in by one call.
const SLICE_PAGES: usize = 4;

fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    // SAFETY: a plain query.
    *PAGE.get_or_init(|| {
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
    })
}
