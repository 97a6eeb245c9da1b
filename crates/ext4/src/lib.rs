//! Native ext4 writer from a directory tree (being implemented: see issue 4).

use blockwise_geometry::{BlockSink, ContentSource, Ext4Options, Ext4Plan, Tree};

/// Everything the ext4 planner needs to know about where the filesystem lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ext4Request {
    /// Absolute start of the partition on the disk (0 for a bare image).
    pub partition_start_bytes: u64,
    /// Partition size.
    pub partition_size_bytes: u64,
    /// Erase block E.
    pub erase_block_bytes: u64,
    /// Spec options.
    pub options: Ext4Options,
    /// Volume label.
    pub label: Option<String>,
    /// Seed for UUID and hash seed.
    pub seed: u64,
    /// Filesystem creation time and default file time.
    pub timestamp: i64,
}

/// ext4 errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request cannot be met; the reason says why and what to change.
    #[error("{reason}")]
    InvalidSpec {
        /// Which spec key (relative to the partition, e.g. `size`, `ext4.block-size`).
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

/// Plans the ext4 geometry of one partition. `tree` (when known) sizes the inode count.
pub fn plan(req: &Ext4Request, tree: Option<&Tree>) -> Result<Ext4Plan, Error> {
    let _ = (req, tree);
    Err(Error::Unsupported { feature: "ext4" })
}

/// Writes the filesystem into `sink` (a window onto exactly the partition).
pub fn write<S: BlockSink + ?Sized>(
    sink: &mut S,
    req: &Ext4Request,
    plan: &Ext4Plan,
    tree: &Tree,
    content: &dyn ContentSource,
) -> Result<(), Error> {
    let _ = (sink, req, plan, tree, content);
    Err(Error::Unsupported { feature: "ext4" })
}
