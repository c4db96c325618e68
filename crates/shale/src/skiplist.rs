//! An insert-only skip list of byte entries whose nodes live in an arena:
//! the design of LevelDB's `db/skiplist.h` and `util/arena.cc`.
//!
//! Why by hand rather than on `crossbeam-skiplist`: a memtable never removes
//! an entry and drops all of them at once, so it needs none of the epoch
//! reclamation, reference counts and removal marks a general concurrent map
//! pays for on every operation, and it allocates each entry with its tower
//! of links in one bump of an arena instead of two heap allocations (which
//! the flush thread later frees one by one, contending with the writer for
//! the allocator). Measured on `shale bench --benchmarks=fillrandom`:
//! `docs/results/engine-speed.md`, "Engine speed after the read- and
//! write-path work".
//!
//! Concurrency: any number of threads insert at once and readers take no
//! lock (RocksDB's `InlineSkipList::InsertConcurrently`). An inserter takes
//! an [`Inserter`] out of the list's slots, once per batch, the slot of its
//! thread when free: its own arenas, height generator and splice, so
//! inserts share no mutable memory but the links and the list's counts. A
//! node is fully written before a compare-and-swap links it in at each
//! level, bottom up; a swap that loses to another insert walks forward
//! from where it was and tries again. Readers follow links with acquire
//! loads, so they see either the old list or the new node complete. Nodes
//! are never unlinked or freed before the list is dropped.

use std::cell::UnsafeCell;
use std::cmp::Ordering;
use std::mem::{align_of, size_of, MaybeUninit};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Mutex, PoisonError};

use crossbeam_utils::CachePadded;
use shale_format::internal_key::INTERNAL_KEY_TRAILER_LEN;

/// Tallest tower. With a branching factor of 3 this serves 3^16 = 43 M
/// entries at full speed, far more than a memtable holds.
const MAX_HEIGHT: usize = 16;
/// One node in `BRANCHING` is promoted to each next level. A search visits
/// about `b log_b n` nodes, least for `b` near e: 3 visits 5 % fewer than
/// LevelDB's 4, and a search that goes down finds its next node already
/// fetched (see `find_from`), so fewer steps along each level count more
/// than the extra links (1.5 per node instead of 1.33). 3 against 4 on a
/// memtable-sized list (`benches/skiplist_fill.rs`):
/// `docs/results/write-path.md`, "The skip list's search, fourth pass".
const BRANCHING: u32 = 3;
/// Nodes at least this tall come from an arena of their own. A search
/// visits about as many nodes on each level, and the levels from this one
/// up hold a ninth of the nodes: side by side, they take a ninth of the
/// cache lines they would among the short nodes, so a search finds more of
/// them in the cache. Of the heights tried (2, 3 and 4, against one arena
/// for all), 3 was best: `docs/results/write-path.md`, "The skip list's
/// search, fourth pass".
const TALL_FROM: usize = 3;
/// Stretches of the list [`SkipList::positions`] walks side by side, at
/// least: about as many cache misses in flight as a core keeps.
const GATHER_STRETCHES: usize = 16;
/// Arena chunk size; larger allocations get a chunk of their own.
const CHUNK_BYTES: usize = 64 << 10;

/// How entries are ordered: by a key that is a prefix of the entry (its
/// first `key_len` bytes).
#[derive(Debug, Clone)]
pub enum EntryOrder {
    /// Keys compared by a function.
    Plain(fn(&[u8], &[u8]) -> Ordering),
    /// Internal keys in a database's user-key order (inlined when it is
    /// bytewise: an insert compares once per step down the list).
    Internal(shale_format::comparator::KeyOrder),
}

impl EntryOrder {
    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            EntryOrder::Plain(compare) => compare(a, b),
            EntryOrder::Internal(order) => order.compare_internal(a, b),
        }
    }

    /// True when keys order first by [`EntryOrder::prefix`]: internal keys
    /// over bytewise user keys, whose first sixteen bytes, zero-padded and
    /// read big-endian, order as the keys do whenever they differ.
    fn has_prefix(&self) -> bool {
        matches!(self, EntryOrder::Internal(order) if order.is_bytewise())
    }

    /// The first sixteen bytes of the user key of internal key `key`: with
    /// eight, keys that share their first eight bytes (db_bench's `%016d`
    /// keys share nine digits) were compared in full at every step.
    /// REQUIRES: [`EntryOrder::has_prefix`].
    #[inline]
    fn prefix(key: &[u8]) -> Prefix {
        let user_key = &key[..key.len().saturating_sub(INTERNAL_KEY_TRAILER_LEN)];
        if let Some((first, rest)) = user_key.split_first_chunk::<8>() {
            return [
                u64::from_be_bytes(*first),
                shale_format::comparator::bytewise_window(rest),
            ];
        }
        [shale_format::comparator::bytewise_window(user_key), 0]
    }
}

/// The first sixteen bytes of a user key, zero-padded, as two big-endian
/// words: arrays compare word by word, so in the keys' order.
type Prefix = [u64; 2];

/// A key being looked for, with its prefix when the order has one.
#[derive(Clone, Copy)]
struct Target<'a> {
    key: &'a [u8],
    prefix: Prefix,
}

/// A node: its level-0 link and the entry's lengths, then the entry bytes
/// (key, then value); the links of levels 1 and up lie before it, level
/// `l` at `l` links below (RocksDB's `InlineSkipList` layout). `repr(C)`
/// fixes the layout the pointer arithmetic relies on.
///
/// No height and no copy of the key's prefix are stored: a search knows
/// the level it is on, and the prefix it compares is read from the key,
/// which starts in the same cache line as the level-0 link. A node of a
/// 32-byte pair with a 16-byte key takes 64 bytes plus 8 per link above
/// the first (76 on average) instead of 100 with a 32-byte header
/// (height, padding and a 16-byte prefix) before the links, so a memtable
/// of the same size holds about a third more entries and its flushes make
/// fewer, larger level-0 tables (LevelDB's node: about 77 bytes).
#[repr(C)]
struct Node {
    next: [AtomicPtr<Node>; 1],
    key_len: u32,
    value_len: u32,
    entry: [u8; 0],
}

const HEADER_BYTES: usize = size_of::<Node>();
const LINK_BYTES: usize = size_of::<AtomicPtr<Node>>();

impl Node {
    /// Bytes of a node of `height` links with `entry_len` entry bytes.
    fn size(height: usize, entry_len: usize) -> usize {
        (height - 1) * LINK_BYTES + HEADER_BYTES + entry_len
    }

    /// The link at `level`.
    ///
    /// # Safety
    ///
    /// `node` points to a node written by [`SkipList`] and `level` is below
    /// its height.
    #[inline(always)]
    unsafe fn link<'a>(node: *const Node, level: usize) -> &'a AtomicPtr<Node> {
        // SAFETY: the caller guarantees `level < height`, and the links of
        // levels above 0 lie just before the node, inside its arena
        // allocation.
        unsafe { &*(node as *const AtomicPtr<Node>).sub(level) }
    }

    /// The entry bytes (key then value).
    ///
    /// # Safety
    ///
    /// `node` points to a node written by [`SkipList`], which outlives `'a`.
    #[inline(always)]
    unsafe fn entry<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the header was written before the node was published, the
        // entry bytes follow it, and the arena keeps them in place until the
        // list is dropped.
        unsafe {
            let header = &*node;
            std::slice::from_raw_parts(
                ptr::addr_of!((*node).entry) as *const u8,
                header.key_len as usize + header.value_len as usize,
            )
        }
    }

    /// [`EntryOrder::prefix`] of the node's key.
    ///
    /// # Safety
    ///
    /// As [`Node::entry`], and the list's order has a prefix.
    #[inline(always)]
    unsafe fn prefix(node: *const Node) -> Prefix {
        // SAFETY: as the caller guarantees.
        unsafe {
            if (*node).key_len as usize >= 2 * 8 + INTERNAL_KEY_TRAILER_LEN {
                // The entry starts 8-byte aligned (nodes are, and the
                // header is 16 bytes), and the user key has 16 bytes.
                let words = ptr::addr_of!((*node).entry) as *const u64;
                [u64::from_be(*words), u64::from_be(*words.add(1))]
            } else {
                let key = &Node::entry(node)[..(*node).key_len as usize];
                EntryOrder::prefix(key)
            }
        }
    }
}

/// A position in the list: a node other than the head. Valid as long as the
/// list it came from. [`SkipList::key`], [`SkipList::value`] and
/// [`SkipList::prefetch_entry`] read only the node, so any list that lives
/// no longer than the one `at` came from may read it (a memtable's lists
/// live and die together).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Position(NonNull<Node>);

// SAFETY: a position is a pointer to immutable bytes (the entry) and atomics
// (the links) inside the arena; using it from any thread is as safe as from
// the one that found it, provided the list outlives it (the callers' rule).
unsafe impl Send for Position {}
// SAFETY: see `Send`.
unsafe impl Sync for Position {}

/// Bump allocation in chunks that never move.
struct Arena {
    chunks: Vec<Box<[MaybeUninit<u64>]>>,
    /// Free space of the last chunk.
    next: *mut u8,
    remaining: usize,
}

impl Arena {
    /// An arena with no chunk yet.
    fn new() -> Arena {
        Arena {
            chunks: Vec::new(),
            next: ptr::null_mut(),
            remaining: 0,
        }
    }

    /// `bytes` (rounded up to 8) of 8-byte-aligned, uninitialised memory that
    /// stays in place until the arena is dropped.
    fn allocate(&mut self, bytes: usize) -> NonNull<u8> {
        let bytes = bytes.next_multiple_of(8);
        if bytes > self.remaining {
            let chunk_bytes = if bytes > CHUNK_BYTES / 4 {
                bytes
            } else {
                CHUNK_BYTES
            };
            let mut chunk = vec![MaybeUninit::<u64>::uninit(); chunk_bytes / 8].into_boxed_slice();
            let start = chunk.as_mut_ptr() as *mut u8;
            self.chunks.push(chunk);
            if chunk_bytes == bytes {
                // A chunk of its own: keep filling the previous one.
                // SAFETY: `start` is a live allocation of `bytes` bytes.
                return unsafe { NonNull::new_unchecked(start) };
            }
            self.next = start;
            self.remaining = chunk_bytes;
        }
        let at = self.next;
        // SAFETY: `bytes <= remaining`, so both stay inside the last chunk.
        unsafe {
            self.next = at.add(bytes);
            self.remaining -= bytes;
            NonNull::new_unchecked(at)
        }
    }
}

/// One inserter's own state, kept in one of the list's slots between
/// batches: the arenas its nodes come from, its height generator and its
/// splice.
struct InsertState {
    arena: Arena,
    /// The arena of nodes [`TALL_FROM`] or more tall.
    tall: Arena,
    rng: u32,
    /// Per level, the node the last insert went after (or the head): the
    /// next insert starts its search there when its key lands close by, as
    /// RocksDB's `InlineSkipList` splice (sequential keys then cost one
    /// comparison instead of a search from the top).
    splice: [*const Node; MAX_HEIGHT],
}

/// Where a key goes at each level: the last node before it and the first
/// node not before it (null at the end), as a search found them.
struct Splice {
    prev: [*const Node; MAX_HEIGHT],
    next: [*mut Node; MAX_HEIGHT],
}

impl InsertState {
    /// A height of 1 with probability 2/3, 2 with 2/9, ...
    fn random_height(&mut self) -> usize {
        let mut height = 1;
        loop {
            // xorshift32: fast, and enough for tower heights.
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 17;
            self.rng ^= self.rng << 5;
            if height >= MAX_HEIGHT || self.rng % BRANCHING != 0 {
                return height;
            }
            height += 1;
        }
    }
}

/// The skip list. `Send + Sync`; see the module docs.
pub struct SkipList {
    head: NonNull<Node>,
    order: EntryOrder,
    /// `order.has_prefix()`, once.
    has_prefix: bool,
    /// Read by every search; written only when a node taller than every
    /// node before it is linked (a few times per list).
    max_height: AtomicUsize,
    /// What every batch's inserter changes, on cache lines of their own:
    /// beside the fields above they would make each concurrent insert take
    /// the line every search reads from the others.
    shared: CachePadded<Shared>,
    /// The inserters' states, one per thread as far as they go: a thread
    /// takes the slot its index names (`thread_slot`), so threads that
    /// insert at once do not pass one pool's lock and states between their
    /// cores at every batch. Each state owns the arena chunks of the nodes
    /// it made; the first also owns the head.
    slots: [CachePadded<Slot>; SLOTS],
    /// Each node's height, for the tests' check of every level (nodes do
    /// not store it).
    #[cfg(test)]
    heights: Mutex<std::collections::HashMap<usize, usize>>,
}

/// The fields of [`SkipList`] that every inserter writes.
struct Shared {
    len: AtomicUsize,
    entry_bytes: AtomicUsize,
    /// States of inserters that found every slot taken (more threads
    /// inserting at once than [`SLOTS`]), for the next such inserter.
    /// Boxed: an inserter works on its state where it lies, and moves.
    #[allow(clippy::vec_box)]
    overflow: Mutex<Vec<Box<InsertState>>>,
    /// Seeds the height generator of the next new inserter.
    seeds: AtomicUsize,
}

/// Slots of inserter states in a list: more than the threads that insert
/// at once in practice (the writers of one write group).
const SLOTS: usize = 16;

/// One inserter state, taken by at most one inserter at a time.
struct Slot {
    /// An inserter holds the slot.
    busy: AtomicBool,
    /// `None` until a first inserter takes the slot. Accessed only by the
    /// thread that set `busy`.
    state: UnsafeCell<Option<InsertState>>,
}

impl Slot {
    fn new(state: Option<InsertState>) -> CachePadded<Slot> {
        CachePadded::new(Slot {
            busy: AtomicBool::new(false),
            state: UnsafeCell::new(state),
        })
    }
}

/// This thread's slot, by the order in which threads first inserted.
fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, AtomicOrdering::Relaxed);
    }
    INDEX.with(|index| *index % SLOTS)
}

// SAFETY: the raw pointers refer to arenas owned by the list's inserters,
// which are dropped only with the list; nodes are changed only through
// atomics, and an inserter's own state is used by one thread at a time.
unsafe impl Send for SkipList {}
// SAFETY: see `Send`.
unsafe impl Sync for SkipList {}

impl std::fmt::Debug for SkipList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkipList")
            .field("len", &self.len())
            .field("entry_bytes", &self.entry_bytes())
            .finish()
    }
}

impl SkipList {
    /// An empty list ordered by `order` on entry keys.
    pub fn new(order: EntryOrder) -> SkipList {
        let mut arena = Arena::new();
        let base = arena.allocate(Node::size(MAX_HEIGHT, 0));
        // SAFETY: the memory is fresh, aligned and large enough for a
        // header and MAX_HEIGHT links.
        let head = unsafe { init_node(base, MAX_HEIGHT, 0, 0) };
        let mut first = Some(InsertState {
            arena,
            tall: Arena::new(),
            rng: 0xdead_beef,
            splice: [head.as_ptr() as *const Node; MAX_HEIGHT],
        });
        SkipList {
            head,
            has_prefix: order.has_prefix(),
            order,
            max_height: AtomicUsize::new(1),
            shared: CachePadded::new(Shared {
                len: AtomicUsize::new(0),
                entry_bytes: AtomicUsize::new(0),
                overflow: Mutex::new(Vec::new()),
                seeds: AtomicUsize::new(1),
            }),
            // The first slot keeps the state that owns the head.
            slots: std::array::from_fn(|i| Slot::new(if i == 0 { first.take() } else { None })),
            #[cfg(test)]
            heights: Mutex::default(),
        }
    }

    /// An inserter for this list, for one batch of inserts: it may run at
    /// the same time as other inserters and readers.
    pub fn inserter(&self) -> Inserter<'_> {
        let home = thread_slot();
        for i in 0..SLOTS {
            let slot: &Slot = &self.slots[(home + i) % SLOTS];
            if slot.busy.load(AtomicOrdering::Relaxed)
                || slot
                    .busy
                    .compare_exchange(
                        false,
                        true,
                        AtomicOrdering::Acquire,
                        AtomicOrdering::Relaxed,
                    )
                    .is_err()
            {
                continue;
            }
            // SAFETY: `busy` is ours: no other thread touches the state
            // until the inserter's drop clears it (release).
            let state = unsafe { &mut *slot.state.get() }.get_or_insert_with(|| self.new_state());
            return Inserter {
                list: self,
                state: NonNull::from(state),
                slot: Some(slot),
                len: 0,
                entry_bytes: 0,
            };
        }
        let state = self
            .shared
            .overflow
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_else(|| Box::new(self.new_state()));
        Inserter {
            list: self,
            // Back into a box when the inserter is dropped.
            state: NonNull::from(Box::leak(state)),
            slot: None,
            len: 0,
            entry_bytes: 0,
        }
    }

    /// The state of an inserter that finds none to reuse.
    fn new_state(&self) -> InsertState {
        let seed = self.shared.seeds.fetch_add(1, AtomicOrdering::Relaxed) as u32;
        InsertState::new(0xdead_beef ^ seed.wrapping_mul(0x9e37_79b9), self.head)
    }

    /// Inserts one entry (see [`Inserter::insert`]).
    pub fn insert(&self, key_len: usize, value_len: usize, fill: impl FnOnce(&mut [u8])) {
        self.inserter().insert(key_len, value_len, fill);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.shared.len.load(AtomicOrdering::Relaxed)
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the entries with their node headers and links (the arena
    /// holds up to two partly used chunks more per inserter).
    pub fn entry_bytes(&self) -> usize {
        self.shared.entry_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Links `node`, `height` tall with key `target`, at every level, bottom
    /// up. `at` holds a search's splice for levels `0..=searched`; above,
    /// `at.prev` holds nodes before the key that may be behind (another
    /// insert may have linked nodes between). Leaves in `at.prev` the nodes
    /// the new one went after.
    ///
    /// # Safety
    ///
    /// `node` is a node of this list's arenas, fully written and linked
    /// nowhere yet; every `at.prev` node is the head or a node of this list
    /// before `target`, tall enough for its level.
    unsafe fn link(
        &self,
        node: *mut Node,
        height: usize,
        target: Target<'_>,
        at: &mut Splice,
        searched: usize,
    ) {
        for level in 0..height {
            let (mut before, mut after) = if level <= searched {
                (at.prev[level], at.next[level])
            } else {
                self.walk(at.prev[level], level, target)
            };
            loop {
                // SAFETY: as the caller guarantees; `level < height`, and
                // `before` is at least `level + 1` tall.
                let linked = unsafe {
                    Node::link(node, level).store(after, AtomicOrdering::Relaxed);
                    Node::link(before, level).compare_exchange(
                        after,
                        node,
                        AtomicOrdering::Release,
                        AtomicOrdering::Relaxed,
                    )
                };
                if linked.is_ok() {
                    break;
                }
                // Another insert linked a node after `before`: it is still
                // before the key (nodes never move), so look on from it.
                (before, after) = self.walk(before, level, target);
            }
            at.prev[level] = before;
        }
    }

    /// From `from` (the head or a node before `target`) along `level`: the
    /// last node before the target and the one after it.
    fn walk(
        &self,
        from: *const Node,
        level: usize,
        target: Target<'_>,
    ) -> (*const Node, *mut Node) {
        let mut x = from;
        loop {
            // SAFETY: `x` is the head or a node at least `level + 1` tall
            // (`from` by the caller's word, later ones linked at `level`).
            let next = unsafe { Node::link(x, level).load(AtomicOrdering::Acquire) };
            if next.is_null() || self.compare_node(next, target) != Ordering::Less {
                return (x, next);
            }
            x = next;
        }
    }

    /// Where the search for `target` may start given the last insert's
    /// `splice`: the lowest level at which the splice node is before the key
    /// and its successor is not, with that node; the head and the top level
    /// when the key is before the splice or beyond every successor.
    fn splice_start(
        &self,
        splice: &[*const Node; MAX_HEIGHT],
        target: Target<'_>,
    ) -> (*const Node, usize) {
        let head = self.head.as_ptr() as *const Node;
        let top = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        let first = splice[0];
        if !ptr::eq(first, head) && self.compare_node(first, target) != Ordering::Less {
            return (head, top);
        }
        // The splice node of a higher level is at or before the one below,
        // so it is before the key too.
        for (level, &before) in splice.iter().enumerate().take(top + 1) {
            // SAFETY: splice nodes are nodes of this list (or its head), at
            // least `level + 1` tall.
            let after = unsafe { Node::link(before, level).load(AtomicOrdering::Acquire) };
            if after.is_null() || self.compare_node(after, target) != Ordering::Less {
                return (before, level);
            }
        }
        (head, top)
    }

    /// The first entry whose key is `>= key`.
    pub fn seek(&self, key: &[u8]) -> Option<Position> {
        position(self.find_greater_or_equal(key, None))
    }

    /// The first entry.
    pub fn first(&self) -> Option<Position> {
        // SAFETY: the head is MAX_HEIGHT tall.
        position(unsafe { Node::link(self.head.as_ptr(), 0).load(AtomicOrdering::Acquire) })
    }

    /// The last entry.
    pub fn last(&self) -> Option<Position> {
        let mut x = self.head.as_ptr() as *const Node;
        let mut level = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        loop {
            // SAFETY: `x` is the head or a node at least `level + 1` tall.
            let next = unsafe { Node::link(x, level).load(AtomicOrdering::Acquire) };
            if !next.is_null() {
                x = next;
            } else if level == 0 {
                return self.position_unless_head(x);
            } else {
                level -= 1;
            }
        }
    }

    /// The entry after `at`.
    pub fn next(&self, at: Position) -> Option<Position> {
        // SAFETY: `at` is a node of this list, at least one link tall.
        let next = unsafe { Node::link(at.0.as_ptr(), 0).load(AtomicOrdering::Acquire) };
        if !next.is_null() {
            // Nodes lie in the arena in the order they were inserted, not
            // in the keys' order: a walk misses the cache at about every
            // node. Fetch the node after `next` now, so that it arrives
            // while the caller works on `next` (a flush adds it to a
            // table); the caller reads `next`'s key anyway, from the line
            // its link is on.
            // SAFETY: `next` is a node of this list (linked at level 0).
            prefetch(unsafe { Node::link(next, 0).load(AtomicOrdering::Relaxed) });
        }
        position(next)
    }

    /// Every entry's position, in order: the entries linked when the walk
    /// passes them (for a list no longer written, all of them).
    ///
    /// Why not [`SkipList::next`] in a loop: a walk along level 0 misses
    /// the cache at about every node, and each miss waits for the one
    /// before it, because a node's address is in the node before. A flush
    /// of an 8 MiB memtable spent nearly half its time so. Here the list is
    /// cut at the nodes of a level that has at least [`GATHER_STRETCHES`]
    /// of them, and the stretches between are walked side by side, one
    /// step of each in turn: the next node of each stretch is fetched
    /// while the others step, so that many misses are in flight at once.
    pub fn positions(&self) -> Vec<Position> {
        let head = self.head.as_ptr() as *const Node;
        // The first node of each stretch after the first: the nodes of the
        // highest level that has enough (the levels above are short).
        let mut bounds: Vec<*const Node> = Vec::new();
        for level in (1..self.max_height.load(AtomicOrdering::Acquire)).rev() {
            bounds.clear();
            // SAFETY: the head is MAX_HEIGHT tall, and a node linked at
            // `level` is at least `level + 1` tall.
            let mut x = unsafe { Node::link(head, level).load(AtomicOrdering::Acquire) };
            while !x.is_null() {
                bounds.push(x);
                x = unsafe { Node::link(x, level).load(AtomicOrdering::Acquire) };
            }
            if bounds.len() >= GATHER_STRETCHES {
                break;
            }
        }
        // Each stretch: where its walk is, where it ends (the next stretch's
        // first node, or null), and what it found.
        // SAFETY: the head is MAX_HEIGHT tall.
        let first = unsafe { Node::link(head, 0).load(AtomicOrdering::Acquire) };
        let per_stretch = self.len() / (bounds.len() + 1) + 16;
        let mut stretches: Vec<(*const Node, *const Node, Vec<Position>)> =
            std::iter::once(first as *const Node)
                .chain(bounds.iter().copied())
                .zip(bounds.iter().copied().chain(std::iter::once(ptr::null())))
                .map(|(start, end)| (start, end, Vec::with_capacity(per_stretch)))
                .collect();
        // A stretch is done at its end; null ends the last one (and would
        // end any other, though each end follows its start at level 0).
        let mut walking = stretches
            .iter()
            .filter(|(at, end, _)| !at.is_null() && at != end)
            .count();
        while walking > 0 {
            for (at, end, found) in &mut stretches {
                let Some(node) = NonNull::new(*at as *mut Node) else {
                    continue;
                };
                if *at == *end {
                    continue;
                }
                found.push(Position(node));
                // SAFETY: `at` is a node of this list, linked at level 0.
                let next = unsafe { Node::link(*at, 0).load(AtomicOrdering::Acquire) };
                prefetch(next);
                *at = next;
                if next.is_null() || *at == *end {
                    walking -= 1;
                }
            }
        }
        let mut positions =
            Vec::with_capacity(stretches.iter().map(|(_, _, found)| found.len()).sum());
        for (_, _, found) in stretches {
            positions.extend(found);
        }
        positions
    }

    /// Asks the CPU to fetch the entry at `at` (its key and value) ahead of
    /// its use.
    pub fn prefetch_entry(&self, at: Position) {
        let node = at.0.as_ptr() as *const Node;
        prefetch(node);
        // An entry of a small pair often runs into the next cache line.
        prefetch(node.wrapping_byte_add(64));
    }

    /// The entry before `at` (by a search: nodes have no back links).
    pub fn prev(&self, at: Position) -> Option<Position> {
        let mut before = Splice::new(self.head.as_ptr());
        self.find_greater_or_equal(self.key(at), Some(&mut before));
        self.position_unless_head(before.prev[0])
    }

    /// The key of the entry at `at` (of this list, or of a list that
    /// outlives `&self`: see [`Position`]).
    pub fn key(&self, at: Position) -> &[u8] {
        self.node_key(at.0.as_ptr())
    }

    /// The value of the entry at `at` (as for [`SkipList::key`]).
    pub fn value(&self, at: Position) -> &[u8] {
        let node = at.0.as_ptr() as *const Node;
        // SAFETY: `at` is a node of this list, or of one that outlives
        // `&self` (the caller's word, see `Position`).
        unsafe {
            let key_len = (*node).key_len as usize;
            &Node::entry(node)[key_len..]
        }
    }

    fn position_unless_head(&self, node: *const Node) -> Option<Position> {
        if std::ptr::eq(node, self.head.as_ptr()) {
            return None;
        }
        position(node as *mut Node)
    }

    fn node_key(&self, node: *const Node) -> &[u8] {
        // SAFETY: `node` is a node of this list, which outlives `&self`, or
        // of a list that outlives it (`SkipList::key`).
        unsafe {
            let key_len = (*node).key_len as usize;
            &Node::entry(node)[..key_len]
        }
    }

    /// `key` with its prefix.
    #[inline]
    fn target<'a>(&self, key: &'a [u8]) -> Target<'a> {
        let prefix = if self.has_prefix {
            EntryOrder::prefix(key)
        } else {
            [0; 2]
        };
        Target { key, prefix }
    }

    /// Compares the key of `node` with `target`: by prefix when they differ
    /// there, else in full.
    #[inline]
    fn compare_node(&self, node: *const Node, target: Target<'_>) -> Ordering {
        if self.has_prefix {
            // SAFETY: `node` is a node of this list, written before it was
            // published.
            let prefix = unsafe { Node::prefix(node) };
            if prefix != target.prefix {
                return prefix.cmp(&target.prefix);
            }
        }
        self.order.compare(self.node_key(node), target.key)
    }

    /// The first node with key `>= key` (null at the end), recording in
    /// `splice` where the key goes at each level.
    fn find_greater_or_equal(&self, key: &[u8], splice: Option<&mut Splice>) -> *mut Node {
        let top = self.max_height.load(AtomicOrdering::Relaxed) - 1;
        self.find_from(self.target(key), self.head.as_ptr(), top, splice)
    }

    /// [`SkipList::find_greater_or_equal`] starting at `start` on `level`,
    /// recording in `splice` where the key goes at `level` and below.
    /// REQUIRES: `start` is the head or a node before `target`, at least
    /// `level + 1` tall.
    fn find_from(
        &self,
        target: Target<'_>,
        start: *const Node,
        mut level: usize,
        mut splice: Option<&mut Splice>,
    ) -> *mut Node {
        let mut x = start;
        // The last node found not below `key`: when a lower level leads to
        // it again it need not be compared again (as RocksDB's skip list).
        let mut not_below: *mut Node = ptr::null_mut();
        loop {
            // SAFETY: `x` is the head or a node at least `level + 1` tall.
            let next = unsafe { Node::link(x, level).load(AtomicOrdering::Acquire) };
            if level > 0 {
                // The other way on: where the search goes if `next` is not
                // before the key. Fetching it while `next` is read keeps two
                // cache misses in flight instead of one. Links that carried
                // the next node's prefix, so that a search goes down without
                // reading that node, were slower with it: the node they save
                // reading is read while this fetch is under way (both in
                // `docs/results/write-path.md`, "The skip list's search,
                // fourth pass").
                // SAFETY: `x` is at least `level + 1` tall.
                prefetch(unsafe { Node::link(x, level - 1).load(AtomicOrdering::Relaxed) });
            }
            if !next.is_null() && next != not_below {
                // The node after `next` is the likely next step: fetch it
                // while `next`'s key is compared.
                // SAFETY: `next` is a node of this list at least `level + 1`
                // tall (it was linked at `level`).
                prefetch(unsafe { Node::link(next, level).load(AtomicOrdering::Relaxed) });
            }
            if !next.is_null()
                && next != not_below
                && self.compare_node(next, target) == Ordering::Less
            {
                x = next;
                continue;
            }
            not_below = next;
            if let Some(splice) = splice.as_deref_mut() {
                splice.prev[level] = x;
                splice.next[level] = next;
            }
            if level == 0 {
                return next;
            }
            level -= 1;
        }
    }
}

/// Inserts into one [`SkipList`], alongside other inserters; gives up its
/// state (which stays where it lies) when dropped. One per batch: taking it claims a slot
/// of the list once (its thread's own, when free), and the counts it keeps
/// are added to the list's when it is dropped.
pub struct Inserter<'a> {
    list: &'a SkipList,
    /// The state this inserter holds, used where it lies (in its slot, or
    /// boxed) rather than moved out and back: it is about 220 bytes, and
    /// a batch of one `Put` took it and put it back every time.
    state: NonNull<InsertState>,
    /// Where `state` lies: a slot this inserter holds, or (`None`) a box
    /// that goes back to the overflow pool.
    slot: Option<&'a Slot>,
    len: usize,
    entry_bytes: usize,
}

impl std::fmt::Debug for Inserter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inserter").field("len", &self.len).finish()
    }
}

impl Inserter<'_> {
    /// Inserts an entry of `key_len + value_len` bytes that `fill` writes
    /// (the key is its first `key_len` bytes). An entry equal in key to an
    /// existing one goes before it.
    ///
    /// # Panics
    ///
    /// When a length does not fit in 32 bits (entries come from write
    /// batches, whose records are far smaller).
    pub fn insert(&mut self, key_len: usize, value_len: usize, fill: impl FnOnce(&mut [u8])) {
        let key_len32 = u32::try_from(key_len).expect("memtable key over 4 GiB");
        let value_len32 = u32::try_from(value_len).expect("memtable value over 4 GiB");
        let list = self.list;
        // SAFETY: the state is this inserter's alone until it is dropped
        // (its slot's `busy` flag, or the box it took from the pool), and
        // `&mut self` makes this the only reference to it.
        let state = unsafe { self.state.as_mut() };
        let height = state.random_height();
        let size = Node::size(height, key_len + value_len);
        let arena = if height >= TALL_FROM {
            &mut state.tall
        } else {
            &mut state.arena
        };
        let base = arena.allocate(size);
        // SAFETY: fresh, aligned memory of `Node::size(height, ...)` bytes;
        // the node is not reachable by readers until linked below.
        let (node, key) = unsafe {
            let node = init_node(base, height, key_len32, value_len32);
            let entry = std::slice::from_raw_parts_mut(
                ptr::addr_of_mut!((*node.as_ptr()).entry) as *mut u8,
                key_len + value_len,
            );
            fill(entry);
            (node, &entry[..key_len])
        };
        let target = list.target(key);
        #[cfg(test)]
        list.heights
            .lock()
            .unwrap()
            .insert(node.as_ptr() as usize, height);
        let mut at = Splice::new(list.head.as_ptr());
        at.prev = state.splice;
        let (start, searched) = list.splice_start(&state.splice, target);
        list.find_from(target, start, searched, Some(&mut at));
        // Readers may see the new height before the links: they then find
        // null links from the head at the new levels and move down.
        // Looked at first: a read-modify-write, even of an equal value,
        // would take the line of `max_height` (and the head's pointer)
        // from every core that searches.
        if height > list.max_height.load(AtomicOrdering::Relaxed) {
            list.max_height.fetch_max(height, AtomicOrdering::Relaxed);
        }
        // SAFETY: the node is complete and unlinked; the splice nodes are
        // the head or nodes of the list before the key (`splice_start`).
        unsafe { list.link(node.as_ptr(), height, target, &mut at, searched) };
        for (level, splice) in state.splice.iter_mut().enumerate() {
            *splice = if level < height {
                node.as_ptr()
            } else {
                at.prev[level]
            };
        }
        self.len += 1;
        self.entry_bytes += size;
    }
}

impl Drop for Inserter<'_> {
    fn drop(&mut self) {
        let shared: &Shared = &self.list.shared;
        shared.len.fetch_add(self.len, AtomicOrdering::Relaxed);
        shared
            .entry_bytes
            .fetch_add(self.entry_bytes, AtomicOrdering::Relaxed);
        match self.slot {
            // The state stays in the slot: the next inserter of the slot
            // takes it after this store (release: with what this one wrote).
            Some(slot) => slot.busy.store(false, AtomicOrdering::Release),
            None => {
                // SAFETY: `state` came from `Box::leak` in `inserter` and
                // is not used after this.
                let state = unsafe { Box::from_raw(self.state.as_ptr()) };
                shared
                    .overflow
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(state);
            }
        }
    }
}

impl InsertState {
    /// A fresh inserter's state: an empty arena, and a splice at `head`.
    fn new(rng: u32, head: NonNull<Node>) -> InsertState {
        InsertState {
            arena: Arena::new(),
            tall: Arena::new(),
            rng: rng.max(1),
            splice: [head.as_ptr() as *const Node; MAX_HEIGHT],
        }
    }
}

impl Splice {
    fn new(head: *const Node) -> Splice {
        Splice {
            prev: [head; MAX_HEIGHT],
            next: [ptr::null_mut(); MAX_HEIGHT],
        }
    }
}

fn position(node: *mut Node) -> Option<Position> {
    NonNull::new(node).map(Position)
}

/// Asks the CPU to bring the cache line at `node` in (a hint; null is fine).
#[inline(always)]
fn prefetch(node: *const Node) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(node as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = node;
}

/// Writes a node header with null links at the start of `base`, and
/// returns the node (its level-0 link, after the links above).
///
/// # Safety
///
/// `base` is valid for writes of `Node::size(height, 0)` bytes and aligned
/// for `Node`.
unsafe fn init_node(
    base: NonNull<u8>,
    height: usize,
    key_len: u32,
    value_len: u32,
) -> NonNull<Node> {
    debug_assert_eq!(base.as_ptr() as usize % align_of::<Node>(), 0);
    // SAFETY: as the caller guarantees.
    unsafe {
        let node = base.as_ptr().add((height - 1) * LINK_BYTES) as *mut Node;
        ptr::write(
            node,
            Node {
                next: [AtomicPtr::new(ptr::null_mut())],
                key_len,
                value_len,
                entry: [],
            },
        );
        for level in 1..height {
            ptr::write(
                (node as *mut AtomicPtr<Node>).sub(level),
                AtomicPtr::new(ptr::null_mut()),
            );
        }
        NonNull::new_unchecked(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    fn insert(list: &SkipList, key: &[u8], value: &[u8]) {
        list.insert(key.len(), value.len(), |entry| {
            entry[..key.len()].copy_from_slice(key);
            entry[key.len()..].copy_from_slice(value);
        });
    }

    fn keys_forward(list: &SkipList) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut at = list.first();
        while let Some(p) = at {
            out.push(list.key(p).to_vec());
            at = list.next(p);
        }
        out
    }

    #[test]
    fn positions_are_every_entry_in_order() {
        // Sizes around the stretch count, and lists tall enough to be cut
        // at a level above the first.
        for count in [0usize, 1, 2, 15, 16, 17, 100, 5_000, 60_000] {
            let list = SkipList::new(EntryOrder::Plain(<[u8]>::cmp));
            let mut rng = count as u64 + 1;
            for _ in 0..count {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                insert(&list, &(rng >> 16).to_be_bytes(), b"v");
            }
            let gathered: Vec<Vec<u8>> = list
                .positions()
                .into_iter()
                .map(|at| list.key(at).to_vec())
                .collect();
            assert_eq!(gathered, keys_forward(&list), "{count} entries");
            assert_eq!(gathered.len(), list.len(), "{count} entries");
        }
    }

    #[test]
    fn empty_list() {
        let list = SkipList::new(EntryOrder::Plain(<[u8]>::cmp));
        assert!(list.is_empty());
        assert_eq!(list.first(), None);
        assert_eq!(list.last(), None);
        assert_eq!(list.seek(b"a"), None);
    }

    #[test]
    fn sorted_walks_seeks_and_values() {
        let list = SkipList::new(EntryOrder::Plain(<[u8]>::cmp));
        let mut model = BTreeSet::new();
        let mut rng = 7u64;
        for _ in 0..5000 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = format!("{:06}", (rng >> 33) % 100_000).into_bytes();
            if model.insert(key.clone()) {
                insert(&list, &key, &[key[5]; 3]);
            }
        }
        assert_eq!(list.len(), model.len());
        let expected: Vec<Vec<u8>> = model.iter().cloned().collect();
        assert_eq!(keys_forward(&list), expected);
        // Backwards through prev.
        let mut back = Vec::new();
        let mut at = list.last();
        while let Some(p) = at {
            back.push(list.key(p).to_vec());
            assert_eq!(list.value(p), &[list.key(p)[5]; 3]);
            at = list.prev(p);
        }
        back.reverse();
        assert_eq!(back, expected);
        for probe in ["", "000500", "050000", "099999", "999999"] {
            let want = model.range(probe.as_bytes().to_vec()..).next();
            assert_eq!(
                list.seek(probe.as_bytes()).map(|p| list.key(p).to_vec()),
                want.cloned()
            );
        }
    }

    /// Inserts in the orders the splice and the prefix shortcut care about
    /// (ascending, descending, ascending runs from random places, keys that
    /// differ only after eight bytes, keys shorter than eight bytes) come
    /// out sorted by the internal-key order, and seeks find them.
    #[test]
    fn insert_orders_and_shared_prefixes_sort_as_the_comparator_does() {
        use shale_format::comparator::compare_internal_keys;
        use shale_format::internal_key::{InternalKey, ValueType};
        let order = shale_format::comparator::KeyOrder::bytewise();
        let mut rng = 11u64;
        let mut random = move |n: u64| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) % n
        };
        let user_keys: Vec<Vec<Vec<u8>>> = vec![
            (0..2000u32).map(|i| i.to_be_bytes().to_vec()).collect(),
            (0..2000u32)
                .rev()
                .map(|i| i.to_be_bytes().to_vec())
                .collect(),
            (0..40)
                .flat_map(|_| {
                    let start = random(1_000_000);
                    (start..start + 50).map(|i| format!("{i:08}").into_bytes())
                })
                .collect(),
            (0..2000)
                .map(|_| format!("shared-prefix/{}", random(500)).into_bytes())
                .collect(),
            (0..2000)
                .map(|_| {
                    let len = random(9) as usize;
                    (0..len).map(|_| random(3) as u8).collect()
                })
                .collect(),
            // Around the sixteen bytes of the prefix: zero bytes that tie
            // with its padding, lengths on both sides of 8 and 16.
            (0..2000)
                .map(|_| {
                    let len = 6 + random(14) as usize;
                    (0..len)
                        .map(|i| if i < 6 { b'k' } else { random(3) as u8 })
                        .collect()
                })
                .collect(),
            (0..2000)
                .map(|_| format!("{:016}/{}", 7, random(500)).into_bytes())
                .collect(),
        ];
        for (case, keys) in user_keys.iter().enumerate() {
            let list = SkipList::new(EntryOrder::Internal(order.clone()));
            let mut model = Vec::new();
            for (sequence, user_key) in keys.iter().enumerate() {
                let key = InternalKey::new(user_key, sequence as u64 + 1, ValueType::Value);
                insert(&list, key.encoded(), b"");
                model.push(key.encoded().to_vec());
            }
            model.sort_by(|a, b| compare_internal_keys(a, b));
            assert_eq!(keys_forward(&list), model, "case {case}");
            for probe in model.iter().step_by(7) {
                let found = list.seek(probe).map(|p| list.key(p).to_vec());
                assert_eq!(found.as_ref(), Some(probe), "case {case}");
            }
        }
    }

    /// A node of a db_bench pair (16-byte key, 8-byte tag, 32-byte value)
    /// takes 64 bytes and 8 more per link above the first, as the memtable
    /// counts it: 76 on average with one node in three promoted per level.
    /// Keys shorter than the 16-byte prefix compare as the comparator does.
    #[test]
    fn nodes_of_small_pairs_are_dense() {
        let list = SkipList::new(EntryOrder::Internal(
            shale_format::comparator::KeyOrder::bytewise(),
        ));
        let count = 30_000;
        for i in 0..count {
            let mut key = format!("{:016}", (i * 7919) % count).into_bytes();
            key.extend_from_slice(&((i as u64) << 8 | 1).to_le_bytes());
            insert(&list, &key, &[b'v'; 32]);
        }
        let per_node = list.entry_bytes() as f64 / count as f64;
        assert!((72.0..80.0).contains(&per_node), "{per_node} bytes a node");
        assert_levels_consistent(&list);
        for short in [&b"k"[..], b"k\x00", b"ka", b"0000000000000001"] {
            let mut key = short.to_vec();
            key.extend_from_slice(&(1u64 << 8 | 1).to_le_bytes());
            insert(&list, &key, b"");
        }
        let keys = keys_forward(&list);
        assert_eq!(keys.len(), count + 4);
        for pair in keys.windows(2) {
            let (a, b) = (&pair[0][..], &pair[1][..]);
            assert!(a[..a.len() - 8] <= b[..b.len() - 8], "{a:?} then {b:?}");
        }
    }

    #[test]
    fn large_entries_get_their_own_chunk() {
        let list = SkipList::new(EntryOrder::Plain(<[u8]>::cmp));
        let big = vec![9u8; 3 * CHUNK_BYTES];
        insert(&list, b"b", b"small");
        insert(&list, b"a", &big);
        insert(&list, b"c", b"small again");
        assert!(list.entry_bytes() >= 3 * CHUNK_BYTES);
        let a = list.first().unwrap();
        assert_eq!(list.value(a), &big[..]);
        let b = list.next(a).unwrap();
        assert_eq!(list.value(b), b"small");
        assert_eq!(list.value(list.next(b).unwrap()), b"small again");
    }

    #[test]
    fn more_inserters_at_once_than_slots_share_the_overflow_pool() {
        let list = SkipList::new(EntryOrder::Plain(<[u8]>::cmp));
        for round in 0u32..3 {
            // Held at once: every slot is taken, the rest overflow.
            let mut inserters: Vec<Inserter<'_>> =
                (0..SLOTS + 5).map(|_| list.inserter()).collect();
            assert_eq!(inserters.iter().filter(|i| i.slot.is_none()).count(), 5);
            for (i, inserter) in inserters.iter_mut().enumerate() {
                for j in 0u32..50 {
                    let key = (round * 10_000 + j * 100 + i as u32).to_be_bytes();
                    inserter.insert(4, 4, |e| {
                        e[..4].copy_from_slice(&key);
                        e[4..].copy_from_slice(&key);
                    });
                }
            }
        }
        // Released states are reused, not made anew.
        assert_eq!(list.shared.overflow.lock().unwrap().len(), 5);
        assert_eq!(list.shared.seeds.load(AtomicOrdering::Relaxed), SLOTS + 5);
        let keys = keys_forward(&list);
        assert_eq!(list.len(), 3 * 50 * (SLOTS + 5));
        assert_eq!(keys.len(), list.len());
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn readers_see_sorted_complete_entries_while_a_writer_inserts() {
        let list = Arc::new(SkipList::new(EntryOrder::Plain(<[u8]>::cmp)));
        std::thread::scope(|scope| {
            for _ in 0..2 {
                let list = list.clone();
                scope.spawn(move || {
                    for _ in 0..200 {
                        let mut previous: Option<Vec<u8>> = None;
                        let mut at = list.first();
                        while let Some(p) = at {
                            let key = list.key(p);
                            // Every value repeats its key: a torn entry shows.
                            assert_eq!(list.value(p), key);
                            if let Some(prev) = &previous {
                                assert!(prev.as_slice() < key);
                            }
                            previous = Some(key.to_vec());
                            at = list.next(p);
                        }
                    }
                });
            }
            for i in 0..20_000u32 {
                let key = (i.wrapping_mul(2_654_435_761)).to_be_bytes();
                insert(&list, &key, &key);
            }
        });
        assert_eq!(keys_forward(&list).len(), 20_000);
    }

    /// Every level of the list is sorted and each holds exactly the nodes
    /// at least that tall: what a lost or misplaced link would break.
    fn assert_levels_consistent(list: &SkipList) {
        let head = list.head.as_ptr() as *const Node;
        let heights = list.heights.lock().unwrap().clone();
        let mut at_level_zero = Vec::new();
        // SAFETY: walking the list's own nodes along links of their height.
        unsafe {
            let mut x = Node::link(head, 0).load(AtomicOrdering::Acquire);
            while !x.is_null() {
                at_level_zero.push(x as *const Node);
                x = Node::link(x, 0).load(AtomicOrdering::Acquire);
            }
            for level in 0..MAX_HEIGHT {
                let tall: Vec<*const Node> = at_level_zero
                    .iter()
                    .copied()
                    .filter(|&n| heights[&(n as usize)] > level)
                    .collect();
                let mut linked = Vec::new();
                let mut x = Node::link(head, level).load(AtomicOrdering::Acquire);
                while !x.is_null() {
                    linked.push(x as *const Node);
                    x = Node::link(x, level).load(AtomicOrdering::Acquire);
                }
                assert_eq!(linked, tall, "level {level}");
            }
        }
        for pair in at_level_zero.windows(2) {
            assert!(list.node_key(pair[0]) < list.node_key(pair[1]));
        }
    }

    /// Four threads insert interleaved and overlapping key ranges at once
    /// (each through its own inserter, batches of varying size) while two
    /// read: nothing is lost, every level stays sorted and complete, and
    /// readers never see a torn entry or an unsorted step.
    #[test]
    fn concurrent_inserters_lose_nothing_and_keep_every_level_sorted() {
        const THREADS: u32 = 4;
        const PER_THREAD: u32 = 20_000;
        let list = SkipList::new(EntryOrder::Plain(<[u8]>::cmp));
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    while !done.load(AtomicOrdering::Relaxed) {
                        let mut previous: Option<&[u8]> = None;
                        let mut at = list.first();
                        while let Some(p) = at {
                            let key = list.key(p);
                            assert_eq!(list.value(p), key);
                            if let Some(prev) = previous {
                                assert!(prev < key);
                            }
                            previous = Some(key);
                            at = list.next(p);
                        }
                    }
                });
            }
            let writers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let list = &list;
                    scope.spawn(move || {
                        let mut i = 0;
                        let mut batch = 1;
                        while i < PER_THREAD {
                            let mut inserter = list.inserter();
                            for _ in 0..batch.min(PER_THREAD - i) {
                                // Threads' keys interleave: thread t owns
                                // the keys congruent to t, spread at random.
                                let spread =
                                    (u64::from(i) * 2_654_435_761 % u64::from(PER_THREAD)) as u32;
                                let n = spread * THREADS + t;
                                let key = n.to_be_bytes();
                                inserter.insert(4, 4, |e| {
                                    e[..4].copy_from_slice(&key);
                                    e[4..].copy_from_slice(&key);
                                });
                                i += 1;
                            }
                            batch = batch % 7 + 1;
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap();
            }
            done.store(true, AtomicOrdering::Relaxed);
        });
        assert_eq!(list.len(), (THREADS * PER_THREAD) as usize);
        let keys = keys_forward(&list);
        assert_eq!(keys.len(), (THREADS * PER_THREAD) as usize);
        for (n, key) in keys.iter().enumerate() {
            assert_eq!(key.as_slice(), (n as u32).to_be_bytes());
        }
        assert_levels_consistent(&list);
    }

    /// Sequential inserts from several inserters at once, where the splices
    /// of all of them point at the same few nodes: the case in which
    /// compare-and-swap races are most frequent.
    #[test]
    fn concurrent_ascending_inserts_race_at_the_same_place() {
        use shale_format::internal_key::{InternalKey, ValueType};
        let list = SkipList::new(EntryOrder::Internal(
            shale_format::comparator::KeyOrder::bytewise(),
        ));
        let sequence = AtomicUsize::new(1);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..10_000 {
                        let s = sequence.fetch_add(1, AtomicOrdering::Relaxed) as u64;
                        let key = InternalKey::new(&s.to_be_bytes(), s, ValueType::Value);
                        list.insert(key.encoded().len(), 0, |e| e.copy_from_slice(key.encoded()));
                    }
                });
            }
        });
        assert_eq!(list.len(), 40_000);
        assert_levels_consistent(&list);
        let keys = keys_forward(&list);
        for (n, key) in keys.iter().enumerate() {
            assert_eq!(&key[..8], (n as u64 + 1).to_be_bytes());
        }
    }
}
