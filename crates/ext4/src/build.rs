//! From a [`Tree`] to bytes: inode numbering, block allocation (metadata only, no
//! content read), then streaming everything into the sink.

use std::collections::BTreeMap;

use blockwise_geometry::{BlockSink, ContentSource, Guid, NodeId, NodeKind, Tree};

use crate::csum::{crc32c_raw, inode_seed};
use crate::dir::{self, DirParams, Entry};
use crate::features::Features;
use crate::geom::{has_super, Bitmap, Geometry};
use crate::xattr::{self, Attr};
use crate::{Error, Ext4Request};

const EXTENTS_FL: u32 = 0x8_0000;
const INDEX_FL: u32 = 0x1000;
const S_IFREG: u16 = 0x8000;
const S_IFDIR: u16 = 0x4000;
const S_IFLNK: u16 = 0xA000;
const S_IFCHR: u16 = 0x2000;
const S_IFBLK: u16 = 0x6000;
const S_IFIFO: u16 = 0x1000;
const S_IFSOCK: u16 = 0xC000;
const MAX_EXTENT: u64 = 32768;
const LOST_FOUND: u32 = 11;
const JOURNAL_INO: u32 = 8;
const ROOT_INO: u32 = 2;

/// What an inode holds besides its extents.
#[derive(Clone, Debug)]
enum Body {
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
struct Ino {
    ino: u32,
    mode: u16,
    uid: u32,
    gid: u32,
    size: u64,
    links: u32,
    time: i64,
    nsec: u32,
    flags: u32,
    body: Body,
    /// Data block runs per logical run: `(logical block, count)`, before allocation.
    want: Vec<(u64, u64)>,
    /// `(logical, len ≤ 32768, physical)`.
    extents: Vec<(u64, u64, u64)>,
    tree_blocks: Vec<u64>,
    attrs: Vec<Attr>,
    attrs_in_inode: bool,
    xattr_block: Option<u64>,
}

impl Ino {
    fn new(ino: u32, mode: u16, time: i64) -> Ino {
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
    fn data_blocks(&self) -> u64 {
        self.extents.iter().map(|e| e.1).sum::<u64>()
            + self.tree_blocks.len() as u64
            + u64::from(self.xattr_block.is_some())
    }
}

/// Extent-tree blocks needed for `n` extents (0 when they fit in the inode).
fn tree_blocks_for(n: u64, bs: u64) -> u64 {
    let per = (bs - 12) / 12;
    let mut m = n;
    let mut total = 0;
    while m > 4 {
        m = m.div_ceil(per);
        total += m;
    }
    total
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

/// Everything decided before any byte is written.
pub(crate) struct Prepared {
    pub geo: Geometry,
    pub uuid: [u8; 16],
    hash_seed: [u32; 4],
    csum_seed: u32,
    inodes: Vec<Ino>,
    /// Inode numbers used (highest).
    last_ino: u32,
    timestamp: i64,
    label: [u8; 16],
}

/// Counts inodes a tree needs (reserved + lost+found + one per distinct node).
pub(crate) fn inodes_needed(tree: &Tree) -> u64 {
    let mut links = std::collections::BTreeSet::new();
    let mut n = 11u64; // 1..=10 reserved, 11 lost+found
    for (id, node) in tree.nodes.iter().enumerate() {
        if id == 0 {
            continue;
        }
        if id != 0
            && node.parent == 0
            && node.name == "lost+found"
            && matches!(node.kind, NodeKind::Dir { .. })
        {
            continue;
        }
        if let NodeKind::File { link: Some(l), .. } = node.kind {
            if !links.insert(l) {
                continue;
            }
        }
        n += 1;
    }
    n
}

fn label_bytes(req: &Ext4Request) -> Result<[u8; 16], Error> {
    let mut out = [0u8; 16];
    if let Some(l) = &req.label {
        crate::validate_label(l).map_err(Error::Invalid)?;
        out[..l.len()].copy_from_slice(l.as_bytes());
    }
    Ok(out)
}

/// The filesystem UUID (textual byte order) derived from the seed.
pub(crate) fn uuid_for(req: &Ext4Request) -> [u8; 16] {
    Guid::derive(req.seed, "ext4-uuid", 0).to_uuid_bytes()
}

/// Formats a UUID the way `dumpe2fs` prints it.
pub(crate) fn uuid_string(u: &[u8; 16]) -> String {
    let mut s = String::new();
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn ftype_of(kind: &NodeKind) -> u8 {
    match kind {
        NodeKind::File { .. } => 1,
        NodeKind::Dir { .. } => 2,
        NodeKind::CharDev { .. } => 3,
        NodeKind::BlockDev { .. } => 4,
        NodeKind::Fifo => 5,
        NodeKind::Socket => 6,
        NodeKind::Symlink { .. } => 7,
    }
}

fn dev_iblock(major: u32, minor: u32) -> [u8; 60] {
    let mut b = [0u8; 60];
    if major < 256 && minor < 256 {
        b[0..4].copy_from_slice(&((major << 8) | minor).to_le_bytes());
    } else {
        let v = (minor & 0xff) | (major << 8) | ((minor & !0xff) << 12);
        b[4..8].copy_from_slice(&v.to_le_bytes());
    }
    b
}

struct Allocator {
    cursor: u64,
    start: u64,
    /// Blocks still to allocate (for the stride-alignment budget).
    remaining: u64,
}

impl Allocator {
    fn alloc(&mut self, used: &mut Bitmap, n: u64, align: u64) -> Option<Vec<(u64, u64)>> {
        if align > 1 && n >= align {
            let free = used.free_total();
            let aligned = self.cursor.div_ceil(align) * align;
            if free >= self.remaining + (aligned - self.cursor) + align {
                if let Some(b) = used.find_run(aligned, n.min(MAX_EXTENT), u64::MAX) {
                    if b % align == 0 {
                        self.cursor = b;
                    }
                }
            }
        }
        let mut out = Vec::new();
        let mut left = n;
        let mut wrapped = false;
        while left > 0 {
            match used.next_free(self.cursor) {
                Some(b) => {
                    let run = used.free_run(b, left);
                    used.set_range(b, run);
                    out.push((b, run));
                    left -= run;
                    self.cursor = b + run;
                }
                None if !wrapped => {
                    wrapped = true;
                    self.cursor = self.start;
                }
                None => return None,
            }
        }
        self.remaining = self.remaining.saturating_sub(n);
        Some(out)
    }
}

impl Prepared {
    /// Lays out the whole filesystem: geometry, inodes, directories, block allocation.
    #[allow(clippy::too_many_lines)]
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
        let feat = geo.feat;
        let bs = geo.bs;
        let uuid = uuid_for(req);
        let hs = Guid::derive(req.seed, "ext4-hash-seed", 0).to_uuid_bytes();
        let hash_seed = [
            u32::from_le_bytes([hs[0], hs[1], hs[2], hs[3]]),
            u32::from_le_bytes([hs[4], hs[5], hs[6], hs[7]]),
            u32::from_le_bytes([hs[8], hs[9], hs[10], hs[11]]),
            u32::from_le_bytes([hs[12], hs[13], hs[14], hs[15]]),
        ];
        let csum_seed = crc32c_raw(0xffff_ffff, &uuid);
        let ts = req.timestamp;

        // 1. Inode numbers: root 2, lost+found 11, the rest in depth-first name order.
        let mut ino_of: Vec<u32> = vec![0; tree.nodes.len()];
        let mut link_ino: BTreeMap<u64, u32> = BTreeMap::new();
        let mut nlinks: BTreeMap<u32, u32> = BTreeMap::new();
        ino_of[0] = ROOT_INO;
        let lf_node = tree
            .child(0, "lost+found")
            .filter(|&c| tree.children(c).is_some());
        if let Some(lf) = lf_node {
            ino_of[lf] = LOST_FOUND;
        }
        let lf_other = lf_node.is_none() && tree.child(0, "lost+found").is_some();
        let mut next = if lf_other { 11u32 } else { 12 };
        let mut order: Vec<NodeId> = Vec::with_capacity(tree.nodes.len());
        let mut stack: Vec<NodeId> = vec![0];
        while let Some(id) = stack.pop() {
            order.push(id);
            if let Some(ch) = tree.children(id) {
                for &c in ch.iter().rev() {
                    stack.push(c);
                }
            }
        }
        for &id in &order {
            if id == 0 || Some(id) == lf_node {
                continue;
            }
            if let NodeKind::File { link: Some(l), .. } = tree.nodes[id].kind {
                if let Some(&i) = link_ino.get(&l) {
                    ino_of[id] = i;
                    *nlinks.entry(i).or_insert(1) += 1;
                    continue;
                }
                link_ino.insert(l, next);
            }
            ino_of[id] = next;
            next += 1;
        }
        let last_ino = next - 1;

        // 2. Inode records.
        let mut inodes: Vec<Ino> = Vec::new();
        let dir_params = |ino: u32, parent: u32, min_blocks: usize| DirParams {
            bs: bs as usize,
            ino,
            parent,
            csum: feat.metadata_csum.then(|| inode_seed(csum_seed, ino, 0)),
            dir_index: feat.dir_index,
            filetype: feat.filetype,
            hash_seed,
            min_blocks,
        };
        let lf_blocks = (16384 / bs) as usize;
        // A root entry named lost+found that is not a directory: no lost+found then.
        if lf_node.is_none() && !lf_other {
            let mut lf = Ino::new(LOST_FOUND, S_IFDIR | 0o700, ts);
            lf.links = 2;
            let d = dir::build(&dir_params(LOST_FOUND, ROOT_INO, lf_blocks), &[])?;
            lf.size = d.data.len() as u64;
            lf.want = vec![(0, lf.size / bs)];
            lf.flags = EXTENTS_FL;
            lf.body = Body::Dir(d.data);
            inodes.push(lf);
        }
        if feat.has_journal {
            let mut j = Ino::new(JOURNAL_INO, S_IFREG | 0o600, ts);
            j.size = geo.journal_blocks * bs;
            let mut l = 0;
            for &(s, n) in &geo.journal {
                let mut off = 0;
                while off < n {
                    let len = (n - off).min(MAX_EXTENT);
                    j.extents.push((l, len, s + off));
                    l += len;
                    off += len;
                }
            }
            j.body = Body::Journal;
            j.flags = EXTENTS_FL;
            inodes.push(j);
        }
        let mut seen = vec![false; last_ino as usize + 1];
        for &id in &order {
            let node = &tree.nodes[id];
            let ino = ino_of[id];
            if seen[ino as usize] {
                continue;
            }
            seen[ino as usize] = true;
            let perm = (node.meta.mode & 0o7777) as u16;
            let mut r = Ino::new(ino, 0, node.meta.mtime);
            r.nsec = node.meta.mtime_nsec.min(999_999_999);
            r.uid = node.meta.uid;
            r.gid = node.meta.gid;
            match &node.kind {
                NodeKind::Dir { children } => {
                    r.mode = S_IFDIR | perm;
                    let parent = ino_of[node.parent];
                    let names: Vec<Entry<'_>> = children
                        .iter()
                        .map(|&c| Entry {
                            name: tree.nodes[c].name.as_bytes(),
                            ino: ino_of[c],
                            ftype: ftype_of(&tree.nodes[c].kind),
                        })
                        .collect();
                    for e in &names {
                        if e.name.is_empty()
                            || e.name.len() > 255
                            || e.name.contains(&b'/')
                            || e.name.contains(&0)
                        {
                            return Err(Error::BadName {
                                path: tree.path(id),
                                name: String::from_utf8_lossy(e.name).into_owned(),
                            });
                        }
                    }
                    let add_lf = id == 0 && lf_node.is_none() && !lf_other;
                    let subdirs =
                        names.iter().filter(|e| e.ftype == 2).count() as u32 + u32::from(add_lf);
                    let mut names = names;
                    if add_lf {
                        names.push(Entry {
                            name: b"lost+found",
                            ino: LOST_FOUND,
                            ftype: 2,
                        });
                    }
                    let min = if Some(id) == lf_node { lf_blocks } else { 1 };
                    let d = dir::build(&dir_params(ino, parent, min), &names)?;
                    if d.indexed {
                        r.flags |= INDEX_FL;
                    }
                    r.links = 2 + subdirs;
                    if r.links > 65000 {
                        if !feat.dir_nlink {
                            return Err(Error::TooManyLinks {
                                path: tree.path(id),
                            });
                        }
                        r.links = 1;
                    }
                    r.size = d.data.len() as u64;
                    r.want = vec![(0, r.size / bs)];
                    r.body = Body::Dir(d.data);
                    r.flags |= EXTENTS_FL;
                }
                NodeKind::File {
                    size,
                    content,
                    data_ranges,
                    ..
                } => {
                    r.mode = S_IFREG | perm;
                    r.size = *size;
                    r.links = nlinks.get(&ino).copied().unwrap_or(1);
                    if r.links > 65000 {
                        return Err(Error::TooManyLinks {
                            path: tree.path(id),
                        });
                    }
                    r.want = mapped_runs(*size, data_ranges.as_ref(), bs);
                    r.body = Body::Content(*content);
                    r.flags |= EXTENTS_FL;
                }
                NodeKind::Symlink { target } => {
                    r.mode = S_IFLNK | if perm == 0 { 0o777 } else { perm };
                    let t = target.as_bytes();
                    r.size = t.len() as u64;
                    if t.is_empty() || t.len() >= bs as usize {
                        return Err(Error::BadSymlink {
                            path: tree.path(id),
                            len: t.len(),
                        });
                    }
                    if t.len() < 60 {
                        let mut b = [0u8; 60];
                        b[..t.len()].copy_from_slice(t);
                        r.body = Body::Raw(b);
                    } else {
                        r.body = Body::SlowLink(t.to_vec());
                        r.want = vec![(0, 1)];
                        r.flags |= EXTENTS_FL;
                    }
                }
                NodeKind::CharDev { major, minor } => {
                    r.mode = S_IFCHR | perm;
                    r.body = Body::Raw(dev_iblock(*major, *minor));
                }
                NodeKind::BlockDev { major, minor } => {
                    r.mode = S_IFBLK | perm;
                    r.body = Body::Raw(dev_iblock(*major, *minor));
                }
                NodeKind::Fifo => r.mode = S_IFIFO | perm,
                NodeKind::Socket => r.mode = S_IFSOCK | perm,
            }
            if !node.meta.xattrs.is_empty() {
                if !feat.ext_attr {
                    return Err(Error::Invalid(crate::Invalid::new(
                        crate::Field::Features,
                        format!(
                            "{} has extended attributes but ext_attr is off",
                            tree.path(id)
                        ),
                    )));
                }
                let mut attrs = Vec::new();
                for (n, v) in &node.meta.xattrs {
                    attrs.push(xattr::split(n, v)?);
                }
                xattr::sort(&mut attrs);
                let room = geo.inode_size.saturating_sub(128 + 32) as usize;
                if geo.inode_size >= 256 && xattr::inode_bytes(&attrs) <= room {
                    r.attrs_in_inode = true;
                } else if xattr::block_bytes(&attrs) > bs as usize {
                    return Err(Error::XattrTooLarge {
                        path: tree.path(id),
                    });
                }
                r.attrs = attrs;
            }
            inodes.push(r);
        }
        inodes.sort_by_key(|r| r.ino);

        // 3. Space check, then allocation in inode order.
        let need: u64 = inodes
            .iter()
            .map(|r| {
                let d: u64 = r.want.iter().map(|w| w.1).sum();
                d + tree_blocks_for(r.want.len() as u64, bs)
                    + u64::from(!r.attrs.is_empty() && !r.attrs_in_inode)
            })
            .sum();
        let free = geo.used.free_total();
        if need > free {
            return Err(Error::NoSpace {
                more_blocks: need - free,
                more_inodes: 0,
                block_bytes: bs,
            });
        }
        let mut al = Allocator {
            cursor: geo.data_start,
            start: geo.fdb,
            remaining: need,
        };
        let stride = u64::from(geo.stride).min(geo.bpg);
        let nospace = |bs| Error::NoSpace {
            more_blocks: 1,
            more_inodes: 0,
            block_bytes: bs,
        };
        for r in &mut inodes {
            if !r.attrs.is_empty() && !r.attrs_in_inode {
                let b = al.alloc(&mut geo.used, 1, 1).ok_or_else(|| nospace(bs))?;
                r.xattr_block = Some(b[0].0);
            }
            let want = core::mem::take(&mut r.want);
            for (l, n) in want {
                let runs = al
                    .alloc(&mut geo.used, n, stride)
                    .ok_or_else(|| nospace(bs))?;
                let mut lb = l;
                for (p, len) in runs {
                    let mut off = 0;
                    while off < len {
                        let k = (len - off).min(MAX_EXTENT);
                        // Merge with the previous extent when contiguous.
                        if let Some(last) = r.extents.last_mut() {
                            if last.0 + last.1 == lb
                                && last.2 + last.1 == p + off
                                && last.1 + k <= MAX_EXTENT
                            {
                                last.1 += k;
                                lb += k;
                                off += k;
                                continue;
                            }
                        }
                        r.extents.push((lb, k, p + off));
                        lb += k;
                        off += k;
                    }
                }
            }
            let tb = tree_blocks_for(r.extents.len() as u64, bs);
            if tb > 0 {
                let runs = al.alloc(&mut geo.used, tb, 1).ok_or_else(|| nospace(bs))?;
                for (p, len) in runs {
                    r.tree_blocks.extend(p..p + len);
                }
            }
        }
        let label = label_bytes(req)?;
        Ok(Prepared {
            geo,
            uuid,
            hash_seed,
            csum_seed,
            inodes,
            last_ino,
            timestamp: ts,
            label,
        })
    }

    fn csum(&self) -> Option<u32> {
        self.geo.feat.metadata_csum.then_some(self.csum_seed)
    }

    /// Builds the extent tree: the 60-byte root and the tree blocks.
    fn extent_tree(&self, r: &Ino) -> ([u8; 60], Vec<(u64, Vec<u8>)>) {
        let bs = self.geo.bs as usize;
        let per = (bs - 12) / 12;
        let header = |b: &mut [u8], n: usize, max: usize, depth: u16| {
            b[0..2].copy_from_slice(&0xF30Au16.to_le_bytes());
            b[2..4].copy_from_slice(&(n as u16).to_le_bytes());
            b[4..6].copy_from_slice(&(max as u16).to_le_bytes());
            b[6..8].copy_from_slice(&depth.to_le_bytes());
        };
        let leaf = |b: &mut [u8], (l, len, p): (u64, u64, u64)| {
            b[0..4].copy_from_slice(&(l as u32).to_le_bytes());
            b[4..6].copy_from_slice(&(len as u16).to_le_bytes());
            b[6..8].copy_from_slice(&((p >> 32) as u16).to_le_bytes());
            b[8..12].copy_from_slice(&(p as u32).to_le_bytes());
        };
        let index = |b: &mut [u8], (l, p): (u64, u64)| {
            b[0..4].copy_from_slice(&(l as u32).to_le_bytes());
            b[4..8].copy_from_slice(&(p as u32).to_le_bytes());
            b[8..10].copy_from_slice(&((p >> 32) as u16).to_le_bytes());
            b[10..12].copy_from_slice(&0u16.to_le_bytes());
        };
        let iseed = self.csum().map(|s| inode_seed(s, r.ino, 0));
        let mut root = [0u8; 60];
        let mut blocks = Vec::new();
        if r.extents.len() <= 4 {
            header(&mut root, r.extents.len(), 4, 0);
            for (k, &e) in r.extents.iter().enumerate() {
                leaf(&mut root[12 + 12 * k..24 + 12 * k], e);
            }
            return (root, blocks);
        }
        let mut tb = r.tree_blocks.iter().copied();
        let finish = |b: &mut Vec<u8>| {
            if let Some(s) = iseed {
                let t = 12 + 12 * per;
                let c = crc32c_raw(s, &b[..t]);
                b[t..t + 4].copy_from_slice(&c.to_le_bytes());
            }
        };
        // Leaves.
        let mut level: Vec<(u64, u64)> = Vec::new();
        for chunk in r.extents.chunks(per) {
            let nr = tb.next().unwrap_or(0);
            let mut b = vec![0u8; bs];
            header(&mut b, chunk.len(), per, 0);
            for (k, &e) in chunk.iter().enumerate() {
                leaf(&mut b[12 + 12 * k..24 + 12 * k], e);
            }
            finish(&mut b);
            level.push((chunk[0].0, nr));
            blocks.push((nr, b));
        }
        let mut depth = 1u16;
        while level.len() > 4 {
            let mut up = Vec::new();
            for chunk in level.chunks(per) {
                let nr = tb.next().unwrap_or(0);
                let mut b = vec![0u8; bs];
                header(&mut b, chunk.len(), per, depth);
                for (k, &e) in chunk.iter().enumerate() {
                    index(&mut b[12 + 12 * k..24 + 12 * k], e);
                }
                finish(&mut b);
                up.push((chunk[0].0, nr));
                blocks.push((nr, b));
            }
            level = up;
            depth += 1;
        }
        header(&mut root, level.len(), 4, depth);
        for (k, &e) in level.iter().enumerate() {
            index(&mut root[12 + 12 * k..24 + 12 * k], e);
        }
        (root, blocks)
    }

    /// Serializes one inode (with checksum).
    fn inode_bytes(&self, r: &Ino) -> Vec<u8> {
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

    fn jnl_blocks(&self) -> Option<[u8; 68]> {
        let j = self.inodes.iter().find(|r| r.ino == JOURNAL_INO)?;
        let ib = self.inode_bytes(j);
        let mut out = [0u8; 68];
        out[..60].copy_from_slice(&ib[0x28..0x64]);
        out[60..64].copy_from_slice(&((j.size >> 32) as u32).to_le_bytes());
        out[64..68].copy_from_slice(&(j.size as u32).to_le_bytes());
        Some(out)
    }

    /// Writes the filesystem.
    #[allow(clippy::too_many_lines)]
    pub fn write<S: BlockSink + ?Sized>(
        &self,
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
        let put = |sink: &mut S, off: u64, data: &[u8]| -> Result<(), Error> {
            sink.write_at(off, data).map_err(|e| Error::Sink {
                offset: off,
                source: Box::new(e),
            })
        };
        // File contents, directories, symlinks, extent trees, xattr blocks.
        let chunk_max = 1usize << 20;
        let mut buf = vec![0u8; chunk_max];
        for r in &self.inodes {
            match &r.body {
                Body::Content(handle) => {
                    for &(l, len, p) in &r.extents {
                        let start = l * bs;
                        let end = ((l + len) * bs).min(r.size);
                        let mut off = start;
                        while off < end {
                            let n = ((end - off) as usize).min(chunk_max);
                            content.read_at(*handle, off, &mut buf[..n])?;
                            put(
                                sink,
                                (p + (off - start) / bs) * bs + (off - start) % bs,
                                &buf[..n],
                            )?;
                            off += n as u64;
                        }
                        // Zero the tail of the last block (the device may hold old data).
                        let tail = (bs - end % bs) % bs;
                        if tail > 0 && end > start {
                            let at = (p + (end - start) / bs) * bs + (end - start) % bs;
                            put(sink, at, &vec![0u8; tail as usize])?;
                        }
                    }
                }
                Body::Dir(data) => {
                    let mut lb = 0u64;
                    for &(l, len, p) in &r.extents {
                        debug_assert_eq!(l, lb);
                        let s = (l * bs) as usize;
                        let e = ((l + len) * bs) as usize;
                        put(sink, p * bs, &data[s..e])?;
                        lb = l + len;
                    }
                }
                Body::SlowLink(t) => {
                    if let Some(&(_, _, p)) = r.extents.first() {
                        let mut b = vec![0u8; bs as usize];
                        b[..t.len()].copy_from_slice(t);
                        put(sink, p * bs, &b)?;
                    }
                }
                _ => {}
            }
            if !r.tree_blocks.is_empty() {
                for (nr, b) in self.extent_tree(r).1 {
                    put(sink, nr * bs, &b)?;
                }
            }
            if let Some(x) = r.xattr_block {
                let b = xattr::build_block(bs as usize, &r.attrs, x, self.csum());
                put(sink, x * bs, &b)?;
            }
        }
        // Journal superblock.
        if let Some(&(js, _)) = g.journal.first() {
            let mut j = vec![0u8; 1024];
            let be = |j: &mut [u8], o: usize, v: u32| j[o..o + 4].copy_from_slice(&v.to_be_bytes());
            be(&mut j, 0x0, 0xC03B_3998);
            be(&mut j, 0x4, 4);
            be(&mut j, 0xC, bs as u32);
            be(&mut j, 0x10, g.journal_blocks as u32);
            be(&mut j, 0x14, 1);
            be(&mut j, 0x18, 1);
            j[0x30..0x40].copy_from_slice(&self.uuid);
            be(&mut j, 0x40, 1);
            put(sink, js * bs, &j)?;
        }
        // Inode tables.
        let isz = g.inode_size;
        let mut per_group: Vec<u64> = vec![0; g.groups as usize];
        let mut dirs_per_group: Vec<u64> = vec![0; g.groups as usize];
        let mut used_per_group: Vec<u64> = vec![0; g.groups as usize];
        {
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
            for grp in 0..g.groups {
                let first = grp * g.ipg + 1;
                let last = ((grp + 1) * g.ipg).min(u64::from(self.last_ino));
                used_per_group[grp as usize] = if last >= first { last - first + 1 } else { 0 };
                per_group[grp as usize] = used_per_group[grp as usize];
            }
        }
        // Bitmaps and descriptors.
        let csum_on = g.feat.metadata_csum || g.feat.uninit_bg;
        let mut gdt = vec![0u8; (g.gdt_blocks * bs) as usize];
        let mut free_blocks_total = 0u64;
        let mut free_inodes_total = 0u64;
        for grp in 0..g.groups {
            let gi = grp as usize;
            let start = g.group_start(grp);
            let glen = g.group_len(grp);
            let mut bb = vec![0u8; bs as usize];
            let mut used = 0u64;
            for k in 0..g.bpg {
                if k >= glen || g.used.get(start + k) {
                    bb[(k / 8) as usize] |= 1 << (k % 8);
                    if k < glen {
                        used += 1;
                    }
                }
            }
            let free_b = glen - used;
            free_blocks_total += free_b;
            let mut ib = vec![0u8; bs as usize];
            let ui = used_per_group[gi];
            for k in 0..ui {
                ib[(k / 8) as usize] |= 1 << (k % 8);
            }
            for byte in ib.iter_mut().skip((g.ipg / 8) as usize) {
                *byte = 0xff;
            }
            let free_i = g.ipg - ui;
            free_inodes_total += free_i;
            put(sink, g.loc[gi].block_bitmap * bs, &bb)?;
            put(sink, g.loc[gi].inode_bitmap * bs, &ib)?;
            let ds = g.desc_size as usize;
            let d = &mut gdt[gi * ds..(gi + 1) * ds];
            let p32 = |d: &mut [u8], o: usize, v: u64| {
                d[o..o + 4].copy_from_slice(&(v as u32).to_le_bytes())
            };
            let p16 = |d: &mut [u8], o: usize, v: u64| {
                d[o..o + 2].copy_from_slice(&(v as u16).to_le_bytes())
            };
            let loc = g.loc[gi];
            p32(d, 0x00, loc.block_bitmap);
            p32(d, 0x04, loc.inode_bitmap);
            p32(d, 0x08, loc.inode_table);
            p16(d, 0x0C, free_b);
            p16(d, 0x0E, free_i);
            p16(d, 0x10, dirs_per_group[gi]);
            let mut flags = 0u64;
            let unused = g.ipg - per_group[gi];
            if csum_on {
                flags |= 4; // ITABLE_ZEROED
                if ui == 0 {
                    flags |= 1; // INODE_UNINIT
                }
                p16(d, 0x1C, unused);
            }
            p16(d, 0x12, flags);
            if ds >= 64 {
                p32(d, 0x20, loc.block_bitmap >> 32);
                p32(d, 0x24, loc.inode_bitmap >> 32);
                p32(d, 0x28, loc.inode_table >> 32);
                p16(d, 0x2C, free_b >> 16);
                p16(d, 0x2E, free_i >> 16);
                p16(d, 0x30, dirs_per_group[gi] >> 16);
                if csum_on {
                    p16(d, 0x32, unused >> 16);
                }
            }
            if let Some(seed) = self.csum() {
                let bc = crc32c_raw(seed, &bb[..(g.bpg / 8) as usize]);
                let ic = crc32c_raw(seed, &ib[..(g.ipg / 8) as usize]);
                p16(d, 0x18, u64::from(bc));
                p16(d, 0x1A, u64::from(ic));
                if ds >= 64 {
                    p16(d, 0x38, u64::from(bc >> 16));
                    p16(d, 0x3A, u64::from(ic >> 16));
                }
                let c = crc32c_raw(seed, &(grp as u32).to_le_bytes());
                let c = crc32c_raw(c, d);
                p16(d, 0x1E, u64::from(c & 0xffff));
            } else if g.feat.uninit_bg {
                let c = crate::csum::crc16(0xffff, &self.uuid);
                let c = crate::csum::crc16(c, &(grp as u32).to_le_bytes());
                let c = crate::csum::crc16(c, &d[..0x1E]);
                let c = crate::csum::crc16(c, &d[0x20..]);
                p16(d, 0x1E, u64::from(c));
            }
        }
        // Superblocks and descriptor copies.
        for grp in 0..g.groups {
            if !has_super(&g.feat, grp) {
                continue;
            }
            let sb = self.superblock(grp, free_blocks_total, free_inodes_total);
            let start = g.group_start(grp);
            if grp == 0 {
                put(sink, 1024, &sb)?;
                put(sink, (start + 1) * bs, &gdt)?;
            } else {
                put(sink, start * bs, &sb)?;
                put(sink, (start + 1) * bs, &gdt)?;
            }
        }
        Ok(())
    }

    fn superblock(&self, grp: u64, free_blocks: u64, free_inodes: u64) -> Vec<u8> {
        let g = &self.geo;
        let f = &g.feat;
        let mut s = vec![0u8; 1024];
        let p16 =
            |s: &mut [u8], o: usize, v: u64| s[o..o + 2].copy_from_slice(&(v as u16).to_le_bytes());
        let p32 =
            |s: &mut [u8], o: usize, v: u64| s[o..o + 4].copy_from_slice(&(v as u32).to_le_bytes());
        let ts = self.timestamp as u64;
        p32(&mut s, 0x00, g.inodes());
        p32(&mut s, 0x04, g.blocks);
        p32(&mut s, 0x08, g.reserved_blocks);
        p32(&mut s, 0x0C, free_blocks);
        p32(&mut s, 0x10, free_inodes);
        p32(&mut s, 0x14, g.fdb);
        let log = u64::from(g.bs.trailing_zeros() - 10);
        p32(&mut s, 0x18, log);
        p32(&mut s, 0x1C, log);
        p32(&mut s, 0x20, g.bpg);
        p32(&mut s, 0x24, g.bpg);
        p32(&mut s, 0x28, g.ipg);
        p32(&mut s, 0x30, ts);
        p16(&mut s, 0x36, 0xffff);
        p16(&mut s, 0x38, 0xEF53);
        p16(&mut s, 0x3A, 1);
        p16(&mut s, 0x3C, 1);
        p32(&mut s, 0x40, ts);
        p32(&mut s, 0x4C, 1);
        p32(&mut s, 0x54, 11);
        p16(&mut s, 0x58, g.inode_size);
        p16(&mut s, 0x5A, grp);
        p32(&mut s, 0x5C, u64::from(f.compat()));
        p32(&mut s, 0x60, u64::from(f.incompat()));
        p32(&mut s, 0x64, u64::from(f.ro_compat()));
        s[0x68..0x78].copy_from_slice(&self.uuid);
        s[0x78..0x88].copy_from_slice(&self.label);
        if f.has_journal {
            p32(&mut s, 0xE0, u64::from(JOURNAL_INO));
        }
        for (k, w) in self.hash_seed.iter().enumerate() {
            p32(&mut s, 0xEC + 4 * k, u64::from(*w));
        }
        s[0xFC] = 1;
        if f.has_journal {
            s[0xFD] = 1;
        }
        p16(&mut s, 0xFE, if f.bit64 { 64 } else { 0 });
        p32(&mut s, 0x100, 0x0C);
        p32(&mut s, 0x108, ts);
        if let Some(j) = self.jnl_blocks() {
            s[0x10C..0x150].copy_from_slice(&j);
        }
        if f.bit64 {
            p32(&mut s, 0x150, g.blocks >> 32);
            p32(&mut s, 0x154, g.reserved_blocks >> 32);
            p32(&mut s, 0x158, free_blocks >> 32);
        }
        if g.inode_size >= 160 {
            p16(&mut s, 0x15C, 32);
            p16(&mut s, 0x15E, 32);
        }
        p32(&mut s, 0x160, 1); // signed directory hash
        p16(&mut s, 0x164, u64::from(g.stride));
        p32(&mut s, 0x170, u64::from(g.stripe_width));
        if f.flex_bg {
            s[0x174] = 4;
        }
        if f.metadata_csum {
            s[0x175] = 1;
            let c = crc32c_raw(0xffff_ffff, &s[..0x3FC]);
            p32(&mut s, 0x3FC, u64::from(c));
        }
        s
    }
}
