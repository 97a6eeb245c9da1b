//! Units: sector sizes, byte sizes with binary suffixes, alignment arithmetic.

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
    #[error("{text:?} has an unknown unit {unit:?} (use B, KiB, MiB, GiB, TiB, or K/M/G/T)")]
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

/// Parses `512`, `4MiB`, `4M`, `1.5GiB`, `128KiB`, `2TiB`, `4096B`. Units are binary
/// (`K`, `KB` and `KiB` all mean 1024) because sizes on flash are powers of two;
/// decimal units would silently break alignment.
///
/// ```
/// use blockwise_geometry::parse_size;
/// assert_eq!(parse_size("4MiB"), Ok(4 << 20));
/// assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
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
    let shift: u32 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => {
            return Err(SizeError::UnknownUnit {
                text: text.to_string(),
                unit: unit.to_string(),
            })
        }
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
    let int: u64 = int.parse().map_err(|_| oor())?;
    let mut value = int.checked_shl(shift).ok_or_else(oor)?;
    if int.leading_zeros() < shift {
        return Err(oor());
    }
    if !frac.is_empty() {
        // Exact decimal fraction of 2^shift: frac_digits * 2^shift / 10^len must be whole.
        let digits = u32::try_from(frac.len()).map_err(|_| oor())?;
        if digits > 12 {
            return Err(oor());
        }
        let f: u128 = frac.parse().map_err(|_| oor())?;
        let denom = 10u128.pow(digits);
        let scaled = f << shift;
        if scaled % denom != 0 {
            return Err(oor());
        }
        let add = u64::try_from(scaled / denom).map_err(|_| oor())?;
        value = value.checked_add(add).ok_or_else(oor)?;
    }
    Ok(value)
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
