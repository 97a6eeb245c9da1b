//! FAT timestamps: local time with 2-second resolution from 1980 to 2107. blockwise treats
//! FAT local time as UTC (as mtools and Linux with `tz=UTC` do) so images do not depend on
//! the builder's time zone.

/// A FAT date/time pair plus the creation-time hundredths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FatTime {
    /// `DIR_WrtDate` format: bits 15–9 year-1980, 8–5 month, 4–0 day.
    pub date: u16,
    /// `DIR_WrtTime` format: bits 15–11 hours, 10–5 minutes, 4–0 seconds/2.
    pub time: u16,
    /// `DIR_CrtTimeTenth`: hundredths of a second, 0–199 (adds to `time`'s even seconds).
    pub hundredths: u8,
}

/// 1980-01-01 00:00:00 UTC.
pub const FAT_EPOCH: i64 = 315_532_800;
/// 2107-12-31 23:59:58 UTC, the latest FAT time.
pub const FAT_MAX: i64 = 4_354_819_198;

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

/// Converts Unix seconds (+ nanoseconds) to a FAT time, clamped to 1980–2107.
#[must_use]
pub fn fat_time(unix: i64, nsec: u32) -> FatTime {
    let (t, nsec) = if unix < FAT_EPOCH {
        (FAT_EPOCH, 0)
    } else if unix > FAT_MAX {
        (FAT_MAX, 0)
    } else {
        (unix, nsec.min(999_999_999))
    };
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let year = u16::try_from(y - 1980).unwrap_or(0);
    let h = u16::try_from(secs / 3600).unwrap_or(0);
    let mi = u16::try_from(secs / 60 % 60).unwrap_or(0);
    let s = u16::try_from(secs % 60).unwrap_or(0);
    let odd = u8::from(s % 2 == 1);
    let hundredths = odd * 100 + u8::try_from(nsec / 10_000_000).unwrap_or(0);
    FatTime {
        date: (year << 9) | (u16::try_from(m).unwrap_or(1) << 5) | u16::try_from(d).unwrap_or(1),
        time: (h << 11) | (mi << 5) | (s / 2),
        hundredths,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(unix: i64, y: u16, mo: u16, d: u16, h: u16, mi: u16, s: u16) {
        let t = fat_time(unix, 0);
        assert_eq!(t.date, ((y - 1980) << 9) | (mo << 5) | d, "date of {unix}");
        assert_eq!(t.time, (h << 11) | (mi << 5) | (s / 2), "time of {unix}");
    }

    #[test]
    fn conversions() {
        check(0, 1980, 1, 1, 0, 0, 0); // clamped up
        check(-5, 1980, 1, 1, 0, 0, 0);
        check(FAT_EPOCH, 1980, 1, 1, 0, 0, 0);
        check(1_700_000_000, 2023, 11, 14, 22, 13, 20);
        check(951_782_400, 2000, 2, 29, 0, 0, 0); // leap day
        check(4_107_542_399, 2100, 2, 28, 23, 59, 58); // 2100 is not a leap year
        check(FAT_MAX, 2107, 12, 31, 23, 59, 58);
        check(i64::MAX, 2107, 12, 31, 23, 59, 58); // clamped down
        assert_eq!(fat_time(FAT_EPOCH + 1, 500_000_000).hundredths, 150);
    }
}
