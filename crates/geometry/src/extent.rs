//! The image as an extent map: metadata bytes held in memory plus references to file content
//! that stays where it is until the output is written.
//!
//! The FAT and ext4 writers place file data with [`BlockSink::write_content`]. An
//! [`ImageMap`] records a [`ContentRef`] (content id, offset, length) there instead of the
//! bytes, so building an image costs memory for its metadata (FATs, bitmaps, inode tables,
//! directories) and a few dozen bytes per file, whatever the files weigh. The host resolves
//! the ids to files when it writes the output ([`ImageMap::pieces`]); anything else can read
//! the image through [`ImageMap::reader`].

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

/// One piece of an [`ImageMap`], in offset order: bytes held in memory, or a reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Metadata bytes at this offset.
    Bytes(u64, &'a [u8]),
    /// Content placed at this offset.
    Content(u64, ContentRef),
}

impl Piece<'_> {
    /// Where the piece starts in the image.
    #[must_use]
    pub fn offset(&self) -> u64 {
        match *self {
            Piece::Bytes(o, _) | Piece::Content(o, _) => o,
        }
    }

    /// Its length in bytes.
    #[must_use]
    pub fn len(&self) -> u64 {
        match *self {
            Piece::Bytes(_, b) => b.len() as u64,
            Piece::Content(_, r) => r.len,
        }
    }

    /// True for an empty piece (never produced by [`ImageMap::pieces`]).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A disk image as metadata bytes (a [`SparseImage`]) plus [`ContentRef`]s. The two never
/// overlap: a later write replaces whatever an earlier one put in its range.
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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageMap {
    meta: SparseImage,
    /// Image offset → reference; disjoint.
    refs: BTreeMap<u64, ContentRef>,
}

impl ImageMap {
    /// An image of `size` bytes, all hole.
    #[must_use]
    pub fn new(size: u64) -> Self {
        ImageMap {
            meta: SparseImage::new(size),
            refs: BTreeMap::new(),
        }
    }

    /// The image size in bytes.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.meta.size()
    }

    /// The metadata part (bytes held in memory, and ranges written with zeros).
    #[must_use]
    pub fn metadata(&self) -> &SparseImage {
        &self.meta
    }

    /// Bytes held in memory.
    #[must_use]
    pub fn metadata_bytes(&self) -> u64 {
        self.meta.data_bytes()
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

    /// Metadata extents and content references merged in offset order; they never overlap.
    /// Ranges in none of them are holes (zeros).
    pub fn pieces(&self) -> impl Iterator<Item = Piece<'_>> + '_ {
        let mut bytes = self.meta.extents().peekable();
        let mut refs = self.refs().peekable();
        core::iter::from_fn(move || match (bytes.peek(), refs.peek()) {
            (Some(&(bo, _)), Some(&(ro, _))) if bo < ro => {
                bytes.next().map(|(o, b)| Piece::Bytes(o, b))
            }
            (Some(_), Some(_)) | (None, Some(_)) => refs.next().map(|(o, r)| Piece::Content(o, r)),
            (Some(_), None) => bytes.next().map(|(o, b)| Piece::Bytes(o, b)),
            (None, None) => None,
        })
    }

    /// Every range that was written (bytes, zeros or content), merged and sorted. This is
    /// what must reach a device and what a `.bmap` maps.
    #[must_use]
    pub fn mapped_ranges(&self) -> Vec<(u64, u64)> {
        let mut all = self.meta.mapped_ranges();
        all.extend(self.refs.iter().map(|(&o, r)| (o, o + r.len)));
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
}

impl BlockSink for ImageMap {
    type Error = OutOfBounds;
    fn len(&self) -> u64 {
        self.size()
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        let (start, end) = range_check_u64(offset, data.len() as u64, self.size())?;
        self.cut_refs(start, end);
        self.meta.write_at(offset, data)
    }
    fn write_content(
        &mut self,
        offset: u64,
        r: ContentRef,
        _source: &dyn ContentSource,
    ) -> Result<(), crate::PlaceError<OutOfBounds>> {
        let (start, end) =
            range_check_u64(offset, r.len, self.size()).map_err(crate::PlaceError::Sink)?;
        if start == end {
            return Ok(());
        }
        self.cut_refs(start, end);
        self.meta.punch(start, end);
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
}

impl BlockSource for MapReader<'_> {
    type Error = MapReadError;
    fn len(&self) -> u64 {
        self.map.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), MapReadError> {
        let (start, end) = range_check_u64(offset, buf.len() as u64, self.map.size())?;
        self.map.meta.read_at(offset, buf)?;
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

    proptest! {
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
