//! The output writer's gathering: metadata, files the scan read and files of up to
//! [`GATHERED_FILE`], collected in offset order into large `pwrite`s instead of one call per
//! directory block or file. Where the machine has a second core, the files of each gathering
//! are read on a thread of their own (the filler) while the writer writes the gathering before
//! and gathers the next, the two halves of tar's pipe.
//!
//! Each run of a gathering spans a range of the output that nothing else writes (a gap
//! between two of its pieces is at most [`GATHER_GAP`] and lies in no other piece), so
//! gatherings written out of step with the rest of the image give the same bytes. What is
//! final for the `.bmap` hasher is tracked in [`crate::output::Frontier`]: a gathering handed
//! to the filler holds the frontier at its start until all its runs are written.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use blockwise_geometry::ContentRef;

use crate::content::HostContent;
use crate::output::Written;
use crate::Error;

/// Most bytes gathered for one `pwrite`.
pub(crate) const GATHER: usize = 4 << 20;
/// Files up to this size are read into the gathering and written with their neighbours, not
/// copied one by one (except onto XFS, btrfs and the like, where the copy shares blocks):
/// 100,000 files of ~10 KB into ext4 took 2.1 s one `copy_file_range` each and 1.5 s this way
/// (1.97 → 1.25 s in the kernel: one large write instead of a small one per file,
/// docs/performance.md). Larger files go by `copy_file_range`, which copies without passing
/// through user space (42 files of 100 MiB: 2.3 s, against 6.1 s read and written in 4 MiB).
pub(crate) const GATHERED_FILE: u64 = 1 << 20;
/// Most bytes of zeros between two gathered pieces written as zeros (inside one 4 KiB block
/// they are allocated anyway); a larger gap ends the write and stays a hole.
const GATHER_GAP: u64 = 4096;
/// Gatherings handed to the filler and not yet written, at most: one being filled while the
/// writer writes the one before.
const IN_FLIGHT: usize = 2;

/// Where gatherings go, and what their files are read from.
#[derive(Clone, Copy)]
pub(crate) struct Out<'a> {
    pub(crate) file: &'a File,
    pub(crate) path: &'a Path,
    pub(crate) written: Written<'a>,
    pub(crate) content: &'a HostContent,
}

impl Out<'_> {
    /// Writes `data` at `off` and reports it written.
    fn write(&self, data: &[u8], off: u64) -> Result<(), Error> {
        self.file
            .write_all_at(data, off)
            .map_err(|e| Error::write(self.path, e))?;
        self.written.done(off, off + data.len() as u64);
        Ok(())
    }
}

/// A file's range to be read into a gathering at `at`.
struct Fill {
    at: usize,
    r: ContentRef,
}

/// A run of a gathering: `buf[at..at + len]` goes to `off`.
struct Seg {
    off: u64,
    at: usize,
    len: usize,
}

/// One gathering: its runs go to the output once the files in `fills` are read into `buf`.
/// Runs apart by more than [`GATHER_GAP`] are written one `pwrite` each (the gap stays a
/// hole), but travel together: an exFAT of small files, one 32 KiB cluster each, is one
/// hand-over per 4 MiB, not one per file.
#[derive(Default)]
struct Batch {
    buf: Vec<u8>,
    segs: Vec<Seg>,
    fills: Vec<Fill>,
}

impl Batch {
    /// Where its first run goes.
    fn start(&self) -> u64 {
        self.segs.first().map_or(0, |s| s.off)
    }

    /// Writes its runs (its files read already).
    fn write(&self, out: Out<'_>) -> Result<(), Error> {
        for s in &self.segs {
            let data =
                s.at.checked_add(s.len)
                    .and_then(|end| self.buf.get(s.at..end))
                    .unwrap_or_default();
            out.write(data, s.off)?;
        }
        Ok(())
    }

    fn clear(&mut self) {
        self.buf.clear();
        self.segs.clear();
        self.fills.clear();
    }
}

/// The gathering in progress, and the filler where there is one.
pub(crate) struct Gather<'a> {
    cur: Batch,
    filler: Option<Filler<'a>>,
}

/// The writer's side of the filler thread.
struct Filler<'a> {
    to: mpsc::Sender<Batch>,
    back: mpsc::Receiver<(Batch, Result<(), Error>)>,
    /// Starts of the gatherings handed over, oldest first (they come back in this order).
    pending: VecDeque<u64>,
    /// Gatherings written, their memory kept for the next.
    spare: Vec<Batch>,
    stop: &'a AtomicBool,
}

#[cfg(test)]
thread_local! {
    /// Tests run the writer as on a machine of one core (no filler thread).
    pub(crate) static ONE_CORE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Tests slow the filler down by this many milliseconds per gathering, so that a hasher
/// reading ahead of it would see the gathering's range before it is written.
#[cfg(test)]
pub(crate) static FILL_DELAY_MS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

fn one_core() -> bool {
    #[cfg(test)]
    return ONE_CORE.with(std::cell::Cell::get);
    #[cfg(not(test))]
    false
}

/// Runs `body` with a [`Gather`], its filler on a thread beside it where the machine has two
/// cores. An error from `body` stops the filler before it is waited for.
pub(crate) fn with_gather<R>(
    content: &HostContent,
    body: impl FnOnce(&mut Gather<'_>) -> Result<R, Error>,
) -> Result<R, Error> {
    let two = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1) && !one_core();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (to, from_writer) = mpsc::channel();
        let (to_writer, back) = mpsc::channel();
        let stop = &stop;
        let started = two
            && std::thread::Builder::new()
                .spawn_scoped(s, move || fill_loop(content, from_writer, to_writer, stop))
                .is_ok();
        let mut gather = Gather {
            cur: Batch {
                buf: Vec::with_capacity(GATHER),
                ..Batch::default()
            },
            filler: started.then(|| Filler {
                to,
                back,
                pending: VecDeque::new(),
                spare: Vec::new(),
                stop,
            }),
        };
        let result = body(&mut gather);
        if result.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        // `gather` (the sender) is dropped here: the filler ends, and the scope waits for it.
        result
    })
}

/// The filler: reads each gathering's files into it, in the order handed over; once told to
/// stop, hands the rest back unread.
fn fill_loop(
    content: &HostContent,
    batches: mpsc::Receiver<Batch>,
    back: mpsc::Sender<(Batch, Result<(), Error>)>,
    stop: &AtomicBool,
) {
    for mut b in batches {
        let result = if stop.load(Ordering::Relaxed) {
            Err(Error::Cancelled)
        } else {
            fill(content, &mut b)
        };
        if back.send((b, result)).is_err() {
            break;
        }
    }
}

/// Reads the files of `b` into it, each checked against the scan after it is read.
fn fill(content: &HostContent, b: &mut Batch) -> Result<(), Error> {
    #[cfg(test)]
    std::thread::sleep(std::time::Duration::from_millis(
        FILL_DELAY_MS.load(Ordering::Relaxed),
    ));
    for f in &b.fills {
        let len = usize::try_from(f.r.len).ok();
        let buf = len
            .and_then(|n| b.buf.get_mut(f.at..f.at.checked_add(n)?))
            .ok_or_else(|| content.shrunk(f.r.content))?;
        let src = content.open(f.r.content)?;
        read_range(&src, buf, f.r, content)?;
        content.check(f.r.content, &src)?;
    }
    Ok(())
}

/// Reads `r` from `src` into `buf` (`r.len` bytes): a file that ends short has changed.
fn read_range(
    src: &File,
    buf: &mut [u8],
    r: ContentRef,
    content: &HostContent,
) -> Result<(), Error> {
    src.read_exact_at(buf, r.offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            content.shrunk(r.content)
        } else {
            Error::io(content.path(r.content).unwrap_or_else(|| "?".into()), e)
        }
    })
}

impl Gather<'_> {
    /// Adds `data` at `off` (at or after what it holds); data of [`GATHER`] bytes or more is
    /// written as it is.
    pub(crate) fn push(&mut self, off: u64, data: &[u8], out: Out<'_>) -> Result<(), Error> {
        if data.len() >= GATHER {
            self.flush(out)?;
            // Large metadata (inode tables, FATs) goes out as it is.
            return out.write(data, off);
        }
        let at = self.room(off, data.len(), out)?;
        if let Some(dst) = self.cur.buf.get_mut(at..) {
            dst.copy_from_slice(data);
        }
        Ok(())
    }

    /// Adds the file range `r` (at most [`GATHERED_FILE`] bytes) at `off`, to be read when
    /// the gathering is written.
    pub(crate) fn push_file(&mut self, off: u64, r: ContentRef, out: Out<'_>) -> Result<(), Error> {
        let len = usize::try_from(r.len)
            .ok()
            .filter(|&n| n < GATHER)
            .ok_or_else(|| {
                let what = format!("a file range of {} bytes is too large to gather", r.len);
                Error::write(out.path, std::io::Error::other(what))
            })?;
        let at = self.room(off, len, out)?;
        self.cur.fills.push(Fill { at, r });
        Ok(())
    }

    /// Room for `len` bytes (less than [`GATHER`]) at `off`, after what the gathering holds:
    /// in its last run when `off` follows it closely (the gap zeros), else in a run of its
    /// own; what it holds is written first when `len` would overfill it. Returns where in
    /// the gathering they go.
    fn room(&mut self, off: u64, len: usize, out: Out<'_>) -> Result<usize, Error> {
        let gap = |b: &Batch| {
            let s = b.segs.last()?;
            let gap = off.checked_sub(s.off.checked_add(s.len as u64)?)?;
            (gap <= GATHER_GAP).then_some(gap as usize)
        };
        let need = gap(&self.cur).unwrap_or(0).saturating_add(len);
        if self.cur.buf.len().saturating_add(need) > GATHER {
            self.flush(out)?;
        }
        let b = &mut self.cur;
        match gap(b) {
            Some(g) => {
                if let Some(s) = b.segs.last_mut() {
                    s.len += g + len;
                }
                b.buf.resize(b.buf.len() + g + len, 0);
            }
            None => {
                b.segs.push(Seg {
                    off,
                    at: b.buf.len(),
                    len,
                });
                b.buf.resize(b.buf.len() + len, 0);
            }
        }
        Ok(b.buf.len() - len)
    }

    /// Writes what it holds, or hands it to the filler when it has files to read; writes
    /// what the filler has handed back meanwhile.
    pub(crate) fn flush(&mut self, out: Out<'_>) -> Result<(), Error> {
        if let Some(f) = self.filler.as_mut() {
            f.write_back(out, false)?;
        }
        if self.cur.segs.is_empty() {
            return Ok(());
        }
        match self.filler.as_mut() {
            Some(f) if !self.cur.fills.is_empty() => {
                let next = f.spare(out)?;
                let b = std::mem::replace(&mut self.cur, next);
                f.hand(b, out)
            }
            _ => {
                fill(out.content, &mut self.cur)?;
                self.cur.write(out)?;
                self.cur.clear();
                Ok(())
            }
        }
    }

    /// Writes what it holds and everything handed to the filler.
    pub(crate) fn finish(&mut self, out: Out<'_>) -> Result<(), Error> {
        self.flush(out)?;
        if let Some(f) = self.filler.as_mut() {
            f.write_back(out, true)?;
        }
        Ok(())
    }
}

impl Filler<'_> {
    /// Hands `b` over to be filled.
    fn hand(&mut self, b: Batch, out: Out<'_>) -> Result<(), Error> {
        let start = b.start();
        if self.to.send(b).is_err() {
            return Err(gone(out));
        }
        if self.pending.is_empty() {
            out.written.frontier.held.set(start);
        }
        self.pending.push_back(start);
        Ok(())
    }

    /// An empty gathering: one written before, a new one, or (with [`IN_FLIGHT`] handed
    /// over) the oldest handed over, once it is back and written.
    fn spare(&mut self, out: Out<'_>) -> Result<Batch, Error> {
        if self.spare.is_empty() && self.pending.len() >= IN_FLIGHT {
            self.take_one(out, true)?;
        }
        Ok(self.spare.pop().unwrap_or_else(|| Batch {
            buf: Vec::with_capacity(GATHER),
            ..Batch::default()
        }))
    }

    /// Writes the gatherings the filler has handed back: those back already, or (`all`)
    /// every one handed over.
    fn write_back(&mut self, out: Out<'_>, all: bool) -> Result<(), Error> {
        while !self.pending.is_empty() {
            if !self.take_one(out, all)? {
                break;
            }
        }
        Ok(())
    }

    /// Writes the oldest gathering handed over when it is back (waiting for it with `wait`);
    /// false when it is not back yet.
    fn take_one(&mut self, out: Out<'_>, wait: bool) -> Result<bool, Error> {
        let got = if wait {
            self.back.recv().map_err(|_| gone(out))?
        } else {
            match self.back.try_recv() {
                Ok(got) => got,
                Err(mpsc::TryRecvError::Empty) => return Ok(false),
                Err(mpsc::TryRecvError::Disconnected) => return Err(gone(out)),
            }
        };
        let (mut b, result) = got;
        if let Err(e) = result {
            self.stop.store(true, Ordering::Relaxed);
            return Err(e);
        }
        // Written while it still holds the frontier at its start: the hasher must not read
        // past its first run before the last is written.
        b.write(out)?;
        self.pending.pop_front();
        let held = self.pending.front().copied().unwrap_or(u64::MAX);
        out.written.frontier.held.set(held);
        out.written.tell_hasher();
        b.clear();
        self.spare.push(b);
        Ok(true)
    }
}

/// The error for a filler thread that is gone with gatherings not handed back (it never
/// ends first on its own).
fn gone(out: Out<'_>) -> Error {
    Error::write(
        out.path,
        std::io::Error::other("the thread reading files into the output stopped"),
    )
}
