//! Partition-table checks: which table the disk carries (MBR, GPT at 512 or 4096, or none
//! that parses), then the MBR/EBR and GPT specifics in [`mbr`] and [`gpt`].

pub(crate) mod gpt;
mod mbr;

use blockwise_geometry::{BlockSource, DiskId, SectorSize, TableKind, TablePlan};
use blockwise_ptable::{read_gpt, Corrupt, Mbr};

use crate::bytes::has;
use crate::magic::Content;
use crate::{read_clamped, FindingCode, Severity, Verifier};

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    /// Reads the table that starts in `head` (the first 8 KiB): GPT where an `EFI PART`
    /// header is found (or a protective MBR points to one), else the MBR.
    pub(crate) fn table(
        &mut self,
        head: &[u8],
        mbr: Result<Mbr, Corrupt>,
        forced: Option<SectorSize>,
    ) -> Result<(), S::Error> {
        let candidates: Vec<SectorSize> = match forced {
            Some(s) => vec![s],
            None => vec![SectorSize::S512, SectorSize::S4096],
        };
        let gpt_at = candidates
            .iter()
            .copied()
            .find(|s| usize::try_from(s.bytes()).is_ok_and(|o| has(head, o, b"EFI PART")));
        let protective = mbr
            .as_ref()
            .is_ok_and(|m| m.used().any(|(_, e)| e.type_ == 0xee));
        if let Some(s) = gpt_at {
            self.sector = s;
            self.r.sector_bytes = s;
            return self.gpt(mbr.ok());
        }
        if protective {
            // No primary header where expected: look for a usable backup at either size.
            for &s in &candidates {
                let read = read_gpt(self.src, s)?;
                if read.backup.is_ok() {
                    self.sector = s;
                    self.r.sector_bytes = s;
                    return self.gpt(mbr.ok());
                }
            }
            return self.gpt(mbr.ok());
        }
        match mbr {
            Ok(m) if m.used().count() > 0 => {
                if forced.is_none() {
                    self.sector = self.guess_mbr_sector(&m)?;
                    self.r.sector_bytes = self.sector;
                }
                self.mbr(&m)
            }
            Ok(m) => {
                if self.bare_content()? != Content::Unknown
                    && self.bare_content()? != Content::Empty
                {
                    return self.bare();
                }
                self.r.table = TablePlan {
                    kind: TableKind::Mbr,
                    disk_id: Some(DiskId::Mbr(m.disk_signature)),
                    boot_code: None,
                };
                self.add(
                    Severity::Info,
                    FindingCode::NoPartitions,
                    None,
                    "the MBR has no partition entries: nothing to check".into(),
                );
                Ok(())
            }
            Err(err) => {
                let c = self.bare_content()?;
                if c != Content::Unknown && c != Content::Empty {
                    return self.bare();
                }
                if let Corrupt::BootSignature { .. } | Corrupt::Truncated { .. } = err {
                    self.r.recognised = false;
                    let what = if c == Content::Empty {
                        "all zeros at the start"
                    } else {
                        "unrecognised bytes"
                    };
                    self.add(
                        Severity::Error,
                        FindingCode::Unrecognised,
                        None,
                        format!("no partition table (no MBR 55 AA signature, no GPT) and no known filesystem ({what}): not a disk image blockwise can check"),
                    );
                } else {
                    self.r.table = TablePlan {
                        kind: TableKind::Mbr,
                        disk_id: None,
                        boot_code: None,
                    };
                    self.add(
                        Severity::Error,
                        FindingCode::MbrCorrupt,
                        None,
                        format!("{err} — partitioning tools and firmware may reject this disk; rewrite the table (sfdisk, or blockwise build)"),
                    );
                }
                Ok(())
            }
        }
    }

    /// For an MBR without a device hint: 512 unless 4096-byte LBAs land on more
    /// recognisable filesystems and the partitions still fit the source in 4096-byte
    /// sectors when they do in 512-byte ones. A filesystem counts only where it fits its
    /// partition in that reading (a 4Kn disk read in 512-byte sectors puts a later
    /// partition's start on an earlier filesystem's first bytes). A backup ext4 superblock (its
    /// `s_block_group_nr` is not 0: 1 KiB-block filesystems have one 1 KiB into every
    /// 8 MiB group) is no filesystem start.
    fn guess_mbr_sector(&mut self, m: &Mbr) -> Result<SectorSize, S::Error> {
        let mut score = [0usize; 2];
        let mut fits = [true; 2];
        for (i, s) in [SectorSize::S512, SectorSize::S4096]
            .into_iter()
            .enumerate()
        {
            for (_, e) in m
                .used()
                .filter(|(_, e)| !e.is_extended() && e.type_ != 0xee)
            {
                let off = u64::from(e.start_lba).saturating_mul(s.bytes_u64());
                let end = u64::from(e.start_lba)
                    .saturating_add(u64::from(e.sectors))
                    .saturating_mul(s.bytes_u64());
                if end > self.src.len() {
                    if let Some(f) = fits.get_mut(i) {
                        *f = false;
                    }
                }
                if off == 0 || off >= self.src.len() {
                    continue;
                }
                let len = end.saturating_sub(off);
                let starts = match self.classify(off)? {
                    Content::Other(_) => true,
                    Content::Fat => {
                        let head = read_clamped(self.src, off, 512)?;
                        crate::fat::parse_fat(&head).is_ok_and(|v| v.volume_bytes() <= len)
                    }
                    Content::Ext => {
                        let sb = read_clamped(self.src, off.saturating_add(1024), 1024)?;
                        crate::ext4::is_primary_superblock(&sb)
                            && crate::ext4::parse_superblock(&sb).is_ok_and(|p| {
                                p.blocks_count.saturating_mul(u64::from(p.block_bytes)) <= len
                            })
                    }
                    _ => false,
                };
                if starts {
                    if let Some(sc) = score.get_mut(i) {
                        *sc = sc.saturating_add(1);
                    }
                }
            }
        }
        if score[1] > score[0] && (fits[1] || !fits[0]) {
            self.r.findings.push(crate::align::sector_size_guessed());
            return Ok(SectorSize::S4096);
        }
        Ok(SectorSize::S512)
    }
}
