//! Output files: an [`ImageMap`] written atomically (temp file, fsync, rename) with its holes
//! kept, file data copied by the kernel, and a bmaptool block map hashed while it is written.

use std::fs::{self, File};
use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;

use blockwise_flash::DataId;

use blockwise_geometry::{ContentRef, ImageMap, Piece};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::content::HostContent;
use crate::error::Clash;
use crate::gather::{with_gather, Out, GATHERED_FILE};
use crate::progress::{Phase, Progress};
use crate::Error;

/// bmap block size.
pub(crate) const BMAP_BLOCK: u64 = 4096;
/// Chunk of the read/write fallback copy and of the bmap hasher.
const CHUNK: u64 = 1 << 20;
/// Most bytes one `copy_file_range` call copies.
const COPY_CALL: u64 = 64 << 20;

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
/// renamed and the temp files are removed, so `path` and `bmap` are untouched. Each call has
/// temp files of its own (created with O_EXCL), so builds to one output in several threads
/// never share one: the last rename wins and the output is always one complete image.
///
/// An output that is one of the build's inputs (`content`, see [`check_outputs`]) or the
/// other output is refused before anything is opened for writing.
///
/// Metadata is written with `pwrite`, gathered with the files of up to 1 MiB (read with
/// `pread`, on a second thread where the machine has two cores) into writes of up to 4 MiB;
/// larger files are copied from `content` with `copy_file_range` (falling back to 1 MiB
/// `pread`/`pwrite` where the kernel refuses), and so is every file where that copy shares
/// blocks (XFS, btrfs). A source that changed since it was scanned is an [`Error::Changed`].
/// The `.bmap` SHA-256s are computed by a second thread reading back what was written,
/// behind the writer.
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
    let outputs: Vec<&Path> = std::iter::once(path).chain(bmap).collect();
    check_outputs(&outputs, content)?;
    remove_stale_temps(path);
    if let Some(b) = bmap {
        remove_stale_temps(b);
    }
    let tmp = temp_path(path);
    let bmap_tmp = bmap.map(temp_path);
    let mut created: Vec<PathBuf> = Vec::new();
    let result = (|| {
        // Read and write: the bmap hasher reads back what was written. A new file (O_EXCL):
        // never one another build is writing.
        // The build's spill file, when it can become the output: the metadata it holds is in
        // place already and is not copied again.
        let (f, in_place) = match crate::spill::adopt(img, &tmp) {
            Some(f) => {
                created.push(tmp.clone());
                (f, true)
            }
            None => (create_new(&tmp, &mut created)?, false),
        };
        f.set_len(img.size()).map_err(|e| Error::write(&tmp, e))?;
        progress.phase(Phase::Writing {
            bytes: img.data_bytes(),
        });
        let (stats, hashes) = with_write_behind(&f, |behind| match bmap {
            None => {
                let frontier = Frontier::new();
                let written = Written {
                    hasher: None,
                    behind,
                    in_place,
                    frontier: &frontier,
                };
                Ok((
                    write_pieces(img, content, &f, &tmp, progress, written)?,
                    None,
                ))
            }
            Some(_) => {
                let ranges = bmap_ranges(img);
                let stop = AtomicBool::new(false);
                let hashed = AtomicU64::new(0);
                let (stats, hashes) = std::thread::scope(|s| {
                    let (tx, rx) = mpsc::channel();
                    let (file, list, size, stop) = (&f, &ranges, img.size(), &stop);
                    let hashed = &hashed;
                    let hasher = s.spawn(move || hash_ranges(file, size, list, rx, stop, hashed));
                    let frontier = Frontier::new();
                    let written = Written {
                        hasher: Some(&tx),
                        behind,
                        in_place,
                        frontier: &frontier,
                    };
                    let stats = write_pieces(img, content, &f, &tmp, progress, written);
                    // A failed or cancelled write stops the hasher now instead of letting it
                    // hash the rest of the file.
                    if stats.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    } else {
                        progress.phase(Phase::Hashing {
                            bytes: bmap_bytes(&ranges, img.size()),
                        });
                    }
                    drop(tx);
                    // The hasher may lag behind the writer: keep answering a cancel, and
                    // report what it hashed since.
                    let mut reported = 0;
                    loop {
                        if stats.is_ok() {
                            let now = hashed.load(Ordering::Relaxed);
                            progress.advance(now.saturating_sub(reported));
                            reported = now;
                        }
                        if hasher.is_finished() {
                            break;
                        }
                        if !stop.load(Ordering::Relaxed) && progress.cancelled() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    let hashes = hasher.join().unwrap_or_else(|_| {
                        Err(std::io::Error::other("the bmap hasher thread failed"))
                    });
                    (stats, hashes)
                });
                let stats = stats?;
                if stop.load(Ordering::Relaxed) {
                    return Err(Error::Cancelled);
                }
                let hashes = hashes.map_err(|e| Error::write(&tmp, e))?;
                Ok((stats, Some((ranges, hashes))))
            }
        })?;
        progress.phase(Phase::Syncing);
        Error::check(progress)?;
        f.sync_all().map_err(|e| Error::write(&tmp, e))?;
        if let (Some((ranges, hashes)), Some(bt)) = (hashes, &bmap_tmp) {
            let text = bmap_text(img.size(), &ranges, &hashes);
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
        Ok(stats)
    })();
    if result.is_err() {
        // Only what this call created: a temp name that existed was never ours.
        for t in &created {
            let _ = fs::remove_file(t);
        }
    }
    // The temp files are this call's business: a failure writing one is a failure writing
    // the output the caller named.
    let mut temps = vec![(tmp.as_path(), path)];
    if let (Some(bt), Some(b)) = (&bmap_tmp, bmap) {
        temps.push((bt.as_path(), b));
    }
    result.map_err(|e| name_outputs(e, &temps))
}

/// `e` with a temp file's path replaced by the output it stands for (`(temp, output)` pairs).
fn name_outputs(e: Error, temps: &[(&Path, &Path)]) -> Error {
    match e {
        Error::Write { path, source, note } => {
            let path = temps
                .iter()
                .find(|(t, _)| *t == path)
                .map_or(path, |(_, out)| out.to_path_buf());
            Error::Write { path, source, note }
        }
        other => other,
    }
}

/// The bytes a `.bmap` hashes: its ranges of 4 KiB blocks, the last one cut at the image's
/// end.
fn bmap_bytes(ranges: &[(u64, u64)], size: u64) -> u64 {
    ranges
        .iter()
        .map(|&(b0, b1)| {
            let end = (b1 + 1).saturating_mul(BMAP_BLOCK).min(size);
            end.saturating_sub(b0 * BMAP_BLOCK)
        })
        .sum()
}

/// Creates `path` as a new file (O_EXCL, read and write), noting it in `created`.
pub(crate) fn create_new(path: &Path, created: &mut Vec<PathBuf>) -> Result<File, Error> {
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::write(path, e))?;
    created.push(path.to_path_buf());
    Ok(f)
}

/// An output's directory (device, inode) and file name.
type NamedIn = ((u64, u64), Vec<u8>);

/// The identity of an output path: its file's (device, inode) when it exists, else its
/// directory's (device, inode) and its name, so `x.img` and `./x.img` are one output.
fn output_id(path: &Path) -> Result<(Option<DataId>, Option<NamedIn>), Error> {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::MetadataExt as _;
    let id = DataId::of_path(path).map_err(|e| Error::io(path, e))?;
    let (dir, _) = dir_and_name(path);
    let named = match (fs::metadata(dir), path.file_name()) {
        (Ok(md), Some(n)) => Some(((md.dev(), md.ino()), n.as_bytes().to_vec())),
        _ => None,
    };
    Ok((id, named))
}

/// Refuses outputs that are inputs of the build or each other ([`Error::OutputIsInput`]):
/// each of `outputs` (image, `.bmap`, encoded forms) is compared, through any link or
/// spelling, with every input `content` knows ([`HostContent::inputs`]: the spec file, the
/// `contents` files, raw sources) and with the other outputs. Nothing is opened for
/// writing; call it before anything is. [`write_image_file`] calls it with its two outputs;
/// a writer of other outputs calls it with all of them.
pub fn check_outputs(outputs: &[&Path], content: &HostContent) -> Result<(), Error> {
    let mut seen: Vec<(&Path, Option<DataId>, Option<NamedIn>)> = Vec::new();
    for &out in outputs {
        let (id, named) = output_id(out)?;
        if let Some(id) = &id {
            // Compared file by file: a list of a million inputs cost more memory than the
            // build's metadata.
            if let Some(input) = content.input_where(|dev, ino| id.has_file(dev, ino)) {
                return Err(Error::OutputIsInput {
                    output: out.to_path_buf(),
                    input: Clash::Input(input),
                });
            }
        }
        for (other, oid, onamed) in &seen {
            let same_file = matches!((&id, oid), (Some(a), Some(b)) if a.overlaps(b));
            let same_name = named.is_some() && named == *onamed;
            if same_file || same_name {
                return Err(Error::OutputIsInput {
                    output: out.to_path_buf(),
                    input: Clash::Output(other.to_path_buf()),
                });
            }
        }
        seen.push((out, id, named));
    }
    Ok(())
}

/// Checks that `path` can take an output file: it does not exist yet or is a regular file.
/// A block or character device, FIFO, socket, directory or symlink is refused (renaming over
/// it would replace the node, not write to what it names: `blockwise write` writes devices).
pub fn check_output_path(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::FileTypeExt as _;
    let md = match fs::symlink_metadata(path) {
        Ok(md) => md,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // The temp file goes beside the output: name the missing directory, not the temp.
            let (dir, _) = dir_and_name(path);
            return match fs::metadata(dir) {
                Ok(d) if d.is_dir() => Ok(()),
                Ok(_) => Err(Error::NotUsable {
                    path: dir.to_path_buf(),
                    what: "is not a directory: the output's directory must be one".into(),
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Write {
                    path: dir.to_path_buf(),
                    source: e,
                    note: "; create the output's directory first".into(),
                }),
                Err(e) => Err(Error::write(dir, e)),
            };
        }
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

/// `.NAME.tmp-PID-START-TID-N` next to `path` (see [`unique_tag`]).
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let (dir, name) = dir_and_name(path);
    dir.join(format!(".{name}.tmp-{}", unique_tag()))
}

/// `PID-START` of this process, for temp file names a later build can judge stale.
fn owner_tag() -> String {
    let pid = std::process::id();
    format!("{pid}-{}", start_time(pid).unwrap_or(0))
}

/// `PID-START-TID-N`: this process's PID and start time (so a later build can tell a
/// leftover of a killed build from a build still running), the calling thread's id and a
/// counter of this process, so that no two calls, in any thread, get the same name.
pub(crate) fn unique_tag() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tid = rustix::thread::gettid().as_raw_nonzero();
    format!("{}-{tid}-{n}", owner_tag())
}

/// Removes the temp files earlier builds to `path` left when they were killed (their owner
/// process is gone or is another process now). Only exact `.NAME.tmp-PID-START[-TID-N]`
/// names are considered, never a wildcard; without `/proc` nothing is removed. Returns what
/// was removed.
pub fn remove_stale_temps(path: &Path) -> Vec<PathBuf> {
    let (dir, name) = dir_and_name(path);
    remove_stale_in(dir, &format!(".{name}.tmp-"), "")
}

/// Most dash-separated numbers after `PID-START` in a temp name (`TID-N` and the mke2fs
/// backend's partition start).
const MAX_EXTRA: usize = 3;

/// Removes the regular files in `dir` named `PREFIX PID-START [-N]… SUFFIX` (up to
/// [`MAX_EXTRA`] more `-N` numbers: the thread and counter of [`unique_tag`], and names of
/// earlier versions without them) whose owner process `PID` with start time `START` is gone.
/// Nothing without `/proc`.
pub(crate) fn remove_stale_in(dir: &Path, prefix: &str, suffix: &str) -> Vec<PathBuf> {
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
        if !(2..=2 + MAX_EXTRA).contains(&parts.len())
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

/// Bytes the writer finishes between two write-behind requests.
const WRITE_BEHIND: u64 = 4 << 20;
/// The page cache's unit: a write of one byte dirties a page.
const PAGE: u64 = 4096;

/// Where the writer reports each range it has finished (`start`, `end`): the `.bmap` hasher
/// (how far the file is final) and the write-behind thread.
#[derive(Clone, Copy)]
pub(crate) struct Written<'a> {
    hasher: Option<&'a mpsc::Sender<u64>>,
    behind: Option<&'a Behind>,
    /// The output is the map's spill file: its spilled ranges hold their bytes already.
    in_place: bool,
    pub(crate) frontier: &'a Frontier,
}

impl Written<'_> {
    /// `start..end` is written; everything before it is written too, or handed to the
    /// gathering's filler (the [`Frontier`]).
    pub(crate) fn done(&self, start: u64, end: u64) {
        #[cfg(test)]
        tests::EVENTS.with(|e| e.borrow_mut().push((start, end)));
        let f = self.frontier;
        f.reached.set(f.reached.get().max(end));
        self.tell_hasher();
        if let Some(b) = self.behind {
            b.done(start, end);
        }
    }

    /// Tells the hasher how far the file is final.
    pub(crate) fn tell_hasher(&self) {
        if let Some(tx) = self.hasher {
            let f = self.frontier;
            let mark = f.reached.get().min(f.held.get());
            // A mark is logged as an empty range there.
            #[cfg(test)]
            tests::EVENTS.with(|e| e.borrow_mut().push((mark, mark)));
            let _ = tx.send(mark);
        }
    }
}

/// How far the output is final, for the `.bmap` hasher: the writer has passed `reached`, and
/// gatherings from `held` on are still being filled (`u64::MAX` when none is). The mark, the
/// lesser of the two, only grows: gatherings are handed over in offset order, at or after
/// `reached`, and one handed back is written before `held` moves past it.
pub(crate) struct Frontier {
    reached: std::cell::Cell<u64>,
    pub(crate) held: std::cell::Cell<u64>,
}

impl Frontier {
    fn new() -> Self {
        Frontier {
            reached: std::cell::Cell::new(0),
            held: std::cell::Cell::new(u64::MAX),
        }
    }
}

/// The writer's side of the write-behind thread: finished ranges gathered until they hold
/// [`WRITE_BEHIND`] bytes, then their span (holes included: a hole has nothing to write)
/// handed over in one message, so that a build of many small pieces (an exFAT of small
/// files: one piece per 16 KiB cluster) wakes the thread once per 4 MiB, not per piece.
struct Behind {
    tx: mpsc::Sender<(u64, u64)>,
    /// Span and bytes of the finished ranges not yet handed over.
    pending: std::cell::Cell<Option<(u64, u64, u64)>>,
}

impl Behind {
    fn done(&self, start: u64, end: u64) {
        let (a, b, n) = self
            .pending
            .get()
            .map_or((start, end, 0), |(a, b, n)| (a.min(start), b.max(end), n));
        // What the page cache holds dirty: whole 4 KiB pages, so that 20,000 files of a few
        // bytes, each in a cluster of its own, count 80 MB, not 100 KB.
        let pages = end.div_ceil(PAGE).saturating_sub(start / PAGE);
        let n = n.saturating_add(pages.saturating_mul(PAGE));
        if n >= WRITE_BEHIND {
            let _ = self.tx.send((a, b));
            self.pending.set(None);
        } else {
            self.pending.set(Some((a, b, n)));
        }
    }
}

/// Runs `body` with a write-behind thread beside it: each [`WRITE_BEHIND`] bytes the writer
/// reports finished, the kernel is asked to start writing them to the disk
/// ([`blockwise_flash::start_writeback`]), on the other core and while the writer goes on,
/// instead of all of it in the final `fsync` (which does the rest, and reports any error).
/// Where no thread can be had, `body` runs without (`None`).
fn with_write_behind<R>(file: &File, body: impl FnOnce(Option<&Behind>) -> R) -> R {
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(u64, u64)>();
        let started = std::thread::Builder::new()
            .spawn_scoped(s, move || {
                for (a, b) in rx {
                    let _ = blockwise_flash::start_writeback(file, a, b.saturating_sub(a));
                }
            })
            .is_ok();
        let behind = Behind {
            tx,
            pending: std::cell::Cell::new(None),
        };
        // `behind` (the sender) is dropped when `body` returns: the thread then ends, and the
        // scope waits for it.
        body(started.then_some(&behind))
    })
}

/// Writes every piece; after each write, tells the hasher how far the file is final.
fn write_pieces(
    img: &ImageMap,
    content: &HostContent,
    file: &File,
    out_path: &Path,
    progress: &mut dyn Progress,
    written: Written<'_>,
) -> Result<WriteStats, Error> {
    let out = Out {
        file,
        path: out_path,
        written,
        content,
    };
    // Where the kernel's copy can share the source's blocks, every file is copied by it.
    let gathered_file = if shares_blocks(file) {
        0
    } else {
        GATHERED_FILE
    };
    with_gather(content, |gather| {
        let mut stats = WriteStats::default();
        let mut copier = Copier::default();
        let mut spill_buf = Vec::new();
        for piece in img.pieces() {
            Error::check(progress)?;
            match piece {
                Piece::Bytes(off, data) => {
                    gather.push(off, data, out)?;
                    stats.metadata_bytes += data.len() as u64;
                }
                Piece::Spilled(off, len) if written.in_place => {
                    // In place already. What is gathered goes out first, so that no gap it
                    // would fill with zeros spans these bytes.
                    gather.flush(out)?;
                    written.done(off, off + len);
                    stats.metadata_bytes += len;
                }
                Piece::Spilled(off, len) => {
                    // Metadata the map spilled during the build: back from its store in 1 MiB
                    // pieces.
                    if spill_buf.is_empty() {
                        spill_buf = vec![0u8; CHUNK as usize];
                    }
                    let mut done = 0u64;
                    while done < len {
                        let n = usize::try_from((len - done).min(CHUNK)).unwrap_or(0);
                        let chunk = spill_buf.get_mut(..n).unwrap_or_default();
                        img.load_spilled(off + done, chunk)
                            .map_err(|e| Error::write(out_path, std::io::Error::other(e)))?;
                        gather.push(off + done, chunk, out)?;
                        done += n as u64;
                    }
                    stats.metadata_bytes += len;
                }
                Piece::Content(off, r) => {
                    let small = content.inline(r.content).and_then(|d| {
                        let s = usize::try_from(r.offset).ok()?;
                        d.get(s..s.checked_add(usize::try_from(r.len).ok()?)?)
                    });
                    if let Some(data) = small {
                        gather.push(off, data, out)?;
                    } else if r.len <= gathered_file {
                        // Read into the gathering (on the filler's thread), written with its
                        // neighbours in one `pwrite`.
                        gather.push_file(off, r, out)?;
                    } else {
                        gather.flush(out)?;
                        let src = content.open(r.content)?;
                        let kernel =
                            copier.copy(&src, r, file, off, content, out_path, progress)?;
                        content.check(r.content, &src)?;
                        stats.content_bytes += r.len;
                        stats.kernel_copied_bytes += kernel;
                        // Progress for content is reported as it is copied.
                        written.done(off, off + piece.len());
                        continue;
                    }
                    stats.content_bytes += r.len;
                }
            }
            progress.advance(piece.len());
        }
        gather.finish(out)?;
        Ok(stats)
    })
}

/// Filesystems whose `copy_file_range` shares blocks between files instead of copying them
/// (`statfs` magic numbers): XFS, btrfs, bcachefs, OCFS2.
const SHARING_FS: [i64; 4] = [0x5846_5342, 0x9123_683e, 0xca45_1a4e, 0x7461_636f];

/// True when `out` lies on a filesystem where copying a file may share its blocks.
fn shares_blocks(out: &File) -> bool {
    let Ok(st) = rustix::fs::fstatfs(out) else {
        return false;
    };
    #[allow(
        clippy::unnecessary_cast,
        reason = "f_type's width differs between targets"
    )]
    let magic = st.f_type as i64;
    SHARING_FS.contains(&magic)
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
    #[expect(clippy::too_many_arguments, reason = "one call site, all plain inputs")]
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
            // At most 64 MiB per call: a cancel is seen between calls (about 50 ms apart at
            // page-cache speed), where one call of 1 GiB took a second.
            let want = usize::try_from((r.len - done).min(COPY_CALL)).unwrap_or(1 << 26);
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
            let path = content.path(r.content).unwrap_or_else(|| "?".into());
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
                Err(e) => return Err(Error::io(&path, e)),
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
///
/// `stop` ends it early (the writer failed or the build was cancelled) with `Interrupted`.
fn hash_ranges(
    f: &File,
    size: u64,
    ranges: &[(u64, u64)],
    written: mpsc::Receiver<u64>,
    stop: &AtomicBool,
    hashed: &AtomicU64,
) -> std::io::Result<Vec<[u8; 32]>> {
    let stopped = || std::io::Error::from(std::io::ErrorKind::Interrupted);
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
                if stop.load(Ordering::Relaxed) {
                    return Err(stopped());
                }
            }
            if stop.load(Ordering::Relaxed) {
                return Err(stopped());
            }
            let chunk = buf.get_mut(..n as usize).unwrap_or_default();
            f.read_exact_at(chunk, off)?;
            h.update(&*chunk);
            off += n;
            hashed.fetch_add(n, Ordering::Relaxed);
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
    use blockwise_geometry::{BlockSink as _, BlockSource as _, ContentRef};
    use std::os::unix::fs::MetadataExt as _;

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

    /// r25: an output that is an input (through a hard link, a symlink or another spelling)
    /// or the other output is refused before anything is created.
    #[test]
    fn r25_outputs_that_are_inputs_or_each_other_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.bin");
        fs::write(&src, b"data").unwrap();
        let spec = dir.path().join("spec.toml");
        fs::write(&spec, b"[image]\n").unwrap();
        let mut content = HostContent::default();
        content.add(src.clone(), &fs::metadata(&src).unwrap());
        content.add_input(spec.clone(), &fs::metadata(&spec).unwrap());
        let hard = dir.path().join("hard.img");
        fs::hard_link(&src, &hard).unwrap();
        let link = dir.path().join("link.img");
        std::os::unix::fs::symlink(&spec, &link).unwrap();
        let new = dir.path().join("new.img");
        let clash = |outs: &[&Path]| match check_outputs(outs, &content) {
            Err(Error::OutputIsInput { input, .. }) => Some(input),
            Err(e) => panic!("{e}"),
            Ok(()) => None,
        };
        assert_eq!(clash(&[&src]), Some(Clash::Input(src.clone())));
        assert_eq!(clash(&[&hard]), Some(Clash::Input(src.clone())));
        assert_eq!(clash(&[&link]), Some(Clash::Input(spec.clone())));
        assert_eq!(clash(&[&new, &spec]), Some(Clash::Input(spec.clone())));
        // Not yet existing: the same directory and name, however spelled.
        let dotted = dir.path().join(".").join("new.img");
        assert_eq!(clash(&[&new, &dotted]), Some(Clash::Output(new.clone())));
        assert_eq!(clash(&[&new, &dir.path().join("new.img.bmap")]), None);
        // write_image_file refuses before creating anything; the input is unchanged.
        let img = ImageMap::new(1 << 20);
        let err = write_image_file(&img, &content, &new, Some(&dotted), &mut ()).unwrap_err();
        assert!(matches!(err, Error::OutputIsInput { .. }), "{err}");
        let err = write_image_file(&img, &content, &hard, None, &mut ()).unwrap_err();
        assert!(err.to_string().contains("an input of this build"), "{err}");
        assert_eq!(fs::read(&src).unwrap(), b"data");
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 4, "{names:?}");
    }

    /// r25: the `.bmap` hasher stops when told to (a failed or cancelled write) instead of
    /// hashing the rest of the file.
    /// Records phases and the bytes advanced in each.
    #[derive(Default)]
    struct Phases(Vec<(Phase, u64)>);

    impl Progress for Phases {
        fn phase(&mut self, phase: Phase) {
            self.0.push((phase, 0));
        }
        fn advance(&mut self, n: u64) {
            if let Some(last) = self.0.last_mut() {
                last.1 += n;
            }
        }
    }

    /// Issue 34: the build's spill file becomes the output, its spilled metadata not copied
    /// again, and the output holds exactly the map's bytes: spilled ranges, spilled bytes
    /// overwritten later (with zeros, with content by reference), bytes held in memory a
    /// few bytes either side of a spilled range (which the writer's gathering must not fill
    /// over) and holes. A second output of the same map, written as a file of its own, is
    /// the same bytes with the same `.bmap`.
    #[test]
    fn the_spill_file_becomes_the_output() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src.bin");
        fs::write(&src, vec![7u8; 10_000]).unwrap();
        let mut content = HostContent::default();
        let id = content.add(src.clone(), &fs::metadata(&src).unwrap());
        let mut img = crate::spill::image_map_with_budget(8 << 20, dir.path(), 4096);
        let pattern = |seed: u32| -> Vec<u8> {
            (0..65536u32)
                .map(|i| ((i * 7 + seed) % 251) as u8 + 1)
                .collect()
        };
        // Spilled: each write passes the budget.
        img.write_at(1 << 20, &pattern(1)).unwrap();
        img.write_at(3 << 20, &pattern(2)).unwrap();
        // Over spilled bytes: content by reference, then zeros and bytes small enough to
        // stay in memory, 1,900 bytes apart.
        let r = ContentRef {
            content: id,
            offset: 0,
            len: 10_000,
        };
        img.write_content((1 << 20) + 32768, r, &content).unwrap();
        img.write_at((3 << 20) + 1000, &[0; 100]).unwrap();
        img.write_at((3 << 20) + 3000, &[9; 100]).unwrap();
        img.write_at((3 << 20) + 65536 + 10, &[5; 100]).unwrap();
        assert!(img.spilled_bytes() > 0 && img.metadata().data_bytes() > 0);
        let mut want = vec![0u8; 8 << 20];
        img.reader(&content).read_at(0, &mut want).unwrap();
        assert_eq!(want[(3 << 20) + 1099], 0);
        assert_eq!(want[(3 << 20) + 1100], pattern(2)[1100]);

        let (a, b) = (dir.path().join("a.img"), dir.path().join("b.img"));
        let (ab, bb) = (dir.path().join("a.bmap"), dir.path().join("b.bmap"));
        assert!(!crate::spill::adopted(&img));
        // A name that exists is not taken, and the file stays free for the next output.
        let taken = dir.path().join("taken");
        fs::write(&taken, b"mine").unwrap();
        assert!(crate::spill::adopt(&img, &taken).is_none());
        assert!(!crate::spill::adopted(&img));
        assert_eq!(fs::read(&taken).unwrap(), b"mine");
        write_image_file(&img, &content, &a, Some(&ab), &mut ()).unwrap();
        assert!(crate::spill::adopted(&img), "tmpfs and ext4 take O_TMPFILE");
        write_image_file(&img, &content, &b, Some(&bb), &mut ()).unwrap();
        for out in [&a, &b] {
            assert!(fs::read(out).unwrap() == want, "{}", out.display());
        }
        assert_eq!(fs::read(&ab).unwrap(), fs::read(&bb).unwrap());
        // Holes stay holes: the output is as sparse as the map.
        let used = fs::metadata(&a).unwrap().blocks() * 512;
        assert!(used < 1 << 20, "{used} bytes allocated");
    }

    /// r31: the `.bmap` hashing is a phase of its own that ends with every mapped byte
    /// hashed.
    #[test]
    fn r31_hashing_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut img = ImageMap::new(1 << 20);
        img.write_at(0, &[1; 512]).unwrap();
        img.write_at(1 << 19, &[2; 5000]).unwrap();
        let out = dir.path().join("out.img");
        let bmap = dir.path().join("out.img.bmap");
        let mut p = Phases::default();
        write_image_file(&img, &HostContent::default(), &out, Some(&bmap), &mut p).unwrap();
        let hashing: Vec<_> =
            p.0.iter()
                .filter(|(ph, _)| matches!(ph, Phase::Hashing { .. }))
                .collect();
        // Blocks 0 and 128-129: 3 blocks of 4 KiB.
        assert_eq!(
            hashing,
            [&(Phase::Hashing { bytes: 3 * 4096 }, 3 * 4096)],
            "{:?}",
            p.0
        );
    }

    /// r31: a failure writing a temp file names the output the caller gave, not the temp
    /// file; other paths stay.
    #[test]
    fn r31_write_errors_name_the_output() {
        let (tmp, out) = (Path::new("d/.o.img.tmp-1-2-3-4"), Path::new("d/o.img"));
        let (btmp, bmap) = (Path::new("d/.o.bmap.tmp-1-2-3-5"), Path::new("d/o.bmap"));
        let temps = [(tmp, out), (btmp, bmap)];
        let enospc = || std::io::Error::from_raw_os_error(Errno::NOSPC.raw_os_error());
        for (written, named) in [
            (tmp, out),
            (btmp, bmap),
            (Path::new("d/x"), Path::new("d/x")),
        ] {
            match name_outputs(Error::write(written, enospc()), &temps) {
                Error::Write { path, .. } => assert_eq!(path, named),
                e => panic!("{e}"),
            }
        }
        assert!(matches!(
            name_outputs(Error::io(tmp, enospc()), &temps),
            Error::Io { path, .. } if path == tmp
        ));
    }

    #[test]
    fn r25_the_bmap_hasher_stops_when_told() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.img");
        let f = File::create(&path).unwrap();
        f.set_len(1 << 40).unwrap();
        let f = File::open(&path).unwrap();
        let (tx, rx) = mpsc::channel::<u64>();
        drop(tx);
        let stop = AtomicBool::new(true);
        let ranges = [(0u64, (1u64 << 40) / BMAP_BLOCK - 1)];
        let err = hash_ranges(&f, 1 << 40, &ranges, rx, &stop, &AtomicU64::new(0)).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::Interrupted);
    }

    /// r25: every call gets its own temp name (thread and counter), and leftovers of a dead
    /// process in the new and the old format are removed, a live one's kept.
    #[test]
    fn r25_temp_names_are_unique_and_stale_ones_removed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.img");
        let names: Vec<PathBuf> = (0..4)
            .map(|_| {
                std::thread::spawn({
                    let out = out.clone();
                    move || [temp_path(&out), temp_path(&out)]
                })
            })
            .flat_map(|h| h.join().unwrap())
            .collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        let live = temp_path(&out);
        for p in [
            &live,
            &dir.path().join(".out.img.tmp-4194305-1"),
            &dir.path().join(".out.img.tmp-4194305-1-7-0"),
        ] {
            fs::write(p, b"x").unwrap();
        }
        let removed = remove_stale_temps(&out);
        if start_time(std::process::id()).is_some() {
            assert_eq!(removed.len(), 2, "{removed:?}");
            assert!(live.exists());
        }
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

    /// Files up to [`GATHERED_FILE`] are read into the gathering, larger ones copied by the
    /// kernel; either way the output holds their bytes, next to metadata in the same block.
    #[test]
    fn small_files_are_gathered_large_ones_copied() {
        let dir = tempfile::tempdir().unwrap();
        let mut content = HostContent::default();
        let mut img = ImageMap::new(8 << 20);
        let mut at = 4096u64;
        let mut lens = Vec::new();
        for (i, len) in [10_000u64, GATHERED_FILE, GATHERED_FILE + 1, 5000]
            .into_iter()
            .enumerate()
        {
            let data: Vec<u8> = (0..len).map(|j| (j * 13 + i as u64) as u8 | 1).collect();
            map_file(
                dir.path(),
                &format!("f{i}"),
                &data,
                &mut content,
                &mut img,
                at,
            );
            // Metadata right after the file, in its last block.
            img.write_at(at + len, &[0xee; 7]).unwrap();
            lens.push(len);
            at = (at + len + 7).next_multiple_of(4096) + 4096;
        }
        let mut want = vec![0u8; 8 << 20];
        img.reader(&content).read_at(0, &mut want).unwrap();
        let out = dir.path().join("out.img");
        let stats = write_image_file(&img, &content, &out, None, &mut ()).unwrap();
        assert!(fs::read(&out).unwrap() == want);
        assert_eq!(stats.content_bytes, lens.iter().sum::<u64>());
        assert_eq!(stats.metadata_bytes, 4 * 7);
        // Only the file past the limit goes to `copy_file_range` (which may refuse: then 0).
        assert!(
            [0, GATHERED_FILE + 1].contains(&stats.kernel_copied_bytes),
            "{stats:?}"
        );
    }

    thread_local! {
        /// What the writer reported on this thread, in order: ranges written, and the marks
        /// it sent the hasher (as empty ranges at the mark).
        pub(super) static EVENTS: std::cell::RefCell<Vec<(u64, u64)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    /// Checks [`EVENTS`] against `img`: when each mark was sent, every mapped byte below it
    /// had been written.
    fn marks_follow_writes(img: &ImageMap) {
        let events = EVENTS.with(|e| std::mem::take(&mut *e.borrow_mut()));
        let mut written: Vec<(u64, u64)> = Vec::new();
        let mut marks = 0;
        for (a, b) in events {
            if a < b {
                written.push((a, b));
                continue;
            }
            marks += 1;
            written.sort_unstable();
            let mut covered: Vec<(u64, u64)> = Vec::new();
            for &(s, e) in &written {
                match covered.last_mut() {
                    Some(last) if s <= last.1 => last.1 = last.1.max(e),
                    _ => covered.push((s, e)),
                }
            }
            written = covered;
            for (s, e) in img.mapped_ranges() {
                let e = e.min(a);
                if s < e {
                    assert!(
                        written.iter().any(|&(ws, we)| ws <= s && e <= we),
                        "mark {a} sent before {s}..{e} was written"
                    );
                }
            }
        }
        assert!(marks > 0);
    }

    /// Writes `data` to `dir/name`, registers it in `content` and maps all of it at `at`.
    fn map_file(
        dir: &Path,
        name: &str,
        data: &[u8],
        content: &mut HostContent,
        img: &mut ImageMap,
        at: u64,
    ) {
        let p = dir.join(name);
        fs::write(&p, data).unwrap();
        let id = content.add(p.clone(), &fs::metadata(&p).unwrap());
        let r = ContentRef {
            content: id,
            offset: 0,
            len: data.len() as u64,
        };
        img.write_content(at, r, content).unwrap();
    }

    /// A map of `n` files of 1–12 KB (each read into the gathering) at 4 KiB-aligned
    /// offsets, with metadata between some of them, and its bytes.
    fn gathered_files(dir: &Path, n: u64) -> (ImageMap, HostContent, Vec<u8>) {
        let mut content = HostContent::default();
        let size = 64u64 << 20;
        let mut img = ImageMap::new(size);
        let mut at = 8192u64;
        for i in 0..n {
            let len = 1000 + (i * 7919) % 11_000;
            let data: Vec<u8> = (0..len).map(|j| (j * 31 + i) as u8 | 1).collect();
            map_file(dir, &format!("f{i}"), &data, &mut content, &mut img, at);
            at = (at + len).next_multiple_of(4096);
            if i % 7 == 0 {
                img.write_at(at + 100, &[0xa5; 300]).unwrap();
                at += 4096;
            }
            // Now and then a file the writer copies itself while a gathering is being
            // filled.
            if i % 500 == 250 {
                let len = GATHERED_FILE + 4096;
                let data = vec![(i % 251) as u8 + 1; len as usize];
                map_file(dir, &format!("big{i}"), &data, &mut content, &mut img, at);
                at += len;
            }
            // Holes between some: runs of their own, some of metadata alone.
            if i % 50 == 0 {
                at += 3 * 4096;
                img.write_at(at, &[0x5a; 5000]).unwrap();
                at += 5 * 4096;
            }
        }
        assert!(at < size);
        let mut want = vec![0u8; size as usize];
        img.reader(&content).read_at(0, &mut want).unwrap();
        (img, content, want)
    }

    /// Files read into the gathering, by the filler thread and (as on one core) by the
    /// writer: the output is the map, and each `.bmap` hash is that of the finished file (the
    /// hasher never reads a gathering before it is filled and written).
    #[test]
    fn gathered_files_give_the_image_and_its_bmap() {
        let dir = tempfile::tempdir().unwrap();
        let (img, content, want) = gathered_files(dir.path(), 1500);
        // A slow filler (one core: no filler).
        crate::gather::FILL_DELAY_MS.store(20, Ordering::Relaxed);
        for one_core in [false, true] {
            crate::gather::ONE_CORE.with(|c| c.set(one_core));
            let out = dir.path().join("out.img");
            let bmap = dir.path().join("out.bmap");
            EVENTS.with(|e| e.borrow_mut().clear());
            let stats = write_image_file(&img, &content, &out, Some(&bmap), &mut ()).unwrap();
            marks_follow_writes(&img);
            let big = 3 * (GATHERED_FILE + 4096);
            assert!([0, big].contains(&stats.kernel_copied_bytes), "{stats:?}");
            let got = fs::read(&out).unwrap();
            assert!(got == want, "one core: {one_core}");
            let ranges = bmap_ranges(&img);
            let hashes: Vec<[u8; 32]> = ranges
                .iter()
                .map(|&(b0, b1)| {
                    let end = ((b1 + 1) * BMAP_BLOCK).min(img.size());
                    Sha256::digest(&got[(b0 * BMAP_BLOCK) as usize..end as usize]).into()
                })
                .collect();
            assert_eq!(
                fs::read_to_string(&bmap).unwrap(),
                bmap_text(img.size(), &ranges, &hashes),
                "one core: {one_core}"
            );
            fs::remove_file(&out).unwrap();
            fs::remove_file(&bmap).unwrap();
        }
        crate::gather::FILL_DELAY_MS.store(0, Ordering::Relaxed);
        crate::gather::ONE_CORE.with(|c| c.set(false));
    }

    /// A cancel or a file changed while files are being gathered stops the write, leaves
    /// nothing behind, and names the file that changed.
    #[test]
    fn gathered_files_cancelled_or_changed() {
        struct CancelAfter(u64);
        impl Progress for CancelAfter {
            fn advance(&mut self, n: u64) {
                self.0 = self.0.saturating_sub(n);
            }
            fn cancelled(&mut self) -> bool {
                self.0 == 0
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        fs::create_dir(&src).unwrap();
        let (img, content, _) = gathered_files(&src, 2000);
        let outs = dir.path().join("outs");
        fs::create_dir(&outs).unwrap();
        let out = outs.join("out.img");
        let bmap = outs.join("out.bmap");
        for one_core in [false, true] {
            crate::gather::ONE_CORE.with(|c| c.set(one_core));
            let err =
                write_image_file(&img, &content, &out, Some(&bmap), &mut CancelAfter(8 << 20))
                    .unwrap_err();
            assert!(matches!(err, Error::Cancelled), "{err}");
            assert_eq!(
                fs::read_dir(&outs).unwrap().count(),
                0,
                "one core: {one_core}"
            );
        }
        // Shrunk after the scan, late in the image.
        fs::write(src.join("f1900"), b"short").unwrap();
        for one_core in [false, true] {
            crate::gather::ONE_CORE.with(|c| c.set(one_core));
            let err = write_image_file(&img, &content, &out, Some(&bmap), &mut ()).unwrap_err();
            match &err {
                Error::Changed { path, .. } => assert!(path.ends_with("f1900"), "{err}"),
                other => panic!("one core: {one_core}: expected Changed, got {other:?}"),
            }
            assert_eq!(
                fs::read_dir(&outs).unwrap().count(),
                0,
                "one core: {one_core}"
            );
        }
        crate::gather::ONE_CORE.with(|c| c.set(false));
    }

    /// The write-behind counts what the page cache holds dirty: 1,024 files of 5 bytes, each
    /// in a 16 KiB cluster of its own (an exFAT of small files), are 4 MiB of pages and make
    /// one request spanning them all; 1,023 make none yet.
    #[test]
    fn write_behind_counts_whole_pages() {
        let (tx, rx) = mpsc::channel();
        let behind = Behind {
            tx,
            pending: std::cell::Cell::new(None),
        };
        let heap = 8u64 << 20;
        for i in 0..1023u64 {
            behind.done(heap + i * 16384, heap + i * 16384 + 5);
        }
        assert!(rx.try_recv().is_err());
        behind.done(heap + 1023 * 16384, heap + 1023 * 16384 + 5);
        assert_eq!(rx.try_recv().unwrap(), (heap, heap + 1023 * 16384 + 5));
        assert!(rx.try_recv().is_err());
        // A range across a page boundary dirties both pages.
        for _ in 0..512 {
            behind.done(4095, 4097);
        }
        assert_eq!(rx.try_recv().unwrap(), (4095, 4097));
    }
}
