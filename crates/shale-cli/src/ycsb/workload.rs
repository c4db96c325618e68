//! The YCSB core workloads: their operation mixes and request
//! distributions.

use clap::ValueEnum;

/// A YCSB core workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Update heavy: 50 % read, 50 % update.
    A,
    /// Read mostly: 95 % read, 5 % update.
    B,
    /// Read only.
    C,
    /// Read latest: 95 % read, 5 % insert, the latest records most popular.
    D,
    /// Short ranges: 95 % scan, 5 % insert.
    E,
    /// Read-modify-write: 50 % read, 50 % read-modify-write.
    F,
}

/// How keys are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Distribution {
    /// YCSB's scrambled zipfian, constant 0.99.
    Zipfian,
    /// Recently inserted keys most popular.
    Latest,
    /// Every key equally likely.
    Uniform,
}

/// An operation of the run phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Get one record.
    Read,
    /// Overwrite one record.
    Update,
    /// Add a new record.
    Insert,
    /// Read up to 100 records from a key on.
    Scan,
    /// Read a record, then write it back.
    ReadModifyWrite,
}

/// Every operation, in report order.
pub const OPERATIONS: [Operation; 5] = [
    Operation::Read,
    Operation::Update,
    Operation::Insert,
    Operation::Scan,
    Operation::ReadModifyWrite,
];

impl Operation {
    /// YCSB's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Read => "READ",
            Operation::Update => "UPDATE",
            Operation::Insert => "INSERT",
            Operation::Scan => "SCAN",
            Operation::ReadModifyWrite => "READ-MODIFY-WRITE",
        }
    }

    /// Its position in [`OPERATIONS`].
    pub fn index(self) -> usize {
        OPERATIONS.iter().position(|o| *o == self).unwrap_or(0)
    }
}

impl Workload {
    /// The operation mix: (operation, proportion).
    pub fn mix(self) -> &'static [(Operation, f64)] {
        match self {
            Workload::A => &[(Operation::Read, 0.5), (Operation::Update, 0.5)],
            Workload::B => &[(Operation::Read, 0.95), (Operation::Update, 0.05)],
            Workload::C => &[(Operation::Read, 1.0)],
            Workload::D => &[(Operation::Read, 0.95), (Operation::Insert, 0.05)],
            Workload::E => &[(Operation::Scan, 0.95), (Operation::Insert, 0.05)],
            Workload::F => &[(Operation::Read, 0.5), (Operation::ReadModifyWrite, 0.5)],
        }
    }

    /// YCSB's request distribution for it.
    pub fn distribution(self) -> Distribution {
        match self {
            Workload::D => Distribution::Latest,
            _ => Distribution::Zipfian,
        }
    }

    /// Picks an operation for a uniform `u` in `[0, 1)`.
    pub fn choose(self, u: f64) -> Operation {
        let mix = self.mix();
        let mut sum = 0.0;
        for (operation, proportion) in mix {
            sum += proportion;
            if u < sum {
                return *operation;
            }
        }
        mix[mix.len() - 1].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_add_up_and_choose_by_proportion() {
        for workload in [
            Workload::A,
            Workload::B,
            Workload::C,
            Workload::D,
            Workload::E,
            Workload::F,
        ] {
            let total: f64 = workload.mix().iter().map(|(_, p)| p).sum();
            assert!((total - 1.0).abs() < 1e-9, "{workload:?}");
        }
        assert_eq!(Workload::A.choose(0.49), Operation::Read);
        assert_eq!(Workload::A.choose(0.51), Operation::Update);
        assert_eq!(Workload::E.choose(0.96), Operation::Insert);
        assert_eq!(Workload::F.choose(0.99), Operation::ReadModifyWrite);
        assert_eq!(Workload::C.choose(0.999_999), Operation::Read);
        assert_eq!(Workload::D.distribution(), Distribution::Latest);
        assert_eq!(Workload::E.distribution(), Distribution::Zipfian);
    }
}
