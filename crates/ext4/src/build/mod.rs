//! From a [`Tree`] to bytes: inode numbering, block allocation (metadata only, no
//! content read), then streaming everything into the sink.
//!
//! [`Prepared::new`] decides everything: [`numbering`] gives every node its inode number,
//! [`records`] turns nodes into [`inode::Ino`] records (directory blocks, symlinks, xattrs),
//! [`alloc`] places their blocks. [`Prepared::write`] then writes file data ([`data`]), the
//! [`journal`] superblock, the inode tables ([`inode`]), bitmaps and descriptors
//! ([`groups`]) and finally the superblocks with the descriptor copies ([`superblock`]).

mod alloc;
mod blockmap;
mod data;
mod extent;
mod groups;
mod inode;
mod journal;
mod numbering;
mod records;
mod superblock;

use blockwise_geometry::{BlockSink, ContentSource, Tree};

pub(crate) use superblock::uuid_string;

use crate::csum::crc32c_raw;
use crate::features::Features;
use crate::geom::Geometry;
use crate::raw::GOOD_OLD_FIRST_INO;
use crate::{Error, Ext4Request};
use inode::{Ino, Plain};
use numbering::{inodes_needed, Numbering};
use records::Records;
use superblock::{hash_seed_for, label_bytes, uuid_for};

/// lost+found's inode: the first non-reserved one, as mke2fs makes it.
const LOST_FOUND: u32 = GOOD_OLD_FIRST_INO;

/// Everything decided before any byte is written.
pub(crate) struct Prepared {
    pub geo: Geometry,
    pub uuid: [u8; 16],
    hash_seed: [u32; 4],
    csum_seed: u32,
    inodes: Vec<Ino>,
    /// The inodes without blocks, attributes or size (most of a tree of empty files).
    plain: Vec<Plain>,
    /// Inode numbers used (highest).
    last_ino: u32,
    timestamp: i64,
    label: [u8; 16],
    /// Inodes the tree needs (reserved ones and lost+found included).
    pub need_inodes: u64,
    /// Blocks the inodes' data, directories, extent trees and xattr blocks took.
    pub data_blocks: u64,
}

impl Prepared {
    /// Lays out the whole filesystem: geometry, inodes, directories, block allocation.
    pub fn new(
        req: &Ext4Request,
        tree: &Tree,
        inodes_exact: Option<u64>,
    ) -> Result<Prepared, Error> {
        let feat = Features::resolve(&req.options)?;
        let need_inodes = inodes_needed(tree);
        let mut geo = Geometry::new(req, feat, need_inodes, inodes_exact)?;
        if geo.inodes() < need_inodes {
            return Err(Error::NoSpace {
                more_blocks: 0,
                more_inodes: need_inodes - geo.inodes(),
                block_bytes: geo.bs,
            });
        }
        let uuid = uuid_for(req);
        let hash_seed = hash_seed_for(req);
        let csum_seed = crc32c_raw(0xffff_ffff, &uuid);
        let num = Numbering::new(tree);
        let (mut inodes, plain) = Records {
            tree,
            num: &num,
            geo: &geo,
            hash_seed,
            csum_seed,
        }
        .build(req.timestamp)?;
        let free_before = geo.used.free_total();
        alloc::allocate(&mut geo, &mut inodes)?;
        let data_blocks = free_before - geo.used.free_total();
        let label = label_bytes(req)?;
        Ok(Prepared {
            geo,
            uuid,
            hash_seed,
            csum_seed,
            inodes,
            plain,
            last_ino: num.last_ino,
            timestamp: req.timestamp,
            label,
            need_inodes,
            data_blocks,
        })
    }

    /// The filesystem checksum seed, when metadata_csum is on.
    fn csum(&self) -> Option<u32> {
        self.geo.feat.metadata_csum.then_some(self.csum_seed)
    }

    /// Writes the filesystem.
    pub fn write<S: BlockSink + ?Sized>(
        mut self,
        sink: &mut S,
        content: &dyn ContentSource,
    ) -> Result<(), Error> {
        let g = &self.geo;
        let bs = g.bs;
        if sink.len() < g.blocks * bs {
            return Err(Error::Invalid(crate::Invalid::new(
                crate::Field::Size,
                format!(
                    "the sink holds {} bytes, the filesystem needs {}",
                    sink.len(),
                    g.blocks * bs
                ),
            )));
        }
        self.write_data(sink, content)?;
        self.write_journal_superblock(sink)?;
        let dirs_per_group = self.write_inode_tables(sink)?;
        let tables = self.write_groups(sink, &dirs_per_group)?;
        self.write_superblocks(sink, &tables)
    }
}

/// Writes `data` at byte `offset` of the partition.
fn put<S: BlockSink + ?Sized>(sink: &mut S, offset: u64, data: &[u8]) -> Result<(), Error> {
    sink.write_at(offset, data).map_err(|e| Error::Sink {
        offset,
        source: Box::new(e),
    })
}
