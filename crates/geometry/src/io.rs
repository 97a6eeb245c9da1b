//! The narrow I/O traits every writer and reader is generic over, and the in-memory
//! [`SparseImage`] that holds a whole disk image as an extent map.

use std::collections::BTreeMap;

use crate::extent::{copy_content, ContentRef, PlaceError};
use crate::tree::ContentSource;

/// Something bytes can be written to at absolute offsets: an image in memory, a file, a device.
///
/// Writers call [`write_at`](BlockSink::write_at) in any order; a sink that needs more
/// (a device opened with `O_DIRECT`) says so through [`block_size`](BlockSink::block_size),
/// and whoever drives it makes the data durable with [`flush`](BlockSink::flush).
pub trait BlockSink {
    /// The backend's own error.
    type Error: core::error::Error + Send + Sync + 'static;
    /// Total length in bytes; writes must stay inside it.
    fn len(&self) -> u64;
    /// Writes `data` at `offset`.
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), Self::Error>;
    /// True when the sink has length 0.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The granularity writes must respect: offsets and lengths that are multiples of it
    /// (and, for direct I/O, buffers aligned to it) go straight through; 1 means any write
    /// is fine. Memory and buffered files are 1; an `O_DIRECT` device is its logical block.
    fn block_size(&self) -> u64 {
        1
    }
    /// Makes everything written so far durable (`fdatasync` for files and devices). In
    /// memory there is nothing to do.
    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Places `r.len` bytes of content `r.content` (from `r.offset` on) at `offset`. A sink
    /// that keeps references ([`ImageMap`](crate::ImageMap)) records `r` and reads nothing;
    /// every other sink gets the bytes, read through `source` in 1 MiB chunks.
    fn write_content(
        &mut self,
        offset: u64,
        r: ContentRef,
        source: &dyn ContentSource,
    ) -> Result<(), PlaceError<Self::Error>> {
        copy_content(self, offset, r, source)
    }
}

/// Something bytes can be read from at absolute offsets.
pub trait BlockSource {
    /// The backend's own error.
    type Error: core::error::Error + Send + Sync + 'static;
    /// Total length in bytes.
    fn len(&self) -> u64;
    /// Fills `buf` from `offset`; reading past the end is an error.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error>;
    /// True when the source has length 0.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An access outside the bounds of an in-memory sink or source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("access of {len} bytes at offset {offset} is outside the {size}-byte image")]
pub struct OutOfBounds {
    /// Offset of the access.
    pub offset: u64,
    /// Length of the access.
    pub len: u64,
    /// Size of the image.
    pub size: u64,
}

pub(crate) fn range_check(offset: u64, len: usize, size: u64) -> Result<(u64, u64), OutOfBounds> {
    range_check_u64(offset, u64::try_from(len).unwrap_or(u64::MAX), size)
}

/// `[offset, offset + len)` inside `[0, size)`, as `(start, end)`.
pub(crate) fn range_check_u64(offset: u64, len: u64, size: u64) -> Result<(u64, u64), OutOfBounds> {
    let err = OutOfBounds { offset, len, size };
    let end = offset.checked_add(len).ok_or(err)?;
    if end > size {
        return Err(err);
    }
    Ok((offset, end))
}

impl BlockSink for Vec<u8> {
    type Error = OutOfBounds;
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        let (start, end) = range_check(offset, data.len(), BlockSink::len(self))?;
        let (start, end) = (to_usize(start), to_usize(end));
        if let Some(dst) = self.get_mut(start..end) {
            dst.copy_from_slice(data);
        }
        Ok(())
    }
}

impl BlockSource for [u8] {
    type Error = OutOfBounds;
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), OutOfBounds> {
        let (start, end) = range_check(offset, buf.len(), BlockSource::len(self))?;
        if let Some(src) = self.get(to_usize(start)..to_usize(end)) {
            buf.copy_from_slice(src);
        }
        Ok(())
    }
}

impl BlockSource for Vec<u8> {
    type Error = OutOfBounds;
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), OutOfBounds> {
        self.as_slice().read_at(offset, buf)
    }
}

impl<T: BlockSource + ?Sized> BlockSource for &T {
    type Error = T::Error;
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        (**self).read_at(offset, buf)
    }
}

/// `(start, end)` ranges sorted, with overlapping and touching ones merged.
pub(crate) fn merge_ranges(mut all: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    all.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(all.len());
    for (s, e) in all {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

pub(crate) fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Granularity at which all-zero writes into holes are dropped (keeps images sparse).
const ZERO_GRAIN: usize = 4096;

/// A disk image held as a map of non-overlapping, non-adjacent data extents; everything
/// else is a hole that reads as zeros. A 64 GiB image holding 20 MiB of data costs about
/// 20 MiB. Writes of all-zero 4 KiB blocks into holes are not stored.
///
/// ```
/// use blockwise_geometry::{BlockSink, BlockSource, SparseImage};
/// let mut img = SparseImage::new(1 << 30);
/// img.write_at(4096, b"hello").unwrap();
/// let mut buf = [0u8; 5];
/// img.read_at(4096, &mut buf).unwrap();
/// assert_eq!(&buf, b"hello");
/// assert_eq!(img.data_bytes(), 5);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseImage {
    size: u64,
    extents: BTreeMap<u64, Vec<u8>>,
    /// The sum of the extents' lengths.
    stored: u64,
    /// Ranges `start → end` that were written with zeros while they were holes: not stored,
    /// but "mapped" (a device writer or a .bmap must still write them, since on a used card
    /// a hole keeps whatever was there before).
    zero_writes: BTreeMap<u64, u64>,
}

impl SparseImage {
    /// An image of `size` bytes, all hole.
    #[must_use]
    pub fn new(size: u64) -> Self {
        SparseImage {
            size,
            extents: BTreeMap::new(),
            stored: 0,
            zero_writes: BTreeMap::new(),
        }
    }

    /// The image size in bytes.
    #[must_use]
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes actually stored (the sum of extent lengths).
    #[must_use]
    pub fn data_bytes(&self) -> u64 {
        self.stored
    }

    /// Removes the stored extents and returns them in offset order; zero writes stay (they
    /// hold no bytes). What an [`ImageMap`](crate::ImageMap) spills.
    pub(crate) fn take_extents(&mut self) -> BTreeMap<u64, Vec<u8>> {
        self.stored = 0;
        core::mem::take(&mut self.extents)
    }

    /// Writes `data` at `offset` storing every byte, zeros included (over bytes kept
    /// elsewhere, which a zero write must replace, not skip). Not range-checked: the caller
    /// does.
    pub(crate) fn write_stored(&mut self, offset: u64, data: &[u8]) {
        self.store(offset, data);
    }

    /// The data extents in offset order: `(offset, bytes)`.
    pub fn extents(&self) -> impl Iterator<Item = (u64, &[u8])> + '_ {
        self.extents.iter().map(|(&o, v)| (o, v.as_slice()))
    }

    /// Every range that was written, data or zeros, merged and sorted: `(start, end)`.
    /// This is what must reach a device; everything else may keep its old contents.
    #[must_use]
    pub fn mapped_ranges(&self) -> Vec<(u64, u64)> {
        merge_ranges(
            self.extents
                .iter()
                .map(|(&o, v)| (o, o + v.len() as u64))
                .chain(self.zero_writes.iter().map(|(&s, &e)| (s, e)))
                .collect(),
        )
    }

    /// Forgets everything written to `[start, end)`: stored bytes and zero writes. The range
    /// reads as zeros and is no longer mapped (an [`ImageMap`](crate::ImageMap) puts a
    /// content reference there).
    pub(crate) fn punch(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let hit: Vec<u64> = self
            .extents
            .range(..end)
            .rev()
            .take_while(|(&o, v)| o + v.as_slice().len() as u64 > start)
            .map(|(&o, _)| o)
            .collect();
        for o in hit {
            let Some(mut v) = self.extents.remove(&o) else {
                continue;
            };
            self.stored -= v.len() as u64;
            let v_end = o + v.len() as u64;
            if v_end > end {
                let right = v.split_off(to_usize(end - o));
                self.stored += right.len() as u64;
                self.extents.insert(end, right);
            }
            if o < start {
                v.truncate(to_usize(start - o));
                self.stored += v.len() as u64;
                self.extents.insert(o, v);
            }
        }
        let hit: Vec<(u64, u64)> = self
            .zero_writes
            .range(..end)
            .rev()
            .take_while(|(_, &e)| e > start)
            .map(|(&s, &e)| (s, e))
            .collect();
        for (s, e) in hit {
            self.zero_writes.remove(&s);
            if s < start {
                self.zero_writes.insert(s, start);
            }
            if e > end {
                self.zero_writes.insert(end, e);
            }
        }
    }

    /// Records `[start, end)` as written with zeros. The ranges stay sorted, disjoint and
    /// non-adjacent (merged on insert), so lookups can stop at the first miss.
    fn note_zero_write(&mut self, start: u64, end: u64) {
        // Fast path: extend the range ending at or after `start` (the sequential case).
        if let Some((_, e)) = self.zero_writes.range_mut(..=start).next_back() {
            if *e >= start {
                if end <= *e {
                    return;
                }
                *e = end;
            }
        }
        let (mut s, mut e) = (start, end);
        let touching: Vec<(u64, u64)> = self
            .zero_writes
            .range(..=end)
            .rev()
            .take_while(|(_, &re)| re >= start)
            .map(|(&rs, &re)| (rs, re))
            .collect();
        for (rs, re) in touching {
            self.zero_writes.remove(&rs);
            s = s.min(rs);
            e = e.max(re);
        }
        self.zero_writes.insert(s, e);
    }

    /// True when no byte of `[offset, end)` is stored.
    fn is_hole(&self, offset: u64, end: u64) -> bool {
        if let Some((&o, v)) = self.extents.range(..end).next_back() {
            if o + v.len() as u64 > offset {
                return false;
            }
        }
        true
    }

    /// Stores `data` at `offset`, merging with overlapping and adjacent extents.
    fn store(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        // Fast path: overwrite inside one extent, or append to the one ending exactly here.
        if let Some((&o, v)) = self.extents.range_mut(..=offset).next_back() {
            let v_end = o + v.len() as u64;
            let next_starts_after = self
                .extents
                .range(offset.saturating_add(1)..)
                .next()
                .is_none_or(|(&n, _)| n > end);
            if let Some((_, v)) = self.extents.range_mut(..=offset).next_back() {
                let rel = to_usize(offset - o);
                if end <= v_end {
                    if let Some(dst) = v.get_mut(rel..rel + data.len()) {
                        dst.copy_from_slice(data);
                    }
                    return;
                }
                if offset <= v_end && next_starts_after {
                    v.truncate(rel);
                    v.extend_from_slice(data);
                    self.stored += end - v_end;
                    return;
                }
            }
        }
        // General path: collect every extent touching [offset, end] and merge.
        let touching: Vec<u64> = self
            .extents
            .range(..=end)
            .rev()
            .take_while(|(&o, v)| o + v.as_slice().len() as u64 >= offset)
            .map(|(&o, _)| o)
            .collect();
        let mut new_start = offset;
        let mut new_end = end;
        for &o in &touching {
            let l = self.extents.get(&o).map_or(0, |v| v.len() as u64);
            new_start = new_start.min(o);
            new_end = new_end.max(o + l);
        }
        let mut merged = vec![0u8; to_usize(new_end - new_start)];
        for o in touching {
            if let Some(v) = self.extents.remove(&o) {
                self.stored -= v.len() as u64;
                let rel = to_usize(o - new_start);
                if let Some(dst) = merged.get_mut(rel..rel + v.len()) {
                    dst.copy_from_slice(&v);
                }
            }
        }
        let rel = to_usize(offset - new_start);
        if let Some(dst) = merged.get_mut(rel..rel + data.len()) {
            dst.copy_from_slice(data);
        }
        self.stored += merged.len() as u64;
        self.extents.insert(new_start, merged);
    }
}

/// True when every byte of `b` is zero. Whole 64-byte blocks are OR-ed together (which the
/// compiler turns into vector instructions, where a byte-wise `all` stops at every byte to
/// test): the zero tails of small files' clusters are most of what a build writes as
/// metadata.
fn all_zero(b: &[u8]) -> bool {
    let mut blocks = b.chunks_exact(64);
    for block in &mut blocks {
        if block.iter().fold(0u8, |acc, &x| acc | x) != 0 {
            return false;
        }
    }
    blocks.remainder().iter().all(|&x| x == 0)
}

impl BlockSink for SparseImage {
    type Error = OutOfBounds;
    fn len(&self) -> u64 {
        self.size
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), OutOfBounds> {
        range_check(offset, data.len(), self.size)?;
        // Split into runs: zero blocks landing in holes are skipped.
        let mut pos = 0usize;
        let mut run_start = 0usize;
        while pos < data.len() {
            let abs = offset + pos as u64;
            let to_grain = ZERO_GRAIN - to_usize(abs % ZERO_GRAIN as u64);
            let chunk_end = (pos + to_grain).min(data.len());
            let chunk = data.get(pos..chunk_end).unwrap_or_default();
            let skip = all_zero(chunk) && self.is_hole(abs, abs + chunk.len() as u64);
            if skip {
                self.note_zero_write(abs, abs + chunk.len() as u64);
                if run_start < pos {
                    let run = data.get(run_start..pos).unwrap_or_default();
                    self.store(offset + run_start as u64, run);
                }
                run_start = chunk_end;
            }
            pos = chunk_end;
        }
        if run_start < data.len() {
            let run = data.get(run_start..).unwrap_or_default();
            self.store(offset + run_start as u64, run);
        }
        Ok(())
    }
}

impl BlockSource for SparseImage {
    type Error = OutOfBounds;
    fn len(&self) -> u64 {
        self.size
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), OutOfBounds> {
        let (start, end) = range_check(offset, buf.len(), self.size)?;
        buf.fill(0);
        let first = self
            .extents
            .range(..=start)
            .next_back()
            .map_or(start, |(&o, _)| o);
        for (&o, v) in self.extents.range(first..end) {
            let v_end = o + v.len() as u64;
            let s = o.max(start);
            let e = v_end.min(end);
            if s >= e {
                continue;
            }
            let src = v.get(to_usize(s - o)..to_usize(e - o)).unwrap_or_default();
            if let Some(dst) = buf.get_mut(to_usize(s - start)..to_usize(e - start)) {
                dst.copy_from_slice(src);
            }
        }
        Ok(())
    }
}

/// A window of `len` bytes at `offset` onto another sink: a partition, seen by its filesystem
/// writer as if it started at 0.
#[derive(Debug)]
pub struct SubSink<'a, S: BlockSink + ?Sized> {
    inner: &'a mut S,
    offset: u64,
    len: u64,
}

/// Errors of a [`SubSink`] or [`SubSource`]: outside the window, or the backend's own.
#[derive(Debug, thiserror::Error)]
pub enum WindowError<E: core::error::Error + 'static> {
    /// The access leaves the window.
    #[error(transparent)]
    OutOfBounds(#[from] OutOfBounds),
    /// The backend failed.
    #[error(transparent)]
    Inner(E),
}

impl<'a, S: BlockSink + ?Sized> SubSink<'a, S> {
    /// A window onto `inner`. The window must lie inside `inner`.
    pub fn new(inner: &'a mut S, offset: u64, len: u64) -> Result<Self, OutOfBounds> {
        range_check(offset, to_usize(len), inner.len())?;
        Ok(SubSink { inner, offset, len })
    }

    /// Where the window starts in the parent.
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

impl<S: BlockSink + ?Sized> BlockSink for SubSink<'_, S> {
    type Error = WindowError<S::Error>;
    fn len(&self) -> u64 {
        self.len
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), Self::Error> {
        range_check(offset, data.len(), self.len)?;
        self.inner
            .write_at(self.offset + offset, data)
            .map_err(WindowError::Inner)
    }
    fn block_size(&self) -> u64 {
        self.inner.block_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.inner.flush().map_err(WindowError::Inner)
    }
    fn write_content(
        &mut self,
        offset: u64,
        r: ContentRef,
        source: &dyn ContentSource,
    ) -> Result<(), PlaceError<Self::Error>> {
        range_check_u64(offset, r.len, self.len)
            .map_err(|e| PlaceError::Sink(WindowError::OutOfBounds(e)))?;
        self.inner
            .write_content(self.offset + offset, r, source)
            .map_err(|e| e.map_sink(WindowError::Inner))
    }
}

/// A read-only window of `len` bytes at `offset` onto another source.
#[derive(Debug, Clone, Copy)]
pub struct SubSource<'a, S: BlockSource + ?Sized> {
    inner: &'a S,
    offset: u64,
    len: u64,
}

impl<'a, S: BlockSource + ?Sized> SubSource<'a, S> {
    /// A window onto `inner`; it must lie inside `inner`.
    pub fn new(inner: &'a S, offset: u64, len: u64) -> Result<Self, OutOfBounds> {
        range_check(offset, to_usize(len), inner.len())?;
        Ok(SubSource { inner, offset, len })
    }
}

impl<S: BlockSource + ?Sized> BlockSource for SubSource<'_, S> {
    type Error = WindowError<S::Error>;
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Self::Error> {
        range_check(offset, buf.len(), self.len)?;
        self.inner
            .read_at(self.offset + offset, buf)
            .map_err(WindowError::Inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn all_zero_sees_a_byte_anywhere() {
        assert!(all_zero(&[]));
        for len in [1usize, 63, 64, 65, 200, 4096] {
            let mut b = vec![0u8; len];
            assert!(all_zero(&b), "{len}");
            for at in [0, len / 2, len - 1] {
                b[at] = 0x80;
                assert!(!all_zero(&b), "{len} {at}");
                b[at] = 0;
            }
        }
    }

    #[test]
    fn zero_writes_into_holes_are_not_stored() {
        let mut img = SparseImage::new(1 << 20);
        img.write_at(0, &[0u8; 65536]).unwrap();
        assert_eq!(img.data_bytes(), 0);
        img.write_at(100, &[1, 2, 3]).unwrap();
        img.write_at(101, &[0]).unwrap();
        let mut b = [9u8; 4];
        img.read_at(99, &mut b).unwrap();
        assert_eq!(b, [0, 1, 0, 3]);
        assert!(img.write_at((1 << 20) - 1, &[1, 2]).is_err());
        assert_eq!(img.mapped_ranges(), vec![(0, 65536)]);
    }

    /// A sink that records flushes and asks for 512-byte writes, to check that windows pass
    /// both through.
    #[derive(Default)]
    struct Strict {
        data: Vec<u8>,
        flushed: bool,
    }

    impl BlockSink for Strict {
        type Error = OutOfBounds;
        fn len(&self) -> u64 {
            1 << 16
        }
        fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), OutOfBounds> {
            let err = OutOfBounds {
                offset,
                len: data.len() as u64,
                size: 1 << 16,
            };
            if offset % 512 != 0 || data.len() % 512 != 0 {
                return Err(err);
            }
            self.data.extend_from_slice(data);
            Ok(())
        }
        fn block_size(&self) -> u64 {
            512
        }
        fn flush(&mut self) -> Result<(), OutOfBounds> {
            self.flushed = true;
            Ok(())
        }
    }

    #[test]
    fn windows_pass_block_size_and_flush_through() {
        let mut dev = Strict::default();
        let mut sub = SubSink::new(&mut dev, 4096, 8192).unwrap();
        assert_eq!(sub.block_size(), 512);
        assert!(sub.write_at(0, &[1; 512]).is_ok());
        assert!(sub.write_at(1, &[1; 512]).is_err());
        sub.flush().unwrap();
        assert!(dev.flushed);
        assert_eq!(dev.data.len(), 512);
        assert_eq!(SparseImage::new(1).block_size(), 1);
    }

    #[test]
    fn subsink_is_a_window() {
        let mut img = SparseImage::new(1 << 20);
        let mut sub = SubSink::new(&mut img, 4096, 8192).unwrap();
        sub.write_at(0, b"x").unwrap();
        assert!(sub.write_at(8192, b"y").is_err());
        let mut b = [0u8; 1];
        img.read_at(4096, &mut b).unwrap();
        assert_eq!(&b, b"x");
    }

    proptest! {
        #[test]
        fn sparse_matches_dense(writes in prop::collection::vec((0u64..20_000, prop::collection::vec(any::<u8>(), 0..6000)), 0..30)) {
            let size = 30_000u64;
            let mut dense = vec![0u8; size as usize];
            let mut sparse = SparseImage::new(size);
            for (off, data) in &writes {
                let r1 = BlockSink::write_at(&mut dense, *off, data);
                let r2 = sparse.write_at(*off, data);
                prop_assert_eq!(r1.is_ok(), r2.is_ok());
            }
            let mut out = vec![0u8; size as usize];
            sparse.read_at(0, &mut out).unwrap();
            prop_assert_eq!(out, dense);
            prop_assert_eq!(sparse.data_bytes(), sparse.extents().map(|(_, v)| v.len() as u64).sum::<u64>());
            // Extents never touch or overlap.
            let mut last_end = None;
            for (o, v) in sparse.extents() {
                if let Some(e) = last_end { prop_assert!(o > e); }
                last_end = Some(o + v.len() as u64);
            }
        }
    }
}
