//! Native squashfs 4.0 writer: a compressed, read-only filesystem image from a [`Tree`], in
//! Rust (the compressors too, but zstd, which is libzstd on the host and in the browser).
//!
//! The image is written front to back: the superblock's place, the data blocks and fragment
//! blocks as each file is reached (compressed one block at a time, so memory holds a block,
//! not a file), then the inode, directory, fragment, id and xattr tables, which are kept in
//! memory (compressed) until then, and last the superblock. A host writes into a temp file
//! and references it; the browser into its in-memory image.
//!
//! ```
//! use blockwise_geometry::{Meta, NodeKind, Tree};
//! use blockwise_squashfs::{write, Compression, SquashfsOptions, SquashfsRequest};
//!
//! let mut tree = Tree::default();
//! tree.add(0, "hello.txt", NodeKind::File { size: 5, content: 0, data_ranges: None, link: None },
//!          Meta { mode: 0o644, ..Meta::default() }).unwrap();
//! let contents = vec![b"hello".to_vec()];
//! let req = SquashfsRequest {
//!     partition_size_bytes: 1 << 20,
//!     options: SquashfsOptions { compression: Compression::Xz, ..SquashfsOptions::default() },
//!     timestamp: 1_700_000_000,
//! };
//! let mut img = vec![0u8; 1 << 20];
//! let w = write(&mut img, &req, &tree, &contents).unwrap();
//! assert_eq!(&img[..4], b"hsqs");
//! assert_eq!(w.inodes, 2);
//! assert_eq!(w.padded_bytes % 4096, 0);
//! ```
//!
//! ```text
//! 0      superblock (96 B) [lz4's compressor options]
//!        data blocks and fragment blocks, in the order files are reached (post-order)
//!        inode table │ directory table │ fragment table + index │ id table + index │ xattrs
//! bytes_used, padded with zeros to 4 KiB
//! ```

mod compress;
mod meta;
mod options;
pub mod raw;
mod write;

pub use options::{Compression, Invalid, SquashfsBackend, SquashfsOptions};

use blockwise_geometry::{BlockSink, ContentError, ContentSource, NodeKind, SquashfsPlan, Tree};

/// What the writer needs to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SquashfsRequest {
    /// Room for the image: the partition size (an `ImageMap` window), or `u64::MAX` when it
    /// is written to a file first.
    pub partition_size_bytes: u64,
    /// Spec options.
    pub options: SquashfsOptions,
    /// Filesystem creation time (`mkfs_time`).
    pub timestamp: i64,
}

/// What [`write()`] produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Bytes of the filesystem (`bytes_used`).
    pub bytes_used: u64,
    /// Bytes written, `bytes_used` padded to 4 KiB.
    pub padded_bytes: u64,
    /// Inodes.
    pub inodes: u64,
    /// Extended attribute names squashfs cannot store (it has `user.`, `trusted.` and
    /// `security.` only; POSIX ACLs are left out, as mksquashfs does).
    pub dropped_xattrs: Vec<String>,
}

/// squashfs errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request cannot be met.
    #[error(transparent)]
    Invalid(Invalid),
    /// The image does not fit the partition.
    #[error("the squashfs image needs more than the partition's {have} bytes; grow the partition or leave its size out (it is then the image's)")]
    NoSpace {
        /// Bytes available.
        have: u64,
    },
    /// A limit of the format.
    #[error("the tree is too large for squashfs: {what}")]
    TooLarge {
        /// What overflowed.
        what: String,
    },
    /// The tree is inconsistent.
    #[error("the tree is inconsistent: {0}")]
    Tree(String),
    /// A compressor failed.
    #[error("{0} compression failed")]
    Compress(&'static str),
    /// Reading file content failed.
    #[error(transparent)]
    Content(#[from] ContentError),
    /// The sink refused a write.
    #[error("writing the squashfs image at byte {offset} failed: {source}")]
    Sink {
        /// Offset inside the partition.
        offset: u64,
        /// The sink's error.
        #[source]
        source: Box<dyn core::error::Error + Send + Sync>,
    },
}

/// Inodes of `tree` (hard links counted once).
#[must_use]
pub fn count_inodes(tree: &Tree) -> u64 {
    let mut links = std::collections::BTreeSet::new();
    tree.nodes
        .iter()
        .filter(|n| match n.kind {
            NodeKind::File { link: Some(l), .. } => links.insert(l),
            _ => true,
        })
        .count() as u64
}

/// The plan's fields (the size as known).
#[must_use]
pub fn plan_of(
    options: &SquashfsOptions,
    bytes_used: Option<u64>,
    inodes: Option<u64>,
) -> SquashfsPlan {
    let mut p = SquashfsPlan {
        kind: "squashfs".into(),
        compression: options.compression.as_str().into(),
        block_bytes: options.block_size,
        bytes_used,
        inodes,
        verity: None,
        aligned: true,
    };
    p.aligned = p.alignment_holds();
    p
}

/// Writes the squashfs image of `tree` into `sink` from offset 0.
pub fn write<S: BlockSink + ?Sized>(
    sink: &mut S,
    req: &SquashfsRequest,
    tree: &Tree,
    content: &dyn ContentSource,
) -> Result<Written, Error> {
    write::write(sink, req, tree, content)
}
