//! MBR and GPT partition tables: written from a [`Plan`], parsed from any [`BlockSource`].
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

pub mod chs;
pub mod error;
pub mod gpt;
pub mod mbr;

pub use error::{Corrupt, Error, Which};
pub use gpt::{read_gpt, GptCopy, GptEntry, GptHeader, GptRead};
pub use mbr::{parse_mbr, read_logical, read_mbr, Logical, LogicalChain, Mbr, MbrEntry};

use blockwise_geometry::{BlockSink, Plan, TableKind};

/// Writes the partition table of `plan` (MBR + EBRs, or protective MBR + both GPT copies).
/// Order: backup GPT, primary GPT, then LBA 0, so an interrupted write leaves no valid-looking
/// half table.
pub fn write_table<S: BlockSink + ?Sized>(
    sink: &mut S,
    plan: &Plan,
) -> Result<(), Error<S::Error>> {
    let invalid = |reason: String| Error::InvalidPlan { reason };
    if sink.len() < plan.size_bytes {
        return Err(invalid(format!(
            "the sink holds {} bytes but the plan needs {}",
            sink.len(),
            plan.size_bytes
        )));
    }
    let mut writes = Vec::new();
    if plan.table.kind == TableKind::Gpt {
        writes.extend(gpt::gpt_writes(plan).map_err(invalid)?);
    }
    let mut mbr = mbr::mbr_sectors(plan).map_err(invalid)?;
    // EBRs before the MBR that points at them.
    let shift = usize::from(!mbr.is_empty());
    mbr.rotate_left(shift);
    writes.extend(mbr);
    for (off, bytes) in writes {
        sink.write_at(off, &bytes).map_err(Error::Io)?;
    }
    Ok(())
}
