//! Whole-database verification against the expected state: after open
//! (settling writes a kill cut short) and at the end of a run, and for
//! `--verify_only`.

use shale::{ReadOptions, DB};

use super::expected_state::{Expected, ExpectedState};
use super::values::{self, describe_key, ValueSizes};
use super::StressError;

/// What a whole-database verification saw.
#[derive(Debug, Clone, Copy, Default)]
pub struct VerifyReport {
    /// Keys checked (every index).
    pub keys: u64,
    /// Keys that exist.
    pub live: u64,
    /// Keys whose value comes from an acknowledged write (generation > 0).
    pub written: u64,
    /// Writes acknowledged since the expected state was created: each
    /// write moves its key one generation on, so this is the sum of the
    /// generations.
    pub acknowledged: u64,
    /// Keys a kill left with a write in flight.
    pub pending: u64,
    /// Of those, the ones whose new value had landed.
    pub pending_landed: u64,
    /// Values compared (a get, a forward and a backward scan per key).
    pub reads: u64,
}

impl std::fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "verify: keys={} live={} written={} acknowledged={} pending={} pending_landed={} reads={}",
            self.keys,
            self.live,
            self.written,
            self.acknowledged,
            self.pending,
            self.pending_landed,
            self.reads
        )
    }
}

/// Whether `found` is what `expected` says key `index` holds.
pub fn matches(index: u32, expected: Expected, found: Option<&[u8]>, sizes: ValueSizes) -> bool {
    match (expected.exists, found) {
        (false, None) => true,
        (true, Some(found)) => found == values::value(index, expected.generation, sizes),
        _ => false,
    }
}

/// Describes a value the expected state allows, for messages.
pub fn describe_expected(expected: Expected) -> String {
    if expected.exists {
        format!("generation {}", expected.generation)
    } else if expected.generation == 0 {
        "absent (never written)".to_string()
    } else {
        format!("absent (deleted at generation {})", expected.generation)
    }
}

/// Describes a value found, for messages.
pub fn describe_found(found: Option<&[u8]>) -> String {
    found.map_or_else(|| "absent".to_string(), values::describe_value)
}

/// A mismatch at key `index`: `allowed` lists what was expected.
pub fn mismatch(
    index: u32,
    allowed: &[Expected],
    found: Option<&[u8]>,
    during: &str,
) -> StressError {
    StressError::Mismatch {
        key: describe_key(index),
        expected: allowed
            .iter()
            .map(|&e| describe_expected(e))
            .collect::<Vec<_>>()
            .join(" or "),
        found: describe_found(found),
        during: during.to_string(),
    }
}

/// Reads every key three ways (get, forward scan, backward scan), checks
/// that they agree and that each key holds its expected value — either
/// value for a key a kill left pending — and that the database holds no
/// other key. With `settle`, pending keys are committed to what was found.
/// REQUIRES: no other thread uses the database or the expected state.
pub fn verify_all(
    db: &DB,
    expected: &ExpectedState,
    settle: bool,
) -> Result<VerifyReport, StressError> {
    let max_key = expected.max_key();
    let sizes = expected.sizes();
    let forward = scan(db, max_key, false)?;
    let backward = scan(db, max_key, true)?;
    let mut report = VerifyReport::default();
    let read = ReadOptions::new();
    for index in 0..max_key {
        let got = db.get(&read, &values::key(index))?;
        let scanned = &forward[index as usize];
        if got.as_deref() != scanned.as_deref() || backward[index as usize] != *scanned {
            return Err(StressError::Inconsistent {
                key: describe_key(index),
                get: describe_found(got.as_deref()),
                forward: describe_found(scanned.as_deref()),
                backward: describe_found(backward[index as usize].as_deref()),
            });
        }
        report.keys += 1;
        report.reads += 3;
        let slot = expected.slot(index);
        let found = got.as_deref();
        let old_ok = matches(index, slot.committed, found, sizes);
        let mut holds = slot.committed;
        if let Some(pending) = slot.pending {
            report.pending += 1;
            let new_ok = matches(index, pending, found, sizes);
            if !old_ok && !new_ok {
                return Err(mismatch(
                    index,
                    &[slot.committed, pending],
                    found,
                    "verification (a write was in flight)",
                ));
            }
            if new_ok {
                report.pending_landed += 1;
                holds = pending;
            }
            if settle {
                expected.resolve(index, new_ok)?;
            }
        } else if !old_ok {
            return Err(mismatch(index, &[slot.committed], found, "verification"));
        }
        report.live += u64::from(holds.exists);
        report.written += u64::from(holds.generation > 0);
        report.acknowledged += u64::from(holds.generation);
    }
    Ok(report)
}

/// Every value in the database by key index, read with one iterator in
/// one direction; a key that is not one of ours is an error.
fn scan(db: &DB, max_key: u32, backward: bool) -> Result<Vec<Option<Vec<u8>>>, StressError> {
    let mut found = vec![None; max_key as usize];
    let mut iter = db.iter(&ReadOptions::new())?;
    if backward {
        iter.seek_to_last();
    } else {
        iter.seek_to_first();
    }
    let mut previous: Option<u32> = None;
    while iter.valid() {
        let index = values::key_index(iter.key())
            .filter(|&i| i < max_key)
            .ok_or_else(|| StressError::UnexpectedKey {
                key: String::from_utf8_lossy(iter.key()).into_owned(),
            })?;
        let in_order = previous.is_none_or(|p| if backward { index < p } else { index > p });
        if !in_order {
            return Err(StressError::Order {
                key: describe_key(index),
                after: previous.map(describe_key).unwrap_or_default(),
            });
        }
        previous = Some(index);
        found[index as usize] = Some(iter.value().to_vec());
        if backward {
            iter.prev();
        } else {
            iter.next();
        }
    }
    iter.status()?;
    Ok(found)
}
