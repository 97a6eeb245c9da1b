//! The writer: mapped ranges in erase-block-aligned chunks, the next chunk read while the
//! current one is written (a second thread), block 0 and the GPT headers last, then sync,
//! verify and statistics.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use crate::buf::AlignedBuf;
use crate::{Device, Error, Refusal, Source, SourceError, Verify};

/// The largest chunk: four times the largest erase block blockwise plans for. Larger chunks
/// only cost memory (three buffers of it are in flight, and with a `.bmap` those the check
/// may lag behind by, 32 MiB's worth) and delay a cancel.
pub const MAX_CHUNK: u64 = 64 << 20;

/// How far (in bytes of buffers) the `.bmap` check may fall behind the device writer before
/// the reader waits for it: with 4 MiB chunks, eight buffers more than without a check.
/// Measured on a loop device in memory, whose chunks come at 0.4–3.3 GB/s around a SHA-256
/// of 2 GB/s: one buffer of slack made the write 0.85× as fast as without the check, four
/// 0.96×, six to sixteen 0.97–1.03× (docs/performance.md).
const CHECK_SLACK: u64 = 32 << 20;

/// How to write.
#[derive(Debug, Clone)]
pub struct Options {
    /// Chunk size in bytes (writes never cross a multiple of it); a multiple of the block
    /// size, at most [`MAX_CHUNK`]. Default 4 MiB, the usual erase block.
    pub chunk: u64,
    /// Write zeros also where the source says its holes are free space
    /// ([`Source::holes_are_free`]); other holes are written as zeros anyway on a target that
    /// does not read zeros there.
    pub zero_holes: bool,
    /// Discard (BLKDISCARD) the whole device first.
    pub discard: bool,
    /// Read back and compare after writing.
    pub verify: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            chunk: 4 << 20,
            zero_holes: false,
            discard: false,
            verify: false,
        }
    }
}

impl Options {
    /// Sets the chunk size.
    #[must_use]
    pub fn chunk(mut self, bytes: u64) -> Self {
        self.chunk = bytes;
        self
    }
    /// Sets `zero_holes`.
    #[must_use]
    pub fn zero_holes(mut self, on: bool) -> Self {
        self.zero_holes = on;
        self
    }
    /// Sets `discard`.
    #[must_use]
    pub fn discard(mut self, on: bool) -> Self {
        self.discard = on;
        self
    }
    /// Sets `verify`.
    #[must_use]
    pub fn verify(mut self, on: bool) -> Self {
        self.verify = on;
        self
    }
}

/// Min, median and max of the per-chunk write rates (MB/s, 10^6 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Slowest chunk.
    pub min: f64,
    /// Median chunk.
    pub median: f64,
    /// Fastest chunk.
    pub max: f64,
}

/// What a write measured. Rates are in MB/s (10^6 bytes per second).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Bytes the device acknowledged (image data, zeros for holes with `zero_holes`, cleared
    /// stale GPT headers).
    pub bytes_written: u64,
    /// Seconds from the first write to the end of the final fdatasync.
    pub seconds: f64,
    /// `bytes_written` over `seconds`: the honest end-to-end rate.
    pub mb_per_s: f64,
    /// Per-chunk write rates.
    pub chunk_mb_per_s: Rates,
    /// Seconds spent in fdatasync.
    pub fsync_seconds: f64,
    /// Whether the read-back compare ran and passed.
    pub verified: bool,
    /// Read-back rate, when verified.
    pub verify_mb_per_s: Option<f64>,
}

/// The result of a write that did not fail.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Measurements.
    pub stats: Stats,
    /// Stopped early by the cancel flag. While writing (`verified_bytes` is 0 and
    /// `interrupted_verifying` false) block 0 was not written; during the read-back the
    /// image was written in full but not verified.
    pub interrupted: bool,
    /// The cancel came during the read-back (`--verify`): every byte was written and synced,
    /// `verified_bytes` of them were read back and matched.
    pub interrupted_verifying: bool,
    /// Bytes read back and matched (all of them when `stats.verified`).
    pub verified_bytes: u64,
    /// End of the last range written.
    pub offset_reached: u64,
    /// The image size (known at the end for streams).
    pub image_size: u64,
    /// Bytes of the image that were mapped (written as data).
    pub mapped_bytes: u64,
    /// Things to tell the user (holes kept, discard, stale GPT cleared, re-read table).
    pub notes: Vec<String>,
}

/// Progress of a write, for a bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Writing starts; `total` bytes to write when known.
    Writing {
        /// Bytes to write, when known.
        total: Option<u64>,
    },
    /// Bytes written so far.
    Written(u64),
    /// Final flush.
    Syncing,
    /// Read-back starts.
    Verifying {
        /// Bytes to read back.
        total: u64,
    },
    /// Bytes read back so far.
    Verified(u64),
}

const VERIFY_BLOCK: usize = 4096;
/// Largest single read of the read-back, so that a cancel is seen within one read even on a
/// slow card (1 MiB at 2 MB/s: half a second).
const VERIFY_READ: usize = 1 << 20;

/// A piece to write: `[start, end)`, held back to the end when `hold`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    start: u64,
    end: u64,
    hold: bool,
}

/// Yields the pieces to write in ascending order: ranges widened to `block`, merged, cut at
/// multiples of `chunk`, at `head_end` and at `tail_start` (the held-back pieces).
#[derive(Debug)]
struct Pieces {
    ranges: Vec<(u64, u64)>,
    idx: usize,
    pos: u64,
    chunk: u64,
    head_end: u64,
    tail_start: Option<u64>,
}

impl Pieces {
    fn new(ranges: &[(u64, u64)], block: u64, chunk: u64, tail: Option<u64>) -> Self {
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for &(s, e) in ranges {
            if e <= s {
                continue;
            }
            let s = s / block * block;
            let e = e
                .checked_next_multiple_of(block)
                .unwrap_or(u64::MAX / block * block);
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let pos = merged.first().map_or(0, |r| r.0);
        Pieces {
            ranges: merged,
            idx: 0,
            pos,
            chunk,
            head_end: block.saturating_mul(2),
            tail_start: tail,
        }
    }

    fn mapped(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }
}

impl Iterator for Pieces {
    type Item = Piece;
    fn next(&mut self) -> Option<Piece> {
        let &(_, end) = self.ranges.get(self.idx)?;
        let start = self.pos;
        let mut stop = start
            .saturating_add(self.chunk - start % self.chunk)
            .min(end);
        let mut hold = false;
        if start < self.head_end {
            stop = stop.min(self.head_end);
            hold = true;
        }
        if let Some(t) = self.tail_start {
            if start < t {
                stop = stop.min(t);
            } else {
                hold = true;
            }
        }
        if stop >= end {
            self.idx += 1;
            self.pos = self.ranges.get(self.idx).map_or(end, |r| r.0);
        } else {
            self.pos = stop;
        }
        Some(Piece {
            start,
            end: stop,
            hold,
        })
    }
}

/// A written piece and the CRC-32C of each 4096-byte block of it, for the read-back.
#[derive(Debug)]
struct Written {
    offset: u64,
    len: u64,
    crcs: Vec<u32>,
}

fn crcs(data: &[u8]) -> Vec<u32> {
    data.chunks(VERIFY_BLOCK).map(crc32c::crc32c).collect()
}

fn write_all(dev: &mut dyn Device, offset: u64, data: &[u8], before: u64) -> Result<(), Error> {
    let mut done = 0usize;
    while done < data.len() {
        let at = offset + done as u64;
        match dev.write_at(at, data.get(done..).unwrap_or_default()) {
            Ok(0) => {
                return Err(Error::ShortWrite {
                    offset: at,
                    written: before + done as u64,
                })
            }
            Ok(n) => done += n,
            Err(e) => {
                return Err(Error::Write {
                    offset: at,
                    written: before + done as u64,
                    source: e,
                })
            }
        }
    }
    Ok(())
}

struct Job {
    offset: u64,
    len: usize,
    /// Shared with the verifier's thread, when there is one: whichever finishes with it last
    /// returns it to the pool (`Arc::into_inner`).
    buf: Arc<AlignedBuf>,
}

/// Bytes for the verifier: `len` bytes of `buf` read at `offset`.
struct Check {
    offset: u64,
    len: usize,
    buf: Arc<AlignedBuf>,
}

/// Runs the source's check ([`Source::take_verifier`]: a bmap's range checksums) over every
/// byte read, in read order, on a thread of its own beside the device writer; returns the
/// buffers it was the last to hold to the pool. The first failure stops the checking, sets
/// `failed` (the reader then stops) and is returned with the offset it was found at; at the
/// end of the input the check must be complete (`Verify::finish`).
fn run_verifier(
    mut v: Box<dyn Verify>,
    rx: mpsc::Receiver<Check>,
    ret: &mpsc::Sender<AlignedBuf>,
    failed: &AtomicBool,
    cancel: &AtomicBool,
) -> Result<(), (u64, SourceError)> {
    let mut result = Ok(());
    for c in rx {
        if result.is_ok() && !cancel.load(Ordering::Relaxed) {
            let data = c.buf.get(..c.len).unwrap_or_default();
            if let Err(e) = v.update(c.offset, data) {
                failed.store(true, Ordering::Relaxed);
                result = Err((c.offset, e));
            }
        }
        if let Some(b) = Arc::into_inner(c.buf) {
            let _ = ret.send(b);
        }
    }
    result?;
    // u64::MAX: the end of what was read (the caller knows it).
    v.finish().map_err(|e| (u64::MAX, e))
}

fn alloc(len: usize, align: usize) -> Result<AlignedBuf, Error> {
    AlignedBuf::new(len, align).ok_or(Error::Alloc { bytes: len })
}

fn median(mut v: Vec<f64>) -> Rates {
    v.sort_by(f64::total_cmp);
    match (v.first(), v.last()) {
        (Some(&min), Some(&max)) => Rates {
            min,
            median: v.get(v.len() / 2).copied().unwrap_or(min),
            max,
        },
        _ => Rates::default(),
    }
}

fn is_gpt_header(b: &[u8]) -> bool {
    b.starts_with(b"EFI PART")
}

/// Writes `src` to `dev`.
///
/// Only the mapped ranges are written (all of the image with `zero_holes`), widened to the
/// block size, in pieces that never cross a multiple of `opts.chunk`. The first two blocks
/// (MBR / protective MBR and the GPT header) and the image's last block (the backup GPT
/// header) are held back and written after everything else has been synced, LBA 1 before
/// LBA 0, so an interrupted write never leaves a valid-looking table. When the device held a
/// GPT and the image has none at LBA 1, the stale headers (LBA 1, last LBA) are zeroed.
///
/// `cancel` is checked before each piece: when set, the pieces in flight are finished,
/// synced, and the outcome says `interrupted` (block 0 untouched). `progress` sees
/// [`Event`]s.
pub fn write(
    dev: &mut dyn Device,
    src: &mut dyn Source,
    opts: &Options,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Event),
) -> Result<Outcome, Error> {
    // Checks and plan: the options, the device's size against the image, the pieces.
    let mut plan = Plan::new(dev, src, opts)?;
    let mut notes = Vec::new();
    // A regular file is emptied now (not when opened: the caller checks first that it is not
    // an input), so the holes read as zeros afterwards.
    dev.prepare().map_err(|source| Error::Write {
        offset: 0,
        written: 0,
        source,
    })?;
    let mut old = OldGpt::read(dev, plan.block, plan.align)?;
    discard_first(dev, opts, &mut notes);

    // The body: every piece but the held-back head and backup header, checked by the
    // source's verifier when it has one.
    progress(Event::Writing {
        total: plan.mapped_total,
    });
    let started = Instant::now();
    let mut body = write_body(dev, src, opts, &mut plan, cancel, progress)?;
    progress(Event::Written(body.written));
    let image_size = plan.size.unwrap_or(body.image_end);

    // Flush the body before anything that makes the device look like it holds a table.
    let mut fsync = Fsync::default();
    progress(Event::Syncing);
    fsync.sync(dev, body.written)?;
    // A cancel that came during the last pieces still keeps block 0 unwritten.
    let mut interrupted = body.interrupted | cancel.load(Ordering::Relaxed);

    // Stale GPT headers cleared, then the held pieces with block 0 last, then flushed again.
    if !interrupted {
        clear_stale_gpt(dev, &plan, &mut old, opts.verify, &mut body, &mut notes)?;
        write_held(dev, &plan, &mut body)?;
        fsync.sync(dev, body.written)?;
        dev.finish(image_size).map_err(|source| Error::Sync {
            written: body.written,
            source,
        })?;
        reread_partitions(dev, &mut notes);
    }
    let seconds = started.elapsed().as_secs_f64();
    if let Some(note) = kept_holes(dev, opts, &plan, image_size, interrupted) {
        notes.push(note);
    }
    let written = body.written;
    let mut stats = Stats {
        bytes_written: written,
        seconds,
        mb_per_s: if seconds > 0.0 {
            written as f64 / 1e6 / seconds
        } else {
            0.0
        },
        chunk_mb_per_s: median(body.rates),
        fsync_seconds: fsync.seconds,
        verified: false,
        verify_mb_per_s: None,
    };

    // Read back and compare what was written.
    let mut verified_bytes = 0u64;
    let mut interrupted_verifying = false;
    if opts.verify && !interrupted {
        let back = read_back(dev, &plan, &mut body.records, cancel, progress)?;
        verified_bytes = back.bytes;
        if back.interrupted {
            interrupted_verifying = true;
            interrupted = true;
        } else {
            stats.verified = true;
            stats.verify_mb_per_s = Some(back.mb_per_s);
        }
    }

    // Report.
    Ok(Outcome {
        stats,
        interrupted,
        interrupted_verifying,
        verified_bytes,
        offset_reached: body.reached,
        image_size,
        mapped_bytes: plan.mapped_total.unwrap_or(body.image_end),
        notes,
    })
}

/// What [`write`] decides before touching the device.
struct Plan {
    /// The device's block size (at least 512).
    block: u64,
    /// The device's memory alignment for buffers.
    align: usize,
    /// The image size, when the source knows it.
    size: Option<u64>,
    /// `size` rounded up to the block size.
    padded: Option<u64>,
    /// Length of each buffer of the body.
    chunk_len: usize,
    /// The ranges to write: the source's mapped ones, or all of the image.
    ranges: Vec<(u64, u64)>,
    pieces: Pieces,
    /// Bytes the pieces cover, when the image size is known.
    mapped_total: Option<u64>,
    /// Holes are written as zeros: asked for, or not known to be free space on a target that
    /// does not read zeros there.
    zero_holes: bool,
    /// The image's own data ranges in bytes, to say how many zeros were added.
    own_data: u64,
}

impl Plan {
    /// Checks the chunk size and that the image fits the device, and cuts the ranges into
    /// pieces. Reads only sizes; the device is not touched.
    fn new(dev: &dyn Device, src: &dyn Source, opts: &Options) -> Result<Plan, Error> {
        let block = u64::from(dev.block_size().max(512));
        if opts.chunk > MAX_CHUNK {
            return Err(Error::Options(format!(
                "chunk size {}: at most {} (64 MiB); erase blocks are 4 to 16 MiB and larger chunks only cost memory",
                opts.chunk,
                MAX_CHUNK
            )));
        }
        if opts.chunk == 0 || opts.chunk % block != 0 {
            return Err(Error::Options(format!(
                "chunk size {} must be a non-zero multiple of the block size {block}",
                opts.chunk
            )));
        }
        let align = dev.mem_align();
        let size = src.size();
        let padded = size.map(|s| s.checked_next_multiple_of(block).unwrap_or(u64::MAX));
        // Buffers no larger than the image (a 1 MiB image with 64 MiB chunks needs 1 MiB ones).
        let buf_len = padded.map_or(opts.chunk, |p| p.clamp(block, opts.chunk));
        let chunk_len = usize::try_from(buf_len).map_err(|_| Error::Alloc { bytes: usize::MAX })?;
        if let (Some(p), Some(len)) = (padded, dev.size()) {
            if p > len {
                return Err(Refusal::TooSmall {
                    dev: "the target".into(),
                    dev_bytes: len,
                    image_bytes: size.unwrap_or(p),
                }
                .into());
            }
        }
        // Holes are skipped only where the image says they are free space (a block map,
        // DONT_CARE chunks, a build's map) or the target reads zeros there anyway (a regular
        // file, emptied first); otherwise (a sparse file's holes, a zstd stream's all-zero
        // frames) they may be a zeroed table, and the card's old bytes must not show through.
        let zero_holes = opts.zero_holes || (!src.holes_are_free() && !dev.holes_read_zero());
        let own_data: u64 = src.ranges().map_or(u64::MAX, |r| {
            r.iter().map(|(a, b)| b.saturating_sub(*a)).sum()
        });
        let ranges = match (zero_holes, size, src.ranges()) {
            (true, Some(s), _) => vec![(0, s)],
            (_, _, Some(r)) => r,
            (_, _, None) => vec![(0, u64::MAX)],
        };
        let tail = padded
            .and_then(|p| p.checked_sub(block))
            .filter(|&t| t >= block * 2);
        let pieces = Pieces::new(&ranges, block, opts.chunk, tail);
        let mapped_total = size.map(|_| pieces.mapped());
        Ok(Plan {
            block,
            align,
            size,
            padded,
            chunk_len,
            ranges,
            pieces,
            mapped_total,
            zero_holes,
            own_data,
        })
    }
}

/// What the device held at LBA 1 and its last LBA, read before anything is written.
struct OldGpt {
    /// A GPT header at LBA 1.
    primary: bool,
    /// A GPT header at `dev_last`.
    backup: bool,
    /// The device's last block, when it has one past LBA 1.
    dev_last: Option<u64>,
    /// One block of memory, reused to write zeros over a stale header.
    probe: AlignedBuf,
}

impl OldGpt {
    fn read(dev: &mut dyn Device, block: u64, align: usize) -> Result<OldGpt, Error> {
        let mut probe = alloc(usize::try_from(block).unwrap_or(4096), align)?;
        let primary = dev.read_at(block, &mut probe).is_ok_and(|n| n > 0) && is_gpt_header(&probe);
        let dev_last = dev
            .size()
            .and_then(|l| l.checked_sub(block))
            .filter(|&l| l > block);
        let backup = dev_last.is_some_and(|l| {
            probe.fill(0);
            dev.read_at(l, &mut probe).is_ok_and(|n| n > 0) && is_gpt_header(&probe)
        });
        Ok(OldGpt {
            primary,
            backup,
            dev_last,
            probe,
        })
    }
}

/// Discards the whole device first when `opts.discard`; the notes say whether it was done.
fn discard_first(dev: &mut dyn Device, opts: &Options, notes: &mut Vec<String>) {
    if opts.discard {
        match dev.size() {
            Some(len) => match dev.discard(0, len) {
                Ok(()) => notes.push(format!("discarded all {len} bytes first")),
                Err(e) => notes.push(format!("discard not done: {e}")),
            },
            None => notes.push("discard not done: the target is a file".into()),
        }
    }
}

/// What the body of a write left behind.
struct Body {
    /// Per-chunk write rates.
    rates: Vec<f64>,
    /// Bytes the device acknowledged.
    written: u64,
    /// End of the last range written.
    reached: u64,
    /// End of the image data read.
    image_end: u64,
    /// Pieces held back for the end: the head (blocks 0 and 1) and the backup GPT header.
    held: Vec<(u64, Arc<AlignedBuf>, usize)>,
    /// What was written, for the read-back (`opts.verify`).
    records: Vec<Written>,
    /// The cancel flag stopped the reading.
    interrupted: bool,
}

/// Writes every piece that is not held back: this thread reads the source while a second
/// one writes the previous piece to the device (and a third runs the source's check, when it
/// has one). Fails on a write error, a source error or a failed check; nothing is synced.
fn write_body(
    dev: &mut dyn Device,
    src: &mut dyn Source,
    opts: &Options,
    plan: &mut Plan,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Event),
) -> Result<Body, Error> {
    let (block, align, chunk_len) = (plan.block, plan.align, plan.chunk_len);
    let pieces = &mut plan.pieces;
    let written = AtomicU64::new(0);
    let mut held: Vec<(u64, Arc<AlignedBuf>, usize)> = Vec::new();
    let mut records: Vec<Written> = Vec::new();
    let mut reached = 0u64;
    let mut image_end = 0u64;
    let mut interrupted = false;
    let mut source_err: Option<Error> = None;

    let (job_tx, job_rx) = mpsc::sync_channel::<Job>(1);
    let (ret_tx, ret_rx) = mpsc::channel::<AlignedBuf>();
    // The bmap check, when the source has one, hashes on a thread of its own: it sees each
    // buffer while the device writer writes it, so the write never waits for the hash unless
    // the hash is the slower of the two over [`CHECK_SLACK`] bytes: a device faster than one
    // SHA-256 in bursts (a loop device in memory) lets the hash catch up between them.
    let verifier = src.take_verifier();
    let slack = if verifier.is_some() {
        usize::try_from(CHECK_SLACK / (chunk_len as u64).max(1))
            .unwrap_or(1)
            .max(1)
    } else {
        0
    };
    for _ in 0..(3 + slack) {
        ret_tx
            .send(alloc(chunk_len, align)?)
            .map_err(|_| Error::Alloc { bytes: chunk_len })?;
    }
    let check_failed = AtomicBool::new(false);
    let check_result: Mutex<Option<Result<(), (u64, SourceError)>>> = Mutex::new(None);
    let worker = std::thread::scope(|scope| {
        let written = &written;
        let dev_ref: &mut dyn Device = &mut *dev;
        let (check_tx, check_handle) = match verifier {
            Some(v) => {
                let (tx, rx) = mpsc::channel::<Check>();
                let (ret, failed, result) = (ret_tx.clone(), &check_failed, &check_result);
                let h = scope.spawn(move || {
                    let r = run_verifier(v, rx, &ret, failed, cancel);
                    if let Ok(mut slot) = result.lock() {
                        *slot = Some(r);
                    }
                });
                (Some(tx), Some(h))
            }
            None => (None, None),
        };
        let handle = scope.spawn(move || write_jobs(dev_ref, job_rx, ret_tx, written, cancel));
        for piece in pieces.by_ref() {
            if cancel.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            // The verifier found a mismatch: stop reading; its error is returned below.
            if check_failed.load(Ordering::Relaxed) {
                break;
            }
            let want = usize::try_from(piece.end - piece.start).unwrap_or(chunk_len);
            let mut buf = if piece.hold {
                match alloc(want, align) {
                    Ok(b) => b,
                    Err(e) => {
                        source_err = Some(e);
                        break;
                    }
                }
            } else {
                match ret_rx.recv() {
                    Ok(b) => b,
                    Err(_) => break, // the writer failed; its error comes from join
                }
            };
            let dst = buf.get_mut(..want).unwrap_or_default();
            let n = match src.read(piece.start, dst) {
                Ok(n) => n,
                Err(source) => {
                    source_err = Some(Error::Source {
                        offset: piece.start,
                        written: written.load(Ordering::Relaxed),
                        source,
                    });
                    break;
                }
            };
            image_end = image_end.max(piece.start + n as u64);
            let len = (n as u64).next_multiple_of(block).min(want as u64);
            let len = usize::try_from(len).unwrap_or(want);
            if let Some(pad) = buf.get_mut(n..len) {
                pad.fill(0);
            }
            if len == 0 {
                break;
            }
            if opts.verify {
                records.push(Written {
                    offset: piece.start,
                    len: len as u64,
                    crcs: crcs(buf.get(..len).unwrap_or_default()),
                });
            }
            let buf = Arc::new(buf);
            if let Some(tx) = &check_tx {
                let _ = tx.send(Check {
                    offset: piece.start,
                    len: n,
                    buf: Arc::clone(&buf),
                });
            }
            if piece.hold {
                held.push((piece.start, buf, len));
            } else {
                if job_tx
                    .send(Job {
                        offset: piece.start,
                        len,
                        buf,
                    })
                    .is_err()
                {
                    break;
                }
                progress(Event::Written(written.load(Ordering::Relaxed)));
            }
            if n < want {
                break; // end of a stream
            }
            if cancel.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
        }
        drop(job_tx);
        drop(check_tx);
        let r = handle
            .join()
            .unwrap_or_else(|_| Err(Error::Options("the writer thread panicked".into())));
        if let Some(h) = check_handle {
            if h.join().is_err() {
                return Err(Error::Options("the verifier thread panicked".into()));
            }
        }
        r
    });
    let (rates, written_end) = worker?;
    reached = reached.max(written_end);
    if let Some(e) = source_err {
        return Err(e);
    }
    // The check must have passed before anything is synced and block 0 written; after a
    // cancel it is incomplete by design (block 0 stays unwritten anyway).
    let checked = check_result.into_inner().ok().flatten();
    if let Some(Err((offset, source))) = checked {
        if !(interrupted || cancel.load(Ordering::Relaxed)) {
            return Err(Error::Source {
                offset: if offset == u64::MAX {
                    image_end
                } else {
                    offset
                },
                written: written.load(Ordering::Relaxed),
                source,
            });
        }
    }
    Ok(Body {
        rates,
        written: written.into_inner(),
        reached,
        image_end,
        held,
        records,
        interrupted,
    })
}

/// The device writer's thread: writes each job's buffer and returns it to the pool;
/// gives the per-chunk rates and the end of what it wrote.
fn write_jobs(
    dev: &mut dyn Device,
    jobs: mpsc::Receiver<Job>,
    ret_tx: mpsc::Sender<AlignedBuf>,
    written: &AtomicU64,
    cancel: &AtomicBool,
) -> Result<(Vec<f64>, u64), Error> {
    let mut rates = Vec::new();
    let mut end = 0u64;
    for job in jobs {
        // Once cancelled, queued chunks are dropped: only the one being written
        // delays the stop.
        if cancel.load(Ordering::Relaxed) {
            break;
        }
        let t = Instant::now();
        let data = job.buf.get(..job.len).unwrap_or_default();
        write_all(dev, job.offset, data, written.load(Ordering::Relaxed))?;
        let secs = t.elapsed().as_secs_f64();
        if secs > 0.0 {
            rates.push(job.len as f64 / 1e6 / secs);
        }
        written.fetch_add(job.len as u64, Ordering::Relaxed);
        end = end.max(job.offset + job.len as u64);
        if let Some(b) = Arc::into_inner(job.buf) {
            if ret_tx.send(b).is_err() {
                break;
            }
        }
    }
    Ok((rates, end))
}

/// Time spent in fdatasync.
#[derive(Default)]
struct Fsync {
    seconds: f64,
}

impl Fsync {
    fn sync(&mut self, dev: &mut dyn Device, written: u64) -> Result<(), Error> {
        let t = Instant::now();
        dev.sync()
            .map_err(|source| Error::Sync { written, source })?;
        self.seconds += t.elapsed().as_secs_f64();
        Ok(())
    }
}

/// Zeroes the GPT headers the device held (LBA 1, its last LBA) that the image does not
/// overwrite.
fn clear_stale_gpt(
    dev: &mut dyn Device,
    plan: &Plan,
    old: &mut OldGpt,
    verify: bool,
    body: &mut Body,
    notes: &mut Vec<String>,
) -> Result<(), Error> {
    let block = plan.block;
    let image_gpt = body
        .held
        .iter()
        .find(|(o, _, len)| *o <= block && o + *len as u64 >= block * 2)
        .and_then(|(o, b, _)| b.get(usize::try_from(block - o).ok()?..))
        .is_some_and(is_gpt_header);
    let covers = |at: u64| plan.ranges.iter().any(|&(s, e)| s <= at && at < e);
    let mut clear = Vec::new();
    if old.primary && !image_gpt && !covers(block) {
        clear.push(block);
    }
    if let Some(l) = old.dev_last.filter(|_| old.backup) {
        if !(covers(l) || image_gpt && l + block == plan.padded.unwrap_or(0)) {
            clear.push(l);
        }
    }
    for at in clear {
        old.probe.fill(0);
        write_all(dev, at, &old.probe, body.written)?;
        body.written += block;
        notes.push(format!("cleared a stale GPT header at byte {at}"));
        if verify {
            body.records.push(Written {
                offset: at,
                len: block,
                crcs: crcs(&old.probe),
            });
        }
    }
    Ok(())
}

/// Writes the held pieces: the backup header first, then from the end of the head to
/// block 0, one block at a time (LBA 1 before LBA 0).
fn write_held(dev: &mut dyn Device, plan: &Plan, body: &mut Body) -> Result<(), Error> {
    let (block, align) = (plan.block, plan.align);
    body.held.sort_by_key(|(o, _, _)| std::cmp::Reverse(*o));
    for (offset, buf, len) in &body.held {
        let mut blocks: Vec<u64> = (0..(*len as u64 / block)).collect();
        if *offset < block * 2 {
            blocks.reverse(); // LBA 1 before LBA 0
        } else {
            blocks = vec![0];
        }
        if *offset >= block * 2 {
            write_all(
                dev,
                *offset,
                buf.get(..*len).unwrap_or_default(),
                body.written,
            )?;
            body.written += *len as u64;
            continue;
        }
        for i in blocks {
            let mut one = alloc(usize::try_from(block).unwrap_or(4096), align)?;
            let from = usize::try_from(i * block).unwrap_or(0);
            let to = from + one.len();
            one.copy_from_slice(buf.get(from..to).unwrap_or_default());
            write_all(dev, offset + i * block, &one, body.written)?;
            body.written += block;
        }
        body.reached = body.reached.max(offset + *len as u64);
    }
    Ok(())
}

/// Asks the kernel to re-read the partition table of a whole disk; the notes say how it went.
fn reread_partitions(dev: &mut dyn Device, notes: &mut Vec<String>) {
    if dev.is_disk() {
        match dev.reread_partitions() {
            Ok(()) => notes.push("the kernel re-read the partition table".into()),
            // A loop device without partition scanning: nothing to re-read, nothing to say.
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {}
            Err(e) => notes.push(format!(
                "the kernel did not re-read the partition table ({e}); replug the device or run partprobe"
            )),
        }
    }
}

/// The note for holes written as zeros because nothing said they were free space, or for
/// holes that were not written and keep the device's old bytes.
fn kept_holes(
    dev: &dyn Device,
    opts: &Options,
    plan: &Plan,
    image_size: u64,
    interrupted: bool,
) -> Option<String> {
    if plan.zero_holes && !opts.zero_holes && plan.size.is_some() {
        let holes = image_size.saturating_sub(plan.own_data);
        if holes > 0 && !interrupted {
            return Some(format!(
                "{holes} bytes of zeros outside the image's data were written too: no block map says they are free space (a .bmap beside the image skips them)"
            ));
        }
    }
    if !plan.zero_holes && plan.size.is_some() && !dev.holes_read_zero() {
        let holes = image_size.saturating_sub(plan.mapped_total.unwrap_or(0));
        if holes > 0 && !interrupted {
            return Some(format!(
                "{holes} bytes of holes in the image were not written and keep their old contents (--zero-holes writes zeros)"
            ));
        }
    }
    None
}

/// What the read-back found.
struct ReadBack {
    /// Bytes read back and matched.
    bytes: u64,
    /// The cancel flag stopped it.
    interrupted: bool,
    /// Its rate, when it was not interrupted.
    mb_per_s: f64,
}

/// Reads back every written record past the page cache and compares its checksums; a
/// mismatch or a failed read is an error.
fn read_back(
    dev: &mut dyn Device,
    plan: &Plan,
    records: &mut [Written],
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(Event),
) -> Result<ReadBack, Error> {
    let (align, chunk_len) = (plan.align, plan.chunk_len);
    let mut verified_bytes = 0u64;
    let mut interrupted_verifying = false;
    let t = Instant::now();
    let total: u64 = records.iter().map(|r| r.len).sum();
    progress(Event::Verifying { total });
    dev.drop_cache()
        .map_err(|source| Error::VerifyRead { offset: 0, source })?;
    let mut buf = alloc(chunk_len, align)?;
    records.sort_by_key(|r| r.offset);
    // Reads of at most VERIFY_READ bytes (whole 4 KiB checksum blocks), the cancel flag
    // checked before each: a Ctrl-C stops a long read-back within one read.
    let step = VERIFY_READ.min(chunk_len).max(VERIFY_BLOCK);
    'records: for r in records.iter() {
        let len = usize::try_from(r.len).unwrap_or(0);
        let mut checked = 0usize;
        while checked < len {
            if cancel.load(Ordering::Relaxed) {
                interrupted_verifying = true;
                break 'records;
            }
            let part = (len - checked).min(step);
            let at = r.offset + checked as u64;
            let mut got = 0usize;
            while got < part {
                let off = at + got as u64;
                match dev.read_at(off, buf.get_mut(got..part).unwrap_or_default()) {
                    Ok(0) => {
                        return Err(Error::VerifyRead {
                            offset: off,
                            source: std::io::ErrorKind::UnexpectedEof.into(),
                        })
                    }
                    Ok(n) => got += n,
                    Err(source) => {
                        return Err(Error::VerifyRead {
                            offset: off,
                            source,
                        })
                    }
                }
            }
            let data = buf.get(..part).unwrap_or_default();
            let first = checked / VERIFY_BLOCK;
            let crcs = r.crcs.get(first..).unwrap_or_default();
            for (i, (block_data, want)) in data.chunks(VERIFY_BLOCK).zip(crcs).enumerate() {
                if crc32c::crc32c(block_data) != *want {
                    return Err(Error::VerifyMismatch {
                        offset: at + (i * VERIFY_BLOCK) as u64,
                    });
                }
            }
            checked += part;
            verified_bytes += part as u64;
            progress(Event::Verified(verified_bytes));
        }
    }
    let mut mb_per_s = 0.0;
    if !interrupted_verifying {
        let secs = t.elapsed().as_secs_f64();
        mb_per_s = if secs > 0.0 {
            total as f64 / 1e6 / secs
        } else {
            0.0
        };
    }
    Ok(ReadBack {
        bytes: verified_bytes,
        interrupted: interrupted_verifying,
        mb_per_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(ranges: &[(u64, u64)], block: u64, chunk: u64, tail: Option<u64>) -> Vec<Piece> {
        Pieces::new(ranges, block, chunk, tail).collect()
    }

    fn p(start: u64, end: u64, hold: bool) -> Piece {
        Piece { start, end, hold }
    }

    #[test]
    fn pieces_widen_merge_and_cut_at_chunks_head_and_tail() {
        // Widened to 4096, merged, head [0, 8192) held, cut at 16 KiB chunks, tail held.
        assert_eq!(
            pieces(
                &[(100, 5000), (6000, 20_000), (40_960, 45_056)],
                4096,
                16_384,
                Some(40_960)
            ),
            [
                p(0, 8192, true),
                p(8192, 16_384, false),
                p(16_384, 20_480, false),
                p(40_960, 45_056, true),
            ]
        );
        // A range that starts past the head holds nothing back.
        assert_eq!(
            pieces(&[(1536, 2048)], 512, 4096, None),
            [p(1536, 2048, false)]
        );
        assert!(pieces(&[(10, 10)], 512, 4096, None).is_empty());
    }
}
