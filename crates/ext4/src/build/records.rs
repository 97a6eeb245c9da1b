//! One [`Ino`] per inode: modes, owners, times and sizes from the tree, directory blocks
//! (the glue to [`dir`]), symlink targets, device numbers, extended attributes, and the
//! logical block runs the allocator must place.

use blockwise_geometry::{NodeId, NodeKind, Tree};

use super::inode::{Body, Ino, Plain, INODE_RAW};
use super::numbering::Numbering;
use super::{journal, LOST_FOUND};
use crate::csum::inode_seed;
use crate::dir::{self, DirParams, Entry};
use crate::geom::Geometry;
use crate::raw::{
    InodeFlags, FT_BLKDEV, FT_CHRDEV, FT_DIR, FT_FIFO, FT_REG_FILE, FT_SOCK, FT_SYMLINK, NAME_LEN,
    N_BLOCKS, ROOT_INO, S_IFBLK, S_IFCHR, S_IFDIR, S_IFIFO, S_IFLNK, S_IFREG, S_IFSOCK,
};
use crate::xattr;
use crate::Error;

/// What the inode records are built from.
pub(super) struct Records<'a> {
    pub tree: &'a Tree,
    pub num: &'a Numbering,
    pub geo: &'a Geometry,
    pub hash_seed: [u32; 4],
    pub csum_seed: u32,
}

impl Records<'_> {
    /// Every inode to write (lost+found, the journal, the tree's nodes), sorted by number:
    /// the full records, and apart from them the [`Plain`] ones.
    pub fn build(&self, ts: i64) -> Result<(Vec<Ino>, Vec<Plain>), Error> {
        let mut inodes: Vec<Ino> = Vec::new();
        let mut plain: Vec<Plain> = Vec::new();
        if self.num.adds_lost_found() {
            inodes.push(self.lost_found(ts)?);
        }
        if self.geo.feat.has_journal {
            inodes.push(journal::inode(self.geo, ts));
        }
        let mut seen = vec![false; self.num.last_ino as usize + 1];
        for &id in &self.num.order {
            let ino = self.num.ino_of[id];
            if seen[ino as usize] {
                continue;
            }
            seen[ino as usize] = true;
            let mut r = self.node(id, ino)?;
            if !self.geo.feat.extents {
                // ext2/ext3: every inode is block-mapped.
                r.flags.remove(InodeFlags::EXTENTS);
            }
            match Plain::of(&r) {
                Some(p) => plain.push(p),
                None => inodes.push(r),
            }
        }
        if !self.geo.feat.extents {
            // lost+found and the journal too.
            for r in &mut inodes {
                r.flags.remove(InodeFlags::EXTENTS);
            }
        }
        // Numbers are unique: an unstable sort gives the same order, without a scratch
        // buffer of half the records.
        inodes.sort_unstable_by_key(|r| r.ino);
        plain.sort_unstable_by_key(Plain::ino);
        Ok((inodes, plain))
    }

    fn dir_params(&self, ino: u32, parent: u32, min_blocks: usize) -> DirParams {
        let feat = &self.geo.feat;
        DirParams {
            bs: self.geo.bs as usize,
            ino,
            parent,
            csum: feat
                .metadata_csum
                .then(|| inode_seed(self.csum_seed, ino, 0)),
            dir_index: feat.dir_index,
            filetype: feat.filetype,
            hash_seed: self.hash_seed,
            min_blocks,
        }
    }

    /// lost+found takes 16 KiB, as mke2fs makes it.
    fn lf_blocks(&self) -> usize {
        (16384 / self.geo.bs) as usize
    }

    fn lost_found(&self, ts: i64) -> Result<Ino, Error> {
        let bs = self.geo.bs;
        let mut lf = Ino::new(LOST_FOUND, S_IFDIR | 0o700, ts);
        lf.links = 2;
        let d = dir::build(
            &self.dir_params(LOST_FOUND, ROOT_INO, self.lf_blocks()),
            &[],
        )?;
        lf.size = d.data.len() as u64;
        lf.want = vec![(0, lf.size / bs)];
        lf.flags = InodeFlags::EXTENTS;
        lf.body = Body::Dir(d.data);
        Ok(lf)
    }

    /// The record of tree node `id`, inode `ino`.
    fn node(&self, id: NodeId, ino: u32) -> Result<Ino, Error> {
        let tree = self.tree;
        let bs = self.geo.bs;
        let node = &tree.nodes[id];
        let perm = (node.meta.mode & 0o7777) as u16;
        let mut r = Ino::new(ino, 0, node.meta.mtime);
        r.nsec = node.meta.mtime_nsec.min(999_999_999);
        r.uid = node.meta.uid;
        r.gid = node.meta.gid;
        match &node.kind {
            NodeKind::Dir { children } => {
                r.mode = S_IFDIR | perm;
                self.dir(&mut r, id, children)?;
            }
            NodeKind::File {
                size,
                content,
                data_ranges,
                ..
            } => {
                r.mode = S_IFREG | perm;
                r.size = *size;
                r.links = self.num.nlinks.get(&ino).copied().unwrap_or(1);
                if r.links > 65000 {
                    return Err(Error::TooManyLinks {
                        path: tree.path(id),
                    });
                }
                r.want = mapped_runs(*size, data_ranges.as_ref(), bs);
                if !self.geo.feat.extents {
                    let max = super::blockmap::max_blocks(bs);
                    if r.want.last().is_some_and(|&(l, n)| l + n > max) {
                        return Err(Error::FileTooLarge {
                            path: tree.path(id),
                            size: *size,
                            max: max * bs,
                            kind: self.geo.feat.flags().kind(),
                            block_bytes: bs,
                        });
                    }
                }
                r.body = Body::Content(*content);
                r.flags |= InodeFlags::EXTENTS;
            }
            NodeKind::Symlink { target } => {
                r.mode = S_IFLNK | if perm == 0 { 0o777 } else { perm };
                let t = target.as_slice();
                r.size = t.len() as u64;
                if t.is_empty() || t.len() >= bs as usize {
                    return Err(Error::BadSymlink {
                        path: tree.path(id),
                        len: t.len(),
                    });
                }
                // A fast symlink keeps its target in i_block (shorter than it, NUL-ended).
                if t.len() < N_BLOCKS * 4 {
                    let mut b = [0u8; N_BLOCKS * 4];
                    b[..t.len()].copy_from_slice(t);
                    r.body = Body::Raw(Box::new(b));
                } else {
                    r.body = Body::SlowLink(t.to_vec());
                    r.want = vec![(0, 1)];
                    r.flags |= InodeFlags::EXTENTS;
                }
            }
            NodeKind::CharDev { major, minor } => {
                r.mode = S_IFCHR | perm;
                r.body = Body::Raw(Box::new(dev_iblock(*major, *minor)));
            }
            NodeKind::BlockDev { major, minor } => {
                r.mode = S_IFBLK | perm;
                r.body = Body::Raw(Box::new(dev_iblock(*major, *minor)));
            }
            NodeKind::Fifo => r.mode = S_IFIFO | perm,
            NodeKind::Socket => r.mode = S_IFSOCK | perm,
        }
        if !node.meta.xattrs.is_empty() {
            self.xattrs(&mut r, id)?;
        }
        Ok(r)
    }

    /// A directory: checks the names, builds its blocks, counts its links.
    fn dir(&self, r: &mut Ino, id: NodeId, children: &[NodeId]) -> Result<(), Error> {
        let tree = self.tree;
        let ino_of = &self.num.ino_of;
        let parent = ino_of[tree.nodes[id].parent];
        let names: Vec<Entry<'_>> = children
            .iter()
            .map(|&c| Entry {
                name: tree.nodes[c].name.as_slice(),
                ino: ino_of[c],
                ftype: ftype_of(&tree.nodes[c].kind),
            })
            .collect();
        for e in &names {
            if e.name.is_empty()
                || e.name.len() > NAME_LEN
                || e.name.contains(&b'/')
                || e.name.contains(&0)
            {
                return Err(Error::BadName {
                    path: tree.path(id),
                    name: blockwise_geometry::display_bytes(e.name),
                });
            }
        }
        let add_lf = id == 0 && self.num.adds_lost_found();
        let subdirs = names.iter().filter(|e| e.ftype == FT_DIR).count() as u32 + u32::from(add_lf);
        let mut names = names;
        if add_lf {
            names.push(Entry {
                name: b"lost+found",
                ino: LOST_FOUND,
                ftype: FT_DIR,
            });
        }
        let min = if Some(id) == self.num.lf_node {
            self.lf_blocks()
        } else {
            1
        };
        let d = dir::build(&self.dir_params(r.ino, parent, min), &names)?;
        if d.indexed {
            r.flags |= InodeFlags::INDEX;
        }
        r.links = 2 + subdirs;
        if r.links > 65000 {
            if !self.geo.feat.dir_nlink {
                return Err(Error::TooManyLinks {
                    path: tree.path(id),
                });
            }
            r.links = 1;
        }
        r.size = d.data.len() as u64;
        r.want = vec![(0, r.size / self.geo.bs)];
        r.body = Body::Dir(d.data);
        r.flags |= InodeFlags::EXTENTS;
        Ok(())
    }

    /// Extended attributes: in the inode when they fit, else in one block.
    fn xattrs(&self, r: &mut Ino, id: NodeId) -> Result<(), Error> {
        let tree = self.tree;
        let geo = self.geo;
        if !geo.feat.ext_attr {
            return Err(Error::Invalid(crate::Invalid::new(
                crate::Field::Features,
                format!(
                    "{} has extended attributes but ext_attr is off",
                    tree.path(id)
                ),
            )));
        }
        let mut attrs = Vec::new();
        let mut bytes = 0usize;
        for (n, v) in &tree.nodes[id].meta.xattrs {
            bytes = bytes.saturating_add(n.len()).saturating_add(v.len());
            attrs.push(xattr::split(n, v).map_err(|e| Error::XattrOf {
                path: tree.path(id),
                source: Box::new(e),
            })?);
        }
        let room = if geo.inode_size >= 256 {
            (geo.inode_size as usize).saturating_sub(INODE_RAW)
        } else {
            0
        };
        let (inode, block) = xattr::place_attrs(attrs, room, geo.bs as usize).ok_or_else(|| {
            Error::XattrTooLarge {
                path: tree.path(id),
                bytes,
                block_bytes: geo.bs,
            }
        })?;
        if !inode.is_empty() || !block.is_empty() {
            let rare = r.rare_mut();
            rare.inode_attrs = inode;
            rare.attrs = block;
        }
        Ok(())
    }
}

fn ftype_of(kind: &NodeKind) -> u8 {
    match kind {
        NodeKind::File { .. } => FT_REG_FILE,
        NodeKind::Dir { .. } => FT_DIR,
        NodeKind::CharDev { .. } => FT_CHRDEV,
        NodeKind::BlockDev { .. } => FT_BLKDEV,
        NodeKind::Fifo => FT_FIFO,
        NodeKind::Socket => FT_SOCK,
        NodeKind::Symlink { .. } => FT_SYMLINK,
    }
}

/// `i_block` of a device node: old 16-bit encoding in word 0 when it fits, else the new
/// 32-bit one in word 1.
fn dev_iblock(major: u32, minor: u32) -> [u8; N_BLOCKS * 4] {
    let mut b = [0u8; N_BLOCKS * 4];
    if major < 256 && minor < 256 {
        b[0..4].copy_from_slice(&((major << 8) | minor).to_le_bytes());
    } else {
        let v = (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
        b[4..8].copy_from_slice(&v.to_le_bytes());
    }
    b
}

/// Logical block runs holding data.
fn mapped_runs(size: u64, ranges: Option<&Vec<(u64, u64)>>, bs: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut add = |s: u64, e: u64| {
        let e = e.min(size);
        if s >= e {
            return;
        }
        let (ls, le) = (s / bs, e.div_ceil(bs));
        if let Some(last) = out.last_mut() {
            if ls <= last.0 + last.1 {
                let end = (last.0 + last.1).max(le);
                last.1 = end - last.0;
                return;
            }
        }
        out.push((ls, le - ls));
    };
    match ranges {
        None => add(0, size),
        Some(r) => {
            let mut r = r.clone();
            r.sort_unstable();
            for (s, e) in r {
                add(s, e);
            }
        }
    }
    out
}
