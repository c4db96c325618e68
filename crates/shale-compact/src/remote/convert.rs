//! [`CompactionJob`] to and from its protobuf form. Decoding checks what a
//! hostile or broken peer could send: nonsense table settings, too many
//! files, levels out of range. A job that fails the check is refused with
//! the reason; nothing downstream sees it.

use std::cmp::Ordering;

use shale_format::comparator::compare_internal_keys;
use shale_format::internal_key::MAX_SEQUENCE_NUMBER;

use super::proto;
use crate::job::{CompactionJob, InputRun, JobFile, KeyRange, TableSettings, UserKeyRange};

/// Levels of an LSM tree (LevelDB's `config::kNumLevels`).
const LEVELS: u32 = 7;
/// The most input files one job may name.
const MAX_FILES: usize = 100_000;
/// The largest data block a job may ask for.
const MAX_BLOCK_SIZE: u64 = 64 << 20;
/// The longest key a job may name (an internal key: the user key and its 8
/// bytes of sequence and type).
pub const MAX_KEY_BYTES: usize = 1 << 20;
/// The shortest internal key: an empty user key and its 8 bytes.
const MIN_INTERNAL_KEY_BYTES: usize = 8;

/// Checks one internal key of the job: not shorter than its 8-byte tag,
/// not longer than [`MAX_KEY_BYTES`].
fn check_internal_key(field: &str, key: &[u8]) -> Result<(), String> {
    if key.len() < MIN_INTERNAL_KEY_BYTES {
        return Err(format!(
            "{field}: {} bytes is not an internal key (at least {MIN_INTERNAL_KEY_BYTES})",
            key.len()
        ));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(format!(
            "{field}: {} bytes, more than {MAX_KEY_BYTES}",
            key.len()
        ));
    }
    Ok(())
}

/// Checks a file's keys: valid, and smallest not above largest.
fn check_file(field: &str, file: &proto::JobFile) -> Result<(), String> {
    check_internal_key(&format!("{field}.smallest"), &file.smallest)?;
    check_internal_key(&format!("{field}.largest"), &file.largest)?;
    if compare_internal_keys(&file.smallest, &file.largest) == Ordering::Greater {
        return Err(format!("{field}: smallest is above largest"));
    }
    Ok(())
}

/// Checks what the job says of its files and ranges, naming the field that
/// is wrong: keys that are empty or oversized, a file whose smallest key is
/// above its largest, a sorted run (level above 0) whose files are out of
/// order or overlap, a file named twice, a range with its lower bound above
/// its upper one. A job that passes can be merged without surprises; one
/// that does not is refused before any file is opened.
fn check_fields(job: &proto::Job) -> Result<(), String> {
    let mut numbers = std::collections::HashSet::new();
    for (r, run) in job.inputs.iter().enumerate() {
        for (f, file) in run.files.iter().enumerate() {
            let field = format!("job.inputs[{r}].files[{f}]");
            check_file(&field, file)?;
            if !numbers.insert(file.number) {
                return Err(format!(
                    "{field}.number: table {} is named twice",
                    file.number
                ));
            }
            if run.level > 0 && f > 0 {
                let before = &run.files[f - 1];
                // Internal keys: one user key may span two files of a
                // level (its newer entries end one file, older ones begin
                // the next), but its entries never repeat.
                if compare_internal_keys(&before.largest, &file.smallest) != Ordering::Less {
                    return Err(format!(
                        "{field}: the run of level {} is out of order (it overlaps the file before it)",
                        run.level
                    ));
                }
            }
        }
    }
    for (g, file) in job.grandparents.iter().enumerate() {
        check_file(&format!("job.grandparents[{g}]"), file)?;
    }
    for (l, level) in job.deeper_levels.iter().enumerate() {
        for (i, range) in level.ranges.iter().enumerate() {
            let field = format!("job.deeper_levels[{l}].ranges[{i}]");
            if range.smallest.len() > MAX_KEY_BYTES || range.largest.len() > MAX_KEY_BYTES {
                return Err(format!("{field}: a key longer than {MAX_KEY_BYTES} bytes"));
            }
            if range.smallest > range.largest {
                return Err(format!("{field}: smallest is above largest"));
            }
        }
    }
    for (field, bound) in [
        ("job.range_lower", &job.range_lower),
        ("job.range_upper", &job.range_upper),
    ] {
        if bound.as_ref().is_some_and(|b| b.len() > MAX_KEY_BYTES) {
            return Err(format!("{field}: longer than {MAX_KEY_BYTES} bytes"));
        }
    }
    if let (Some(lower), Some(upper)) = (&job.range_lower, &job.range_upper) {
        if lower > upper {
            return Err("job.range_lower: above job.range_upper".to_string());
        }
    }
    Ok(())
}

fn file_to_proto(file: &JobFile) -> proto::JobFile {
    proto::JobFile {
        number: file.number,
        file_size: file.file_size,
        smallest: file.smallest.clone(),
        largest: file.largest.clone(),
    }
}

fn file_from_proto(file: proto::JobFile) -> JobFile {
    JobFile {
        number: file.number,
        file_size: file.file_size,
        smallest: file.smallest,
        largest: file.largest,
    }
}

/// The protobuf form of `job`.
pub fn job_to_proto(job: &CompactionJob) -> proto::Job {
    proto::Job {
        id: job.id,
        inputs: job
            .inputs
            .iter()
            .map(|run| proto::InputRun {
                level: run.level as u32,
                files: run.files.iter().map(file_to_proto).collect(),
            })
            .collect(),
        output_level: job.output_level as u32,
        max_output_file_size: job.max_output_file_size,
        grandparents: job.grandparents.iter().map(file_to_proto).collect(),
        max_grandparent_overlap_bytes: job.max_grandparent_overlap_bytes,
        smallest_snapshot: job.smallest_snapshot,
        deeper_levels: job
            .deeper_levels
            .iter()
            .map(|level| proto::LevelRanges {
                ranges: level
                    .iter()
                    .map(|r| proto::UserKeyRange {
                        smallest: r.smallest.clone(),
                        largest: r.largest.clone(),
                    })
                    .collect(),
            })
            .collect(),
        table: Some(proto::TableSettings {
            block_size: job.table.block_size as u64,
            block_restart_interval: job.table.block_restart_interval as u64,
            bloom_bits_per_key: job.table.bloom_bits_per_key,
            snappy: job.table.snappy,
        }),
        range_lower: job.range.lower.clone(),
        range_upper: job.range.upper.clone(),
    }
}

/// The job `job` describes, or why it is not a job this side will run.
pub fn job_from_proto(job: proto::Job) -> Result<CompactionJob, String> {
    let table = job
        .table
        .as_ref()
        .ok_or("job.table: the job has no table settings")?;
    if table.block_size == 0 || table.block_size > MAX_BLOCK_SIZE {
        return Err(format!(
            "job.table.block_size: {} is outside 1..={MAX_BLOCK_SIZE}",
            table.block_size
        ));
    }
    if table.block_restart_interval == 0 || table.block_restart_interval > u64::from(u16::MAX) {
        return Err(format!(
            "job.table.block_restart_interval: {} is outside 1..={}",
            table.block_restart_interval,
            u16::MAX
        ));
    }
    if table.bloom_bits_per_key.is_some_and(|bits| bits > 1000) {
        return Err("job.table.bloom_bits_per_key: above 1000".to_string());
    }
    if job.output_level >= LEVELS || job.inputs.iter().any(|run| run.level >= LEVELS) {
        return Err(format!(
            "job.output_level or job.inputs[].level: a level of the job is not below {LEVELS}"
        ));
    }
    if job.max_output_file_size == 0 {
        return Err("job.max_output_file_size: 0".to_string());
    }
    if job.smallest_snapshot > MAX_SEQUENCE_NUMBER {
        return Err("job.smallest_snapshot: above the largest sequence number".to_string());
    }
    let files: usize = job.inputs.iter().map(|run| run.files.len()).sum::<usize>()
        + job.grandparents.len()
        + job
            .deeper_levels
            .iter()
            .map(|l| l.ranges.len())
            .sum::<usize>();
    if files > MAX_FILES {
        return Err(format!("job: names {files} files, more than {MAX_FILES}"));
    }
    if job.inputs.is_empty() {
        return Err("job.inputs: the job has no inputs".to_string());
    }
    check_fields(&job)?;
    Ok(CompactionJob {
        id: job.id,
        inputs: job
            .inputs
            .into_iter()
            .map(|run| InputRun {
                level: run.level as usize,
                files: run.files.into_iter().map(file_from_proto).collect(),
            })
            .collect(),
        output_level: job.output_level as usize,
        max_output_file_size: job.max_output_file_size,
        grandparents: job.grandparents.into_iter().map(file_from_proto).collect(),
        max_grandparent_overlap_bytes: job.max_grandparent_overlap_bytes,
        smallest_snapshot: job.smallest_snapshot,
        deeper_levels: job
            .deeper_levels
            .into_iter()
            .map(|level| {
                level
                    .ranges
                    .into_iter()
                    .map(|r| UserKeyRange {
                        smallest: r.smallest,
                        largest: r.largest,
                    })
                    .collect()
            })
            .collect(),
        table: TableSettings {
            block_size: table.block_size as usize,
            block_restart_interval: table.block_restart_interval as usize,
            bloom_bits_per_key: table.bloom_bits_per_key,
            snappy: table.snappy,
        },
        range: KeyRange::new(job.range_lower, job.range_upper),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> CompactionJob {
        // File n holds the user keys from letter 2n to letter 2n + 1.
        let file = |number: u64| JobFile {
            number,
            file_size: 100 + number,
            smallest: vec![b'a' + 2 * number as u8, 1, 0, 0, 0, 0, 0, 0, 1],
            largest: vec![b'b' + 2 * number as u8, 1, 0, 0, 0, 0, 0, 0, 1],
        };
        CompactionJob {
            id: 7,
            inputs: vec![
                InputRun {
                    level: 0,
                    files: vec![file(1)],
                },
                InputRun {
                    level: 1,
                    files: vec![file(2), file(3)],
                },
            ],
            output_level: 1,
            max_output_file_size: 2 << 20,
            grandparents: vec![file(9)],
            max_grandparent_overlap_bytes: 20 << 20,
            smallest_snapshot: 55,
            deeper_levels: vec![vec![UserKeyRange {
                smallest: b"b".to_vec(),
                largest: b"c".to_vec(),
            }]],
            table: TableSettings::default(),
            range: KeyRange::new(Some(b"b".to_vec()), None),
        }
    }

    #[test]
    fn a_job_survives_the_round_trip() {
        let job = job();
        assert_eq!(job_from_proto(job_to_proto(&job)), Ok(job));
    }

    #[test]
    fn nonsense_jobs_are_refused_with_a_reason() {
        let mut bad = job_to_proto(&job());
        bad.table = None;
        assert!(job_from_proto(bad).unwrap_err().contains("table settings"));
        let mut bad = job_to_proto(&job());
        if let Some(t) = bad.table.as_mut() {
            t.block_restart_interval = 0;
        }
        assert!(job_from_proto(bad).unwrap_err().contains("restart"));
        let mut bad = job_to_proto(&job());
        bad.output_level = 9;
        assert!(job_from_proto(bad).unwrap_err().contains("level"));
        let mut bad = job_to_proto(&job());
        bad.inputs.clear();
        assert!(job_from_proto(bad).unwrap_err().contains("no inputs"));
        let mut bad = job_to_proto(&job());
        bad.grandparents = vec![proto::JobFile::default(); MAX_FILES + 1];
        assert!(job_from_proto(bad).unwrap_err().contains("files"));
    }

    #[test]
    fn malformed_fields_are_named() {
        let refused = |change: &dyn Fn(&mut proto::Job)| {
            let mut bad = job_to_proto(&job());
            change(&mut bad);
            job_from_proto(bad).unwrap_err()
        };
        let why = refused(&|j| j.inputs[0].files[0].smallest.clear());
        assert!(why.starts_with("job.inputs[0].files[0].smallest"), "{why}");
        let why = refused(&|j| j.inputs[1].files[1].largest = vec![0; MAX_KEY_BYTES + 9]);
        assert!(why.starts_with("job.inputs[1].files[1].largest"), "{why}");
        let why = refused(&|j| j.inputs[1].files.swap(0, 1));
        assert!(
            why.starts_with("job.inputs[1].files[1]") && why.contains("out of order"),
            "{why}"
        );
        let why = refused(&|j| j.inputs[1].files[0].number = 1);
        assert!(
            why.starts_with("job.inputs[1].files[0].number") && why.contains("twice"),
            "{why}"
        );
        let why = refused(&|j| {
            j.range_lower = Some(b"q".to_vec());
            j.range_upper = Some(b"c".to_vec());
        });
        assert!(why.starts_with("job.range_lower"), "{why}");
        let why = refused(&|j| j.deeper_levels[0].ranges[0].smallest = b"zz".to_vec());
        assert!(why.starts_with("job.deeper_levels[0].ranges[0]"), "{why}");
        let why = refused(&|j| {
            let file = &mut j.grandparents[0];
            std::mem::swap(&mut file.smallest, &mut file.largest);
        });
        assert!(why.starts_with("job.grandparents[0]"), "{why}");
    }
}
