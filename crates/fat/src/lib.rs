//! FAT12/16/32 formatter whose FAT region, data area and clusters land on erase-block
//! boundaries measured from the start of the disk. (Being implemented: see issue 3.)

use blockwise_geometry::{BlockSink, ContentSource, FatOptions, FatPlan, FsKind, SectorSize, Tree};

/// Everything the FAT planner needs to know about where the volume lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FatRequest {
    /// Absolute start of the partition on the disk (0 for a bare image).
    pub partition_start_bytes: u64,
    /// Partition size.
    pub partition_size_bytes: u64,
    /// Device logical sector size.
    pub device_sector: SectorSize,
    /// Erase block E.
    pub erase_block_bytes: u64,
    /// `FatAuto`, `Fat12`, `Fat16` or `Fat32`.
    pub fs: FsKind,
    /// Spec options.
    pub options: FatOptions,
    /// Volume label.
    pub label: Option<String>,
    /// Seed for the volume ID.
    pub seed: u64,
}

/// FAT errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request cannot be met; the reason says why and what to change.
    #[error("{reason}")]
    InvalidSpec {
        /// Which spec key (relative to the partition, e.g. `size`, `fat.cluster`).
        key: &'static str,
        /// Why, and what to do.
        reason: String,
    },
    /// Not implemented yet.
    #[error("{feature} is not supported")]
    Unsupported {
        /// What.
        feature: &'static str,
    },
}

/// Plans the FAT geometry of one partition.
pub fn plan(req: &FatRequest) -> Result<FatPlan, Error> {
    let _ = req;
    Err(Error::Unsupported { feature: "FAT" })
}

/// Formats the volume into `sink` (a window onto exactly the partition) and copies `tree` in.
/// `timestamp` is used for times that have no source (volume label, root directory).
pub fn write<S: BlockSink + ?Sized>(
    sink: &mut S,
    req: &FatRequest,
    plan: &FatPlan,
    tree: &Tree,
    content: &dyn ContentSource,
    timestamp: i64,
) -> Result<(), Error> {
    let _ = (sink, req, plan, tree, content, timestamp);
    Err(Error::Unsupported { feature: "FAT" })
}
