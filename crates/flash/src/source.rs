//! What the writer reads: an image file (its data ranges), a compressed image streamed
//! through its decompressor, a built spec (an [`ImageMap`](blockwise_geometry::ImageMap)
//! read through its content), or bytes in memory.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use blockwise_geometry::BlockSource;

use crate::bmap::{Bmap, Checked};
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

/// Memory liblzma may take to decompress an xz (or legacy .lzma) image: the dictionary size
/// comes from the file's header, so a hostile or damaged header could otherwise make it
/// allocate 4 GiB before a byte is decoded. `xz -9` needs 65 MiB; xz's largest dictionary
/// (1.5 GiB, only by hand) is refused with an error that says so.
pub const XZ_MEMLIMIT: u64 = 512 << 20;

/// The xz decoder, with liblzma's "memory limit reached" said in the writer's words.
struct XzReader<R>(xz2::bufread::XzDecoder<R>);

impl<R: io::BufRead> Read for XzReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            let memlimit = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<xz2::stream::Error>())
                .is_some_and(|x| matches!(x, xz2::stream::Error::MemLimit));
            if memlimit {
                io::Error::other(format!(
                    "the xz header asks for a dictionary larger than blockwise allows ({}; `xz -9` needs 65 MiB): not decompressed; if the file is genuine, decompress it with `xz -dk` and write the .img",
                    blockwise_geometry::format_size(XZ_MEMLIMIT)
                ))
            } else {
                e
            }
        })
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
        let reader: Box<dyn Read> = match c {
            Compression::Xz => Box::new(XzReader(xz2::bufread::XzDecoder::new_stream(
                input,
                xz2::stream::Stream::new_auto_decoder(XZ_MEMLIMIT, xz2::stream::CONCATENATED)?,
            ))),
            Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(input)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(input)?),
            Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(input)),
        };
        Ok(Stream {
            reader,
            pos: 0,
            size,
            scratch: Vec::new(),
        })
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
        .skip(usize::from(Compression::of(image).is_some()))
        .map(|stem| image.with_file_name(format!("{stem}.bmap")))
        .find(|p| p.is_file())
}

/// Reads up to `buf.len()` bytes from the start of `f`; the count read.
fn read_head(mut f: File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(buf.get_mut(n..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Opens an image file or a compressed image (by its magic bytes, else its name), with
/// `bmap` or the one beside it.
pub fn open_image(image: &Path, bmap: Option<&Path>) -> Result<Opened, OpenError> {
    let io_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| OpenError::Io { path, source }
    };
    let mut notes = Vec::new();
    let bmap_path = match bmap {
        Some(b) => Some(b.to_path_buf()),
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
        Some(b) => {
            let f = File::open(b).map_err(io_err(b))?;
            let mut text = String::new();
            f.take(crate::bmap::MAX_BMAP_BYTES)
                .read_to_string(&mut text)
                .map_err(io_err(b))?;
            Some(Bmap::parse(&text).map_err(|source| OpenError::Bmap {
                path: b.clone(),
                source,
            })?)
        }
        None => None,
    };
    // Sniff the first bytes of regular files only: reading a FIFO or a pipe (`/dev/stdin`)
    // would consume what the stream below needs, so those go by their name.
    let regular = std::fs::metadata(image)
        .map(|m| m.is_file())
        .map_err(io_err(image))?;
    let compression = if regular {
        let mut head = [0u8; 6];
        let got = File::open(image)
            .and_then(|f| read_head(f, &mut head))
            .map_err(io_err(image))?;
        Compression::detect(image, head.get(..got).unwrap_or_default())
    } else {
        Compression::of(image)
    };
    if let Some(c) = compression {
        if Compression::of(image) != Some(c) {
            notes.push(format!(
                "{} is {}-compressed (by its first bytes): writing it decompressed",
                image.display(),
                c.name()
            ));
        }
    }
    let source: Box<dyn Source> = match (compression, parsed) {
        (Some(c), Some(bm)) => {
            let s = Stream::open(image, c, Some(bm.image_size)).map_err(io_err(image))?;
            Box::new(Checked::new(s, bm))
        }
        (Some(c), None) => {
            notes.push(
                "no block map: the whole decompressed image is written, zeros included".into(),
            );
            Box::new(Stream::open(image, c, None).map_err(io_err(image))?)
        }
        (None, Some(bm)) => {
            let f = ImageFile::open(image).map_err(io_err(image))?;
            if f.size != bm.image_size {
                return Err(OpenError::BmapSize {
                    bmap: bmap_path.clone().unwrap_or_default(),
                    image: image.to_path_buf(),
                    expected: bm.image_size,
                    actual: f.size,
                });
            }
            Box::new(Checked::new(f, bm))
        }
        (None, None) => Box::new(ImageFile::open(image).map_err(io_err(image))?),
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
        let mut data = vec![0x37u8];
        data.extend([0xff; 116]);
        let mut s = Stream::from_reader(io::Cursor::new(data), Compression::Xz, None).unwrap();
        let mut buf = vec![0u8; 4096];
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
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        let mut enc = flate2::write::GzEncoder::new(
            File::create(&path).unwrap(),
            flate2::Compression::fast(),
        );
        enc.write_all(&data).unwrap();
        enc.finish().unwrap();
        let mut o = open_image(&path, None).unwrap();
        assert!(
            o.notes.iter().any(|n| n.contains("gzip-compressed")),
            "{:?}",
            o.notes
        );
        let mut buf = vec![0u8; 32_768];
        assert_eq!(o.source.read(0, &mut buf).unwrap(), 20_000);
        assert_eq!(buf[..20_000], data[..]);
        // Garbage under a compressed name fails in the decoder, not with a panic.
        let bad = dir.path().join("bad.img.xz");
        std::fs::write(&bad, [0u8; 4096]).unwrap();
        let mut o = open_image(&bad, None).unwrap();
        assert!(o.source.read(0, &mut buf).is_err());
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
