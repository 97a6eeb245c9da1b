//! The in-memory inode ([`Ino`]), its on-disk record, and the inode tables.

use core::mem::size_of;

use blockwise_geometry::BlockSink;
use zerocopy::{FromZeros, IntoBytes};

use super::{put, Prepared};
use crate::csum::{crc32c_raw, inode_seed};
use crate::raw::{InodeFlags, InodeRaw, GOOD_OLD_INODE_SIZE, N_BLOCKS, S_IFDIR, S_IFMT};
use crate::xattr::{self, Attr};
use crate::Error;

/// Bytes of an inode record holding every [`InodeRaw`] field; in-inode xattrs follow.
pub(super) const INODE_RAW: usize = size_of::<InodeRaw>();
/// `i_extra_isize` (and `s_{min,want}_extra_isize`): all of [`InodeRaw`] is used.
pub(super) const EXTRA_ISIZE: u16 = INODE_RAW as u16 - GOOD_OLD_INODE_SIZE;

/// What an inode holds besides its extents.
#[derive(Clone, Debug)]
pub(super) enum Body {
    /// Extent-mapped data from a content handle (regular files).
    Content(u64),
    /// A directory's blocks, built already.
    Dir(Vec<u8>),
    /// A slow symlink's target (one block).
    SlowLink(Vec<u8>),
    /// `i_block` verbatim (fast symlinks, devices); boxed, so that every other inode's
    /// record stays small.
    Raw(Box<[u8; N_BLOCKS * 4]>),
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
    pub flags: InodeFlags,
    pub body: Body,
    /// Data block runs per logical run: `(logical block, count)`, before allocation.
    pub want: Vec<(u64, u64)>,
    /// `(logical, len ≤ 32768, physical)`.
    pub extents: Vec<(u64, u64, u64)>,
    /// What few inodes have (extent tree blocks, extended attributes), boxed: one record per
    /// file is kept until the inode tables are written, so its size is memory per file.
    pub rare: Option<Box<Rare>>,
}

/// The parts of an [`Ino`] most inodes do without.
#[derive(Clone, Debug, Default)]
pub(super) struct Rare {
    /// Blocks of the extent tree (more extents than `i_block` holds).
    pub tree_blocks: Vec<u64>,
    /// Extended attributes in the inode (after the fixed fields).
    pub inode_attrs: Vec<Attr>,
    /// Extended attributes in the xattr block (none: no block).
    pub attrs: Vec<Attr>,
    /// The xattr block, once allocated.
    pub xattr_block: Option<u64>,
}

/// The record of an inode without blocks, attributes or size (an empty file, a fifo, a
/// socket): a million empty files are a million of these, so it keeps only what its inode
/// bytes are made of (32 bytes instead of an [`Ino`]'s 136).
#[derive(Clone, Copy, Debug)]
pub(super) struct Plain {
    time: i64,
    ino: u32,
    uid: u32,
    gid: u32,
    nsec: u32,
    links: u32,
    mode: u16,
    extents: bool,
}

impl Plain {
    /// `r` as a plain record, `None` when it has blocks, attributes, a size or an `i_block`
    /// of its own.
    pub fn of(r: &Ino) -> Option<Plain> {
        let plain = r.size == 0
            && r.want.is_empty()
            && r.extents.is_empty()
            && r.rare.is_none()
            && matches!(r.body, Body::Content(_) | Body::None)
            && (r.flags - InodeFlags::EXTENTS).is_empty();
        plain.then(|| Plain {
            time: r.time,
            ino: r.ino,
            uid: r.uid,
            gid: r.gid,
            nsec: r.nsec,
            links: r.links,
            mode: r.mode,
            extents: r.flags.contains(InodeFlags::EXTENTS),
        })
    }

    /// The inode number.
    pub fn ino(&self) -> u32 {
        self.ino
    }

    /// The full record again (nothing allocated), for [`Prepared::inode_bytes`].
    fn to_ino(self) -> Ino {
        let mut r = Ino::new(self.ino, self.mode, self.time);
        r.uid = self.uid;
        r.gid = self.gid;
        r.nsec = self.nsec;
        r.links = self.links;
        if self.extents {
            r.flags = InodeFlags::EXTENTS;
        }
        r
    }
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
            flags: InodeFlags::empty(),
            body: Body::None,
            want: Vec::new(),
            extents: Vec::new(),
            rare: None,
        }
    }
    /// The rare parts, made on first use.
    pub fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }
    /// Blocks of the extent tree (none for up to four extents).
    pub fn tree_blocks(&self) -> &[u64] {
        self.rare.as_ref().map_or(&[], |x| &x.tree_blocks)
    }
    /// Extended attributes stored in the inode.
    pub fn inode_attrs(&self) -> &[Attr] {
        self.rare.as_ref().map_or(&[], |x| &x.inode_attrs)
    }
    /// Extended attributes stored in the xattr block.
    pub fn attrs(&self) -> &[Attr] {
        self.rare.as_ref().map_or(&[], |x| &x.attrs)
    }
    /// The xattr block, once allocated.
    pub fn xattr_block(&self) -> Option<u64> {
        self.rare.as_ref().and_then(|x| x.xattr_block)
    }
    pub fn data_blocks(&self) -> u64 {
        self.extents.iter().map(|e| e.1).sum::<u64>()
            + self.tree_blocks().len() as u64
            + u64::from(self.xattr_block().is_some())
    }
}

impl Prepared {
    /// Serializes one inode record of `s_inode_size` bytes (with checksum).
    fn inode_bytes(&self, r: &Ino) -> Vec<u8> {
        let g = &self.geo;
        let isz = g.inode_size as usize;
        let secs = r.time as u32;
        let sectors = r.data_blocks() * (g.bs / 512);
        let mut raw = InodeRaw::new_zeroed();
        raw.i_mode.set(r.mode);
        raw.i_uid.set(r.uid as u16);
        raw.i_size_lo.set(r.size as u32);
        raw.i_atime.set(secs);
        raw.i_ctime.set(secs);
        raw.i_mtime.set(secs);
        raw.i_gid.set(r.gid as u16);
        raw.i_links_count.set(r.links as u16);
        raw.i_blocks_lo.set(sectors as u32);
        raw.i_flags.set(r.flags.bits());
        match &r.body {
            Body::Raw(b) => raw.i_block = **b,
            _ if r.flags.contains(InodeFlags::EXTENTS) => raw.i_block = self.extent_tree(r).0,
            _ if !self.geo.feat.extents && !r.extents.is_empty() => {
                raw.i_block = self.block_map(r).0;
            }
            _ => {}
        }
        if let Some(x) = r.xattr_block() {
            raw.i_file_acl_lo.set(x as u32);
            raw.l_i_file_acl_high.set((x >> 32) as u16);
        }
        raw.i_size_high.set((r.size >> 32) as u32);
        raw.l_i_blocks_high.set((sectors >> 32) as u16);
        raw.l_i_uid_high.set((r.uid >> 16) as u16);
        raw.l_i_gid_high.set((r.gid >> 16) as u16);
        let extra = isz >= INODE_RAW;
        if extra {
            raw.i_extra_isize.set(EXTRA_ISIZE);
            let epoch = ((r.time - i64::from(r.time as i32)) >> 32) as u32 & 3;
            let ex = (r.nsec << 2) | epoch;
            raw.i_ctime_extra.set(ex);
            raw.i_mtime_extra.set(ex);
            raw.i_atime_extra.set(ex);
            raw.i_crtime.set(secs);
            raw.i_crtime_extra.set(ex);
        }
        let mut b = vec![0u8; isz];
        let n = isz.min(INODE_RAW);
        b[..n].copy_from_slice(&raw.as_bytes()[..n]);
        if extra && !r.inode_attrs().is_empty() {
            xattr::write_in_inode(&mut b[INODE_RAW..], r.inode_attrs());
        }
        if let Some(seed) = self.csum() {
            let c = crc32c_raw(inode_seed(seed, r.ino, 0), &b);
            raw.l_i_checksum_lo.set(c as u16);
            if extra {
                raw.i_checksum_hi.set((c >> 16) as u16);
            }
            b[..n].copy_from_slice(&raw.as_bytes()[..n]);
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
        if !g.feat.metadata_csum && !g.feat.uninit_bg {
            // Without descriptor checksums every inode of every table is read as it is
            // (ext2/ext3): zero the tables, so that a device's old bytes are no inodes. Zeros
            // written over holes cost the image map nothing.
            let zeros = vec![0u8; (bs * 256) as usize];
            let table = (g.ipg * isz).div_ceil(bs) * bs;
            for l in &g.loc {
                let mut off = 0;
                while off < table {
                    let n = (table - off).min(zeros.len() as u64);
                    put(sink, l.inode_table * bs + off, &zeros[..n as usize])?;
                    off += n;
                }
            }
        }
        // The full records and the plain ones, both sorted by number, merged.
        let (mut k, mut q) = (0, 0);
        let next_ino = |k: usize, q: usize| {
            let a = self.inodes.get(k).map_or(u32::MAX, |r| r.ino);
            let b = self.plain.get(q).map_or(u32::MAX, Plain::ino);
            a.min(b)
        };
        let mut held;
        while next_ino(k, q) != u32::MAX {
            let grp = (u64::from(next_ino(k, q)) - 1) / g.ipg;
            let mut table: Vec<u8> = Vec::new();
            loop {
                let ino = next_ino(k, q);
                if ino == u32::MAX || (u64::from(ino) - 1) / g.ipg != grp {
                    break;
                }
                let r = if self.inodes.get(k).is_some_and(|r| r.ino == ino) {
                    k += 1;
                    &self.inodes[k - 1]
                } else {
                    held = self.plain[q].to_ino();
                    q += 1;
                    &held
                };
                let slot = (u64::from(r.ino) - 1) % g.ipg;
                let off = (slot * isz) as usize;
                if table.len() < off + isz as usize {
                    table.resize(off + isz as usize, 0);
                }
                table[off..off + isz as usize].copy_from_slice(&self.inode_bytes(r));
                if r.mode & S_IFMT == S_IFDIR {
                    dirs_per_group[grp as usize] += 1;
                }
            }
            put(sink, g.loc[grp as usize].inode_table * bs, &table)?;
        }
        Ok(dirs_per_group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::{S_IFIFO, S_IFREG};
    use crate::{Ext4Options, Ext4Request};

    /// A plain record gives the inode bytes of the record it was made from, whatever its
    /// owner, times, links and flags (with and without metadata_csum), and a record with a
    /// size, blocks or an `i_block` of its own is not plain.
    #[test]
    fn a_plain_record_writes_the_same_inode() {
        let tree = blockwise_geometry::Tree::default();
        let no_csum = Ext4Options {
            features: vec!["^metadata_csum".into()],
            ..Ext4Options::default()
        };
        for opts in [Ext4Options::default(), no_csum] {
            let req = Ext4Request {
                partition_start_bytes: 4 << 20,
                partition_size_bytes: 64 << 20,
                erase_block_bytes: 4 << 20,
                options: opts,
                label: None,
                seed: 7,
                timestamp: 1_700_000_000,
            };
            let prep = Prepared::new(&req, &tree, None).unwrap();
            for (mode, flags) in [
                (S_IFREG | 0o4755, InodeFlags::EXTENTS),
                (S_IFREG | 0o600, InodeFlags::empty()),
                (S_IFIFO | 0o644, InodeFlags::empty()),
            ] {
                let mut r = Ino::new(12_345, mode, 5_000_000_000);
                r.uid = 70_000;
                r.gid = 65_537;
                r.nsec = 999_999_999;
                r.links = 3;
                r.flags = flags;
                r.body = Body::Content(9);
                let p = Plain::of(&r).expect("plain");
                assert_eq!(p.ino(), 12_345);
                assert_eq!(prep.inode_bytes(&p.to_ino()), prep.inode_bytes(&r));
            }
            let mut sized = Ino::new(13, S_IFREG | 0o644, 0);
            sized.size = 1;
            assert!(Plain::of(&sized).is_none());
            let mut mapped = Ino::new(14, S_IFREG | 0o644, 0);
            mapped.extents.push((0, 1, 100));
            assert!(Plain::of(&mapped).is_none());
            let mut dev = Ino::new(15, crate::raw::S_IFCHR | 0o644, 0);
            dev.body = Body::Raw(Box::new([1; N_BLOCKS * 4]));
            assert!(Plain::of(&dev).is_none());
        }
    }

    /// One record per file lives until the inode tables are written: its size is memory per
    /// file (200,000 files: 27 MB at 136 bytes, 50 MB at the 248 it was before `Rare`).
    #[test]
    fn an_inode_record_stays_small() {
        assert!(core::mem::size_of::<super::Ino>() <= 136);
    }
}
