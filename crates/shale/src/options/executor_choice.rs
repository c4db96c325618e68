//! What `compaction_executor` asks for ([`ExecutorChoice`]): `auto`, or
//! one executor by name.

use std::fmt;
use std::str::FromStr;

use shale_compact::ExecutorKind;

#[cfg(doc)]
use super::Options;

/// What [`Options::compaction_executor`] names: `auto` (the scheduler
/// chooses per job) or one built-in executor.
///
/// ```
/// use shale::options::ExecutorChoice;
/// use shale::shale_compact::ExecutorKind;
/// assert_eq!("auto".parse::<ExecutorChoice>(), Ok(ExecutorChoice::Auto));
/// assert_eq!(
///     "opencl".parse::<ExecutorChoice>(),
///     Ok(ExecutorChoice::Forced(ExecutorKind::OpenCl))
/// );
/// assert_eq!(ExecutorChoice::Forced(ExecutorKind::Remote).to_string(), "remote");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecutorChoice {
    /// `compaction_executor=auto` (the default): the scheduler chooses per
    /// job.
    #[default]
    Auto,
    /// An executor named in the options: it runs every job it accepts.
    Forced(ExecutorKind),
}

impl ExecutorChoice {
    /// The names `compaction_executor` accepts, in the order messages list
    /// them.
    pub const NAMES: [&'static str; 5] = [
        ExecutorKind::ALL[0].name(),
        ExecutorKind::ALL[1].name(),
        ExecutorKind::ALL[2].name(),
        ExecutorKind::ALL[3].name(),
        AUTO,
    ];

    /// The choice's name in options.
    pub fn name(self) -> &'static str {
        match self {
            ExecutorChoice::Auto => AUTO,
            ExecutorChoice::Forced(kind) => kind.name(),
        }
    }
}

impl From<ExecutorKind> for ExecutorChoice {
    /// The choice of that one executor.
    fn from(kind: ExecutorKind) -> ExecutorChoice {
        ExecutorChoice::Forced(kind)
    }
}

/// The name of [`ExecutorChoice::Auto`].
const AUTO: &str = "auto";

impl fmt::Display for ExecutorChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ExecutorChoice {
    type Err = String;

    /// The choice `name` names; the error says which names there are.
    fn from_str(name: &str) -> Result<ExecutorChoice, String> {
        if name == AUTO {
            return Ok(ExecutorChoice::Auto);
        }
        name.parse().map(ExecutorChoice::Forced).map_err(|_| {
            format!(
                "unknown compaction executor {name:?} (available: {})",
                ExecutorChoice::NAMES.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_and_an_unknown_one_lists_them() {
        for name in ExecutorChoice::NAMES {
            assert_eq!(name.parse::<ExecutorChoice>().map(|c| c.name()), Ok(name));
        }
        assert_eq!(
            "warp".parse::<ExecutorChoice>(),
            Err(
                "unknown compaction executor \"warp\" (available: parallel, streaming, \
                 opencl, remote, auto)"
                    .to_string()
            )
        );
    }
}
