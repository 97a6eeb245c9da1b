//! The in-memory inode ([`Ino`]), its on-disk record, and the inode tables.

use blockwise_geometry::BlockSink;

use super::{put, Prepared, EXTENTS_FL, S_IFDIR};
use crate::csum::{crc32c_raw, inode_seed};
use crate::xattr::{self, Attr};
use crate::Error;

/// What an inode holds besides its extents.
#[derive(Clone, Debug)]
pub(super) enum Body {
    /// Extent-mapped data from a content handle (regular files).
    Content(u64),
    /// A directory's blocks, built already.
    Dir(Vec<u8>),
    /// A slow symlink's target (one block).
    SlowLink(Vec<u8>),
    /// `i_block` verbatim (fast symlinks, devices).
    Raw([u8; 60]),
    /// Journal: extents only, superblock written separately.
    Journal,
    /// Nothing (fifos, sockets, empty files).
    None,
}

/// One inode to write.
#[derive(Clone, Debug)]
pub(super) struct Ino {
    pub ino: u32,
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub links: u32,
    pub time: i64,
    pub nsec: u32,
    pub flags: u32,
    pub body: Body,
    /// Data block runs per logical run: `(logical block, count)`, before allocation.
    pub want: Vec<(u64, u64)>,
    /// `(logical, len ≤ 32768, physical)`.
    pub extents: Vec<(u64, u64, u64)>,
    pub tree_blocks: Vec<u64>,
    pub attrs: Vec<Attr>,
    pub attrs_in_inode: bool,
    pub xattr_block: Option<u64>,
}

impl Ino {
    pub fn new(ino: u32, mode: u16, time: i64) -> Ino {
        Ino {
            ino,
            mode,
            uid: 0,
            gid: 0,
            size: 0,
            links: 1,
            time,
            nsec: 0,
            flags: 0,
            body: Body::None,
            want: Vec::new(),
            extents: Vec::new(),
            tree_blocks: Vec::new(),
            attrs: Vec::new(),
            attrs_in_inode: false,
            xattr_block: None,
        }
    }
    pub fn data_blocks(&self) -> u64 {
        self.extents.iter().map(|e| e.1).sum::<u64>()
            + self.tree_blocks.len() as u64
            + u64::from(self.xattr_block.is_some())
    }
}

impl Prepared {
    /// Serializes one inode (with checksum).
    pub(super) fn inode_bytes(&self, r: &Ino) -> Vec<u8> {
        let g = &self.geo;
        let isz = g.inode_size as usize;
        let mut b = vec![0u8; isz];
        let put16 = |b: &mut [u8], o: usize, v: u16| b[o..o + 2].copy_from_slice(&v.to_le_bytes());
        let put32 = |b: &mut [u8], o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
        put16(&mut b, 0x00, r.mode);
        put16(&mut b, 0x02, r.uid as u16);
        put32(&mut b, 0x04, r.size as u32);
        let secs = r.time as u32;
        put32(&mut b, 0x08, secs);
        put32(&mut b, 0x0C, secs);
        put32(&mut b, 0x10, secs);
        put16(&mut b, 0x18, r.gid as u16);
        put16(&mut b, 0x1A, r.links as u16);
        let sectors = r.data_blocks() * (g.bs / 512);
        put32(&mut b, 0x1C, sectors as u32);
        put32(&mut b, 0x20, r.flags);
        match &r.body {
            Body::Raw(raw) => b[0x28..0x64].copy_from_slice(raw),
            _ if r.flags & EXTENTS_FL != 0 => {
                let (root, _) = self.extent_tree(r);
                b[0x28..0x64].copy_from_slice(&root);
            }
            _ => {}
        }
        if let Some(x) = r.xattr_block {
            put32(&mut b, 0x68, x as u32);
            put16(&mut b, 0x76, (x >> 32) as u16);
        }
        put32(&mut b, 0x6C, (r.size >> 32) as u32);
        put16(&mut b, 0x74, (sectors >> 32) as u16);
        put16(&mut b, 0x78, (r.uid >> 16) as u16);
        put16(&mut b, 0x7A, (r.gid >> 16) as u16);
        let extra = isz >= 160;
        if extra {
            put16(&mut b, 0x80, 32);
            let epoch = ((r.time - i64::from(r.time as i32)) >> 32) as u32 & 3;
            let ex = (r.nsec << 2) | epoch;
            put32(&mut b, 0x84, ex);
            put32(&mut b, 0x88, ex);
            put32(&mut b, 0x8C, ex);
            put32(&mut b, 0x90, secs);
            put32(&mut b, 0x94, ex);
            if r.attrs_in_inode && !r.attrs.is_empty() {
                xattr::write_in_inode(&mut b[160..], &r.attrs);
            }
        }
        if let Some(seed) = self.csum() {
            let c = crc32c_raw(inode_seed(seed, r.ino, 0), &b);
            put16(&mut b, 0x7C, c as u16);
            if extra {
                put16(&mut b, 0x82, (c >> 16) as u16);
            }
        }
        b
    }

    /// Writes the used part of every inode table; returns the directories per group.
    pub(super) fn write_inode_tables<S: BlockSink + ?Sized>(
        &self,
        sink: &mut S,
    ) -> Result<Vec<u64>, Error> {
        let g = &self.geo;
        let bs = g.bs;
        let isz = g.inode_size;
        let mut dirs_per_group: Vec<u64> = vec![0; g.groups as usize];
        let mut k = 0;
        while k < self.inodes.len() {
            let grp = (u64::from(self.inodes[k].ino) - 1) / g.ipg;
            let mut table: Vec<u8> = Vec::new();
            while k < self.inodes.len() && (u64::from(self.inodes[k].ino) - 1) / g.ipg == grp {
                let r = &self.inodes[k];
                let slot = (u64::from(r.ino) - 1) % g.ipg;
                let off = (slot * isz) as usize;
                if table.len() < off + isz as usize {
                    table.resize(off + isz as usize, 0);
                }
                table[off..off + isz as usize].copy_from_slice(&self.inode_bytes(r));
                if r.mode & 0xF000 == S_IFDIR {
                    dirs_per_group[grp as usize] += 1;
                }
                k += 1;
            }
            put(sink, g.loc[grp as usize].inode_table * bs, &table)?;
        }
        Ok(dirs_per_group)
    }
}
