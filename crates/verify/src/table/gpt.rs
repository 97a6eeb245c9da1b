//! GPT checks: both copies, the protective MBR and hybrid MBRs.

use blockwise_geometry::{
    format_size, BlockSource, DiskId, GptPlan, PartType, PartitionPlan, SectorSize, TableKind,
    TablePlan,
};
use blockwise_ptable::{read_gpt, Corrupt, GptCopy, Mbr};

use crate::num::div;
use crate::{bytes, read_clamped, Finding, FindingCode, Severity, Verifier};

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    pub(crate) fn gpt(&mut self, mbr: Option<Mbr>) -> Result<(), S::Error> {
        let s = self.sector;
        let sb = s.bytes_u64();
        let sectors = div(self.src.len(), sb);
        let last = sectors.saturating_sub(1);
        let mut read = read_gpt(self.src, s)?;
        if let Err(Corrupt::GptUsableRange { last: claimed, .. }) = read.primary {
            // A truncated image: the primary is fine but describes a larger disk. Read it
            // as if the missing tail were zeros; partitions past the end are reported.
            if claimed >= sectors {
                let hdr = read_clamped(self.src, sb, 92)?;
                let alt = bytes::le64(&hdr, 32).max(claimed);
                let padded = Padded {
                    inner: self.src,
                    len: alt.saturating_add(1).saturating_mul(sb),
                };
                let again = read_gpt(&padded, s)?;
                if again.primary.is_ok() {
                    read.primary = again.primary;
                }
            }
        }
        self.r.table = TablePlan {
            kind: TableKind::Gpt,
            disk_id: read.best().map(|c| DiskId::Gpt(c.header.disk_guid)),
            boot_code: None,
        };
        match (&read.primary, &read.backup) {
            (Ok(p), Ok(b)) => {
                if b.header.my_lba != last {
                    self.add(
                        Severity::Warning,
                        FindingCode::GptBackupNotAtEnd,
                        None,
                        format!(
                            "the backup GPT is at LBA {} but the disk ends at LBA {last} (the image was written to a larger device): the last {} are unusable and some tools warn; move it with `sgdisk -e` or `sfdisk --relocate gpt-bak-std`",
                            b.header.my_lba,
                            format_size(last.saturating_sub(b.header.my_lba).saturating_mul(sb))
                        ),
                    );
                }
                if !same_entries(p, b) {
                    self.add(
                        Severity::Error,
                        FindingCode::GptCopiesDiffer,
                        None,
                        "the primary and backup GPT list different partitions: tools disagree on which is right; rewrite the table from the intended copy".into(),
                    );
                }
            }
            (Ok(p), Err(be)) => {
                let alt = p.header.alternate_lba;
                if alt >= sectors {
                    self.add(
                        Severity::Error,
                        FindingCode::GptBackupMissing,
                        None,
                        format!("the primary GPT puts its backup at LBA {alt} but the source has only {sectors} sectors: the image is truncated (or the sector size is wrong); the disk has no backup table — restore the full image or run `sgdisk -e`"),
                    );
                } else if alt != last {
                    self.add(
                        Severity::Warning,
                        FindingCode::GptBackupNotAtEnd,
                        None,
                        format!("the primary GPT says the backup is at LBA {alt} but the disk ends at LBA {last}, and no valid backup was found there ({be}) (typical after `dd` to a larger device): relocate it with `sgdisk -e`"),
                    );
                } else {
                    self.add(
                        Severity::Error,
                        FindingCode::GptBackupBad,
                        None,
                        format!("{be} — the disk has no usable backup table if the primary is damaged; rewrite it with `sgdisk -e` or rebuild"),
                    );
                }
            }
            (Err(pe), Ok(_)) => {
                self.add(
                    Severity::Error,
                    FindingCode::GptPrimaryBad,
                    None,
                    format!("{pe} — firmware reads the primary first and may not boot; partitions below come from the intact backup; restore the primary (gdisk: r, c, w)"),
                );
            }
            (Err(pe), Err(be)) => {
                self.add(
                    Severity::Error,
                    FindingCode::GptCorrupt,
                    None,
                    format!("no valid GPT copy: {pe}; {be} — the disk is unpartitioned to every OS; rebuild the table"),
                );
            }
        }
        self.protective(mbr.as_ref(), sectors);
        let Some(copy) = read.best().cloned() else {
            return Ok(());
        };
        let h = &copy.header;
        let entry_sectors = u64::from(h.entry_count)
            .saturating_mul(u64::from(h.entry_size))
            .div_ceil(sb.max(1));
        let (backup_header_lba, backup_entries_lba) = match (&read.primary, &read.backup) {
            (_, Ok(b)) => (b.header.my_lba, b.header.entries_lba),
            (Ok(p), Err(_)) => (
                p.header.alternate_lba,
                p.header.alternate_lba.saturating_sub(entry_sectors),
            ),
            (Err(_), Err(_)) => (h.alternate_lba, h.entries_lba),
        };
        self.r.gpt = Some(GptPlan {
            entry_sectors,
            first_usable_lba: h.first_usable_lba,
            last_usable_lba: h.last_usable_lba,
            backup_entries_lba,
            backup_header_lba,
        });
        let mut parts = Vec::new();
        for ent in &copy.entries {
            if ent.last_lba < ent.first_lba {
                self.add(
                    Severity::Error,
                    FindingCode::GptEntryRange,
                    Some(ent.index),
                    format!("partition {} ends at LBA {} before it starts at LBA {}: unusable; delete or fix the entry", ent.index, ent.last_lba, ent.first_lba),
                );
                continue;
            }
            if ent.first_lba < h.first_usable_lba || ent.last_lba > h.last_usable_lba {
                self.add(
                    Severity::Error,
                    FindingCode::GptEntryOutsideUsable,
                    Some(ent.index),
                    format!(
                        "partition {} (LBA {}..={}) lies outside the usable LBAs {}..={}: it overlaps the GPT itself, and writing to it destroys the table",
                        ent.index, ent.first_lba, ent.last_lba, h.first_usable_lba, h.last_usable_lba
                    ),
                );
            }
            let start = ent.first_lba.saturating_mul(sb);
            let size = ent
                .last_lba
                .saturating_sub(ent.first_lba)
                .saturating_add(1)
                .saturating_mul(sb);
            let name = (!ent.name.is_empty()).then(|| ent.name.clone());
            let (attributes, bootable) =
                blockwise_geometry::GptAttributes(ent.attributes).split_bootable();
            let mut part = self.part(
                ent.index,
                start,
                size,
                PartType::Gpt(ent.type_guid),
                name,
                bootable,
                Some(ent.unique_guid),
            );
            part.attributes = attributes;
            parts.push(part);
        }
        if let Some(m) = &mbr {
            if m.is_hybrid() {
                for f in hybrid_findings(m, &mut parts, self.sector) {
                    self.add(f.severity, f.code, f.partition, f.message);
                }
            }
        }
        self.finish_partitions(parts)
    }

    fn protective(&mut self, mbr: Option<&Mbr>, sectors: u64) {
        let Some(m) = mbr else {
            self.add(
                Severity::Warning,
                FindingCode::GptNoProtectiveMbr,
                None,
                "GPT without a valid protective MBR (no 55 AA or no 0xEE entry): MBR-only tools may see an empty disk and overwrite it; rewrite the protective MBR (sgdisk -z is destructive; use gdisk: x, n, w)".into(),
            );
            return;
        };
        let Some((slot, pe)) = m.used().find(|(_, e)| e.type_ == 0xee) else {
            self.add(
                Severity::Warning,
                FindingCode::GptNoProtectiveMbr,
                None,
                "GPT disk whose MBR has no 0xEE protective entry: MBR-only tools see only the MBR entries and may overwrite GPT partitions".into(),
            );
            return;
        };
        let expected = sectors.saturating_sub(1).min(0xffff_ffff);
        if u64::from(pe.sectors) != expected && !m.is_hybrid() {
            self.add(
                Severity::Info,
                FindingCode::ProtectiveMbrSize,
                Some(u32::from(slot)),
                format!("the protective MBR entry covers {} sectors, the disk has {} after LBA 0 (normal after `dd` to a larger device); harmless", pe.sectors, expected),
            );
        }
        if pe.status != 0 {
            self.add(
                Severity::Info,
                FindingCode::ProtectiveMbrBootable,
                Some(u32::from(slot)),
                "the 0xEE entry is marked bootable (0x80): the UEFI spec says 0x00, though some old BIOSes need it".into(),
            );
        }
    }
}

/// The findings of a hybrid MBR `m` over the GPT partitions `parts` (as read, or as a plan
/// promises them: `plan_findings` gives this the MBR the table writer makes), and each
/// mirrored partition's [`PartitionPlan::mbr_type`] filled in. An entry that matches no GPT
/// partition's start and size is an error: MBR-booting systems see another disk.
pub(crate) fn hybrid_findings(
    m: &Mbr,
    parts: &mut [PartitionPlan],
    sector: SectorSize,
) -> Vec<Finding> {
    let sb = sector.bytes_u64();
    let mut out = Vec::new();
    let mut mirrored = Vec::new();
    for (slot, e) in m.used().filter(|(_, e)| e.type_ != 0xee) {
        let start = u64::from(e.start_lba).saturating_mul(sb);
        let size = u64::from(e.sectors).saturating_mul(sb);
        match parts
            .iter_mut()
            .find(|p| p.start_bytes == start && p.size_bytes == size)
        {
            Some(p) => {
                p.mbr_type = Some(e.type_);
                mirrored.push(format!("{} (0x{:02x})", p.index, e.type_));
            }
            None => out.push(Finding {
                severity: Severity::Error,
                code: FindingCode::MbrGptDisagree,
                partition: Some(u32::from(slot)),
                message: format!(
                    "MBR entry {slot} (start {}, {} bytes) matches no GPT partition: MBR-booting systems see a different disk than GPT ones; make them agree or drop the hybrid entries",
                    div(start, sb),
                    size
                ),
            }),
        }
    }
    let which = if mirrored.is_empty() {
        String::new()
    } else {
        format!(" (GPT partitions {})", mirrored.join(", "))
    };
    out.insert(
        0,
        Finding {
            severity: Severity::Info,
            code: FindingCode::HybridMbr,
            partition: None,
            message: format!("hybrid MBR: the MBR also lists real partitions{which} for firmware that reads only an MBR; a tool that edits only one table leaves them disagreeing"),
        },
    );
    out
}

/// A source seen as longer than it is; the tail reads as zeros.
struct Padded<'a, S: BlockSource + ?Sized> {
    inner: &'a S,
    len: u64,
}

impl<S: BlockSource + ?Sized> BlockSource for Padded<'_, S> {
    type Error = S::Error;
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), S::Error> {
        buf.fill(0);
        let real = self.inner.len();
        if let Some(left) = real.checked_sub(offset).filter(|&n| n > 0) {
            let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
            if let Some(head) = buf.get_mut(..n) {
                self.inner.read_at(offset, head)?;
            }
        }
        Ok(())
    }
}

fn same_entries(a: &GptCopy, b: &GptCopy) -> bool {
    a.entries == b.entries
}
