//! A file in the database directory numbered `u64::MAX` (only a damaged or
//! hostile directory has one) made `DB::open` panic with an overflow while
//! it reserved the numbers of the logs it found. It is now a corruption
//! error naming the file, and removing the file lets the database open.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::Path;
use std::sync::Arc;

use shale::env::{write_file, Env, MemEnv};
use shale::{Options, ReadOptions, WriteOptions, DB};

#[test]
fn a_log_numbered_u64_max_is_a_corruption_not_a_panic() {
    let env = MemEnv::new();
    let options = Options {
        env: Arc::new(env.clone()),
        create_if_missing: true,
        ..Options::default()
    };
    let dir = Path::new("/max-number");
    let db = DB::open(dir, options.clone()).unwrap();
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    drop(db);
    let log = dir.join(format!("{}.log", u64::MAX));
    write_file(&env, &log, b"", false).unwrap();

    let err = DB::open(dir, options.clone()).unwrap_err();
    assert!(err.is_corruption(), "{err:?}");
    assert!(err.to_string().contains(&u64::MAX.to_string()), "{err}");

    env.remove_file(&log).unwrap();
    let db = DB::open(dir, options).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
}
