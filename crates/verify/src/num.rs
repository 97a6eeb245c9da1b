//! Division and alignment on values read from the disk. The units (sector, block, cluster and
//! erase sizes) are never 0 once parsed, but the arithmetic stays total anyway.

/// `value` is a whole multiple of `unit` (never true for a zero unit).
pub(crate) fn is_multiple(value: u64, unit: u64) -> bool {
    value.checked_rem(unit) == Some(0)
}

/// `value / unit`, or 0 for a zero unit.
pub(crate) fn div(value: u64, unit: u64) -> u64 {
    value.checked_div(unit).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total() {
        assert!(is_multiple(8192, 4096));
        assert!(!is_multiple(8192, 3));
        assert!(!is_multiple(0, 0));
        assert_eq!(div(8192, 512), 16);
        assert_eq!(div(1, 0), 0);
    }
}
