//! Range and prefix scans with `shale::range`: an `Iterator` of owned
//! `(key, value)` pairs, forward or backward, beside the cursor.
//!
//! Usage: cargo run -p shale --example range_scan

use std::ops::Bound;

use shale::{Options, ReadOptions, WriteBatch, WriteOptions, DB};

fn show(label: &str, entries: shale::range::Entries) -> shale::Result<()> {
    println!("{label}:");
    for entry in entries {
        // A damaged block or an I/O error comes as one `Err`, then the end.
        let (key, value) = entry?;
        println!(
            "  {} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let options = Options {
        create_if_missing: true,
        ..Options::default()
    };
    let db = DB::open(dir.path(), options)?;

    // Users and orders under key prefixes, the usual way to keep several
    // tables in one ordered key space.
    let mut batch = WriteBatch::new();
    for (id, name) in [(1, "ada"), (2, "grace"), (3, "barbara"), (4, "edsger")] {
        batch.put(format!("user/{id:04}").as_bytes(), name.as_bytes())?;
    }
    for order in 1..=5 {
        batch.put(
            format!("order/{order:06}").as_bytes(),
            format!("{} items", order * 3).as_bytes(),
        )?;
    }
    db.write(&WriteOptions::default(), batch)?;

    let read = ReadOptions::new();

    // Every key starting with "user/".
    show("prefix user/", shale::range::prefix(&db, &read, b"user/")?)?;

    // A half-open range, [user/0002, user/0004).
    let from: &[u8] = b"user/0002";
    let to: &[u8] = b"user/0004";
    show(
        "user/0002..user/0004",
        shale::range::entries(&db, &read, from..to)?,
    )?;

    // Backward: the last three orders, newest first.
    let newest: Vec<_> = shale::range::prefix(&db, &read, b"order/")?
        .rev()
        .take(3)
        .collect::<shale::Result<_>>()?;
    println!("last three orders:");
    for (key, value) in &newest {
        println!(
            "  {} = {}",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(value)
        );
    }

    // Any pair of bounds: the keys after "order/000003", up to and
    // including "user/0001".
    let after: &[u8] = b"order/000003";
    let through: &[u8] = b"user/0001";
    show(
        "(order/000003, user/0001]",
        shale::range::entries(
            &db,
            &read,
            (Bound::Excluded(after), Bound::Included(through)),
        )?,
    )?;

    // Ranges combine with the other read options, here the bounds on the
    // cursor itself: the result is the intersection.
    let narrowed = ReadOptions {
        upper_bound: Some(b"user/0003".to_vec()),
        ..ReadOptions::new()
    };
    show(
        "prefix user/ below user/0003",
        shale::range::prefix(&db, &narrowed, b"user/")?,
    )?;

    // A cursor positioned by hand continues as an iterator.
    let mut cursor = db.iter(&read)?;
    cursor.seek(b"user/0003");
    show("from user/0003 on", cursor.into_entries())?;
    Ok(())
}
