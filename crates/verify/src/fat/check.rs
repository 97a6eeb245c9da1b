//! FAT checks on a parsed volume: size against the partition, alignment of the data area,
//! FAT and clusters to the page and the erase block, sector size against the device, FSInfo
//! and the backup boot sector.

use core::mem::size_of;

use blockwise_fat::raw::FsInfoRaw;
use blockwise_geometry::{
    format_size, BlockSource, FatPlan, FsKind, FsPlan, OtherFs, PartitionPlan, TableKind,
};

use crate::num::{div, is_multiple};
use crate::{fat, read_clamped, FindingCode, Severity, Verifier};

/// Sectors of each FAT copy compared with the first FAT (first and last included).
const FAT_SAMPLES: u64 = 8;
/// Bytes of the root directory searched for the volume label (512 entries).
const ROOT_LABEL_BYTES: u64 = 16 << 10;
/// FAT copies compared (more than two is already a warning).
const MAX_FAT_COPIES: u8 = 4;

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    pub(crate) fn fat(&mut self, p: &mut PartitionPlan) -> Result<(), S::Error> {
        let i = p.index;
        let base = p.start_bytes;
        let boot = read_clamped(self.src, base, 4096)?;
        let vol = match fat::parse_fat(&boot) {
            Ok(v) => v,
            Err(err) => {
                p.content = FsKind::Fat(None);
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: "fat".into(),
                    aligned: None,
                    ..OtherFs::default()
                }));
                self.add(
                    Severity::Error,
                    FindingCode::FatCorrupt,
                    Some(i),
                    format!("partition {i}: FAT boot sector: {err} — the volume cannot be mounted; reformat it (mkfs.fat) or restore the boot sector from its backup (sector 6)"),
                );
                return Ok(());
            }
        };
        let kind = vol.layout;
        let name = kind.name().to_uppercase();
        p.content = FsKind::Fat(Some(kind));
        self.add_issues(
            i,
            &name,
            vol.issues.iter().map(|x| (x.code(), x.is_error(), x)),
        );
        let bps = vol.sector_bytes();
        let cluster = vol.cluster_bytes();
        let fat_start =
            base.saturating_add(u64::from(vol.bpb.reserved_sectors).saturating_mul(bps));
        let data_start = base.saturating_add(vol.first_data_sector.saturating_mul(bps));
        if vol.volume_bytes() > p.size_bytes {
            self.add(
                Severity::Error,
                FindingCode::FatLargerThanPartition,
                Some(i),
                format!(
                    "partition {i} ({name}): the volume claims {} sectors ({}) but the partition holds {}: writes near the end land outside it; reformat to the partition size",
                    vol.total_sectors,
                    format_size(vol.volume_bytes()),
                    format_size(p.size_bytes)
                ),
            );
        }
        if kind == fat::FatType::Fat32 {
            self.fat32_extras(i, base, &vol, &boot)?;
        }
        self.fat_tables(i, &name, fat_start, &vol)?;
        if self.r.table.kind != TableKind::None {
            let hidden = u64::from(vol.bpb.hidden_sectors);
            let ok = [bps, 512, self.sector.bytes_u64()]
                .iter()
                .any(|&u| div(base, u) == hidden && is_multiple(base, u));
            if !ok {
                self.add(
                    Severity::Info,
                    FindingCode::FatHiddenSectors,
                    Some(i),
                    format!("partition {i} ({name}): HiddSec is {hidden} but the partition starts at sector {}: some boot loaders locate files with it", div(base, bps)),
                );
            }
        }
        let label = self.fat_root_label(base, fat_start, data_start, &vol)?;
        let mut found = FatPlan {
            kind,
            label: label.or_else(|| vol.bpb.label.clone()),
            sector_bytes: vol.bpb.bytes_per_sector.into(),
            cluster_bytes: u32::try_from(cluster).unwrap_or(u32::MAX),
            reserved_sectors: vol.bpb.reserved_sectors.into(),
            fat_count: vol.bpb.fat_count,
            fat_sectors: u32::try_from(vol.fat_sectors).unwrap_or(u32::MAX),
            cluster_count: u32::try_from(vol.clusters).unwrap_or(u32::MAX),
            fat_start_bytes: fat_start,
            data_start_bytes: data_start,
            volume_id: vol.bpb.volume_id.unwrap_or(0),
            // The OEM name syslinux's installer writes with its boot sector.
            bootloader: crate::bytes::has(&boot, 3, b"SYSLINUX").then(|| "syslinux".into()),
            aligned: false,
            notes: Vec::new(),
        };
        // The planner's rule; the geometry's findings come from align::partition_findings.
        found.aligned = found.alignment_holds(self.e);
        p.filesystem = Some(FsPlan::Fat(found));
        Ok(())
    }

    /// The volume label of the root directory (what Linux and Windows show; the boot
    /// sector's copy is the fallback), from at most [`ROOT_LABEL_BYTES`] of its start.
    fn fat_root_label(
        &self,
        base: u64,
        fat_start: u64,
        data_start: u64,
        vol: &fat::FatVolume,
    ) -> Result<Option<String>, S::Error> {
        let bps = vol.sector_bytes();
        let (at, len) = if vol.layout == fat::FatType::Fat32 {
            let rc = u64::from(vol.bpb.root_cluster);
            if rc < 2 || rc >= vol.clusters.saturating_add(2) {
                return Ok(None);
            }
            let cluster = vol.cluster_bytes();
            (
                data_start.saturating_add(rc.saturating_sub(2).saturating_mul(cluster)),
                cluster,
            )
        } else {
            let fats = u64::from(vol.bpb.fat_count).saturating_mul(vol.fat_sectors);
            (
                fat_start.saturating_add(fats.saturating_mul(bps)),
                vol.root_dir_sectors.saturating_mul(bps),
            )
        };
        if at < base {
            return Ok(None);
        }
        let len = usize::try_from(len.min(ROOT_LABEL_BYTES)).unwrap_or(0);
        let dir = read_clamped(self.src, at, len)?;
        Ok(crate::label::root_dir_label(&dir))
    }

    /// The first two FAT entries and the copies of the FAT, from at most [`FAT_SAMPLES`]
    /// sectors of each copy spread across it (bounded reads: a few KiB whatever the size).
    fn fat_tables(
        &mut self,
        i: u32,
        name: &str,
        fat_start: u64,
        vol: &fat::FatVolume,
    ) -> Result<(), S::Error> {
        let bps = vol.sector_bytes();
        let len = usize::try_from(bps).unwrap_or(512);
        let first = read_clamped(self.src, fat_start, len)?;
        if first.len() < len {
            // Truncated: partition-past-end / fat-larger-than-partition say so.
            return Ok(());
        }
        let media = vol.bpb.media;
        let (e0, e1) = fat::reserved_entries(vol.layout, &first);
        let (want0, flags, eoc, width) = match vol.layout {
            fat::FatType::Fat12 => (0x0f00 | u32::from(media), 0, 0x0ff8, 5),
            fat::FatType::Fat16 => (0xff00 | u32::from(media), 0xc000, 0xfff8, 6),
            fat::FatType::Fat32 => (0x0fff_ff00 | u32::from(media), 0x0c00_0000, 0x0fff_fff8, 10),
        };
        if e0 != want0 {
            self.add(
                Severity::Warning,
                FindingCode::FatEntry0Media,
                Some(i),
                format!("partition {i} ({name}): FAT[0] (byte {fat_start}) is {e0:#0w$x} but the BPB's Media (offset 0x15) is {media:#04x}, so it should be {want0:#0w$x} (media byte, other bits set) — fsck.fat and some drivers treat the FAT as damaged; fsck.fat can rewrite it", w = width),
            );
        }
        // FAT16/32 keep the clean-shutdown and no-error flags in FAT[1]'s top bits.
        if e1 | flags < eoc {
            self.add(
                Severity::Warning,
                FindingCode::FatEntry1Eoc,
                Some(i),
                format!("partition {i} ({name}): FAT[1] (byte {}) is {e1:#0w$x}, not an end-of-chain mark ({eoc:#0w$x} or above, ignoring the dirty flags) — fsck.fat reports the FAT as damaged", fat_start.saturating_add(if vol.layout == fat::FatType::Fat32 { 4 } else { 2 }) , w = width),
            );
        }
        let mirrored = vol.bpb.ext_flags & 0x80 == 0;
        let copies = vol.bpb.fat_count.min(MAX_FAT_COPIES);
        if copies < 2 || !mirrored {
            return Ok(());
        }
        let n = vol.fat_sectors;
        let samples = n.min(FAT_SAMPLES);
        let fat_bytes = n.saturating_mul(bps);
        for copy in 1..copies {
            let copy_start = fat_start.saturating_add(fat_bytes.saturating_mul(u64::from(copy)));
            for k in 0..samples {
                // Evenly spread: the first and the last sector always.
                let sector = n
                    .saturating_sub(1)
                    .saturating_mul(k)
                    .checked_div(samples.saturating_sub(1))
                    .unwrap_or(0);
                let off = sector.saturating_mul(bps);
                let a = if sector == 0 {
                    first.clone()
                } else {
                    read_clamped(self.src, fat_start.saturating_add(off), len)?
                };
                let b = read_clamped(self.src, copy_start.saturating_add(off), len)?;
                if a.len() < len || b.len() < len {
                    break;
                }
                if a != b {
                    let at = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(0);
                    self.add(
                        Severity::Warning,
                        FindingCode::FatCopiesDiffer,
                        Some(i),
                        format!("partition {i} ({name}): FAT copy {} differs from the first FAT in sector {sector} of the FAT (byte {} of the copy, at {}) — one of them is stale; fsck.fat -n reports \"FATs differ\", and which one a driver reads is undefined; run fsck.fat", u64::from(copy).saturating_add(1), off.saturating_add(u64::try_from(at).unwrap_or(0)), copy_start.saturating_add(off).saturating_add(u64::try_from(at).unwrap_or(0))),
                    );
                    break;
                }
            }
        }
        Ok(())
    }

    fn fat32_extras(
        &mut self,
        i: u32,
        base: u64,
        vol: &fat::FatVolume,
        boot: &[u8],
    ) -> Result<(), S::Error> {
        let bps = vol.sector_bytes();
        let rsvd = vol.bpb.reserved_sectors;
        let fsi = vol.bpb.fs_info_sector;
        if fsi != 0 && fsi != 0xffff && fsi < rsvd {
            let s = read_clamped(
                self.src,
                base.saturating_add(u64::from(fsi).saturating_mul(bps)),
                size_of::<FsInfoRaw>(),
            )?;
            if let Err(pb) = fat::check_fsinfo(&s, vol.clusters) {
                self.add(
                    Severity::Warning,
                    FindingCode::FatFsinfo,
                    Some(i),
                    format!("partition {i} (FAT32): {pb} — free-space reports are wrong until fsck.fat repairs it"),
                );
            }
        }
        let bk = vol.bpb.backup_boot_sector;
        if bk == 0 || bk == 0xffff {
            self.add(
                Severity::Info,
                FindingCode::FatNoBackupBoot,
                Some(i),
                format!("partition {i} (FAT32): no backup boot sector (BkBootSec = {bk}); a damaged boot sector cannot be recovered"),
            );
        } else if bk < rsvd {
            let b = read_clamped(
                self.src,
                base.saturating_add(u64::from(bk).saturating_mul(bps)),
                512,
            )?;
            if b.get(..512) != boot.get(..512) {
                self.add(
                    Severity::Warning,
                    FindingCode::FatBackupBootDiffers,
                    Some(i),
                    format!("partition {i} (FAT32): the backup boot sector (sector {bk}) differs from the boot sector — recovery from it would restore a different geometry; fsck.fat can copy one over the other"),
                );
            }
        }
        Ok(())
    }
}
