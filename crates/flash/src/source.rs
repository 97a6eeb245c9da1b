//! What the writer reads: an image file (its data ranges), a compressed image streamed
//! through its decompressor, a built spec (an [`ImageMap`](blockwise_geometry::ImageMap)
//! read through its content), or bytes in memory.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, FileTypeExt};
use std::path::{Path, PathBuf};

use blockwise_container::{
    ContainerKind, Content, OpenError as ContainerOpenError, Opened as Input, Refusal,
};
use blockwise_geometry::BlockSource;

use crate::bmap::{Bmap, Checked};
use crate::input::{ContainerSource, DeviceSource, FileInput, InputKind};
use crate::SourceError;

/// Bytes to write and which ranges of them matter. The writer calls [`Source::read`] with
/// strictly ascending, non-overlapping offsets (so a stream needs no seeking back).
pub trait Source {
    /// The image size, when known before reading (`None`: a stream without a bmap).
    fn size(&self) -> Option<u64>;
    /// The mapped ranges `[start, end)` (sorted, not overlapping); `None`: everything up to
    /// the end of the stream.
    fn ranges(&self) -> Option<Vec<(u64, u64)>>;
    /// Fills `buf` from `offset`; returns the bytes read, fewer than asked only at the end of
    /// the image (the rest of `buf` is then unspecified).
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError>;
    /// Hands over the check of the bytes read (a bmap's range checksums), so that the reader
    /// runs it elsewhere (the writer: on a thread of its own, off the write path); the
    /// source then reads without checking. `None` (the default) when there is none.
    fn take_verifier(&mut self) -> Option<Box<dyn Verify>> {
        None
    }
    /// Whether the image itself says that what lies outside [`Source::ranges`] is free
    /// space, so that a target may keep its old bytes there: a block map (`.bmap`), Android
    /// sparse DONT_CARE chunks, a build's image map. A sparse file's holes and a zstd
    /// stream's all-zero frames only say "zeros": they may be a zeroed table, so the writer
    /// writes them unless the target already reads zeros there. Default: `false`.
    fn holes_are_free(&self) -> bool {
        false
    }
}

/// A check of a [`Source`]'s bytes, fed everything read in ascending offsets (from
/// [`Source::take_verifier`]).
pub trait Verify: Send {
    /// Checks the next bytes read, at `offset`.
    fn update(&mut self, offset: u64, data: &[u8]) -> Result<(), SourceError>;
    /// Everything was read: the whole check must have passed.
    fn finish(&mut self) -> Result<(), SourceError>;
}

impl<S: Source + ?Sized> Source for Box<S> {
    fn size(&self) -> Option<u64> {
        (**self).size()
    }
    fn ranges(&self) -> Option<Vec<(u64, u64)>> {
        (**self).ranges()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError> {
        (**self).read(offset, buf)
    }
    fn take_verifier(&mut self) -> Option<Box<dyn Verify>> {
        (**self).take_verifier()
    }
    fn holes_are_free(&self) -> bool {
        (**self).holes_are_free()
    }
}

/// Bytes in memory, all mapped (tests).
#[derive(Debug, Clone)]
pub struct MemSource {
    data: Vec<u8>,
    ranges: Option<Vec<(u64, u64)>>,
}

impl MemSource {
    /// All of `data` mapped.
    #[must_use]
    pub fn new(data: Vec<u8>) -> Self {
        MemSource { data, ranges: None }
    }
    /// Only `ranges` of `data` mapped.
    #[must_use]
    pub fn with_ranges(data: Vec<u8>, ranges: Vec<(u64, u64)>) -> Self {
        MemSource {
            data,
            ranges: Some(ranges),
        }
    }
}

impl Source for MemSource {
    fn size(&self) -> Option<u64> {
        Some(self.data.len() as u64)
    }
    fn ranges(&self) -> Option<Vec<(u64, u64)>> {
        Some(
            self.ranges
                .clone()
                .unwrap_or_else(|| vec![(0, self.data.len() as u64)]),
        )
    }
    /// `with_ranges` stands for a block map: its holes are free.
    fn holes_are_free(&self) -> bool {
        self.ranges.is_some()
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.data.len());
        let n = buf.len().min(self.data.len() - start);
        if let (Some(d), Some(s)) = (buf.get_mut(..n), self.data.get(start..start + n)) {
            d.copy_from_slice(s);
        }
        Ok(n)
    }
}

/// An uncompressed image file; its mapped ranges are its data ranges (SEEK_DATA/SEEK_HOLE).
#[derive(Debug)]
pub struct ImageFile {
    file: File,
    size: u64,
    ranges: Vec<(u64, u64)>,
}

impl ImageFile {
    /// Opens `path` and finds its data ranges.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let size = file.metadata()?.len();
        ImageFile::from_file(file, size)
    }

    /// `file` of `size` bytes, with its data ranges.
    pub fn from_file(file: File, size: u64) -> io::Result<Self> {
        let ranges = data_ranges(&file, size)?;
        Ok(ImageFile { file, size, ranges })
    }
}

/// The data ranges of `file` by SEEK_DATA/SEEK_HOLE (the whole file where unsupported).
pub fn data_ranges(file: &File, size: u64) -> io::Result<Vec<(u64, u64)>> {
    use rustix::fs::{seek, SeekFrom};
    let mut out = Vec::new();
    let mut pos = 0u64;
    while pos < size {
        let start = match seek(file, SeekFrom::Data(pos)) {
            Ok(s) => s,
            Err(rustix::io::Errno::NXIO) => break,
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::OPNOTSUPP) if pos == 0 => {
                return Ok(vec![(0, size)]);
            }
            Err(e) => return Err(e.into()),
        };
        let end = seek(file, SeekFrom::Hole(start))?.min(size);
        if end <= start {
            break;
        }
        out.push((start, end));
        pos = end;
    }
    Ok(out)
}

impl Source for ImageFile {
    fn size(&self) -> Option<u64> {
        Some(self.size)
    }
    fn ranges(&self) -> Option<Vec<(u64, u64)>> {
        Some(self.ranges.clone())
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError> {
        let want = usize::try_from(self.size.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let dst = buf.get_mut(..want).unwrap_or_default();
        self.file.read_exact_at(dst, offset)?;
        Ok(want)
    }
}

/// A decompressing stream read front to back; skipped ranges are read and dropped.
pub struct Stream {
    reader: Box<dyn Read>,
    pos: u64,
    size: Option<u64>,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("pos", &self.pos)
            .field("size", &self.size)
            .finish()
    }
}

/// A compression format recognised by the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `.xz`
    Xz,
    /// `.gz`
    Gzip,
    /// `.zst`
    Zstd,
    /// `.bz2`
    Bzip2,
}

impl Compression {
    /// The format of `path` by its extension.
    #[must_use]
    pub fn of(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()? {
            "xz" => Some(Compression::Xz),
            "gz" => Some(Compression::Gzip),
            "zst" | "zstd" => Some(Compression::Zstd),
            "bz2" => Some(Compression::Bzip2),
            _ => None,
        }
    }

    /// The format of a file that starts with `head` by its magic bytes (xz `FD 37 7A 58 5A 00`,
    /// gzip `1F 8B 08`, zstd `28 B5 2F FD` or a skippable frame, bzip2 `BZh1`..`BZh9`); `None`
    /// for anything else, including a `head` too short to tell.
    #[must_use]
    pub fn sniff(head: &[u8]) -> Option<Self> {
        match head {
            [0xfd, b'7', b'z', b'X', b'Z', 0, ..] => Some(Compression::Xz),
            [0x1f, 0x8b, 0x08, ..] => Some(Compression::Gzip),
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Some(Compression::Zstd),
            [0x50..=0x5f, 0x2a, 0x4d, 0x18, ..] => Some(Compression::Zstd),
            [b'B', b'Z', b'h', b'1'..=b'9', ..] => Some(Compression::Bzip2),
            _ => None,
        }
    }

    /// The format of `path` whose first bytes are `head`: the magic bytes win over the name
    /// (an `.img` that is really xz is decompressed; a `.gz` that is not gzip fails in the
    /// decoder, naming the file).
    #[must_use]
    pub fn detect(path: &Path, head: &[u8]) -> Option<Self> {
        Compression::sniff(head).or_else(|| Compression::of(path))
    }

    /// The name used in messages.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Compression::Xz => "xz",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Bzip2 => "bzip2",
        }
    }
}

impl Compression {
    fn container(self) -> ContainerKind {
        match self {
            Compression::Xz => ContainerKind::Xz,
            Compression::Gzip => ContainerKind::Gzip,
            Compression::Zstd => ContainerKind::Zstd,
            Compression::Bzip2 => ContainerKind::Bzip2,
        }
    }
}

impl Stream {
    /// Opens `path` decompressed with `c`; `size` is the uncompressed size when known (from a
    /// bmap), which makes a shorter stream an error.
    pub fn open(path: &Path, c: Compression, size: Option<u64>) -> io::Result<Self> {
        let f = io::BufReader::with_capacity(1 << 20, File::open(path)?);
        Stream::from_reader(f, c, size)
    }

    /// Decompresses `input` (any buffered reader: a file, bytes in memory) with `c`; `size` as
    /// in [`Stream::open`]. Hostile bytes give an I/O error on read, never a panic.
    pub fn from_reader<R: io::BufRead + 'static>(
        input: R,
        c: Compression,
        size: Option<u64>,
    ) -> io::Result<Self> {
        let reader: Box<dyn Read> =
            blockwise_container::decode::stream_decoder(c.container(), input)
                .ok_or_else(|| io::Error::other("not a stream container"))??;
        Ok(Stream {
            reader,
            pos: 0,
            size,
            scratch: Vec::new(),
        })
    }

    /// A stream of image bytes already decoding (`reader`); `size` as in [`Stream::open`].
    #[must_use]
    pub fn from_decoded(reader: Box<dyn Read>, size: Option<u64>) -> Self {
        Stream {
            reader,
            pos: 0,
            size,
            scratch: Vec::new(),
        }
    }

    fn fill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.reader.read(buf.get_mut(n..).unwrap_or_default()) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl Source for Stream {
    fn size(&self) -> Option<u64> {
        self.size
    }
    fn ranges(&self) -> Option<Vec<(u64, u64)>> {
        self.size.map(|s| vec![(0, s)])
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError> {
        if offset < self.pos {
            return Err(io::Error::other("stream read backwards").into());
        }
        while self.pos < offset {
            let skip = usize::try_from(offset - self.pos)
                .unwrap_or(usize::MAX)
                .min(1 << 20);
            let mut scratch = std::mem::take(&mut self.scratch);
            scratch.resize(skip, 0);
            let n = self.fill(scratch.get_mut(..skip).unwrap_or_default())?;
            self.scratch = scratch;
            if n == 0 {
                return self.ended(0);
            }
        }
        let want = match self.size {
            Some(s) => usize::try_from(s.saturating_sub(offset))
                .unwrap_or(usize::MAX)
                .min(buf.len()),
            None => buf.len(),
        };
        let n = self.fill(buf.get_mut(..want).unwrap_or_default())?;
        if n < want {
            return self.ended(n);
        }
        Ok(n)
    }
}

impl Stream {
    fn ended(&self, n: usize) -> Result<usize, SourceError> {
        match self.size {
            Some(expected) => Err(SourceError::Truncated {
                at: self.pos,
                expected,
            }),
            None => Ok(n),
        }
    }
}

/// A built image (any [`BlockSource`], e.g. `ImageMap::reader`) with its mapped ranges.
#[derive(Debug)]
pub struct MapSource<B> {
    source: B,
    ranges: Vec<(u64, u64)>,
}

impl<B: BlockSource> MapSource<B> {
    /// `source` with `ranges` (e.g. `ImageMap::mapped_ranges()`) mapped.
    pub fn new(source: B, ranges: Vec<(u64, u64)>) -> Self {
        MapSource { source, ranges }
    }
}

impl<B: BlockSource> Source for MapSource<B> {
    fn size(&self) -> Option<u64> {
        Some(self.source.len())
    }
    /// The build's map: what it does not hold is free space (the `.bmap` says the same).
    fn holes_are_free(&self) -> bool {
        true
    }
    fn ranges(&self) -> Option<Vec<(u64, u64)>> {
        Some(self.ranges.clone())
    }
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceError> {
        let want = usize::try_from(self.source.len().saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(buf.len());
        self.source
            .read_at(offset, buf.get_mut(..want).unwrap_or_default())
            .map_err(|e| SourceError::Image(e.to_string()))?;
        Ok(want)
    }
}

/// An image file or compressed image opened with its bmap, and what to tell the user.
pub struct Opened {
    /// The source to write.
    pub source: Box<dyn Source>,
    /// Lines to show (the bmap picked up, holes kept, ...).
    pub notes: Vec<String>,
    /// The bmap used, if any.
    pub bmap: Option<PathBuf>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("notes", &self.notes)
            .field("bmap", &self.bmap)
            .finish_non_exhaustive()
    }
}

/// Opening an image source failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The source is a format blockwise names and refuses (tar, qcow2, ..., or bytes that
    /// are no disk image without `raw`).
    #[error("{}: {refusal}", path.display())]
    Refused {
        /// The source.
        path: PathBuf,
        /// What it is and what to do instead.
        refusal: Refusal,
    },
    /// The source is a container that does not decode.
    #[error("{}: {source}", path.display())]
    Decode {
        /// The source.
        path: PathBuf,
        /// Why.
        #[source]
        source: blockwise_container::Error,
    },
    /// The source has no size (a character device, a FIFO, a socket) or is a directory.
    #[error("{}: {what}", path.display())]
    NotImage {
        /// The source.
        path: PathBuf,
        /// What it is.
        what: String,
    },
    /// The image or bmap could not be read.
    #[error("{path}: {source}")]
    Io {
        /// Which file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The bmap is unusable.
    #[error("{path}: {source}")]
    Bmap {
        /// Which bmap.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::BmapError,
    },
    /// The bmap's image size differs from the image file's.
    #[error("{bmap}: the bmap is for a {expected}-byte image, {image} has {actual} bytes")]
    BmapSize {
        /// The bmap.
        bmap: PathBuf,
        /// The image.
        image: PathBuf,
        /// The bmap's size.
        expected: u64,
        /// The file's size.
        actual: u64,
    },
}

/// The bmap next to `image`: `X.img.xz` → `X.img.bmap`, `X.bmap`; `X.img` → `X.img.bmap`,
/// `X.bmap` (bmaptool's conventions).
#[must_use]
pub fn bmap_beside(image: &Path) -> Option<PathBuf> {
    let name = image.file_name()?.to_str()?;
    let mut stems = vec![name.to_string()];
    let mut s = name;
    while let Some((head, _)) = s.rsplit_once('.') {
        stems.push(head.to_string());
        s = head;
    }
    stems
        .iter()
        .skip(usize::from(compressed_name(image)))
        .map(|stem| image.with_file_name(format!("{stem}.bmap")))
        .find(|p| p.is_file())
}

/// Reads and parses the bmap `b`.
fn read_bmap(b: &Path) -> Result<Bmap, OpenError> {
    let io_err = |source| OpenError::Io {
        path: b.to_path_buf(),
        source,
    };
    let f = File::open(b).map_err(io_err)?;
    let mut text = String::new();
    f.take(crate::bmap::MAX_BMAP_BYTES)
        .read_to_string(&mut text)
        .map_err(io_err)?;
    Bmap::parse(&text).map_err(|source| OpenError::Bmap {
        path: b.to_path_buf(),
        source,
    })
}

/// Reads until `buf` is full or `r` ends; the count read.
fn read_upto(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(buf.get_mut(n..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A FIFO or pipe (`curl … | blockwise write /dev/stdin DEV`): accepted only when it carries
/// a compressed stream (xz, gzip, zstd, bzip2, lz4), whose own end marks and checksums say
/// whether it arrived whole; a raw image through a pipe has no size to check and is refused.
/// Opening waits for the pipe's writer, as any reader of a pipe does.
fn open_pipe(
    image: &Path,
    bmap: Option<Bmap>,
    bmap_path: Option<&Path>,
    raw: bool,
) -> Result<Opened, OpenError> {
    let io_err = |source| OpenError::Io {
        path: image.to_path_buf(),
        source,
    };
    let refused = |what: String, hint: &str| OpenError::Refused {
        path: image.to_path_buf(),
        refusal: Refusal {
            what,
            hint: hint.to_string(),
            kind: "pipe",
        },
    };
    let mut f = File::open(image).map_err(io_err)?;
    let mut head = vec![0u8; blockwise_container::recognise::HEAD];
    let got = read_upto(&mut f, &mut head).map_err(io_err)?;
    head.truncate(got);
    let kind = match blockwise_container::recognise::recognise_bytes(&head, &[], u64::MAX) {
        blockwise_container::Format::Container(k)
            if !matches!(k, ContainerKind::Zip | ContainerKind::AndroidSparse) =>
        {
            k
        }
        blockwise_container::Format::Container(k) => {
            return Err(refused(
                format!("{} through a pipe", k.name()),
                "it needs random access: save it to a file first",
            ))
        }
        blockwise_container::Format::Refused(r) => {
            return Err(OpenError::Refused {
                path: image.to_path_buf(),
                refusal: r,
            })
        }
        _ => {
            return Err(refused(
                "a pipe that carries no compressed image".into(),
                "an uncompressed image through a pipe has no size, so a cut one would look whole: save it to a file first, or send it compressed (xz, gzip, zstd)",
            ))
        }
    };
    let compressed = io::Cursor::new(head).chain(io::BufReader::with_capacity(1 << 20, f));
    let mut decoder = blockwise_container::decode::stream_decoder(kind, compressed)
        .ok_or_else(|| io_err(io::Error::other("not a stream container")))?
        .map_err(io_err)?;
    let mut inner = vec![0u8; blockwise_container::recognise::HEAD];
    let n = read_upto(&mut decoder, &mut inner).map_err(|e| OpenError::Decode {
        path: image.to_path_buf(),
        source: blockwise_container::Error::Decoder {
            format: kind.name(),
            source: e,
        },
    })?;
    inner.truncate(n);
    let len = u64::try_from(n).unwrap_or(0);
    let content = match blockwise_container::recognise::recognise_bytes(&inner, &[], len) {
        blockwise_container::Format::Image(k) => Content::Image(k),
        blockwise_container::Format::Unknown(u) => Content::Unknown(u),
        blockwise_container::Format::Refused(r) => {
            return Err(refused(
                format!("{} inside {}", r.what, kind.name()),
                &r.hint,
            ))
        }
        blockwise_container::Format::Container(c) => {
            return Err(refused(
                format!("{} inside {}", c.name(), kind.name()),
                "blockwise decodes one layer: unpack the outer one first",
            ))
        }
    };
    content
        .require_image(raw, Some(kind.name()))
        .map_err(|refusal| OpenError::Refused {
            path: image.to_path_buf(),
            refusal,
        })?;
    let mut notes = vec![format!(
        "{} is a pipe carrying {}: writing the decoded stream",
        image.display(),
        kind.name()
    )];
    let reader: Box<dyn Read> = Box::new(io::Cursor::new(inner).chain(decoder));
    let source: Box<dyn Source> = match bmap {
        Some(bm) => {
            let size = bm.image_size;
            Box::new(Checked::new(Stream::from_decoded(reader, Some(size)), bm))
        }
        None => {
            notes.push(
                "no block map: the whole decompressed image is written, zeros included".into(),
            );
            Box::new(Stream::from_decoded(reader, None))
        }
    };
    Ok(Opened {
        source,
        notes,
        bmap: bmap_path.map(Path::to_path_buf),
    })
}

/// Compression extensions: `X.img.xz`'s bmap is `X.img.bmap`.
fn compressed_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "xz" | "gz" | "zst" | "zstd" | "bz2" | "lz4" | "zip"))
}

/// Opens what `write` writes from `image`, deciding by its bytes alone
/// ([`blockwise_container::open`]): a disk image or filesystem as it is (its data ranges), a
/// block device as a raw image of its size, a container decoded (xz, gzip, zstd, bzip2, lz4,
/// zip, Android sparse, whose DONT_CARE chunks and all-zero seekable-zstd frames are holes),
/// with `bmap` or the one beside it. Refused, before anything is written: formats that hold
/// an image but cannot be written as they are (tar, qcow2, VMDK, VHD, ... — named, with a
/// hint), sources without a size (character devices, FIFOs, sockets), and bytes that are no
/// disk image unless `raw`.
pub fn open_image(image: &Path, bmap: Option<&Path>, raw: bool) -> Result<Opened, OpenError> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| OpenError::Io { path, source }
    };
    let mut notes = Vec::new();
    let is_pipe = std::fs::metadata(image)
        .map(|m| m.file_type().is_fifo())
        .map_err(io_err(image))?;
    if is_pipe {
        let parsed = match bmap {
            Some(b) => Some(read_bmap(b)?),
            None => None,
        };
        return open_pipe(image, parsed, bmap, raw);
    }
    let input = FileInput::open(image).map_err(|e| {
        if e.kind() == io::ErrorKind::InvalidInput {
            OpenError::NotImage {
                path: image.to_path_buf(),
                what: e.to_string(),
            }
        } else {
            OpenError::Io {
                path: image.to_path_buf(),
                source: e,
            }
        }
    })?;
    let kind = input.kind();
    let bmap_path = match bmap {
        Some(b) => Some(b.to_path_buf()),
        None if kind == InputKind::BlockDevice => None,
        None => {
            let found = bmap_beside(image);
            if let Some(b) = &found {
                notes.push(format!(
                    "using the block map {} found beside the image",
                    b.display()
                ));
            }
            found
        }
    };
    let parsed = match &bmap_path {
        Some(b) => Some(read_bmap(b)?),
        None => None,
    };
    let refused = |refusal: Refusal| OpenError::Refused {
        path: image.to_path_buf(),
        refusal,
    };
    let opened = blockwise_container::open(input).map_err(|e| match e {
        ContainerOpenError::Refused(r) => refused(r),
        ContainerOpenError::Decode(source) => OpenError::Decode {
            path: image.to_path_buf(),
            source,
        },
        other => OpenError::Decode {
            path: image.to_path_buf(),
            source: blockwise_container::Error::Input(Box::new(other)),
        },
    })?;
    let container = match &opened {
        Input::Container { decoded, .. } => Some(decoded.kind().name()),
        Input::Plain { .. } => None,
    };
    opened
        .content()
        .require_image(raw, container)
        .map_err(refused)?;
    if let Content::Unknown(u) = opened.content() {
        notes.push(format!(
            "--raw: written byte for byte although it is no disk image blockwise knows ({})",
            u.looks_like
        ));
    }
    let bmap_size = |actual: u64, bm: &Bmap| {
        if actual == bm.image_size {
            Ok(())
        } else {
            Err(OpenError::BmapSize {
                bmap: bmap_path.clone().unwrap_or_default(),
                image: image.to_path_buf(),
                expected: bm.image_size,
                actual,
            })
        }
    };
    let source: Box<dyn Source> = match opened {
        Input::Plain { src, .. } if src.kind() == InputKind::BlockDevice => {
            let size = src.len();
            let dev = DeviceSource::open(image, size).map_err(io_err(image))?;
            notes.push(format!(
                "{} is a block device: copying all {} of it{}",
                image.display(),
                blockwise_geometry::format_size(size),
                if dev.is_direct() {
                    " (O_DIRECT reads)"
                } else {
                    ""
                }
            ));
            match parsed {
                Some(bm) => {
                    bmap_size(size, &bm)?;
                    Box::new(Checked::new(dev, bm))
                }
                None => Box::new(dev),
            }
        }
        Input::Plain { src, .. } => {
            let size = src.len();
            let file = src.file().try_clone().map_err(io_err(image))?;
            let f = ImageFile::from_file(file, size).map_err(io_err(image))?;
            match parsed {
                Some(bm) => {
                    bmap_size(size, &bm)?;
                    Box::new(Checked::new(f, bm))
                }
                None => Box::new(f),
            }
        }
        Input::Container { mut decoded, .. } => {
            let ck = decoded.kind();
            decoded
                .find_zero_frames()
                .map_err(|source| OpenError::Decode {
                    path: image.to_path_buf(),
                    source,
                })?;
            let by_name = Compression::of(image).map(Compression::container) == Some(ck)
                || (compressed_name(image) && ck != ContainerKind::AndroidSparse);
            if !by_name {
                notes.push(format!(
                    "{} is {} (by its first bytes): writing the decoded image",
                    image.display(),
                    ck.name()
                ));
            }
            if let Some(e) = decoded.entry() {
                notes.push(format!(
                    "writing the zip entry \"{}\"",
                    blockwise_container::escape(e)
                ));
            }
            match parsed {
                Some(bm) => {
                    if let Some(size) = decoded.size() {
                        bmap_size(size, &bm)?;
                    }
                    let size = bm.image_size;
                    Box::new(Checked::new(ContainerSource::new(*decoded, Some(size)), bm))
                }
                None => {
                    if decoded.mapped().is_some() {
                        notes.push(if ck == ContainerKind::Zstd {
                            format!(
                                "{}: its all-zero frames are written as zeros on a device (nothing says they are free space; the build's .bmap beside it skips them)",
                                ck.name()
                            )
                        } else {
                            format!(
                                "{}: only its data is written; its DONT_CARE chunks are skipped",
                                ck.name()
                            )
                        });
                    } else {
                        notes.push(
                            "no block map: the whole decompressed image is written, zeros included"
                                .into(),
                        );
                    }
                    Box::new(ContainerSource::new(*decoded, None))
                }
            }
        }
    };
    Ok(Opened {
        source,
        notes,
        bmap: bmap_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn bmap_beside_follows_bmaptool_names() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("os.img.xz");
        assert_eq!(bmap_beside(&img), None);
        std::fs::write(dir.path().join("os.bmap"), "").unwrap();
        assert_eq!(bmap_beside(&img), Some(dir.path().join("os.bmap")));
        std::fs::write(dir.path().join("os.img.bmap"), "").unwrap();
        assert_eq!(bmap_beside(&img), Some(dir.path().join("os.img.bmap")));
        assert_eq!(
            bmap_beside(&dir.path().join("os.img")),
            Some(dir.path().join("os.img.bmap"))
        );
    }

    /// Found by fuzzing (`compressed_sniff`, issue 16): a legacy .lzma header (properties
    /// byte, then a dictionary size of 0xFFFFFFFF) made liblzma allocate 4 GiB before decoding
    /// a byte. The decoder now has a memory limit; the read fails naming it.
    #[test]
    fn r16_xz_huge_dictionary_is_refused_not_allocated() {
        // The legacy .lzma header of the finding (a dictionary size of 0xFFFFFFFF) is not xz:
        // refused before anything is allocated.
        let mut data = vec![0x37u8];
        data.extend([0xff; 116]);
        let mut s = Stream::from_reader(io::Cursor::new(data), Compression::Xz, None).unwrap();
        let mut buf = vec![0u8; 4096];
        assert!(s.read(0, &mut buf).is_err());
        // An xz block header asking for a 1 GiB dictionary: refused, saying why.
        let mut enc = xz2::write::XzEncoder::new(Vec::new(), 1);
        enc.write_all(&[7u8; 100_000]).unwrap();
        let mut huge = enc.finish().unwrap();
        assert_eq!(&huge[12..16], &[0x02, 0x00, 0x21, 0x01]);
        huge[16] = 36;
        let crc = crc32c_free_crc32(&huge[12..20]);
        huge[20..24].copy_from_slice(&crc.to_le_bytes());
        let mut s = Stream::from_reader(io::Cursor::new(huge), Compression::Xz, None).unwrap();
        let err = s.read(0, &mut buf).unwrap_err().to_string();
        assert!(
            err.contains("dictionary larger than blockwise allows"),
            "{err}"
        );
        // A real xz -9 stream (64 MiB dictionary) is within the limit.
        let mut enc = xz2::write::XzEncoder::new(Vec::new(), 9);
        enc.write_all(&[7u8; 100_000]).unwrap();
        let xz = enc.finish().unwrap();
        let mut s = Stream::from_reader(io::Cursor::new(xz), Compression::Xz, None).unwrap();
        assert_eq!(s.read(0, &mut buf).unwrap(), 4096);
        assert!(buf.iter().all(|&b| b == 7));
    }

    /// CRC-32 (IEEE), as xz's headers carry it.
    fn crc32c_free_crc32(b: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &x in b {
            crc ^= u32::from(x);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn gzip_stream_skips_forward_and_knows_its_end() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.img.gz");
        let mut enc = flate2::write::GzEncoder::new(
            File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        enc.write_all(&data).unwrap();
        enc.finish().unwrap();
        let mut s = Stream::open(&path, Compression::Gzip, None).unwrap();
        let mut buf = vec![0u8; 4096];
        assert_eq!(s.read(8192, &mut buf).unwrap(), 4096);
        assert_eq!(buf, data[8192..12_288]);
        assert!(s.read(0, &mut buf).is_err(), "backwards");
        assert_eq!(s.read(98_304, &mut buf).unwrap(), 100_000 - 98_304);
        // With a known size, a short stream is an error.
        let mut s = Stream::open(&path, Compression::Gzip, Some(200_000)).unwrap();
        let mut big = vec![0u8; 150_000];
        assert!(matches!(
            s.read(0, &mut big),
            Err(SourceError::Truncated { .. })
        ));
    }

    #[test]
    fn sniff_knows_the_magic_bytes() {
        assert_eq!(
            Compression::sniff(&[0xfd, b'7', b'z', b'X', b'Z', 0, 0]),
            Some(Compression::Xz)
        );
        assert_eq!(
            Compression::sniff(&[0x1f, 0x8b, 8]),
            Some(Compression::Gzip)
        );
        assert_eq!(
            Compression::sniff(&[0x28, 0xb5, 0x2f, 0xfd]),
            Some(Compression::Zstd)
        );
        assert_eq!(
            Compression::sniff(&[0x5e, 0x2a, 0x4d, 0x18]),
            Some(Compression::Zstd)
        );
        assert_eq!(Compression::sniff(b"BZh9"), Some(Compression::Bzip2));
        for other in [&b"BZh0"[..], b"", &[0x1f], &[0xeb, 0x3c, 0x90], &[0u8; 512]] {
            assert_eq!(Compression::sniff(other), None, "{other:?}");
        }
        let img = Path::new("x.img.gz");
        assert_eq!(Compression::detect(img, b"BZh9"), Some(Compression::Bzip2));
        assert_eq!(Compression::detect(img, &[0; 6]), Some(Compression::Gzip));
    }

    #[test]
    fn open_image_decompresses_by_magic_bytes() {
        // An MBR disk (55 AA) compressed with gzip but named .img.
        let mut data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        data[510] = 0x55;
        data[511] = 0xaa;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        let mut enc = flate2::write::GzEncoder::new(
            File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        enc.write_all(&data).unwrap();
        enc.finish().unwrap();
        let mut o = open_image(&path, None, false).unwrap();
        assert!(
            o.notes
                .iter()
                .any(|n| n.contains("is gzip (by its first bytes)")),
            "{:?}",
            o.notes
        );
        let mut buf = vec![0u8; 32_768];
        assert_eq!(o.source.read(0, &mut buf).unwrap(), 20_000);
        assert_eq!(buf[..20_000], data[..]);
        // Zeros under a compressed name are no image: refused, naming what they are.
        let bad = dir.path().join("bad.img.xz");
        std::fs::write(&bad, [0u8; 4096]).unwrap();
        let e = open_image(&bad, None, false).unwrap_err().to_string();
        assert!(e.contains("not a disk image (all zeros"), "{e}");
        // With --raw they are written as they are.
        let mut o = open_image(&bad, None, true).unwrap();
        assert_eq!(o.source.read(0, &mut buf).unwrap(), 4096);
        // A damaged container fails when opened, before anything is written.
        let mut xz = vec![0xfd, b'7', b'z', b'X', b'Z', 0, 0, 4];
        xz.extend([0u8; 100]);
        std::fs::write(&bad, &xz).unwrap();
        assert!(matches!(
            open_image(&bad, None, true),
            Err(OpenError::Decode { .. })
        ));
        // Sources without a size are refused.
        let e = open_image(Path::new("/dev/zero"), None, true).unwrap_err();
        assert!(matches!(e, OpenError::NotImage { .. }), "{e}");
    }

    #[test]
    fn image_file_ranges_are_its_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.img");
        let f = File::create(&path).unwrap();
        f.set_len(64 << 20).unwrap();
        f.write_all_at(&[1u8; 4096], 8 << 20).unwrap();
        f.sync_all().unwrap();
        let img = ImageFile::open(&path).unwrap();
        let r = img.ranges().unwrap();
        // Filesystems without SEEK_DATA report everything as data.
        assert!(
            r == [(8 << 20, (8 << 20) + 4096)] || r == [(0, 64 << 20)],
            "{r:?}"
        );
    }
}
