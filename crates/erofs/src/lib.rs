//! Native EROFS writer: an uncompressed EROFS image from a [`Tree`], in pure Rust.
//!
//! The writer lays everything out first (inode numbers, xattr sharing, which tails fit after
//! their inode, the block of every directory and file: metadata only), then writes the
//! metadata blocks one at a time and places file data with
//! [`BlockSink::write_content`], inline tails
//! included, so memory follows the metadata, not the file sizes.
//!
//! ```
//! use blockwise_erofs::{plan, write, ErofsOptions, ErofsRequest};
//! use blockwise_geometry::{Meta, NodeKind, SparseImage, Tree};
//!
//! let mut tree = Tree::default();
//! tree.add(0, "hello.txt", NodeKind::File { size: 5, content: 0, data_ranges: None, link: None },
//!          Meta { mode: 0o644, ..Meta::default() }).unwrap();
//! let contents = vec![b"hello".to_vec()];
//! let req = ErofsRequest {
//!     partition_start_bytes: 4 << 20,
//!     partition_size_bytes: 4 << 20,
//!     erase_block_bytes: 4 << 20,
//!     options: ErofsOptions::default(),
//!     label: Some("system".into()),
//!     seed: 1,
//!     timestamp: 0,
//! };
//! let p = plan(&req, &tree).unwrap();
//! assert_eq!(p.block_bytes, 4096);
//! assert_eq!(p.blocks, Some(1)); // the superblock, both inodes and the file's 5 bytes
//! let mut img = SparseImage::new(req.partition_size_bytes);
//! write(&mut img, &req, &p, &tree, &contents).unwrap();
//! ```
//!
//! Layout (4 KiB blocks):
//! ```text
//! block 0          [zeros 1 KiB][superblock 128 B][inodes: root first (nid 36) …]
//! blocks 0..M      inodes (32-byte compact, 64-byte extended), each followed by its inline
//!                  xattrs and its tail-packed last partial block, never across a block
//! M..M+S           shared xattrs (name/value pairs used by more than one inode)
//! then             directory blocks (name-sorted dirents), then file data, whole blocks
//! ```
//! What it writes: flat-plain and flat-inline (tail-packed) data, compact inodes where the
//! owner, size, links and mtime allow (mtime = the build time), extended ones otherwise,
//! directories with `.` and `..`, symlinks, hard links, device nodes, FIFOs, sockets, inline
//! and shared xattrs (`user.`, `trusted.`, `security.`, POSIX ACLs), the superblock checksum
//! (`sb_csum`). Not written: compression (the `mkfs.erofs` backend does that), chunk-based
//! files, holes (written as zero blocks), extra devices.

mod layout;
mod options;
pub mod raw;
mod write;

pub use options::{validate_label, ErofsBackend, ErofsOptions, Invalid, COMPRESSORS};

use blockwise_geometry::{BlockSink, ContentError, ContentSource, ErofsPlan, Guid, Tree};

/// The block size the native writer uses.
pub const BLOCK_BYTES: u32 = 4096;

/// Everything the planner needs to know about where the filesystem lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErofsRequest {
    /// Absolute start of the partition on the disk (0 for a bare image).
    pub partition_start_bytes: u64,
    /// Partition size (the image must fit).
    pub partition_size_bytes: u64,
    /// Erase block E.
    pub erase_block_bytes: u64,
    /// Spec options.
    pub options: ErofsOptions,
    /// Volume name.
    pub label: Option<String>,
    /// Seed of the UUID.
    pub seed: u64,
    /// Build time: compact inodes' mtime, and the superblock's epoch.
    pub timestamp: i64,
}

impl ErofsRequest {
    /// The UUID: pinned, or derived from the seed.
    #[must_use]
    pub fn uuid(&self) -> [u8; 16] {
        self.options
            .uuid
            .unwrap_or_else(|| Guid::derive(self.seed, "erofs-uuid", 0).to_uuid_bytes())
    }
}

/// EROFS errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request cannot be met.
    #[error(transparent)]
    Invalid(Invalid),
    /// The tree does not fit the partition.
    #[error("the EROFS image needs {need} bytes ({blocks} blocks of 4 KiB) but the partition holds {have}; grow the partition or leave its size out (it is then the image's)")]
    NoSpace {
        /// Bytes needed.
        need: u64,
        /// Blocks needed.
        blocks: u64,
        /// Bytes available.
        have: u64,
    },
    /// An extended attribute namespace EROFS cannot store.
    #[error("{path}: extended attribute {name:?} is not supported by EROFS (user., trusted., security. and the POSIX ACLs are)")]
    UnsupportedXattr {
        /// Path of the node.
        path: String,
        /// Full attribute name.
        name: String,
    },
    /// Extended attributes too large for an inode.
    #[error("{path}: {what}")]
    XattrTooLarge {
        /// Path of the node.
        path: String,
        /// What is too large.
        what: String,
    },
    /// A name longer than 255 bytes.
    #[error("{path}: names hold at most 255 bytes")]
    NameTooLong {
        /// Path of the node.
        path: String,
    },
    /// The image would need more than 2^32 blocks or nids beyond the format's reach.
    #[error("the tree is too large for EROFS: {what}")]
    TooLarge {
        /// What overflowed.
        what: &'static str,
    },
    /// The tree is inconsistent (a child that is no node, a cycle).
    #[error("the tree is inconsistent: {0}")]
    Tree(String),
    /// Reading file content failed.
    #[error(transparent)]
    Content(#[from] ContentError),
    /// The sink refused a write.
    #[error("writing the EROFS image at byte {offset} failed: {source}")]
    Sink {
        /// Offset inside the partition.
        offset: u64,
        /// The sink's error.
        #[source]
        source: Box<dyn core::error::Error + Send + Sync>,
    },
}

/// A UUID as text, lower-case (as `blkid` prints it).
#[must_use]
pub fn uuid_string(u: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Plans the image of `tree`: every inode, xattr and block placed, the size known. Errors
/// when it does not fit the partition.
pub fn plan(req: &ErofsRequest, tree: &Tree) -> Result<ErofsPlan, Error> {
    req.options.validate().map_err(Error::Invalid)?;
    if let Some(l) = &req.label {
        validate_label(l).map_err(Error::Invalid)?;
    }
    let lay = layout::Layout::new(tree, req)?;
    let need = lay.total_blocks.saturating_mul(u64::from(BLOCK_BYTES));
    if need > req.partition_size_bytes {
        return Err(Error::NoSpace {
            need,
            blocks: lay.total_blocks,
            have: req.partition_size_bytes,
        });
    }
    Ok(plan_of(
        req,
        Some(lay.total_blocks),
        Some(lay.inodes.len() as u64),
    ))
}

/// The bytes the image of `tree` takes (whole 4 KiB blocks), for a partition without a size.
pub fn image_bytes(req: &ErofsRequest, tree: &Tree) -> Result<u64, Error> {
    req.options.validate().map_err(Error::Invalid)?;
    let lay = layout::Layout::new(tree, req)?;
    Ok(lay.total_blocks.saturating_mul(u64::from(BLOCK_BYTES)))
}

/// The plan's fields for `req` (blocks and inodes as known), also for the `mkfs.erofs`
/// backend before it runs.
#[must_use]
pub fn plan_of(req: &ErofsRequest, blocks: Option<u64>, inodes: Option<u64>) -> ErofsPlan {
    let mut p = ErofsPlan {
        kind: "erofs".into(),
        label: req.label.clone(),
        uuid: Some(uuid_string(&req.uuid())),
        block_bytes: BLOCK_BYTES,
        blocks,
        inodes,
        compression: match req.options.compressor() {
            None => "none".into(),
            Some("lz4hc") => "lz4".into(),
            Some(c) => c.into(),
        },
        features: (req.options.compressor().is_none()).then(|| vec!["sb_csum".into()]),
        verity: None,
        aligned: true,
    };
    p.aligned = p.alignment_holds(req.erase_block_bytes);
    p
}

/// Writes the image of `tree` planned as `plan` into `sink` (the partition, starting at 0).
/// File data goes through [`BlockSink::write_content`] (by reference in an `ImageMap`).
pub fn write<S: BlockSink + ?Sized>(
    sink: &mut S,
    req: &ErofsRequest,
    plan: &ErofsPlan,
    tree: &Tree,
    content: &dyn ContentSource,
) -> Result<(), Error> {
    let lay = layout::Layout::new(tree, req)?;
    if Some(lay.total_blocks) != plan.blocks {
        return Err(Error::Tree(format!(
            "the tree changed since it was planned ({} blocks planned, {} now)",
            plan.blocks.unwrap_or(0),
            lay.total_blocks
        )));
    }
    write::write(sink, req, &lay, tree, content)
}
