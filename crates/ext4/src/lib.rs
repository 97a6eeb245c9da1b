//! Native ext4 writer: a fresh, flash-aligned ext4 filesystem from a [`Tree`], in pure Rust,
//! without root or external tools.
//!
//! The writer lays out everything first (geometry, inode numbers, directory blocks and
//! block allocation: metadata only), then streams file contents in 1 MiB chunks into the
//! sink, so memory grows with the number of files, not their size.
//!
//! ```
//! use blockwise_ext4::{plan, write, Ext4Options, Ext4Request};
//! use blockwise_geometry::{Meta, NodeKind, SparseImage, Tree};
//!
//! let mut tree = Tree::default();
//! tree.add(0, "hello.txt", NodeKind::File { size: 5, content: 0, data_ranges: None, link: None },
//!          Meta { mode: 0o644, ..Meta::default() }).unwrap();
//! let contents = vec![b"hello".to_vec()];
//! let req = Ext4Request {
//!     partition_start_bytes: 4 << 20,
//!     partition_size_bytes: 64 << 20,
//!     erase_block_bytes: 4 << 20,
//!     options: Ext4Options::default(),
//!     label: Some("rootfs".into()),
//!     seed: 1,
//!     timestamp: 1_700_000_000,
//! };
//! let p = plan(&req, Some(&tree)).unwrap();
//! assert_eq!(p.block_bytes, 4096);
//! assert_eq!(p.stride, 1024);
//! assert!(p.aligned);
//! let mut img = SparseImage::new(req.partition_size_bytes);
//! write(&mut img, &req, &p, &tree, &contents).unwrap();
//! ```
//!
//! Layout (4 KiB blocks, flex_bg):
//! ```text
//! block 0        [boot 1 KiB][superblock][pad]     group descriptors from block 1
//! after the GDT  block bitmaps ×16, inode bitmaps ×16
//! next erase-block boundary   inode tables of 16 groups (itable_unused spares the tail)
//! data …   middle group: the journal, on an erase-block boundary   … data
//! groups 1, 3, 5, 7, 9, 25, 27, …: superblock + descriptor backups
//! ```

//! What it writes: `has_journal` (clean JBD2 v2 journal sized like mke2fs), `extent`, `flex_bg`,
//! `64bit`, `metadata_csum` (crc32c on superblock, descriptors, bitmaps, inodes, extent
//! blocks, directory leaves and htree nodes), `dir_index` (htree directories, one or two
//! index levels, for every directory larger than one block), `dir_nlink`, `extra_isize`,
//! `huge_file`, `sparse_super`, `filetype`, `large_file`, `ext_attr`; the `compat` profile
//! drops `metadata_csum` and `64bit` and uses `uninit_bg` (crc16 descriptors) instead, so
//! unused inode-table tails never need writing. 256-byte inodes with nanosecond times,
//! fast and slow symlinks, hard links, device nodes, fifos, sockets, sparse files and
//! extended attributes (in the inode, else one block).
//!
//! Not written: `resize_inode`, `orphan_file`, `inline_data`, `bigalloc`, block-mapped
//! (non-extent) files, POSIX ACL attributes, more than two htree levels.
//!
//! The on-disk layouts (superblock, descriptors, inodes, extents, directories, xattrs, the
//! JBD2 superblock) and the feature flags with their mke2fs names are in [`raw`]; the
//! checksums (raw CRC32C, crc16, the htree hash) in [`csum`]. Readers such as the verifier
//! use both.

mod auto;
mod build;
pub mod csum;
mod dir;
mod features;
mod geom;
mod options;
pub mod raw;
mod xattr;

pub use auto::{kernel_reserve_blocks, smallest, AutoExt4};
pub use features::Features;
pub use options::{validate_label, Ext4Backend, Ext4Options, Ext4Profile, ExtKind, Field, Invalid};

use blockwise_geometry::{BlockSink, ContentError, ContentSource, Ext4Plan, Tree};

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
    /// A feature this writer cannot produce was requested.
    #[error(
        "ext4 feature {name:?} is not supported by the native writer (try backend = \"mke2fs\")"
    )]
    UnsupportedFeature {
        /// The feature, mke2fs spelling.
        name: String,
    },
    /// The tree does not fit.
    #[error("the ext4 filesystem is too small: it needs {more_blocks} more blocks ({} KiB) and {more_inodes} more inodes; grow the partition{}", more_blocks * block_bytes / 1024, if *more_inodes > 0 { " or set ext4.inodes" } else { "" })]
    NoSpace {
        /// Blocks missing.
        more_blocks: u64,
        /// Inodes missing.
        more_inodes: u64,
        /// Block size, to turn blocks into bytes.
        block_bytes: u64,
    },
    /// A file larger than ext2/ext3 block maps hold (12 + P + P² + P³ blocks).
    #[error("{path} is {size} bytes; a block-mapped ({kind}) filesystem of {block_bytes}-byte blocks holds files of at most {max} bytes: use a larger ext4.block-size or fs = \"ext4\"")]
    FileTooLarge {
        /// Path of the file.
        path: String,
        /// Its size.
        size: u64,
        /// The most a block map holds.
        max: u64,
        /// ext2 or ext3.
        kind: &'static str,
        /// Block size.
        block_bytes: u64,
    },
    /// An extended attribute namespace ext4 cannot store.
    #[error(
        "extended attribute {name:?} is not supported (use user., trusted., security. or system.)"
    )]
    UnsupportedXattr {
        /// Full attribute name.
        name: String,
    },
    /// A node's extended attributes exceed the inode's spare room plus one block.
    #[error("the extended attributes of {path} ({bytes} bytes of names and values) do not fit the inode and one {block_bytes}-byte filesystem block")]
    XattrTooLarge {
        /// Path of the node.
        path: String,
        /// Bytes of names and values.
        bytes: usize,
        /// Block size.
        block_bytes: u64,
    },
    /// A POSIX ACL value that is not in the xattr format (version 2, 8-byte entries).
    #[error("extended attribute {name:?} is not a valid POSIX ACL")]
    BadAcl {
        /// Full attribute name.
        name: String,
    },
    /// An extended attribute of a node that ext4 cannot store.
    #[error("{path}: {source}")]
    XattrOf {
        /// Path of the node.
        path: String,
        /// What is wrong.
        #[source]
        source: Box<Error>,
    },
    /// A directory entry name ext4 cannot store.
    #[error("{path}: entry name {name:?} is empty, longer than 255 bytes or contains '/' or NUL")]
    BadName {
        /// Directory path.
        path: String,
        /// The name.
        name: String,
    },
    /// A symlink target that is empty or not shorter than a block.
    #[error("{path}: symlink target of {len} bytes must be 1 to block size - 1 bytes")]
    BadSymlink {
        /// Path of the link.
        path: String,
        /// Target length.
        len: usize,
    },
    /// More than 65000 links to one file or directory.
    #[error("{path} has more than 65000 links")]
    TooManyLinks {
        /// Path.
        path: String,
    },
    /// A directory too large for a two-level htree.
    #[error("a directory with {entries} entries exceeds a two-level htree")]
    DirectoryTooLarge {
        /// Entry count.
        entries: u64,
    },
    /// The plan passed to [`write()`] is not what [`plan()`] gives for this request.
    #[error("the ext4 plan does not match the request: {what}")]
    PlanMismatch {
        /// Which field differs.
        what: &'static str,
    },
    /// Reading file content failed.
    #[error(transparent)]
    Content(#[from] ContentError),
    /// The sink failed.
    #[error("writing at byte {offset} of the ext4 partition failed")]
    Sink {
        /// Offset inside the partition.
        offset: u64,
        /// The backend's error.
        #[source]
        source: Box<dyn core::error::Error + Send + Sync>,
    },
}

/// Plans the ext4 geometry of one partition. `tree` (when known) sizes the inode count and
/// is checked to fit.
pub fn plan(req: &Ext4Request, tree: Option<&Tree>) -> Result<Ext4Plan, Error> {
    match plan_once(req, tree) {
        Err(Error::NoSpace {
            more_blocks,
            more_inodes,
            block_bytes,
        }) if more_blocks > 0 => Err(Error::NoSpace {
            more_blocks: sufficient_growth(req, tree, more_blocks, block_bytes),
            more_inodes,
            block_bytes,
        }),
        other => other,
    }
}

fn plan_once(req: &Ext4Request, tree: Option<&Tree>) -> Result<Ext4Plan, Error> {
    let empty = Tree::default();
    let prep = build::Prepared::new(req, tree.unwrap_or(&empty), None)?;
    Ok(to_plan(req, &prep))
}

/// How many blocks the partition must grow by so that the tree fits, starting from the
/// first shortfall `first`: a bigger filesystem has more groups, a bigger journal and so more
/// metadata, so the first count is re-planned until it is enough (at most 16 rounds) and the
/// hint is sufficient in one step. Sizes are tried exactly (no erase-block rounding), so the
/// hint holds whatever the layout rounds to.
fn sufficient_growth(req: &Ext4Request, tree: Option<&Tree>, first: u64, bs: u64) -> u64 {
    let mut grow = first;
    for _ in 0..16 {
        let trial = Ext4Request {
            partition_size_bytes: req
                .partition_size_bytes
                .saturating_add(grow.saturating_mul(bs)),
            ..req.clone()
        };
        match plan_once(&trial, tree) {
            Err(Error::NoSpace { more_blocks, .. }) if more_blocks > 0 => {
                grow = grow.saturating_add(more_blocks);
            }
            _ => return grow,
        }
    }
    grow
}

fn to_plan(req: &Ext4Request, prep: &build::Prepared) -> Ext4Plan {
    let g = &prep.geo;
    let abs = |b: u64| req.partition_start_bytes + b * g.bs;
    if req.options.backend == Ext4Backend::Mke2fs {
        // mke2fs places the inode tables itself, and the journal where this writer would
        // when those blocks are free (-J location): the journal offset here is the request;
        // the host reads back what mke2fs laid out (a dry run for `plan`, the result for
        // `build`) and replaces both.
        let mut notes = vec![
            "backend = mke2fs: geometry, UUID, hash seed, RAID hints, features and the journal's place are passed to mke2fs, which lays out the inode tables itself; `blockwise plan` reads back where it puts them from a dry run of mke2fs.".to_string(),
        ];
        notes.extend(
            g.notes
                .iter()
                .filter(|n| n.starts_with("stride") || n.starts_with("The partition"))
                .cloned(),
        );
        let mut plan = Ext4Plan {
            kind: g.feat.flags().kind().to_string(),
            label: req.label.clone().filter(|l| !l.is_empty()),
            uuid: Some(build::uuid_string(&prep.uuid)),
            block_bytes: g.bs as u32,
            blocks: g.blocks,
            inodes: g.inodes(),
            stride: g.stride,
            stripe_width: g.stripe_width,
            journal_start_bytes: g.journal.first().map(|j| abs(j.0)),
            inode_table_start_bytes: None,
            features: g.feat.names(),
            aligned: false,
            notes,
        };
        plan.aligned = plan.alignment_holds(req.partition_start_bytes, req.erase_block_bytes);
        return plan;
    }
    let mut plan = Ext4Plan {
        kind: g.feat.flags().kind().to_string(),
        label: req.label.clone().filter(|l| !l.is_empty()),
        uuid: Some(build::uuid_string(&prep.uuid)),
        block_bytes: g.bs as u32,
        blocks: g.blocks,
        inodes: g.inodes(),
        stride: g.stride,
        stripe_width: g.stripe_width,
        journal_start_bytes: g.journal.first().map(|j| abs(j.0)),
        inode_table_start_bytes: g.loc.first().map(|l| abs(l.inode_table)),
        features: g.feat.names(),
        aligned: false,
        notes: g.notes.clone(),
    };
    plan.aligned = plan.alignment_holds(req.partition_start_bytes, req.erase_block_bytes);
    // The geometry's journal note promises an erase-block start; say so when there was no room.
    if let Some(j) = plan.journal_start_bytes {
        let e = req.erase_block_bytes;
        if e != 0 && j % e != 0 {
            for n in &mut plan.notes {
                if n.contains("journal (sized like mke2fs)") {
                    *n = format!(
                        "The journal cannot start on an erase-block boundary here (the filesystem is too small for that placement, or its start is off the erase block): it starts at {j} B, so this partition is marked NO and verify reports ext4-journal-not-aligned; a few more erase blocks of size fix it."
                    );
                }
            }
        }
    }
    plan
}

/// Writes the filesystem into `sink` (a window onto exactly the partition). `plan` must be
/// what [`plan()`] returned for `req` (its inode count is reproduced).
pub fn write<S: BlockSink + ?Sized>(
    sink: &mut S,
    req: &Ext4Request,
    plan: &Ext4Plan,
    tree: &Tree,
    content: &dyn ContentSource,
) -> Result<(), Error> {
    let prep = build::Prepared::new(req, tree, Some(plan.inodes))?;
    let mine = to_plan(req, &prep);
    if mine.blocks != plan.blocks {
        return Err(Error::PlanMismatch { what: "blocks" });
    }
    if mine.inodes != plan.inodes {
        return Err(Error::PlanMismatch { what: "inodes" });
    }
    if mine.block_bytes != plan.block_bytes {
        return Err(Error::PlanMismatch {
            what: "block_bytes",
        });
    }
    prep.write(sink, content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::{Meta, NodeKind, SparseImage};

    fn req(start: u64, size: u64, opts: Ext4Options) -> Ext4Request {
        Ext4Request {
            partition_start_bytes: start,
            partition_size_bytes: size,
            erase_block_bytes: 4 << 20,
            options: opts,
            label: Some("root".into()),
            seed: 7,
            timestamp: 1_700_000_000,
        }
    }

    fn files(n: usize, size: u64) -> Tree {
        let mut t = Tree::default();
        for i in 0..n {
            t.add(
                0,
                format!("f{i}"),
                NodeKind::File {
                    size,
                    content: 0,
                    data_ranges: None,
                    link: None,
                },
                Meta::default(),
            )
            .unwrap();
        }
        t
    }

    #[test]
    fn plan_is_aligned_to_the_erase_block() {
        let e = 4u64 << 20;
        let p = plan(&req(e, 1 << 30, Ext4Options::default()), None).unwrap();
        assert_eq!((p.block_bytes, p.blocks, p.inodes), (4096, 262_144, 65536));
        assert_eq!((p.stride, p.stripe_width), (1024, 1024));
        assert_eq!(p.inode_table_start_bytes.unwrap() % e, 0);
        assert_eq!(p.journal_start_bytes.unwrap() % e, 0);
        assert!(p.aligned);
        assert!(p.features.contains(&"metadata_csum".to_string()));
        assert_eq!(
            p.uuid,
            plan(&req(e, 1 << 30, Ext4Options::default()), None)
                .unwrap()
                .uuid
        );
        // Options override the RAID hints.
        let o = Ext4Options {
            stride: Some(16),
            stripe_width: Some(64),
            ..Ext4Options::default()
        };
        let p = plan(&req(e, 1 << 30, o), None).unwrap();
        assert_eq!((p.stride, p.stripe_width), (16, 64));
    }

    #[test]
    fn a_256_mib_erase_block_caps_the_default_stride_to_its_16_bit_field() {
        let e = 256u64 << 20;
        let r = Ext4Request {
            erase_block_bytes: e,
            ..req(e, 4 << 30, Ext4Options::default())
        };
        let p = plan(&r, None).unwrap();
        assert_eq!((p.stride, p.stripe_width), (32768, 65536));
        assert_eq!(e % (u64::from(p.stride) * 4096), 0);
        assert!(p.aligned);
        assert!(p.notes.iter().any(|n| n.contains("at most 65535")));
        // An explicit stride that does not fit is still refused.
        let o = Ext4Options {
            stride: Some(70_000),
            ..Ext4Options::default()
        };
        assert!(plan(&Ext4Request { options: o, ..r }, None).is_err());
    }

    #[test]
    fn misaligned_partition_is_reported() {
        let p = plan(
            &req((4 << 20) + 512, 256 << 20, Ext4Options::default()),
            None,
        )
        .unwrap();
        assert!(!p.aligned);
        assert!(p.notes.iter().any(|n| n.contains("not a multiple")));
    }

    #[test]
    fn compat_profile_and_small_blocks() {
        let o = Ext4Options {
            profile: crate::Ext4Profile::Compat,
            block_size: 1024,
            ..Ext4Options::default()
        };
        let p = plan(&req(1 << 20, 64 << 20, o), None).unwrap();
        assert_eq!(p.block_bytes, 1024);
        assert!(!p
            .features
            .iter()
            .any(|f| f == "metadata_csum" || f == "64bit"));
    }

    #[test]
    fn too_small_says_how_much_more() {
        let t = files(1, 40 << 20);
        let err = plan(&req(0, 32 << 20, Ext4Options::default()), Some(&t)).unwrap_err();
        match err {
            Error::NoSpace {
                more_blocks,
                more_inodes,
                ..
            } => {
                assert!(more_blocks > 2000 && more_inodes == 0, "{more_blocks}");
            }
            e => panic!("{e}"),
        }
        // Growing by the hint is enough in one step, also when the growth adds groups and
        // a bigger journal (the first shortfall alone undercounts there).
        for mib in (100u64..1200).step_by(150) {
            let t = files(3, mib << 20);
            let start = req(0, 32 << 20, Ext4Options::default());
            let Err(Error::NoSpace { more_blocks, .. }) = plan(&start, Some(&t)) else {
                panic!("{mib} MiB fitted into 32 MiB");
            };
            let grown = req(0, (32 << 20) + more_blocks * 4096, Ext4Options::default());
            assert!(
                plan(&grown, Some(&t)).is_ok(),
                "{mib} MiB: {more_blocks} more blocks were not enough"
            );
        }
        let o = Ext4Options {
            inodes: Some(64),
            ..Ext4Options::default()
        };
        let err = plan(&req(0, 32 << 20, o), Some(&files(100, 0))).unwrap_err();
        assert!(
            matches!(err, Error::NoSpace { more_inodes, .. } if more_inodes > 0),
            "{err}"
        );
        assert!(err.to_string().contains("more inodes"));
    }

    #[test]
    fn tree_sizes_the_inode_count() {
        let t = files(20_000, 0);
        let p = plan(&req(0, 64 << 20, Ext4Options::default()), Some(&t)).unwrap();
        assert!(p.inodes >= 20_011, "{}", p.inodes);
        let content = vec![Vec::new()];
        let mut img = SparseImage::new(64 << 20);
        write(
            &mut img,
            &req(0, 64 << 20, Ext4Options::default()),
            &p,
            &t,
            &content,
        )
        .unwrap();
        // The plan without the tree has fewer inodes: writing with it must fail clearly.
        let p0 = plan(&req(0, 64 << 20, Ext4Options::default()), None).unwrap();
        let err = write(
            &mut img,
            &req(0, 64 << 20, Ext4Options::default()),
            &p0,
            &t,
            &content,
        )
        .unwrap_err();
        assert!(
            matches!(err, Error::NoSpace { .. } | Error::PlanMismatch { .. }),
            "{err}"
        );
    }

    #[test]
    fn a_nearly_full_filesystem_uses_every_free_block() {
        // 16 MiB: the gap before the erase-block-aligned inode table must be used too.
        let r = req(
            0,
            16 << 20,
            Ext4Options {
                journal: false,
                ..Ext4Options::default()
            },
        );
        let p0 = plan(&r, None).unwrap();
        let mut img = SparseImage::new(16 << 20);
        write(&mut img, &r, &p0, &Tree::default(), &Vec::<Vec<u8>>::new()).unwrap();
        let mut sb = vec![0u8; 1024];
        blockwise_geometry::BlockSource::read_at(&img, 1024, &mut sb).unwrap();
        let free = u64::from(u32::from_le_bytes([sb[12], sb[13], sb[14], sb[15]]));
        // Every free block can hold file data (the root directory block stays the same).
        let t = files(1, free * 4096);
        let p = plan(&r, Some(&t)).unwrap();
        let content = vec![vec![7u8; (free * 4096) as usize]];
        let mut img = SparseImage::new(16 << 20);
        write(&mut img, &r, &p, &t, &content).unwrap();
        // One block more does not fit; the hint (one block short at first, re-planned until
        // sufficient) is small and enough.
        let t = files(1, (free + 1) * 4096);
        let Err(Error::NoSpace { more_blocks, .. }) = plan(&r, Some(&t)) else {
            panic!("{} blocks fitted into {free} free blocks", free + 1);
        };
        assert!((1..=64).contains(&more_blocks), "{more_blocks}");
        let grown = Ext4Request {
            partition_size_bytes: (16 << 20) + more_blocks * 4096,
            ..r.clone()
        };
        assert!(plan(&grown, Some(&t)).is_ok());
    }

    #[test]
    fn bad_options_name_the_key() {
        let field = |r: &Ext4Request| match plan(r, None) {
            Err(Error::Invalid(i)) => Some(i.field),
            _ => None,
        };
        let o = Ext4Options {
            block_size: 8192,
            ..Ext4Options::default()
        };
        assert_eq!(field(&req(0, 64 << 20, o)), Some(Field::BlockSize));
        let o = Ext4Options {
            inode_size: 100,
            ..Ext4Options::default()
        };
        assert_eq!(field(&req(0, 64 << 20, o)), Some(Field::InodeSize));
        let mut r = req(0, 64 << 20, Ext4Options::default());
        r.label = Some("a-label-that-is-too-long".into());
        assert_eq!(field(&r), Some(Field::Label));
    }
}
