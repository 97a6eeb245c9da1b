//! The alignment findings, as pure functions of offsets: the verifier calls them with what it
//! read from the disk, [`plan_findings`] with what a [`Plan`] promises, so `plan --json` and
//! `verify --json` of the built image report a misplaced start with the same code and words.

use blockwise_geometry::{alignment_of, format_size, FsPlan, Plan, SectorSize};

use crate::num::{div, is_multiple};
use crate::{Finding, FindingCode, Severity, PAGE};

fn finding(severity: Severity, code: FindingCode, i: u32, message: String) -> Finding {
    Finding {
        severity,
        code,
        partition: Some(i),
        message,
    }
}

/// Partition `i` starting at `start` bytes: off the 4 KiB page (error) or off the erase block
/// `e` (warning, error with `strict`). `None` when aligned or at 0 (a bare filesystem).
pub(crate) fn partition_start(
    i: u32,
    start: u64,
    sector: SectorSize,
    e: u64,
    strict: bool,
) -> Option<Finding> {
    if start == 0 {
        return None;
    }
    let sb = sector.bytes_u64();
    let lba = div(start, sb);
    if start % PAGE != 0 {
        return Some(finding(
            Severity::Error,
            FindingCode::PartitionNot4kAligned,
            i,
            format!(
                "partition {i} starts at sector {lba} ({start} B): not 4 KiB aligned — every 4 KiB write touches two flash pages; rebuild with a start on a multiple of the erase block ({})",
                format_size(e)
            ),
        ));
    }
    if is_multiple(start, e) {
        return None;
    }
    // Not a multiple: the next boundary is one past the floor (total even for e = 0).
    let next = div(start, e).saturating_add(1).saturating_mul(e);
    Some(finding(
        Severity::error_if(strict),
        FindingCode::PartitionNotEraseAligned,
        i,
        format!(
            "partition {i} starts at sector {lba} ({}): {} aligned but not on the {} erase block — writes that cross erase blocks cost extra erases and wear; move it to a multiple of {} (e.g. sector {})",
            format_size(start),
            format_size(alignment_of(start)),
            format_size(e),
            format_size(e),
            div(next, sb)
        ),
    ))
}

/// A FAT volume's places, absolute bytes, for [`fat_alignment`].
pub(crate) struct FatPlaces<'a> {
    /// Partition number.
    pub i: u32,
    /// `FAT12` / `FAT16` / `FAT32`.
    pub name: &'a str,
    /// Bytes per FAT sector.
    pub bps: u64,
    /// Reserved sectors (for the `mkfs.fat -R` hint).
    pub reserved_sectors: u64,
    /// Sectors from the volume start to the data area.
    pub first_data_sector: u64,
    /// Where the first FAT starts.
    pub fat_start: u64,
    /// Where the data area (cluster 2) starts.
    pub data_start: u64,
    /// Cluster size.
    pub cluster: u64,
}

/// A FAT volume's alignment findings: the data area off the page (error) or off the erase
/// block (warning, error with `strict`), the first FAT off the erase block (info), clusters
/// that do not divide the erase block (warning).
pub(crate) fn fat_alignment(v: &FatPlaces<'_>, e: u64, strict: bool) -> Vec<Finding> {
    let (i, name, data_start, bps) = (v.i, v.name, v.data_start, v.bps);
    let mut out = Vec::new();
    if data_start % PAGE != 0 {
        out.push(finding(
            Severity::Error,
            FindingCode::FatDataNot4kAligned,
            i,
            format!(
                "partition {i} ({name}): the data area starts at {data_start} B ({} sectors into the volume): not 4 KiB aligned — every cluster straddles two flash pages; reformat so the data area lands on the erase block (mkfs.fat -R, or blockwise build)",
                v.first_data_sector
            ),
        ));
    } else if !is_multiple(data_start, e) {
        let gap = e.saturating_sub(data_start.checked_rem(e).unwrap_or(0));
        let hint = if is_multiple(gap, bps) {
            let r = v.reserved_sectors.saturating_add(div(gap, bps));
            if r <= 0xffff {
                format!("reformat with more reserved sectors (e.g. mkfs.fat -R {r}, then check again: mkfs.fat may resize the FAT) or with blockwise build")
            } else {
                "reformat with blockwise build, which chooses reserved sectors and FAT size so the data area lands on the erase block".into()
            }
        } else {
            "reformat with blockwise build".into()
        };
        out.push(finding(
            Severity::error_if(strict),
            FindingCode::FatDataNotAligned,
            i,
            format!(
                "partition {i} ({name}): the data area starts at {data_start} B ({}), {} aligned but not on the {} erase block — clusters straddle erase blocks, so file writes cost extra erases; {hint}",
                format_size(data_start),
                format_size(alignment_of(data_start)),
                format_size(e)
            ),
        ));
    }
    if !is_multiple(v.fat_start, e) && is_multiple(data_start, e) {
        out.push(finding(
            Severity::Info,
            FindingCode::FatTableNotAligned,
            i,
            format!(
                "partition {i} ({name}): the first FAT starts at {} B, not on the {} erase block; FAT updates then touch two erase blocks (blockwise's align-fat = true puts it on the {} erase block too)",
                v.fat_start,
                format_size(e),
                format_size(e)
            ),
        ));
    }
    if !is_multiple(e, v.cluster) {
        out.push(finding(
            Severity::Warning,
            FindingCode::FatClusterStraddles,
            i,
            format!(
                "partition {i} ({name}): the cluster size {} does not divide the {} erase block: some clusters straddle two erase blocks; use a cluster size that divides it",
                format_size(v.cluster),
                format_size(e)
            ),
        ));
    }
    out
}

/// An ext2/3/4 journal starting at `j` bytes off the erase block (warning, error with `strict`).
pub(crate) fn ext4_journal(i: u32, kind: &str, j: u64, e: u64, strict: bool) -> Option<Finding> {
    (!is_multiple(j, e)).then(|| {
        finding(
            Severity::error_if(strict),
            FindingCode::Ext4JournalNotAligned,
            i,
            format!(
                "partition {i} ({kind}): the journal starts at {j} B ({} aligned), not on the {} erase block — the journal is the most rewritten area, so every commit near its edges costs extra erases; blockwise build starts it on the {} erase block where the filesystem has room for it",
                format_size(alignment_of(j)),
                format_size(e),
                format_size(e)
            ),
        )
    })
}

/// The first inode table starting at `it` bytes off the erase block (info).
pub(crate) fn ext4_inode_table(i: u32, kind: &str, it: u64, e: u64) -> Option<Finding> {
    (!is_multiple(it, e)).then(|| {
        finding(
            Severity::Info,
            FindingCode::Ext4InodeTableNotAligned,
            i,
            format!(
                "partition {i} ({kind}): the first inode table starts at {it} B, not on the {} erase block",
                format_size(e)
            ),
        )
    })
}

/// The alignment findings a plan promises, with the codes and messages `verify` gives for the
/// built image (partition starts, FAT data area / first FAT / cluster size, ext4 journal and
/// first inode table), not strict: what `blockwise plan --json` lists under `findings`.
/// Empty for every plan blockwise makes by itself; an explicit `start` off the erase block, or
/// a filesystem too small to align, shows up here.
pub fn plan_findings(plan: &Plan) -> Vec<Finding> {
    let e = plan.erase_block_bytes;
    let mut out = Vec::new();
    for p in &plan.partitions {
        let i = p.index;
        out.extend(partition_start(
            i,
            p.start_bytes,
            plan.sector_bytes,
            e,
            false,
        ));
        match &p.filesystem {
            Some(FsPlan::Fat(f)) => {
                let bps = u64::from(f.sector_bytes);
                let name = f.kind.name().to_uppercase();
                out.extend(fat_alignment(
                    &FatPlaces {
                        i,
                        name: &name,
                        bps,
                        reserved_sectors: u64::from(f.reserved_sectors),
                        first_data_sector: div(
                            f.data_start_bytes.saturating_sub(p.start_bytes),
                            bps,
                        ),
                        fat_start: f.fat_start_bytes,
                        data_start: f.data_start_bytes,
                        cluster: u64::from(f.cluster_bytes),
                    },
                    e,
                    false,
                ));
            }
            Some(FsPlan::Ext4(x)) => {
                if let Some(j) = x.journal_start_bytes {
                    out.extend(ext4_journal(i, &x.kind, j, e, false));
                }
                if let Some(it) = x.inode_table_start_bytes {
                    out.extend(ext4_inode_table(i, &x.kind, it, e));
                }
            }
            Some(fs @ (FsPlan::Squashfs(_) | FsPlan::Erofs(_) | FsPlan::Verity(_))) => {
                out.extend(crate::rofs::alignment(i, fs, e));
            }
            Some(FsPlan::F2fs(f)) => out.extend(crate::f2fs::f2fs_alignment(i, f, e, false)),
            Some(FsPlan::Exfat(x)) => out.extend(crate::exfat::align::exfat_alignment(
                i,
                x.fat_start_bytes,
                x.heap_start_bytes,
                u64::from(x.cluster_bytes),
                e,
                false,
            )),
            Some(FsPlan::Other(_)) | None => {}
        }
    }
    // In the report's order: `verify` sorts its findings by severity (stable).
    out.sort_by_key(|f| f.severity);
    out
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    /// A hand-made plan (the library lets anyone make one) with a zero erase block gives
    /// findings, never a division panic.
    #[test]
    fn zero_erase_block_does_not_panic() {
        let f = partition_start(1, 1 << 20, SectorSize::S512, 0, false);
        assert_eq!(
            f.map(|f| f.code),
            Some(FindingCode::PartitionNotEraseAligned)
        );
        let f = partition_start(1, 6 << 20, SectorSize::S512, 4 << 20, false).unwrap();
        assert!(f.message.contains("e.g. sector 16384"), "{}", f.message);
        assert!(ext4_journal(1, "ext4", 4096, 0, true).is_some());
        let v = FatPlaces {
            i: 1,
            name: "FAT32",
            bps: 512,
            reserved_sectors: 32,
            first_data_sector: 8,
            fat_start: 4096,
            data_start: 8192,
            cluster: 4096,
        };
        assert!(!fat_alignment(&v, 0, false).is_empty());
    }
}
