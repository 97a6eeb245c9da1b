//! Where everything goes: inodes numbered in breadth-first order (the root first, so its nid
//! fits the superblock's 16 bits), xattrs shared when more than one inode has them, inode
//! records packed first-fit into the metadata blocks without crossing a block, then the
//! shared xattrs, directory blocks and file data.

use std::collections::{BTreeMap, VecDeque};

use blockwise_geometry::{NodeId, NodeKind, Tree};

use crate::raw::{FileType, XATTR_PREFIXES};
use crate::{ErofsRequest, Error, BLOCK_BYTES};

const BS: u64 = BLOCK_BYTES as u64;
/// The superblock's end: the first byte inodes may use.
const FIRST_INODE: u64 = 1024 + 128;
/// Partly filled metadata blocks kept open for small records.
const OPEN_BLOCKS: usize = 16;

/// What an inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Symlink,
    Chr,
    Blk,
    Fifo,
    Sock,
}

impl Kind {
    pub(crate) fn file_type(self) -> FileType {
        match self {
            Kind::Dir => FileType::Dir,
            Kind::File => FileType::Reg,
            Kind::Symlink => FileType::Symlink,
            Kind::Chr => FileType::Chr,
            Kind::Blk => FileType::Blk,
            Kind::Fifo => FileType::Fifo,
            Kind::Sock => FileType::Sock,
        }
    }

    fn type_bits(self) -> u16 {
        match self {
            Kind::Dir => 0o040000,
            Kind::File => 0o100000,
            Kind::Symlink => 0o120000,
            Kind::Chr => 0o020000,
            Kind::Blk => 0o060000,
            Kind::Fifo => 0o010000,
            Kind::Sock => 0o140000,
        }
    }
}

/// One xattr as stored: prefix index, name without the prefix, value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Xattr {
    pub index: u8,
    pub name: Vec<u8>,
    pub value: Vec<u8>,
}

impl Xattr {
    /// Entry size, padded to 4 bytes.
    pub(crate) fn size(&self) -> u64 {
        (4 + self.name.len() as u64 + self.value.len() as u64).next_multiple_of(4)
    }
}

/// One inode and where its pieces go.
#[derive(Clone, Debug)]
pub(crate) struct Ino {
    /// The first tree node of this inode (hard links share one).
    pub node: NodeId,
    pub kind: Kind,
    pub mode: u16,
    pub uid: u32,
    pub gid: u32,
    pub mtime: u64,
    pub mtime_nsec: u32,
    pub nlink: u32,
    pub size: u64,
    pub rdev: u32,
    pub extended: bool,
    /// Ids of shared xattrs.
    pub shared: Vec<u32>,
    /// Inline xattrs.
    pub inline: Vec<Xattr>,
    /// Bytes of the inline xattr body (0 without xattrs).
    pub xattr_bytes: u64,
    /// Bytes of the tail packed after the inode (0: none, the layout is plain).
    pub tail: u64,
    /// Byte offset of the record in the image (nid × 32).
    pub offset: u64,
    /// First data block, and how many whole blocks there are.
    pub startblk: u64,
    pub blocks: u64,
    /// Parent directory inode (for `..`).
    pub parent: usize,
}

impl Ino {
    pub(crate) fn core(&self) -> u64 {
        if self.extended {
            64
        } else {
            32
        }
    }

    pub(crate) fn record(&self) -> u64 {
        self.core() + self.xattr_bytes + self.tail
    }

    pub(crate) fn nid(&self) -> u64 {
        self.offset / 32
    }

    pub(crate) fn i_mode(&self) -> u16 {
        self.kind.type_bits() | (self.mode & 0o7777)
    }
}

/// The whole layout.
#[derive(Debug)]
pub(crate) struct Layout {
    pub inodes: Vec<Ino>,
    /// Tree node → inode.
    pub node_ino: Vec<usize>,
    /// Shared xattrs in id order with their byte offset in the shared area.
    pub shared: Vec<(u64, Xattr)>,
    pub meta_blocks: u64,
    pub xattr_blkaddr: u64,
    pub total_blocks: u64,
    pub epoch: u64,
}

/// Splits `names` (in order) into directory blocks: `(first, end, bytes used)`.
pub(crate) fn dir_blocks(names: &[&[u8]]) -> Vec<(usize, usize, u64)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut used = 0u64;
    for (i, n) in names.iter().enumerate() {
        let need = 12 + n.len() as u64;
        if used + need > BS && i > start {
            out.push((start, i, used));
            start = i;
            used = 0;
        }
        used += need;
    }
    out.push((start, names.len(), used));
    out
}

/// The entries of directory `dir` in on-disk order: `.` and `..` among the children, all
/// sorted by name bytes. `(name, node)`, where `.`/`..` carry the directory/parent node.
pub(crate) fn dir_entries(tree: &Tree, dir: NodeId, parent: NodeId) -> Vec<(&[u8], NodeId)> {
    let children = tree.children(dir).unwrap_or_default();
    let mut out: Vec<(&[u8], NodeId)> = Vec::with_capacity(children.len() + 2);
    let mut dots = [(&b"."[..], dir), (&b".."[..], parent)]
        .into_iter()
        .peekable();
    for &c in children {
        let name = tree.nodes.get(c).map_or(&b""[..], |n| n.name.as_slice());
        while let Some(&(d, id)) = dots.peek() {
            if d < name {
                out.push((d, id));
                dots.next();
            } else {
                break;
            }
        }
        out.push((name, c));
    }
    out.extend(dots);
    out
}

fn split_xattr(path: &str, name: &str, value: &[u8]) -> Result<Xattr, Error> {
    let unsupported = || Error::UnsupportedXattr {
        path: path.to_string(),
        name: name.to_string(),
    };
    let (prefix, index) = XATTR_PREFIXES
        .iter()
        .find(|(p, _)| {
            if p.ends_with('.') {
                name.starts_with(p) && name.len() > p.len()
            } else {
                name == *p
            }
        })
        .copied()
        .ok_or_else(unsupported)?;
    let rest = name.get(prefix.len()..).unwrap_or_default();
    if rest.len() > 255 {
        return Err(Error::XattrTooLarge {
            path: path.to_string(),
            what: format!("the attribute name {name:?} is longer than 255 bytes"),
        });
    }
    if value.len() > usize::from(u16::MAX) {
        return Err(Error::XattrTooLarge {
            path: path.to_string(),
            what: format!(
                "the value of {name:?} is {} bytes; EROFS values hold at most 65535",
                value.len()
            ),
        });
    }
    Ok(Xattr {
        index,
        name: rest.as_bytes().to_vec(),
        value: value.to_vec(),
    })
}

impl Layout {
    pub(crate) fn new(tree: &Tree, req: &ErofsRequest) -> Result<Layout, Error> {
        let epoch = u64::try_from(req.timestamp).unwrap_or(0);
        let n = tree.nodes.len();
        let mut node_ino = vec![usize::MAX; n];
        let mut inodes: Vec<Ino> = Vec::new();
        let mut links: BTreeMap<u64, usize> = BTreeMap::new();
        let mut xattrs: Vec<Vec<Xattr>> = Vec::new();
        // Breadth-first from the root: directories and their children near each other.
        let mut queue = VecDeque::from([(0usize, 0usize)]);
        let mut seen = 0usize;
        while let Some((id, parent_ino)) = queue.pop_front() {
            seen += 1;
            if seen > n {
                return Err(Error::Tree("a directory is its own ancestor".into()));
            }
            let node = tree
                .nodes
                .get(id)
                .ok_or_else(|| Error::Tree(format!("node {id} does not exist")))?;
            if node.name.len() > 255 {
                return Err(Error::NameTooLong {
                    path: tree.path(id),
                });
            }
            if let NodeKind::File { link: Some(l), .. } = node.kind {
                if let Some(&i) = links.get(&l) {
                    if let Some(slot) = node_ino.get_mut(id) {
                        *slot = i;
                    }
                    if let Some(ino) = inodes.get_mut(i) {
                        ino.nlink += 1;
                    }
                    continue;
                }
            }
            let idx = inodes.len();
            let (kind, size, rdev) = match &node.kind {
                NodeKind::Dir { .. } => (Kind::Dir, 0, 0),
                NodeKind::File { size, .. } => (Kind::File, *size, 0),
                NodeKind::Symlink { target } => (Kind::Symlink, target.len() as u64, 0),
                NodeKind::CharDev { major, minor } => {
                    (Kind::Chr, 0, crate::raw::encode_dev(*major, *minor))
                }
                NodeKind::BlockDev { major, minor } => {
                    (Kind::Blk, 0, crate::raw::encode_dev(*major, *minor))
                }
                NodeKind::Fifo => (Kind::Fifo, 0, 0),
                NodeKind::Socket => (Kind::Sock, 0, 0),
            };
            if let NodeKind::File { link: Some(l), .. } = node.kind {
                links.insert(l, idx);
            }
            if let Some(slot) = node_ino.get_mut(id) {
                *slot = idx;
            }
            let path = || tree.path(id);
            let mut xs = Vec::with_capacity(node.meta.xattrs.len());
            for (name, value) in &node.meta.xattrs {
                xs.push(split_xattr(&path(), name, value)?);
            }
            xs.sort();
            xattrs.push(xs);
            let m = &node.meta;
            inodes.push(Ino {
                node: id,
                kind,
                mode: u16::try_from(m.mode & 0o7777).unwrap_or(0),
                uid: m.uid,
                gid: m.gid,
                mtime: u64::try_from(m.mtime).unwrap_or(0),
                mtime_nsec: m.mtime_nsec.min(999_999_999),
                nlink: if kind == Kind::Dir { 2 } else { 1 },
                size,
                rdev,
                extended: false,
                shared: Vec::new(),
                inline: Vec::new(),
                xattr_bytes: 0,
                tail: 0,
                offset: 0,
                startblk: 0,
                blocks: 0,
                parent: if id == 0 { idx } else { parent_ino },
            });
            if let NodeKind::Dir { children } = &node.kind {
                for &c in children {
                    if matches!(
                        tree.nodes.get(c).map(|n| &n.kind),
                        Some(NodeKind::Dir { .. })
                    ) {
                        if let Some(ino) = inodes.get_mut(idx) {
                            ino.nlink += 1;
                        }
                    }
                    queue.push_back((c, idx));
                }
            }
        }
        if inodes.len() > u32::MAX as usize {
            return Err(Error::TooLarge {
                what: "more than 2^32 inodes",
            });
        }

        // Xattrs: a (name, value) pair on more than one inode is shared.
        let mut count: BTreeMap<&Xattr, u32> = BTreeMap::new();
        for xs in &xattrs {
            for x in xs {
                *count.entry(x).or_default() += 1;
            }
        }
        let mut shared: Vec<(u64, Xattr)> = Vec::new();
        let mut shared_id: BTreeMap<&Xattr, u32> = BTreeMap::new();
        let mut pos = 0u64;
        for (x, &c) in &count {
            if c < 2 || x.size() > BS {
                continue;
            }
            if pos % BS + x.size() > BS {
                pos = pos.next_multiple_of(BS);
            }
            let id = u32::try_from(pos / 4).map_err(|_| Error::TooLarge {
                what: "shared xattrs beyond 16 GiB",
            })?;
            shared_id.insert(x, id);
            shared.push((pos, (*x).clone()));
            pos += x.size();
        }
        let shared_blocks = pos.div_ceil(BS);
        for (ino, xs) in inodes.iter_mut().zip(&xattrs) {
            for x in xs {
                match shared_id.get(x) {
                    Some(&id) => ino.shared.push(id),
                    None => ino.inline.push(x.clone()),
                }
            }
            if !xs.is_empty() {
                let body = 12
                    + 4 * ino.shared.len() as u64
                    + ino.inline.iter().map(Xattr::size).sum::<u64>();
                let path = || tree.path(ino.node);
                if ino.shared.len() > 255 || body > 12 + 4 * (u64::from(u16::MAX) - 1) {
                    return Err(Error::XattrTooLarge {
                        path: path(),
                        what: format!("{body} bytes of extended attributes; an EROFS inode holds at most 262144"),
                    });
                }
                ino.xattr_bytes = body;
            }
        }

        // Directory sizes, from the names alone.
        for i in 0..inodes.len() {
            let Some(ino) = inodes.get(i) else { continue };
            if ino.kind != Kind::Dir {
                continue;
            }
            let node = ino.node;
            let parent_node = inodes.get(ino.parent).map_or(node, |p| p.node);
            let names: Vec<&[u8]> = dir_entries(tree, node, parent_node)
                .into_iter()
                .map(|(n, _)| n)
                .collect();
            let blocks = dir_blocks(&names);
            let size = (blocks.len() as u64 - 1) * BS + blocks.last().map_or(0, |b| b.2);
            if let Some(ino) = inodes.get_mut(i) {
                ino.size = size;
            }
        }

        // Inode versions and tails.
        for ino in &mut inodes {
            ino.extended = ino.uid > 0xffff
                || ino.gid > 0xffff
                || ino.nlink > 0xffff
                || ino.size > u64::from(u32::MAX)
                || ino.mtime != epoch
                || ino.mtime_nsec != 0;
            let has_data = matches!(ino.kind, Kind::Dir | Kind::File | Kind::Symlink);
            let tail = ino.size % BS;
            ino.tail = if has_data && tail > 0 && ino.core() + ino.xattr_bytes + tail <= BS {
                tail
            } else {
                0
            };
            ino.blocks = if has_data {
                if ino.tail > 0 {
                    ino.size / BS
                } else {
                    ino.size.div_ceil(BS)
                }
            } else {
                0
            };
        }

        // Pack the records: the root first, then first fit among a few open blocks.
        let mut open: Vec<(u64, u64)> = vec![(0, FIRST_INODE)];
        let mut next_block = 1u64;
        for ino in &mut inodes {
            let r = ino.record().next_multiple_of(32);
            if r > BS {
                ino.offset = next_block * BS;
                next_block += r.div_ceil(BS);
                continue;
            }
            let slot = open
                .iter()
                .position(|&(_, used)| used.next_multiple_of(32) + r <= BS);
            let at = match slot {
                Some(k) => k,
                None => {
                    if open.len() >= OPEN_BLOCKS {
                        // Close the fullest block.
                        if let Some(k) =
                            (0..open.len()).max_by_key(|&k| open.get(k).map_or(0, |o| o.1))
                        {
                            open.remove(k);
                        }
                    }
                    open.push((next_block, 0));
                    next_block += 1;
                    open.len() - 1
                }
            };
            if let Some((blk, used)) = open.get_mut(at) {
                let off = used.next_multiple_of(32);
                ino.offset = *blk * BS + off;
                *used = off + r;
            }
        }
        let meta_blocks = next_block;
        let xattr_blkaddr = meta_blocks;
        let mut cursor = meta_blocks + shared_blocks;
        for pass in [Kind::Dir, Kind::File, Kind::Symlink] {
            for ino in inodes.iter_mut().filter(|i| i.kind == pass) {
                if ino.blocks > 0 {
                    ino.startblk = cursor;
                    cursor += ino.blocks;
                }
            }
        }
        if cursor > u64::from(u32::MAX) {
            return Err(Error::TooLarge {
                what: "more than 2^32 blocks (16 TiB)",
            });
        }
        if inodes.first().map_or(0, Ino::nid) > u64::from(u16::MAX) {
            return Err(Error::TooLarge {
                what: "the root inode beyond nid 65535",
            });
        }
        Ok(Layout {
            inodes,
            node_ino,
            shared,
            meta_blocks,
            xattr_blkaddr: if shared_blocks > 0 { xattr_blkaddr } else { 0 },
            total_blocks: cursor,
            epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::Meta;

    #[test]
    fn dots_sort_among_names() {
        let mut t = Tree::default();
        for n in ["#a", "b", "-", ".hidden"] {
            t.add(0, n, NodeKind::Fifo, Meta::default()).unwrap();
        }
        let names: Vec<&[u8]> = dir_entries(&t, 0, 0).into_iter().map(|e| e.0).collect();
        assert_eq!(names, [&b"#a"[..], b"-", b".", b"..", b".hidden", b"b"]);
        // 4096 / (12 + 8) = 204 entries of 8-byte names per block.
        let long: Vec<&[u8]> = (0..300).map(|_| &b"12345678"[..]).collect();
        let blocks = dir_blocks(&long);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].1, 204);
        assert_eq!(blocks[1].2, 96 * 20);
    }
}
