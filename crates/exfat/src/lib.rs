//! exFAT laid out the SD Association's way: the cluster heap (and the FAT) on the erase block
//! measured from the start of the disk, filled from an in-memory [`Tree`] in one pass.
//!
//! [`plan()`] is pure arithmetic: the boundary unit and cluster size from the SD
//! Association's table when the erase block fits the card's boundary unit (BU), else the
//! erase block and the table's cluster for the volume size; the FAT ends where the heap
//! starts, on a BU. On a 64 GB or 128 GB card that is the factory layout: the partition at
//! 16 MiB, the FAT at 8 MiB and the heap at 16 MiB into the volume, 128 KiB clusters.
//! [`write()`] writes both boot regions (with their checksum sectors and the flash parameters
//! OEM sector), the FAT, the allocation bitmap, the up-case table (generated from Unicode
//! data, see [`upcase`]), the root directory with the volume label and GUID, and every
//! directory's entry sets with their `SetChecksum` and `NameHash`; every file and directory
//! is one contiguous run marked NoFatChain, so the FAT chains only the bitmap, the up-case
//! table and the root. File data goes through [`BlockSink::write_content`], so an
//! [`ImageMap`](blockwise_geometry::ImageMap) keeps references, never content.
//!
//! ```
//! use blockwise_exfat::{plan, write, ExfatOptions, ExfatRequest};
//! use blockwise_geometry::{BlockSource, Meta, NodeKind, SectorSize, SparseImage, Tree};
//!
//! let req = ExfatRequest {
//!     partition_start_bytes: 0,
//!     partition_size_bytes: 64 << 20,
//!     disk_bytes: 64 << 20,
//!     device_sector: SectorSize::S512,
//!     erase_block_bytes: 4 << 20,
//!     options: ExfatOptions::default(),
//!     label: Some("CAMERA".into()),
//!     seed: 1,
//! };
//! let p = plan(&req).unwrap();
//! assert_eq!(p.heap_start_bytes % (4 << 20), 0);
//!
//! let mut tree = Tree::default();
//! let file = NodeKind::File { size: 5, content: 0, data_ranges: None, link: None };
//! tree.add(0, "hello.txt", file, Meta::default()).unwrap();
//! let content: Vec<Vec<u8>> = vec![b"hello".to_vec()];
//! let mut img = SparseImage::new(64 << 20);
//! let report = write(&mut img, &req, &p, &tree, &content, 0).unwrap();
//! assert_eq!(report.files, 1);
//! let mut name = [0u8; 8];
//! img.read_at(3, &mut name).unwrap();
//! assert_eq!(&name, b"EXFAT   ");
//! ```
//!
//! Special files: exFAT stores no symlinks, devices, FIFOs or sockets, nor owners or extended
//! attributes. [`write()`] skips special files with one [`Warning`] each and warns once per
//! volume about dropped extended attributes. A mode without any write bit becomes the
//! read-only attribute. Hard links become independent copies.

mod auto;
mod names;
mod options;
mod plan;
pub mod raw;
pub mod upcase;
mod write;

pub use auto::{smallest, AutoExfat, ExfatNeeds};
pub use options::{validate_label, ExfatOptions, Field, Invalid, MAX_CLUSTER};
pub use plan::Layout;

use blockwise_geometry::{BlockSink, ContentError, ContentSource, ExfatPlan, SectorSize, Tree};

/// Everything the exFAT planner needs to know about where the volume lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExfatRequest {
    /// Absolute start of the partition on the disk (0 for a bare image).
    pub partition_start_bytes: u64,
    /// Partition size.
    pub partition_size_bytes: u64,
    /// The whole disk (the card's capacity, which picks the SD Association's row).
    pub disk_bytes: u64,
    /// Device logical sector size (the exFAT sector).
    pub device_sector: SectorSize,
    /// Erase block E.
    pub erase_block_bytes: u64,
    /// Spec options.
    pub options: ExfatOptions,
    /// Volume label.
    pub label: Option<String>,
    /// Seed for the volume serial number and GUID.
    pub seed: u64,
}

/// exFAT errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request cannot be met; the field says what is wrong, the reason why and what to
    /// change.
    #[error(transparent)]
    Invalid(Invalid),
    /// The plan handed to [`write()`] is not the one [`plan()`] makes for the request.
    #[error("the exFAT plan does not match the request ({field} differs); plan again")]
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
    /// A name exFAT cannot store.
    #[error("{path}: {reason}")]
    BadName {
        /// Path in the tree.
        path: String,
        /// Why.
        reason: names::NameProblem,
    },
    /// Two names in one directory differ only in case; exFAT compares names through the
    /// up-case table.
    #[error("{first} and {second} differ only in case, which exFAT cannot tell apart; rename one")]
    CaseConflict {
        /// The first path.
        first: String,
        /// The second path.
        second: String,
    },
    /// A directory larger than exFAT's 256 MiB.
    #[error("directory {path} needs {entries} 32-byte entries (each name takes 2 + one per 15 characters), more than the {max} exFAT allows; split it")]
    DirectoryTooLarge {
        /// Path.
        path: String,
        /// Entries needed.
        entries: u64,
        /// Limit.
        max: u64,
    },
    /// The tree does not fit.
    #[error("the tree needs {needed_clusters} clusters of {cluster_bytes} bytes but the volume has {free_clusters}; make the partition at least {missing_bytes} bytes larger")]
    NoSpace {
        /// Clusters the tree needs (directories and the bitmap, up-case table, root included).
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

pub use names::NameProblem;

/// Something [`write()`] left out or changed, with the path it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Stable code: `exfat-skipped-symlink`, `exfat-skipped-special`, `exfat-dropped-xattrs`.
    pub code: &'static str,
    /// Path in the tree.
    pub path: String,
    /// Human explanation.
    pub message: String,
}

impl core::fmt::Display for Warning {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// What [`write()`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Nodes skipped and attributes dropped, in tree order.
    pub warnings: Vec<Warning>,
    /// Regular files written.
    pub files: u64,
    /// Directories written (the root included).
    pub directories: u64,
    /// Clusters in use (bitmap, up-case table, directories and files).
    pub used_clusters: u64,
    /// Free clusters left.
    pub free_clusters: u64,
}

/// Plans the exFAT geometry of one partition.
///
/// # Errors
/// [`Error::Invalid`] when no layout fits; the message says why and what to change.
pub fn plan(req: &ExfatRequest) -> Result<ExfatPlan, Error> {
    plan::plan_layout(req).map(|(_, p)| p)
}

/// Plans like [`plan()`] and also returns the complete on-disk [`Layout`].
///
/// # Errors
/// As [`plan()`].
pub fn plan_with_layout(req: &ExfatRequest) -> Result<(Layout, ExfatPlan), Error> {
    plan::plan_layout(req)
}

/// Formats the volume into `sink` (a window onto exactly the partition) and copies `tree` in.
/// `timestamp` (Unix seconds) is not needed by exFAT's root (it has no times) but kept for
/// the same signature as FAT's writer; file times come from the tree.
///
/// `plan` must be what [`plan()`] returned for `req` (it is checked).
///
/// # Errors
/// Invalid names, case conflicts, a full volume or directory, content and sink failures.
/// Nothing is written when the tree is rejected (all checks run before the first write).
pub fn write<S: BlockSink + ?Sized>(
    sink: &mut S,
    req: &ExfatRequest,
    plan: &ExfatPlan,
    tree: &Tree,
    content: &dyn ContentSource,
    timestamp: i64,
) -> Result<WriteReport, Error> {
    let _ = timestamp;
    let (layout, expect) = plan::plan_layout(req)?;
    let fields: [(&'static str, bool); 8] = [
        ("sector_bytes", expect.sector_bytes == plan.sector_bytes),
        ("cluster_bytes", expect.cluster_bytes == plan.cluster_bytes),
        (
            "fat_start_bytes",
            expect.fat_start_bytes == plan.fat_start_bytes,
        ),
        ("fat_sectors", expect.fat_sectors == plan.fat_sectors),
        (
            "heap_start_bytes",
            expect.heap_start_bytes == plan.heap_start_bytes,
        ),
        ("cluster_count", expect.cluster_count == plan.cluster_count),
        ("label", expect.label == plan.label),
        ("volume_serial", expect.volume_serial == plan.volume_serial),
    ];
    if let Some((field, _)) = fields.iter().find(|(_, same)| !same) {
        return Err(Error::PlanMismatch { field });
    }
    write::write_volume(sink, &layout, plan, req, tree, content)
}
