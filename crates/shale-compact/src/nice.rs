//! The nice level (CPU priority) of compaction threads; not the order in
//! which compactions run, which is the engine's `compaction::priority`.
//! On a machine where foreground
//! readers and writers keep the cores busy, compaction threads at a lower
//! priority (a higher nice value) give the CPU back to them first, which
//! shortens the foreground's latency tail; RocksDB offers the same
//! (`Env::LowerThreadPoolCPUPriority`). Compaction still gets every idle
//! cycle, and when it falls behind, the L0 slowdown and stop triggers make
//! writers wait, which frees the CPU for it.

/// Largest nice increment: nice values end at 19.
pub const MAX_NICE_INCREMENT: u8 = 19;

/// Lowers the calling thread's CPU priority by `increment` nice levels (0:
/// unchanged). Linux keeps the nice value per thread and new threads
/// inherit it; elsewhere, where it is per process, nothing is changed.
/// Best effort: lowering one's own priority needs no privilege, and a
/// failure only leaves the thread as it was.
pub fn lower_current_thread(increment: u8) {
    if increment == 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let increment = i32::from(increment.min(MAX_NICE_INCREMENT));
        // SAFETY: nice(2) takes no pointers; on Linux it changes only the
        // calling thread's nice value.
        unsafe {
            libc::nice(increment);
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn current_nice() -> i32 {
        // SAFETY: getpriority(2) takes no pointers; `who` 0 is the caller.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }

    #[test]
    fn lowers_only_the_calling_thread() {
        let before = current_nice();
        let inside = std::thread::spawn(|| {
            let start = current_nice();
            lower_current_thread(3);
            let lowered = current_nice();
            // A thread started from a lowered one inherits its priority.
            let child = std::thread::spawn(current_nice).join().unwrap();
            (start, lowered, child)
        })
        .join()
        .unwrap();
        assert_eq!(inside.1, (inside.0 + 3).min(19));
        assert_eq!(inside.2, inside.1);
        assert_eq!(current_nice(), before, "the calling thread is unchanged");
    }
}
