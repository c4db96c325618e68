//! Byte sizes on the command line: `4194304` (plain bytes, as db_bench
//! takes them), or a number with a unit, `4MiB`, `64G`, `1.5GiB`, `500MB`.
//!
//! The rule, one for every size flag: `K M G T` and `KiB MiB GiB TiB` are
//! powers of 1024 (as RocksDB's ldb and most tools read `64M`), `kB MB GB
//! TB` powers of 1000, `B` is bytes. Units are read without regard to case
//! and may follow a space. A fraction needs a unit and is rounded down to a
//! whole byte.

/// A size flag's help: `$text` and the rule.
macro_rules! size_help {
    ($text:literal) => {
        concat!(
            $text,
            " SIZE: bytes, or a number with K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024) \
             or kB, MB, GB, TB (powers of 1000), e.g. 64MiB."
        )
    };
}
pub(crate) use size_help;

/// What a bad size is told it should look like.
const EXPECTED: &str = "expected bytes like 4194304, 4MiB or 64GiB";

/// The multiplier a unit stands for, `None` for an unknown unit.
fn unit_multiplier(unit: &str) -> Option<u64> {
    let unit = unit.to_ascii_lowercase();
    if unit.is_empty() || unit == "b" {
        return Some(1);
    }
    let (prefix, binary) = if let Some(prefix) = unit.strip_suffix("ib") {
        (prefix, true)
    } else if let Some(prefix) = unit.strip_suffix('b') {
        (prefix, false)
    } else {
        (unit.as_str(), true)
    };
    let power = match prefix {
        "k" => 1,
        "m" => 2,
        "g" => 3,
        "t" => 4,
        _ => return None,
    };
    Some(if binary {
        1u64 << (10 * power)
    } else {
        1000u64.pow(power)
    })
}

/// Parses a size: plain bytes or a number with a unit (see the module).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = |why: &str| format!("{why} in {text:?}: {EXPECTED}");
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return Err(bad("a size cannot be negative"));
    }
    let number_end = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(number_end);
    let unit = unit.trim_start();
    if number.is_empty() || number == "." {
        return Err(bad("no number"));
    }
    let multiplier = unit_multiplier(unit).ok_or_else(|| bad(&format!("unknown unit {unit:?}")))?;
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    if fraction.contains('.') {
        return Err(bad("not a number"));
    }
    if number.contains('.') && unit.is_empty() {
        return Err(bad("a fraction of a byte"));
    }
    let too_large = || bad("too large");
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let mut bytes = whole.checked_mul(multiplier).ok_or_else(too_large)?;
    // The fraction, digit by digit, exactly (no floating point): a digit d
    // at place p adds d * multiplier / 10^p, summed before the final
    // division so that only one rounding down happens.
    if !fraction.is_empty() {
        let digits = fraction.trim_end_matches('0');
        if digits.len() > 18 {
            return Err(bad("too many digits after the point"));
        }
        if !digits.is_empty() {
            let numerator: u128 = digits.parse().map_err(|_| bad("not a number"))?;
            let denominator = 10u128.pow(digits.len() as u32);
            let part = numerator * u128::from(multiplier) / denominator;
            bytes = bytes
                .checked_add(u64::try_from(part).map_err(|_| too_large())?)
                .ok_or_else(too_large)?;
        }
    }
    Ok(bytes)
}

/// [`parse_size`] for a `usize` flag.
pub fn parse_size_usize(text: &str) -> Result<usize, String> {
    usize::try_from(parse_size(text)?).map_err(|_| format!("{text:?} is too large: {EXPECTED}"))
}

/// [`parse_size`] for a flag where a negative number keeps its db_bench
/// meaning (`--cache_size=-1`: the default).
pub fn parse_size_or_negative(text: &str) -> Result<i64, String> {
    let trimmed = text.trim();
    if let Some(rest) = trimmed.strip_prefix('-') {
        let bytes = parse_size(rest)?;
        return i64::try_from(bytes)
            .map(|b| -b)
            .map_err(|_| format!("{text:?} is too large: {EXPECTED}"));
    }
    i64::try_from(parse_size(trimmed)?).map_err(|_| format!("{text:?} is too large: {EXPECTED}"))
}

/// `bytes` as the help texts write sizes: the largest binary unit it is a
/// whole number of (`4MiB`, `64GiB`, `4096`).
#[cfg(test)]
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes != 0 && bytes % (1u64 << shift) == 0 {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_bytes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4194304"), Ok(4 << 20));
        assert_eq!(parse_size(" 512 "), Ok(512));
        assert_eq!(parse_size("512B"), Ok(512));
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn binary_units() {
        assert_eq!(parse_size("4KiB"), Ok(4 << 10));
        assert_eq!(parse_size("4K"), Ok(4 << 10));
        assert_eq!(parse_size("4k"), Ok(4 << 10));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("64GiB"), Ok(64 << 30));
        assert_eq!(parse_size("64gib"), Ok(64 << 30));
        assert_eq!(parse_size("64 GiB"), Ok(64 << 30));
        assert_eq!(parse_size("64G"), Ok(64 << 30));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("0.5K"), Ok(512));
        assert_eq!(parse_size(".5K"), Ok(512));
        assert_eq!(parse_size("1.0009765625K"), Ok(1025));
        // Rounded down to a whole byte.
        assert_eq!(parse_size("0.001K"), Ok(1));
    }

    #[test]
    fn decimal_units() {
        assert_eq!(parse_size("4kB"), Ok(4_000));
        assert_eq!(parse_size("4KB"), Ok(4_000));
        assert_eq!(parse_size("500MB"), Ok(500_000_000));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_size("3TB"), Ok(3_000_000_000_000));
    }

    #[test]
    fn bad_sizes_say_what_is_expected() {
        for bad in [
            "", "big", "4XB", "4MiBs", "4 M B", "-1", "-4MiB", "1.5", "1..5K", ".", "K", "4iB",
            "4Mi", "1e6", "0x10",
        ] {
            let message = parse_size(bad).unwrap_err();
            assert!(message.contains(EXPECTED), "{bad:?}: {message}");
        }
        assert!(parse_size("16EiB").is_err());
        let message = parse_size("16777216TiB").unwrap_err();
        assert!(message.contains("too large"), "{message}");
        assert!(parse_size("99999999999999999999").is_err());
    }

    #[test]
    fn usize_and_signed() {
        assert_eq!(parse_size_usize("8MiB"), Ok(8 << 20));
        assert!(parse_size_usize("-8").is_err());
        assert_eq!(parse_size_or_negative("-1"), Ok(-1));
        assert_eq!(parse_size_or_negative("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size_or_negative("-8MiB"), Ok(-(8 << 20)));
        assert!(parse_size_or_negative("16EiB").is_err());
        assert!(parse_size_or_negative("8000PB").is_err());
    }

    #[test]
    fn formats_with_the_largest_whole_unit() {
        assert_eq!(format_size(0), "0");
        assert_eq!(format_size(4096), "4KiB");
        assert_eq!(format_size(4 << 20), "4MiB");
        assert_eq!(format_size(64 << 30), "64GiB");
        assert_eq!(format_size(3 << 40), "3TiB");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(format_size(1536), "1536");
        for bytes in [0, 1, 4096, 4 << 20, 64 << 30, 1536] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
    }
}
