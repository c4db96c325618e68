//! The allocator behind every allocation libshaledb makes: C's `malloc`,
//! `calloc`, `realloc`, `posix_memalign` and `free`, by contract rather
//! than by the accident of what `std::alloc::System` happens to call.
//!
//! Why: LevelDB's `leveldb_get` returns a `malloc`ed buffer the caller
//! releases with `leveldb_free` (or `free`). The engine already reads the
//! value into a `Vec<u8>` of its own; with this allocator that vector's
//! buffer *is* a `malloc`ed block, so `leveldb_get` hands it over as it is
//! (`crate::status::into_malloced`) instead of copying it into a second
//! buffer and freeing the first, which is the one copy LevelDB's own C
//! wrapper makes (`CopyString` in `db/c.cc`, from a `std::string`).
//!
//! Every block this allocator returns, whatever its alignment, may be
//! released with `free`: `posix_memalign`'s blocks can be, by POSIX.

use std::alloc::{GlobalAlloc, Layout};

/// The alignment every `malloc` block has (glibc and musl: twice the size
/// of a pointer on 64-bit targets). A smaller figure would only send more
/// layouts to `posix_memalign`; a larger one would be unsound.
const MALLOC_ALIGN: usize = if cfg!(target_pointer_width = "64") {
    16
} else {
    8
};

/// C's allocator as Rust's global allocator.
#[derive(Debug)]
pub struct Malloc;

/// True when plain `malloc(layout.size())` is aligned enough: the layout
/// asks for no more than `malloc`'s alignment, and not more than its own
/// size (an allocator may align a small block only to its size, as
/// `std`'s own Unix allocator also assumes).
fn malloc_suffices(align: usize, size: usize) -> bool {
    align <= MALLOC_ALIGN && align <= size
}

/// `posix_memalign` for a layout `malloc` cannot serve; null on failure.
unsafe fn aligned_alloc(layout: Layout) -> *mut u8 {
    let mut out = std::ptr::null_mut();
    // POSIX requires a power of two multiple of sizeof(void*).
    let align = layout.align().max(std::mem::size_of::<usize>());
    // SAFETY: a valid out-pointer and a power-of-two alignment.
    if unsafe { libc::posix_memalign(&mut out, align, layout.size()) } != 0 {
        return std::ptr::null_mut();
    }
    out.cast()
}

// SAFETY: every method returns a block of at least `layout.size()` bytes
// aligned to `layout.align()` (or null), and `dealloc`/`realloc` only
// receive blocks these methods returned.
unsafe impl GlobalAlloc for Malloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if malloc_suffices(layout.align(), layout.size()) {
            // SAFETY: malloc has no precondition.
            unsafe { libc::malloc(layout.size()).cast() }
        } else {
            // SAFETY: passed on.
            unsafe { aligned_alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if malloc_suffices(layout.align(), layout.size()) {
            // SAFETY: calloc has no precondition.
            unsafe { libc::calloc(1, layout.size()).cast() }
        } else {
            // SAFETY: passed on; the block is zeroed before it is returned.
            unsafe {
                let out = aligned_alloc(layout);
                if !out.is_null() {
                    std::ptr::write_bytes(out, 0, layout.size());
                }
                out
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: a block from malloc, calloc, realloc or posix_memalign.
        unsafe { libc::free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if malloc_suffices(layout.align(), new_size) {
            // SAFETY: a block this allocator returned; realloc keeps
            // malloc's alignment, which suffices for `layout.align()`.
            unsafe { libc::realloc(ptr.cast(), new_size).cast() }
        } else {
            // SAFETY: the trait's contract: `new_size` with `layout.align()`
            // is a valid layout; the old block holds `layout.size()` bytes.
            unsafe {
                let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
                let out = aligned_alloc(new_layout);
                if !out.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, out, layout.size().min(new_size));
                    libc::free(ptr.cast());
                }
                out
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malloc_serves_small_alignments_only() {
        assert!(malloc_suffices(1, 1));
        assert!(malloc_suffices(8, 100));
        assert!(malloc_suffices(MALLOC_ALIGN, MALLOC_ALIGN));
        // A block smaller than its alignment, or aligned beyond malloc's.
        assert!(!malloc_suffices(8, 4));
        assert!(!malloc_suffices(64, 4096));
    }

    #[test]
    fn every_layout_is_aligned_and_freeable() {
        for (size, align) in [(1, 1), (100, 1), (4, 8), (4096, 64), (10, 4096)] {
            let layout = Layout::from_size_align(size, align).unwrap_or_else(|e| panic!("{e}"));
            // SAFETY: a non-zero layout; the block is released with free,
            // as a C caller would release it.
            unsafe {
                let block = Malloc.alloc_zeroed(layout);
                assert!(!block.is_null());
                assert_eq!(block as usize % align, 0, "size {size} align {align}");
                assert!((0..size).all(|i| *block.add(i) == 0));
                let grown = Malloc.realloc(block, layout, size * 3);
                assert!(!grown.is_null());
                assert_eq!(
                    grown as usize % align,
                    0,
                    "grown: size {size} align {align}"
                );
                libc::free(grown.cast());
            }
        }
    }
}
