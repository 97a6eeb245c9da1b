//! `blockwise bench`: what alignment buys on a device, measured. O_DIRECT writes at aligned
//! offsets and at offsets shifted by 512 B, by 63 sectors and by half an erase block, for
//! sequential chunks of 4 KiB … 4 MiB and for a small-file pattern, with random and with zero
//! data; MB/s per case and the aligned/shifted ratio, as a table, JSON or CSV.
//!
//! The engine ([`run_bench`]) writes through the [`Device`] trait and reads time from a
//! [`Clock`], so the unit tests drive it with an in-memory device and a fake clock: the case
//! list, the ratios, the time bound and the formatting are checked without real I/O.

use std::fmt::Write as _;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use blockwise_geometry::format_size;

use crate::buf::AlignedBuf;
use crate::{Device, Error};

/// A monotonic clock: the time since some fixed start.
pub trait Clock {
    /// Time elapsed since the clock's start.
    fn now(&self) -> Duration;
}

/// The real monotonic clock ([`Instant`]).
#[derive(Debug, Clone, Copy)]
pub struct RealClock(Instant);

impl RealClock {
    /// A clock starting now.
    #[must_use]
    pub fn new() -> Self {
        RealClock(Instant::now())
    }
}

impl Default for RealClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for RealClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

/// The default chunk sizes of the sequential cases: 4 KiB, 16 KiB, 64 KiB, 512 KiB, 4 MiB.
pub const DEFAULT_CHUNKS: [u64; 5] = [4 << 10, 16 << 10, 64 << 10, 512 << 10, 4 << 20];

pub use crate::probe::DEFAULT_ERASE_BLOCK;

/// Where the small-file pattern puts its files: cluster boundaries of this size (plus the
/// shift), sizes rounded up to it, as a FAT with 4 KiB clusters writes whole pages.
const CLUSTER: u64 = 4096;

/// How much a case's writes are shifted from an erase-block-aligned start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shift {
    /// No shift: every write starts on an erase-block (and so every page) boundary.
    Aligned,
    /// Shifted by 512 bytes (one 512-byte sector).
    Bytes512,
    /// Shifted by 63 sectors (63 × 512 = 32256 bytes), the old DOS partition start.
    Sectors63,
    /// Shifted by half an erase block.
    HalfEraseBlock,
}

impl Shift {
    /// All shifts, aligned first (the table's columns).
    pub const ALL: [Shift; 4] = [
        Shift::Aligned,
        Shift::Bytes512,
        Shift::Sectors63,
        Shift::HalfEraseBlock,
    ];

    /// The shift in bytes for an erase block of `erase_block` bytes.
    #[must_use]
    pub fn bytes(self, erase_block: u64) -> u64 {
        match self {
            Shift::Aligned => 0,
            Shift::Bytes512 => 512,
            Shift::Sectors63 => 63 * 512,
            Shift::HalfEraseBlock => erase_block / 2,
        }
    }

    /// A short name: `aligned`, `+512 B`, `+63 sectors`, `+1/2 erase block`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Shift::Aligned => "aligned",
            Shift::Bytes512 => "+512 B",
            Shift::Sectors63 => "+63 sectors",
            Shift::HalfEraseBlock => "+1/2 erase block",
        }
    }

    /// A machine-friendly key: `aligned`, `512b`, `63s`, `half_eb`.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            Shift::Aligned => "aligned",
            Shift::Bytes512 => "512b",
            Shift::Sectors63 => "63s",
            Shift::HalfEraseBlock => "half_eb",
        }
    }
}

/// What a case writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Sequential writes of this many bytes each.
    Sequential(u64),
    /// Many 2–16 KiB writes (rounded up to 4 KiB clusters) at pseudo-random cluster offsets
    /// over the region, as a FAT directory of small files would be written.
    SmallFiles,
}

impl Pattern {
    /// `seq 4 KiB`, …, `small files`.
    #[must_use]
    pub fn name(self) -> String {
        match self {
            Pattern::Sequential(c) => format!("seq {}", format_size(c)),
            Pattern::SmallFiles => "small files".to_string(),
        }
    }

    /// The largest single write of the pattern.
    #[must_use]
    pub fn max_write(self) -> u64 {
        match self {
            Pattern::Sequential(c) => c,
            Pattern::SmallFiles => 16 << 10,
        }
    }
}

/// The bytes a case writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Data {
    /// Incompressible pseudo-random bytes (seeded), stamped per write so no two writes are
    /// equal.
    Random,
    /// Zeros (what a compressing or deduplicating controller handles best).
    Zero,
}

impl Data {
    /// `random` or `zero`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Data::Random => "random",
            Data::Zero => "zero",
        }
    }
}

/// One measurement to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    /// What is written.
    pub data: Data,
    /// How.
    pub pattern: Pattern,
    /// Where, relative to the erase blocks.
    pub shift: Shift,
    /// The shift in bytes.
    pub shift_bytes: u64,
}

impl Case {
    /// `random, seq 4 KiB, +512 B`.
    #[must_use]
    pub fn name(&self) -> String {
        format!(
            "{}, {}, {}",
            self.data.name(),
            self.pattern.name(),
            self.shift.name()
        )
    }
}

/// How to bench.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// The total time budget in seconds: each case that can run gets an even share of what
    /// is left of it when the case starts.
    pub seconds: f64,
    /// The erase block in bytes (the half-erase-block shift and the aligned starts).
    pub erase_block: u64,
    /// Bytes of the target the bench may write, from offset 0.
    pub region: u64,
    /// Sequential chunk sizes.
    pub chunks: Vec<u64>,
    /// Seed of the random data and of the small-file offsets.
    pub seed: u64,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            seconds: 60.0,
            erase_block: DEFAULT_ERASE_BLOCK,
            region: 256 << 20,
            chunks: DEFAULT_CHUNKS.to_vec(),
            seed: 0x5eed_b10c,
        }
    }
}

/// What the output says about the target (filled in by the caller).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetInfo {
    /// The path as given.
    pub path: String,
    /// `disk`, `partition`, `loop device` or `file`.
    pub kind: String,
    /// Whether writes bypass the page cache (O_DIRECT); false after a buffered fallback.
    pub direct: bool,
    /// Where the erase block came from (`sysfs preferred_erase_size`, `--erase-block`,
    /// `default`).
    pub erase_block_source: String,
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It ran.
    Measured {
        /// Bytes written.
        bytes: u64,
        /// Writes made.
        writes: u64,
        /// Seconds from the first write to the end of the closing fdatasync.
        seconds: f64,
        /// `bytes / seconds`, in MB/s (10^6 bytes).
        mb_per_s: f64,
    },
    /// It cannot run here: why (e.g. `not possible (logical block 4096)`).
    NotPossible(String),
    /// The budget was cancelled (SIGINT) before it ran.
    Skipped,
}

/// One case and its result.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// Its result.
    pub outcome: Outcome,
}

impl CaseResult {
    /// MB/s when measured.
    #[must_use]
    pub fn mb_per_s(&self) -> Option<f64> {
        match self.outcome {
            Outcome::Measured { mb_per_s, .. } => Some(mb_per_s),
            _ => None,
        }
    }
}

/// Everything a bench measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The target as the caller described it.
    pub target: TargetInfo,
    /// O_DIRECT offset/length granularity of the target (its logical block size or DIO
    /// alignment).
    pub logical_block: u32,
    /// The erase block used.
    pub erase_block: u64,
    /// The region written, from offset 0.
    pub region: u64,
    /// The time budget in seconds.
    pub budget_seconds: f64,
    /// Seconds the whole bench took (by its clock).
    pub seconds: f64,
    /// Whether a cancel stopped it early.
    pub interrupted: bool,
    /// Every case, in order: data, then pattern, then shift.
    pub cases: Vec<CaseResult>,
}

/// Progress of a bench, for a bar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchEvent {
    /// Case `index` (0-based) of `total` starts.
    Case {
        /// Its index.
        index: usize,
        /// The number of cases.
        total: usize,
        /// Its name.
        name: String,
    },
}

/// Why a case cannot run, or `None` when it can: the shift and the writes must be multiples
/// of the block, and the first writes must fit in the region.
fn not_possible(case: &Case, block: u64, region: u64) -> Option<String> {
    if block == 0 || case.shift_bytes % block != 0 || case.pattern.max_write() % block != 0 {
        let what = if block == 0 { 512 } else { block };
        return Some(format!("not possible (logical block {what})"));
    }
    let need = case
        .shift_bytes
        .checked_add(case.pattern.max_write().max(CLUSTER * 8))?;
    if need > region {
        return Some(format!(
            "not possible (region {} too small)",
            format_size(region)
        ));
    }
    None
}

/// The cases, in table order (data, pattern, shift), with their shifts in bytes.
#[must_use]
pub fn plan_cases(opts: &BenchOptions) -> Vec<Case> {
    let mut patterns: Vec<Pattern> = opts
        .chunks
        .iter()
        .map(|&c| Pattern::Sequential(c))
        .collect();
    patterns.push(Pattern::SmallFiles);
    let mut cases = Vec::new();
    for data in [Data::Random, Data::Zero] {
        for &pattern in &patterns {
            for shift in Shift::ALL {
                cases.push(Case {
                    data,
                    pattern,
                    shift,
                    shift_bytes: shift.bytes(opts.erase_block),
                });
            }
        }
    }
    cases
}

/// A small xorshift64 generator: deterministic from the seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// Writes all of `data` at `offset`.
fn write_all(dev: &mut dyn Device, offset: u64, data: &[u8], before: u64) -> Result<(), Error> {
    let mut done = 0usize;
    while done < data.len() {
        let at = offset.saturating_add(done as u64);
        match dev.write_at(at, data.get(done..).unwrap_or_default()) {
            Ok(0) => {
                return Err(Error::ShortWrite {
                    offset: at,
                    written: before.saturating_add(done as u64),
                })
            }
            Ok(n) => done += n,
            Err(e) => {
                return Err(Error::Write {
                    offset: at,
                    written: before.saturating_add(done as u64),
                    source: e,
                })
            }
        }
    }
    Ok(())
}

/// The next write of a case: `(offset, len)`, within the region.
struct Cursor {
    pattern: Pattern,
    shift: u64,
    region: u64,
    pos: u64,
    rng: Rng,
}

impl Cursor {
    fn next(&mut self) -> (u64, u64) {
        match self.pattern {
            Pattern::Sequential(chunk) => {
                if self.pos.saturating_add(chunk) > self.region {
                    self.pos = self.shift;
                }
                let at = self.pos;
                self.pos = at.saturating_add(chunk);
                (at, chunk)
            }
            Pattern::SmallFiles => {
                // 2..=16 KiB, rounded up to whole clusters: 4, 8, 12 or 16 KiB.
                let want = 2048 + self.rng.next_u64() % (14 * 1024 + 1);
                let len = want.div_ceil(CLUSTER) * CLUSTER;
                let slots = self.region.saturating_sub(self.shift).saturating_sub(len) / CLUSTER;
                let slot = self.rng.next_u64() % slots.max(1);
                (self.shift + slot * CLUSTER, len)
            }
        }
    }
}

/// Runs every case of [`plan_cases`] on `dev`, each for its share of what is left of
/// `opts.seconds` (and at least one write), each closed by an fdatasync that counts in its
/// time. Cases the device
/// cannot do (a 512-byte shift on a 4096-byte-sector device) are reported as not possible;
/// so is a case whose first write the device refuses with EINVAL. `cancel` stops after the
/// current write; the remaining cases are [`Outcome::Skipped`].
pub fn run_bench(
    dev: &mut dyn Device,
    clock: &dyn Clock,
    opts: &BenchOptions,
    target: TargetInfo,
    cancel: &AtomicBool,
    progress: &mut dyn FnMut(BenchEvent),
) -> Result<Report, Error> {
    if !(opts.seconds.is_finite() && opts.seconds >= 0.0) {
        return Err(Error::Options(format!(
            "--seconds {}: not a non-negative number",
            opts.seconds
        )));
    }
    if opts.erase_block == 0 || opts.erase_block % 2 != 0 {
        return Err(Error::Options(format!(
            "--erase-block {}: must be a non-zero even number of bytes",
            opts.erase_block
        )));
    }
    if opts.chunks.iter().any(|&c| c == 0 || c > 256 << 20) {
        return Err(Error::Options(
            "chunk sizes must be between 1 byte and 256 MiB".into(),
        ));
    }
    let block = u64::from(dev.block_size());
    let region = dev.size().map_or(opts.region, |s| s.min(opts.region));
    let cases = plan_cases(opts);
    let verdicts: Vec<Option<String>> = cases
        .iter()
        .map(|c| not_possible(c, block, region))
        .collect();
    let mut runnable = verdicts.iter().filter(|v| v.is_none()).count();
    let budget = Duration::from_secs_f64(opts.seconds);
    let max_len = cases
        .iter()
        .map(|c| c.pattern.max_write())
        .max()
        .unwrap_or(CLUSTER);
    let max_len = usize::try_from(max_len).map_err(|_| Error::Alloc { bytes: usize::MAX })?;
    let mut random =
        AlignedBuf::new(max_len, dev.mem_align()).ok_or(Error::Alloc { bytes: max_len })?;
    let mut rng = Rng::new(opts.seed);
    for word in random.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        for (d, s) in word.iter_mut().zip(v) {
            *d = s;
        }
    }
    let zero = AlignedBuf::new(max_len, dev.mem_align()).ok_or(Error::Alloc { bytes: max_len })?;

    let start = clock.now();
    let mut results = Vec::with_capacity(cases.len());
    let mut interrupted = false;
    let mut total_written = 0u64;
    let mut stamp = 0u64;
    for (index, (case, verdict)) in cases.iter().zip(verdicts).enumerate() {
        if let Some(reason) = verdict {
            results.push(CaseResult {
                case: *case,
                outcome: Outcome::NotPossible(reason),
            });
            continue;
        }
        if interrupted || cancel.load(Ordering::Relaxed) {
            interrupted = true;
            results.push(CaseResult {
                case: *case,
                outcome: Outcome::Skipped,
            });
            continue;
        }
        progress(BenchEvent::Case {
            index,
            total: cases.len(),
            name: case.name(),
        });
        // What is left of the budget, shared by the cases left: a case that overran (its
        // last write or its fdatasync) shortens the later ones, so the total stays near it.
        let left = budget.saturating_sub(clock.now().saturating_sub(start));
        let share = left / u32::try_from(runnable.max(1)).unwrap_or(u32::MAX);
        runnable = runnable.saturating_sub(1);
        let mut cursor = Cursor {
            pattern: case.pattern,
            shift: case.shift_bytes,
            region,
            pos: case.shift_bytes,
            rng: Rng::new(opts.seed ^ 0xf11e),
        };
        let t0 = clock.now();
        let mut bytes = 0u64;
        let mut writes = 0u64;
        let mut refused = None;
        loop {
            let (at, len) = cursor.next();
            let len_us = usize::try_from(len).unwrap_or(max_len).min(max_len);
            let buf: &[u8] = match case.data {
                Data::Random => {
                    // A new stamp in every 4 KiB block: no two writes carry the same bytes.
                    stamp = stamp.wrapping_add(1);
                    for blk in random.chunks_mut(4096).take(len_us.div_ceil(4096)) {
                        for (d, s) in blk.iter_mut().zip(stamp.to_le_bytes()) {
                            *d = s;
                        }
                    }
                    random.get(..len_us).unwrap_or_default()
                }
                Data::Zero => zero.get(..len_us).unwrap_or_default(),
            };
            match write_all(dev, at, buf, total_written) {
                Ok(()) => {}
                Err(Error::Write { source, .. })
                    if writes == 0 && source.kind() == io::ErrorKind::InvalidInput =>
                {
                    refused = Some(format!(
                        "not possible (the device refused the write: {source})"
                    ));
                    break;
                }
                Err(e) => return Err(e),
            }
            bytes = bytes.saturating_add(len);
            total_written = total_written.saturating_add(len);
            writes += 1;
            if cancel.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            if clock.now().saturating_sub(t0) >= share {
                break;
            }
        }
        dev.sync().map_err(|source| Error::Sync {
            written: total_written,
            source,
        })?;
        let seconds = clock.now().saturating_sub(t0).as_secs_f64();
        let outcome = match refused {
            Some(reason) => Outcome::NotPossible(reason),
            None => Outcome::Measured {
                bytes,
                writes,
                seconds,
                mb_per_s: if seconds > 0.0 {
                    bytes as f64 / seconds / 1e6
                } else {
                    0.0
                },
            },
        };
        results.push(CaseResult {
            case: *case,
            outcome,
        });
    }
    Ok(Report {
        target,
        logical_block: dev.block_size(),
        erase_block: opts.erase_block,
        region,
        budget_seconds: opts.seconds,
        seconds: clock.now().saturating_sub(start).as_secs_f64(),
        interrupted,
        cases: results,
    })
}

/// The sentence saying how the numbers were taken.
fn method(direct: bool) -> &'static str {
    if direct {
        "O_DIRECT writes; each case ends with fdatasync, counted in its time"
    } else {
        "BUFFERED writes (O_DIRECT refused here; numbers include the page cache); each case ends with fdatasync, counted in its time"
    }
}

impl Report {
    /// The aligned case of the same data and pattern as `r`.
    fn aligned_of(&self, r: &CaseResult) -> Option<&CaseResult> {
        self.cases.iter().find(|a| {
            a.case.shift == Shift::Aligned
                && a.case.data == r.case.data
                && a.case.pattern == r.case.pattern
        })
    }

    /// Aligned MB/s over this case's MB/s (above 1: the shift costs speed), when both ran.
    #[must_use]
    pub fn ratio(&self, r: &CaseResult) -> Option<f64> {
        let shifted = r.mb_per_s().filter(|&v| v > 0.0)?;
        let aligned = self.aligned_of(r)?.mb_per_s()?;
        Some(aligned / shifted)
    }

    /// The compact table: one row per data and pattern, one column per shift, MB/s and the
    /// aligned/shifted ratio; a header naming the target and the method, and footnotes.
    #[must_use]
    pub fn table(&self) -> String {
        let mut out = String::new();
        let t = &self.target;
        let _ = writeln!(
            out,
            "blockwise bench {} ({}): logical block {}, erase block {} ({}), region {}",
            t.path,
            t.kind,
            self.logical_block,
            format_size(self.erase_block),
            t.erase_block_source,
            format_size(self.region)
        );
        let measured = self
            .cases
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Measured { .. }))
            .count();
        let _ = writeln!(
            out,
            "{}; {} cases in {:.1} s (budget {} s)",
            method(t.direct),
            measured,
            self.seconds,
            self.budget_seconds
        );
        let _ = writeln!(
            out,
            "MB/s (10^6 bytes/s); (xN) = aligned MB/s / this MB/s, above 1 = slower than aligned"
        );
        let mut rows: Vec<Vec<String>> = vec![{
            let mut h = vec!["data".to_string(), "pattern".to_string()];
            h.extend(Shift::ALL.iter().map(|s| s.name().to_string()));
            h
        }];
        let mut reasons: Vec<String> = Vec::new();
        for group in self.cases.chunks(Shift::ALL.len()) {
            let Some(first) = group.first() else { continue };
            let mut row = vec![
                first.case.data.name().to_string(),
                first.case.pattern.name(),
            ];
            for r in group {
                let cell = match &r.outcome {
                    Outcome::Measured { mb_per_s, .. } => match self.ratio(r) {
                        Some(x) if r.case.shift != Shift::Aligned => {
                            format!("{mb_per_s:.1} (x{x:.2})")
                        }
                        _ => format!("{mb_per_s:.1}"),
                    },
                    Outcome::NotPossible(why) => {
                        if !reasons.contains(why) {
                            reasons.push(why.clone());
                        }
                        "not possible".to_string()
                    }
                    Outcome::Skipped => "skipped".to_string(),
                };
                row.push(cell);
            }
            rows.push(row);
        }
        let cols = rows.first().map_or(0, Vec::len);
        let widths: Vec<usize> = (0..cols)
            .map(|i| {
                rows.iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for row in &rows {
            let mut line = String::new();
            for (i, (cell, w)) in row.iter().zip(&widths).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                if i < 2 {
                    let _ = write!(line, "{cell:<w$}");
                } else {
                    let _ = write!(line, "{cell:>w$}");
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        for why in reasons {
            let _ = writeln!(out, "* {why}");
        }
        if self.interrupted {
            let _ = writeln!(out, "interrupted: the remaining cases were skipped");
        }
        out
    }

    /// One CSV header line and one row per case.
    #[must_use]
    pub fn csv(&self) -> String {
        let mut out = String::from(
            "data,pattern,chunk_bytes,shift,shift_bytes,status,bytes,writes,seconds,mb_per_s,aligned_ratio,direct\n",
        );
        for r in &self.cases {
            let chunk = match r.case.pattern {
                Pattern::Sequential(c) => c.to_string(),
                Pattern::SmallFiles => String::new(),
            };
            let (status, bytes, writes, seconds, mb) = match &r.outcome {
                Outcome::Measured {
                    bytes,
                    writes,
                    seconds,
                    mb_per_s,
                } => (
                    "measured".to_string(),
                    bytes.to_string(),
                    writes.to_string(),
                    format!("{seconds:.6}"),
                    format!("{mb_per_s:.3}"),
                ),
                Outcome::NotPossible(why) => (
                    format!("\"{}\"", why.replace('"', "'")),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ),
                Outcome::Skipped => (
                    "skipped".into(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ),
            };
            let ratio = self.ratio(r).map(|x| format!("{x:.3}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                r.case.data.name(),
                r.case.pattern.name(),
                chunk,
                r.case.shift.key(),
                r.case.shift_bytes,
                status,
                bytes,
                writes,
                seconds,
                mb,
                ratio,
                self.target.direct
            );
        }
        out
    }

    /// The report as JSON: the target, the method, and every case.
    #[must_use]
    pub fn json(&self) -> serde_json::Value {
        use serde_json::json;
        let cases: Vec<serde_json::Value> = self
            .cases
            .iter()
            .map(|r| {
                let mut v = json!({
                    "name": r.case.name(),
                    "data": r.case.data.name(),
                    "pattern": match r.case.pattern {
                        Pattern::Sequential(_) => "sequential",
                        Pattern::SmallFiles => "small_files",
                    },
                    "chunk_bytes": match r.case.pattern {
                        Pattern::Sequential(c) => json!(c),
                        Pattern::SmallFiles => serde_json::Value::Null,
                    },
                    "shift": r.case.shift.key(),
                    "shift_bytes": r.case.shift_bytes,
                });
                let extra = match &r.outcome {
                    Outcome::Measured {
                        bytes,
                        writes,
                        seconds,
                        mb_per_s,
                    } => json!({
                        "status": "measured",
                        "bytes": bytes,
                        "writes": writes,
                        "seconds": seconds,
                        "mb_per_s": mb_per_s,
                        "aligned_ratio": self.ratio(r),
                    }),
                    Outcome::NotPossible(why) => json!({"status": "not_possible", "reason": why}),
                    Outcome::Skipped => json!({"status": "skipped"}),
                };
                if let (Some(m), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
                    m.extend(e);
                }
                v
            })
            .collect();
        json!({
            "target": self.target.path,
            "kind": self.target.kind,
            "direct": self.target.direct,
            "method": method(self.target.direct),
            "sync": "fdatasync at the end of each case, counted in its time",
            "logical_block": self.logical_block,
            "erase_block": self.erase_block,
            "erase_block_source": self.target.erase_block_source,
            "region_bytes": self.region,
            "budget_seconds": self.budget_seconds,
            "seconds": self.seconds,
            "interrupted": self.interrupted,
            "cases": cases,
        })
    }
}

/// Whether the regular file at `path` lives in memory (tmpfs or ramfs): its numbers say
/// nothing about a disk. `false` when it cannot be told.
#[must_use]
pub fn memory_backed(path: &std::path::Path) -> bool {
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    const RAMFS_MAGIC: u64 = 0x8584_58f6;
    rustix::fs::statfs(path).is_ok_and(|s| {
        #[allow(
            clippy::useless_conversion,
            clippy::unnecessary_cast,
            reason = "f_type's type and width differ between targets"
        )]
        let t = s.f_type as u64;
        t == TMPFS_MAGIC || t == RAMFS_MAGIC
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    use super::*;

    /// Fake time in nanoseconds, shared by the fake device (which advances it) and the clock.
    #[derive(Clone, Default)]
    struct FakeClock(Arc<AtomicU64>);

    impl Clock for FakeClock {
        fn now(&self) -> Duration {
            Duration::from_nanos(self.0.load(Ordering::Relaxed))
        }
    }

    /// A device that checks O_DIRECT alignment (EINVAL otherwise) and takes simulated time:
    /// 100 µs per write plus the bytes at 20 MB/s, three times as long when the write does
    /// not start on a 4 KiB page, plus 1 ms per fdatasync.
    struct SlowDevice {
        clock: FakeClock,
        block: u32,
        size: Option<u64>,
        writes: Vec<(u64, usize)>,
        syncs: u32,
        /// Cancel this flag after this many writes.
        cancel_after: Option<(usize, Arc<AtomicBool>)>,
    }

    impl SlowDevice {
        fn new(block: u32, size: Option<u64>) -> (Self, FakeClock) {
            let clock = FakeClock::default();
            let dev = SlowDevice {
                clock: clock.clone(),
                block,
                size,
                writes: Vec::new(),
                syncs: 0,
                cancel_after: None,
            };
            (dev, clock)
        }
        fn advance(&self, ns: u64) {
            self.clock.0.fetch_add(ns, Ordering::Relaxed);
        }
    }

    impl Device for SlowDevice {
        fn size(&self) -> Option<u64> {
            self.size
        }
        fn block_size(&self) -> u32 {
            self.block
        }
        fn mem_align(&self) -> usize {
            4096
        }
        fn write_at(&mut self, offset: u64, buf: &[u8]) -> io::Result<usize> {
            let b = u64::from(self.block);
            if offset % b != 0 || buf.len() as u64 % b != 0 || buf.as_ptr() as usize % 4096 != 0 {
                return Err(io::ErrorKind::InvalidInput.into());
            }
            if let Some(size) = self.size {
                assert!(offset + buf.len() as u64 <= size, "beyond the device");
            }
            let mut ns = 100_000 + buf.len() as u64 * 50; // 20 MB/s = 50 ns per byte
            if offset % 4096 != 0 {
                ns *= 3;
            }
            self.advance(ns);
            self.writes.push((offset, buf.len()));
            if let Some((n, flag)) = &self.cancel_after {
                if self.writes.len() >= *n {
                    flag.store(true, Ordering::Relaxed);
                }
            }
            Ok(buf.len())
        }
        fn read_at(&mut self, _offset: u64, _buf: &mut [u8]) -> io::Result<usize> {
            Ok(0)
        }
        fn sync(&mut self) -> io::Result<()> {
            self.advance(1_000_000);
            self.syncs += 1;
            Ok(())
        }
    }

    fn info() -> TargetInfo {
        TargetInfo {
            path: "/dev/fake".into(),
            kind: "loop device".into(),
            direct: true,
            erase_block_source: "default".into(),
        }
    }

    fn bench(dev: &mut SlowDevice, clock: &FakeClock, opts: &BenchOptions) -> Report {
        let mut events = Vec::new();
        let r = run_bench(
            dev,
            clock,
            opts,
            info(),
            &AtomicBool::new(false),
            &mut |e| events.push(e),
        )
        .unwrap();
        let ran = r
            .cases
            .iter()
            .filter(|c| matches!(c.outcome, Outcome::Measured { .. }))
            .count();
        assert_eq!(events.len(), ran);
        r
    }

    #[test]
    fn the_case_list_is_every_data_pattern_and_shift() {
        let cases = plan_cases(&BenchOptions::default());
        assert_eq!(cases.len(), 2 * 6 * 4);
        let names: Vec<String> = cases.iter().map(Case::name).collect();
        assert_eq!(names[0], "random, seq 4 KiB, aligned");
        assert_eq!(names[1], "random, seq 4 KiB, +512 B");
        assert_eq!(names[2], "random, seq 4 KiB, +63 sectors");
        assert_eq!(names[3], "random, seq 4 KiB, +1/2 erase block");
        assert_eq!(names[20], "random, small files, aligned");
        assert_eq!(names[47], "zero, small files, +1/2 erase block");
        let shifts: Vec<u64> = cases.iter().take(4).map(|c| c.shift_bytes).collect();
        assert_eq!(shifts, [0, 512, 32256, 2 << 20]);
        let opts = BenchOptions {
            erase_block: 8 << 20,
            ..BenchOptions::default()
        };
        assert_eq!(plan_cases(&opts)[3].shift_bytes, 4 << 20);
    }

    #[test]
    fn ratios_reflect_the_cost_of_misalignment() {
        let (mut dev, clock) = SlowDevice::new(512, Some(64 << 20));
        // Shares of 1 s: longer than any single write of the fake device.
        let opts = BenchOptions {
            seconds: 48.0,
            ..BenchOptions::default()
        };
        let r = bench(&mut dev, &clock, &opts);
        assert_eq!(r.cases.len(), 48);
        for c in &r.cases {
            let mb = c.mb_per_s().unwrap_or_else(|| panic!("{c:?}"));
            assert!(mb > 0.0, "{c:?}");
            let ratio = r.ratio(c).unwrap();
            match c.case.shift {
                // 512 B and 63 sectors are off the 4 KiB page: three times slower, a
                // little less for the 4 MiB chunks (the one sync weighs less).
                Shift::Bytes512 | Shift::Sectors63 => {
                    assert!((2.0..=3.3).contains(&ratio), "{} {ratio}", c.case.name());
                }
                Shift::Aligned | Shift::HalfEraseBlock => {
                    assert!((0.9..=1.1).contains(&ratio), "{} {ratio}", c.case.name());
                }
            }
        }
        // Every write stayed inside the device; each case ended with one sync.
        assert_eq!(dev.syncs, 48);
    }

    #[test]
    fn shifts_below_the_logical_block_are_not_possible() {
        let (mut dev, clock) = SlowDevice::new(4096, Some(64 << 20));
        let r = bench(&mut dev, &clock, &BenchOptions::default());
        for c in &r.cases {
            match c.case.shift {
                Shift::Bytes512 | Shift::Sectors63 => assert_eq!(
                    c.outcome,
                    Outcome::NotPossible("not possible (logical block 4096)".into())
                ),
                _ => assert!(c.mb_per_s().is_some(), "{c:?}"),
            }
        }
        let t = r.table();
        assert!(t.contains("* not possible (logical block 4096)"), "{t}");
        let j = r.json();
        assert_eq!(j["cases"][1]["status"], "not_possible");
        assert_eq!(j["cases"][1]["reason"], "not possible (logical block 4096)");
    }

    #[test]
    fn each_case_stops_after_its_share_and_writes_at_least_once() {
        let (mut dev, clock) = SlowDevice::new(512, None);
        let opts = BenchOptions {
            seconds: 96.0,
            region: 32 << 20,
            ..BenchOptions::default()
        };
        let r = bench(&mut dev, &clock, &opts);
        // The longest single write: 4 MiB at 20 MB/s, three times when misaligned, plus
        // the sync.
        let slack = (100e-6 + (4u64 << 20) as f64 * 50e-9) * 3.0 + 1e-3;
        let mut sum = 0.0;
        for c in &r.cases {
            let Outcome::Measured {
                seconds, writes, ..
            } = c.outcome
            else {
                panic!("{c:?}")
            };
            assert!(writes >= 1);
            // Never more than an even share of the whole budget plus one write and the sync.
            assert!(
                seconds <= 96.0 / 48.0 + slack,
                "{} {seconds}",
                c.case.name()
            );
            // A case that got time used it (until its last write crossed the share).
            if c.case.pattern != Pattern::Sequential(4 << 20) {
                assert!(writes > 1, "{}", c.case.name());
            }
            sum += seconds;
        }
        // Overruns are taken from the later cases: the total overshoots by one case at most.
        assert!(
            r.seconds >= 96.0 && r.seconds <= 96.0 + slack,
            "{}",
            r.seconds
        );
        assert!((r.seconds - sum).abs() < 1e-6);
        // Every write inside the region, at its case's alignment.
        assert!(dev.writes.iter().all(|&(o, l)| o + l as u64 <= 32 << 20));

        // A zero budget still writes one chunk per case.
        let (mut dev, clock) = SlowDevice::new(512, Some(64 << 20));
        let opts = BenchOptions {
            seconds: 0.0,
            ..BenchOptions::default()
        };
        let r = bench(&mut dev, &clock, &opts);
        assert_eq!(dev.writes.len(), 48);
        assert!(r
            .cases
            .iter()
            .all(|c| matches!(c.outcome, Outcome::Measured { writes: 1, .. })));
    }

    #[test]
    fn the_small_file_pattern_scatters_cluster_sized_writes() {
        let mut cur = Cursor {
            pattern: Pattern::SmallFiles,
            shift: 512,
            region: 64 << 20,
            pos: 512,
            rng: Rng::new(1),
        };
        let writes: Vec<(u64, u64)> = (0..1000).map(|_| cur.next()).collect();
        assert!(writes.iter().all(|&(o, l)| o % 4096 == 512
            && [4096, 8192, 12288, 16384].contains(&l)
            && o + l <= 64 << 20));
        let distinct: std::collections::BTreeSet<u64> = writes.iter().map(|w| w.0).collect();
        assert!(distinct.len() > 900, "scattered: {}", distinct.len());
        assert!(writes.iter().any(|w| w.1 == 4096) && writes.iter().any(|w| w.1 == 16384));
    }

    #[test]
    fn a_cancel_skips_the_remaining_cases() {
        let (mut dev, clock) = SlowDevice::new(512, Some(64 << 20));
        let flag = Arc::new(AtomicBool::new(false));
        dev.cancel_after = Some((3, Arc::clone(&flag)));
        let r = run_bench(
            &mut dev,
            &clock,
            &BenchOptions::default(),
            info(),
            &flag,
            &mut |_| {},
        )
        .unwrap();
        assert!(r.interrupted);
        assert!(matches!(
            r.cases[0].outcome,
            Outcome::Measured { writes: 3, .. }
        ));
        assert!(r.cases[1..].iter().all(|c| c.outcome == Outcome::Skipped));
        assert!(r.table().contains("interrupted"));
    }

    #[test]
    fn bad_options_are_errors() {
        let (mut dev, clock) = SlowDevice::new(512, Some(64 << 20));
        for opts in [
            BenchOptions {
                seconds: f64::NAN,
                ..BenchOptions::default()
            },
            BenchOptions {
                seconds: -1.0,
                ..BenchOptions::default()
            },
            BenchOptions {
                erase_block: 0,
                ..BenchOptions::default()
            },
        ] {
            let e = run_bench(
                &mut dev,
                &clock,
                &opts,
                info(),
                &AtomicBool::new(false),
                &mut |_| {},
            )
            .unwrap_err();
            assert!(matches!(e, Error::Options(_)), "{e}");
        }
        // A region too small for the half-erase-block shift says so.
        let (mut dev, clock) = SlowDevice::new(512, Some(3 << 20));
        let r = bench(&mut dev, &clock, &BenchOptions::default());
        assert!(matches!(&r.cases[19].outcome, Outcome::NotPossible(w) if w.contains("region")));
        assert!(r.cases[3].mb_per_s().is_some());
    }

    #[test]
    fn table_csv_and_json_have_every_case() {
        let (mut dev, clock) = SlowDevice::new(512, Some(64 << 20));
        let opts = BenchOptions {
            seconds: 1.0,
            ..BenchOptions::default()
        };
        let r = bench(&mut dev, &clock, &opts);
        let t = r.table();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("blockwise bench /dev/fake (loop device): logical block 512, erase block 4 MiB (default)"), "{t}");
        assert!(
            lines[1].starts_with("O_DIRECT writes; each case ends with fdatasync"),
            "{t}"
        );
        assert!(
            lines[3].starts_with("data") && lines[3].contains("+1/2 erase block"),
            "{t}"
        );
        // Header + 12 rows (2 data x 6 patterns), each with 4 cells; ratios on shifted cells.
        assert_eq!(lines.len(), 4 + 12, "{t}");
        for row in &lines[4..] {
            assert_eq!(row.matches("(x").count(), 3, "{row}");
        }
        assert!(lines[4].starts_with("random  seq 4 KiB"), "{t}");
        assert!(lines[15].starts_with("zero    small files"), "{t}");

        let csv = r.csv();
        let rows: Vec<&str> = csv.lines().collect();
        assert_eq!(rows.len(), 49);
        assert!(rows[0].starts_with("data,pattern,chunk_bytes,shift,"));
        let width = rows[0].split(',').count();
        assert!(rows.iter().all(|l| l.split(',').count() == width), "{csv}");
        assert!(
            rows[2].starts_with("random,seq 4 KiB,4096,512b,512,measured,"),
            "{csv}"
        );

        let j: serde_json::Value = serde_json::from_str(&r.json().to_string()).unwrap();
        let cases = j["cases"].as_array().unwrap();
        assert_eq!(cases.len(), 48);
        assert!(cases.iter().all(|c| c["mb_per_s"].as_f64().unwrap() > 0.0));
        assert_eq!(j["direct"], true);
        assert_eq!(j["erase_block"], 4 << 20);
        assert_eq!(cases[0]["aligned_ratio"], 1.0);

        let mut buffered = r.clone();
        buffered.target.direct = false;
        assert!(buffered.table().contains("BUFFERED writes"));
    }
}
