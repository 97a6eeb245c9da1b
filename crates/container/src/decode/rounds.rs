//! `verify` over a stream that can only be read forward (gzip, bzip2, lz4, a plain zstd, a
//! single-block xz): the synchronous verifier runs in rounds, as the browser does over a
//! `Blob` (`wasm/src/source.rs`).
//!
//! A round runs the verifier over [`Recorder`], a [`BlockSource`] over the windows fetched so
//! far: a read of anything else is served as zeros and recorded as missing. Then one forward
//! pass over the stream fetches every missing window; during the pass the verifier runs again
//! each time a run of windows arrives, and what it misses further ahead joins the same pass
//! (so chains of reads that go forward — a table, then a boot sector, then a FAT sector —
//! cost one pass, not one each). A round whose run misses nothing gives the report. Only the
//! windows verify asked for are kept (all-zero ones as a mark), at most [`KEEP_BYTES`];
//! passes are bounded by [`MAX_PASSES`].
//!
//! A stream whose size the container does not say is decoded once first, to learn it,
//! keeping its first and last MiB (the table and a GPT's backup header).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;

use blockwise_geometry::BlockSource;

use super::Decoded;
use crate::Error;

/// Unit of fetching: a miss is rounded out to whole windows.
pub const WINDOW: u64 = 64 << 10;
/// Most non-zero bytes kept for the verifier.
pub const KEEP_BYTES: u64 = 48 << 20;
/// Most forward passes over the stream (a size pass not counted).
pub const MAX_PASSES: u32 = 16;
/// Most verifier runs during one pass.
const MAX_RERUNS: u32 = 256;
/// What the size pass keeps of the start and of the end.
const EDGE: u64 = 1 << 20;
/// Read size of a pass.
const READ: u64 = 1 << 20;

/// The windows fetched so far.
#[derive(Debug, Default)]
pub struct Fetched {
    len: u64,
    /// Window index → bytes (`None`: all zero).
    windows: BTreeMap<u64, Option<Box<[u8]>>>,
    bytes: u64,
}

impl Fetched {
    /// Keeps window `w`'s bytes.
    fn insert(&mut self, w: u64, bytes: &[u8]) -> Result<(), Error> {
        let kept = if bytes.iter().all(|&b| b == 0) {
            None
        } else {
            self.bytes = self
                .bytes
                .saturating_add(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
            Some(Box::from(bytes))
        };
        if let Some(Some(old)) = self.windows.insert(w, kept) {
            self.bytes = self
                .bytes
                .saturating_sub(u64::try_from(old.len()).unwrap_or(0));
        }
        if self.bytes > KEEP_BYTES {
            return Err(Error::Limit {
                what: format!(
                    "verify of a compressed stream keeps at most {} of the image's metadata, and this image needs more: decompress it first, or use a seekable container (Android sparse, seekable zstd, multi-block xz)",
                    blockwise_geometry::format_size(KEEP_BYTES)
                ),
            });
        }
        Ok(())
    }

    fn remove(&mut self, w: u64) {
        if let Some(Some(old)) = self.windows.remove(&w) {
            self.bytes = self
                .bytes
                .saturating_sub(u64::try_from(old.len()).unwrap_or(0));
        }
    }
}

/// A [`BlockSource`] over [`Fetched`] windows: reads of missing windows return zeros and
/// are recorded.
#[derive(Debug)]
pub struct Recorder<'f> {
    fetched: &'f Fetched,
    missing: RefCell<BTreeSet<u64>>,
}

impl<'f> Recorder<'f> {
    fn new(fetched: &'f Fetched) -> Self {
        Recorder {
            fetched,
            missing: RefCell::new(BTreeSet::new()),
        }
    }

    fn into_missing(self) -> BTreeSet<u64> {
        self.missing.into_inner()
    }
}

impl BlockSource for Recorder<'_> {
    type Error = Infallible;

    fn len(&self) -> u64 {
        self.fetched.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), Infallible> {
        let end = offset.saturating_add(u64::try_from(buf.len()).unwrap_or(u64::MAX));
        let mut pos = offset;
        // Each round advances to the next window boundary (or the end).
        while pos < end {
            let w = pos / WINDOW;
            let wstart = w.saturating_mul(WINDOW);
            let next = wstart.saturating_add(WINDOW).min(end);
            let from = usize::try_from(pos.saturating_sub(wstart)).unwrap_or(usize::MAX);
            let into = usize::try_from(pos.saturating_sub(offset)).unwrap_or(usize::MAX);
            let n = usize::try_from(next.saturating_sub(pos)).unwrap_or(0);
            let dst = into
                .checked_add(n)
                .and_then(|e| buf.get_mut(into..e))
                .unwrap_or_default();
            match self.fetched.windows.get(&w) {
                Some(Some(bytes)) => {
                    match from.checked_add(n).and_then(|e| bytes.get(from..e)) {
                        Some(src) if src.len() == dst.len() => dst.copy_from_slice(src),
                        // A window shorter than asked: only the last one of the image.
                        _ => dst.fill(0),
                    }
                }
                Some(None) => dst.fill(0),
                None => {
                    dst.fill(0);
                    if pos < self.fetched.len {
                        self.missing.borrow_mut().insert(w);
                    }
                }
            }
            if next <= pos {
                break;
            }
            pos = next;
        }
        Ok(())
    }
}

/// How a run in rounds went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Passes {
    /// Forward passes over the stream (the size pass included).
    pub passes: u32,
    /// Verifier runs.
    pub runs: u32,
}

/// Runs `run` over `d` in rounds until it reads nothing missing; its last result, the image
/// size and the passes made.
pub fn run_in_rounds<I: BlockSource + 'static, T>(
    d: &Decoded<I>,
    mut run: impl FnMut(&Recorder<'_>) -> T,
) -> Result<(T, u64, Passes), Error> {
    let mut fetched = Fetched::default();
    let mut stats = Passes::default();
    let mut buf = vec![0u8; usize::try_from(READ).unwrap_or(1 << 20)];
    fetched.len = match d.size() {
        Some(s) => s,
        None => {
            stats.passes = stats.passes.saturating_add(1);
            size_pass(d, &mut fetched, &mut buf)?
        }
    };
    // Each round is one pass; bounded.
    loop {
        let rec = Recorder::new(&fetched);
        let out = run(&rec);
        stats.runs = stats.runs.saturating_add(1);
        let mut wanted = rec.into_missing();
        if wanted.is_empty() {
            return Ok((out, fetched.len, stats));
        }
        if stats.passes >= MAX_PASSES {
            return Err(Error::Limit {
                what: format!(
                    "verify needed more than {MAX_PASSES} passes over the compressed stream: decompress it first"
                ),
            });
        }
        stats.passes = stats.passes.saturating_add(1);
        d.rewind();
        let mut reruns = 0u32;
        let mut at = 0u64;
        // Each round fetches at least one wanted window at or after `at`, which only grows.
        while let Some(&first) = wanted.range(at..).next() {
            // A run of consecutive wanted windows, up to one read.
            let mut last = first;
            while wanted.contains(&last.saturating_add(1))
                && last
                    .saturating_add(1)
                    .saturating_sub(first)
                    .saturating_mul(WINDOW)
                    < READ
            {
                last = last.saturating_add(1);
            }
            let start = first.saturating_mul(WINDOW);
            let end = last
                .saturating_add(1)
                .saturating_mul(WINDOW)
                .min(fetched.len);
            let n = usize::try_from(end.saturating_sub(start)).unwrap_or(0);
            let dst = buf.get_mut(..n).unwrap_or_default();
            let got = d.read_forward(start, dst)?;
            if got < n {
                return Err(Error::Truncated {
                    format: d.kind().name(),
                    at: start.saturating_add(u64::try_from(got).unwrap_or(0)),
                    expected: fetched.len,
                });
            }
            let window = usize::try_from(WINDOW).unwrap_or(1 << 16);
            for (k, chunk) in dst.chunks(window).enumerate() {
                let w = first.saturating_add(u64::try_from(k).unwrap_or(0));
                fetched.insert(w, chunk)?;
                wanted.remove(&w);
            }
            at = last.saturating_add(1);
            if reruns < MAX_RERUNS {
                reruns = reruns.saturating_add(1);
                let rec = Recorder::new(&fetched);
                let _ = run(&rec);
                stats.runs = stats.runs.saturating_add(1);
                wanted.extend(rec.into_missing().range(at..));
            }
        }
    }
}

/// Decodes the whole stream once: its size, keeping the first and last [`EDGE`] bytes.
fn size_pass<I: BlockSource + 'static>(
    d: &Decoded<I>,
    fetched: &mut Fetched,
    buf: &mut [u8],
) -> Result<u64, Error> {
    d.rewind();
    let mut pos = 0u64;
    let edge_windows = EDGE / WINDOW;
    let window = usize::try_from(WINDOW).unwrap_or(1 << 16);
    // Each round reads a full buffer or ends the stream.
    loop {
        let got = d.read_forward(pos, buf)?;
        let data = buf.get(..got).unwrap_or_default();
        for (k, chunk) in data.chunks(window).enumerate() {
            let w = (pos / WINDOW).saturating_add(u64::try_from(k).unwrap_or(0));
            fetched.insert(w, chunk)?;
        }
        pos = pos.saturating_add(u64::try_from(got).unwrap_or(0));
        // Keep the first EDGE bytes and the last EDGE seen.
        let keep_from = (pos / WINDOW).saturating_sub(edge_windows.saturating_add(1));
        let old: Vec<u64> = if keep_from > edge_windows {
            fetched
                .windows
                .range(edge_windows..keep_from)
                .map(|(&w, _)| w)
                .collect()
        } else {
            Vec::new()
        };
        for w in old {
            fetched.remove(w);
        }
        if got < buf.len() {
            break;
        }
    }
    // The last window may be short; it is only ever read up to the end.
    Ok(pos)
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
mod tests {
    use super::*;
    use crate::recognise::ContainerKind;

    #[test]
    fn chains_of_reads_resolve_in_few_passes() {
        // A "verifier" that follows a chain of pointers: each 8-byte value names the next
        // offset to read, forward and backward, as a table → boot sector → FAT would.
        let mut img = vec![0u8; 40 << 20];
        let hops = [0u64, 5 << 20, 9 << 20, 3 << 20, 30 << 20, 39 << 20];
        for pair in hops.windows(2) {
            let at = usize::try_from(pair[0]).unwrap();
            img[at..at + 8].copy_from_slice(&pair[1].to_le_bytes());
        }
        let gz = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&img).unwrap();
            e.finish().unwrap()
        };
        let d = Decoded::open(gz, ContainerKind::Gzip).unwrap();
        let (seen, size, stats) = run_in_rounds(&d, |src| {
            let mut at = 0u64;
            let mut seen = vec![at];
            for _ in 0..10 {
                let mut b = [0u8; 8];
                src.read_at(at, &mut b).unwrap();
                at = u64::from_le_bytes(b);
                if at == 0 {
                    break;
                }
                seen.push(at);
            }
            seen
        })
        .unwrap();
        assert_eq!(size, 40 << 20);
        assert_eq!(seen, hops);
        // The size pass, then one pass per backward hop (9 MiB → 3 MiB), at most.
        assert!(stats.passes <= 3, "{stats:?}");
    }
}
