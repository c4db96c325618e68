//! Whether the order in which level-0 tables are searched can hide a newer
//! entry after a repair.
//!
//! A lookup searches the level-0 tables that may hold the key newest first,
//! by file number, and stops at the first entry found. In a live database
//! that order is right: a level-0 table with a higher number was written
//! later. A repair puts every table at level 0 (as LevelDB's does), and then
//! a table that came from a deeper level can have a higher number than an
//! overlapping table from above it while holding older entries. Scans are
//! not affected (they merge by sequence number), and a compaction of the
//! overlapping tables puts things right.
//!
//! The pairs counted here are those for which the order is not certain:
//! key ranges overlap and the higher-numbered table holds a sequence number
//! below the largest of the other. Entries of one user key in both are
//! needed for a wrong answer, so this is an upper bound.

use std::cmp::Ordering;

use shale_format::comparator::KeyOrder;

use super::TableInfo;

/// Pairs of `tables` whose user-key ranges overlap (user keys in `order`,
/// the database's) and whose search order (number) may disagree with their
/// sequence numbers.
pub(super) fn out_of_order_overlaps(tables: &[TableInfo], order: &KeyOrder) -> u64 {
    let mut by_start: Vec<&TableInfo> = tables.iter().collect();
    by_start
        .sort_by(|a, b| order.compare_user(a.meta.smallest.user_key(), b.meta.smallest.user_key()));
    // Tables whose range may still overlap the next ones: a sweep over the
    // ranges in order of their first keys.
    let mut active: Vec<&TableInfo> = Vec::new();
    let mut pairs = 0;
    for table in by_start {
        let start = table.meta.smallest.user_key();
        active.retain(|a| order.compare_user(a.meta.largest.user_key(), start) != Ordering::Less);
        for other in &active {
            let (older, newer) = if other.meta.number < table.meta.number {
                (*other, table)
            } else {
                (table, *other)
            };
            if newer.min_sequence < older.max_sequence {
                pairs += 1;
            }
        }
        active.push(table);
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_format::internal_key::{InternalKey, ValueType};
    use shale_format::version_edit::FileMetaData;

    fn table(number: u64, keys: (&str, &str), sequences: (u64, u64)) -> TableInfo {
        TableInfo {
            meta: FileMetaData {
                number,
                file_size: 1,
                smallest: InternalKey::new(keys.0.as_bytes(), sequences.0, ValueType::Value),
                largest: InternalKey::new(keys.1.as_bytes(), sequences.1, ValueType::Value),
            },
            min_sequence: sequences.0,
            max_sequence: sequences.1,
        }
    }

    #[test]
    fn tables_written_in_order_are_fine() {
        // Flushes one after the other, overlapping: numbers follow sequences.
        let tables = [
            table(3, ("a", "m"), (1, 100)),
            table(5, ("c", "z"), (101, 200)),
            table(7, ("b", "d"), (201, 250)),
        ];
        assert_eq!(out_of_order_overlaps(&tables, &KeyOrder::bytewise()), 0);
    }

    #[test]
    fn disjoint_tables_never_count() {
        let tables = [
            table(9, ("a", "c"), (1, 500)),
            table(4, ("d", "f"), (100, 900)),
            table(2, ("g", "k"), (50, 60)),
        ];
        assert_eq!(out_of_order_overlaps(&tables, &KeyOrder::bytewise()), 0);
    }

    #[test]
    fn a_newer_number_holding_older_entries_counts() {
        // Table 12 came from a deeper level than table 10, which it overlaps.
        let tables = [
            table(10, ("m", "n"), (150, 200)),
            table(12, ("a", "z"), (1, 300)),
            table(13, ("x", "y"), (301, 310)),
        ];
        assert_eq!(out_of_order_overlaps(&tables, &KeyOrder::bytewise()), 1);
    }

    #[test]
    fn touching_ranges_overlap() {
        let tables = [table(2, ("a", "k"), (10, 20)), table(3, ("k", "z"), (1, 5))];
        assert_eq!(out_of_order_overlaps(&tables, &KeyOrder::bytewise()), 1);
    }

    /// Orders user keys backwards.
    #[derive(Debug)]
    struct Reverse;

    impl shale_format::comparator::Comparator for Reverse {
        fn name(&self) -> &str {
            "test.Reverse"
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
            b.cmp(a)
        }
        fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}
        fn find_short_successor(&self, _key: &mut Vec<u8>) {}
    }

    #[test]
    fn ranges_are_in_the_database_order() {
        // In reverse order each table runs from its largest byte string to
        // its smallest: "z".."m" and "n".."a" overlap, "z".."m" and "l".."a"
        // do not, whatever bytewise order says.
        let reverse = KeyOrder::custom(std::sync::Arc::new(Reverse));
        let overlapping = [
            table(10, ("z", "m"), (150, 200)),
            table(12, ("n", "a"), (1, 300)),
        ];
        assert_eq!(out_of_order_overlaps(&overlapping, &reverse), 1);
        let disjoint = [
            table(10, ("z", "m"), (150, 200)),
            table(12, ("l", "a"), (1, 300)),
        ];
        assert_eq!(out_of_order_overlaps(&disjoint, &reverse), 0);
    }
}
