//! The range iterator (`shale::range`, `DbIterator::into_entries` and
//! `into_range`) against a `BTreeMap` model: bounds of every kind, prefixes
//! ending in `0xff`, empty and inverted ranges, both ends at once, reads at a
//! snapshot, a custom key order, and an error that ends the iteration.

#![allow(clippy::unwrap_used, reason = "tests")]

mod support;

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use shale::env::{Env, MemEnv};
use shale::range::{entries, prefix, Entries};
use shale::{Error, Options, ReadOptions, WriteBatch, WriteOptions, DB};
use support::Numeric;

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
type Range<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

fn options(env: &Arc<dyn Env>) -> Options {
    Options {
        create_if_missing: true,
        env: env.clone(),
        // Small memtables and blocks: a scan crosses tables, blocks and the
        // memtable.
        write_buffer_size: 8 << 10,
        block_size: 256,
        ..Options::default()
    }
}

fn open_mem() -> DB {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    DB::open("/db", options(&env)).unwrap()
}

fn collect(entries: Entries) -> Pairs {
    entries.collect::<shale::Result<_>>().unwrap()
}

fn keys(entries: Entries) -> Vec<Vec<u8>> {
    collect(entries).into_iter().map(|(key, _)| key).collect()
}

fn fill(db: &DB, keys: &[&[u8]]) {
    for key in keys {
        db.put(&WriteOptions::default(), key, &[b'v'; 3]).unwrap();
    }
}

fn bound(bound: Bound<&Vec<u8>>) -> Bound<&[u8]> {
    bound.map(Vec::as_slice)
}

/// The model's view of `(lower, upper)`, empty (not a panic, as
/// `BTreeMap::range` would) when the range is inverted.
fn model_range(
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    lower: &Bound<Vec<u8>>,
    upper: &Bound<Vec<u8>>,
) -> Pairs {
    model
        .iter()
        .filter(|(key, _)| match lower {
            Bound::Included(lower) => *key >= lower,
            Bound::Excluded(lower) => *key > lower,
            Bound::Unbounded => true,
        })
        .filter(|(key, _)| match upper {
            Bound::Included(upper) => *key <= upper,
            Bound::Excluded(upper) => *key < upper,
            Bound::Unbounded => true,
        })
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect()
}

#[test]
fn bounds_of_every_kind() {
    let db = open_mem();
    fill(&db, &[b"a", b"b", b"c", b"d", b"e"]);
    let read = ReadOptions::new();
    let (b, d): (&[u8], &[u8]) = (b"b", b"d");
    let all: Vec<Vec<u8>> = [b"a", b"b", b"c", b"d", b"e"].map(|k| k.to_vec()).to_vec();
    assert_eq!(keys(entries(&db, &read, ..).unwrap()), all);
    assert_eq!(keys(entries(&db, &read, b..d).unwrap()), [b"b", b"c"]);
    assert_eq!(
        keys(entries(&db, &read, b..=d).unwrap()),
        [b"b", b"c", b"d"]
    );
    assert_eq!(
        keys(entries(&db, &read, b..).unwrap()),
        [b"b", b"c", b"d", b"e"]
    );
    assert_eq!(keys(entries(&db, &read, ..d).unwrap()), [b"a", b"b", b"c"]);
    assert_eq!(
        keys(entries(&db, &read, ..=d).unwrap()),
        [b"a", b"b", b"c", b"d"]
    );
    let excluded = (Bound::Excluded(b), Bound::Excluded(d));
    assert_eq!(keys(entries(&db, &read, excluded).unwrap()), [b"c"]);
    let excluded = (Bound::Excluded(b), Bound::Included(d));
    assert_eq!(keys(entries(&db, &read, excluded).unwrap()), [b"c", b"d"]);
    // Bounds between keys and outside them.
    let (bb, z): (&[u8], &[u8]) = (b"bb", b"z");
    assert_eq!(
        keys(entries(&db, &read, bb..z).unwrap()),
        [b"c", b"d", b"e"]
    );
    // Backward.
    let back: Vec<Vec<u8>> = entries(&db, &read, b..=d)
        .unwrap()
        .rev()
        .map(|entry| entry.unwrap().0)
        .collect();
    assert_eq!(back, [b"d", b"c", b"b"]);
    let excluded = (Bound::Excluded(b), Bound::Excluded(d));
    let back: Vec<Vec<u8>> = entries(&db, &read, excluded)
        .unwrap()
        .rev()
        .map(|entry| entry.unwrap().0)
        .collect();
    assert_eq!(back, [b"c"]);
}

#[test]
fn empty_and_inverted_ranges() {
    let db = open_mem();
    let read = ReadOptions::new();
    // An empty database.
    assert!(keys(entries(&db, &read, ..).unwrap()).is_empty());
    assert_eq!(
        entries(&db, &read, ..)
            .unwrap()
            .next_back()
            .map(|e| e.is_ok()),
        None
    );
    fill(&db, &[b"a", b"b", b"c"]);
    let (a, b, c): (&[u8], &[u8], &[u8]) = (b"a", b"b", b"c");
    #[allow(clippy::reversed_empty_ranges, reason = "the point of the test")]
    let ranges: Vec<Range<'_>> = vec![
        (Bound::Included(b), Bound::Excluded(b)),
        (Bound::Excluded(b), Bound::Included(b)),
        (Bound::Excluded(b), Bound::Excluded(b)),
        (Bound::Included(c), Bound::Excluded(a)),
        (Bound::Included(c), Bound::Included(a)),
        (Bound::Excluded(c), Bound::Unbounded),
        (Bound::Unbounded, Bound::Excluded(a)),
    ];
    for range in ranges {
        assert!(
            keys(entries(&db, &read, range).unwrap()).is_empty(),
            "{range:?}"
        );
        let mut iter = entries(&db, &read, range).unwrap();
        assert!(iter.next_back().is_none(), "{range:?}");
        assert!(iter.next().is_none(), "{range:?}");
    }
    // A single key, from either end.
    let one = (Bound::Included(b), Bound::Included(b));
    assert_eq!(keys(entries(&db, &read, one).unwrap()), [b"b"]);
    assert_eq!(
        entries(&db, &read, one)
            .unwrap()
            .next_back()
            .unwrap()
            .unwrap()
            .0,
        b"b"
    );
}

#[test]
fn prefixes_with_0xff_bytes() {
    let db = open_mem();
    let all: [&[u8]; 11] = [
        b"",
        b"a",
        b"a\x00",
        b"a\xfe\xff",
        b"a\xff",
        b"a\xff\x00",
        b"a\xff\xff",
        b"a\xff\xff\x01",
        b"b",
        b"\xff",
        b"\xff\xff\x00",
    ];
    fill(&db, &all);
    let read = ReadOptions::new();
    for prefix_bytes in [
        &b""[..],
        b"a",
        b"a\xff",
        b"a\xff\xff",
        b"a\xfe",
        b"\xff",
        b"\xff\xff",
        b"\xff\xff\xff",
        b"c",
    ] {
        let expected: Vec<Vec<u8>> = all
            .iter()
            .filter(|key| key.starts_with(prefix_bytes))
            .map(|key| key.to_vec())
            .collect();
        assert_eq!(
            keys(prefix(&db, &read, prefix_bytes).unwrap()),
            expected,
            "prefix {prefix_bytes:?}"
        );
        let mut back: Vec<Vec<u8>> = prefix(&db, &read, prefix_bytes)
            .unwrap()
            .rev()
            .map(|entry| entry.unwrap().0)
            .collect();
        back.reverse();
        assert_eq!(back, expected, "prefix {prefix_bytes:?} backward");
    }
}

#[test]
fn ranges_intersect_the_read_options_bounds() {
    let db = open_mem();
    fill(&db, &[b"a", b"b", b"c", b"d", b"e", b"f"]);
    let read = ReadOptions {
        lower_bound: Some(b"b".to_vec()),
        upper_bound: Some(b"e".to_vec()),
        ..ReadOptions::new()
    };
    let (a, c, d, f): (&[u8], &[u8], &[u8], &[u8]) = (b"a", b"c", b"d", b"f");
    assert_eq!(keys(entries(&db, &read, ..).unwrap()), [b"b", b"c", b"d"]);
    assert_eq!(
        keys(entries(&db, &read, a..=f).unwrap()),
        [b"b", b"c", b"d"]
    );
    assert_eq!(keys(entries(&db, &read, c..).unwrap()), [b"c", b"d"]);
    assert_eq!(keys(entries(&db, &read, ..d).unwrap()), [b"b", b"c"]);
    let back: Vec<Vec<u8>> = entries(&db, &read, ..d)
        .unwrap()
        .rev()
        .map(|entry| entry.unwrap().0)
        .collect();
    assert_eq!(back, [b"c", b"b"]);
    assert_eq!(
        keys(db.iter(&read).unwrap().into_entries()),
        [b"b", b"c", b"d"]
    );
}

#[test]
fn into_entries_starts_at_the_cursor() {
    let db = open_mem();
    fill(&db, &[b"a", b"b", b"c"]);
    let mut cursor = db.iter(&ReadOptions::new()).unwrap();
    cursor.seek(b"b");
    let mut iter = cursor.into_entries();
    assert_eq!(iter.next().unwrap().unwrap().0, b"b");
    assert_eq!(iter.next_back().unwrap().unwrap().0, b"c");
    assert!(iter.next().is_none());
    assert!(iter.next_back().is_none());

    // Backward first: the start of the iteration is the cursor's entry.
    let mut cursor = db.iter(&ReadOptions::new()).unwrap();
    cursor.seek(b"b");
    let back: Vec<Vec<u8>> = cursor.into_entries().rev().map(|e| e.unwrap().0).collect();
    assert_eq!(back, [b"c", b"b"]);

    // An unpositioned cursor starts at the first entry.
    let cursor = db.iter(&ReadOptions::new()).unwrap();
    assert_eq!(keys(cursor.into_entries()), [b"a", b"b", b"c"]);
}

#[test]
fn ranges_in_a_custom_order() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let db = DB::open(
        "/numeric",
        Options {
            comparator: Some(Arc::new(Numeric)),
            ..options(&env)
        },
    )
    .unwrap();
    for n in [1u32, 5, 9, 10, 42, 100, 999] {
        db.put(&WriteOptions::default(), n.to_string().as_bytes(), b"")
            .unwrap();
    }
    let read = ReadOptions::new();
    let (five, hundred): (&[u8], &[u8]) = (b"5", b"100");
    let numbers = |entries: Entries| -> Vec<String> {
        keys(entries)
            .into_iter()
            .map(|key| String::from_utf8(key).unwrap())
            .collect()
    };
    assert_eq!(
        numbers(entries(&db, &read, five..hundred).unwrap()),
        ["5", "9", "10", "42"]
    );
    assert_eq!(
        numbers(entries(&db, &read, five..=hundred).unwrap()),
        ["5", "9", "10", "42", "100"]
    );
    let back: Vec<Vec<u8>> = entries(
        &db,
        &read,
        (Bound::Excluded(five), Bound::Included(hundred)),
    )
    .unwrap()
    .rev()
    .map(|entry| entry.unwrap().0)
    .collect();
    assert_eq!(back, [&b"100"[..], b"42", b"10", b"9"]);
    // A prefix is no range in this order.
    assert!(matches!(
        prefix(&db, &read, b"4"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn an_error_is_yielded_once_then_the_end() {
    let env: Arc<dyn Env> = Arc::new(MemEnv::new());
    let dir = Path::new("/damaged");
    {
        let db = DB::open(dir, options(&env)).unwrap();
        let mut batch = WriteBatch::new();
        for i in 0..2000u32 {
            batch
                .put(format!("key{i:05}").as_bytes(), &[b'x'; 50])
                .unwrap();
        }
        db.write(&WriteOptions::default(), batch).unwrap();
        db.compact_range(None, None).unwrap();
    }
    // Damage every table in the middle: a block's checksum no longer holds.
    let mut damaged = 0;
    for name in env.children(dir).unwrap() {
        if name.ends_with(".ldb") {
            let path = dir.join(&name);
            let mut bytes = shale::env::read_file(&*env, &path).unwrap();
            let middle = bytes.len() / 3;
            bytes[middle] ^= 0xff;
            shale::env::write_file(&*env, &path, &bytes, false).unwrap();
            damaged += 1;
        }
    }
    assert!(damaged > 0);
    let db = DB::open(dir, options(&env)).unwrap();
    let read = ReadOptions {
        verify_checksums: true,
        ..ReadOptions::new()
    };
    for backward in [false, true] {
        let mut iter = entries(&db, &read, ..).unwrap();
        let mut oks = 0;
        let mut errors = 0;
        loop {
            let item = if backward {
                iter.next_back()
            } else {
                iter.next()
            };
            match item {
                Some(Ok(_)) => oks += 1,
                Some(Err(_)) => errors += 1,
                None => break,
            }
        }
        assert_eq!(errors, 1, "backward {backward}, after {oks} entries");
        assert!(oks < 2000);
        assert!(iter.next().is_none() && iter.next_back().is_none());
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Flush,
}

/// Keys over a small alphabet with `0x00` and `0xff`, so that prefixes,
/// bounds and keys collide often.
fn key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![Just(0u8), Just(b'a'), Just(b'b'), Just(0xfe), Just(0xff)],
        0..4,
    )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (key(), proptest::collection::vec(any::<u8>(), 0..8)).prop_map(|(k, v)| Op::Put(k, v)),
        4 => key().prop_map(Op::Delete),
        1 => Just(Op::Flush),
    ]
}

fn end_bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        Just(Bound::Unbounded),
        key().prop_map(Bound::Included),
        key().prop_map(Bound::Excluded),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Ranges, prefixes and walks from both ends against the model, on the
    /// latest state and at a snapshot taken half-way.
    #[test]
    fn range_iterator_matches_a_btreemap(
        ops in proptest::collection::vec(op(), 0..120),
        lower in end_bound(),
        upper in end_bound(),
        prefix_bytes in key(),
        from_back in proptest::collection::vec(any::<bool>(), 0..40),
        read_bounds in (proptest::option::of(key()), proptest::option::of(key())),
    ) {
        let db = open_mem();
        let mut model = BTreeMap::new();
        let mut snapshot = None;
        for (i, op) in ops.iter().enumerate() {
            if i == ops.len() / 2 {
                snapshot = Some((db.snapshot(), model.clone()));
            }
            match op {
                Op::Put(key, value) => {
                    db.put(&WriteOptions::default(), key, value).unwrap();
                    model.insert(key.clone(), value.clone());
                }
                Op::Delete(key) => {
                    db.delete(&WriteOptions::default(), key).unwrap();
                    model.remove(key);
                }
                Op::Flush => db.flush().unwrap(),
            }
        }
        let (snapshot, snapshot_model) = snapshot.unwrap_or_else(|| (db.snapshot(), model.clone()));
        let views = [
            (ReadOptions::new(), &model),
            (ReadOptions { snapshot: Some(snapshot), ..ReadOptions::new() }, &snapshot_model),
        ];
        for (read, model) in &views {
            let range = (bound(lower.as_ref()), bound(upper.as_ref()));
            let expected = model_range(model, &lower, &upper);

            // Forward and backward.
            prop_assert_eq!(collect(entries(&db, read, range).unwrap()), expected.clone());
            let mut back: Pairs = entries(&db, read, range).unwrap().rev().map(Result::unwrap).collect();
            back.reverse();
            prop_assert_eq!(&back, &expected);

            // Both ends at once, in a random order of steps.
            let mut iter = entries(&db, read, range).unwrap();
            let mut left: VecDeque<_> = expected.iter().cloned().collect();
            for &back in from_back.iter().chain(std::iter::repeat_n(&false, expected.len() + 1)) {
                let (got, want) = if back {
                    (iter.next_back(), left.pop_back())
                } else {
                    (iter.next(), left.pop_front())
                };
                prop_assert_eq!(got.map(Result::unwrap), want);
            }
            prop_assert!(iter.next().is_none() && iter.next_back().is_none());

            // A prefix.
            let expected: Pairs = model
                .iter()
                .filter(|(key, _)| key.starts_with(&prefix_bytes))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect();
            prop_assert_eq!(collect(prefix(&db, read, &prefix_bytes).unwrap()), expected);

            // The range within bounds on the cursor.
            let bounded = ReadOptions {
                lower_bound: read_bounds.0.clone(),
                upper_bound: read_bounds.1.clone(),
                ..read.clone()
            };
            let bounds_lower = read_bounds.0.clone().map_or(Bound::Unbounded, Bound::Included);
            let bounds_upper = read_bounds.1.clone().map_or(Bound::Unbounded, Bound::Excluded);
            let expected: Pairs = model_range(model, &lower, &upper)
                .into_iter()
                .filter(|pair| model_range(model, &bounds_lower, &bounds_upper).contains(pair))
                .collect();
            prop_assert_eq!(collect(entries(&db, &bounded, range).unwrap()), expected.clone());
            let mut back: Pairs = entries(&db, &bounded, range).unwrap().rev().map(Result::unwrap).collect();
            back.reverse();
            prop_assert_eq!(back, expected);
        }
    }
}
