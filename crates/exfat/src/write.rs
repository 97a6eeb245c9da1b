//! Formatting and population in one pass.
//!
//! 1. Walk the tree: validate names, detect names equal after up-casing, count the 32-byte
//!    entries of every directory (nothing is written yet).
//! 2. Allocate clusters sequentially: the bitmap, the up-case table and the root directory,
//!    then each directory followed by its files, one contiguous run each. Check the total.
//! 3. Write in ascending offset order: both boot regions, the FAT, then the heap, coalesced
//!    into large chunks; file data by reference through `write_content`.

use std::collections::HashMap;

use blockwise_fat::{fat_time, FatTime};
use blockwise_geometry::{
    BlockSink, ContentError, ContentRef, ContentSource, ExfatPlan, NodeId, NodeKind, PlaceError,
    Tree,
};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::IntoBytes;

use crate::names::utf16_name;
use crate::plan::{upcase_tables, Layout};
use crate::raw::{
    attr, boot_checksum, entry_type, name_hash, set_checksum, stream_flags, table_checksum,
    BitmapEntryRaw, BootSectorRaw, FileEntryRaw, FlashParamsRaw, GuidEntryRaw, LabelEntryRaw,
    NameEntryRaw, StreamEntryRaw, UpcaseEntryRaw, BOOT_REGION_SECTORS, BOOT_SIGNATURE,
    EXTENDED_BOOT_SIGNATURE, FAT_EOC, FAT_MEDIA, FILE_SYSTEM_NAME, FLASH_PARAMETERS_GUID,
    JUMP_BOOT, NAME_UNITS_PER_ENTRY, REVISION,
};
use crate::upcase::upcase_name;
use crate::{Error, ExfatRequest, Warning, WriteReport};

/// Coalescing buffer size: writes go out in chunks of up to this many bytes.
const CHUNK: usize = 8 << 20;
/// Largest directory (§6.2: 256 MiB of 32-byte entries).
const MAX_DIR_ENTRIES: u64 = (256 << 20) / 32;
/// UTC offset byte: valid, +00:00 (blockwise writes UTC).
const UTC: u8 = 0x80;

/// One child of a directory.
struct Entry {
    /// The child; its UTF-16 name is made again from the tree's name when the directory is
    /// written (the function the scan checked it with), so a million files do not keep a
    /// million copies of their names.
    node: NodeId,
    attributes: u16,
    size: u64,
    time: FatTime,
}

/// One directory: its entries and where it lives.
pub(crate) struct Dir {
    node: NodeId,
    entries: Vec<Entry>,
    /// 32-byte entries.
    slots: u64,
    first: u64,
    clusters: u64,
}

impl Dir {
    /// Sizes of the regular files listed in this directory (empty files included).
    pub(crate) fn file_sizes(&self) -> impl Iterator<Item = u64> + '_ {
        self.entries
            .iter()
            .filter(|e| e.attributes & attr::DIRECTORY == 0)
            .map(|e| e.size)
    }
    /// 32-byte entries of this directory (the root's bitmap, up-case, label and GUID
    /// entries included).
    pub(crate) fn slots(&self) -> u64 {
        self.slots
    }
}

/// Something that owns a cluster run in the heap, in allocation (= write) order.
enum Item {
    Dir(usize),
    File {
        node: NodeId,
        first: u64,
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
        let mut pos = 0usize;
        while pos < data.len() {
            let n = (data.len() - pos).min(CHUNK);
            self.region(off + pos as u64, n)?
                .copy_from_slice(data.get(pos..pos + n).unwrap_or_default());
            pos += n;
        }
        Ok(())
    }

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

fn entry_time(tree: &Tree, id: NodeId) -> FatTime {
    tree.nodes.get(id).map_or(fat_time(0, 0), |n| {
        fat_time(n.meta.mtime, n.meta.mtime_nsec)
    })
}

/// Entries of one child's set: File, Stream Extension and one File Name per 15 units.
fn set_len(name_units: usize) -> u64 {
    2 + name_units.div_ceil(NAME_UNITS_PER_ENTRY) as u64
}

/// Pass 1: every directory's entries, breadth-first (index 0 = root).
pub(crate) fn scan(
    tree: &Tree,
    root_extra: u64,
    upcase: &[u16],
    warnings: &mut Vec<Warning>,
) -> Result<Vec<Dir>, Error> {
    let mut dirs = vec![Dir {
        node: 0,
        entries: Vec::new(),
        slots: 0,
        first: 0,
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
        let mut folded: HashMap<Vec<u16>, NodeId> = HashMap::with_capacity(children.len());
        // The root holds the bitmap and up-case entries (and the label and GUID).
        let mut slots: u64 = if i == 0 { 2 + root_extra } else { 0 };
        let mut entries = Vec::with_capacity(children.len());
        for &c in children {
            let Some(node) = tree.nodes.get(c) else {
                return Err(Error::InvalidTree {
                    node: dnode,
                    reason: "a child id is out of range",
                });
            };
            let (attributes, size) = match &node.kind {
                NodeKind::Dir { .. } => (attr::DIRECTORY, 0),
                NodeKind::File { size, .. } => (attr::ARCHIVE, *size),
                NodeKind::Symlink { target } => {
                    warnings.push(Warning {
                        code: "exfat-skipped-symlink",
                        path: tree.path(c),
                        message: format!(
                            "symbolic link to \"{}\" skipped: exFAT cannot store symlinks",
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
                        code: "exfat-skipped-special",
                        path: tree.path(c),
                        message: format!("{what} skipped: exFAT cannot store special files"),
                    });
                    continue;
                }
            };
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
            let name = utf16_name(node.name_str()).map_err(|reason| Error::BadName {
                path: tree.path(c),
                reason,
            })?;
            let key = upcase_name(upcase, &name);
            if let Some(&other) = folded.get(&key) {
                return Err(Error::CaseConflict {
                    first: tree.path(other),
                    second: tree.path(c),
                });
            }
            folded.insert(key, c);
            slots += set_len(name.len());
            // No write bit for anyone: read-only, as Windows shows it and Linux maps it back.
            let read_only = if node.meta.mode & 0o222 == 0 {
                attr::READ_ONLY
            } else {
                0
            };
            if attributes == attr::DIRECTORY {
                dirs.push(Dir {
                    node: c,
                    entries: Vec::new(),
                    slots: 0,
                    first: 0,
                    clusters: 0,
                });
            }
            entries.push(Entry {
                node: c,
                attributes: attributes | read_only,
                size,
                time: entry_time(tree, c),
            });
        }
        if slots > MAX_DIR_ENTRIES {
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

/// Pass 2: sequential allocation after the bitmap and the up-case table (the root first, at
/// the plan's root cluster). Returns the items in cluster order and the next free cluster.
fn allocate(dirs: &mut [Dir], layout: &Layout) -> Result<(Vec<Item>, u64), Error> {
    let cb = layout.cluster_bytes;
    let mut next = layout.root_cluster;
    let mut items = Vec::new();
    for i in 0..dirs.len() {
        let Some(d) = dirs.get_mut(i) else { break };
        let n = (d.slots * 32).div_ceil(cb).max(1);
        d.first = next;
        d.clusters = n;
        items.push(Item::Dir(i));
        next += n;
        for e in &d.entries {
            if e.attributes & attr::DIRECTORY == 0 && e.size > 0 {
                let n = e.size.div_ceil(cb);
                items.push(Item::File {
                    node: e.node,
                    first: next,
                    clusters: n,
                });
                next = next.saturating_add(n);
            }
        }
    }
    let needed = next - 2;
    if needed > layout.clusters {
        return Err(Error::NoSpace {
            needed_clusters: needed,
            free_clusters: layout.clusters,
            cluster_bytes: cb,
            missing_bytes: (needed - layout.clusters).saturating_mul(cb),
        });
    }
    Ok((items, next))
}

fn boot_region(layout: &Layout, plan: &ExfatPlan, used: u64, erase_block: u64) -> Vec<u8> {
    let s = usize::try_from(layout.sector_bytes).unwrap_or(512);
    let mut region = vec![0u8; s * 12];
    let percent = (used * 100)
        .checked_div(layout.clusters)
        .map_or(0xFF, |p| u8::try_from(p).unwrap_or(100));
    let mut code = [0u8; 390];
    // Boot code: "int 0x18" (try the next boot device), then halt in a loop.
    code[..4].copy_from_slice(&[0xCD, 0x18, 0xEB, 0xFE]);
    let boot = BootSectorRaw {
        jump_boot: JUMP_BOOT,
        file_system_name: FILE_SYSTEM_NAME,
        must_be_zero: [0; 53],
        partition_offset: U64::new(layout.partition_offset),
        volume_length: U64::new(layout.volume_sectors),
        fat_offset: U32::new(u32::try_from(layout.fat_offset).unwrap_or(0)),
        fat_length: U32::new(u32::try_from(layout.fat_length).unwrap_or(0)),
        cluster_heap_offset: U32::new(u32::try_from(layout.heap_offset).unwrap_or(0)),
        cluster_count: U32::new(u32::try_from(layout.clusters).unwrap_or(0)),
        first_cluster_of_root_directory: U32::new(u32::try_from(layout.root_cluster).unwrap_or(0)),
        volume_serial_number: U32::new(plan.volume_serial),
        file_system_revision: U16::new(REVISION),
        volume_flags: U16::new(0),
        bytes_per_sector_shift: u8::try_from(layout.sector_bytes.trailing_zeros()).unwrap_or(9),
        sectors_per_cluster_shift: u8::try_from(layout.sectors_per_cluster().trailing_zeros())
            .unwrap_or(0),
        number_of_fats: 1,
        drive_select: 0x80,
        percent_in_use: percent,
        reserved: [0; 7],
        boot_code: code,
        boot_signature: U16::new(BOOT_SIGNATURE),
    };
    region[..512].copy_from_slice(boot.as_bytes());
    // Sectors 1–8: extended boot sectors, empty but signed.
    for k in 1..=8 {
        let end = (k + 1) * s;
        region[end - 4..end].copy_from_slice(&EXTENDED_BOOT_SIGNATURE.to_le_bytes());
    }
    // Sector 9: OEM parameters, the flash parameters in the first slot.
    let flash = FlashParamsRaw {
        parameters_guid: FLASH_PARAMETERS_GUID,
        erase_block_size: U32::new(u32::try_from(erase_block).unwrap_or(0)),
        ..FlashParamsRaw::default()
    };
    region[9 * s..9 * s + 48].copy_from_slice(flash.as_bytes());
    // Sector 11: the checksum of sectors 0–10, repeated.
    let sum = boot_checksum(&region[..11 * s]).to_le_bytes();
    for chunk in region[11 * s..].chunks_exact_mut(4) {
        chunk.copy_from_slice(&sum);
    }
    region
}

/// The used prefix of the FAT: entries 0 and 1 and the chains of the bitmap, the up-case
/// table and the root directory (everything else is contiguous, NoFatChain, entry 0).
fn fat_prefix(layout: &Layout, root_clusters: u64) -> Vec<u8> {
    let cb = layout.cluster_bytes;
    let runs = [
        (2, layout.bitmap_bytes.div_ceil(cb)),
        (
            2 + layout.bitmap_bytes.div_ceil(cb),
            layout.upcase_bytes.div_ceil(cb),
        ),
        (layout.root_cluster, root_clusters),
    ];
    let end = usize::try_from(layout.root_cluster + root_clusters).unwrap_or(0);
    let mut v = vec![0u32; end.max(2)];
    v[0] = FAT_MEDIA;
    v[1] = FAT_EOC;
    for (first, count) in runs {
        for k in first..first + count {
            if let Some(x) = v.get_mut(usize::try_from(k).unwrap_or(usize::MAX)) {
                *x = if k + 1 == first + count {
                    FAT_EOC
                } else {
                    u32::try_from(k + 1).unwrap_or(FAT_EOC)
                };
            }
        }
    }
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The bytes of one entry set (File, Stream Extension, File Names) with its checksum.
fn entry_set(
    e: &Entry,
    name: &[u16],
    first: u64,
    data_length: u64,
    flags: u8,
    upcase: &[u16],
) -> Vec<u8> {
    let names = name.len().div_ceil(NAME_UNITS_PER_ENTRY);
    let ts = (u32::from(e.time.date) << 16) | u32::from(e.time.time);
    let file = FileEntryRaw {
        entry_type: entry_type::FILE,
        secondary_count: u8::try_from(1 + names).unwrap_or(0),
        set_checksum: U16::new(0),
        file_attributes: U16::new(e.attributes),
        create_timestamp: U32::new(ts),
        last_modified_timestamp: U32::new(ts),
        last_accessed_timestamp: U32::new(ts),
        create_10ms_increment: e.time.hundredths,
        last_modified_10ms_increment: e.time.hundredths,
        create_utc_offset: UTC,
        last_modified_utc_offset: UTC,
        last_accessed_utc_offset: UTC,
        ..FileEntryRaw::default()
    };
    let stream = StreamEntryRaw {
        entry_type: entry_type::STREAM,
        general_secondary_flags: flags,
        name_length: u8::try_from(name.len()).unwrap_or(0),
        name_hash: U16::new(name_hash(&upcase_name(upcase, name))),
        valid_data_length: U64::new(data_length),
        first_cluster: U32::new(u32::try_from(first).unwrap_or(0)),
        data_length: U64::new(data_length),
        ..StreamEntryRaw::default()
    };
    let mut out = Vec::with_capacity((2 + names) * 32);
    out.extend_from_slice(file.as_bytes());
    out.extend_from_slice(stream.as_bytes());
    for chunk in name.chunks(NAME_UNITS_PER_ENTRY) {
        let mut n = NameEntryRaw {
            entry_type: entry_type::NAME,
            ..NameEntryRaw::default()
        };
        for (d, &u) in n.file_name.iter_mut().zip(chunk) {
            *d = U16::new(u);
        }
        out.extend_from_slice(n.as_bytes());
    }
    let sum = set_checksum(&out).to_le_bytes();
    out[2..4].copy_from_slice(&sum);
    out
}

struct Volume<'a> {
    layout: &'a Layout,
    plan: &'a ExfatPlan,
    dirs: &'a [Dir],
    first: &'a HashMap<NodeId, (u64, u64)>,
    upcase: &'a [u16],
    upcase_checksum: u32,
    tree: &'a Tree,
}

impl Volume<'_> {
    /// The bytes of directory `i` (not yet padded).
    fn dir_bytes(&self, i: usize) -> Result<Vec<u8>, Error> {
        let Some(d) = self.dirs.get(i) else {
            return Ok(Vec::new());
        };
        let l = self.layout;
        let mut out = Vec::with_capacity(usize::try_from(d.slots * 32).unwrap_or(0));
        if i == 0 {
            if let Some(label) = &self.plan.label {
                let mut e = LabelEntryRaw {
                    entry_type: entry_type::LABEL,
                    ..LabelEntryRaw::default()
                };
                let units: Vec<u16> = label.encode_utf16().collect();
                e.character_count = u8::try_from(units.len()).unwrap_or(0);
                for (d, u) in e.volume_label.iter_mut().zip(units) {
                    *d = U16::new(u);
                }
                out.extend_from_slice(e.as_bytes());
            }
            let bitmap = BitmapEntryRaw {
                entry_type: entry_type::BITMAP,
                first_cluster: U32::new(2),
                data_length: U64::new(l.bitmap_bytes),
                ..BitmapEntryRaw::default()
            };
            out.extend_from_slice(bitmap.as_bytes());
            let up = UpcaseEntryRaw {
                entry_type: entry_type::UPCASE,
                table_checksum: U32::new(self.upcase_checksum),
                first_cluster: U32::new(
                    u32::try_from(2 + l.bitmap_bytes.div_ceil(l.cluster_bytes)).unwrap_or(0),
                ),
                data_length: U64::new(l.upcase_bytes),
                ..UpcaseEntryRaw::default()
            };
            out.extend_from_slice(up.as_bytes());
            if let Some(g) = self
                .plan
                .volume_guid
                .as_deref()
                .and_then(|g| g.parse::<blockwise_geometry::Guid>().ok())
            {
                let mut guid = GuidEntryRaw {
                    entry_type: entry_type::GUID,
                    volume_guid: g.to_bytes(),
                    ..GuidEntryRaw::default()
                };
                guid.set_checksum = U16::new(set_checksum(guid.as_bytes()));
                out.extend_from_slice(guid.as_bytes());
            }
        }
        for e in &d.entries {
            let (first, clusters) = self.first.get(&e.node).copied().unwrap_or((0, 0));
            let (len, flags) = if e.attributes & attr::DIRECTORY != 0 {
                (
                    clusters * l.cluster_bytes,
                    stream_flags::ALLOCATION_POSSIBLE | stream_flags::NO_FAT_CHAIN,
                )
            } else if e.size == 0 {
                (0, stream_flags::ALLOCATION_POSSIBLE)
            } else {
                (
                    e.size,
                    stream_flags::ALLOCATION_POSSIBLE | stream_flags::NO_FAT_CHAIN,
                )
            };
            // The scan accepted this very name with the same function and counted its
            // entries: a tree changed since is an error, never a short directory.
            let name = utf16_name(self.tree.nodes.get(e.node).and_then(|n| n.name_str())).map_err(
                |_| Error::InvalidTree {
                    node: e.node,
                    reason: "the name changed between the scan and the write",
                },
            )?;
            out.extend_from_slice(&entry_set(e, &name, first, len, flags, self.upcase));
        }
        Ok(out)
    }
}

pub(crate) fn write_volume<S: BlockSink + ?Sized>(
    sink: &mut S,
    layout: &Layout,
    plan: &ExfatPlan,
    req: &ExfatRequest,
    tree: &Tree,
    content: &dyn ContentSource,
) -> Result<WriteReport, Error> {
    let vol = layout.volume_bytes();
    if sink.len() < vol {
        return Err(Error::SinkTooSmall {
            need: vol,
            have: sink.len(),
        });
    }
    let (upcase, upcase_bytes) = upcase_tables();
    let mut warnings = Vec::new();
    let root_extra = u64::from(plan.label.is_some()) + u64::from(plan.volume_guid.is_some());
    let mut dirs = scan(tree, root_extra, upcase, &mut warnings)?;
    let mut with_xattrs = tree
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.meta.xattrs.is_empty());
    if let Some((first, _)) = with_xattrs.next() {
        let more = with_xattrs.count();
        warnings.push(Warning {
            code: "exfat-dropped-xattrs",
            path: tree.path(first),
            message: if more == 0 {
                "extended attributes dropped: exFAT cannot store them".into()
            } else {
                format!("extended attributes of this and {more} more files dropped: exFAT cannot store them")
            },
        });
    }
    let (items, next) = allocate(&mut dirs, layout)?;
    let mut first: HashMap<NodeId, (u64, u64)> = HashMap::with_capacity(items.len());
    for d in &dirs {
        first.insert(d.node, (d.first, d.clusters));
    }
    for it in &items {
        if let Item::File {
            node,
            first: f,
            clusters,
        } = it
        {
            first.insert(*node, (*f, *clusters));
        }
    }
    let used = next - 2;
    let s = layout.sector_bytes;
    let cb = layout.cluster_bytes;
    let v = Volume {
        layout,
        plan,
        dirs: &dirs,
        first: &first,
        upcase,
        upcase_checksum: table_checksum(upcase_bytes),
        tree,
    };
    let mut out = Out::new(sink);

    // Boot regions, then zeros up to the FAT.
    let region = boot_region(layout, plan, used, req.erase_block_bytes);
    out.bytes(0, &region)?;
    out.bytes(BOOT_REGION_SECTORS * s, &region)?;
    let fat_off = layout.fat_offset * s;
    out.zeros(
        2 * BOOT_REGION_SECTORS * s,
        fat_off - 2 * BOOT_REGION_SECTORS * s,
    )?;

    // The FAT, and the gap to the heap (none when the FAT ends there).
    let root_clusters = dirs.first().map_or(1, |d| d.clusters);
    let prefix = fat_prefix(layout, root_clusters);
    let fat_bytes = layout.fat_length * s;
    let p = prefix
        .get(
            ..usize::try_from(fat_bytes)
                .unwrap_or(usize::MAX)
                .min(prefix.len()),
        )
        .unwrap_or_default();
    out.bytes(fat_off, p)?;
    let heap = layout.heap_offset * s;
    out.zeros(fat_off + p.len() as u64, heap - fat_off - p.len() as u64)?;

    // The allocation bitmap: the first `used` clusters are in use.
    let mut bitmap = vec![0u8; usize::try_from(layout.bitmap_bytes).unwrap_or(0)];
    for k in 0..usize::try_from(used).unwrap_or(0) {
        if let Some(b) = bitmap.get_mut(k / 8) {
            *b |= 1 << (k % 8);
        }
    }
    let bitmap_clusters = layout.bitmap_bytes.div_ceil(cb);
    out.bytes(heap, &bitmap)?;
    out.zeros(
        heap + layout.bitmap_bytes,
        bitmap_clusters * cb - layout.bitmap_bytes,
    )?;
    let up_off = layout.cluster_offset(2 + bitmap_clusters);
    out.bytes(up_off, upcase_bytes)?;
    out.zeros(
        up_off + layout.upcase_bytes,
        layout.upcase_bytes.div_ceil(cb) * cb - layout.upcase_bytes,
    )?;

    let mut files = 0u64;
    for it in &items {
        match it {
            Item::Dir(i) => {
                let Some(d) = dirs.get(*i) else { continue };
                let off = layout.cluster_offset(d.first);
                let bytes = v.dir_bytes(*i)?;
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
                let off = layout.cluster_offset(*f);
                let total = clusters * cb;
                let whole = [(0, *size)];
                let ranges = data_ranges.as_deref().unwrap_or(&whole);
                let mut pos = 0u64;
                for &(a, b) in ranges {
                    let (a, b) = (a.max(pos), b.min(*size));
                    if a >= b {
                        continue;
                    }
                    out.zeros(off + pos, a - pos)?;
                    let r = ContentRef {
                        content: *handle,
                        offset: a,
                        len: b - a,
                    };
                    out.content(off + a, r, content).map_err(|e| match e {
                        Placing::Done(e) => e,
                        Placing::Content(source) => Error::Content {
                            path: tree.path(*node),
                            source,
                        },
                    })?;
                    pos = b;
                }
                out.zeros(off + pos, total - pos)?;
            }
        }
    }
    out.flush()?;
    let empty_files = dirs
        .iter()
        .flat_map(|d| d.entries.iter())
        .filter(|e| e.attributes & attr::DIRECTORY == 0 && e.size == 0)
        .count() as u64;
    Ok(WriteReport {
        warnings,
        files: files + empty_files,
        directories: dirs.len() as u64,
        used_clusters: used,
        free_clusters: layout.clusters - used,
    })
}
