//! Reads at a snapshot while another thread writes: every read through the
//! snapshot sees the database as it was when the snapshot was taken.
//!
//! Usage: cargo run -p shale --example snapshot

use std::thread;

use shale::{Options, ReadOptions, WriteBatch, WriteOptions, DB};

const ACCOUNTS: u32 = 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let options = Options {
        create_if_missing: true,
        ..Options::default()
    };
    let db = DB::open(dir.path(), options)?;

    // Ten accounts of 100 each: the total is always 1000, as every transfer
    // below moves money in one atomic batch.
    for account in 0..ACCOUNTS {
        db.put(&WriteOptions::default(), &key(account), b"100")?;
    }

    // A writer thread moves money around (a `DB` clone shares the database).
    let writer = {
        let db = db.clone();
        thread::spawn(move || -> shale::Result<()> {
            for round in 0..2000u32 {
                let from = round % ACCOUNTS;
                let to = (round * 7 + 3) % ACCOUNTS;
                if from == to {
                    continue;
                }
                let amount = i64::from(round % 7 + 1);
                let read = ReadOptions::new();
                let from_balance = balance(&db, &read, from)?;
                let to_balance = balance(&db, &read, to)?;
                let mut batch = WriteBatch::new();
                batch.put(&key(from), (from_balance - amount).to_string().as_bytes())?;
                batch.put(&key(to), (to_balance + amount).to_string().as_bytes())?;
                db.write(&WriteOptions::default(), batch)?;
            }
            Ok(())
        })
    };

    // Meanwhile, audit the total at snapshots. Reading the accounts one by
    // one without a snapshot could see half of a transfer; at a snapshot the
    // batches before it are wholly in and those after it wholly out.
    let mut audits = 0;
    while !writer.is_finished() || audits == 0 {
        let snapshot = db.snapshot();
        let at_snapshot = ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..ReadOptions::new()
        };
        let mut total = 0;
        for account in 0..ACCOUNTS {
            total += balance(&db, &at_snapshot, account)?;
        }
        assert_eq!(total, 1000, "a snapshot saw half of a transfer");

        // An iterator reads at a snapshot too.
        let scanned: i64 = shale::range::prefix(&db, &at_snapshot, b"account/")?
            .map(|entry| entry.map(|(_, value)| parse(&value)))
            .sum::<shale::Result<i64>>()?;
        assert_eq!(scanned, 1000);
        audits += 1;
        // Dropping the last clone of the snapshot releases it, so that
        // compaction may drop the versions only it could see.
        drop(snapshot);
    }
    writer.join().map_err(|_| "the writer panicked")??;

    let now: Vec<i64> = (0..ACCOUNTS)
        .map(|account| balance(&db, &ReadOptions::new(), account))
        .collect::<shale::Result<_>>()?;
    println!("{audits} audits at snapshots while writing, each saw a total of 1000");
    println!("balances now: {now:?} (total {})", now.iter().sum::<i64>());
    Ok(())
}

fn key(account: u32) -> Vec<u8> {
    format!("account/{account:02}").into_bytes()
}

fn parse(value: &[u8]) -> i64 {
    std::str::from_utf8(value)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_default()
}

fn balance(db: &DB, read: &ReadOptions, account: u32) -> shale::Result<i64> {
    Ok(db.get(read, &key(account))?.as_deref().map_or(0, parse))
}
