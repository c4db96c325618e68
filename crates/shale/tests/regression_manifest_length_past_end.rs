//! A flipped bit in the length of the MANIFEST's last record, making it run
//! past the end of the file, was read as a torn write and the record
//! dropped without a word (as LevelDB reads it): the open succeeded without
//! the last flush's table, whose WAL was already gone, so acknowledged
//! writes vanished silently. The record's bytes are all there, so it is
//! damage, and the open now fails with a corruption naming the MANIFEST.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::Path;
use std::sync::Arc;

use shale::env::{read_file, write_file, Env, MemEnv};
use shale::{Options, ReadOptions, WriteOptions, DB};

#[test]
fn a_damaged_length_of_the_last_manifest_record_is_reported() {
    let mem = MemEnv::new();
    let env: Arc<dyn Env> = Arc::new(mem.clone());
    let dir = Path::new("/db");
    let options = Options {
        create_if_missing: true,
        env: env.clone(),
        ..Options::default()
    };
    let db = DB::open(dir, options.clone()).unwrap();
    db.put(&WriteOptions::default(), b"first", b"1").unwrap();
    db.flush().unwrap();
    db.put(&WriteOptions::default(), b"last", b"2").unwrap();
    db.flush().unwrap();
    drop(db);

    let current = read_file(&mem, &dir.join("CURRENT")).unwrap();
    let manifest = String::from_utf8(current).unwrap().trim_end().to_string();
    let path = dir.join(&manifest);
    let mut contents = read_file(&mem, &path).unwrap();
    // Walk the records (one block here) to the last header.
    let mut last = 0;
    let mut offset = 0;
    while offset + 7 <= contents.len() {
        last = offset;
        offset += 7 + usize::from(u16::from_le_bytes([
            contents[offset + 4],
            contents[offset + 5],
        ]));
    }
    assert_eq!(offset, contents.len(), "whole records");
    // The length's top bit: far past the end of the file, inside the block.
    contents[last + 4] ^= 0x80;
    write_file(&mem, &path, &contents, true).unwrap();

    let err = DB::open(dir, options.clone()).unwrap_err();
    assert!(err.is_corruption(), "{err:?}");
    assert!(err.to_string().contains(&manifest), "{err}");
    // And `shale verify` says the same.
    let err = shale::verify::verify_db(dir, &options).unwrap_err();
    assert!(err.to_string().contains(&manifest), "{err}");

    // The bytes are right again: everything is there.
    contents[last + 4] ^= 0x80;
    write_file(&mem, &path, &contents, true).unwrap();
    let db = DB::open(dir, options).unwrap();
    assert_eq!(
        db.get(&ReadOptions::new(), b"last").unwrap().as_deref(),
        Some(&b"2"[..])
    );
}
