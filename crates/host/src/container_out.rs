//! Output files in a container (Android sparse, seekable zstd, xz), written straight from the
//! [`ImageMap`]: no raw image is ever written or read back.
//!
//! The image is cut into erase-block windows ([`blockwise_container::encode`]). This thread
//! reads each mapped window (metadata from memory, file data from the sources, checked
//! against the scan as the raw writer checks them) and hands it to a pool of packer threads
//! (compression is the expensive part; one thread per core); the packed windows come back in
//! any order and are appended in order, with the container's header, seek table or index
//! kept by the one [`Encoder`]. An unmapped window is never read: it becomes DONT_CARE or a
//! tiny all-zero frame on this thread. With a `.bmap`, a hasher thread takes the windows'
//! raw bytes in order (the map describes the raw image). Temp file, fsync and rename as for
//! the raw output; a cancel or an error removes the temp files.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write as _};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{mpsc, Mutex};

pub use blockwise_container::encode::Summary;
use blockwise_container::encode::{EncodeOptions, Encoder, Format, Packed, Packer, Window};
use blockwise_geometry::{ImageMap, Piece};
use sha2::{Digest, Sha256};

use crate::content::HostContent;
use crate::output::{
    bmap_ranges, bmap_text, check_output_path, check_outputs, create_new, remove_stale_temps,
    temp_path, write_image_file, WriteStats, BMAP_BLOCK,
};
use crate::progress::{Phase, Progress};
use crate::Error;

/// What `build -o` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OutputFormat {
    /// A raw image with holes (`.img`, and any name without a container extension).
    Raw,
    /// Android sparse (`.simg`, `.sparse`).
    AndroidSparse,
    /// Seekable zstd (`.zst`).
    Zstd,
    /// Multi-block xz (`.xz`).
    Xz,
}

impl OutputFormat {
    /// The names `--format` takes.
    pub const CHOICES: &'static str = "raw, simg, zst, xz";

    /// `raw`/`img`, `simg`/`sparse`, `zst`/`zstd`, `xz` (any case).
    #[must_use]
    pub fn parse(name: &str) -> Option<OutputFormat> {
        match name.to_ascii_lowercase().as_str() {
            "raw" | "img" => Some(OutputFormat::Raw),
            "simg" | "sparse" | "android-sparse" => Some(OutputFormat::AndroidSparse),
            "zst" | "zstd" => Some(OutputFormat::Zstd),
            "xz" => Some(OutputFormat::Xz),
            _ => None,
        }
    }

    /// The short name (`raw`, `simg`, `zst`, `xz`): what the JSON's `format` says.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Raw => "raw",
            OutputFormat::AndroidSparse => "simg",
            OutputFormat::Zstd => "zst",
            OutputFormat::Xz => "xz",
        }
    }

    /// The format `explicit` says, or else the one `path`'s name says: `.simg`/`.sparse`,
    /// `.zst`, `.xz`, otherwise raw. A name that promises a container blockwise does not
    /// write (`.gz`, `.bz2`, `.lz4`, `.zip`) is refused rather than filled with a raw
    /// image, unless the format is given.
    pub fn resolve(path: &Path, explicit: Option<OutputFormat>) -> Result<OutputFormat, Error> {
        if let Some(f) = explicit {
            return Ok(f);
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
        Ok(match ext {
            "simg" | "sparse" => OutputFormat::AndroidSparse,
            "zst" | "zstd" => OutputFormat::Zstd,
            "xz" => OutputFormat::Xz,
            "gz" | "bz2" | "lz4" | "zip" | "lzma" | "tgz" => {
                return Err(Error::NotUsable {
                    path: path.to_path_buf(),
                    what: format!(
                        "blockwise does not write .{ext} files; name the output .img (raw), .simg (Android sparse), .img.zst (seekable zstd) or .img.xz, or give the format (--format raw) to write a raw image under this name"
                    ),
                })
            }
            _ => OutputFormat::Raw,
        })
    }

    fn container(self) -> Option<Format> {
        match self {
            OutputFormat::Raw => None,
            OutputFormat::AndroidSparse => Some(Format::AndroidSparse),
            OutputFormat::Zstd => Some(Format::SeekableZstd),
            OutputFormat::Xz => Some(Format::Xz),
        }
    }
}

impl core::fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// How [`write_output`] writes: the format (`None`: by the output's name) and the
/// compression level (zstd 1–22, xz 0–9; `None` for the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputOptions {
    /// The format; `None` picks it from the output's name ([`OutputFormat::resolve`]).
    pub format: Option<OutputFormat>,
    /// The compression level.
    pub level: Option<i32>,
}

/// What [`write_output`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// The format written.
    pub format: OutputFormat,
    /// Metadata and content bytes read into the output.
    pub stats: WriteStats,
    /// Size of the output file.
    pub output_bytes: u64,
    /// Chunks, frames and bytes of a container (`None` for a raw image).
    pub summary: Option<Summary>,
}

/// Writes `img` to `path` in the format `options` asks for (or the name says), and its
/// block map (of the raw image) to `bmap`, atomically. `erase_block_bytes` and
/// `sector_bytes` are the plan's: containers are cut at erase blocks, and an Android sparse
/// block is 4096 bytes or the sector when larger. A raw image goes through
/// [`write_image_file`].
#[expect(
    clippy::too_many_arguments,
    reason = "the plan's two numbers and the outputs"
)]
pub fn write_output(
    img: &ImageMap,
    content: &HostContent,
    erase_block_bytes: u64,
    sector_bytes: u64,
    path: &Path,
    bmap: Option<&Path>,
    options: &OutputOptions,
    progress: &mut dyn Progress,
) -> Result<Written, Error> {
    let format = OutputFormat::resolve(path, options.format)?;
    let Some(container) = format.container() else {
        if let Some(l) = options.level {
            return Err(Error::NotUsable {
                path: path.to_path_buf(),
                what: format!("level {l}: a raw image is not compressed; a level applies to .zst and .xz outputs"),
            });
        }
        let stats = write_image_file(img, content, path, bmap, progress)?;
        return Ok(Written {
            format,
            stats,
            output_bytes: img.size(),
            summary: None,
        });
    };
    let opts = EncodeOptions {
        format: container,
        erase_block_bytes,
        sector_bytes,
        level: options.level,
    };
    let not_usable = |e: blockwise_container::encode::EncodeError| Error::NotUsable {
        path: path.to_path_buf(),
        what: e.to_string(),
    };
    let enc = Encoder::new(img.size(), &opts).map_err(not_usable)?;
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(8);
    let packers = (0..threads)
        .map(|_| enc.packer())
        .collect::<Result<Vec<_>, _>>()
        .map_err(not_usable)?;
    let local = enc.packer().map_err(not_usable)?;
    check_output_path(path)?;
    if let Some(b) = bmap {
        check_output_path(b)?;
    }
    let outputs: Vec<&Path> = std::iter::once(path).chain(bmap).collect();
    check_outputs(&outputs, content)?;
    remove_stale_temps(path);
    if let Some(b) = bmap {
        remove_stale_temps(b);
    }
    let tmp = temp_path(path);
    let bmap_tmp = bmap.map(temp_path);
    let mut created: Vec<std::path::PathBuf> = Vec::new();
    let result = (|| {
        // A new file (O_EXCL): never one another build is writing.
        let f = create_new(&tmp, &mut created)?;
        let mapped = img.mapped_ranges();
        progress.phase(Phase::Writing {
            bytes: mapped.iter().map(|(s, e)| e - s).sum(),
        });
        let ranges = bmap.map(|_| bmap_ranges(img));
        let job = Job {
            img,
            content,
            mapped: &mapped,
            tmp: &tmp,
            bmap_ranges: ranges.as_deref(),
            window: erase_block_bytes,
        };
        let (stats, summary, output_bytes, hashes) = job.run(enc, packers, local, &f, progress)?;
        progress.phase(Phase::Syncing);
        Error::check(progress)?;
        f.sync_all().map_err(|e| Error::write(&tmp, e))?;
        if let (Some(ranges), Some(hashes), Some(bt)) = (&ranges, &hashes, &bmap_tmp) {
            let text = bmap_text(img.size(), ranges, hashes);
            let mut b = create_new(bt, &mut created)?;
            b.write_all(text.as_bytes())
                .map_err(|e| Error::write(bt, e))?;
            b.sync_all().map_err(|e| Error::write(bt, e))?;
        }
        fs::rename(&tmp, path).map_err(|e| Error::write(path, e))?;
        if let (Some(bt), Some(b)) = (&bmap_tmp, bmap) {
            fs::rename(bt, b).map_err(|e| Error::write(b, e))?;
        }
        progress.phase(Phase::Done);
        Ok(Written {
            format,
            stats,
            output_bytes,
            summary: Some(summary),
        })
    })();
    if result.is_err() {
        for p in &created {
            let _ = fs::remove_file(p);
        }
    }
    result
}

/// One container write: what it reads from and where it writes.
struct Job<'a> {
    img: &'a ImageMap,
    content: &'a HostContent,
    mapped: &'a [(u64, u64)],
    tmp: &'a Path,
    bmap_ranges: Option<&'a [(u64, u64)]>,
    /// The erase block (the window).
    window: u64,
}

/// A packed window coming back from a packer thread, with the buffer it was read into.
type Done = (Window, Result<Packed, String>, Vec<u8>);

impl Job<'_> {
    /// Reads, packs (on `packers.len()` threads), orders and appends every window; returns
    /// the bytes read, the summary, the output size and the `.bmap` hashes.
    #[allow(clippy::type_complexity, reason = "one private call site")]
    fn run(
        &self,
        mut enc: Encoder,
        packers: Vec<Packer>,
        mut local: Packer,
        f: &File,
        progress: &mut dyn Progress,
    ) -> Result<(WriteStats, Summary, u64, Option<Vec<[u8; 32]>>), Error> {
        let write_err = |e: std::io::Error| Error::write(self.tmp, e);
        let codec_err = |e: String| Error::write(self.tmp, std::io::Error::other(e));
        let threads = packers.len().max(1);
        let window = self.window.clamp(1, 16 << 20);
        // Windows in flight (read, packed, or waiting to be appended): enough to keep every
        // packer busy with one more read ahead, at most about 64 MiB of erase blocks (the
        // packers' own memory, e.g. an LZMA2 encoder of ~10× the dictionary, comes on top).
        let limit = usize::try_from((64u64 << 20) / window)
            .unwrap_or(usize::MAX)
            .clamp(threads + 1, 2 * threads + 1);
        let mut out = BufWriter::with_capacity(1 << 20, f);
        out.write_all(&enc.header()).map_err(write_err)?;
        let mut reader = Reader::new(self.img, self.content);
        let (job_tx, job_rx) = mpsc::channel::<(Window, Vec<u8>)>();
        let job_rx = Mutex::new(job_rx);
        std::thread::scope(|s| -> Result<_, Error> {
            let (done_tx, done_rx) = mpsc::channel::<Done>();
            let mut workers = Vec::new();
            for mut packer in packers {
                let (rx, tx) = (&job_rx, done_tx.clone());
                workers.push(s.spawn(move || loop {
                    let job = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => break,
                    };
                    let Ok((w, data)) = job else { break };
                    let packed = packer.pack(&w, &data).map_err(|e| e.to_string());
                    if tx.send((w, packed, data)).is_err() {
                        break;
                    }
                }));
            }
            drop(done_tx);
            // The hasher takes the raw windows in order and gives the buffers back.
            let (back_tx, back_rx) = mpsc::channel::<Vec<u8>>();
            let (hash_tx, hasher) = match self.bmap_ranges {
                Some(ranges) => {
                    let (tx, rx) = mpsc::sync_channel::<(u64, Vec<u8>)>(limit);
                    let size = self.img.size();
                    let h = s.spawn(move || {
                        let mut h = RangeHasher::new(ranges, size);
                        for (at, data) in rx {
                            h.feed(at, &data);
                            let _ = back_tx.send(data);
                        }
                        h.finish()
                    });
                    (Some(tx), Some(h))
                }
                None => (None, None),
            };
            let mut pool: Vec<Vec<u8>> = Vec::new();
            let mut pending: BTreeMap<u64, (Window, Packed, Option<Vec<u8>>)> = BTreeMap::new();
            let mut in_flight = 0usize;
            let mut next = 0u64;
            let windows = enc.windows(self.mapped);
            // Appends the windows that are next in order.
            let mut flush = |pending: &mut BTreeMap<u64, (Window, Packed, Option<Vec<u8>>)>,
                             pool: &mut Vec<Vec<u8>>,
                             progress: &mut dyn Progress|
             -> Result<(), Error> {
                while let Some(entry) = pending.first_entry() {
                    if *entry.key() != next {
                        break;
                    }
                    let (w, p, buf) = entry.remove();
                    enc.add(&w, &p).map_err(|e| codec_err(e.to_string()))?;
                    out.write_all(p.bytes()).map_err(write_err)?;
                    next = w.end();
                    if let Some(buf) = buf {
                        match &hash_tx {
                            Some(tx) => tx
                                .send((w.offset, buf))
                                .map_err(|_| codec_err("the bmap hasher stopped".into()))?,
                            None => pool.push(buf),
                        }
                    }
                    progress.advance(w.mapped_bytes);
                    Error::check(progress)?;
                }
                Ok(())
            };
            let take = |done: Done,
                        pending: &mut BTreeMap<u64, (Window, Packed, Option<Vec<u8>>)>|
             -> Result<(), Error> {
                let (w, packed, buf) = done;
                pending.insert(w.offset, (w, packed.map_err(codec_err)?, Some(buf)));
                Ok(())
            };
            let stopped = || codec_err("a packer thread stopped".into());
            for w in windows {
                Error::check(progress)?;
                while in_flight + pending.len() >= limit {
                    let d = done_rx.recv().map_err(|_| stopped())?;
                    in_flight -= 1;
                    take(d, &mut pending)?;
                    flush(&mut pending, &mut pool, progress)?;
                }
                if w.is_unmapped() {
                    let p = local.pack(&w, &[]).map_err(|e| codec_err(e.to_string()))?;
                    pending.insert(w.offset, (w, p, None));
                } else {
                    pool.extend(back_rx.try_iter());
                    let mut buf = pool.pop().unwrap_or_default();
                    reader.read(&w, &mut buf)?;
                    job_tx.send((w, buf)).map_err(|_| stopped())?;
                    in_flight += 1;
                }
                while let Ok(d) = done_rx.try_recv() {
                    in_flight -= 1;
                    take(d, &mut pending)?;
                }
                flush(&mut pending, &mut pool, progress)?;
            }
            drop(job_tx);
            while in_flight > 0 {
                let d = done_rx.recv().map_err(|_| stopped())?;
                in_flight -= 1;
                take(d, &mut pending)?;
                flush(&mut pending, &mut pool, progress)?;
            }
            drop(hash_tx);
            for w in workers {
                w.join().map_err(|_| stopped())?;
            }
            let hashes = match hasher {
                Some(h) => Some(
                    h.join()
                        .map_err(|_| codec_err("the bmap hasher failed".into()))?,
                ),
                None => None,
            };
            let fin = enc.finish().map_err(|e| codec_err(e.to_string()))?;
            out.write_all(&fin.trailer).map_err(write_err)?;
            out.flush().map_err(write_err)?;
            drop(out);
            if !fin.header.is_empty() {
                f.write_all_at(&fin.header, 0).map_err(write_err)?;
            }
            Ok((reader.stats, fin.summary, fin.summary.output_bytes, hashes))
        })
    }
}

/// Reads windows of the image in order: metadata from memory, content from the sources,
/// each source checked against its scan when its piece is done (as the raw writer does).
struct Reader<'a> {
    pieces: std::iter::Peekable<Box<dyn Iterator<Item = Piece<'a>> + 'a>>,
    img: &'a ImageMap,
    content: &'a HostContent,
    open: Option<(u64, File)>,
    stats: WriteStats,
}

impl<'a> Reader<'a> {
    fn new(img: &'a ImageMap, content: &'a HostContent) -> Self {
        let pieces: Box<dyn Iterator<Item = Piece<'a>> + 'a> = Box::new(img.pieces());
        Reader {
            pieces: pieces.peekable(),
            img,
            content,
            open: None,
            stats: WriteStats::default(),
        }
    }

    /// Fills `buf` with window `w` (zeros where nothing is mapped).
    fn read(&mut self, w: &Window, buf: &mut Vec<u8>) -> Result<(), Error> {
        buf.clear();
        buf.resize(usize::try_from(w.len).unwrap_or(0), 0);
        let (ws, we) = (w.offset, w.end());
        while let Some(&p) = self.pieces.peek() {
            let (ps, pe) = (p.offset(), p.offset() + p.len());
            if ps >= we {
                break;
            }
            let (s, e) = (ps.max(ws), pe.min(we));
            if s < e {
                let dst = buf
                    .get_mut(to_usize(s - ws)..to_usize(e - ws))
                    .unwrap_or_default();
                match p {
                    Piece::Bytes(o, data) => {
                        if let Some(src) = data.get(to_usize(s - o)..to_usize(e - o)) {
                            dst.copy_from_slice(src);
                        }
                        self.stats.metadata_bytes += e - s;
                    }
                    Piece::Spilled(..) => {
                        self.img.load_spilled(s, dst).map_err(|e| Error::Io {
                            path: "(metadata kept outside memory)".into(),
                            source: std::io::Error::other(e),
                        })?;
                        self.stats.metadata_bytes += e - s;
                    }
                    Piece::Content(o, r) => {
                        let content = self.content;
                        if let Some(data) = content.inline(r.content) {
                            // Read by the scan: from memory.
                            let src = usize::try_from(r.offset + (s - o))
                                .ok()
                                .and_then(|a| data.get(a..a.checked_add(dst.len())?))
                                .ok_or_else(|| content.shrunk(r.content))?;
                            dst.copy_from_slice(src);
                            self.stats.content_bytes += e - s;
                            if pe > we {
                                break;
                            }
                            self.pieces.next();
                            continue;
                        }
                        let file = self.file(r.content)?;
                        read_exact(file, dst, r.offset + (s - o), r.content, content)?;
                        self.stats.content_bytes += e - s;
                        if pe <= we {
                            if let Some((_, f)) = &self.open {
                                self.content.check(r.content, f)?;
                            }
                        }
                    }
                }
            }
            if pe > we {
                break;
            }
            self.pieces.next();
        }
        Ok(())
    }

    /// The open file of content `id` (opened and checked when it changes).
    fn file(&mut self, id: u64) -> Result<&File, Error> {
        if self.open.as_ref().is_none_or(|(c, _)| *c != id) {
            self.open = Some((id, self.content.open(id)?));
        }
        match &self.open {
            Some((_, f)) => Ok(f),
            None => Err(self.content.shrunk(id)),
        }
    }
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// `pread` of all of `buf` from content `id`: a short file is [`Error::Changed`], a read
/// error names the source (bad input, exit 2).
fn read_exact(
    f: &File,
    buf: &mut [u8],
    at: u64,
    id: u64,
    content: &HostContent,
) -> Result<(), Error> {
    f.read_exact_at(buf, at).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            content.shrunk(id)
        } else {
            Error::io(content.path(id).unwrap_or_else(|| "?".into()), e)
        }
    })
}

/// SHA-256 of each `.bmap` block range, fed the image's bytes in order (every byte of every
/// range exactly once).
struct RangeHasher<'a> {
    ranges: &'a [(u64, u64)],
    size: u64,
    next: usize,
    cur: Sha256,
    out: Vec<[u8; 32]>,
}

impl<'a> RangeHasher<'a> {
    fn new(ranges: &'a [(u64, u64)], size: u64) -> Self {
        RangeHasher {
            ranges,
            size,
            next: 0,
            cur: Sha256::new(),
            out: Vec::with_capacity(ranges.len()),
        }
    }

    fn feed(&mut self, at: u64, data: &[u8]) {
        let end = at + data.len() as u64;
        while let Some(&(b0, b1)) = self.ranges.get(self.next) {
            let (rs, re) = (b0 * BMAP_BLOCK, ((b1 + 1) * BMAP_BLOCK).min(self.size));
            if rs >= end {
                break;
            }
            let (s, e) = (rs.max(at), re.min(end));
            if s < e {
                if let Some(part) = data.get(to_usize(s - at)..to_usize(e - at)) {
                    self.cur.update(part);
                }
            }
            if re > end {
                break;
            }
            self.out.push(self.cur.finalize_reset().into());
            self.next += 1;
        }
    }

    fn finish(self) -> Vec<[u8; 32]> {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::{BlockSink as _, ContentRef};

    /// Cancels at the `n`th `advance`.
    struct CancelAt(u32);

    impl Progress for CancelAt {
        fn advance(&mut self, _n: u64) {
            self.0 = self.0.saturating_sub(1);
        }
        fn cancelled(&mut self) -> bool {
            self.0 == 0
        }
    }

    /// A map with metadata, zeros and a content file spread over several erase blocks.
    fn map(dir: &Path) -> (ImageMap, HostContent) {
        let src = dir.join("src.bin");
        let data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 251) as u8).collect();
        fs::write(&src, &data).unwrap();
        let mut content = HostContent::default();
        let id = content.add(src.clone(), &fs::metadata(&src).unwrap());
        let mut img = ImageMap::new(16 << 20);
        img.write_at(0, &[1; 512]).unwrap();
        img.write_at(1 << 20, &[0; 8192]).unwrap();
        let r = ContentRef {
            content: id,
            offset: 0,
            len: 3 << 20,
        };
        img.write_content((5 << 20) + 100, r, &content).unwrap();
        (img, content)
    }

    #[test]
    fn cancelled_container_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let (img, content) = map(dir.path());
        for name in ["out.simg", "out.img.zst", "out.img.xz"] {
            let out = dir.path().join(name);
            let bmap = dir.path().join(format!("{name}.bmap"));
            let opts = OutputOptions::default();
            let err = write_output(
                &img,
                &content,
                1 << 20,
                512,
                &out,
                Some(&bmap),
                &opts,
                &mut CancelAt(2),
            )
            .unwrap_err();
            assert!(matches!(err, Error::Cancelled), "{name}: {err}");
            let left: Vec<_> = fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(left, vec![std::ffi::OsString::from("src.bin")], "{name}");
        }
    }

    /// The `.bmap` beside a container is the raw writer's, hashed from the windows.
    #[test]
    fn container_bmap_is_the_raw_bmap() {
        let dir = tempfile::tempdir().unwrap();
        let (img, content) = map(dir.path());
        let raw_bmap = dir.path().join("raw.bmap");
        write_image_file(
            &img,
            &content,
            &dir.path().join("out.img"),
            Some(&raw_bmap),
            &mut (),
        )
        .unwrap();
        for name in ["out.simg", "out.img.zst"] {
            let bmap = dir.path().join(format!("{name}.bmap"));
            let w = write_output(
                &img,
                &content,
                1 << 20,
                512,
                &dir.path().join(name),
                Some(&bmap),
                &OutputOptions::default(),
                &mut (),
            )
            .unwrap();
            assert_eq!(
                fs::read(&bmap).unwrap(),
                fs::read(&raw_bmap).unwrap(),
                "{name}"
            );
            assert_eq!(w.stats.content_bytes, 3 << 20);
            assert_eq!(
                w.output_bytes,
                fs::metadata(dir.path().join(name)).unwrap().len()
            );
        }
    }

    /// Records the phases and the bytes advanced while writing.
    #[derive(Default)]
    struct Record {
        total: Option<u64>,
        advanced: u64,
        phases: Vec<Phase>,
    }

    impl Progress for Record {
        fn phase(&mut self, phase: Phase) {
            if let Phase::Writing { bytes } = phase {
                self.total = Some(bytes);
            }
            self.phases.push(phase);
        }
        fn advance(&mut self, n: u64) {
            self.advanced += n;
        }
    }

    /// Progress as for the raw build: writing (the mapped bytes, advanced to the end),
    /// syncing, done.
    #[test]
    fn progress_counts_the_mapped_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (img, content) = map(dir.path());
        let mapped: u64 = img.mapped_ranges().iter().map(|(s, e)| e - s).sum();
        for name in ["out.simg", "out.img.zst", "out.img.xz"] {
            let mut p = Record::default();
            write_output(
                &img,
                &content,
                1 << 20,
                512,
                &dir.path().join(name),
                None,
                &OutputOptions::default(),
                &mut p,
            )
            .unwrap();
            assert_eq!(p.total, Some(mapped), "{name}");
            assert_eq!(p.advanced, mapped, "{name}");
            assert_eq!(&p.phases[1..], &[Phase::Syncing, Phase::Done], "{name}");
        }
    }

    /// A source that changed after the scan fails the write (as for the raw output).
    #[test]
    fn changed_source_fails_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (img, content) = map(dir.path());
        fs::write(dir.path().join("src.bin"), b"short").unwrap();
        let out = dir.path().join("out.simg");
        let err = write_output(
            &img,
            &content,
            1 << 20,
            512,
            &out,
            None,
            &OutputOptions::default(),
            &mut (),
        )
        .unwrap_err();
        assert!(matches!(err, Error::Changed { .. }), "{err}");
        assert!(!err.is_write_failure());
        assert!(!out.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn format_from_name() {
        let f = |n: &str| OutputFormat::resolve(Path::new(n), None);
        assert_eq!(f("a.img").unwrap(), OutputFormat::Raw);
        assert_eq!(f("a").unwrap(), OutputFormat::Raw);
        assert_eq!(f("dir/a.SIMG").unwrap(), OutputFormat::AndroidSparse);
        assert_eq!(f("a.img.sparse").unwrap(), OutputFormat::AndroidSparse);
        assert_eq!(f("a.img.zst").unwrap(), OutputFormat::Zstd);
        assert_eq!(f("a.img.xz").unwrap(), OutputFormat::Xz);
        assert!(f("a.img.gz").is_err());
        assert_eq!(
            OutputFormat::resolve(Path::new("a.img.gz"), Some(OutputFormat::Raw)).unwrap(),
            OutputFormat::Raw
        );
        for n in ["raw", "simg", "zst", "xz"] {
            assert_eq!(OutputFormat::parse(n).unwrap().name(), n);
        }
        assert_eq!(OutputFormat::parse("gz"), None);
    }
}
