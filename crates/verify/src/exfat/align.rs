//! The exFAT alignment findings, as pure functions of offsets: the verifier calls them with
//! what it read, `plan_findings` with what a plan promises (the `align.rs` pattern).

use blockwise_geometry::{alignment_of, format_size};

use crate::num::is_multiple;
use crate::{Finding, FindingCode, Severity, PAGE};

fn finding(severity: Severity, code: FindingCode, i: u32, message: String) -> Finding {
    Finding {
        severity,
        code,
        partition: Some(i),
        message,
    }
}

/// An exFAT volume's alignment findings (absolute byte offsets): the cluster heap off the
/// page (error) or off the erase block `e` (warning, error with `strict`), the first FAT off
/// the erase block (info), clusters that straddle erase blocks (warning).
pub(crate) fn exfat_alignment(
    i: u32,
    fat_start: u64,
    heap_start: u64,
    cluster: u64,
    e: u64,
    strict: bool,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let hint = format!(
        "reformat with mkfs.exfat -b {} (on a partition that starts on it) or rebuild with blockwise build",
        format_size(e).replace(' ', "").replace("MiB", "M").replace("KiB", "K")
    );
    if heap_start % PAGE != 0 {
        out.push(finding(
            Severity::Error,
            FindingCode::ExfatHeapNot4kAligned,
            i,
            format!(
                "partition {i} (exFAT): the cluster heap starts at {heap_start} B: not 4 KiB aligned — every cluster straddles two flash pages; {hint}"
            ),
        ));
    } else if !is_multiple(heap_start, e) {
        out.push(finding(
            Severity::error_if(strict),
            FindingCode::ExfatHeapNotAligned,
            i,
            format!(
                "partition {i} (exFAT): the cluster heap starts at {heap_start} B ({}), {} aligned but not on the {} erase block — clusters near its edges cost extra erases; {hint}",
                format_size(heap_start),
                format_size(alignment_of(heap_start)),
                format_size(e)
            ),
        ));
    }
    if !is_multiple(fat_start, e) && is_multiple(heap_start, e) {
        out.push(finding(
            Severity::Info,
            FindingCode::ExfatFatNotAligned,
            i,
            format!(
                "partition {i} (exFAT): the FAT starts at {fat_start} B, not on the {} erase block; FAT updates then touch two erase blocks",
                format_size(e)
            ),
        ));
    }
    let unit = cluster.min(e);
    if heap_start % PAGE == 0 && !is_multiple(heap_start, unit) {
        out.push(finding(
            Severity::Warning,
            FindingCode::ExfatClusterStraddles,
            i,
            format!(
                "partition {i} (exFAT): clusters of {} start {} B past a multiple of their size: some straddle two erase blocks; {hint}",
                format_size(cluster),
                heap_start.checked_rem(unit).unwrap_or(0)
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings() {
        let codes = |f: u64, h: u64, c: u64| -> Vec<&'static str> {
            exfat_alignment(1, f, h, c, 4 << 20, false)
                .iter()
                .map(|x| x.code.as_str())
                .collect()
        };
        assert!(codes(24 << 20, 32 << 20, 128 << 10).is_empty());
        assert_eq!(
            codes(1 << 20, 32 << 20, 128 << 10),
            ["exfat-fat-not-aligned"]
        );
        // mkfs.exfat's default: heap at 3 MiB past a 1 MiB partition start.
        assert_eq!(
            codes(2 << 20, 4 << 20 | 64 << 10, 32 << 10),
            ["exfat-heap-not-aligned"]
        );
        assert_eq!(
            codes(2 << 20, (4 << 20) + 4096, 32 << 10),
            ["exfat-heap-not-aligned", "exfat-cluster-straddles"]
        );
        assert_eq!(codes(2 << 20, 512, 4096), ["exfat-heap-not-4k-aligned"]);
        assert!(!exfat_alignment(1, 0, 4096, 4096, 0, true).is_empty());
    }
}
