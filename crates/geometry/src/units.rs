//! Units: sector sizes, byte sizes with binary and decimal suffixes, alignment arithmetic.

use core::fmt;

use serde::Serialize;

/// A device logical sector size. Partition-table LBAs are counted in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Default)]
#[serde(into = "u32")]
pub enum SectorSize {
    /// 512-byte logical sectors (almost every USB stick and SD card).
    #[default]
    S512,
    /// 4096-byte logical sectors ("4Kn").
    S4096,
}

impl SectorSize {
    /// The size in bytes.
    #[must_use]
    pub const fn bytes(self) -> u32 {
        match self {
            SectorSize::S512 => 512,
            SectorSize::S4096 => 4096,
        }
    }

    /// The size in bytes, as `u64` for offset arithmetic.
    #[must_use]
    pub const fn bytes_u64(self) -> u64 {
        self.bytes() as u64
    }

    /// `Some` for 512 and 4096, `None` for anything else.
    #[must_use]
    pub const fn from_bytes(bytes: u64) -> Option<Self> {
        match bytes {
            512 => Some(SectorSize::S512),
            4096 => Some(SectorSize::S4096),
            _ => None,
        }
    }
}

impl From<SectorSize> for u32 {
    fn from(s: SectorSize) -> u32 {
        s.bytes()
    }
}

impl fmt::Display for SectorSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bytes())
    }
}

/// Why a size string could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SizeError {
    /// Nothing to parse.
    #[error("empty size")]
    Empty,
    /// The number part is not a number.
    #[error("{text:?} is not a size (expected e.g. 512, 4MiB, 1.5GiB)")]
    NotANumber {
        /// The offending text.
        text: String,
    },
    /// A minus sign: sizes are never negative.
    #[error("{text:?} is negative: sizes are byte counts (e.g. 512, 4MiB)")]
    Negative {
        /// The offending text.
        text: String,
    },
    /// The suffix is not one we know.
    #[error("{text:?} has an unknown unit {unit:?} (use B; KiB, MiB, GiB, TiB or K, M, G, T for powers of 1024; KB, MB, GB, TB for powers of 1000)")]
    UnknownUnit {
        /// The offending text.
        text: String,
        /// The suffix.
        unit: String,
    },
    /// The value does not fit 64 bits or is fractional bytes.
    #[error("{text:?} is out of range or not a whole number of bytes")]
    OutOfRange {
        /// The offending text.
        text: String,
    },
}

/// Parses `512`, `4MiB`, `4M`, `1.5GiB`, `128KiB`, `2TiB`, `4096B`, `8GB`. As in sfdisk and
/// parted, `K`/`M`/`G`/`T` and `KiB`/`MiB`/`GiB`/`TiB` are powers of 1024 and
/// `KB`/`MB`/`GB`/`TB` powers of 1000 (a retail "8 GB" card holds 8,000,000,000 bytes or
/// fewer); units are case-insensitive. A fraction must give a whole number of bytes.
///
/// ```
/// use blockwise_geometry::parse_size;
/// assert_eq!(parse_size("4MiB"), Ok(4 << 20));
/// assert_eq!(parse_size("4M"), Ok(4 << 20));
/// assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
/// assert_eq!(parse_size("8GB"), Ok(8_000_000_000));
/// assert!(parse_size("4XB").is_err());
/// ```
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(SizeError::Empty);
    }
    if t.starts_with('-') {
        return Err(SizeError::Negative {
            text: text.to_string(),
        });
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let unit = unit.trim();
    let Some(multiplier) = unit_bytes(unit) else {
        return Err(SizeError::UnknownUnit {
            text: text.to_string(),
            unit: unit.to_string(),
        });
    };
    if num.is_empty() || num.starts_with('.') || num.ends_with('.') || num.matches('.').count() > 1
    {
        return Err(SizeError::NotANumber {
            text: text.to_string(),
        });
    }
    let oor = || SizeError::OutOfRange {
        text: text.to_string(),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num.as_str(), ""));
    let int: u128 = int.parse().map_err(|_| oor())?;
    let mut value = int.checked_mul(multiplier).ok_or_else(oor)?;
    if !frac.is_empty() {
        // An exact decimal fraction of the unit: frac_digits * unit / 10^len must be whole.
        let digits = u32::try_from(frac.len()).map_err(|_| oor())?;
        if digits > 12 {
            return Err(oor());
        }
        let f: u128 = frac.parse().map_err(|_| oor())?;
        let denom = 10u128.pow(digits);
        let scaled = f.checked_mul(multiplier).ok_or_else(oor)?;
        if scaled % denom != 0 {
            return Err(oor());
        }
        value = value.checked_add(scaled / denom).ok_or_else(oor)?;
    }
    u64::try_from(value).map_err(|_| oor())
}

/// Bytes per unit: binary for `K`…`T` and `KiB`…`TiB`, decimal for `KB`…`TB`
/// (case-insensitive, as sfdisk and parted read them).
fn unit_bytes(unit: &str) -> Option<u128> {
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return None,
    })
}

/// A byte count with `,` between thousands: `8,000,000,000`.
#[must_use]
pub fn group_thousands(bytes: u64) -> String {
    let digits = bytes.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A size the way a user may have written it, with its exact bytes and its binary size:
/// `8 GB = 8,000,000,000 bytes = 7.45 GiB` when it is a whole number of decimal units
/// (KB…TB) but not of binary ones, else `8 GiB = 8,589,934,592 bytes`.
///
/// ```
/// use blockwise_geometry::units::format_size_both;
/// assert_eq!(format_size_both(8_000_000_000), "8 GB = 8,000,000,000 bytes = 7.45 GiB");
/// assert_eq!(format_size_both(8 << 30), "8 GiB = 8,589,934,592 bytes");
/// ```
#[must_use]
pub fn format_size_both(bytes: u64) -> String {
    const DECIMAL: [(&str, u64); 4] = [
        ("TB", 1_000_000_000_000),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1_000),
    ];
    let binary = format_size(bytes);
    let exact_binary = !binary.contains('.');
    let decimal = DECIMAL
        .iter()
        .find(|(_, unit)| bytes >= *unit && bytes % unit == 0)
        .map(|(name, unit)| format!("{} {name}", bytes / unit));
    match decimal {
        Some(d) if bytes < 1024 => format!("{d} = {} bytes", group_thousands(bytes)),
        Some(d) if !exact_binary => format!("{d} = {} bytes = {binary}", group_thousands(bytes)),
        _ => format!("{binary} = {} bytes", group_thousands(bytes)),
    }
}

/// Formats a byte count the way humans read sizes: `4 MiB`, `1.5 GiB`, `32256 B`.
#[must_use]
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (name, shift) in UNITS {
        let unit = 1u64 << shift;
        if bytes >= unit {
            if bytes % unit == 0 {
                return format!("{} {name}", bytes >> shift);
            }
            #[expect(clippy::cast_precision_loss, reason = "display only")]
            let v = bytes as f64 / unit as f64;
            return format!("{v:.2} {name}");
        }
    }
    format!("{bytes} B")
}

/// The largest power of two that divides `offset` (offset 0 is aligned to everything:
/// reported as `2^63`).
#[must_use]
pub const fn alignment_of(offset: u64) -> u64 {
    if offset == 0 {
        1 << 63
    } else {
        1 << offset.trailing_zeros()
    }
}

/// Rounds `value` up to a multiple of `align` (`align` > 0). `None` on overflow.
#[must_use]
pub const fn round_up(value: u64, align: u64) -> Option<u64> {
    if align == 0 {
        return None;
    }
    let rem = value % align;
    if rem == 0 {
        Some(value)
    } else {
        value.checked_add(align - rem)
    }
}

/// Rounds `value` down to a multiple of `align` (`align` > 0).
#[must_use]
pub const fn round_down(value: u64, align: u64) -> u64 {
    if align == 0 {
        value
    } else {
        value - value % align
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Option<u64>) {
        assert_eq!(parse_size(text).ok(), expected, "{text}");
    }

    #[test]
    fn sizes() {
        check("512", Some(512));
        check("4MiB", Some(4 << 20));
        check("4M", Some(4 << 20));
        check("4 MiB", Some(4 << 20));
        check("128KiB", Some(128 << 10));
        check("1.5GiB", Some(3 << 29));
        check("0.5KiB", Some(512));
        check("2TiB", Some(2 << 40));
        check("16EiB", None);
        check("4XB", None);
        check("", None);
        check("MiB", None);
        check("1.2.3", None);
        check("1.1B", None);
        check("99999999999999999999", None);
        check("17179869184GiB", None);
        check("1_024", Some(1024));
        // Decimal units, as sfdisk and parted read them; binary ones keep their bytes.
        check("8GB", Some(8_000_000_000));
        check("8 gb", Some(8_000_000_000));
        check("1.5KB", Some(1500));
        check("2TB", Some(2_000_000_000_000));
        check("4MB", Some(4_000_000));
        check("4KB", Some(4000));
        check("4K", Some(4096));
        check("4MiB", Some(4 << 20));
        check("0.0001KB", None);
        check("18446744073709551616B", None);
        check("18446744073709551615", Some(u64::MAX));
        check("18446744073709552KB", None);
    }

    #[test]
    fn both_units() {
        assert_eq!(
            format_size_both(8_000_000_000),
            "8 GB = 8,000,000,000 bytes = 7.45 GiB"
        );
        assert_eq!(format_size_both(4 << 20), "4 MiB = 4,194,304 bytes");
        assert_eq!(format_size_both(1000), "1 KB = 1,000 bytes");
        assert_eq!(format_size_both(512), "512 B = 512 bytes");
        assert_eq!(format_size_both(4096), "4 KiB = 4,096 bytes");
        assert_eq!(format_size_both(1 << 40), "1 TiB = 1,099,511,627,776 bytes");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1_000), "1,000");
    }

    #[test]
    fn rounding_and_alignment() {
        assert_eq!(round_up(5, 4), Some(8));
        assert_eq!(round_up(8, 4), Some(8));
        assert_eq!(round_up(u64::MAX, 4), None);
        assert_eq!(round_down(7, 4), 4);
        assert_eq!(alignment_of(32256), 512);
        assert_eq!(alignment_of(4 << 20), 4 << 20);
        assert_eq!(format_size(4 << 20), "4 MiB");
        assert_eq!(format_size(32256), "31.50 KiB");
        assert_eq!(format_size(100), "100 B");
    }
}
