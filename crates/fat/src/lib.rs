//! FAT12/16/32 formatter whose FAT region, data area and clusters land on erase-block
//! boundaries measured from the start of the disk, filled from an in-memory [`Tree`].
//!
//! [`plan()`] is pure arithmetic: it picks the FAT type, the cluster size, the reserved
//! sectors and the FAT size so that the data area (and with `align-fat` the first FAT)
//! starts on a multiple of the erase block E. [`write()`] formats the volume and copies the
//! tree in one pass: every directory is built in memory with its long names and unique 8.3
//! aliases, every file gets one contiguous cluster run, and the writes go out in ascending
//! offset order, coalesced into large aligned chunks.
//!
//! ```
//! use blockwise_fat::{plan, write, FatOptions, FatRequest};
//! use blockwise_geometry::{BlockSource, FatType, FsKind, Meta, NodeKind, SectorSize, SparseImage, Tree};
//!
//! let req = FatRequest {
//!     partition_start_bytes: 0,
//!     partition_size_bytes: 64 << 20,
//!     device_sector: SectorSize::S512,
//!     erase_block_bytes: 4 << 20,
//!     fs: FsKind::Fat(Some(FatType::Fat16)),
//!     options: FatOptions::default(),
//!     label: Some("DEMO".into()),
//!     seed: 1,
//! };
//! let fat = plan(&req).unwrap();
//! assert_eq!(fat.data_start_bytes % (4 << 20), 0);
//!
//! let mut tree = Tree::default();
//! let file = NodeKind::File { size: 5, content: 0, data_ranges: None, link: None };
//! tree.add(0, "hello.txt", file, Meta::default()).unwrap();
//! let content: Vec<Vec<u8>> = vec![b"hello".to_vec()];
//!
//! let mut img = SparseImage::new(64 << 20);
//! let report = write(&mut img, &req, &fat, &tree, &content, 0).unwrap();
//! assert!(report.warnings.is_empty());
//! let mut sig = [0u8; 2];
//! img.read_at(510, &mut sig).unwrap();
//! assert_eq!(sig, [0x55, 0xAA]);
//! ```
//!
//! [`FatPlan::notes`] holds one sentence per choice (type, sector size, cluster size,
//! reserved sectors, FAT size, volume ID); notes starting with `warning:` flag compatibility
//! risks: 4096-byte sectors (firmware such as the Raspberry Pi boot ROM, U-Boot and many UEFI
//! implementations reject them), clusters over 32 KiB, and a volume too small (or an erase
//! block too large for the 16-bit reserved-sector count) to align the FAT as well as the
//! data area, in which case only the data area is aligned.
//!
//! Special files: FAT cannot store symlinks, devices, FIFOs or sockets. [`write()`] skips them
//! and returns one [`Warning`] per skipped node in [`WriteReport::warnings`]. Hard links
//! (files sharing `link`) become independent copies.

mod auto;
mod names;
mod options;
mod plan;
pub mod raw;
mod time;
mod write;

pub use auto::{smallest, AutoFat, FatNeeds};
pub use blockwise_geometry::{FatType, MAX_FAT32_CLUSTERS};
pub use names::{lfn_checksum, long_name, BadName};
pub use options::{validate_label, Bootloader, FatOptions, Field, Invalid};
pub use plan::{Layout, ROOT_ENTRIES};
pub use time::{fat_time, FatTime};

use blockwise_geometry::{
    BlockSink, ContentError, ContentSource, FatPlan, FsKind, SectorSize, Tree,
};

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
    /// `FsKind::Fat(None)` (type chosen from the size) or `FsKind::Fat(Some(type))`.
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
    /// The request cannot be met; the field says what is wrong, the reason why and what to
    /// change.
    #[error(transparent)]
    Invalid(Invalid),
    /// Not implemented.
    #[error("{feature} is not supported")]
    Unsupported {
        /// What.
        feature: &'static str,
    },
    /// The plan handed to [`write()`] is not the one [`plan()`] makes for the request.
    #[error("the FAT plan does not match the request ({field} differs); plan again")]
    PlanMismatch {
        /// The first field that differs.
        field: &'static str,
    },
    /// The sink is smaller than the volume.
    #[error("the sink holds {have} bytes but the volume needs {need}")]
    SinkTooSmall {
        /// Volume bytes.
        need: u64,
        /// Sink bytes.
        have: u64,
    },
    /// A name FAT cannot store.
    #[error("{path}: {reason}")]
    BadName {
        /// Path in the tree.
        path: String,
        /// Why.
        reason: BadName,
    },
    /// Two names in one directory differ only in case; FAT compares names case-insensitively.
    #[error("{first} and {second} differ only in case, which FAT cannot tell apart; rename one")]
    CaseConflict {
        /// The first path.
        first: String,
        /// The second path.
        second: String,
    },
    /// More than 999,999 names share one 8.3 basis name.
    #[error("{path}: no unique 8.3 alias left for this name")]
    AliasesExhausted {
        /// Path of the name that got none.
        path: String,
    },
    /// A file of 4 GiB or more.
    #[error("{path} is {size} bytes; FAT files hold at most 4294967295 bytes")]
    FileTooLarge {
        /// Path.
        path: String,
        /// Size.
        size: u64,
    },
    /// A directory needs more than the 65,536 entries FAT allows.
    #[error("directory {path} needs {entries} 32-byte entries (long names take several), more than the {max} FAT allows; split it")]
    DirectoryTooLarge {
        /// Path.
        path: String,
        /// Entries needed.
        entries: u64,
        /// Limit.
        max: u64,
    },
    /// The fixed FAT12/16 root directory is full.
    #[error("the {kind} root directory holds {max} entries but needs {entries} (long names take several); use fat32 or move files into a subdirectory")]
    RootDirFull {
        /// `fat12` or `fat16`.
        kind: &'static str,
        /// Entries needed.
        entries: u64,
        /// Capacity.
        max: u64,
    },
    /// The tree does not fit.
    #[error("the tree needs {needed_clusters} clusters of {cluster_bytes} bytes but the volume has {free_clusters}; make the partition at least {missing_bytes} bytes larger")]
    NoSpace {
        /// Clusters the tree needs (directories included).
        needed_clusters: u64,
        /// Clusters the volume has.
        free_clusters: u64,
        /// Cluster size.
        cluster_bytes: u64,
        /// `(needed - free) * cluster_bytes`.
        missing_bytes: u64,
    },
    /// The tree is malformed (a child id out of range, a directory reachable twice).
    #[error("invalid tree: node {node}: {reason}")]
    InvalidTree {
        /// Node id.
        node: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// Reading file content failed.
    #[error("{path}: {source}")]
    Content {
        /// Path in the tree.
        path: String,
        /// The content source's error.
        #[source]
        source: ContentError,
    },
    /// The sink failed.
    #[error("writing at byte {offset}: {source}")]
    Sink {
        /// Offset of the failed write (relative to the partition).
        offset: u64,
        /// The sink's error.
        #[source]
        source: Box<dyn core::error::Error + Send + Sync + 'static>,
    },
}

/// Something [`write()`] left out or changed, with the path it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Stable code: `fat-skipped-symlink`, `fat-skipped-special`.
    pub code: &'static str,
    /// Path in the tree; empty for the volume itself (the label).
    pub path: String,
    /// Human explanation.
    pub message: String,
}

impl core::fmt::Display for Warning {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        if self.path.is_empty() {
            // About the volume, not a file (the label).
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// What [`write()`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Nodes skipped (symlinks, devices, FIFOs, sockets), one per node, in tree order.
    pub warnings: Vec<Warning>,
    /// Regular files written.
    pub files: u64,
    /// Directories written (the root included).
    pub directories: u64,
    /// Clusters in use (directories and files).
    pub used_clusters: u64,
    /// Free clusters left (the FSInfo free count on FAT32).
    pub free_clusters: u64,
}

/// Plans the FAT geometry of one partition.
///
/// # Errors
/// [`Error::Invalid`] when no FAT type, cluster size or alignment fits; the message
/// says why and what to change.
pub fn plan(req: &FatRequest) -> Result<FatPlan, Error> {
    plan::plan_layout(req).map(|(_, p)| p)
}

/// Plans like [`plan()`] and also returns the complete on-disk [`Layout`].
///
/// # Errors
/// As [`plan()`].
pub fn plan_with_layout(req: &FatRequest) -> Result<(Layout, FatPlan), Error> {
    plan::plan_layout(req)
}

/// Formats the volume into `sink` (a window onto exactly the partition) and copies `tree` in.
/// `timestamp` (Unix seconds) is used for times that have no source (the volume label entry).
///
/// `plan` must be what [`plan()`] returned for `req` (it is checked).
///
/// # Errors
/// Invalid names, case conflicts, a full volume or directory, content and sink failures.
/// Nothing is written when the tree is rejected (all checks run before the first write).
pub fn write<S: BlockSink + ?Sized>(
    sink: &mut S,
    req: &FatRequest,
    plan: &FatPlan,
    tree: &Tree,
    content: &dyn ContentSource,
    timestamp: i64,
) -> Result<WriteReport, Error> {
    let (layout, expect) = plan::plan_layout(req)?;
    let fields: [(&'static str, bool); 10] = [
        ("kind", expect.kind == plan.kind),
        ("sector_bytes", expect.sector_bytes == plan.sector_bytes),
        ("cluster_bytes", expect.cluster_bytes == plan.cluster_bytes),
        (
            "reserved_sectors",
            expect.reserved_sectors == plan.reserved_sectors,
        ),
        ("fat_count", expect.fat_count == plan.fat_count),
        ("fat_sectors", expect.fat_sectors == plan.fat_sectors),
        ("cluster_count", expect.cluster_count == plan.cluster_count),
        (
            "data_start_bytes",
            expect.data_start_bytes == plan.data_start_bytes,
        ),
        ("label", expect.label == plan.label),
        ("volume_id", expect.volume_id == plan.volume_id),
    ];
    if let Some((field, _)) = fields.iter().find(|(_, same)| !same) {
        return Err(Error::PlanMismatch { field });
    }
    write::write_volume(sink, &layout, plan, tree, content, timestamp)
}
