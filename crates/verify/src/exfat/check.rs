//! exFAT checks on a parsed volume: both boot regions, size against the partition, the FAT's
//! first entries, the root directory's bitmap, up-case table (checksum) and label, and the
//! alignment of the FAT and the cluster heap to the page and the erase block.

use blockwise_exfat::raw::{table_checksum, FAT_EOC, FAT_MEDIA};
use blockwise_geometry::{
    format_size, BlockSource, ExfatPlan, FsKind, FsPlan, Guid, OtherFs, PartitionPlan,
};

use crate::num::div;
use crate::{exfat, read_clamped, FindingCode, Severity, Verifier};

/// Bytes of the root directory read (its first cluster, at most this much).
const ROOT_READ: u64 = 64 << 10;
/// Largest up-case table checked (the recommended one is 5836 bytes; a full one 128 KiB).
const UPCASE_MAX: u64 = 128 << 10;

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    pub(crate) fn exfat(&mut self, p: &mut PartitionPlan) -> Result<(), S::Error> {
        let i = p.index;
        let base = p.start_bytes;
        p.content = FsKind::Exfat;
        let head = read_clamped(self.src, base, 512)?;
        let vol = match exfat::parse_exfat(&head) {
            Ok(v) => v,
            Err(err) => {
                p.filesystem = Some(FsPlan::Other(OtherFs {
                    kind: "exfat".into(),
                    aligned: None,
                    ..OtherFs::default()
                }));
                self.add(
                    Severity::Error,
                    FindingCode::ExfatCorrupt,
                    Some(i),
                    format!("partition {i}: exFAT boot sector: {err} — the volume cannot be mounted; fsck.exfat can restore it from the backup boot region (sector 12)"),
                );
                return Ok(());
            }
        };
        let name = "exFAT";
        self.add_issues(
            i,
            name,
            vol.issues.iter().map(|x| (x.code(), x.is_error(), x)),
        );
        let s = vol.sector_bytes;
        let e = self.e;
        // Both boot regions: 24 sectors, at most 96 KiB.
        let regions = read_clamped(
            self.src,
            base,
            usize::try_from(s.saturating_mul(24)).unwrap_or(0),
        )?;
        let main_len = usize::try_from(s.saturating_mul(12)).unwrap_or(usize::MAX);
        let main = regions.get(..main_len).unwrap_or_default();
        let backup = regions.get(main_len..).unwrap_or_default();
        if let Err(pb) = exfat::check_region(main, s) {
            self.add(
                Severity::Error,
                FindingCode::ExfatBootChecksum,
                Some(i),
                format!("partition {i} ({name}): main boot region: {pb} — Windows and Linux refuse to mount it; fsck.exfat can restore it from the backup"),
            );
        }
        let same = |a: &[u8], b: &[u8]| {
            a.len() == b.len()
                && a.iter().zip(b).enumerate().all(|(k, (x, y))| {
                    x == y || blockwise_exfat::raw::CHECKSUM_SKIPPED.contains(&k)
                })
        };
        match exfat::check_region(backup, s) {
            Err(pb) => self.add(
                Severity::Warning,
                FindingCode::ExfatBackupBoot,
                Some(i),
                format!("partition {i} ({name}): backup boot region (sector 12): {pb} — the main boot region has no good copy to be restored from"),
            ),
            Ok(()) if !same(main, backup) => self.add(
                Severity::Warning,
                FindingCode::ExfatBackupBoot,
                Some(i),
                format!("partition {i} ({name}): the backup boot region (sector 12) differs from the main one — a recovery from it would restore another geometry"),
            ),
            Ok(()) => {}
        }
        if vol.volume_bytes() > p.size_bytes {
            self.add(
                Severity::Error,
                FindingCode::ExfatLargerThanPartition,
                Some(i),
                format!(
                    "partition {i} ({name}): the volume claims {} sectors ({}) but the partition holds {}: writes near the end land outside it; reformat to the partition size",
                    vol.volume_sectors,
                    format_size(vol.volume_bytes()),
                    format_size(p.size_bytes)
                ),
            );
        }
        let in_sectors = div(base, s);
        if vol.partition_offset != 0 && vol.partition_offset != in_sectors {
            self.add(
                Severity::Info,
                FindingCode::ExfatPartitionOffset,
                Some(i),
                format!("partition {i} ({name}): PartitionOffset is {} but the partition starts at sector {in_sectors}: boot code that uses it finds the wrong sectors", vol.partition_offset),
            );
        }
        let dev_logical = self.sector.bytes_u64();
        if s < dev_logical {
            self.add(
                Severity::Error,
                FindingCode::ExfatSectorBelowLogical,
                Some(i),
                format!("partition {i} ({name}): the exFAT sector ({s} B) is smaller than the device's logical sector ({dev_logical} B): Linux refuses to mount it; reformat with mkfs.exfat -s {dev_logical}"),
            );
        }
        let fat_start = base.saturating_add(vol.fat_offset.saturating_mul(s));
        let heap_start = base.saturating_add(vol.heap_offset.saturating_mul(s));
        self.r.findings.extend(exfat::align::exfat_alignment(
            i,
            fat_start,
            heap_start,
            vol.cluster_bytes,
            e,
            self.opts.strict,
        ));
        let fat_head = read_clamped(self.src, fat_start, 8)?;
        if fat_head.len() == 8 {
            let w = |k: usize| {
                fat_head
                    .get(k..k.saturating_add(4))
                    .and_then(|b| <[u8; 4]>::try_from(b).ok())
                    .map_or(0, u32::from_le_bytes)
            };
            if w(0) != FAT_MEDIA || w(4) != FAT_EOC {
                self.add(
                    Severity::Warning,
                    FindingCode::ExfatFatEntries,
                    Some(i),
                    format!("partition {i} ({name}): FAT[0] and FAT[1] (byte {fat_start}) are {:#010x} {:#010x}, not F8FFFFFF FFFFFFFF — fsck.exfat reports the FAT as damaged", w(0), w(4)),
                );
            }
        }
        let root = self.exfat_root(i, base, &vol)?;
        let mut plan = ExfatPlan {
            kind: "exfat",
            label: root.label.clone(),
            sector_bytes: u32::try_from(s).unwrap_or(u32::MAX),
            cluster_bytes: u32::try_from(vol.cluster_bytes).unwrap_or(u32::MAX),
            volume_sectors: vol.volume_sectors,
            fat_start_bytes: fat_start,
            fat_sectors: u32::try_from(vol.fat_length).unwrap_or(u32::MAX),
            fat_count: vol.fat_count,
            heap_start_bytes: heap_start,
            cluster_count: u32::try_from(vol.clusters).unwrap_or(u32::MAX),
            root_cluster: u32::try_from(vol.root_cluster).unwrap_or(u32::MAX),
            volume_serial: vol.serial,
            volume_guid: root.guid.map(|(g, _)| Guid::from_bytes(g).to_string()),
            boundary_bytes: None,
            aligned: false,
            notes: Vec::new(),
        };
        plan.aligned = plan.alignment_holds(e);
        p.filesystem = Some(FsPlan::Exfat(plan));
        Ok(())
    }

    /// Whether the FAT chains the `bytes` from cluster `first` on as one contiguous run (one
    /// cluster needs no look-up); reads at most 4 bytes per cluster of a 128 KiB run.
    fn exfat_contiguous(
        &self,
        base: u64,
        vol: &exfat::ExfatVolume,
        first: u64,
        bytes: u64,
    ) -> Result<bool, S::Error> {
        let n = bytes.div_ceil(vol.cluster_bytes.max(1));
        if n <= 1 {
            return Ok(true);
        }
        let at = base
            .saturating_add(vol.fat_offset.saturating_mul(vol.sector_bytes))
            .saturating_add(first.saturating_mul(4));
        let len = usize::try_from(n.saturating_mul(4)).unwrap_or(0);
        let fat = read_clamped(self.src, at, len)?;
        if fat.len() != len {
            return Ok(false);
        }
        Ok(fat.chunks_exact(4).enumerate().all(|(k, c)| {
            let v = <[u8; 4]>::try_from(c).map_or(0, u32::from_le_bytes);
            let k = u64::try_from(k).unwrap_or(u64::MAX);
            if k.saturating_add(1) == n {
                v == FAT_EOC
            } else {
                u64::from(v) == first.saturating_add(k).saturating_add(1)
            }
        }))
    }

    /// The first cluster of the root directory: bitmap, up-case table (with its checksum),
    /// label and GUID. Bounded reads: 64 KiB of the directory, 128 KiB of the table.
    fn exfat_root(
        &mut self,
        i: u32,
        base: u64,
        vol: &exfat::ExfatVolume,
    ) -> Result<exfat::RootInfo, S::Error> {
        let name = "exFAT";
        let Some(off) = vol.cluster_offset(vol.root_cluster) else {
            return Ok(exfat::RootInfo::default());
        };
        let len = usize::try_from(vol.cluster_bytes.min(ROOT_READ)).unwrap_or(0);
        let dir = read_clamped(self.src, base.saturating_add(off), len)?;
        let root = exfat::parse_root(&dir);
        let need = vol.clusters.div_ceil(8);
        match root.bitmap {
            Some((first, bytes)) if vol.cluster_offset(first).is_some() && bytes >= need => {}
            other => self.add(
                Severity::Error,
                FindingCode::ExfatNoBitmap,
                Some(i),
                match other {
                    None => format!("partition {i} ({name}): the root directory has no allocation bitmap entry — nothing knows which clusters are free; fsck.exfat cannot fix this, reformat"),
                    Some((first, bytes)) => format!("partition {i} ({name}): the allocation bitmap (cluster {first}, {bytes} bytes) is outside the heap or shorter than the {need} bytes {} clusters need", vol.clusters),
                },
            ),
        }
        match root.upcase {
            Some((first, bytes, sum)) => match vol.cluster_offset(first) {
                Some(t) if bytes <= UPCASE_MAX && self.exfat_contiguous(base, vol, first, bytes)? => {
                    let table = read_clamped(self.src, base.saturating_add(t), usize::try_from(bytes).unwrap_or(0))?;
                    let got = table_checksum(&table);
                    if u64::try_from(table.len()).ok() == Some(bytes) && got != sum {
                        self.add(
                            Severity::Error,
                            FindingCode::ExfatUpcaseChecksum,
                            Some(i),
                            format!("partition {i} ({name}): the up-case table (cluster {first}, {bytes} bytes) sums to {got:#010x} but its entry says {sum:#010x} — names compare wrongly; Linux falls back to its own table, Windows refuses the volume"),
                        );
                    }
                }
                Some(_) => {}
                None => self.add(
                    Severity::Error,
                    FindingCode::ExfatNoUpcase,
                    Some(i),
                    format!("partition {i} ({name}): the up-case table's first cluster ({first}) is outside the heap"),
                ),
            },
            None => self.add(
                Severity::Error,
                FindingCode::ExfatNoUpcase,
                Some(i),
                format!("partition {i} ({name}): the root directory has no up-case table entry — names cannot be compared; reformat"),
            ),
        }
        if let Some((_, false)) = root.guid {
            self.add(
                Severity::Warning,
                FindingCode::ExfatGuidChecksum,
                Some(i),
                format!("partition {i} ({name}): the volume GUID entry's SetChecksum does not match — readers ignore the GUID"),
            );
        }
        Ok(root)
    }
}
