//! CPU accounting (`getrusage`) and `--cpu_stress`, the background load that
//! stands for other work on the machine (the Luda paper's "40 % / 80 %
//! busy CPU" runs).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The period in which each stress thread is busy for `percent` of the time.
const STRESS_PERIOD: Duration = Duration::from_millis(10);

/// User and system CPU seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTime {
    /// Seconds in user mode.
    pub user: f64,
    /// Seconds in the kernel.
    pub system: f64,
}

impl CpuTime {
    /// User plus system.
    pub fn total(&self) -> f64 {
        self.user + self.system
    }

    /// `self - earlier`.
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user: self.user - earlier.user,
            system: self.system - earlier.system,
        }
    }

    /// CPU used so far by the whole process (all threads).
    pub fn process() -> CpuTime {
        rusage(libc::RUSAGE_SELF)
    }

    /// CPU used so far by the calling thread.
    pub fn thread() -> CpuTime {
        rusage(libc::RUSAGE_THREAD)
    }
}

fn rusage(who: libc::c_int) -> CpuTime {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` points to writable memory of the right type and size;
    // getrusage only writes it.
    let status = unsafe { libc::getrusage(who, usage.as_mut_ptr()) };
    if status != 0 {
        return CpuTime::default();
    }
    // SAFETY: zero-initialized, and filled by the successful call.
    let usage = unsafe { usage.assume_init() };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    CpuTime {
        user: seconds(usage.ru_utime),
        system: seconds(usage.ru_stime),
    }
}

/// Threads keeping every core busy `percent` % of the time until stopped.
#[derive(Debug)]
pub struct CpuStress {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<CpuTime>>,
}

impl CpuStress {
    /// Starts one thread per available core, each spinning `percent` % of
    /// every 10 ms and sleeping the rest. `percent` 0 starts nothing.
    pub fn start(percent: u32) -> CpuStress {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        if percent > 0 {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let busy = STRESS_PERIOD.mul_f64(f64::from(percent.min(100)) / 100.0);
            for _ in 0..cores {
                let stop = stop.clone();
                threads.push(std::thread::spawn(move || stress_loop(&stop, busy)));
            }
        }
        CpuStress { stop, threads }
    }

    /// Stops the threads; returns the CPU time they used.
    pub fn stop(self) -> CpuTime {
        self.stop.store(true, Ordering::Relaxed);
        let mut used = CpuTime::default();
        for thread in self.threads {
            if let Ok(time) = thread.join() {
                used.user += time.user;
                used.system += time.system;
            }
        }
        used
    }
}

/// Busy for `busy` of each period, asleep for the rest, until `stop`.
fn stress_loop(stop: &AtomicBool, busy: Duration) -> CpuTime {
    let start = CpuTime::thread();
    while !stop.load(Ordering::Relaxed) {
        let period_start = Instant::now();
        while period_start.elapsed() < busy {
            std::hint::spin_loop();
        }
        if let Some(rest) = STRESS_PERIOD.checked_sub(period_start.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    CpuTime::thread().since(&start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_cpu_time_grows() {
        let before = CpuTime::process();
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let used = CpuTime::process().since(&before);
        assert!(used.total() > 0.0, "{used:?}");
    }

    #[test]
    fn stress_threads_stop_and_report_their_cpu() {
        let stress = CpuStress::start(50);
        std::thread::sleep(Duration::from_millis(60));
        let used = stress.stop();
        assert!(used.total() > 0.0, "{used:?}");
        assert_eq!(CpuStress::start(0).stop(), CpuTime::default());
    }
}
