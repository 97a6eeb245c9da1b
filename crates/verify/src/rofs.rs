//! What the read-only filesystems' geometry promises, as pure functions of a plan's values:
//! `verify` calls them with what it read (EROFS, squashfs, verity superblocks), and
//! [`plan_findings`](crate::plan_findings) with what a plan promises.

use blockwise_geometry::{format_size, ErofsPlan, FsPlan, SquashfsPlan, VerityPlan};

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

/// A hash area's findings: blocks smaller than a page (warning), a hash area off the page
/// (error) or, appended, off the erase block (info).
pub(crate) fn verity_alignment(i: u32, v: &VerityPlan, appended: bool, e: u64) -> Vec<Finding> {
    let mut out = Vec::new();
    if v.data_block_bytes < 4096 || v.hash_block_bytes < 4096 {
        out.push(finding(
            Severity::Warning,
            FindingCode::VeritySmallBlocks,
            i,
            format!(
                "partition {i} (dm-verity): {}-byte data blocks and {}-byte hash blocks: smaller than a 4 KiB flash page, so reads verify partial pages; veritysetup format --data-block-size=4096 --hash-block-size=4096",
                v.data_block_bytes, v.hash_block_bytes
            ),
        ));
    }
    if !is_multiple(v.hash_start_bytes, PAGE) {
        out.push(finding(
            Severity::Error,
            FindingCode::VerityHashNot4kAligned,
            i,
            format!(
                "partition {i} (dm-verity): the hash area starts at {} B, not on a 4 KiB page: every hash block straddles two flash pages; use a --hash-offset that is a multiple of 4096",
                v.hash_start_bytes
            ),
        ));
    } else if appended && !is_multiple(v.hash_start_bytes, e) {
        out.push(finding(
            Severity::Info,
            FindingCode::VerityHashNotEraseAligned,
            i,
            format!(
                "partition {i} (dm-verity): the appended hash area starts at {} B, not on the {} erase block, so its first erase block also holds filesystem data (blockwise starts it on the next erase block)",
                v.hash_start_bytes,
                format_size(e)
            ),
        ));
    }
    out
}

/// EROFS: blocks smaller than a page or not dividing the erase block (warning).
pub(crate) fn erofs_alignment(i: u32, x: &ErofsPlan, e: u64) -> Vec<Finding> {
    let bs = u64::from(x.block_bytes);
    let mut out = Vec::new();
    if bs < PAGE || !is_multiple(e, bs) {
        out.push(finding(
            Severity::Warning,
            FindingCode::ErofsSmallBlocks,
            i,
            format!(
                "partition {i} (erofs): {bs}-byte blocks {} the {} erase block; mkfs.erofs -b 4096 (blockwise writes 4 KiB blocks)",
                if bs < PAGE { "are smaller than a 4 KiB flash page and do not fill" } else { "do not divide" },
                format_size(e)
            ),
        ));
    }
    if let Some(v) = &x.verity {
        out.extend(verity_alignment(i, v, true, e));
    }
    out
}

/// squashfs: only an appended hash area has anything to align.
pub(crate) fn squashfs_alignment(i: u32, q: &SquashfsPlan, e: u64) -> Vec<Finding> {
    q.verity
        .as_ref()
        .map(|v| verity_alignment(i, v, true, e))
        .unwrap_or_default()
}

/// The findings of a read-only filesystem of partition `i`, for the plan and for verify.
pub(crate) fn alignment(i: u32, fs: &FsPlan, e: u64) -> Vec<Finding> {
    match fs {
        FsPlan::Erofs(x) => erofs_alignment(i, x, e),
        FsPlan::Squashfs(q) => squashfs_alignment(i, q, e),
        FsPlan::Verity(v) => verity_alignment(i, v, false, e),
        _ => Vec::new(),
    }
}
