//! The basics: open a database, put, get and delete keys, apply a batch
//! atomically, iterate, and close.
//!
//! Usage: cargo run -p shale --example hello [DIR]
//! (default: a temporary directory, deleted at the end).

use shale::{Options, ReadOptions, WriteBatch, WriteOptions, DB};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temp = tempfile::tempdir()?;
    let path = match std::env::args_os().nth(1) {
        Some(dir) => dir.into(),
        None => temp.path().join("hello-db"),
    };

    // Open, creating the database if it is not there yet.
    let options = Options {
        create_if_missing: true,
        ..Options::default()
    };
    let db = DB::open(&path, options)?;
    println!("opened {}", path.display());

    // Single writes and reads. `WriteOptions { sync: true }` would make the
    // write survive a machine crash, not only a process crash.
    let write = WriteOptions::default();
    db.put(&write, b"greeting", b"hello")?;
    db.put(&write, b"subject", b"world")?;
    let greeting = db.get(&ReadOptions::new(), b"greeting")?;
    println!(
        "greeting = {:?}",
        greeting.as_deref().map(String::from_utf8_lossy)
    );
    db.delete(&write, b"subject")?;
    println!(
        "subject after delete = {:?}",
        db.get(&ReadOptions::new(), b"subject")?
    );

    // A batch applies all of its operations or none.
    let mut batch = WriteBatch::new();
    for (key, value) in [
        ("fruit/apple", "red"),
        ("fruit/banana", "yellow"),
        ("fruit/cherry", "dark red"),
    ] {
        batch.put(key.as_bytes(), value.as_bytes())?;
    }
    batch.delete(b"greeting")?;
    db.write(&write, batch)?;

    // Iterate over everything, in key order, with the cursor...
    let mut cursor = db.iter(&ReadOptions::new())?;
    cursor.seek_to_first();
    while cursor.valid() {
        println!(
            "  {} = {}",
            String::from_utf8_lossy(cursor.key()),
            String::from_utf8_lossy(cursor.value())
        );
        cursor.next();
    }
    // The cursor stops at the end or at an error: tell them apart.
    cursor.status()?;
    drop(cursor);

    // ... or as a Rust iterator of owned pairs.
    let count = db.iter(&ReadOptions::new())?.into_entries().count();
    println!("{count} keys");

    // Closing is dropping the last handle (clones share one database):
    // background work finishes and the files are released.
    drop(db);
    let db = DB::open(&path, Options::default())?;
    assert_eq!(
        db.get(&ReadOptions::new(), b"fruit/apple")?,
        Some(b"red".to_vec())
    );
    println!("reopened: fruit/apple is still there");
    Ok(())
}
