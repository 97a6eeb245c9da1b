//! MBR and EBR-chain checks.

use blockwise_geometry::{BlockSource, DiskId, ExtendedPlan, PartType, TableKind, TablePlan};
use blockwise_ptable::{read_logical, Mbr};

use crate::{FindingCode, Severity, Verifier};

impl<S: BlockSource + ?Sized> Verifier<'_, S> {
    pub(crate) fn mbr(&mut self, m: &Mbr) -> Result<(), S::Error> {
        self.r.table = TablePlan {
            kind: TableKind::Mbr,
            disk_id: Some(DiskId::Mbr(m.disk_signature)),
            boot_code: None,
        };
        let sb = self.sector.bytes_u64();
        let mut parts = Vec::new();
        for (slot, e) in m.used() {
            if e.type_ == 0xee {
                self.add(
                    Severity::Error,
                    FindingCode::GptMissing,
                    Some(u32::from(slot)),
                    "an 0xEE (GPT protective) entry sits next to other MBR entries but no GPT header was found: a hybrid MBR whose GPT is gone; rebuild the table".into(),
                );
                continue;
            }
            let start = u64::from(e.start_lba).saturating_mul(sb);
            let size = u64::from(e.sectors).saturating_mul(sb);
            if e.is_extended() {
                self.check_extent(u32::from(slot), start, size, "extended partition");
                self.r.extended.get_or_insert(ExtendedPlan {
                    start_bytes: start,
                    size_bytes: size,
                    entry: slot,
                });
                continue;
            }
            parts.push(self.part(
                u32::from(slot),
                start,
                size,
                PartType::Mbr(e.type_),
                None,
                e.status == 0x80,
                None,
            ));
        }
        let chain = read_logical(self.src, self.sector, m)?;
        if let Some(problem) = &chain.problem {
            self.add(
                Severity::Error,
                FindingCode::EbrChain,
                None,
                format!("{problem} — logical partitions after this point are not visible to Linux or Windows; rebuild the extended partition"),
            );
        }
        let last = chain.partitions.last().map_or(0, |l| l.number);
        let tools = u32::try_from(blockwise_geometry::MAX_MBR_PARTITIONS)
            .unwrap_or(u32::MAX)
            .saturating_add(1);
        if last > tools {
            self.add(
                Severity::Warning,
                FindingCode::MbrManyPartitions,
                None,
                format!("the EBR chain numbers logical partitions up to {last}: fdisk and sfdisk list only partitions 1 to {tools} and drop the rest when they save the table (Linux itself reads up to 255); use GPT for this many partitions"),
            );
        }
        let ext = m.extended().map(|(_, e)| {
            (
                u64::from(e.start_lba),
                u64::from(e.start_lba).saturating_add(u64::from(e.sectors)),
            )
        });
        for l in &chain.partitions {
            if let Some((es, ee)) = ext {
                if l.start_lba < es || l.start_lba.saturating_add(l.sectors) > ee {
                    self.add(
                        Severity::Error,
                        FindingCode::LogicalOutsideExtended,
                        Some(l.number),
                        format!(
                            "logical partition {} (sectors {}..{}) does not lie inside its extended partition (sectors {es}..{ee}): it overlaps other partitions or the table; rebuild the extended partition",
                            l.number,
                            l.start_lba,
                            l.start_lba.saturating_add(l.sectors)
                        ),
                    );
                }
            }
            let mut p = self.part(
                l.number,
                l.start_lba.saturating_mul(sb),
                l.sectors.saturating_mul(sb),
                PartType::Mbr(l.entry.type_),
                None,
                l.entry.status == 0x80,
                None,
            );
            p.logical = true;
            p.ebr_bytes = Some(l.ebr_lba.saturating_mul(sb));
            parts.push(p);
        }
        self.finish_partitions(parts)
    }
}
