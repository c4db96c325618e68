//! The engine's lock order, checked in debug builds.
//!
//! A database has four locks, always taken in this order (a thread may
//! skip any of them, never go back up): the version set, the compaction
//! service's scheduler, the database's state, the service's bell. Each is
//! taken through [`lock`], which returns a [`Guard`]; in debug builds a
//! thread-local set of the ranks held makes taking a lock of a lower or
//! equal rank than one already held panic, naming both, so a test that
//! exercises the inversion fails at once instead of deadlocking one day in
//! production. Release builds keep no record.

use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard, WaitTimeoutResult};
use std::time::Duration;

/// A lock's place in the order: lower ranks are taken first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// `DbInner::versions`: the MANIFEST, held across its fsync.
    Versions = 0,
    /// The compaction service's scheduler.
    Scheduler = 1,
    /// `DbInner::state`.
    State = 2,
    /// The compaction service's bell (a leaf).
    Bell = 3,
}

#[cfg(debug_assertions)]
thread_local! {
    /// Bit `rank` is set while this thread holds that lock.
    static HELD: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

#[cfg(debug_assertions)]
fn acquire(rank: Rank) {
    HELD.with(|held| {
        let bits = held.get();
        let at_or_above = bits >> (rank as u8);
        assert!(
            at_or_above == 0,
            "lock order: taking {rank:?} while holding {:?} (the order is versions, \
             scheduler, state, bell; see crates/shale/src/lock_order.rs)",
            [Rank::Versions, Rank::Scheduler, Rank::State, Rank::Bell]
                .into_iter()
                .filter(|r| bits & (1 << *r as u8) != 0)
                .collect::<Vec<_>>()
        );
        held.set(bits | 1 << rank as u8);
    });
}

#[cfg(debug_assertions)]
fn release(rank: Rank) {
    HELD.with(|held| held.set(held.get() & !(1 << rank as u8)));
}

#[cfg(not(debug_assertions))]
fn acquire(_rank: Rank) {}

#[cfg(not(debug_assertions))]
fn release(_rank: Rank) {}

/// A held lock of the engine's order.
pub(crate) struct Guard<'a, T> {
    guard: Option<MutexGuard<'a, T>>,
    rank: Rank,
}

/// Takes `mutex`, of rank `rank`. A poisoned lock is taken all the same:
/// panics under these locks are caught around jobs and the data they
/// guard stays structurally valid.
pub(crate) fn lock<T>(mutex: &Mutex<T>, rank: Rank) -> Guard<'_, T> {
    acquire(rank);
    Guard {
        guard: Some(mutex.lock().unwrap_or_else(|e| e.into_inner())),
        rank,
    }
}

impl<'a, T> Guard<'a, T> {
    fn take(&mut self) -> MutexGuard<'a, T> {
        release(self.rank);
        self.guard.take().expect("a guard is held until dropped")
    }

    fn put(guard: MutexGuard<'a, T>, rank: Rank) -> Guard<'a, T> {
        acquire(rank);
        Guard {
            guard: Some(guard),
            rank,
        }
    }

    /// Waits on `cv`, releasing the lock meanwhile.
    pub(crate) fn wait(mut self, cv: &Condvar) -> Guard<'a, T> {
        let rank = self.rank;
        let guard = cv.wait(self.take()).unwrap_or_else(|e| e.into_inner());
        Guard::put(guard, rank)
    }

    /// Waits on `cv` for at most `timeout`, releasing the lock meanwhile.
    pub(crate) fn wait_timeout(
        mut self,
        cv: &Condvar,
        timeout: Duration,
    ) -> (Guard<'a, T>, WaitTimeoutResult) {
        let rank = self.rank;
        let (guard, result) = cv
            .wait_timeout(self.take(), timeout)
            .unwrap_or_else(|e| e.into_inner());
        (Guard::put(guard, rank), result)
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard.as_ref().expect("a guard is held until dropped")
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard.as_mut().expect("a guard is held until dropped")
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        if self.guard.take().is_some() {
            release(self.rank);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_order_is_obeyed_and_an_inversion_panics() {
        let (versions, state) = (Mutex::new(0), Mutex::new(0));
        {
            let _v = lock(&versions, Rank::Versions);
            let _s = lock(&state, Rank::State);
        }
        // Released: taking them again, alone, is fine.
        drop(lock(&state, Rank::State));
        let inverted = std::thread::spawn(move || {
            let _s = lock(&state, Rank::State);
            let _v = lock(&versions, Rank::Versions);
        })
        .join();
        if cfg!(debug_assertions) {
            assert!(inverted.is_err(), "taking versions under state must panic");
        }
    }
}
