//! Formatting and population in one pass.
//!
//! 1. Walk the tree: validate names, detect case conflicts, choose 8.3 aliases, count the
//!    32-byte entries of every directory (nothing is written yet).
//! 2. Allocate clusters sequentially from 2: each directory, then each of its files, one
//!    contiguous run each. Check the total against the volume.
//! 3. Write in ascending offset order: boot sector, FSInfo and backups, every FAT copy,
//!    the fixed root (FAT12/16), then the data clusters, coalesced into large chunks.

use std::collections::HashMap;

use blockwise_geometry::{
    BlockSink, ContentError, ContentRef, ContentSource, FatPlan, Node, NodeId, NodeKind,
    PlaceError, Tree,
};
use zerocopy::little_endian::{U16, U32};
use zerocopy::IntoBytes;

use crate::names::{self, BadName, Names, ShortNames};
use crate::plan::Layout;
use crate::raw::{
    BpbRaw, DirEntryRaw, Fat16ExtRaw, Fat32ExtRaw, FsInfoRaw, LfnEntryRaw, ATTR_ARCHIVE,
    ATTR_DIRECTORY, ATTR_LONG_NAME, ATTR_VOLUME_ID, BOOT_SIGNATURE, BOOT_SIGNATURE_OFFSET,
    EXT_BOOT_SIG, FSI_LEAD_SIG, FSI_STRUC_SIG, FSI_TRAIL_SIG,
};
use crate::time::{fat_time, FatTime};
use crate::{Error, Warning, WriteReport};
use blockwise_geometry::FatType;

/// Coalescing buffer size: writes go out in chunks of up to this many bytes.
const CHUNK: usize = 8 << 20;
/// Most entries a directory may hold (2 MiB of 32-byte entries).
pub(crate) const MAX_DIR_ENTRIES: u64 = 65_536;

/// One child entry of a directory.
struct Entry {
    node: NodeId,
    /// The 8.3 name, space padded.
    short: [u8; 11],
    /// Whether long-name entries precede it. The long name itself is made again from the
    /// tree's name when the directory is written (the same function the scan checked it
    /// with), so a million files do not keep a million UTF-16 copies of their names.
    lfn: bool,
    attr: u8,
    size: u32,
    time: FatTime,
}

impl Dir {
    /// Sizes of the regular files listed in this directory (empty files included).
    pub(crate) fn file_sizes(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries
            .iter()
            .filter(|e| e.attr & ATTR_DIRECTORY == 0)
            .map(|e| u64::from(e.size))
    }
}

/// One directory: its entries and where it lives.
pub(crate) struct Dir {
    node: NodeId,
    /// Parent directory's index in the `dirs` list (the root is its own parent).
    parent: usize,
    entries: Vec<Entry>,
    /// 32-byte slots (dot entries, label, LFN and short entries).
    pub(crate) slots: u64,
    /// First cluster (0 for the FAT12/16 fixed root).
    cluster: u32,
    /// Clusters allocated.
    clusters: u64,
}

/// Something that owns a cluster run, in allocation (= write) order.
enum Item {
    Dir(usize),
    File {
        node: NodeId,
        first: u32,
        clusters: u64,
    },
}

/// Coalesces writes at increasing offsets into large chunks.
struct Out<'a, S: BlockSink + ?Sized> {
    sink: &'a mut S,
    buf: Vec<u8>,
    start: u64,
}

impl<'a, S: BlockSink + ?Sized> Out<'a, S> {
    fn new(sink: &'a mut S) -> Self {
        Out {
            sink,
            buf: Vec::with_capacity(CHUNK),
            start: 0,
        }
    }

    fn flush(&mut self) -> Result<(), Error> {
        if !self.buf.is_empty() {
            self.sink
                .write_at(self.start, &self.buf)
                .map_err(|e| Error::Sink {
                    offset: self.start,
                    source: Box::new(e),
                })?;
            self.buf.clear();
        }
        Ok(())
    }

    /// A zeroed region of `len` bytes at `off`, to be filled in by the caller.
    fn region(&mut self, off: u64, len: usize) -> Result<&mut [u8], Error> {
        let contiguous = self.start + self.buf.len() as u64 == off;
        if !contiguous || self.buf.len() + len > CHUNK {
            self.flush()?;
            self.start = off;
        }
        let old = self.buf.len();
        self.buf.resize(old + len, 0);
        Ok(self.buf.get_mut(old..).unwrap_or_default())
    }

    /// Writes zeros over `[off, off + len)`.
    fn zeros(&mut self, off: u64, len: u64) -> Result<(), Error> {
        let mut pos = 0;
        while pos < len {
            let n = usize::try_from((len - pos).min(CHUNK as u64)).unwrap_or(CHUNK);
            self.region(off + pos, n)?;
            pos += n as u64;
        }
        Ok(())
    }

    fn bytes(&mut self, off: u64, data: &[u8]) -> Result<(), Error> {
        self.region(off, data.len())?.copy_from_slice(data);
        Ok(())
    }

    /// Places file content at `off` (by reference where the sink keeps references).
    fn content(
        &mut self,
        off: u64,
        r: ContentRef,
        source: &dyn ContentSource,
    ) -> Result<(), Placing> {
        self.flush().map_err(Placing::Done)?;
        self.sink
            .write_content(off, r, source)
            .map_err(|e| match e {
                PlaceError::Content(c) => Placing::Content(c),
                PlaceError::Sink(e) => Placing::Done(Error::Sink {
                    offset: off,
                    source: Box::new(e),
                }),
            })
    }
}

/// A failed [`Out::content`]: a content error still needs the file's path.
enum Placing {
    Done(Error),
    Content(ContentError),
}

impl Placing {
    fn into_error(self, path: impl FnOnce() -> String) -> Error {
        match self {
            Placing::Done(e) => e,
            Placing::Content(source) => Error::Content {
                path: path(),
                source,
            },
        }
    }
}

fn entry_time(tree: &Tree, id: NodeId) -> FatTime {
    tree.nodes.get(id).map_or(fat_time(0, 0), |n| {
        fat_time(n.meta.mtime, n.meta.mtime_nsec)
    })
}

/// Pass 1: every directory's entries, in breadth-first order (index 0 = root). `layout`
/// `None` (sizing for `size = "auto"`) leaves the root's entry count unchecked: the caller
/// checks it against each candidate's type.
pub(crate) fn scan(
    tree: &Tree,
    layout: Option<&Layout>,
    label: bool,
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Dir>, Error> {
    let mut dirs = vec![Dir {
        node: 0,
        parent: 0,
        entries: Vec::new(),
        slots: 0,
        cluster: 0,
        clusters: 0,
    }];
    let mut seen = vec![false; tree.nodes.len()];
    match seen.first_mut() {
        Some(s) => *s = true,
        None => {
            return Err(Error::InvalidTree {
                node: 0,
                reason: "the tree has no root",
            })
        }
    }
    if tree.children(0).is_none() {
        return Err(Error::InvalidTree {
            node: 0,
            reason: "the root is not a directory",
        });
    }
    let mut i = 0;
    while i < dirs.len() {
        let dnode = dirs.get(i).map_or(0, |d| d.node);
        let children = tree.children(dnode).unwrap_or_default();
        let mut folded: HashMap<String, NodeId> = HashMap::with_capacity(children.len());
        let mut accepted: Vec<(NodeId, Vec<u16>)> = Vec::with_capacity(children.len());
        for &c in children {
            let Some(node) = tree.nodes.get(c) else {
                return Err(Error::InvalidTree {
                    node: dnode,
                    reason: "a child id is out of range",
                });
            };
            match &node.kind {
                NodeKind::Dir { .. } | NodeKind::File { .. } => {}
                NodeKind::Symlink { target } => {
                    warnings.push(Warning {
                        code: "fat-skipped-symlink",
                        path: tree.path(c),
                        message: format!(
                            "symbolic link to \"{}\" skipped: FAT cannot store symlinks",
                            blockwise_geometry::display_bytes(target)
                        ),
                    });
                    continue;
                }
                other => {
                    let what = match other {
                        NodeKind::CharDev { .. } => "character device",
                        NodeKind::BlockDev { .. } => "block device",
                        NodeKind::Fifo => "FIFO",
                        _ => "socket",
                    };
                    warnings.push(Warning {
                        code: "fat-skipped-special",
                        path: tree.path(c),
                        message: format!("{what} skipped: FAT cannot store special files"),
                    });
                    continue;
                }
            }
            let seen_c = seen.get_mut(c).ok_or(Error::InvalidTree {
                node: c,
                reason: "id out of range",
            })?;
            if *seen_c {
                return Err(Error::InvalidTree {
                    node: c,
                    reason: "node reachable twice",
                });
            }
            *seen_c = true;
            let name = node.name_str().ok_or_else(|| Error::BadName {
                path: tree.path(c),
                reason: BadName::NotUtf8,
            })?;
            let long = names::long_name(name).map_err(|reason| Error::BadName {
                path: tree.path(c),
                reason,
            })?;
            if let Some(&other) = folded.get(&names::fold(name)) {
                return Err(Error::CaseConflict {
                    first: tree.path(other),
                    second: tree.path(c),
                });
            }
            folded.insert(names::fold(name), c);
            accepted.push((c, long));
        }
        // Verbatim 8.3 names first, so generated aliases avoid them.
        let mut short = ShortNames::new();
        let verbatim: Vec<Option<[u8; 11]>> = accepted
            .iter()
            .map(|(c, _)| {
                short.reserve_verbatim(tree.nodes.get(*c).and_then(Node::name_str).unwrap_or(""))
            })
            .collect();
        let is_root = i == 0;
        let mut slots: u64 = if is_root { u64::from(label) } else { 2 };
        let mut entries = Vec::with_capacity(accepted.len());
        for ((c, long), verb) in accepted.into_iter().zip(verbatim) {
            let node = tree.nodes.get(c).ok_or(Error::InvalidTree {
                node: c,
                reason: "id out of range",
            })?;
            let names = match verb {
                Some(s) => Names {
                    short: s,
                    long: None,
                },
                None => short
                    .alias(node.name_str().unwrap_or(""), long)
                    .map_err(|_| Error::AliasesExhausted { path: tree.path(c) })?,
            };
            slots += 1 + names
                .long
                .as_ref()
                .map_or(0, |l| names::lfn_entries(l.len()) as u64);
            let (attr, size) = match &node.kind {
                NodeKind::Dir { .. } => {
                    dirs.push(Dir {
                        node: c,
                        parent: i,
                        entries: Vec::new(),
                        slots: 0,
                        cluster: 0,
                        clusters: 0,
                    });
                    (ATTR_DIRECTORY, 0)
                }
                NodeKind::File { size, .. } => {
                    let s = u32::try_from(*size).map_err(|_| Error::FileTooLarge {
                        path: tree.path(c),
                        size: *size,
                    })?;
                    (ATTR_ARCHIVE, s)
                }
                _ => continue,
            };
            entries.push(Entry {
                node: c,
                short: names.short,
                lfn: names.long.is_some(),
                attr,
                size,
                time: entry_time(tree, c),
            });
        }
        if is_root && layout.is_none() {
            // Sizing: the candidate's type decides.
        } else if let Some(layout) = layout.filter(|l| is_root && l.kind != FatType::Fat32) {
            if slots > layout.root_entries {
                return Err(Error::RootDirFull {
                    kind: layout.kind.name(),
                    entries: slots,
                    max: layout.root_entries,
                });
            }
        } else if slots > MAX_DIR_ENTRIES {
            return Err(Error::DirectoryTooLarge {
                path: tree.path(dnode),
                entries: slots,
                max: MAX_DIR_ENTRIES,
            });
        }
        if let Some(d) = dirs.get_mut(i) {
            d.entries = entries;
            d.slots = slots;
        }
        i += 1;
    }
    Ok(dirs)
}

/// Pass 2: sequential allocation. Returns the items in cluster order and the next free cluster.
fn allocate(dirs: &mut [Dir], layout: &Layout) -> Result<(Vec<Item>, u64), Error> {
    let cb = layout.cluster_bytes();
    let mut next: u64 = 2;
    let mut items = Vec::new();
    let mut needed: u64 = 0;
    for i in 0..dirs.len() {
        let Some(d) = dirs.get_mut(i) else { break };
        if !(i == 0 && layout.kind != FatType::Fat32) {
            let n = (d.slots * 32).div_ceil(cb).max(1);
            d.cluster = u32::try_from(next).unwrap_or(u32::MAX);
            d.clusters = n;
            items.push(Item::Dir(i));
            next += n;
            needed += n;
        }
        for e in &d.entries {
            if e.attr & ATTR_DIRECTORY == 0 && e.size > 0 {
                let n = u64::from(e.size).div_ceil(cb);
                items.push(Item::File {
                    node: e.node,
                    first: u32::try_from(next).unwrap_or(u32::MAX),
                    clusters: n,
                });
                next += n;
                needed += n;
            }
        }
    }
    if needed > layout.clusters {
        return Err(Error::NoSpace {
            needed_clusters: needed,
            free_clusters: layout.clusters,
            cluster_bytes: cb,
            missing_bytes: (needed - layout.clusters) * cb,
        });
    }
    Ok((items, next))
}

fn short_entry(name: [u8; 11], attr: u8, cluster: u32, size: u32, t: FatTime) -> DirEntryRaw {
    DirEntryRaw {
        dir_name: name,
        dir_attr: attr,
        dir_nt_res: 0,
        dir_crt_time_tenth: t.hundredths,
        dir_crt_time: U16::new(t.time),
        dir_crt_date: U16::new(t.date),
        dir_lst_acc_date: U16::new(t.date),
        dir_fst_clus_hi: U16::new(u16::try_from(cluster >> 16).unwrap_or(0)),
        dir_wrt_time: U16::new(t.time),
        dir_wrt_date: U16::new(t.date),
        dir_fst_clus_lo: U16::new(u16::try_from(cluster & 0xffff).unwrap_or(0)),
        dir_file_size: U32::new(size),
    }
}

fn push_lfn(out: &mut Vec<u8>, long: &[u16], short: &[u8; 11]) {
    let sum = names::lfn_checksum(short);
    let n = names::lfn_entries(long.len());
    // Characters padded with one 0x0000 terminator, then 0xFFFF.
    let unit = |k: usize| -> u16 {
        match long.get(k) {
            Some(&u) => u,
            None if k == long.len() => 0,
            None => 0xffff,
        }
    };
    for seq in (1..=n).rev() {
        let base = (seq - 1) * 13;
        let mut e = LfnEntryRaw {
            ldir_ord: u8::try_from(seq).unwrap_or(0) | if seq == n { 0x40 } else { 0 },
            ldir_attr: ATTR_LONG_NAME,
            ldir_chksum: sum,
            ..LfnEntryRaw::default()
        };
        for (j, d) in e.ldir_name1.iter_mut().enumerate() {
            *d = U16::new(unit(base + j));
        }
        for (j, d) in e.ldir_name2.iter_mut().enumerate() {
            *d = U16::new(unit(base + 5 + j));
        }
        for (j, d) in e.ldir_name3.iter_mut().enumerate() {
            *d = U16::new(unit(base + 11 + j));
        }
        out.extend_from_slice(e.as_bytes());
    }
}

/// The bytes of one directory (not yet padded).
fn dir_bytes(
    dirs: &[Dir],
    i: usize,
    first: &HashMap<NodeId, u32>,
    label: Option<&[u8; 11]>,
    label_time: FatTime,
    tree: &Tree,
) -> Result<Vec<u8>, Error> {
    let Some(d) = dirs.get(i) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(usize::try_from(d.slots * 32).unwrap_or(0));
    if i == 0 {
        if let Some(l) = label {
            out.extend_from_slice(short_entry(*l, ATTR_VOLUME_ID, 0, 0, label_time).as_bytes());
        }
    } else {
        let t = entry_time(tree, d.node);
        let parent_cluster = if d.parent == 0 {
            0
        } else {
            dirs.get(d.parent).map_or(0, |p| p.cluster)
        };
        out.extend_from_slice(
            short_entry(*b".          ", ATTR_DIRECTORY, d.cluster, 0, t).as_bytes(),
        );
        out.extend_from_slice(
            short_entry(*b"..         ", ATTR_DIRECTORY, parent_cluster, 0, t).as_bytes(),
        );
    }
    for e in &d.entries {
        if e.lfn {
            let name = tree
                .nodes
                .get(e.node)
                .and_then(Node::name_str)
                .unwrap_or("");
            // The scan accepted this very name: the long name is there again.
            if let Ok(long) = names::long_name(name) {
                push_lfn(&mut out, &long, &e.short);
            }
        }
        let cluster = first.get(&e.node).copied().unwrap_or(0);
        out.extend_from_slice(short_entry(e.short, e.attr, cluster, e.size, e.time).as_bytes());
    }
    Ok(out)
}

fn boot_sector(layout: &Layout, plan: &FatPlan, label: &[u8; 11]) -> Vec<u8> {
    let s = usize::try_from(layout.sector_bytes).unwrap_or(512);
    let mut sec = vec![0u8; s];
    let fat32 = layout.kind == FatType::Fat32;
    let small_total = !fat32 && layout.total_sectors < 65536;
    let bpb = BpbRaw {
        bs_jmp_boot: if fat32 {
            [0xEB, 0x58, 0x90]
        } else {
            [0xEB, 0x3C, 0x90]
        },
        bs_oem_name: *b"MSWIN4.1",
        bpb_byts_per_sec: U16::new(u16::try_from(layout.sector_bytes).unwrap_or(512)),
        bpb_sec_per_clus: u8::try_from(layout.sec_per_clus).unwrap_or(1),
        bpb_rsvd_sec_cnt: U16::new(u16::try_from(layout.reserved).unwrap_or(0)),
        bpb_num_fats: u8::try_from(layout.fats).unwrap_or(2),
        bpb_root_ent_cnt: U16::new(u16::try_from(layout.root_entries).unwrap_or(0)),
        bpb_tot_sec16: U16::new(if small_total {
            u16::try_from(layout.total_sectors).unwrap_or(0)
        } else {
            0
        }),
        bpb_media: 0xF8,
        bpb_fat_sz16: U16::new(if fat32 {
            0
        } else {
            u16::try_from(layout.fat_sectors).unwrap_or(0)
        }),
        bpb_sec_per_trk: U16::new(63),
        bpb_num_heads: U16::new(255),
        bpb_hidd_sec: U32::new(layout.hidden_sectors),
        bpb_tot_sec32: U32::new(if small_total {
            0
        } else {
            u32::try_from(layout.total_sectors).unwrap_or(0)
        }),
    };
    let mut w = Vec::with_capacity(90);
    w.extend_from_slice(bpb.as_bytes());
    if fat32 {
        let ext = Fat32ExtRaw {
            bpb_fat_sz32: U32::new(u32::try_from(layout.fat_sectors).unwrap_or(0)),
            bpb_ext_flags: U16::new(0),
            bpb_fs_ver: U16::new(0),
            bpb_root_clus: U32::new(2),
            bpb_fs_info: U16::new(1),
            bpb_bk_boot_sec: U16::new(6),
            bpb_reserved: [0; 12],
            bs_drv_num: 0x80,
            bs_reserved1: 0,
            bs_boot_sig: EXT_BOOT_SIG,
            bs_vol_id: U32::new(plan.volume_id),
            bs_vol_lab: *label,
            bs_fil_sys_type: *b"FAT32   ",
        };
        w.extend_from_slice(ext.as_bytes());
    } else {
        let ext = Fat16ExtRaw {
            bs_drv_num: 0x80,
            bs_reserved1: 0,
            bs_boot_sig: EXT_BOOT_SIG,
            bs_vol_id: U32::new(plan.volume_id),
            bs_vol_lab: *label,
            bs_fil_sys_type: if layout.kind == FatType::Fat12 {
                *b"FAT12   "
            } else {
                *b"FAT16   "
            },
        };
        w.extend_from_slice(ext.as_bytes());
    }
    // Boot code: "int 0x18" (try the next boot device), then halt in a loop.
    w.extend_from_slice(&[0xCD, 0x18, 0xEB, 0xFE]);
    if let Some(d) = sec.get_mut(..w.len()) {
        d.copy_from_slice(&w);
    }
    if let Some(d) = sec.get_mut(BOOT_SIGNATURE_OFFSET..BOOT_SIGNATURE_OFFSET + 2) {
        d.copy_from_slice(&BOOT_SIGNATURE);
    }
    sec
}

fn fsinfo_sector(layout: &Layout, free: u64, next_free: u64) -> Vec<u8> {
    let s = usize::try_from(layout.sector_bytes).unwrap_or(512);
    let mut sec = vec![0u8; s];
    let fi = FsInfoRaw {
        fsi_lead_sig: U32::new(FSI_LEAD_SIG),
        fsi_reserved1: [0; 480],
        fsi_struc_sig: U32::new(FSI_STRUC_SIG),
        fsi_free_count: U32::new(u32::try_from(free).unwrap_or(u32::MAX)),
        fsi_nxt_free: U32::new(u32::try_from(next_free).unwrap_or(u32::MAX)),
        fsi_reserved2: [0; 12],
        fsi_trail_sig: U32::new(FSI_TRAIL_SIG),
    };
    if let Some(d) = sec.get_mut(..512) {
        d.copy_from_slice(fi.as_bytes());
    }
    sec
}

/// The used prefix of the FAT (entries 0 .. `next`), rounded up to whole sectors.
fn fat_prefix(layout: &Layout, items: &[Item], dirs: &[Dir], next: u64) -> Vec<u8> {
    let (eoc, media): (u32, u32) = match layout.kind {
        FatType::Fat12 => (0xFFF, 0xFF8),
        FatType::Fat16 => (0xFFFF, 0xFFF8),
        FatType::Fat32 => (0x0FFF_FFFF, 0x0FFF_FFF8),
    };
    let n = usize::try_from(next).unwrap_or(0);
    let mut v = vec![0u32; n.max(2)];
    if let Some(x) = v.get_mut(0) {
        *x = media;
    }
    if let Some(x) = v.get_mut(1) {
        *x = eoc;
    }
    let mut chain = |first: u64, count: u64| {
        for k in first..first + count {
            if let Some(x) = v.get_mut(usize::try_from(k).unwrap_or(usize::MAX)) {
                *x = if k + 1 == first + count {
                    eoc
                } else {
                    u32::try_from(k + 1).unwrap_or(eoc)
                };
            }
        }
    };
    for it in items {
        match it {
            Item::Dir(i) => {
                if let Some(d) = dirs.get(*i) {
                    chain(u64::from(d.cluster), d.clusters);
                }
            }
            Item::File {
                first, clusters, ..
            } => chain(u64::from(*first), *clusters),
        }
    }
    let s = usize::try_from(layout.sector_bytes).unwrap_or(512);
    let bytes = match layout.kind {
        FatType::Fat12 => (v.len() * 3).div_ceil(2),
        FatType::Fat16 => v.len() * 2,
        FatType::Fat32 => v.len() * 4,
    };
    let mut out = vec![0u8; bytes.div_ceil(s) * s];
    match layout.kind {
        FatType::Fat12 => {
            for (k, &x) in v.iter().enumerate() {
                let off = k * 3 / 2;
                let x = u16::try_from(x & 0xFFF).unwrap_or(0);
                let [lo, hi] = x.to_le_bytes();
                if k % 2 == 0 {
                    if let Some(b) = out.get_mut(off) {
                        *b = lo;
                    }
                    if let Some(b) = out.get_mut(off + 1) {
                        *b = (*b & 0xF0) | hi;
                    }
                } else {
                    let y = x << 4;
                    let [lo, hi] = y.to_le_bytes();
                    if let Some(b) = out.get_mut(off) {
                        *b = (*b & 0x0F) | lo;
                    }
                    if let Some(b) = out.get_mut(off + 1) {
                        *b = hi;
                    }
                }
            }
        }
        FatType::Fat16 => {
            for (k, &x) in v.iter().enumerate() {
                if let Some(d) = out.get_mut(k * 2..k * 2 + 2) {
                    d.copy_from_slice(&u16::try_from(x).unwrap_or(0).to_le_bytes());
                }
            }
        }
        FatType::Fat32 => {
            for (k, &x) in v.iter().enumerate() {
                if let Some(d) = out.get_mut(k * 4..k * 4 + 4) {
                    d.copy_from_slice(&x.to_le_bytes());
                }
            }
        }
    }
    out
}

pub(crate) fn write_volume<S: BlockSink + ?Sized>(
    sink: &mut S,
    layout: &Layout,
    plan: &FatPlan,
    tree: &Tree,
    content: &dyn ContentSource,
    timestamp: i64,
) -> Result<WriteReport, Error> {
    let vol = layout.volume_bytes();
    if sink.len() < vol {
        return Err(Error::SinkTooSmall {
            need: vol,
            have: sink.len(),
        });
    }
    let label: Option<[u8; 11]> = plan.label.as_ref().map(|l| {
        let mut b = [b' '; 11];
        for (d, s) in b.iter_mut().zip(l.bytes()) {
            *d = s;
        }
        b
    });
    let bpb_label = label.unwrap_or(*b"NO NAME    ");
    let label_time = fat_time(timestamp, 0);

    // Pass 1 and 2: everything is decided before the first byte is written.
    // A label with lowercase letters is stored as given, without a warning: mkfs.fat 4.2
    // warns, but pi-gen's `bootfs` is the norm and Linux, Windows and the boot firmwares
    // match it; one warning on every build is noise (issue 32).
    let mut warnings = Vec::new();
    let mut dirs = scan(tree, Some(layout), label.is_some(), &mut warnings)?;
    // One warning for the whole volume, not one per file.
    let mut with_xattrs = tree
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.meta.xattrs.is_empty());
    if let Some((first, _)) = with_xattrs.next() {
        let more = with_xattrs.count();
        warnings.push(Warning {
            code: "fat-dropped-xattrs",
            path: tree.path(first),
            message: if more == 0 {
                "extended attributes dropped: FAT cannot store them".into()
            } else {
                format!("extended attributes of this and {more} more files dropped: FAT cannot store them")
            },
        });
    }
    let (items, next) = allocate(&mut dirs, layout)?;
    let mut first: HashMap<NodeId, u32> = HashMap::with_capacity(items.len() + dirs.len());
    for d in &dirs {
        first.insert(d.node, d.cluster);
    }
    for it in &items {
        if let Item::File { node, first: f, .. } = it {
            first.insert(*node, *f);
        }
    }
    let used = next - 2;
    let free = layout.clusters - used;

    let s = layout.sector_bytes;
    let cb = layout.cluster_bytes();
    let mut out = Out::new(sink);

    // Reserved region.
    let boot = boot_sector(layout, plan, &bpb_label);
    out.bytes(0, &boot)?;
    if layout.kind == FatType::Fat32 {
        let fsinfo = fsinfo_sector(
            layout,
            free,
            if free > 0 { next } else { u64::from(u32::MAX) },
        );
        out.bytes(s, &fsinfo)?;
        out.zeros(2 * s, 4 * s)?;
        out.bytes(6 * s, &boot)?;
        out.bytes(7 * s, &fsinfo)?;
        out.zeros(8 * s, (layout.reserved - 8) * s)?;
    } else {
        out.zeros(s, (layout.reserved - 1) * s)?;
    }

    // FATs.
    let prefix = fat_prefix(layout, &items, &dirs, next);
    let fat_bytes = layout.fat_sectors * s;
    for k in 0..layout.fats {
        let off = (layout.reserved + k * layout.fat_sectors) * s;
        let p = prefix
            .get(
                ..usize::try_from(fat_bytes)
                    .unwrap_or(usize::MAX)
                    .min(prefix.len()),
            )
            .unwrap_or_default();
        out.bytes(off, p)?;
        out.zeros(off + p.len() as u64, fat_bytes - p.len() as u64)?;
    }

    // FAT12/16 fixed root.
    if layout.kind != FatType::Fat32 {
        let off = (layout.reserved + layout.fats * layout.fat_sectors) * s;
        let bytes = dir_bytes(&dirs, 0, &first, label.as_ref(), label_time, tree)?;
        out.bytes(off, &bytes)?;
        out.zeros(
            off + bytes.len() as u64,
            layout.root_dir_sectors * s - bytes.len() as u64,
        )?;
    }

    // Data area.
    let mut files = 0u64;
    for it in &items {
        match it {
            Item::Dir(i) => {
                let Some(d) = dirs.get(*i) else { continue };
                let off = layout.cluster_offset(u64::from(d.cluster));
                let bytes = dir_bytes(&dirs, *i, &first, label.as_ref(), label_time, tree)?;
                out.bytes(off, &bytes)?;
                out.zeros(
                    off + bytes.len() as u64,
                    d.clusters * cb - bytes.len() as u64,
                )?;
            }
            Item::File {
                node,
                first: f,
                clusters,
            } => {
                let Some(NodeKind::File {
                    size,
                    content: handle,
                    data_ranges,
                    ..
                }) = tree.nodes.get(*node).map(|n| &n.kind)
                else {
                    continue;
                };
                files += 1;
                let off = layout.cluster_offset(u64::from(*f));
                let total = clusters * cb;
                let whole = [(0, *size)];
                let ranges = data_ranges.as_deref().unwrap_or(&whole);
                // Data by reference; holes and the slack after the end as zeros.
                let mut pos = 0u64;
                for &(s, e) in ranges {
                    let (s, e) = (s.max(pos), e.min(*size));
                    if s >= e {
                        continue;
                    }
                    out.zeros(off + pos, s - pos)?;
                    let r = ContentRef {
                        content: *handle,
                        offset: s,
                        len: e - s,
                    };
                    out.content(off + s, r, content)
                        .map_err(|e| e.into_error(|| tree.path(*node)))?;
                    pos = e;
                }
                out.zeros(off + pos, total - pos)?;
            }
        }
    }
    out.flush()?;
    // Zero-length files are written too (no clusters).
    let empty_files = dirs
        .iter()
        .flat_map(|d| d.entries.iter())
        .filter(|e| e.attr & ATTR_DIRECTORY == 0 && e.size == 0)
        .count() as u64;
    Ok(WriteReport {
        warnings,
        files: files + empty_files,
        directories: dirs.len() as u64,
        used_clusters: used,
        free_clusters: free,
    })
}
