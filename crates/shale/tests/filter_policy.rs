//! A filter policy of the caller's (`Options::filter_policy`, what the C
//! API's `leveldb_filterpolicy_create` gives): flushes and compactions write
//! its filters, reads consult them, and only `streaming` runs compactions.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use shale::env::MemEnv;
use shale::format::bloom::FilterPolicy;
use shale::{CompactRangeOptions, Error, Options, ReadOptions, WriteOptions, DB};

/// Every filter is the bytes "fake"; whether a key may match is `answer`.
#[derive(Debug, Default)]
struct FakeFilter {
    answer_no: AtomicBool,
    filters_built: AtomicUsize,
}

impl FilterPolicy for FakeFilter {
    fn name(&self) -> &'static str {
        "test.FakeFilter"
    }

    fn create_filter(&self, keys: &[&[u8]], dst: &mut Vec<u8>) {
        assert!(!keys.is_empty());
        self.filters_built.fetch_add(1, Ordering::SeqCst);
        dst.extend_from_slice(b"fake");
    }

    fn key_may_match(&self, _key: &[u8], filter: &[u8]) -> bool {
        assert_eq!(filter, b"fake");
        !self.answer_no.load(Ordering::SeqCst)
    }
}

fn options(policy: &Arc<FakeFilter>) -> Options {
    Options {
        create_if_missing: true,
        env: Arc::new(MemEnv::new()),
        filter_policy: Some(policy.clone() as Arc<dyn FilterPolicy>),
        ..Options::default()
    }
}

#[test]
fn tables_carry_the_policys_filters_and_reads_consult_them() {
    let policy = Arc::new(FakeFilter::default());
    let db = DB::open("/db", options(&policy)).unwrap();
    let write = WriteOptions::default();
    db.put(&write, b"foo", b"foovalue").unwrap();
    db.put(&write, b"bar", b"barvalue").unwrap();
    db.compact_range(None, None).unwrap();
    assert!(policy.filters_built.load(Ordering::SeqCst) > 0);

    let read = ReadOptions::new();
    assert_eq!(
        db.get(&read, b"foo").unwrap().as_deref(),
        Some(&b"foovalue"[..])
    );
    // A "no" from the filter hides a key the table holds: the filter is used.
    policy.answer_no.store(true, Ordering::SeqCst);
    assert_eq!(db.get(&read, b"foo").unwrap(), None);
    assert_eq!(db.get(&read, b"bar").unwrap(), None);
    policy.answer_no.store(false, Ordering::SeqCst);
    assert_eq!(
        db.get(&read, b"bar").unwrap().as_deref(),
        Some(&b"barvalue"[..])
    );
}

#[test]
fn only_streaming_compacts_with_a_custom_filter_policy() {
    let policy = Arc::new(FakeFilter::default());
    for executor in ["parallel", "opencl"] {
        let refused = Options {
            compaction_executor: executor.parse().unwrap(),
            ..options(&policy)
        };
        let message = refused.validate().unwrap_err();
        assert!(
            message.contains("cannot use the filter policy test.FakeFilter"),
            "{message}"
        );
    }
    let db = DB::open("/db", options(&policy)).unwrap();
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    let on_parallel = CompactRangeOptions {
        executor: "parallel".parse().unwrap(),
    };
    let err = db.compact_range_with(None, None, &on_parallel).unwrap_err();
    assert!(matches!(err, Error::NotSupported(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("the filter policy test.FakeFilter"),
        "{err}"
    );
    let on_streaming = CompactRangeOptions {
        executor: "streaming".parse().unwrap(),
    };
    db.compact_range_with(None, None, &on_streaming).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
}
