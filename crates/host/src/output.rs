//! Output files: an [`ImageMap`] written atomically (temp file, fsync, rename) with its holes
//! kept, file data copied by the kernel, and a bmaptool block map hashed while it is written.

use std::fs::{self, File};
use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use blockwise_geometry::{ContentRef, ImageMap, Piece};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::content::HostContent;
use crate::progress::{Phase, Progress};
use crate::Error;

/// bmap block size.
pub(crate) const BMAP_BLOCK: u64 = 4096;
/// Chunk of the read/write fallback copy and of the bmap hasher.
const CHUNK: u64 = 1 << 20;

/// What [`write_image_file`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Metadata bytes written from memory.
    pub metadata_bytes: u64,
    /// File content bytes copied.
    pub content_bytes: u64,
    /// Of those, bytes `copy_file_range` copied (in the kernel; shared blocks on XFS/btrfs
    /// where the offsets allow).
    pub kernel_copied_bytes: u64,
}

/// Writes `img` to `path`, and its block map to `bmap` when given, atomically: both go to
/// temp files next to their targets, are fsynced and then renamed. On any error nothing is
/// renamed and the temp files are removed, so `path` and `bmap` are untouched.
///
/// Metadata is written with `pwrite`; file content is copied from `content` with
/// `copy_file_range` (falling back to 1 MiB `pread`/`pwrite` where the kernel refuses). A
/// source that changed since it was scanned is an [`Error::Changed`]. The `.bmap` SHA-256s
/// are computed by a second thread reading back what was written, behind the writer.
pub fn write_image_file(
    img: &ImageMap,
    content: &HostContent,
    path: &Path,
    bmap: Option<&Path>,
    progress: &mut dyn Progress,
) -> Result<WriteStats, Error> {
    check_output_path(path)?;
    if let Some(b) = bmap {
        check_output_path(b)?;
    }
    remove_stale_temps(path);
    if let Some(b) = bmap {
        remove_stale_temps(b);
    }
    let tmp = temp_path(path);
    let bmap_tmp = bmap.map(temp_path);
    let result = (|| {
        // Read and write: the bmap hasher reads back what was written.
        let f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| Error::write(&tmp, e))?;
        f.set_len(img.size()).map_err(|e| Error::write(&tmp, e))?;
        progress.phase(Phase::Writing {
            bytes: img.data_bytes(),
        });
        let (stats, hashes) = match bmap {
            None => (write_pieces(img, content, &f, &tmp, progress, None)?, None),
            Some(_) => {
                let ranges = bmap_ranges(img);
                let (stats, hashes) = std::thread::scope(|s| {
                    let (tx, rx) = mpsc::channel();
                    let (file, list, size) = (&f, &ranges, img.size());
                    let hasher = s.spawn(move || hash_ranges(file, size, list, rx));
                    let stats = write_pieces(img, content, &f, &tmp, progress, Some(&tx));
                    drop(tx);
                    let hashes = hasher.join().unwrap_or_else(|_| {
                        Err(std::io::Error::other("the bmap hasher thread failed"))
                    });
                    (stats, hashes)
                });
                let hashes = hashes.map_err(|e| Error::write(&tmp, e))?;
                (stats?, Some((ranges, hashes)))
            }
        };
        progress.phase(Phase::Syncing);
        Error::check(progress)?;
        f.sync_all().map_err(|e| Error::write(&tmp, e))?;
        if let (Some((ranges, hashes)), Some(bt)) = (hashes, &bmap_tmp) {
            let text = bmap_text(img.size(), &ranges, &hashes);
            let mut b = File::create(bt).map_err(|e| Error::write(bt, e))?;
            b.write_all(text.as_bytes())
                .map_err(|e| Error::write(bt, e))?;
            b.sync_all().map_err(|e| Error::write(bt, e))?;
        }
        fs::rename(&tmp, path).map_err(|e| Error::write(path, e))?;
        if let (Some(bt), Some(b)) = (&bmap_tmp, bmap) {
            fs::rename(bt, b).map_err(|e| Error::write(b, e))?;
        }
        progress.phase(Phase::Done);
        Ok(stats)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
        if let Some(bt) = &bmap_tmp {
            let _ = fs::remove_file(bt);
        }
    }
    result
}

/// Checks that `path` can take an output file: it does not exist yet or is a regular file.
/// A block or character device, FIFO, socket, directory or symlink is refused (renaming over
/// it would replace the node, not write to what it names: `blockwise write` writes devices).
pub fn check_output_path(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::FileTypeExt as _;
    let md = match fs::symlink_metadata(path) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::write(path, e)),
    };
    let ft = md.file_type();
    let what = if ft.is_file() {
        return Ok(());
    } else if ft.is_block_device() || ft.is_char_device() {
        "is a device: build writes image files; to put the image on a device use `blockwise write SPEC DEVICE` (or build a file and write that)"
    } else if ft.is_symlink() {
        "is a symbolic link: building would replace the link, not write where it points; give the real path"
    } else if ft.is_dir() {
        "is a directory: give a file name"
    } else {
        "is a FIFO or socket, not a file: give a file name"
    };
    Err(Error::NotUsable {
        path: path.to_path_buf(),
        what: what.into(),
    })
}

/// The directory and file name of `path` (`.` and `image` when it has none).
fn dir_and_name(path: &Path) -> (&Path, String) {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into());
    (dir, name)
}

/// When process `pid` started (clock ticks since boot, `/proc/PID/stat` field 22), so that
/// a temp file's owner is known to be gone even when its PID was reused.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the
    // last ')'. Field 22 is the 20th after it.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// `.NAME.tmp-PID-START` next to `path`: the owner's PID and start time, so a later build
/// can tell a leftover of a killed build from a build still running.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let (dir, name) = dir_and_name(path);
    dir.join(format!(".{name}.tmp-{}", owner_tag()))
}

/// `PID-START` of this process, for temp file names a later build can judge stale.
pub(crate) fn owner_tag() -> String {
    let pid = std::process::id();
    format!("{pid}-{}", start_time(pid).unwrap_or(0))
}

/// Removes the temp files earlier builds to `path` left when they were killed (their owner
/// process is gone or is another process now). Only exact `.NAME.tmp-PID-START` names are
/// considered, never a wildcard; without `/proc` nothing is removed. Returns what was removed.
pub fn remove_stale_temps(path: &Path) -> Vec<PathBuf> {
    let (dir, name) = dir_and_name(path);
    remove_stale_in(dir, &format!(".{name}.tmp-"), "", 0)
}

/// Removes the regular files in `dir` named `PREFIX PID-START [-N]… SUFFIX` (`extra` more
/// `-N` numbers) whose owner process `PID` with start time `START` is gone. Nothing without
/// `/proc`.
pub(crate) fn remove_stale_in(
    dir: &Path,
    prefix: &str,
    suffix: &str,
    extra: usize,
) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    if start_time(std::process::id()).is_none() {
        return removed;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return removed;
    };
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(tag) = file
            .strip_prefix(prefix)
            .and_then(|t| t.strip_suffix(suffix))
        else {
            continue;
        };
        let parts: Vec<&str> = tag.split('-').collect();
        if parts.len() != 2 + extra
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let (Some(Ok(pid)), Some(Ok(start))) = (
            parts.first().map(|p| p.parse::<u32>()),
            parts.get(1).map(|p| p.parse::<u64>()),
        ) else {
            continue;
        };
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        if is_file && start_time(pid) != Some(start) && fs::remove_file(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

/// Writes every piece in offset order; after each, tells the hasher how far the file is final.
fn write_pieces(
    img: &ImageMap,
    content: &HostContent,
    out: &File,
    out_path: &Path,
    progress: &mut dyn Progress,
    written: Option<&mpsc::Sender<u64>>,
) -> Result<WriteStats, Error> {
    let mut stats = WriteStats::default();
    let mut copier = Copier::default();
    for piece in img.pieces() {
        Error::check(progress)?;
        match piece {
            Piece::Bytes(off, data) => {
                out.write_all_at(data, off)
                    .map_err(|e| Error::write(out_path, e))?;
                stats.metadata_bytes += data.len() as u64;
            }
            Piece::Content(off, r) => {
                let src = content.open(r.content)?;
                let kernel = copier.copy(&src, r, out, off, content, out_path, progress)?;
                content.check(r.content, &src)?;
                stats.content_bytes += r.len;
                stats.kernel_copied_bytes += kernel;
                // Progress for content is reported as it is copied.
                if let Some(tx) = written {
                    let _ = tx.send(off + piece.len());
                }
                continue;
            }
        }
        progress.advance(piece.len());
        if let Some(tx) = written {
            let _ = tx.send(piece.offset() + piece.len());
        }
    }
    Ok(stats)
}

/// Copies content ranges into the output: `copy_file_range` until the kernel refuses once,
/// then `pread`/`pwrite` through one reused buffer. An error `copy_file_range` cannot pin on
/// one side (EIO, EBADF, …) retries that range with `pread`/`pwrite`, which say whether the
/// source (bad input, [`Error::Io`]) or the output ([`Error::Write`]) failed.
#[derive(Default)]
struct Copier {
    fallback: bool,
    buf: Vec<u8>,
}

impl Copier {
    /// Copies `r` from `src` to `out` at `at`; returns the bytes the kernel copied.
    #[allow(clippy::too_many_arguments, reason = "one call site, all plain inputs")]
    fn copy(
        &mut self,
        src: &File,
        r: ContentRef,
        out: &File,
        at: u64,
        content: &HostContent,
        out_path: &Path,
        progress: &mut dyn Progress,
    ) -> Result<u64, Error> {
        let mut done = 0u64;
        let mut kernel = 0u64;
        let mut slow = self.fallback;
        while done < r.len && !slow {
            let mut soff = r.offset + done;
            let mut doff = at + done;
            let want = usize::try_from((r.len - done).min(1 << 30)).unwrap_or(1 << 30);
            match rustix::fs::copy_file_range(src, Some(&mut soff), out, Some(&mut doff), want) {
                Ok(0) => return Err(content.shrunk(r.content)),
                Ok(n) => {
                    done += n as u64;
                    kernel += n as u64;
                    progress.advance(n as u64);
                    Error::check(progress)?;
                }
                Err(Errno::XDEV | Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP | Errno::PERM) => {
                    self.fallback = true;
                    slow = true;
                }
                Err(Errno::INTR) => {}
                Err(e @ (Errno::NOSPC | Errno::DQUOT | Errno::FBIG | Errno::ROFS)) => {
                    return Err(Error::write(out_path, e.into()));
                }
                Err(_) => slow = true,
            }
        }
        if done < r.len && self.buf.is_empty() {
            self.buf = vec![0u8; CHUNK as usize];
        }
        while done < r.len {
            let n = usize::try_from((r.len - done).min(CHUNK)).unwrap_or(0);
            let chunk = self.buf.get_mut(..n).unwrap_or_default();
            let path = content.path(r.content).unwrap_or(Path::new("?"));
            match src.read_at(chunk, r.offset + done) {
                Ok(0) => return Err(content.shrunk(r.content)),
                Ok(got) => {
                    let part = chunk.get(..got).unwrap_or_default();
                    out.write_all_at(part, at + done)
                        .map_err(|e| Error::write(out_path, e))?;
                    done += got as u64;
                    progress.advance(got as u64);
                    Error::check(progress)?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        Ok(kernel)
    }
}

/// The image's mapped ranges as inclusive 4 KiB block ranges (what a `.bmap` lists).
pub(crate) fn bmap_ranges(img: &ImageMap) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for (s, e) in img.mapped_ranges() {
        let (b0, b1) = (s / BMAP_BLOCK, e.div_ceil(BMAP_BLOCK).saturating_sub(1));
        match ranges.last_mut() {
            Some(last) if b0 <= last.1 + 1 => last.1 = last.1.max(b1),
            _ => ranges.push((b0, b1)),
        }
    }
    ranges
}

/// SHA-256 of each block range of the file, read back as soon as the writer has passed it
/// (`written` carries the offset below which the file is final; a closed channel means all).
fn hash_ranges(
    f: &File,
    size: u64,
    ranges: &[(u64, u64)],
    written: mpsc::Receiver<u64>,
) -> std::io::Result<Vec<[u8; 32]>> {
    let mut mark = 0u64;
    let mut buf = vec![0u8; CHUNK as usize];
    let mut out = Vec::with_capacity(ranges.len());
    for &(b0, b1) in ranges {
        let mut h = Sha256::new();
        let end = ((b1 + 1) * BMAP_BLOCK).min(size);
        let mut off = b0 * BMAP_BLOCK;
        while off < end {
            let n = (end - off).min(CHUNK);
            while mark < off + n {
                mark = written.recv().unwrap_or(u64::MAX);
            }
            let chunk = buf.get_mut(..n as usize).unwrap_or_default();
            f.read_exact_at(chunk, off)?;
            h.update(&*chunk);
            off += n;
        }
        out.push(h.finalize().into());
    }
    Ok(out)
}

/// A bmaptool 2.0 block map: 4 KiB blocks, SHA-256 per range, the file's own checksum.
pub(crate) fn bmap_text(size: u64, ranges: &[(u64, u64)], hashes: &[[u8; 32]]) -> String {
    use std::fmt::Write as _;
    let blocks = size.div_ceil(BMAP_BLOCK);
    let mut body = String::new();
    let mut mapped = 0u64;
    for ((b0, b1), h) in ranges.iter().zip(hashes) {
        mapped += b1 - b0 + 1;
        let r = if b0 == b1 {
            format!("{b0}")
        } else {
            format!("{b0}-{b1}")
        };
        let hex = h.iter().fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
        let _ = writeln!(body, "        <Range chksum=\"{hex}\"> {r} </Range>");
    }
    let zeros = "0".repeat(64);
    let text = format!(
        "<?xml version=\"1.0\" ?>\n<!-- written by blockwise -->\n<bmap version=\"2.0\">\n    <ImageSize> {size} </ImageSize>\n    <BlockSize> {BMAP_BLOCK} </BlockSize>\n    <BlocksCount> {blocks} </BlocksCount>\n    <MappedBlocksCount> {mapped} </MappedBlocksCount>\n    <ChecksumType> sha256 </ChecksumType>\n    <BmapFileChecksum> {zeros} </BmapFileChecksum>\n    <BlockMap>\n{body}    </BlockMap>\n</bmap>\n"
    );
    let digest = format!("{:x}", Sha256::digest(text.as_bytes()));
    text.replacen(&zeros, &digest, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::BlockSink as _;

    /// Cancels at the first `advance`.
    struct CancelAtFirst(bool);

    impl Progress for CancelAtFirst {
        fn advance(&mut self, _n: u64) {
            self.0 = true;
        }
        fn cancelled(&mut self) -> bool {
            self.0
        }
    }

    #[test]
    fn cancelled_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mut img = ImageMap::new(1 << 20);
        img.write_at(0, &[1; 512]).unwrap();
        img.write_at(1 << 19, &[2; 512]).unwrap();
        let out = dir.path().join("out.img");
        let bmap = dir.path().join("out.img.bmap");
        let content = HostContent::default();
        let err = write_image_file(&img, &content, &out, Some(&bmap), &mut CancelAtFirst(false))
            .unwrap_err();
        assert!(matches!(err, Error::Cancelled), "{err}");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        // Not cancelled: written.
        write_image_file(&img, &content, &out, None, &mut ()).unwrap();
        assert_eq!(fs::metadata(&out).unwrap().len(), 1 << 20);
    }

    /// A read error is the source's (bad input), a write error the output's, although one
    /// `copy_file_range` call does both: an fd opened the wrong way round makes each fail.
    #[test]
    fn copy_errors_name_the_side_that_failed() {
        let dir = tempfile::tempdir().unwrap();
        let src_path = dir.path().join("src.bin");
        fs::write(&src_path, vec![7u8; 3 << 20]).unwrap();
        let mut content = HostContent::default();
        let id = content.add(src_path.clone(), &fs::metadata(&src_path).unwrap());
        let r = ContentRef {
            content: id,
            offset: 0,
            len: 3 << 20,
        };
        let out_path = dir.path().join("out.img");
        let out = File::create(&out_path).unwrap();

        // One copier throughout: an error on one range does not give up the kernel path.
        let mut copier = Copier::default();
        // Source not readable (opened write-only): an input error naming the source.
        let unreadable = fs::OpenOptions::new().write(true).open(&src_path).unwrap();
        let err = copier
            .copy(&unreadable, r, &out, 0, &content, &out_path, &mut ())
            .unwrap_err();
        assert!(!err.is_write_failure(), "{err}");
        assert!(err.to_string().contains("src.bin"), "{err}");

        // Output not writable (opened read-only): a write failure naming the output.
        let src = File::open(&src_path).unwrap();
        let read_only = File::open(&out_path).unwrap();
        let err = copier
            .copy(&src, r, &read_only, 0, &content, &out_path, &mut ())
            .unwrap_err();
        assert!(err.is_write_failure(), "{err}");
        assert!(err.to_string().contains("out.img"), "{err}");

        // Both right: copied, and the kernel path still used for the next range.
        copier
            .copy(&src, r, &out, 0, &content, &out_path, &mut ())
            .unwrap();
        assert!(!copier.fallback);
        assert_eq!(fs::read(&out_path).unwrap(), vec![7u8; 3 << 20]);
    }
}
