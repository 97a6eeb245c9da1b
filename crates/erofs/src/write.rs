//! Writes a [`Layout`]: the metadata blocks one run at a time (superblock, inode records with
//! their xattrs and tails), the shared xattrs, the directory blocks, then file data by
//! reference.

use blockwise_geometry::{BlockSink, ContentRef, ContentSource, NodeKind, PlaceError, Tree};
use zerocopy::IntoBytes;

use crate::layout::{dir_blocks, dir_entries, Ino, Kind, Layout, Xattr};
use crate::raw::{
    superblock_checksum, DirentRaw, InodeCompactRaw, InodeExtendedRaw, SuperblockRaw,
    XattrEntryRaw, XattrIbodyHeaderRaw, COMPAT_SB_CHKSUM, I_VERSION_EXTENDED, LAYOUT_FLAT_INLINE,
    LAYOUT_FLAT_PLAIN, MAGIC,
};
use crate::{ErofsRequest, Error};

const BS: u64 = crate::BLOCK_BYTES as u64;
static ZEROS: [u8; 65536] = [0; 65536];

fn sink_err<E: core::error::Error + Send + Sync + 'static>(offset: u64) -> impl FnOnce(E) -> Error {
    move |e| Error::Sink {
        offset,
        source: Box::new(e),
    }
}

fn put<S: BlockSink + ?Sized>(sink: &mut S, offset: u64, data: &[u8]) -> Result<(), Error> {
    sink.write_at(offset, data).map_err(sink_err(offset))
}

fn zeros<S: BlockSink + ?Sized>(sink: &mut S, mut offset: u64, len: u64) -> Result<(), Error> {
    let end = offset + len;
    while offset < end {
        let n = (end - offset).min(ZEROS.len() as u64);
        put(sink, offset, &ZEROS[..n as usize])?;
        offset += n;
    }
    Ok(())
}

fn place<S: BlockSink + ?Sized>(
    sink: &mut S,
    at: u64,
    r: ContentRef,
    source: &dyn ContentSource,
) -> Result<(), Error> {
    sink.write_content(at, r, source).map_err(|e| match e {
        PlaceError::Content(c) => Error::Content(c),
        PlaceError::Sink(s) => Error::Sink {
            offset: at,
            source: Box::new(s),
        },
    })
}

/// The data ranges of a file inside `[from, to)`, as `(start, end)` in file bytes.
fn data_in(ranges: Option<&[(u64, u64)]>, from: u64, to: u64) -> Vec<(u64, u64)> {
    match ranges {
        None => vec![(from, to)],
        Some(r) => r
            .iter()
            .map(|&(s, e)| (s.max(from), e.min(to)))
            .filter(|(s, e)| s < e)
            .collect(),
    }
}

/// Places bytes `[from, to)` of a file at `at` in the sink: data by reference, holes as
/// zeros.
fn place_file<S: BlockSink + ?Sized>(
    sink: &mut S,
    at: u64,
    file: (u64, Option<&[(u64, u64)]>),
    from: u64,
    to: u64,
    source: &dyn ContentSource,
) -> Result<(), Error> {
    let (content, ranges) = file;
    let mut pos = from;
    for (s, e) in data_in(ranges, from, to) {
        zeros(sink, at + (pos - from), s - pos)?;
        place(
            sink,
            at + (s - from),
            ContentRef {
                content,
                offset: s,
                len: e - s,
            },
            source,
        )?;
        pos = e;
    }
    zeros(sink, at + (pos - from), to - pos)
}

/// Reads bytes `[from, to)` of a file into `buf` (holes stay zero).
fn read_file(
    file: (u64, Option<&[(u64, u64)]>),
    from: u64,
    to: u64,
    buf: &mut [u8],
    source: &dyn ContentSource,
) -> Result<(), Error> {
    let (content, ranges) = file;
    for (s, e) in data_in(ranges, from, to) {
        if let Some(dst) = buf.get_mut((s - from) as usize..(e - from) as usize) {
            source.read_at(content, s, dst)?;
        }
    }
    Ok(())
}

/// The bytes of a directory: its dirent blocks, the last one cut to its used length.
fn dir_bytes(tree: &Tree, lay: &Layout, ino: &Ino) -> Vec<u8> {
    let parent = lay.inodes.get(ino.parent).map_or(ino.node, |p| p.node);
    let entries = dir_entries(tree, ino.node, parent);
    let names: Vec<&[u8]> = entries.iter().map(|e| e.0).collect();
    let blocks = dir_blocks(&names);
    let mut out = Vec::with_capacity(ino.size as usize);
    for (bi, &(first, end, used)) in blocks.iter().enumerate() {
        let base = out.len();
        let n = (end - first) as u64;
        let mut nameoff = 12 * n;
        for (name, node) in entries.get(first..end).unwrap_or_default() {
            let target = lay.node_ino.get(*node).and_then(|&i| lay.inodes.get(i));
            let (nid, ft) = target.map_or((0, 0), |t| (t.nid(), t.kind.file_type() as u8));
            let d = DirentRaw {
                nid: nid.into(),
                nameoff: u16::try_from(nameoff).unwrap_or(0).into(),
                file_type: ft,
                reserved: 0,
            };
            out.extend_from_slice(d.as_bytes());
            nameoff += name.len() as u64;
        }
        for (name, _) in entries.get(first..end).unwrap_or_default() {
            out.extend_from_slice(name);
        }
        debug_assert_eq!((out.len() - base) as u64, used);
        if bi + 1 < blocks.len() {
            out.resize(base + BS as usize, 0);
        }
    }
    out
}

fn xattr_entry(out: &mut Vec<u8>, x: &Xattr) {
    let e = XattrEntryRaw {
        e_name_len: u8::try_from(x.name.len()).unwrap_or(0),
        e_name_index: x.index,
        e_value_size: u16::try_from(x.value.len()).unwrap_or(0).into(),
    };
    let start = out.len();
    out.extend_from_slice(e.as_bytes());
    out.extend_from_slice(&x.name);
    out.extend_from_slice(&x.value);
    out.resize(start + x.size() as usize, 0);
}

/// The inode core and its xattr body.
fn inode_bytes(ino: &Ino, index: usize) -> Vec<u8> {
    let layout = if ino.tail > 0 {
        LAYOUT_FLAT_INLINE
    } else {
        LAYOUT_FLAT_PLAIN
    };
    let i_u = match ino.kind {
        Kind::Chr | Kind::Blk => ino.rdev,
        _ if ino.blocks > 0 => u32::try_from(ino.startblk).unwrap_or(0),
        _ => 0,
    };
    let icount = if ino.xattr_bytes == 0 {
        0
    } else {
        (ino.xattr_bytes - 12) / 4 + 1
    };
    let icount = u16::try_from(icount).unwrap_or(u16::MAX);
    let i_ino = u32::try_from(index + 1).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity((ino.core() + ino.xattr_bytes) as usize);
    if ino.extended {
        let raw = InodeExtendedRaw {
            i_format: (I_VERSION_EXTENDED | (layout << 1)).into(),
            i_xattr_icount: icount.into(),
            i_mode: ino.i_mode().into(),
            i_nb: 0.into(),
            i_size: ino.size.into(),
            i_u: i_u.into(),
            i_ino: i_ino.into(),
            i_uid: ino.uid.into(),
            i_gid: ino.gid.into(),
            i_mtime: ino.mtime.into(),
            i_mtime_nsec: ino.mtime_nsec.into(),
            i_nlink: ino.nlink.into(),
            i_reserved2: [0; 16],
        };
        out.extend_from_slice(raw.as_bytes());
    } else {
        let raw = InodeCompactRaw {
            i_format: (layout << 1).into(),
            i_xattr_icount: icount.into(),
            i_mode: ino.i_mode().into(),
            i_nlink: u16::try_from(ino.nlink).unwrap_or(u16::MAX).into(),
            i_size: u32::try_from(ino.size).unwrap_or(u32::MAX).into(),
            i_mtime: 0.into(),
            i_u: i_u.into(),
            i_ino: i_ino.into(),
            i_uid: u16::try_from(ino.uid).unwrap_or(0).into(),
            i_gid: u16::try_from(ino.gid).unwrap_or(0).into(),
            i_reserved: 0.into(),
        };
        out.extend_from_slice(raw.as_bytes());
    }
    if ino.xattr_bytes > 0 {
        let h = XattrIbodyHeaderRaw {
            h_name_filter: 0.into(),
            h_shared_count: u8::try_from(ino.shared.len()).unwrap_or(0),
            h_reserved2: [0; 7],
        };
        out.extend_from_slice(h.as_bytes());
        for id in &ino.shared {
            out.extend_from_slice(&id.to_le_bytes());
        }
        for x in &ino.inline {
            xattr_entry(&mut out, x);
        }
    }
    out
}

fn superblock(req: &ErofsRequest, lay: &Layout) -> SuperblockRaw {
    use zerocopy::FromZeros;
    let mut sb = SuperblockRaw::new_zeroed();
    sb.magic = MAGIC.into();
    sb.feature_compat = COMPAT_SB_CHKSUM.into();
    sb.blkszbits = 12;
    sb.root_nid = u16::try_from(lay.inodes.first().map_or(0, Ino::nid))
        .unwrap_or(0)
        .into();
    sb.inos = (lay.inodes.len() as u64).into();
    sb.epoch = lay.epoch.into();
    sb.blocks = u32::try_from(lay.total_blocks).unwrap_or(u32::MAX).into();
    sb.meta_blkaddr = 0.into();
    sb.xattr_blkaddr = u32::try_from(lay.xattr_blkaddr).unwrap_or(0).into();
    sb.uuid = req.uuid();
    if let Some(l) = &req.label {
        for (d, s) in sb.volume_name.iter_mut().zip(l.bytes()) {
            *d = s;
        }
    }
    sb
}

/// A file tail to place after its metadata run: where, what, and the file's data ranges.
type Tail = (u64, ContentRef, Option<Vec<(u64, u64)>>);

/// A run of metadata blocks being filled, with the file tails to place after it is written.
struct Run {
    start: u64,
    buf: Vec<u8>,
    tails: Vec<Tail>,
}

pub(crate) fn write<S: BlockSink + ?Sized>(
    sink: &mut S,
    req: &ErofsRequest,
    lay: &Layout,
    tree: &Tree,
    source: &dyn ContentSource,
) -> Result<(), Error> {
    let mut order: Vec<usize> = (0..lay.inodes.len()).collect();
    order.sort_by_key(|&i| lay.inodes.get(i).map_or(0, |x| x.offset));
    let sb = superblock(req, lay);
    let mut written_to = 0u64; // metadata blocks written so far
    let mut run: Option<Run> = None;

    let flush = |sink: &mut S, run: Run, written_to: &mut u64| -> Result<(), Error> {
        let mut buf = run.buf;
        if run.start == 0 {
            let c = superblock_checksum(buf.get(..BS as usize).unwrap_or_default());
            if let Some(f) = buf.get_mut(1028..1032) {
                f.copy_from_slice(&c.to_le_bytes());
            }
        }
        // Blocks no record touched are written as zeros, so the image is mapped whole.
        zeros(
            sink,
            *written_to * BS,
            run.start.saturating_sub(*written_to) * BS,
        )?;
        put(sink, run.start * BS, &buf)?;
        *written_to = run.start + buf.len() as u64 / BS;
        for (at, r, ranges) in run.tails {
            place_file(
                sink,
                at,
                (r.content, ranges.as_deref()),
                r.offset,
                r.offset + r.len,
                source,
            )?;
        }
        Ok(())
    };

    for &i in &order {
        let Some(ino) = lay.inodes.get(i) else {
            continue;
        };
        let rec = ino.record();
        let first = ino.offset / BS;
        let last = (ino.offset + rec.max(1) - 1) / BS;
        let fits = run
            .as_ref()
            .is_some_and(|r| first >= r.start && last < r.start + r.buf.len() as u64 / BS);
        if !fits {
            if let Some(r) = run.take() {
                flush(sink, r, &mut written_to)?;
            }
            let blocks = last - first + 1;
            let mut buf = vec![0u8; (blocks * BS) as usize];
            if first == 0 {
                if let Some(d) = buf.get_mut(1024..1152) {
                    d.copy_from_slice(sb.as_bytes());
                }
            }
            run = Some(Run {
                start: first,
                buf,
                tails: Vec::new(),
            });
        }
        let Some(r) = run.as_mut() else { continue };
        let at = (ino.offset - r.start * BS) as usize;
        let head = inode_bytes(ino, i);
        if let Some(d) = r.buf.get_mut(at..at + head.len()) {
            d.copy_from_slice(&head);
        }
        let tail_at = at + head.len();
        let node = tree.nodes.get(ino.node);
        match (ino.kind, node.map(|n| &n.kind)) {
            (Kind::Dir, _) => {
                let bytes = dir_bytes(tree, lay, ino);
                let full = (ino.blocks * BS).min(bytes.len() as u64) as usize;
                if ino.blocks > 0 {
                    let mut blocks = bytes.get(..full).unwrap_or_default().to_vec();
                    blocks.resize((ino.blocks * BS) as usize, 0);
                    put(sink, ino.startblk * BS, &blocks)?;
                }
                if ino.tail > 0 {
                    let t = bytes.get(full..).unwrap_or_default();
                    if let Some(d) = r.buf.get_mut(tail_at..tail_at + t.len()) {
                        d.copy_from_slice(t);
                    }
                }
            }
            (Kind::Symlink, Some(NodeKind::Symlink { target })) => {
                let full = (ino.blocks * BS).min(target.len() as u64) as usize;
                if ino.blocks > 0 {
                    let mut blocks = target.get(..full).unwrap_or_default().to_vec();
                    blocks.resize((ino.blocks * BS) as usize, 0);
                    put(sink, ino.startblk * BS, &blocks)?;
                }
                if ino.tail > 0 {
                    let t = target.get(full..).unwrap_or_default();
                    if let Some(d) = r.buf.get_mut(tail_at..tail_at + t.len()) {
                        d.copy_from_slice(t);
                    }
                }
            }
            (
                Kind::File,
                Some(NodeKind::File {
                    content,
                    data_ranges,
                    ..
                }),
            ) => {
                let from = ino.blocks * BS;
                if ino.tail > 0 {
                    if r.start == 0 {
                        // Block 0 is checksummed: its tails are read, not referenced.
                        let dst = r
                            .buf
                            .get_mut(tail_at..tail_at + ino.tail as usize)
                            .unwrap_or_default();
                        read_file(
                            (*content, data_ranges.as_deref()),
                            from,
                            ino.size,
                            dst,
                            source,
                        )?;
                    } else {
                        r.tails.push((
                            r.start * BS + tail_at as u64,
                            ContentRef {
                                content: *content,
                                offset: from,
                                len: ino.tail,
                            },
                            data_ranges.clone(),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(r) = run.take() {
        flush(sink, r, &mut written_to)?;
    }
    zeros(
        sink,
        written_to * BS,
        lay.meta_blocks.saturating_sub(written_to) * BS,
    )?;

    // Shared xattrs.
    if !lay.shared.is_empty() {
        let mut area = Vec::new();
        for (pos, x) in &lay.shared {
            area.resize(*pos as usize, 0);
            xattr_entry(&mut area, x);
        }
        area.resize((area.len() as u64).next_multiple_of(BS) as usize, 0);
        put(sink, lay.xattr_blkaddr * BS, &area)?;
    }

    // File data, whole blocks; the last partial block padded with zeros.
    for ino in lay
        .inodes
        .iter()
        .filter(|i| i.kind == Kind::File && i.blocks > 0)
    {
        let Some(NodeKind::File {
            content,
            data_ranges,
            ..
        }) = tree.nodes.get(ino.node).map(|n| &n.kind)
        else {
            continue;
        };
        let end = (ino.blocks * BS).min(ino.size);
        let at = ino.startblk * BS;
        place_file(sink, at, (*content, data_ranges.as_deref()), 0, end, source)?;
        zeros(sink, at + end, ino.blocks * BS - end)?;
    }
    Ok(())
}
