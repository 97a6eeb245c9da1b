//! The findings that follow from a layout, as pure functions of a [`PartitionPlan`]: the
//! verifier calls [`partition_findings`] with what it read from the disk, [`plan_findings`]
//! with what a [`Plan`] promises, so `plan --json` lists every finding `verify --json` gives
//! the built image — partition starts, FAT data area / first FAT / cluster size / sector
//! size, ext4 journal / first inode table / stride / stripe width / block size, contents
//! that are not checked, a 4Kn MBR read by guessing — with the same code, severity, partition
//! and words. What only reading can find (checksums, damaged fields, FAT copies, data outside
//! the partitions) stays in the parsers.

use blockwise_geometry::{
    alignment_of, display_str, format_size, ExfatPlan, Ext4Plan, FatPlan, FsKind, FsPlan,
    PartitionPlan, Plan, SectorSize, TableKind,
};

use crate::num::{div, is_multiple};
use crate::{DeviceHints, Finding, FindingCode, Severity, PAGE};

/// What a partition's findings are measured against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Context<'a> {
    /// Erase block.
    pub e: u64,
    /// The device's logical sector (the table's unit).
    pub sector: SectorSize,
    /// Erase-block misalignment and unchecked contents are errors.
    pub strict: bool,
    /// sysfs hints of the device, when there is one.
    pub device: Option<&'a DeviceHints>,
}

impl Context<'_> {
    /// The device's physical sector, when it is larger than `unit` (a FAT sector, an ext4
    /// block): smaller writes are read-modify-write.
    fn physical_sector_above(&self, unit: u64) -> Option<u64> {
        self.device
            .and_then(|d| d.physical_block_bytes)
            .filter(|&phys| unit < phys)
    }
}

/// Every finding that follows from partition `p`'s place and contents (as planned or as
/// read): the start, then the filesystem's geometry, or `not-checked` for contents whose
/// layout is not known. The one function behind both `plan` and `verify`.
pub(crate) fn partition_findings(p: &PartitionPlan, ctx: &Context<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    out.extend(partition_start(
        p.index,
        p.start_bytes,
        ctx.sector,
        ctx.e,
        ctx.strict,
    ));
    match &p.filesystem {
        Some(FsPlan::Fat(f)) => out.extend(fat_findings(p, f, ctx)),
        Some(FsPlan::Ext4(x)) => out.extend(ext4_findings(p, x, ctx)),
        Some(FsPlan::Exfat(x)) => out.extend(exfat_findings(p, x, ctx)),
        Some(FsPlan::F2fs(f)) => {
            out.extend(crate::f2fs::f2fs_alignment(p.index, f, ctx.e, ctx.strict))
        }
        Some(fs @ (FsPlan::Squashfs(_) | FsPlan::Erofs(_) | FsPlan::Verity(_))) => {
            out.extend(crate::rofs::alignment(p.index, fs, ctx.e));
        }
        Some(fs) if fs.alignment().is_none() => out.push(not_checked(p.index, fs, ctx.strict)),
        Some(_) | None => {}
    }
    out
}

/// Contents whose layout is not checked: a warning (an error with `strict`), so the verdict
/// never calls such a partition aligned. A header verify read names its label or UUID.
pub(crate) fn not_checked(i: u32, fs: &FsPlan, strict: bool) -> Finding {
    let kind = fs.kind_name();
    let what = match fs {
        FsPlan::Other(o) => match (&o.label, &o.uuid) {
            (Some(l), _) => format!(" (label \"{}\")", display_str(l)),
            (None, Some(u)) => format!(" (UUID {})", display_str(u)),
            (None, None) => String::new(),
        },
        _ => String::new(),
    };
    let message = if kind == "raw" {
        format!("partition {i} holds bytes that are no filesystem blockwise recognises: only its start is checked, not what is inside")
    } else {
        format!("partition {i}: {kind}{what} found; its internal layout is not checked (only the partition start) — blockwise cannot say whether it is aligned inside")
    };
    finding(
        Severity::error_if(strict),
        FindingCode::NotChecked,
        i,
        message,
    )
}

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

/// A FAT volume's findings from its geometry: alignment ([`fat_alignment`]), 4096-byte
/// sectors, a sector smaller than the device's logical or physical sector.
fn fat_findings(p: &PartitionPlan, f: &FatPlan, ctx: &Context<'_>) -> Vec<Finding> {
    let i = p.index;
    let bps = u64::from(f.sector_bytes);
    let name = f.kind.name().to_uppercase();
    let mut out = fat_alignment(
        &FatPlaces {
            i,
            name: &name,
            bps,
            reserved_sectors: u64::from(f.reserved_sectors),
            first_data_sector: div(f.data_start_bytes.saturating_sub(p.start_bytes), bps),
            fat_start: f.fat_start_bytes,
            data_start: f.data_start_bytes,
            cluster: u64::from(f.cluster_bytes),
        },
        ctx.e,
        ctx.strict,
    );
    if bps == 4096 {
        out.push(finding(
            Severity::Warning,
            FindingCode::FatSector4096,
            i,
            format!("partition {i} ({name}): 4096-byte logical sectors: Raspberry Pi firmware, U-Boot and many UEFI firmwares only read 512-byte FAT sectors; use 512 unless the device is 4Kn"),
        ));
    }
    let dev_logical = ctx.sector.bytes_u64();
    if bps < dev_logical {
        out.push(finding(
            Severity::Error,
            FindingCode::FatSectorBelowLogical,
            i,
            format!("partition {i} ({name}): the FAT sector ({bps} B) is smaller than the device's logical sector ({dev_logical} B): Linux refuses to mount it (\"logical sector size too small for device\"); reformat with mkfs.fat -S {dev_logical}"),
        ));
    } else if let Some(phys) = ctx.physical_sector_above(bps) {
        out.push(finding(
            Severity::Warning,
            FindingCode::FatSectorSmallerThanDevice,
            i,
            format!("partition {i} ({name}): the FAT sector ({bps} B) is smaller than the device's physical sector ({phys} B): single-sector FAT writes become read-modify-write cycles"),
        ));
    }
    out
}

/// An ext2/3/4 filesystem's findings from its geometry: journal and first inode table
/// against the erase block, stride and stripe width, block size against the page and the
/// device.
fn ext4_findings(p: &PartitionPlan, x: &Ext4Plan, ctx: &Context<'_>) -> Vec<Finding> {
    let (i, kind, e) = (p.index, x.kind.as_str(), ctx.e);
    let mut out = Vec::new();
    if let Some(j) = x.journal_start_bytes {
        out.extend(ext4_journal(i, kind, j, e, ctx.strict));
    }
    if let Some(it) = x.inode_table_start_bytes {
        out.extend(ext4_inode_table(i, kind, it, e));
    }
    let bs = u64::from(x.block_bytes);
    let stride = u64::from(x.stride);
    let stripe = u64::from(x.stripe_width);
    let e_blocks = div(e, bs);
    if stride == 0 && stripe == 0 {
        out.push(finding(
            Severity::Info,
            FindingCode::Ext4NoStride,
            i,
            format!("partition {i} ({kind}): stride and stripe_width are 0, so the block allocator does not know the {} erase block; set them with `tune2fs -E stride={e_blocks},stripe_width={e_blocks}`", format_size(e)),
        ));
    }
    for (field, v, code) in [
        ("stride", stride, FindingCode::Ext4StrideMismatch),
        ("stripe_width", stripe, FindingCode::Ext4StripeMismatch),
    ] {
        if v == 0 {
            continue;
        }
        let bytes = v.saturating_mul(bs);
        if !is_multiple(e, bytes) && !is_multiple(bytes, e) {
            out.push(finding(
                Severity::Warning,
                code,
                i,
                format!(
                    "partition {i} ({kind}): {field} is {v} blocks ({}), neither a divisor nor a multiple of the {} erase block — the allocator aligns large files to boundaries that straddle erase blocks; `tune2fs -E {field}={e_blocks}`",
                    format_size(bytes),
                    format_size(e)
                ),
            ));
        } else if field == "stripe_width" && bytes < e {
            out.push(finding(
                Severity::Info,
                FindingCode::Ext4StripeSmaller,
                i,
                format!(
                    "partition {i} ({kind}): stripe_width is {v} blocks ({}), smaller than the {} erase block: large files are aligned to {} only; `tune2fs -E stripe_width={e_blocks}` aligns them to whole erase blocks",
                    format_size(bytes),
                    format_size(e),
                    format_size(bytes)
                ),
            ));
        }
    }
    if let Some(phys) = ctx.physical_sector_above(bs) {
        out.push(finding(
            Severity::Warning,
            FindingCode::Ext4BlockSmallerThanDevice,
            i,
            format!("partition {i} ({kind}): {bs}-byte blocks are smaller than the device's {phys}-byte physical sector: single-block writes become read-modify-write cycles"),
        ));
    }
    if bs < PAGE {
        out.push(finding(
            Severity::Warning,
            FindingCode::Ext4SmallBlocks,
            i,
            format!("partition {i} ({kind}): {bs}-byte blocks are smaller than a 4 KiB flash page: metadata writes become read-modify-write cycles; use 4096-byte blocks (mke2fs -b 4096)"),
        ));
    }
    out
}

/// An exFAT volume's findings from its geometry: alignment
/// ([`crate::exfat::align::exfat_alignment`]) and a sector smaller than the device's logical
/// sector.
fn exfat_findings(p: &PartitionPlan, x: &ExfatPlan, ctx: &Context<'_>) -> Vec<Finding> {
    let i = p.index;
    let mut out = Vec::new();
    let s = u64::from(x.sector_bytes);
    let dev_logical = ctx.sector.bytes_u64();
    if s < dev_logical {
        out.push(finding(
            Severity::Error,
            FindingCode::ExfatSectorBelowLogical,
            i,
            format!("partition {i} (exFAT): the exFAT sector ({s} B) is smaller than the device's logical sector ({dev_logical} B): Linux refuses to mount it; reformat with mkfs.exfat -s {dev_logical}"),
        ));
    }
    out.extend(crate::exfat::align::exfat_alignment(
        i,
        x.fat_start_bytes,
        x.heap_start_bytes,
        u64::from(x.cluster_bytes),
        ctx.e,
        ctx.strict,
    ));
    out
}

/// The `sector-size-guessed` finding: an MBR read in 4096-byte sectors because filesystems
/// are found only there.
pub(crate) fn sector_size_guessed() -> Finding {
    Finding {
        severity: Severity::Info,
        code: FindingCode::SectorSizeGuessed,
        partition: None,
        message: "the MBR's LBAs only make sense in 4096-byte sectors (filesystems found there): read as a 4Kn disk; pass --sector-size to override".into(),
    }
}

/// Whether `verify` (without `--sector-size` or a device that says it) reads the MBR of
/// `plan`'s image in 4096-byte sectors by guessing: a 4Kn MBR layout whose primary
/// partitions hold a filesystem verify recognises by its magic (FAT, ext4, exFAT, F2FS,
/// swap). Without
/// one, only `--sector-size 4096` reads it right ([`plan_findings`] cannot promise more).
#[must_use]
pub fn mbr_sector_guessed(plan: &Plan) -> bool {
    plan.table.kind == TableKind::Mbr
        && plan.sector_bytes == SectorSize::S4096
        && plan.partitions.iter().any(|p| {
            p.in_table
                && !p.logical
                && matches!(
                    p.content,
                    FsKind::Fat(_)
                        | FsKind::Ext4
                        | FsKind::Ext2
                        | FsKind::Ext3
                        | FsKind::Exfat
                        | FsKind::F2fs
                        | FsKind::Swap
                )
        })
}

/// The findings `verify` gives the image built from `plan` (not strict, no device hints,
/// `--erase-block` the plan's; a 4Kn MBR read by guessing, see [`mbr_sector_guessed`]):
/// what `blockwise plan --json` lists under `findings`, from the same
/// `partition_findings` verify uses on what it reads. Partitions left out of the table
/// are not visible to verify and give none.
pub fn plan_findings(plan: &Plan) -> Vec<Finding> {
    let ctx = Context {
        e: plan.erase_block_bytes,
        sector: plan.sector_bytes,
        strict: false,
        device: None,
    };
    let mut out = Vec::new();
    if mbr_sector_guessed(plan) {
        out.push(sector_size_guessed());
    }
    out.extend(hybrid_mbr_findings(plan));
    for p in plan.partitions.iter().filter(|p| p.in_table) {
        out.extend(partition_findings(p, &ctx));
    }
    // In the report's order: `verify` sorts its findings by severity (stable).
    out.sort_by_key(|f| f.severity);
    out
}

/// A GPT plan with `mbr-type` partitions: the findings of the hybrid MBR the table writer
/// makes for it, read back with the parser and judged by the code verify runs.
fn hybrid_mbr_findings(plan: &Plan) -> Vec<Finding> {
    if plan.table.kind != TableKind::Gpt || plan.partitions.iter().all(|p| p.mbr_type.is_none()) {
        return Vec::new();
    }
    let Ok(sectors) = blockwise_ptable::mbr::mbr_sectors(plan) else {
        return Vec::new();
    };
    let Some(Ok(mbr)) = sectors
        .iter()
        .find(|(off, _)| *off == 0)
        .map(|(_, b)| blockwise_ptable::parse_mbr(b, 0))
    else {
        return Vec::new();
    };
    let mut parts: Vec<PartitionPlan> = plan
        .partitions
        .iter()
        .filter(|p| p.in_table)
        .cloned()
        .collect();
    crate::table::gpt::hybrid_findings(&mbr, &mut parts, plan.sector_bytes)
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
