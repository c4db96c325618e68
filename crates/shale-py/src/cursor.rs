//! The engine cursor behind an `Iterator` or `RawIterator`, and the
//! database's registry of them: closing a database closes every cursor
//! still open on it (as plyvel does), so a cursor is never used after its
//! database is gone.
//!
//! Lock rule: a cursor's mutex is taken only with the GIL released
//! (`py.allow_threads`), and no Python object is touched while it is held,
//! so a thread waiting for a cursor never holds up the interpreter.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use shale::DbIterator;

/// Where a plyvel-style `Iterator` stands relative to the engine cursor
/// (plyvel's `IteratorState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// Before the first entry of the range: `next()` seeks to it.
    BeforeStart,
    /// After the last entry of the range: `prev()` seeks to it.
    AfterStop,
    /// The engine cursor is on the entry last returned.
    InBetween,
    /// A `seek()` put the engine cursor on the entry `next()` returns.
    AlreadyPositioned,
}

/// An engine cursor (`None` once closed) and its position.
#[derive(Debug)]
pub struct CursorState {
    /// The engine cursor; `None` once the iterator or its database closed.
    pub iter: Option<DbIterator>,
    /// Used by `Iterator` only.
    pub position: Position,
}

/// A cursor shared between its Python object and the database's registry.
pub type SharedCursor = Arc<Mutex<CursorState>>;

/// Locks a cursor. A panic while it was held leaves at worst an engine
/// cursor in some valid position, so a poisoned lock is still usable.
pub fn lock(cursor: &Mutex<CursorState>) -> MutexGuard<'_, CursorState> {
    cursor.lock().unwrap_or_else(|e| e.into_inner())
}

/// The open cursors of one database, held weakly: a cursor dropped by
/// Python goes away on its own.
#[derive(Debug, Default)]
pub struct CursorRegistry {
    cursors: Vec<Weak<Mutex<CursorState>>>,
    /// Dead entries are swept when the list reaches this length.
    sweep_at: usize,
    closed: bool,
}

impl CursorRegistry {
    /// Adds `cursor`. False (and the cursor is closed) when the database
    /// closed meanwhile.
    pub fn register(&mut self, cursor: &SharedCursor) -> bool {
        if self.closed {
            lock(cursor).iter = None;
            return false;
        }
        if self.cursors.len() >= self.sweep_at {
            self.cursors.retain(|weak| weak.strong_count() > 0);
            self.sweep_at = (self.cursors.len() * 2).max(64);
        }
        self.cursors.push(Arc::downgrade(cursor));
        true
    }

    /// Marks the database closed and hands back the cursors to close.
    pub fn close(&mut self) -> Vec<Weak<Mutex<CursorState>>> {
        self.closed = true;
        std::mem::take(&mut self.cursors)
    }
}
