//! MBR and GPT partition tables: written from a [`Plan`], parsed from any
//! [`BlockSource`](blockwise_geometry::BlockSource).
//!
//! The builders take a validated plan; the parsers take arbitrary bytes and never panic:
//! every offset is range-checked, the EBR walk is bounded, the GPT entry array is bounded
//! before it is allocated, and both GPT copies are checked separately.
//!
//! ```
//! use blockwise_geometry::{plan, FsKind, ImageSpec, Layout, PartitionLayout, SizeSpec, SparseImage, TableKind};
//! use blockwise_ptable::{read_gpt, write_table};
//! let layout = Layout {
//!     image: ImageSpec { table: TableKind::Gpt, size: Some(64 << 20), ..ImageSpec::default() },
//!     partitions: vec![PartitionLayout::new(FsKind::None, SizeSpec::Fill)],
//! };
//! let plan = plan(&layout).unwrap();
//! let mut img = SparseImage::new(plan.size_bytes);
//! write_table(&mut img, &plan).unwrap();
//! let gpt = read_gpt(&img, plan.sector_bytes).unwrap();
//! assert_eq!(gpt.primary.unwrap().entries.len(), 1);
//! assert!(gpt.backup.is_ok());
//! ```

// Every parser here takes hostile bytes: no indexing, unchecked arithmetic, `as`, unwrap or
// panic. Escapes go through `#[expect(.., reason = "…")]`.
#![deny(
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::unwrap_used,
    clippy::panic
)]

pub mod chs;
pub mod error;
pub mod gpt;
pub mod mbr;

pub use error::{Corrupt, Error, PlanError, Which};
pub use gpt::{read_gpt, GptCopy, GptEntry, GptHeader, GptRead};
pub use mbr::{parse_mbr, read_logical, read_mbr, Logical, LogicalChain, Mbr, MbrEntry};

use blockwise_geometry::{BlockSink, Plan, SectorSize, TableKind};

/// Writes the partition table of `plan` (MBR + EBRs, or protective MBR + both GPT copies).
/// Order: backup GPT, primary GPT, then LBA 0, so an interrupted write leaves no valid-looking
/// half table.
pub fn write_table<S: BlockSink + ?Sized>(
    sink: &mut S,
    plan: &Plan,
) -> Result<(), Error<S::Error>> {
    if sink.len() < plan.size_bytes {
        return Err(PlanError::SinkTooSmall {
            sink_bytes: sink.len(),
            plan_bytes: plan.size_bytes,
        }
        .into());
    }
    let mut writes = Vec::new();
    if plan.table.kind == TableKind::Gpt {
        writes.extend(gpt::gpt_writes(plan)?);
    }
    let mut mbr = mbr::mbr_sectors(plan)?;
    // EBRs before the MBR that points at them.
    let shift = usize::from(!mbr.is_empty());
    mbr.rotate_left(shift);
    writes.extend(mbr);
    for (off, bytes) in writes {
        sink.write_at(off, &bytes).map_err(Error::Io)?;
    }
    Ok(())
}

/// `bytes` in sectors of `sector`, rounded down.
fn to_lba(bytes: u64, sector: SectorSize) -> u64 {
    bytes.checked_div(sector.bytes_u64()).unwrap_or(0)
}

/// The byte offset of `lba` in sectors of `sector`, saturating (for parsers: the result is
/// compared with the source length).
fn lba_offset(lba: u64, sector: SectorSize) -> u64 {
    lba.saturating_mul(sector.bytes_u64())
}

/// The byte offset of `lba` in sectors of `sector`, for writers.
fn write_offset(lba: u64, sector: SectorSize) -> Result<u64, PlanError> {
    lba.checked_mul(sector.bytes_u64())
        .ok_or(PlanError::OffsetOverflow {
            lba,
            sector_bytes: sector.bytes_u64(),
        })
}

#[cfg(test)]
#[expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::panic,
    reason = "tests"
)]
mod tests {
    use blockwise_geometry::{
        plan, DiskId, FsKind, ImageSpec, Layout, PartType, PartitionLayout, SectorSize, SizeSpec,
        SparseImage, TableKind,
    };

    use super::*;

    fn plan_of(table: TableKind, partitions: usize) -> Plan {
        let layout = Layout {
            image: ImageSpec {
                table,
                size: Some(64 << 20),
                ..ImageSpec::default()
            },
            partitions: vec![
                PartitionLayout::new(FsKind::None, SizeSpec::Bytes(1 << 20));
                partitions
            ],
        };
        plan(&layout).unwrap()
    }

    /// Writes `plan`, changed by `mutate`, to a sink of its size and checks the plan error
    /// (its `Debug` form names the exact variant and fields).
    fn check(plan: &Plan, mutate: impl FnOnce(&mut Plan), expected: &str) -> PlanError {
        let mut plan = plan.clone();
        mutate(&mut plan);
        let mut img = SparseImage::new(plan.size_bytes);
        match write_table(&mut img, &plan) {
            Err(Error::InvalidPlan(e)) => {
                assert_eq!(format!("{e:?}"), expected);
                e
            }
            other => panic!("expected {expected}, got {other:?}"),
        }
    }

    #[test]
    fn valid_plans_write() {
        for (table, n) in [
            (TableKind::Mbr, 1),
            (TableKind::Mbr, 6),
            (TableKind::Gpt, 5),
        ] {
            let p = plan_of(table, n);
            let mut img = SparseImage::new(p.size_bytes);
            write_table(&mut img, &p).unwrap();
        }
    }

    /// A hybrid MBR: mirrored partitions in GPT order, then the 0xEE entry over the primary
    /// GPT (LBA 1 to the end of its entry array: 33 sectors of 512 bytes, 5 of 4096).
    #[test]
    fn hybrid_mbr() {
        for (sector, ee) in [(SectorSize::S512, 33), (SectorSize::S4096, 5)] {
            let layout = Layout {
                image: ImageSpec {
                    table: TableKind::Gpt,
                    sector_size: sector,
                    size: Some(64 << 20),
                    ..ImageSpec::default()
                },
                partitions: vec![PartitionLayout::new(FsKind::None, SizeSpec::Bytes(1 << 20)); 4],
            };
            let mut p = plan(&layout).unwrap();
            p.partitions[1].mbr_type = Some(0x0c);
            p.partitions[1].bootable = true;
            p.partitions[3].mbr_type = Some(0x83);
            let mut img = SparseImage::new(p.size_bytes);
            write_table(&mut img, &p).unwrap();
            let m = read_mbr(&img).unwrap();
            assert!(m.is_hybrid());
            let sb = sector.bytes_u64();
            let got: Vec<_> = m
                .used()
                .map(|(slot, e)| {
                    (
                        slot,
                        e.status,
                        e.type_,
                        u64::from(e.start_lba),
                        u64::from(e.sectors),
                    )
                })
                .collect();
            let q = |i: usize| {
                (
                    p.partitions[i].start_bytes / sb,
                    p.partitions[i].size_bytes / sb,
                )
            };
            assert_eq!(
                got,
                [
                    (1, 0x80, 0x0c, q(1).0, q(1).1),
                    (2, 0, 0x83, q(3).0, q(3).1),
                    (3, 0, 0xee, 1, ee)
                ]
            );
        }
        let mut p = plan_of(TableKind::Gpt, 4);
        p.partitions
            .iter_mut()
            .for_each(|q| q.mbr_type = Some(0x83));
        check(&p, |_| {}, "TooManyMirrored { count: 4 }");
    }

    #[test]
    fn sink_too_small() {
        let p = plan_of(TableKind::Mbr, 1);
        let mut img = SparseImage::new(p.size_bytes - 512);
        let err = write_table(&mut img, &p).unwrap_err();
        assert_eq!(
            format!("{err:?}"),
            format!(
                "InvalidPlan(SinkTooSmall {{ sink_bytes: {}, plan_bytes: {} }})",
                p.size_bytes - 512,
                p.size_bytes
            )
        );
        assert_eq!(
            err.to_string(),
            format!(
                "the sink holds {} bytes but the plan needs {}",
                p.size_bytes - 512,
                p.size_bytes
            )
        );
    }

    #[test]
    fn gpt_plan_errors() {
        let one = plan_of(TableKind::Gpt, 1);
        check(&one, |p| p.gpt = None, "MissingGptLayout");
        check(
            &one,
            |p| p.table.disk_id = Some(DiskId::Mbr(1)),
            "MissingDiskGuid",
        );
        let e = check(
            &plan_of(TableKind::Gpt, 2),
            |p| p.partitions[1].type_ = PartType::Mbr(0x83),
            "TypeMismatch { partition: 2, table: Gpt }",
        );
        assert_eq!(e.to_string(), "partition 2: an MBR type in a GPT plan");
        check(
            &one,
            |p| {
                let extra = p.partitions[0].clone();
                p.partitions.resize(129, extra);
            },
            "GptEntriesFull { count: 129, max: 128 }",
        );
        check(
            &one,
            |p| {
                p.partitions[0].start_bytes = 0;
                p.partitions[0].size_bytes = 100;
            },
            "EndsInFirstSector { partition: 1, end_bytes: 100 }",
        );
        check(
            &one,
            |p| {
                if let Some(g) = p.gpt.as_mut() {
                    g.backup_entries_lba = u64::MAX;
                }
            },
            "OffsetOverflow { lba: 18446744073709551615, sector_bytes: 512 }",
        );
    }

    #[test]
    fn mbr_plan_errors() {
        // Six partitions: 1, 2, 3 primary, the extended one, and logicals 5, 6, 7.
        let six = plan_of(TableKind::Mbr, 6);
        let indices: Vec<_> = six
            .partitions
            .iter()
            .map(|p| (p.index, p.logical))
            .collect();
        let expected = [1, 2, 3, 5, 6, 7].map(|i| (i, i > 4));
        assert_eq!(indices, expected);

        let e = check(
            &six,
            |p| p.partitions[0].type_ = PartType::Gpt(blockwise_geometry::Guid([1; 16])),
            "TypeMismatch { partition: 1, table: Mbr }",
        );
        assert_eq!(e.to_string(), "partition 1: a GPT type in an MBR plan");
        let e = check(
            &six,
            |p| p.partitions.iter_mut().for_each(|q| q.logical = false),
            "TooManyPrimaries { count: 6 }",
        );
        assert_eq!(e.to_string(), "6 primary partitions: an MBR has four slots");
        check(
            &six,
            |p| {
                // Partition 5 made primary in entry 4, which the extended partition holds.
                p.partitions[3].logical = false;
                p.partitions[3].index = 4;
            },
            "NoSlotForExtended { primaries: 4 }",
        );
        check(
            &six,
            |p| p.partitions[4].ebr_bytes = None,
            "MissingEbr { partition: 6 }",
        );
        // Partition 6's EBR past its end: the link from partition 5's EBR cannot be written.
        let end_lba = six.partitions[4].end_bytes() / 512;
        check(
            &six,
            |p| p.partitions[4].ebr_bytes = Some((end_lba + 1) * 512),
            &format!(
                "EbrPastEnd {{ partition: 6, ebr_lba: {}, end_lba: {end_lba} }}",
                end_lba + 1
            ),
        );
        check(
            &six,
            |p| p.partitions[0].size_bytes = (1 << 32) * 512,
            "MbrSectorsOverflow { sectors: 4294967296 }",
        );
        let e = check(
            &six,
            |p| p.partitions[0].start_bytes = (1 << 32) * 512,
            "MbrLbaOverflow { lba: 4294967296 }",
        );
        assert_eq!(
            e.to_string(),
            "LBA 4294967296 does not fit an MBR entry (32 bits)"
        );
        // Partition 5 starting before its EBR.
        let ebr_lba = six.partitions[3].ebr_bytes.unwrap() / 512;
        check(
            &six,
            |p| p.partitions[3].start_bytes = (ebr_lba - 1) * 512,
            &format!("LbaBeforeBase {{ lba: {}, base: {ebr_lba} }}", ebr_lba - 1),
        );
    }
}
