//! The writer: inode numbers in post-order (children before their directory, the root last,
//! as mksquashfs numbers them), then one more post-order pass that streams each file's
//! blocks (compressed, or stored when that is not smaller; all-zero blocks as holes) to the
//! sink, packs small files into fragment blocks, and appends inodes and directory listings to
//! the in-memory metadata streams, which go out last with the fragment, id and xattr tables.

use std::collections::{BTreeMap, BTreeSet};

use blockwise_geometry::{BlockSink, ContentSource, NodeId, NodeKind, Tree};

use crate::compress::{compress, options_block};
use crate::meta::Meta;
use crate::raw::{flags, itype, DATA_UNCOMPRESSED, MAGIC, NOT_SET, NO_FRAGMENT, NO_XATTR};
use crate::{Error, SquashfsRequest, Written};

/// Xattr name prefixes squashfs stores, with their type.
const PREFIXES: &[(&str, u16)] = &[("user.", 0), ("trusted.", 1), ("security.", 2)];

type XattrSet = Vec<(u16, Vec<u8>, Vec<u8>)>;

struct Writer<'a, S: BlockSink + ?Sized> {
    sink: &'a mut S,
    limit: u64,
    cursor: u64,
    block: u32,
    req: &'a SquashfsRequest,
    content: &'a dyn ContentSource,
    inodes: Meta,
    dirs: Meta,
    frag_buf: Vec<u8>,
    frags: Vec<(u64, u32)>,
    ids: BTreeMap<u32, u16>,
    xattr_sets: BTreeMap<XattrSet, u32>,
    dropped: BTreeSet<String>,
}

fn sink_err<E: core::error::Error + Send + Sync + 'static>(offset: u64) -> impl FnOnce(E) -> Error {
    move |e| Error::Sink {
        offset,
        source: Box::new(e),
    }
}

impl<S: BlockSink + ?Sized> Writer<'_, S> {
    fn put(&mut self, at: u64, bytes: &[u8]) -> Result<(), Error> {
        let end = at
            .checked_add(bytes.len() as u64)
            .ok_or(Error::NoSpace { have: self.limit })?;
        if end > self.limit {
            return Err(Error::NoSpace { have: self.limit });
        }
        self.sink.write_at(at, bytes).map_err(sink_err(at))
    }

    /// Appends data at the cursor.
    fn append(&mut self, bytes: &[u8]) -> Result<u64, Error> {
        let at = self.cursor;
        self.put(at, bytes)?;
        self.cursor += bytes.len() as u64;
        Ok(at)
    }

    /// Compresses and appends one block: its size word.
    fn data_block(&mut self, data: &[u8]) -> Result<u32, Error> {
        let c = &self.req.options;
        match compress(c.compression, c.level, self.block, data) {
            Some(z) => {
                self.append(&z)?;
                Ok(u32::try_from(z.len()).unwrap_or(0))
            }
            None => {
                self.append(data)?;
                Ok(u32::try_from(data.len()).unwrap_or(0) | DATA_UNCOMPRESSED)
            }
        }
    }

    fn flush_fragment(&mut self) -> Result<(), Error> {
        if self.frag_buf.is_empty() {
            return Ok(());
        }
        let buf = core::mem::take(&mut self.frag_buf);
        let start = self.cursor;
        let size = self.data_block(&buf)?;
        self.frags.push((start, size));
        Ok(())
    }

    fn id(&self, v: u32) -> u16 {
        self.ids.get(&v).copied().unwrap_or(0)
    }

    /// The xattr set index of a node (`NO_XATTR` without any squashfs can store).
    fn xattrs(&mut self, tree: &Tree, id: NodeId) -> u32 {
        let Some(node) = tree.nodes.get(id) else {
            return NO_XATTR;
        };
        let mut set: XattrSet = Vec::new();
        for (name, value) in &node.meta.xattrs {
            match PREFIXES
                .iter()
                .find(|(p, _)| name.starts_with(p) && name.len() > p.len())
            {
                Some((p, t)) => set.push((*t, name.as_bytes()[p.len()..].to_vec(), value.clone())),
                None => {
                    self.dropped.insert(name.clone());
                }
            }
        }
        if set.is_empty() {
            return NO_XATTR;
        }
        set.sort();
        let next = u32::try_from(self.xattr_sets.len()).unwrap_or(NO_XATTR);
        *self.xattr_sets.entry(set).or_insert(next)
    }

    /// Reads `len` bytes of a file at `off` into `buf` (holes stay zero).
    fn read(
        &self,
        file: (u64, Option<&[(u64, u64)]>),
        off: u64,
        buf: &mut [u8],
    ) -> Result<(), Error> {
        buf.fill(0);
        let end = off + buf.len() as u64;
        let (content, ranges) = file;
        let all = [(off, end)];
        let ranges = ranges.unwrap_or(&all);
        for &(s, e) in ranges {
            let (s, e) = (s.max(off), e.min(end));
            if s < e {
                self.content.read_at(
                    content,
                    s,
                    &mut buf[(s - off) as usize..(e - off) as usize],
                )?;
            }
        }
        Ok(())
    }

    /// Writes a file's data: `(blocks_start, block sizes, fragment, offset, sparse bytes)`.
    fn file_data(
        &mut self,
        file: (u64, Option<&[(u64, u64)]>),
        size: u64,
    ) -> Result<(u64, Vec<u32>, u32, u32, u64), Error> {
        let bs = u64::from(self.block);
        let fragment = self.req.options.fragments && size > 0 && size < bs;
        let start = self.cursor;
        let mut sizes = Vec::new();
        let mut sparse = 0u64;
        let mut buf = vec![0u8; self.block as usize];
        if fragment {
            let chunk = &mut buf[..size as usize];
            self.read(file, 0, chunk)?;
            if self.frag_buf.len() as u64 + size > bs {
                self.flush_fragment()?;
            }
            let offset = u32::try_from(self.frag_buf.len()).unwrap_or(0);
            self.frag_buf.extend_from_slice(chunk);
            let index = u32::try_from(self.frags.len()).map_err(|_| Error::TooLarge {
                what: "more than 2^32 fragments".into(),
            })?;
            return Ok((start, sizes, index, offset, 0));
        }
        let mut off = 0u64;
        while off < size {
            let n = (size - off).min(bs) as usize;
            let chunk = &mut buf[..n];
            self.read(file, off, chunk)?;
            if chunk.iter().all(|&b| b == 0) {
                sizes.push(0);
                sparse += n as u64;
            } else {
                let s = self.data_block(chunk)?;
                sizes.push(s);
            }
            off += n as u64;
        }
        Ok((start, sizes, NO_FRAGMENT, 0, sparse))
    }
}

fn header(out: &mut Vec<u8>, t: u16, mode: u32, uid: u16, gid: u16, mtime: i64, number: u32) {
    out.extend_from_slice(&t.to_le_bytes());
    out.extend_from_slice(&u16::try_from(mode & 0o7777).unwrap_or(0).to_le_bytes());
    out.extend_from_slice(&uid.to_le_bytes());
    out.extend_from_slice(&gid.to_le_bytes());
    out.extend_from_slice(
        &u32::try_from(mtime.clamp(0, i64::from(u32::MAX)))
            .unwrap_or(0)
            .to_le_bytes(),
    );
    out.extend_from_slice(&number.to_le_bytes());
}

fn le32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Nodes in post-order: every directory after its children, the root last.
fn post_order(tree: &Tree) -> Result<Vec<NodeId>, Error> {
    let mut order = Vec::with_capacity(tree.nodes.len());
    let mut stack: Vec<(NodeId, usize)> = vec![(0, 0)];
    let mut steps = 0usize;
    while let Some((n, k)) = stack.last_mut() {
        steps += 1;
        if steps > tree.nodes.len().saturating_mul(2) + 2 {
            return Err(Error::Tree("a directory is its own ancestor".into()));
        }
        let children = tree.children(*n).unwrap_or_default();
        match children.get(*k) {
            Some(&c) => {
                *k += 1;
                if tree.children(c).is_some() {
                    stack.push((c, 0));
                } else {
                    order.push(c);
                }
            }
            None => {
                order.push(*n);
                stack.pop();
            }
        }
    }
    Ok(order)
}

/// A table of fixed-size entries in metadata blocks, then its index: returns the index's
/// position.
fn table<S: BlockSink + ?Sized>(w: &mut Writer<'_, S>, entries: &[u8]) -> Result<u64, Error> {
    let c = &w.req.options;
    let mut m = Meta::new(c.compression, c.level, w.block);
    m.write(entries);
    let (bytes, starts) = m.finish();
    let base = w.append(&bytes)?;
    let mut index = Vec::with_capacity(starts.len() * 8);
    for s in starts {
        index.extend_from_slice(&(base + s).to_le_bytes());
    }
    w.append(&index)
}

/// Inode numbers (post-order; hard links share the first one's), link counts and owner ids.
struct Numbers {
    number: Vec<u32>,
    /// The first node of each hard-link group.
    link_first: BTreeMap<u64, NodeId>,
    link_count: BTreeMap<u64, u32>,
    ids: BTreeSet<u32>,
    inode_count: u32,
}

/// Numbers the inodes in `order`, counting hard links and collecting the owner ids.
fn number_inodes(tree: &Tree, order: &[NodeId]) -> Result<Numbers, Error> {
    let mut number = vec![0u32; tree.nodes.len()];
    let mut link_first: BTreeMap<u64, NodeId> = BTreeMap::new();
    let mut link_count: BTreeMap<u64, u32> = BTreeMap::new();
    let mut next = 0u32;
    let mut ids = BTreeSet::new();
    for &n in order {
        let node = tree
            .nodes
            .get(n)
            .ok_or_else(|| Error::Tree(format!("node {n} does not exist")))?;
        if node.name.len() > 256 {
            return Err(Error::TooLarge {
                what: format!("{}: a name longer than 256 bytes", tree.path(n)),
            });
        }
        ids.insert(node.meta.uid);
        ids.insert(node.meta.gid);
        if let NodeKind::File { link: Some(l), .. } = node.kind {
            *link_count.entry(l).or_default() += 1;
            if let Some(&first) = link_first.get(&l) {
                number[n] = number[first];
                continue;
            }
            link_first.insert(l, n);
        }
        next = next.checked_add(1).ok_or(Error::TooLarge {
            what: "more than 2^32 inodes".into(),
        })?;
        number[n] = next;
    }
    if ids.len() > 65536 {
        return Err(Error::TooLarge {
            what: format!(
                "{} distinct owners and groups (squashfs holds 65536)",
                ids.len()
            ),
        });
    }
    let inode_count = next;
    Ok(Numbers {
        number,
        link_first,
        link_count,
        ids,
        inode_count,
    })
}

/// Encodes node `n`'s inode (a directory's listing goes to the directory table); returns
/// its basic type and the inode's bytes.
fn inode<S: BlockSink + ?Sized>(
    w: &mut Writer<'_, S>,
    tree: &Tree,
    n: NodeId,
    nums: &Numbers,
    written: &[Option<(u64, u16)>],
    xattr: u32,
) -> Result<(u16, Vec<u8>), Error> {
    let Numbers {
        number,
        link_count,
        inode_count,
        ..
    } = nums;
    let node = &tree.nodes[n];
    let m = &node.meta;
    let (uid, gid) = (w.id(m.uid), w.id(m.gid));
    let num = number[n];
    let mut ino = Vec::with_capacity(64);
    let basic = match &node.kind {
        NodeKind::Dir { children } => {
            // The listing: runs of entries sharing an inode block and a number base.
            let (start_block, offset) = w.dirs.pos();
            let mut listing = Vec::new();
            let mut k = 0;
            while k < children.len() {
                let (r0, _) = written[children[k]].unwrap_or((0, 0));
                let base = number[children[k]];
                let mut end = k;
                while end < children.len()
                    && end - k < 256
                    && written[children[end]].unwrap_or((0, 0)).0 >> 16 == r0 >> 16
                    && (i64::from(number[children[end]]) - i64::from(base)).abs() <= 32767
                {
                    end += 1;
                }
                le32(&mut listing, u32::try_from(end - k - 1).unwrap_or(0));
                le32(&mut listing, u32::try_from(r0 >> 16).unwrap_or(0));
                le32(&mut listing, base);
                for &c in &children[k..end] {
                    let (r, t) = written[c].unwrap_or((0, 0));
                    let name = &tree.nodes[c].name;
                    listing
                        .extend_from_slice(&u16::try_from(r & 0xffff).unwrap_or(0).to_le_bytes());
                    let delta = i64::from(number[c]) - i64::from(base);
                    listing.extend_from_slice(&i16::try_from(delta).unwrap_or(0).to_le_bytes());
                    listing.extend_from_slice(&t.to_le_bytes());
                    listing.extend_from_slice(
                        &u16::try_from(name.len().saturating_sub(1))
                            .unwrap_or(0)
                            .to_le_bytes(),
                    );
                    listing.extend_from_slice(name);
                }
                k = end;
            }
            w.dirs.write(&listing);
            let file_size = listing.len() as u64 + 3;
            let subdirs = children
                .iter()
                .filter(|&&c| tree.children(c).is_some())
                .count() as u32;
            let nlink = 2 + subdirs;
            let parent = if n == 0 {
                inode_count + 1
            } else {
                number[node.parent]
            };
            let start = u32::try_from(start_block).map_err(|_| Error::TooLarge {
                what: "a directory table beyond 4 GiB".into(),
            })?;
            if file_size <= 65535 && xattr == NO_XATTR {
                header(&mut ino, itype::DIR, m.mode, uid, gid, m.mtime, num);
                le32(&mut ino, start);
                le32(&mut ino, nlink);
                ino.extend_from_slice(&u16::try_from(file_size).unwrap_or(0).to_le_bytes());
                ino.extend_from_slice(&offset.to_le_bytes());
                le32(&mut ino, parent);
            } else {
                header(
                    &mut ino,
                    itype::DIR + itype::EXTENDED,
                    m.mode,
                    uid,
                    gid,
                    m.mtime,
                    num,
                );
                le32(&mut ino, nlink);
                le32(
                    &mut ino,
                    u32::try_from(file_size).map_err(|_| Error::TooLarge {
                        what: format!("{}: a directory listing beyond 4 GiB", tree.path(n)),
                    })?,
                );
                le32(&mut ino, start);
                le32(&mut ino, parent);
                ino.extend_from_slice(&0u16.to_le_bytes());
                ino.extend_from_slice(&offset.to_le_bytes());
                le32(&mut ino, xattr);
            }
            itype::DIR
        }
        NodeKind::File {
            size,
            content,
            data_ranges,
            link,
        } => {
            let nlink = link.and_then(|l| link_count.get(&l).copied()).unwrap_or(1);
            let (start, sizes, frag, off, sparse) =
                w.file_data((*content, data_ranges.as_deref()), *size)?;
            let basic = *size <= u64::from(u32::MAX)
                && start <= u64::from(u32::MAX)
                && nlink == 1
                && xattr == NO_XATTR;
            if basic {
                header(&mut ino, itype::FILE, m.mode, uid, gid, m.mtime, num);
                le32(&mut ino, u32::try_from(start).unwrap_or(0));
                le32(&mut ino, frag);
                le32(&mut ino, off);
                le32(&mut ino, u32::try_from(*size).unwrap_or(0));
            } else {
                header(
                    &mut ino,
                    itype::FILE + itype::EXTENDED,
                    m.mode,
                    uid,
                    gid,
                    m.mtime,
                    num,
                );
                ino.extend_from_slice(&start.to_le_bytes());
                ino.extend_from_slice(&size.to_le_bytes());
                ino.extend_from_slice(&sparse.to_le_bytes());
                le32(&mut ino, nlink);
                le32(&mut ino, frag);
                le32(&mut ino, off);
                le32(&mut ino, xattr);
            }
            for s in sizes {
                le32(&mut ino, s);
            }
            itype::FILE
        }
        NodeKind::Symlink { target } => {
            let t = if xattr == NO_XATTR {
                itype::SYMLINK
            } else {
                itype::SYMLINK + itype::EXTENDED
            };
            header(&mut ino, t, m.mode, uid, gid, m.mtime, num);
            le32(&mut ino, 1);
            le32(&mut ino, u32::try_from(target.len()).unwrap_or(0));
            ino.extend_from_slice(target);
            if xattr != NO_XATTR {
                le32(&mut ino, xattr);
            }
            itype::SYMLINK
        }
        NodeKind::CharDev { major, minor } | NodeKind::BlockDev { major, minor } => {
            let b = if matches!(node.kind, NodeKind::CharDev { .. }) {
                itype::CHRDEV
            } else {
                itype::BLKDEV
            };
            let t = if xattr == NO_XATTR {
                b
            } else {
                b + itype::EXTENDED
            };
            header(&mut ino, t, m.mode, uid, gid, m.mtime, num);
            le32(&mut ino, 1);
            let (ma, mi) = (*major, *minor);
            le32(
                &mut ino,
                (mi & 0xff) | ((ma & 0xfff) << 8) | ((mi & !0xff) << 12),
            );
            if xattr != NO_XATTR {
                le32(&mut ino, xattr);
            }
            b
        }
        NodeKind::Fifo | NodeKind::Socket => {
            let b = if matches!(node.kind, NodeKind::Fifo) {
                itype::FIFO
            } else {
                itype::SOCKET
            };
            let t = if xattr == NO_XATTR {
                b
            } else {
                b + itype::EXTENDED
            };
            header(&mut ino, t, m.mode, uid, gid, m.mtime, num);
            le32(&mut ino, 1);
            if xattr != NO_XATTR {
                le32(&mut ino, xattr);
            }
            b
        }
    };
    Ok((basic, ino))
}

/// The xattr key/value table, then the id table of the sets: returns its position.
fn xattr_table<S: BlockSink + ?Sized>(w: &mut Writer<'_, S>) -> Result<u64, Error> {
    let o = &w.req.options;
    let mut sets: Vec<(u32, XattrSet)> = core::mem::take(&mut w.xattr_sets)
        .into_iter()
        .map(|(s, i)| (i, s))
        .collect();
    sets.sort_by_key(|(i, _)| *i);
    let mut kv = Meta::new(o.compression, o.level, o.block_size);
    let mut id_entries = Vec::with_capacity(sets.len() * 16);
    for (_, set) in &sets {
        let r = kv.reference();
        let mut size = 0u32;
        for (t, name, value) in set {
            let mut e = Vec::with_capacity(8 + name.len() + value.len());
            e.extend_from_slice(&t.to_le_bytes());
            e.extend_from_slice(&u16::try_from(name.len()).unwrap_or(0).to_le_bytes());
            e.extend_from_slice(name);
            e.extend_from_slice(&u32::try_from(value.len()).unwrap_or(0).to_le_bytes());
            e.extend_from_slice(value);
            size = size.saturating_add(u32::try_from(e.len()).unwrap_or(u32::MAX));
            kv.write(&e);
        }
        id_entries.extend_from_slice(&r.to_le_bytes());
        id_entries.extend_from_slice(&u32::try_from(set.len()).unwrap_or(0).to_le_bytes());
        id_entries.extend_from_slice(&size.to_le_bytes());
    }
    let (kbytes, _) = kv.finish();
    let xattr_table_start = w.append(&kbytes)?;
    let mut m = Meta::new(o.compression, o.level, o.block_size);
    m.write(&id_entries);
    let (ibytes, starts) = m.finish();
    let base = w.append(&ibytes)?;
    let mut head = Vec::with_capacity(16 + starts.len() * 8);
    head.extend_from_slice(&xattr_table_start.to_le_bytes());
    head.extend_from_slice(&u32::try_from(sets.len()).unwrap_or(0).to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    for s in starts {
        head.extend_from_slice(&(base + s).to_le_bytes());
    }
    w.append(&head)
}

pub(crate) fn write<S: BlockSink + ?Sized>(
    sink: &mut S,
    req: &SquashfsRequest,
    tree: &Tree,
    content: &dyn ContentSource,
) -> Result<Written, Error> {
    let o = &req.options;
    o.validate().map_err(Error::Invalid)?;
    let limit = req.partition_size_bytes.min(sink.len());
    let order = post_order(tree)?;

    // Inode numbers (hard links share the first one's), link counts, ids.
    let nums = number_inodes(tree, &order)?;
    let inode_count = nums.inode_count;

    let mut w = Writer {
        sink,
        limit,
        cursor: 96,
        block: o.block_size,
        req,
        content,
        inodes: Meta::new(o.compression, o.level, o.block_size),
        dirs: Meta::new(o.compression, o.level, o.block_size),
        frag_buf: Vec::new(),
        frags: Vec::new(),
        ids: nums
            .ids
            .iter()
            .enumerate()
            .map(|(i, &v)| (v, u16::try_from(i).unwrap_or(0)))
            .collect(),
        xattr_sets: BTreeMap::new(),
        dropped: BTreeSet::new(),
    };
    let opts = options_block(o.compression, o.level, o.block_size);
    if let Some(ob) = &opts {
        let mut b = (u16::try_from(ob.len()).unwrap_or(0) | crate::raw::METADATA_UNCOMPRESSED)
            .to_le_bytes()
            .to_vec();
        b.extend_from_slice(ob);
        w.append(&b)?;
    }

    // (reference, basic type) of each written node.
    let mut written: Vec<Option<(u64, u16)>> = vec![None; tree.nodes.len()];
    for &n in &order {
        let node = &tree.nodes[n];
        if let NodeKind::File { link: Some(l), .. } = node.kind {
            if let Some(&first) = nums.link_first.get(&l) {
                if first != n {
                    written[n] = written[first];
                    continue;
                }
            }
        }
        let xattr = w.xattrs(tree, n);
        let (basic, ino) = inode(&mut w, tree, n, &nums, &written, xattr)?;
        let r = w.inodes.reference();
        w.inodes.write(&ino);
        written[n] = Some((r, basic));
    }
    w.flush_fragment()?;
    let root = written.first().copied().flatten().map_or(0, |(r, _)| r);

    // Tables.
    let inodes = core::mem::replace(
        &mut w.inodes,
        Meta::new(o.compression, o.level, o.block_size),
    );
    let (ibytes, _) = inodes.finish();
    let inode_table_start = w.append(&ibytes)?;
    drop(ibytes);
    let dirs = core::mem::replace(&mut w.dirs, Meta::new(o.compression, o.level, o.block_size));
    let (dbytes, _) = dirs.finish();
    let directory_table_start = w.append(&dbytes)?;
    drop(dbytes);
    let fragment_table_start = if w.frags.is_empty() {
        w.cursor
    } else {
        let mut entries = Vec::with_capacity(w.frags.len() * 16);
        for &(start, size) in &w.frags {
            entries.extend_from_slice(&start.to_le_bytes());
            entries.extend_from_slice(&size.to_le_bytes());
            entries.extend_from_slice(&0u32.to_le_bytes());
        }
        table(&mut w, &entries)?
    };
    let id_entries: Vec<u8> = w.ids.keys().flat_map(|v| v.to_le_bytes()).collect();
    let id_table_start = table(&mut w, &id_entries)?;
    let xattr_id_table_start = if w.xattr_sets.is_empty() {
        NOT_SET
    } else {
        xattr_table(&mut w)?
    };
    let bytes_used = w.cursor;

    // Superblock, then padding to 4 KiB.
    let mut f = 0u16;
    if opts.is_some() {
        f |= flags::COMPRESSOR_OPTIONS;
    }
    if !o.fragments {
        f |= flags::NO_FRAGMENTS;
    }
    let mut sb = Vec::with_capacity(96);
    le32(&mut sb, MAGIC);
    le32(&mut sb, inode_count);
    le32(
        &mut sb,
        u32::try_from(req.timestamp.clamp(0, i64::from(u32::MAX))).unwrap_or(0),
    );
    le32(&mut sb, o.block_size);
    le32(&mut sb, u32::try_from(w.frags.len()).unwrap_or(u32::MAX));
    sb.extend_from_slice(&o.compression.id().to_le_bytes());
    sb.extend_from_slice(
        &u16::try_from(o.block_size.ilog2())
            .unwrap_or(0)
            .to_le_bytes(),
    );
    sb.extend_from_slice(&f.to_le_bytes());
    sb.extend_from_slice(&u16::try_from(w.ids.len()).unwrap_or(0).to_le_bytes());
    sb.extend_from_slice(&4u16.to_le_bytes());
    sb.extend_from_slice(&0u16.to_le_bytes());
    for v in [
        root,
        bytes_used,
        id_table_start,
        xattr_id_table_start,
        inode_table_start,
        directory_table_start,
        fragment_table_start,
        NOT_SET,
    ] {
        sb.extend_from_slice(&v.to_le_bytes());
    }
    w.put(0, &sb)?;
    let padded = bytes_used.next_multiple_of(4096);
    let pad = vec![0u8; (padded - bytes_used) as usize];
    w.put(bytes_used, &pad)?;
    let dropped: Vec<String> = w.dropped.into_iter().collect();
    Ok(Written {
        bytes_used,
        padded_bytes: padded,
        inodes: u64::from(inode_count),
        dropped_xattrs: dropped,
    })
}
