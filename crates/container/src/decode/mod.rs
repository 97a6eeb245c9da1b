//! Containers decoded as image bytes.
//!
//! Every container is cut into frames, pieces of the image that can be produced without
//! the ones before them: an Android sparse chunk (raw bytes in the file, a fill value, or a
//! hole), a seekable-zstd frame, an xz block (re-framed as a stream of its own, so any xz
//! decoder reads it), a stored zip entry, or, for a plain stream (gzip, bzip2, lz4, a zstd
//! or xz file without an index worth using), one frame that is the whole stream.
//!
//! [`Decoded::read_forward`] reads in ascending offsets, as the writer does: it keeps one
//! decoder open and skips forward inside a frame, jumps to the frame that holds the offset
//! otherwise, and reads holes, fills and raw chunks without a decoder at all.
//! [`Decoded::random_access`] is a [`BlockSource`] for `verify` when every frame is small
//! (≤ [`RANDOM_ACCESS_FRAME`]): reads are served from a bounded cache of decoded windows.
//! Plain streams are verified in rounds instead ([`rounds`]).

mod codec;
pub(crate) mod input;
mod lz4_walk;
pub mod rounds;
mod sparse;
mod xz;
mod zip;
pub(crate) mod zstd_frame;
mod zstd_seekable;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Read;
use std::rc::Rc;

use blockwise_geometry::BlockSource;

pub(crate) use self::codec::Codec;
pub use self::codec::XZ_MEMLIMIT;
use self::input::{read_full, Input, Segment, Segments};
pub use self::sparse::MAGIC as SPARSE_MAGIC;
pub use self::zip::{Entry, ZipDirectory};
use crate::recognise::ContainerKind;
use crate::Error;

/// A decoder for a stream container (`xz`, `gzip`, `zstd`, `bzip2`, `lz4`) over any buffered
/// reader: what a pipe or a fuzzer feeds. `None` for containers that are not streams
/// (Android sparse, zip), which need random access.
pub fn stream_decoder<'r, R: std::io::BufRead + 'r>(
    kind: ContainerKind,
    input: R,
) -> Option<std::io::Result<Box<dyn Read + 'r>>> {
    let codec = match kind {
        ContainerKind::Xz => Codec::Xz,
        ContainerKind::Gzip => Codec::Gzip,
        ContainerKind::Zstd => Codec::Zstd,
        ContainerKind::Bzip2 => Codec::Bzip2,
        ContainerKind::Lz4 | ContainerKind::Lz4Legacy => Codec::Lz4,
        ContainerKind::AndroidSparse | ContainerKind::Zip => return None,
    };
    Some(codec::decoder(codec, input))
}

/// Largest frame [`Decoded::random_access`] accepts: a read anywhere then decodes at most this
/// much. Larger frames (a single-block xz, a plain gzip) are verified in rounds.
pub const RANDOM_ACCESS_FRAME: u64 = 64 << 20;
/// Window of the random-access cache.
const WINDOW: u64 = 64 << 10;
/// Decoded bytes the random-access cache keeps.
const CACHE_BYTES: u64 = 16 << 20;

/// What produces one piece of the image.
#[derive(Clone, Debug)]
pub(crate) enum Piece {
    /// Zeros that need not be written (an Android sparse DONT_CARE chunk, an all-zero frame).
    Hole,
    /// A 32-bit value repeated (Android sparse FILL), little-endian bytes.
    Fill([u8; 4]),
    /// Bytes stored as they are in the input, from `at`.
    Raw {
        /// Offset in the input.
        at: u64,
    },
    /// Bytes decoded by `codec` from `segs`.
    Coded {
        /// The compressed bytes (and, for an xz block, the stream header and index around it).
        segs: Vec<Segment>,
        /// The decoder.
        codec: Codec,
    },
}

/// A piece of the image at `[start, start + len)`.
#[derive(Clone, Debug)]
pub(crate) struct Frame {
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) piece: Piece,
}

impl Frame {
    fn end(&self) -> u64 {
        self.start.saturating_add(self.len)
    }
}

/// The open decoder of one coded frame, at image offset `pos`.
struct Open {
    frame: usize,
    pos: u64,
    reader: Box<dyn Read>,
}

/// Decoded windows kept for random access (least recently used dropped first).
#[derive(Default)]
struct Cache {
    /// Window index → (bytes, empty = all zero; last use).
    windows: BTreeMap<u64, (Vec<u8>, u64)>,
    bytes: u64,
    clock: u64,
}

/// A container's image bytes.
pub struct Decoded<I> {
    input: Rc<Input<I>>,
    kind: ContainerKind,
    frames: Vec<Frame>,
    size: Option<u64>,
    seekable: bool,
    entry: Option<String>,
    open: RefCell<Option<Open>>,
    cache: RefCell<Cache>,
    scratch: RefCell<Vec<u8>>,
    /// A zip entry's CRC-32, checked when the image is read front to back (as `write`
    /// reads it): deflate itself has no checksum.
    crc: Option<u32>,
    /// The running CRC while reads are sequential: (next offset, hasher).
    crc_state: RefCell<Option<(u64, crc32fast::Hasher)>>,
}

impl<I> std::fmt::Debug for Decoded<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoded")
            .field("kind", &self.kind)
            .field("frames", &self.frames.len())
            .field("size", &self.size)
            .field("seekable", &self.seekable)
            .field("entry", &self.entry)
            .finish_non_exhaustive()
    }
}

impl<I: BlockSource + 'static> Decoded<I> {
    /// Opens `src` as a container of `kind` (what [`recognise`](crate::recognise()) said):
    /// reads the chunk map, seek table, xz index or zip directory; plain streams read nothing
    /// yet.
    pub fn open(src: I, kind: ContainerKind) -> Result<Self, Error> {
        let input = Input::new(src);
        let len = input.len();
        let stream = |codec: Codec| Frame {
            start: 0,
            len: u64::MAX,
            piece: Piece::Coded {
                segs: vec![Segment::Range { at: 0, len }],
                codec,
            },
        };
        let mut entry = None;
        let mut crc = None;
        let (frames, size, seekable) = match kind {
            ContainerKind::AndroidSparse => {
                let (frames, size) = sparse::chunk_map(&input)?;
                (frames, Some(size), true)
            }
            ContainerKind::Zstd => match zstd_seekable::seek_table(&input)? {
                Some((frames, size)) => (frames, Some(size), true),
                // A frame's content size is not the stream's (frames may follow): a plain
                // stream's size is learnt by decoding it.
                None => (vec![stream(Codec::Zstd)], None, false),
            },
            ContainerKind::Xz => {
                let (frames, size) = xz::blocks(&input)?;
                let seekable = frames.len() > 1;
                (frames, Some(size), seekable)
            }
            ContainerKind::Gzip => (vec![stream(Codec::Gzip)], None, false),
            ContainerKind::Bzip2 => (vec![stream(Codec::Bzip2)], None, false),
            ContainerKind::Lz4 | ContainerKind::Lz4Legacy => {
                (vec![stream(Codec::Lz4)], None, false)
            }
            ContainerKind::Zip => {
                let dir = ZipDirectory::read(&input)?;
                let chosen = dir.image_entry()?;
                entry = Some(chosen.name.clone());
                crc = Some(chosen.crc32);
                let (frame, seekable) = zip::entry_frame(&input, chosen)?;
                (vec![frame], Some(chosen.size), seekable)
            }
        };
        let mut frames = frames;
        if let (Some(size), [only]) = (size, frames.as_mut_slice()) {
            only.len = size;
        }
        Ok(Decoded {
            input,
            kind,
            frames,
            size,
            seekable,
            entry,
            open: RefCell::new(None),
            cache: RefCell::new(Cache::default()),
            scratch: RefCell::new(Vec::new()),
            crc,
            crc_state: RefCell::new(crc.map(|_| (0, crc32fast::Hasher::new()))),
        })
    }

    /// The container.
    #[must_use]
    pub fn kind(&self) -> ContainerKind {
        self.kind
    }

    /// The image size, when the container says it before decoding (chunk map, seek table, xz
    /// index, zip directory, a zstd frame's content size).
    #[must_use]
    pub fn size(&self) -> Option<u64> {
        self.size
    }

    /// Whether any part of the image can be decoded without the parts before it.
    #[must_use]
    pub fn seekable(&self) -> bool {
        self.seekable
    }

    /// The zip entry decoded, for a zip.
    #[must_use]
    pub fn entry(&self) -> Option<&str> {
        self.entry.as_deref()
    }

    /// Bytes of the container read so far.
    #[must_use]
    pub fn bytes_read(&self) -> u64 {
        self.input.bytes_read()
    }

    /// The container's own size in bytes.
    #[must_use]
    pub fn container_len(&self) -> u64 {
        self.input.len()
    }

    /// The container's input.
    #[must_use]
    pub fn input(&self) -> &I {
        self.input.inner()
    }

    /// The ranges `[start, end)` that hold data, when the container knows its holes without
    /// decoding (Android sparse DONT_CARE chunks, all-zero zstd frames after
    /// [`find_zero_frames`](Self::find_zero_frames)); `None` for containers that do not.
    #[must_use]
    pub fn mapped(&self) -> Option<Vec<(u64, u64)>> {
        let size = self.size?;
        if !self.seekable {
            return None;
        }
        let mut out: Vec<(u64, u64)> = Vec::new();
        for f in &self.frames {
            if matches!(f.piece, Piece::Hole) || f.len == 0 {
                continue;
            }
            let end = f.end().min(size);
            match out.last_mut() {
                Some(last) if last.1 == f.start => last.1 = end,
                _ => out.push((f.start, end)),
            }
        }
        Some(out)
    }

    /// Marks all-zero frames of a seekable zstd as holes, from their block headers (RLE
    /// blocks of zero bytes; frames of at most 64 KiB of compressed data are read, never
    /// decoded). Reads a few bytes per small frame; the writer calls it, `verify` does not.
    pub fn find_zero_frames(&mut self) -> Result<(), Error> {
        if self.kind != ContainerKind::Zstd || !self.seekable {
            return Ok(());
        }
        for f in &mut self.frames {
            let Piece::Coded { segs, .. } = &f.piece else {
                continue;
            };
            let [Segment::Range { at, len }] = segs.as_slice() else {
                continue;
            };
            if *len > 64 << 10 || f.len == 0 {
                continue;
            }
            let bytes = self
                .input
                .read_clamped(*at, usize::try_from(*len).unwrap_or(0))?;
            if zstd_seekable::frame_is_zero(&bytes, f.len) {
                f.piece = Piece::Hole;
            }
        }
        Ok(())
    }

    /// The largest frame: what one random read may have to decode.
    #[must_use]
    pub fn largest_frame(&self) -> u64 {
        self.frames
            .iter()
            .filter(|f| matches!(f.piece, Piece::Coded { .. }))
            .map(|f| f.len)
            .max()
            .unwrap_or(0)
    }

    /// A [`BlockSource`] over the image with a bounded cache, when the size is known and every
    /// frame is at most [`RANDOM_ACCESS_FRAME`].
    #[must_use]
    pub fn random_access(&self) -> Option<RandomAccess<'_, I>> {
        let size = self.size?;
        (self.largest_frame() <= RANDOM_ACCESS_FRAME).then_some(RandomAccess { d: self, size })
    }

    fn frame_at(&self, off: u64) -> Option<usize> {
        let i = self.frames.partition_point(|f| f.start <= off);
        let i = i.checked_sub(1)?;
        let f = self.frames.get(i)?;
        (off < f.end()).then_some(i)
    }

    /// Fills `buf` from `offset`, reading in ascending order as cheaply as the container
    /// allows; returns the bytes read, fewer than `buf.len()` only at the end of the image.
    /// Reading backwards works but may decode a frame (or a whole stream) again. A zip
    /// entry read from its first byte to its last without a gap has its CRC-32 checked: a
    /// mismatch fails the last read.
    pub fn read_forward(&self, offset: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let done = self.read_pieces(offset, buf)?;
        let Some(want) = self.crc else {
            return Ok(done);
        };
        let mut state = self.crc_state.borrow_mut();
        let sequential = state.as_ref().is_some_and(|(next, _)| *next == offset);
        if !sequential {
            *state = None;
            return Ok(done);
        }
        if let Some((next, h)) = state.as_mut() {
            h.update(buf.get(..done).unwrap_or_default());
            *next = next.saturating_add(u64::try_from(done).unwrap_or(0));
            if self.size.is_some_and(|s| *next >= s) {
                let got = h.clone().finalize();
                *state = None;
                if got != want {
                    return Err(Error::corrupt(
                        "zip",
                        format!(
                            "the CRC-32 of \"{}\" is {got:08x}, its directory says {want:08x}: the archive is damaged",
                            crate::escape(self.entry.as_deref().unwrap_or_default())
                        ),
                    ));
                }
            }
        }
        Ok(done)
    }

    fn read_pieces(&self, offset: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let mut done = 0usize;
        while done < buf.len() {
            let off = offset.saturating_add(u64::try_from(done).unwrap_or(u64::MAX));
            if self.size.is_some_and(|s| off >= s) {
                break;
            }
            let Some(fi) = self.frame_at(off) else {
                // Frames cover the image; an offset in none is past the end.
                break;
            };
            let Some(frame) = self.frames.get(fi) else {
                break;
            };
            let within = off.saturating_sub(frame.start);
            let want = usize::try_from(frame.end().saturating_sub(off))
                .unwrap_or(usize::MAX)
                .min(buf.len().saturating_sub(done));
            let dst = done
                .checked_add(want)
                .and_then(|end| buf.get_mut(done..end))
                .unwrap_or_default();
            let got = match &frame.piece {
                Piece::Hole => {
                    dst.fill(0);
                    want
                }
                Piece::Fill(v) => {
                    let mut k = usize::try_from(within % 4).unwrap_or(0);
                    for b in dst.iter_mut() {
                        *b = v.get(k).copied().unwrap_or(0);
                        k = (k.saturating_add(1)) % 4;
                    }
                    want
                }
                Piece::Raw { at } => {
                    self.input.read_at(at.saturating_add(within), dst)?;
                    want
                }
                Piece::Coded { .. } => self.read_coded(fi, off, dst)?,
            };
            done = done.saturating_add(got);
            if got < want {
                if frame.len != u64::MAX {
                    return Err(Error::Truncated {
                        format: self.kind.name(),
                        at: off.saturating_add(u64::try_from(got).unwrap_or(0)),
                        expected: self.size.unwrap_or(frame.end()),
                    });
                }
                break;
            }
        }
        Ok(done)
    }

    /// Reads `dst` at `off` from coded frame `fi`, reusing the open decoder when it is at or
    /// before `off` in that frame.
    fn read_coded(&self, fi: usize, off: u64, dst: &mut [u8]) -> Result<usize, Error> {
        let mut open = self.open.borrow_mut();
        let reusable = open.as_ref().is_some_and(|o| o.frame == fi && o.pos <= off);
        if !reusable {
            *open = Some(self.open_frame(fi)?);
        }
        let Some(o) = open.as_mut() else {
            return Ok(0);
        };
        let format = self.kind.name();
        let mut scratch = self.scratch.borrow_mut();
        // Skip forward; each round consumes decoded bytes or ends.
        while o.pos < off {
            let n = usize::try_from(off.saturating_sub(o.pos))
                .unwrap_or(usize::MAX)
                .min(1 << 20);
            if scratch.len() < n {
                scratch.resize(n, 0);
            }
            let got = read_full(&mut o.reader, scratch.get_mut(..n).unwrap_or_default())
                .map_err(|e| Error::from_io(format, e))?;
            o.pos = o.pos.saturating_add(u64::try_from(got).unwrap_or(0));
            if got < n {
                *open = None;
                return Ok(0);
            }
        }
        let got = read_full(&mut o.reader, dst).map_err(|e| Error::from_io(format, e))?;
        o.pos = o.pos.saturating_add(u64::try_from(got).unwrap_or(0));
        Ok(got)
    }

    fn open_frame(&self, fi: usize) -> Result<Open, Error> {
        let frame = self
            .frames
            .get(fi)
            .ok_or_else(|| Error::corrupt(self.kind.name(), "frame index"))?;
        let Piece::Coded { segs, codec } = &frame.piece else {
            return Err(Error::corrupt(self.kind.name(), "not a coded frame"));
        };
        let r = Segments::new(self.input.clone(), segs.clone());
        let reader = codec::decoder(*codec, r).map_err(|e| Error::from_io(codec.name(), e))?;
        Ok(Open {
            frame: fi,
            pos: frame.start,
            reader,
        })
    }

    /// Drops the open decoder (the next read starts its frame again).
    pub fn rewind(&self) {
        *self.open.borrow_mut() = None;
    }
}

/// Random access to a [`Decoded`] image with a bounded cache of decoded windows: what
/// `verify` reads when every frame is small.
pub struct RandomAccess<'d, I> {
    d: &'d Decoded<I>,
    size: u64,
}

impl<I> std::fmt::Debug for RandomAccess<'_, I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RandomAccess")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl<I: BlockSource + 'static> RandomAccess<'_, I> {
    /// The decoded window `w`, from the cache or decoded now.
    fn window(&self, w: u64) -> Result<Vec<u8>, Error> {
        {
            let mut c = self.d.cache.borrow_mut();
            c.clock = c.clock.saturating_add(1);
            let now = c.clock;
            if let Some((bytes, used)) = c.windows.get_mut(&w) {
                *used = now;
                return Ok(bytes.clone());
            }
        }
        let start = w.saturating_mul(WINDOW);
        let n = usize::try_from(self.size.saturating_sub(start).min(WINDOW)).unwrap_or(0);
        let mut bytes = vec![0u8; n];
        let got = self.d.read_forward(start, &mut bytes)?;
        if got < n {
            return Err(Error::Truncated {
                format: self.d.kind.name(),
                at: start.saturating_add(u64::try_from(got).unwrap_or(0)),
                expected: self.size,
            });
        }
        let keep = if bytes.iter().all(|&b| b == 0) {
            Vec::new()
        } else {
            bytes.clone()
        };
        let mut c = self.d.cache.borrow_mut();
        c.bytes = c
            .bytes
            .saturating_add(u64::try_from(keep.len()).unwrap_or(0));
        let now = c.clock;
        c.windows.insert(w, (keep, now));
        // Each round removes one window.
        while c.bytes > CACHE_BYTES {
            let Some((&oldest, _)) = c.windows.iter().min_by_key(|(_, (_, used))| *used) else {
                break;
            };
            if let Some((gone, _)) = c.windows.remove(&oldest) {
                c.bytes = c
                    .bytes
                    .saturating_sub(u64::try_from(gone.len()).unwrap_or(0));
            }
        }
        Ok(bytes)
    }
}

impl<I: BlockSource + 'static> BlockSource for RandomAccess<'_, I> {
    type Error = Error;

    fn len(&self) -> u64 {
        self.size
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Error> {
        let len = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= self.size)
            .ok_or_else(|| Error::Limit {
                what: format!(
                    "read of {len} bytes at {offset} is past the end of the {}-byte image",
                    self.size
                ),
            })?;
        let mut pos = offset;
        // Each round fills at least one byte (windows are never empty inside the image).
        while pos < end {
            let w = pos / WINDOW;
            let wstart = w.saturating_mul(WINDOW);
            let bytes = self.window(w)?;
            let from = usize::try_from(pos.saturating_sub(wstart)).unwrap_or(usize::MAX);
            let into = usize::try_from(pos.saturating_sub(offset)).unwrap_or(usize::MAX);
            let n = usize::try_from(
                end.saturating_sub(pos)
                    .min(WINDOW.saturating_sub(pos.saturating_sub(wstart))),
            )
            .unwrap_or(0);
            let dst = into
                .checked_add(n)
                .and_then(|e| buf.get_mut(into..e))
                .unwrap_or_default();
            if bytes.is_empty() {
                dst.fill(0);
            } else {
                let src = from
                    .checked_add(n)
                    .and_then(|e| bytes.get(from..e))
                    .unwrap_or_default();
                if src.len() != dst.len() {
                    return Err(Error::corrupt(self.d.kind.name(), "window bounds"));
                }
                dst.copy_from_slice(src);
            }
            if n == 0 {
                break;
            }
            pos = pos.saturating_add(u64::try_from(n).unwrap_or(0));
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects,
    clippy::as_conversions,
    clippy::panic,
    reason = "tests"
)]
mod tests;
