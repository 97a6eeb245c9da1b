//! Boot sector (BPB) and FSInfo parsing. The layout is in the [module docs](super).

use core::mem::offset_of;

use blockwise_fat::raw::{
    BpbRaw, Fat16ExtRaw, Fat32ExtRaw, FsInfoRaw, BOOT_SIGNATURE, BOOT_SIGNATURE_OFFSET,
    EXT_BOOT_SIG, EXT_BOOT_SIG_VOL_ID_ONLY, FSI_LEAD_SIG, FSI_STRUC_SIG, FSI_TRAIL_SIG,
    FSI_UNKNOWN,
};
use zerocopy::FromBytes;

use crate::bytes::{read_zero_extended, text};
use crate::FindingCode;

pub use blockwise_geometry::FatType;

/// The boot sector fields, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bpb {
    /// OEM name at 0x03.
    pub oem: Option<String>,
    /// BytsPerSec (0x0B).
    pub bytes_per_sector: u16,
    /// SecPerClus (0x0D).
    pub sectors_per_cluster: u8,
    /// RsvdSecCnt (0x0E).
    pub reserved_sectors: u16,
    /// NumFATs (0x10).
    pub fat_count: u8,
    /// RootEntCnt (0x11).
    pub root_entries: u16,
    /// TotSec16 (0x13).
    pub total_sectors_16: u16,
    /// Media (0x15).
    pub media: u8,
    /// FATSz16 (0x16).
    pub fat_size_16: u16,
    /// HiddSec (0x1C).
    pub hidden_sectors: u32,
    /// TotSec32 (0x20).
    pub total_sectors_32: u32,
    /// FATSz32 (0x24, FAT32 layout only).
    pub fat_size_32: u32,
    /// RootClus (0x2C, FAT32 only).
    pub root_cluster: u32,
    /// FSInfo sector (0x30, FAT32 only).
    pub fs_info_sector: u16,
    /// BkBootSec (0x32, FAT32 only).
    pub backup_boot_sector: u16,
    /// ExtFlags (0x28, FAT32 only): bit 7 set = mirroring off, only FAT `bits 0-3` is active.
    pub ext_flags: u16,
    /// Volume ID, when the extended boot signature 0x29 is present.
    pub volume_id: Option<u32>,
    /// Volume label (BPB copy), `None` for `NO NAME` or absent.
    pub label: Option<String>,
    /// `55 AA` at 510.
    pub boot_signature: bool,
}

/// A parsed FAT volume: the BPB and the geometry derived from it (in logical sectors of
/// `bytes_per_sector`, relative to the volume start).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FatVolume {
    /// The raw fields.
    pub bpb: Bpb,
    /// The layout of the BPB: FAT32 when `FATSz16 == 0`.
    pub layout: FatType,
    /// The type by cluster count (Microsoft's rule).
    pub kind: FatType,
    /// TotSec.
    pub total_sectors: u64,
    /// FATSz.
    pub fat_sectors: u64,
    /// Sectors of the fixed FAT12/16 root directory.
    pub root_dir_sectors: u64,
    /// First sector of the data area (cluster 2).
    pub first_data_sector: u64,
    /// Number of data clusters.
    pub clusters: u64,
    /// Problems that do not stop the volume from being understood.
    pub issues: Vec<FatIssue>,
}

impl FatVolume {
    /// Logical sector size in bytes.
    #[must_use]
    pub fn sector_bytes(&self) -> u64 {
        u64::from(self.bpb.bytes_per_sector)
    }

    /// Cluster size in bytes.
    #[must_use]
    pub fn cluster_bytes(&self) -> u64 {
        self.sector_bytes()
            .saturating_mul(u64::from(self.bpb.sectors_per_cluster))
    }

    /// Bytes the volume claims.
    #[must_use]
    pub fn volume_bytes(&self) -> u64 {
        self.total_sectors.saturating_mul(self.sector_bytes())
    }
}

/// Why bytes are not a usable FAT boot sector. Each names the field and its offset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FatError {
    /// Fewer than 512 bytes.
    #[error("boot sector truncated: {len} bytes, 512 needed")]
    Truncated {
        /// Bytes available.
        len: usize,
    },
    /// Not a FAT boot sector at all (no jump instruction, NTFS/exFAT OEM name, …).
    #[error("not a FAT boot sector")]
    NotFat,
    /// BytsPerSec not a power of two in 512..=4096.
    #[error("BytsPerSec (offset 0x0B) is {value}; it must be 512, 1024, 2048 or 4096")]
    BytesPerSector {
        /// Value found.
        value: u16,
    },
    /// SecPerClus 0 or not a power of two.
    #[error("SecPerClus (offset 0x0D) is {value}; it must be a power of two from 1 to 128")]
    SectorsPerCluster {
        /// Value found.
        value: u8,
    },
    /// RsvdSecCnt 0.
    #[error("RsvdSecCnt (offset 0x0E) is 0; the boot sector itself is reserved, so at least 1")]
    ReservedSectors,
    /// NumFATs 0.
    #[error("NumFATs (offset 0x10) is 0; a FAT volume needs at least one FAT")]
    FatCount,
    /// Media byte invalid.
    #[error("Media (offset 0x15) is 0x{value:02x}; only 0xF0 and 0xF8..=0xFF are valid (Linux refuses others)")]
    Media {
        /// Value found.
        value: u8,
    },
    /// Both FAT sizes 0.
    #[error("FATSz16 (offset 0x16) and FATSz32 (offset 0x24) are both 0")]
    FatSize,
    /// Both total sector counts 0.
    #[error("TotSec16 (offset 0x13) and TotSec32 (offset 0x20) are both 0")]
    TotalSectors,
    /// RootEntCnt×32 not a multiple of the sector size.
    #[error("RootEntCnt (offset 0x11) is {value}: {value}×32 bytes is not a whole number of {bps}-byte sectors")]
    RootEntries {
        /// Value found.
        value: u16,
        /// BytsPerSec.
        bps: u16,
    },
    /// Reserved + FATs + root directory do not leave room for data.
    #[error("reserved sectors, FATs and root directory take {meta} sectors but the volume has only {total}")]
    NoDataArea {
        /// Metadata sectors.
        meta: u64,
        /// TotSec.
        total: u64,
    },
    /// Fewer sectors than one cluster in the data area.
    #[error("the data area holds no complete cluster")]
    NoClusters,
}

/// A problem in an otherwise understood FAT volume.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FatIssue {
    /// The BPB layout and the cluster count disagree on the type.
    #[error("the BPB is laid out as {} but it has {clusters} clusters, which Windows and UEFI firmware read as {} (Microsoft's rule: FAT12 < 4085 ≤ FAT16 < 65525 ≤ FAT32) — firmware may not read this volume; reformat with smaller clusters or a type that fits", .layout.name().to_uppercase(), .kind.name().to_uppercase())]
    ClusterCountVsType {
        /// BPB layout.
        layout: FatType,
        /// Type by cluster count.
        kind: FatType,
        /// Clusters.
        clusters: u64,
    },
    /// More clusters than FAT32 can address.
    #[error("{clusters} clusters exceed the FAT32 maximum of 268435445 — use larger clusters")]
    TooManyClusters {
        /// Clusters.
        clusters: u64,
    },
    /// FAT too small for the clusters.
    #[error("the FAT ({fat_sectors} sectors) has room for {entries} entries but {clusters} clusters need {} — the last clusters cannot be allocated; fsck.fat will complain", .clusters.saturating_add(2))]
    FatTooSmall {
        /// FATSz.
        fat_sectors: u64,
        /// Entries that fit.
        entries: u64,
        /// Clusters.
        clusters: u64,
    },
    /// FAT32 BPB with a FAT12/16-only field set.
    #[error("FAT32 BPB has {field} = {value} (must be 0)")]
    Fat32Field {
        /// Field name.
        field: &'static str,
        /// Value.
        value: u32,
    },
    /// RootClus outside the cluster range.
    #[error("RootClus (offset 0x2C) is {value}, outside clusters 2..={max} — the root directory is unreadable")]
    RootCluster {
        /// Value.
        value: u32,
        /// Largest valid cluster number.
        max: u64,
    },
    /// FSInfo or BkBootSec outside the reserved region.
    #[error(
        "{field} is sector {value} but only {reserved} sectors are reserved — it overlaps the FAT"
    )]
    ReservedLocation {
        /// Field name.
        field: &'static str,
        /// Value.
        value: u16,
        /// RsvdSecCnt.
        reserved: u16,
    },
    /// More than two FATs.
    #[error("{count} FATs: fsck.fat and many firmwares support only 1 or 2")]
    ManyFats {
        /// NumFATs.
        count: u8,
    },
    /// No `55 AA`.
    #[error("no 55 AA signature at byte 510: Windows and most firmware ignore this volume")]
    NoBootSignature,
}

impl FatIssue {
    /// Stable kebab-case code.
    #[must_use]
    pub fn code(&self) -> FindingCode {
        match self {
            FatIssue::ClusterCountVsType { .. } => FindingCode::FatClusterCount,
            FatIssue::TooManyClusters { .. } => FindingCode::FatTooManyClusters,
            FatIssue::FatTooSmall { .. } => FindingCode::FatTooSmall,
            FatIssue::Fat32Field { .. } => FindingCode::Fat32Field,
            FatIssue::RootCluster { .. } => FindingCode::FatRootCluster,
            FatIssue::ReservedLocation { .. } => FindingCode::FatReservedLocation,
            FatIssue::ManyFats { .. } => FindingCode::FatManyFats,
            FatIssue::NoBootSignature => FindingCode::FatBootSignature,
        }
    }

    /// True when a reader will get the volume wrong (an error, not a warning).
    #[must_use]
    pub fn is_error(&self) -> bool {
        matches!(
            self,
            FatIssue::ClusterCountVsType { .. }
                | FatIssue::TooManyClusters { .. }
                | FatIssue::FatTooSmall { .. }
                | FatIssue::RootCluster { .. }
                | FatIssue::ReservedLocation { .. }
        )
    }
}

/// A boot sector through the raw layouts: the BPB and both readings of the tail after it
/// (the FAT32 one applies when `BPB_FATSz16` is 0).
struct Boot {
    bpb: BpbRaw,
    fat16: Fat16ExtRaw,
    fat32: Fat32ExtRaw,
    signature: bool,
}

impl Boot {
    /// `None` when `sector` is shorter than 512 bytes.
    fn read(sector: &[u8]) -> Option<Boot> {
        let sector = sector.get(..512)?;
        let (bpb, tail) = BpbRaw::read_from_prefix(sector).ok()?;
        let (fat16, _) = Fat16ExtRaw::read_from_prefix(tail).ok()?;
        let (fat32, _) = Fat32ExtRaw::read_from_prefix(tail).ok()?;
        let signature = sector
            .get(BOOT_SIGNATURE_OFFSET..)
            .is_some_and(|s| s.starts_with(&BOOT_SIGNATURE));
        Some(Boot {
            bpb,
            fat16,
            fat32,
            signature,
        })
    }

    fn looks_like_fat(&self) -> bool {
        let b = &self.bpb;
        if matches!(&b.bs_oem_name, b"NTFS    " | b"EXFAT   ") {
            return false;
        }
        if !matches!(b.bs_jmp_boot, [0xeb, _, 0x90] | [0xe9, _, _]) {
            return false;
        }
        let typed = self.fat16.bs_fil_sys_type.starts_with(b"FAT")
            || self.fat32.bs_fil_sys_type.starts_with(b"FAT32");
        let plausible = matches!(b.bpb_byts_per_sec.get(), 512 | 1024 | 2048 | 4096)
            && b.bpb_sec_per_clus.is_power_of_two()
            && b.bpb_rsvd_sec_cnt.get() > 0
            && matches!(b.bpb_num_fats, 1 | 2)
            && is_valid_media(b.bpb_media)
            && (b.bpb_tot_sec16.get() != 0 || b.bpb_tot_sec32.get() != 0);
        typed || plausible
    }
}

/// Is this sector meant to be a FAT boot sector? (A jump instruction and either a `FAT`
/// type string or plausible BPB numbers; NTFS and exFAT excluded.) Used to tell a
/// superfloppy from an MBR before trusting partition entries.
#[must_use]
pub fn looks_like_fat(sector: &[u8]) -> bool {
    Boot::read(sector).is_some_and(|b| b.looks_like_fat())
}

fn is_valid_media(m: u8) -> bool {
    m == 0xf0 || m >= 0xf8
}

/// Parses a boot sector (at least the first 512 bytes of the volume).
pub fn parse_fat(sector: &[u8]) -> Result<FatVolume, FatError> {
    let Some(boot) = Boot::read(sector) else {
        return Err(FatError::Truncated { len: sector.len() });
    };
    if !boot.looks_like_fat() {
        return Err(FatError::NotFat);
    }
    let raw = &boot.bpb;
    let bps = raw.bpb_byts_per_sec.get();
    if !matches!(bps, 512 | 1024 | 2048 | 4096) {
        return Err(FatError::BytesPerSector { value: bps });
    }
    let spc = raw.bpb_sec_per_clus;
    if !spc.is_power_of_two() {
        return Err(FatError::SectorsPerCluster { value: spc });
    }
    let rsvd = raw.bpb_rsvd_sec_cnt.get();
    if rsvd == 0 {
        return Err(FatError::ReservedSectors);
    }
    let nfats = raw.bpb_num_fats;
    if nfats == 0 {
        return Err(FatError::FatCount);
    }
    let media = raw.bpb_media;
    if !is_valid_media(media) {
        return Err(FatError::Media { value: media });
    }
    let root_entries = raw.bpb_root_ent_cnt.get();
    let fat16 = raw.bpb_fat_sz16.get();
    let fat32 = boot.fat32.bpb_fat_sz32.get();
    let layout32 = fat16 == 0;
    let fat_sectors = if layout32 {
        u64::from(fat32)
    } else {
        u64::from(fat16)
    };
    if fat_sectors == 0 {
        return Err(FatError::FatSize);
    }
    let ts16 = raw.bpb_tot_sec16.get();
    let ts32 = raw.bpb_tot_sec32.get();
    let total = if ts16 != 0 {
        u64::from(ts16)
    } else {
        u64::from(ts32)
    };
    if total == 0 {
        return Err(FatError::TotalSectors);
    }
    let bps64 = u64::from(bps);
    let root_bytes = u64::from(root_entries).saturating_mul(32);
    if root_bytes.checked_rem(bps64) != Some(0) {
        return Err(FatError::RootEntries {
            value: root_entries,
            bps,
        });
    }
    let root_dir_sectors = root_bytes.checked_div(bps64).unwrap_or(0);
    let meta = u64::from(rsvd)
        .saturating_add(u64::from(nfats).saturating_mul(fat_sectors))
        .saturating_add(root_dir_sectors);
    if meta >= total {
        return Err(FatError::NoDataArea { meta, total });
    }
    let data = total.saturating_sub(meta);
    let clusters = data.checked_div(u64::from(spc)).unwrap_or(0);
    if clusters == 0 {
        return Err(FatError::NoClusters);
    }
    let (boot_sig, vol_id, vol_lab) = if layout32 {
        let e = &boot.fat32;
        (e.bs_boot_sig, e.bs_vol_id.get(), &e.bs_vol_lab)
    } else {
        let e = &boot.fat16;
        (e.bs_boot_sig, e.bs_vol_id.get(), &e.bs_vol_lab)
    };
    let has_ext = matches!(boot_sig, EXT_BOOT_SIG | EXT_BOOT_SIG_VOL_ID_ONLY);
    let label = if boot_sig == EXT_BOOT_SIG {
        crate::label::oem_label(vol_lab)
    } else {
        None
    };
    let ext32 = &boot.fat32;
    let bpb = Bpb {
        oem: text(&raw.bs_oem_name),
        bytes_per_sector: bps,
        sectors_per_cluster: spc,
        reserved_sectors: rsvd,
        fat_count: nfats,
        root_entries,
        total_sectors_16: ts16,
        media,
        fat_size_16: fat16,
        hidden_sectors: raw.bpb_hidd_sec.get(),
        total_sectors_32: ts32,
        fat_size_32: fat32,
        root_cluster: if layout32 {
            ext32.bpb_root_clus.get()
        } else {
            0
        },
        fs_info_sector: if layout32 { ext32.bpb_fs_info.get() } else { 0 },
        backup_boot_sector: if layout32 {
            ext32.bpb_bk_boot_sec.get()
        } else {
            0
        },
        ext_flags: if layout32 {
            ext32.bpb_ext_flags.get()
        } else {
            0
        },
        volume_id: has_ext.then_some(vol_id),
        label,
        boot_signature: boot.signature,
    };
    let kind = FatType::from_cluster_count(clusters);
    let layout = if layout32 {
        FatType::Fat32
    } else if kind == FatType::Fat12 {
        FatType::Fat12
    } else {
        FatType::Fat16
    };
    let mut issues = Vec::new();
    if (layout == FatType::Fat32) != (kind == FatType::Fat32) {
        issues.push(FatIssue::ClusterCountVsType {
            layout,
            kind,
            clusters,
        });
    }
    if clusters > FatType::Fat32.max_clusters() {
        issues.push(FatIssue::TooManyClusters { clusters });
    }
    let entry_bits = layout.bits();
    let entries = fat_sectors
        .saturating_mul(bps64)
        .saturating_mul(8)
        .checked_div(entry_bits)
        .unwrap_or(0);
    if entries < clusters.saturating_add(2) {
        issues.push(FatIssue::FatTooSmall {
            fat_sectors,
            entries,
            clusters,
        });
    }
    if layout32 {
        if root_entries != 0 {
            issues.push(FatIssue::Fat32Field {
                field: "RootEntCnt (offset 0x11)",
                value: u32::from(root_entries),
            });
        }
        if ts16 != 0 {
            issues.push(FatIssue::Fat32Field {
                field: "TotSec16 (offset 0x13)",
                value: u32::from(ts16),
            });
        }
        let max = clusters.saturating_add(1);
        if bpb.root_cluster < 2 || u64::from(bpb.root_cluster) > max {
            issues.push(FatIssue::RootCluster {
                value: bpb.root_cluster,
                max,
            });
        }
        for (field, value) in [
            ("FSInfo (offset 0x30)", bpb.fs_info_sector),
            ("BkBootSec (offset 0x32)", bpb.backup_boot_sector),
        ] {
            if value != 0 && value != 0xffff && value >= rsvd {
                issues.push(FatIssue::ReservedLocation {
                    field,
                    value,
                    reserved: rsvd,
                });
            }
        }
    }
    if nfats > 2 {
        issues.push(FatIssue::ManyFats { count: nfats });
    }
    if !bpb.boot_signature {
        issues.push(FatIssue::NoBootSignature);
    }
    Ok(FatVolume {
        bpb,
        layout,
        kind,
        total_sectors: total,
        fat_sectors,
        root_dir_sectors,
        first_data_sector: meta,
        clusters,
        issues,
    })
}

/// FAT\[0\] and FAT\[1\] from the first bytes of a FAT (FAT32 entries without their top 4
/// bits); zeros for bytes missing.
#[must_use]
pub fn reserved_entries(layout: FatType, fat: &[u8]) -> (u32, u32) {
    let b = |k: usize| u32::from(fat.get(k).copied().unwrap_or(0));
    match layout {
        FatType::Fat12 => (b(0) | (b(1) & 0x0f) << 8, b(1) >> 4 | b(2) << 4),
        FatType::Fat16 => (b(0) | b(1) << 8, b(2) | b(3) << 8),
        FatType::Fat32 => (
            (b(0) | b(1) << 8 | b(2) << 16 | b(3) << 24) & 0x0fff_ffff,
            (b(4) | b(5) << 8 | b(6) << 16 | b(7) << 24) & 0x0fff_ffff,
        ),
    }
}

/// What is wrong with an FSInfo sector.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FsInfoProblem {
    /// A signature is wrong.
    #[error(
        "FSInfo {field} signature (offset {offset:#x}) is {found:#010x}, expected {expected:#010x}"
    )]
    Signature {
        /// Which signature.
        field: &'static str,
        /// Offset in the sector.
        offset: usize,
        /// Found.
        found: u32,
        /// Expected.
        expected: u32,
    },
    /// Free count larger than the cluster count.
    #[error("FSInfo free cluster count {free} exceeds the {clusters} clusters of the volume (fsck.fat -a fixes it)")]
    FreeCount {
        /// Stored count.
        free: u32,
        /// Clusters.
        clusters: u64,
    },
}

/// Checks an FSInfo sector (only its first 512 bytes are used, whatever the sector size;
/// bytes missing from a shorter slice read as zero).
pub fn check_fsinfo(sector: &[u8], clusters: u64) -> Result<(), FsInfoProblem> {
    let fsi: FsInfoRaw = read_zero_extended(sector);
    for (field, offset, found, expected) in [
        (
            "lead",
            offset_of!(FsInfoRaw, fsi_lead_sig),
            fsi.fsi_lead_sig,
            FSI_LEAD_SIG,
        ),
        (
            "structure",
            offset_of!(FsInfoRaw, fsi_struc_sig),
            fsi.fsi_struc_sig,
            FSI_STRUC_SIG,
        ),
        (
            "trail",
            offset_of!(FsInfoRaw, fsi_trail_sig),
            fsi.fsi_trail_sig,
            FSI_TRAIL_SIG,
        ),
    ] {
        let found = found.get();
        if found != expected {
            return Err(FsInfoProblem::Signature {
                field,
                offset,
                found,
                expected,
            });
        }
    }
    let free = fsi.fsi_free_count.get();
    if free != FSI_UNKNOWN && u64::from(free) > clusters {
        return Err(FsInfoProblem::FreeCount { free, clusters });
    }
    Ok(())
}

#[cfg(test)]
#[expect(clippy::indexing_slicing, clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    /// A FAT32 boot sector like `mkfs.fat -F 32 -s 8` on 1 GiB (2097152 sectors).
    fn fat32_sector() -> Vec<u8> {
        let mut b = crate::tests::fat32(2_097_152, 32, 2048, 8);
        b[3..11].copy_from_slice(b"mkfs.fat");
        b[0x47..0x52].copy_from_slice(b"BOOT       ");
        b
    }

    fn check(mutate: impl Fn(&mut Vec<u8>), expected: Result<(), FatError>) {
        let mut b = fat32_sector();
        mutate(&mut b);
        assert_eq!(parse_fat(&b).map(|_| ()), expected);
    }

    #[test]
    fn golden_fat32() {
        let v = parse_fat(&fat32_sector()).unwrap();
        assert_eq!(v.kind, FatType::Fat32);
        assert_eq!(v.first_data_sector, 32 + 2 * 2048);
        assert_eq!(v.clusters, (2_097_152 - 4128) / 8);
        assert_eq!(v.bpb.label.as_deref(), Some("BOOT"));
        assert!(v.issues.is_empty(), "{:?}", v.issues);
    }

    #[test]
    fn negative_fields() {
        check(
            |b| b[0x0d] = 0,
            Err(FatError::SectorsPerCluster { value: 0 }),
        );
        check(
            |b| b[0x0d] = 3,
            Err(FatError::SectorsPerCluster { value: 3 }),
        );
        check(
            |b| b[0x0b..0x0d].copy_from_slice(&100u16.to_le_bytes()),
            Err(FatError::BytesPerSector { value: 100 }),
        );
        check(|b| b[0x0e..0x10].fill(0), Err(FatError::ReservedSectors));
        check(|b| b[0x10] = 0, Err(FatError::FatCount));
        check(|b| b[0x15] = 0x12, Err(FatError::Media { value: 0x12 }));
        check(|b| b[0x24..0x28].fill(0), Err(FatError::FatSize));
        check(|b| b[0x20..0x24].fill(0), Err(FatError::TotalSectors));
        check(
            |b| b[0x24..0x28].copy_from_slice(&u32::MAX.to_le_bytes()),
            Err(FatError::NoDataArea {
                meta: 32 + 2 * u64::from(u32::MAX),
                total: 2_097_152,
            }),
        );
        check(|b| b[0] = 0, Err(FatError::NotFat));
        assert_eq!(
            parse_fat(&[0u8; 100]),
            Err(FatError::Truncated { len: 100 })
        );
    }

    #[test]
    fn cluster_count_rule() {
        let mut b = fat32_sector();
        b[0x0d] = 64; // 1 GiB with 32 KiB clusters: 32 704 clusters, FAT32 layout
        let v = parse_fat(&b).unwrap();
        assert_eq!(v.kind, FatType::Fat16);
        assert_eq!(
            v.issues.first().map(|i| i.code().as_str()),
            Some("fat-cluster-count")
        );
        assert_eq!(FatType::from_cluster_count(4084), FatType::Fat12);
        assert_eq!(FatType::from_cluster_count(4085), FatType::Fat16);
        assert_eq!(FatType::from_cluster_count(65524), FatType::Fat16);
        assert_eq!(FatType::from_cluster_count(65525), FatType::Fat32);
    }

    #[test]
    fn reserved_entries_by_type() {
        // mkfs.fat: FAT12 F8 FF FF, FAT16 F8 FF FF FF, FAT32 F8 FF FF 0F FF FF FF 0F.
        assert_eq!(
            reserved_entries(FatType::Fat12, &[0xf8, 0xff, 0xff]),
            (0xff8, 0xfff)
        );
        assert_eq!(
            reserved_entries(FatType::Fat16, &[0xf8, 0xff, 0xff, 0x7f]),
            (0xfff8, 0x7fff)
        );
        assert_eq!(
            reserved_entries(
                FatType::Fat32,
                &[0xf8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf7]
            ),
            (0x0fff_fff8, 0x07ff_ffff)
        );
        assert_eq!(reserved_entries(FatType::Fat32, &[0xf0]), (0xf0, 0));
    }

    #[test]
    fn fsinfo() {
        let mut s = vec![0u8; 512];
        s[0..4].copy_from_slice(&0x4161_5252u32.to_le_bytes());
        s[0x1e4..0x1e8].copy_from_slice(&0x6141_7272u32.to_le_bytes());
        s[0x1e8..0x1ec].copy_from_slice(&10u32.to_le_bytes());
        s[0x1fc..0x200].copy_from_slice(&0xaa55_0000u32.to_le_bytes());
        assert_eq!(check_fsinfo(&s, 100), Ok(()));
        assert!(matches!(
            check_fsinfo(&s, 5),
            Err(FsInfoProblem::FreeCount { .. })
        ));
        s[0] = 0;
        assert!(matches!(
            check_fsinfo(&s, 100),
            Err(FsInfoProblem::Signature { field: "lead", .. })
        ));
    }
}
