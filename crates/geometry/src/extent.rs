//! The image as an extent map: metadata bytes held in memory plus references to file content
//! that stays where it is until the output is written.
//!
//! The FAT and ext4 writers place file data with [`BlockSink::write_content`]. An
//! [`ImageMap`] records a [`ContentRef`] (content id, offset, length) there instead of the
//! bytes, so building an image costs memory for its metadata (FATs, bitmaps, inode tables,
//! directories) and a few dozen bytes per file, whatever the files weigh. The host resolves
//! the ids to files when it writes the output ([`ImageMap::pieces`]); anything else can read
//! the image through [`ImageMap::reader`].
//!
//! Metadata can outgrow memory too (a million inodes are 256 MB of inode tables; the bitmaps
//! of a 16 TiB ext4 are 512 MiB), so a map may be given a [`SpillStore`] and a budget: past
//! the budget, the bytes held in memory are handed to the store at their image offsets, in
//! offset order, and read back from it when asked for (the host's store is an unnamed file
//! beside the output; writing the image copies them from there).

use std::collections::BTreeMap;

use crate::io::{
    merge_ranges, range_check_u64, to_usize, BlockSink, BlockSource, OutOfBounds, SparseImage,
};
use crate::tree::{ContentError, ContentSource};

/// Chunk size for content copied through memory.
const COPY_CHUNK: u64 = 1 << 20;

/// `len` bytes of content `content` starting at `offset` in that content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContentRef {
    /// The content id (a file handle of the [`ContentSource`]).
    pub content: u64,
    /// Offset in the content.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

impl ContentRef {
    /// The part of this reference from `skip` bytes on, `len` bytes long.
    #[must_use]
    pub fn slice(self, skip: u64, len: u64) -> ContentRef {
        ContentRef {
            content: self.content,
            offset: self.offset.saturating_add(skip),
            len,
        }
    }
}

/// Placing content failed: reading the content, or writing the sink.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError<E: core::error::Error + 'static> {
    /// The content could not be read.
    #[error(transparent)]
    Content(ContentError),
    /// The sink refused the bytes.
    #[error(transparent)]
    Sink(E),
}

impl<E: core::error::Error + 'static> PlaceError<E> {
    /// Maps the sink error.
    pub fn map_sink<F: core::error::Error + 'static>(
        self,
        f: impl FnOnce(E) -> F,
    ) -> PlaceError<F> {
        match self {
            PlaceError::Content(c) => PlaceError::Content(c),
            PlaceError::Sink(e) => PlaceError::Sink(f(e)),
        }
    }
}

/// Reads `r` through `source` and writes it to `sink` at `offset`, 1 MiB at a time: what
/// [`BlockSink::write_content`] does for sinks that hold bytes.
pub fn copy_content<S: BlockSink + ?Sized>(
    sink: &mut S,
    offset: u64,
    r: ContentRef,
    source: &dyn ContentSource,
) -> Result<(), PlaceError<S::Error>> {
    let mut buf = vec![0u8; to_usize(r.len.min(COPY_CHUNK))];
    let mut done = 0u64;
    while done < r.len {
        let n = (r.len - done).min(COPY_CHUNK);
        let chunk = buf.get_mut(..to_usize(n)).unwrap_or_default();
        source
            .read_at(r.content, r.offset.saturating_add(done), chunk)
            .map_err(PlaceError::Content)?;
        sink.write_at(offset.saturating_add(done), chunk)
            .map_err(PlaceError::Sink)?;
        done += n;
    }
    Ok(())
}

/// One piece of an [`ImageMap`], in offset order: bytes held in memory, a reference, or
/// bytes the map spilled to its [`SpillStore`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Metadata bytes at this offset.
    Bytes(u64, &'a [u8]),
    /// Content placed at this offset.
    Content(u64, ContentRef),
    /// `len` bytes at this offset held by the map's [`SpillStore`] (read them with
    /// [`ImageMap::load_spilled`] or through [`ImageMap::reader`]).
    Spilled(u64, u64),
}

impl Piece<'_> {
    /// Where the piece starts in the image.
    #[must_use]
    pub fn offset(&self) -> u64 {
        match *self {
            Piece::Bytes(o, _) | Piece::Content(o, _) | Piece::Spilled(o, _) => o,
        }
    }

    /// Its length in bytes.
    #[must_use]
    pub fn len(&self) -> u64 {
        match *self {
            Piece::Bytes(_, b) => b.len() as u64,
            Piece::Content(_, r) => r.len,
            Piece::Spilled(_, len) => len,
        }
    }

    /// True for an empty piece (never produced by [`ImageMap::pieces`]).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where an [`ImageMap`] keeps the metadata it no longer holds in memory: bytes at their image
/// offsets, stored once the map passes its memory budget and read back on demand. The host
/// provides one (an unnamed file beside the output); the pure crates never see where the
/// bytes go.
pub trait SpillStore: Send + Sync {
    /// Stores `data` at image offset `offset`, replacing what was stored there.
    fn store(&mut self, offset: u64, data: &[u8]) -> Result<(), SpillError>;
    /// Reads back `buf.len()` bytes stored at `offset`.
    fn load(&self, offset: u64, buf: &mut [u8]) -> Result<(), SpillError>;
    /// The store itself, for a host that knows its type (the host's file store can become
    /// the output, its spilled bytes already in place). `None` by default.
    fn as_any(&self) -> Option<&dyn core::any::Any> {
        None
    }
}

/// The [`SpillStore`] failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("metadata kept outside memory, at image byte {offset}: {message}")]
pub struct SpillError {
    /// Image offset of the access.
    pub offset: u64,
    /// What went wrong.
    pub message: String,
}

/// Writing to an [`ImageMap`] failed.
#[derive(Debug, thiserror::Error)]
pub enum MapError {
    /// Outside the image.
    #[error(transparent)]
    OutOfBounds(#[from] OutOfBounds),
    /// The map's [`SpillStore`] failed.
    #[error(transparent)]
    Spill(#[from] SpillError),
}

/// How often (in bytes written) a map with a spill store compares what it holds with its
/// budget.
const SPILL_CHECK: u64 = 1 << 20;

/// The spilled part of a map.
struct Spill {
    store: Box<dyn SpillStore>,
    /// Ranges `start → end` whose bytes are in the store (and not in memory).
    ranges: BTreeMap<u64, u64>,
    /// Ranges the store holds bytes for that are no longer the image's (cut by later
    /// writes): a write of zeros there must store them, not leave a hole.
    stale: BTreeMap<u64, u64>,
    /// Bytes in `ranges`.
    bytes: u64,
    /// Bytes held in memory above which everything held is spilled.
    budget: u64,
    /// Bytes written since the last comparison with the budget.
    pending: u64,
}

/// Adds `[start, end)` to a set of disjoint ranges, merging what it touches.
fn add_range(set: &mut BTreeMap<u64, u64>, start: u64, end: u64) {
    if start >= end {
        return;
    }
    let (mut s, mut e) = (start, end);
    let touching: Vec<(u64, u64)> = set
        .range(..=end)
        .rev()
        .take_while(|(_, &re)| re >= start)
        .map(|(&rs, &re)| (rs, re))
        .collect();
    for (rs, re) in touching {
        set.remove(&rs);
        s = s.min(rs);
        e = e.max(re);
    }
    set.insert(s, e);
}

/// Removes `[start, end)` from a set of disjoint ranges; returns how many bytes it removed.
fn cut_range(set: &mut BTreeMap<u64, u64>, start: u64, end: u64) -> u64 {
    let hit: Vec<(u64, u64)> = set
        .range(..end)
        .rev()
        .take_while(|(_, &re)| re > start)
        .map(|(&rs, &re)| (rs, re))
        .collect();
    let mut removed = 0;
    for (rs, re) in hit {
        set.remove(&rs);
        removed += re.min(end) - rs.max(start);
        if rs < start {
            set.insert(rs, start);
        }
        if re > end {
            set.insert(end, re);
        }
    }
    removed
}

/// The parts of `[start, end)` inside ranges of `set`, in order.
fn overlaps(set: &BTreeMap<u64, u64>, start: u64, end: u64) -> Vec<(u64, u64)> {
    let first = set.range(..=start).next_back().map_or(start, |(&s, _)| s);
    set.range(first..end)
        .filter_map(|(&s, &e)| {
            let (a, b) = (s.max(start), e.min(end));
            (a < b).then_some((a, b))
        })
        .collect()
}

/// A disk image as metadata bytes (a [`SparseImage`]) plus [`ContentRef`]s. The two never
/// overlap: a later write replaces whatever an earlier one put in its range. A map made with
/// [`ImageMap::with_spill`] keeps at most about its budget of metadata in memory and the rest
/// in its [`SpillStore`].
///
/// ```
/// use blockwise_geometry::{BlockSink, BlockSource, ContentRef, ImageMap};
/// let files: Vec<Vec<u8>> = vec![b"hello, world".to_vec()];
/// let mut img = ImageMap::new(1 << 20);
/// img.write_at(0, b"boot").unwrap();
/// img.write_content(4096, ContentRef { content: 0, offset: 7, len: 5 }, &files).unwrap();
/// assert_eq!(img.content_bytes(), 5);
/// let mut buf = [0u8; 5];
/// img.reader(&files).read_at(4096, &mut buf).unwrap();
/// assert_eq!(&buf, b"world");
/// ```
#[derive(Default)]
pub struct ImageMap {
    meta: SparseImage,
    /// Image offset → reference; disjoint.
    refs: BTreeMap<u64, ContentRef>,
    spill: Option<Spill>,
}

impl core::fmt::Debug for ImageMap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ImageMap")
            .field("size", &self.size())
            .field("metadata_bytes", &self.metadata_bytes())
            .field("spilled", &self.spill.as_ref().map_or(0, |s| s.bytes))
            .field("refs", &self.refs.len())
            .finish()
    }
}

impl ImageMap {
    /// An image of `size` bytes, all hole.
    #[must_use]
    pub fn new(size: u64) -> Self {
        ImageMap {
            meta: SparseImage::new(size),
            refs: BTreeMap::new(),
            spill: None,
        }
    }

    /// An image of `size` bytes that keeps at most about `budget` bytes of metadata in memory:
    /// whenever it holds more, everything it holds goes to `store` (in offset order), and is
    /// read back from there.
    #[must_use]
    pub fn with_spill(size: u64, store: Box<dyn SpillStore>, budget: u64) -> Self {
        ImageMap {
            meta: SparseImage::new(size),
            refs: BTreeMap::new(),
            spill: Some(Spill {
                store,
                ranges: BTreeMap::new(),
                stale: BTreeMap::new(),
                bytes: 0,
                budget,
                pending: 0,
            }),
        }
    }

    /// The image size in bytes.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.meta.size()
    }

    /// The metadata held in memory (bytes, and ranges written with zeros); spilled bytes are
    /// in [`ImageMap::spilled_ranges`].
    #[must_use]
    pub fn metadata(&self) -> &SparseImage {
        &self.meta
    }

    /// Metadata bytes: held in memory plus spilled.
    #[must_use]
    pub fn metadata_bytes(&self) -> u64 {
        self.meta.data_bytes() + self.spilled_bytes()
    }

    /// Metadata bytes in the [`SpillStore`].
    #[must_use]
    pub fn spilled_bytes(&self) -> u64 {
        self.spill.as_ref().map_or(0, |s| s.bytes)
    }

    /// The ranges `(start, end)` whose bytes are in the [`SpillStore`], in offset order.
    pub fn spilled_ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.spill
            .iter()
            .flat_map(|s| s.ranges.iter().map(|(&a, &b)| (a, b)))
    }

    /// The [`SpillStore`], when the map has one.
    #[must_use]
    pub fn spill_store(&self) -> Option<&dyn SpillStore> {
        self.spill.as_ref().map(|s| &*s.store)
    }

    /// Reads spilled bytes (a range of [`ImageMap::spilled_ranges`]) back from the store.
    pub fn load_spilled(&self, offset: u64, buf: &mut [u8]) -> Result<(), SpillError> {
        match &self.spill {
            Some(s) => s.store.load(offset, buf),
            None => Err(SpillError {
                offset,
                message: "this map spills nothing".into(),
            }),
        }
    }

    /// Bytes placed by reference.
    #[must_use]
    pub fn content_bytes(&self) -> u64 {
        self.refs.values().map(|r| r.len).sum()
    }

    /// Bytes the output file will hold: metadata plus content.
    #[must_use]
    pub fn data_bytes(&self) -> u64 {
        self.metadata_bytes() + self.content_bytes()
    }

    /// The content references in offset order: `(image offset, reference)`.
    pub fn refs(&self) -> impl Iterator<Item = (u64, ContentRef)> + '_ {
        self.refs.iter().map(|(&o, &r)| (o, r))
    }

    /// Metadata extents, content references and spilled ranges merged in offset order; they
    /// never overlap. Ranges in none of them are holes (zeros).
    pub fn pieces(&self) -> impl Iterator<Item = Piece<'_>> + '_ {
        let mut bytes = self
            .meta
            .extents()
            .map(|(o, b)| Piece::Bytes(o, b))
            .peekable();
        let mut refs = self.refs().map(|(o, r)| Piece::Content(o, r)).peekable();
        let mut spilled = self
            .spilled_ranges()
            .map(|(s, e)| Piece::Spilled(s, e - s))
            .peekable();
        core::iter::from_fn(move || {
            let at = |p: Option<&Piece<'_>>| p.map_or(u64::MAX, Piece::offset);
            let (b, r, s) = (at(bytes.peek()), at(refs.peek()), at(spilled.peek()));
            if b == u64::MAX && r == u64::MAX && s == u64::MAX {
                None
            } else if b <= r && b <= s {
                bytes.next()
            } else if r <= s {
                refs.next()
            } else {
                spilled.next()
            }
        })
    }

    /// Every range that was written (bytes, zeros, content or spilled), merged and sorted.
    /// This is what must reach a device and what a `.bmap` maps.
    #[must_use]
    pub fn mapped_ranges(&self) -> Vec<(u64, u64)> {
        let mut all = self.meta.mapped_ranges();
        all.extend(self.refs.iter().map(|(&o, r)| (o, o + r.len)));
        all.extend(self.spilled_ranges());
        merge_ranges(all)
    }

    /// The image read with its references resolved through `content`.
    #[must_use]
    pub fn reader<'a>(&'a self, content: &'a dyn ContentSource) -> MapReader<'a> {
        MapReader { map: self, content }
    }

    /// Drops the references overlapping `[start, end)`, keeping their parts outside it.
    fn cut_refs(&mut self, start: u64, end: u64) {
        let hit: Vec<(u64, ContentRef)> = self
            .refs
            .range(..end)
            .rev()
            .take_while(|(&o, r)| o + r.len > start)
            .map(|(&o, &r)| (o, r))
            .collect();
        for (o, r) in hit {
            self.refs.remove(&o);
            if o < start {
                self.refs.insert(o, r.slice(0, start - o));
            }
            let r_end = o + r.len;
            if r_end > end {
                self.refs.insert(end, r.slice(end - o, r_end - end));
            }
        }
    }

    /// `[start, end)` is about to get new bytes: the spilled bytes there are no longer the
    /// image's. Returns the parts of the range the store holds bytes for (spilled now or
    /// before), where zeros must be stored, not skipped.
    fn unspill(&mut self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let Some(sp) = &mut self.spill else {
            return Vec::new();
        };
        if sp.ranges.is_empty() && sp.stale.is_empty() {
            return Vec::new();
        }
        for (a, b) in overlaps(&sp.ranges, start, end) {
            add_range(&mut sp.stale, a, b);
        }
        sp.bytes -= cut_range(&mut sp.ranges, start, end);
        overlaps(&sp.stale, start, end)
    }

    /// Hands everything held in memory to the store when it holds more than its budget.
    fn maybe_spill(&mut self, written: u64) -> Result<(), SpillError> {
        let Some(sp) = &mut self.spill else {
            return Ok(());
        };
        sp.pending += written;
        if sp.pending < SPILL_CHECK.min(sp.budget.max(1)) {
            return Ok(());
        }
        sp.pending = 0;
        if self.meta.data_bytes() <= sp.budget {
            return Ok(());
        }
        let held = self.meta.take_extents();
        let mut failed = None;
        for (o, v) in held {
            if failed.is_none() {
                match sp.store.store(o, &v) {
                    Ok(()) => {
                        let end = o + v.len() as u64;
                        add_range(&mut sp.ranges, o, end);
                        sp.bytes += v.len() as u64;
                        continue;
                    }
                    Err(e) => failed = Some(e),
                }
            }
            // The store failed (a full disk, a file-size limit): what it did not take stays
            // in memory, where it was; extents never touch, so they come back as they were.
            self.meta.write_stored(o, &v);
        }
        match failed {
            Some(e) => {
                // Spilling only saves memory: the map stops trying, and the output's own
                // write meets the disk's limit and says so.
                sp.budget = u64::MAX;
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// Spills everything held in memory now, whatever the budget (a map with no store keeps
    /// it): after this the store holds every metadata byte.
    pub fn spill_all(&mut self) -> Result<(), SpillError> {
        if let Some(sp) = &mut self.spill {
            sp.pending = SPILL_CHECK;
            let budget = core::mem::replace(&mut sp.budget, 0);
            let r = self.maybe_spill(0);
            if let Some(sp) = &mut self.spill {
                sp.budget = budget;
            }
            r?;
        }
        Ok(())
    }
}

impl BlockSink for ImageMap {
    type Error = MapError;
    fn len(&self) -> u64 {
        self.size()
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), MapError> {
        let (start, end) = range_check_u64(offset, data.len() as u64, self.size())?;
        self.cut_refs(start, end);
        let forced = self.unspill(start, end);
        if forced.is_empty() {
            self.meta.write_at(offset, data)?;
        } else {
            // Where the store holds older bytes, every byte is kept (zeros included) so that
            // the store gets them; elsewhere zero blocks stay holes as usual.
            let mut pos = start;
            for (a, b) in forced.into_iter().chain(core::iter::once((end, end))) {
                if pos < a {
                    let part = data.get(to_usize(pos - start)..to_usize(a - start));
                    self.meta.write_at(pos, part.unwrap_or_default())?;
                }
                if a < b {
                    let part = data.get(to_usize(a - start)..to_usize(b - start));
                    self.meta.write_stored(a, part.unwrap_or_default());
                }
                pos = pos.max(b);
            }
        }
        // A store that fails keeps the bytes in memory (and is not asked again): the write
        // itself succeeded.
        let _ = self.maybe_spill(end - start);
        Ok(())
    }
    fn write_content(
        &mut self,
        offset: u64,
        r: ContentRef,
        _source: &dyn ContentSource,
    ) -> Result<(), crate::PlaceError<MapError>> {
        let (start, end) = range_check_u64(offset, r.len, self.size())
            .map_err(|e| crate::PlaceError::Sink(e.into()))?;
        if start == end {
            return Ok(());
        }
        self.cut_refs(start, end);
        self.meta.punch(start, end);
        self.unspill(start, end);
        // Join a reference that continues this one in both the image and the content.
        if let Some((&po, p)) = self.refs.range_mut(..start).next_back() {
            if po + p.len == start && p.content == r.content && p.offset + p.len == r.offset {
                p.len += r.len;
                return Ok(());
            }
        }
        self.refs.insert(start, r);
        Ok(())
    }
}

/// An [`ImageMap`] readable as a [`BlockSource`], content read through a [`ContentSource`].
#[derive(Clone, Copy)]
pub struct MapReader<'a> {
    map: &'a ImageMap,
    content: &'a dyn ContentSource,
}

impl core::fmt::Debug for MapReader<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MapReader").field("map", self.map).finish()
    }
}

/// Reading an [`ImageMap`] failed.
#[derive(Debug, thiserror::Error)]
pub enum MapReadError {
    /// Outside the image.
    #[error(transparent)]
    OutOfBounds(#[from] OutOfBounds),
    /// A referenced content could not be read.
    #[error(transparent)]
    Content(#[from] ContentError),
    /// Spilled metadata could not be read back.
    #[error(transparent)]
    Spill(#[from] SpillError),
}

impl BlockSource for MapReader<'_> {
    type Error = MapReadError;
    fn len(&self) -> u64 {
        self.map.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MapReadError> {
        let (start, end) = range_check_u64(offset, buf.len() as u64, self.map.size())?;
        self.map.meta.read_at(offset, buf)?;
        if let Some(sp) = &self.map.spill {
            for (a, b) in overlaps(&sp.ranges, start, end) {
                if let Some(dst) = buf.get_mut(to_usize(a - start)..to_usize(b - start)) {
                    sp.store.load(a, dst)?;
                }
            }
        }
        let first = self
            .map
            .refs
            .range(..=start)
            .next_back()
            .map_or(start, |(&o, _)| o);
        for (&o, r) in self.map.refs.range(first..end) {
            let (s, e) = (o.max(start), (o + r.len).min(end));
            if s >= e {
                continue;
            }
            if let Some(dst) = buf.get_mut(to_usize(s - start)..to_usize(e - start)) {
                self.content.read_at(r.content, r.offset + (s - o), dst)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn files() -> Vec<Vec<u8>> {
        vec![(0..=255u8).cycle().take(20_000).collect(), vec![7u8; 9000]]
    }

    #[test]
    fn refs_join_and_read_back() {
        let f = files();
        let mut m = ImageMap::new(1 << 16);
        let r = |content, offset, len| ContentRef {
            content,
            offset,
            len,
        };
        m.write_content(4096, r(0, 0, 4096), &f).unwrap();
        m.write_content(8192, r(0, 4096, 4096), &f).unwrap();
        assert_eq!(m.refs().count(), 1, "contiguous references join");
        m.write_content(16384, r(1, 0, 9000), &f).unwrap();
        let mut buf = vec![0u8; 8192];
        m.reader(&f).read_at(4096, &mut buf).unwrap();
        assert_eq!(buf, f[0][..8192]);
        assert_eq!(m.mapped_ranges(), vec![(4096, 12288), (16384, 25384)]);
        assert!(m.write_content(60000, r(1, 0, 9000), &f).is_err());
    }

    #[test]
    fn pieces_are_ordered_and_disjoint() {
        let f = files();
        let mut m = ImageMap::new(1 << 16);
        m.write_at(0, b"mbr").unwrap();
        m.write_content(
            4096,
            ContentRef {
                content: 0,
                offset: 0,
                len: 100,
            },
            &f,
        )
        .unwrap();
        m.write_at(8192, b"dir").unwrap();
        let p: Vec<_> = m.pieces().map(|p| (p.offset(), p.len())).collect();
        assert_eq!(p, vec![(0, 3), (4096, 100), (8192, 3)]);
    }

    /// An operation on both a plain [`SparseImage`] (bytes copied) and an [`ImageMap`].
    #[derive(Clone, Debug)]
    enum Op {
        Bytes(u64, Vec<u8>),
        Content(u64, u64, u64, u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (
                0u64..60_000,
                proptest::collection::vec(any::<u8>(), 0..5000)
            )
                .prop_map(|(o, d)| Op::Bytes(o, d)),
            (0u64..60_000, 0u64..2, 0u64..9000, 0u64..5000)
                .prop_map(|(o, c, s, l)| Op::Content(o, c, s, l)),
            (0u64..60_000, 0usize..9000).prop_map(|(o, n)| Op::Bytes(o, vec![0; n])),
        ]
    }

    /// A store that takes `room` bytes and then fails, like a full disk.
    struct FullStore {
        room: usize,
        kept: std::collections::BTreeMap<u64, Vec<u8>>,
    }

    impl SpillStore for FullStore {
        fn store(&mut self, offset: u64, data: &[u8]) -> Result<(), SpillError> {
            if data.len() > self.room {
                return Err(SpillError {
                    offset,
                    message: "No space left on device".into(),
                });
            }
            self.room -= data.len();
            self.kept.insert(offset, data.to_vec());
            Ok(())
        }
        fn load(&self, offset: u64, buf: &mut [u8]) -> Result<(), SpillError> {
            let v = self.kept.get(&offset).ok_or(SpillError {
                offset,
                message: "not stored".into(),
            })?;
            buf.copy_from_slice(&v[..buf.len()]);
            Ok(())
        }
    }

    /// A store that fills up keeps what it took; the rest stays in memory, every write still
    /// succeeds, nothing more is offered to it, and the image reads back whole.
    #[test]
    fn a_full_store_leaves_the_bytes_in_memory() {
        let mut plain = SparseImage::new(1 << 20);
        let store = FullStore {
            room: 3 * 4096,
            kept: std::collections::BTreeMap::new(),
        };
        let mut map = ImageMap::with_spill(1 << 20, Box::new(store), 4096);
        for i in 0..64u64 {
            let data = vec![u8::try_from(i % 250).unwrap() + 1; 4096];
            plain.write_at(i * 8192, &data).unwrap();
            map.write_at(i * 8192, &data).unwrap();
        }
        assert!(map.spilled_bytes() > 0 && map.spilled_bytes() <= 3 * 4096);
        assert!(map.metadata().data_bytes() > 0);
        let mut x = vec![0u8; 1 << 20];
        let mut y = vec![0u8; 1 << 20];
        plain.read_at(0, &mut x).unwrap();
        map.reader(&Vec::<Vec<u8>>::new())
            .read_at(0, &mut y)
            .unwrap();
        assert_eq!(x, y);
        assert_eq!(plain.mapped_ranges(), map.mapped_ranges());
    }

    /// A spill store in memory: a zeroed "file" of the image's size, as the host's is.
    struct MemStore(std::sync::Mutex<Vec<u8>>);

    impl SpillStore for std::sync::Arc<MemStore> {
        fn store(&mut self, offset: u64, data: &[u8]) -> Result<(), SpillError> {
            let mut f = self.0.lock().unwrap();
            let o = to_usize(offset);
            f[o..o + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn load(&self, offset: u64, buf: &mut [u8]) -> Result<(), SpillError> {
            let f = self.0.lock().unwrap();
            let o = to_usize(offset);
            buf.copy_from_slice(&f[o..o + buf.len()]);
            Ok(())
        }
    }

    proptest! {
        /// A map that spills (a tiny budget, so it spills often) reads back, maps and writes
        /// out the same image as one that keeps everything, whatever the order of writes:
        /// every spilled piece reads back as the plain image's bytes (what the host copies
        /// into a fresh output), and even over a store that still holds older bytes, the
        /// pieces in memory and the content rewrite every byte that changed: the result
        /// equals the plain image byte for byte, holes included.
        #[test]
        fn spilled_map_writes_the_same_image(
            ops in proptest::collection::vec(op(), 1..40),
            budget in 1u64..20_000,
        ) {
            let f = files();
            let size = 1 << 16;
            let mut plain = SparseImage::new(size);
            let store = std::sync::Arc::new(MemStore(std::sync::Mutex::new(vec![0; to_usize(size)])));
            let mut map = ImageMap::with_spill(size, Box::new(std::sync::Arc::clone(&store)), budget);
            for o in ops {
                match o {
                    Op::Bytes(at, d) => {
                        let a = plain.write_at(at, &d).is_ok();
                        let b = map.write_at(at, &d).is_ok();
                        prop_assert_eq!(a, b);
                    }
                    Op::Content(at, c, s, l) => {
                        let r = ContentRef { content: c, offset: s, len: l };
                        if plain.write_content(at, r, &f).is_ok() {
                            prop_assert!(map.write_content(at, r, &f).is_ok());
                        }
                    }
                }
            }
            let mut x = vec![0u8; to_usize(size)];
            let mut y = vec![0u8; to_usize(size)];
            plain.read_at(0, &mut x).unwrap();
            map.reader(&f).read_at(0, &mut y).unwrap();
            prop_assert_eq!(&x, &y);
            prop_assert_eq!(plain.mapped_ranges(), map.mapped_ranges());
            let mut out = store.0.lock().unwrap().clone();
            let mut end = 0;
            for p in map.pieces() {
                prop_assert!(p.offset() >= end && !p.is_empty());
                end = p.offset() + p.len();
                match p {
                    Piece::Bytes(o, b) => out[to_usize(o)..to_usize(o) + b.len()].copy_from_slice(b),
                    Piece::Content(o, r) => {
                        let dst = &mut out[to_usize(o)..to_usize(o + r.len)];
                        f.read_at(r.content, r.offset, dst).unwrap();
                    }
                    Piece::Spilled(o, len) => {
                        let mut b = vec![0u8; to_usize(len)];
                        map.load_spilled(o, &mut b).unwrap();
                        prop_assert_eq!(&b[..], &x[to_usize(o)..to_usize(o + len)]);
                    }
                }
            }
            prop_assert_eq!(out, x);
            map.spill_all().unwrap();
            prop_assert_eq!(map.metadata().data_bytes(), 0);
        }

        /// Any sequence of writes reads back the same through the map as through a sparse
        /// image that copied the bytes, and maps the same ranges.
        #[test]
        fn map_equals_copy(ops in proptest::collection::vec(op(), 1..40)) {
            let f = files();
            let size = 1 << 16;
            let mut plain = SparseImage::new(size);
            let mut map = ImageMap::new(size);
            for o in ops {
                match o {
                    Op::Bytes(at, d) => {
                        let a = plain.write_at(at, &d).is_ok();
                        let b = map.write_at(at, &d).is_ok();
                        prop_assert_eq!(a, b);
                    }
                    Op::Content(at, c, s, l) => {
                        let r = ContentRef { content: c, offset: s, len: l };
                        let a = plain.write_content(at, r, &f).is_ok();
                        if a {
                            prop_assert!(map.write_content(at, r, &f).is_ok());
                        }
                    }
                }
            }
            let mut x = vec![0u8; to_usize(size)];
            let mut y = vec![0u8; to_usize(size)];
            plain.read_at(0, &mut x).unwrap();
            map.reader(&f).read_at(0, &mut y).unwrap();
            prop_assert_eq!(x, y);
            // The plain image maps zero-only content as zero writes, the map as a
            // reference: same ranges either way.
            prop_assert_eq!(plain.mapped_ranges(), map.mapped_ranges());
            let mut end = 0;
            for p in map.pieces() {
                prop_assert!(p.offset() >= end && !p.is_empty());
                end = p.offset() + p.len();
            }
        }
    }
}
