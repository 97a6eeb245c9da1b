//! An erase-block estimate from read timing, for devices whose kernel gives none (USB sticks),
//! in the manner of flashbench's `--find-align`, and only ever reading.
//!
//! A flash controller maps the medium in units of its erase block (or allocation unit); a
//! small read that straddles the boundary of two such units needs two lookups and is slower
//! than one inside a unit. For every candidate size S (64 KiB … 16 MiB) the estimator times
//! tiny O_DIRECT reads (two logical blocks) that straddle `k·S` for **odd** `k`, and the same
//! reads at `k·S + 32 KiB`, which straddle nothing larger than 32 KiB. With odd `k`, `k·S` is
//! a boundary of the true unit E exactly when S ≥ E, so the slowdown appears at S = E and
//! stays for every larger S, while every smaller S shows none. Boundaries of 32 KiB and
//! below (pages) are crossed by both reads and cancel out.
//!
//! The timing sits behind [`ReadTimer`], so the analysis is a pure function of the measured
//! durations ([`analyse`]) and the tests feed it a simulated device. Reads are interleaved
//! (every position once per round, in a shuffled order) and summarised by medians, so drift
//! and stray slow reads do not make a boundary.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::OFlags;

use crate::AlignedBuf;

/// Something whose reads can be timed: a device opened with O_DIRECT, or a simulation.
pub trait ReadTimer {
    /// Reads `len` bytes at `offset` and returns how long the read took.
    fn time_read(&mut self, offset: u64, len: usize) -> io::Result<Duration>;
}

/// The distance of the control read from the boundary: it straddles `k·S + CONTROL_SHIFT`,
/// a boundary of nothing larger than this.
const CONTROL_SHIFT: u64 = 32 << 10;

/// How to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EstimateOptions {
    /// Size of the device in bytes: no read goes past it.
    pub device_bytes: u64,
    /// The logical block size: each read is two of them, straddling the boundary.
    pub block_bytes: u64,
    /// Smallest candidate (a power of two, at least 64 KiB).
    pub min_size: u64,
    /// Largest candidate.
    pub max_size: u64,
    /// Boundaries timed per candidate (odd multiples 1, 3, 5, …).
    pub boundaries: u64,
    /// Rounds over every position (each round times every read once).
    pub rounds: u32,
    /// Stop after this much measured read time, once `min_rounds` are done.
    pub budget: Duration,
    /// Rounds always done, whatever the budget.
    pub min_rounds: u32,
}

impl EstimateOptions {
    /// 64 KiB … 16 MiB, 8 boundaries per size, up to 25 rounds or about 2 s of reads.
    #[must_use]
    pub fn new(device_bytes: u64, block_bytes: u64) -> Self {
        EstimateOptions {
            device_bytes,
            block_bytes,
            min_size: 64 << 10,
            max_size: 16 << 20,
            boundaries: 8,
            rounds: 25,
            budget: Duration::from_secs(2),
            min_rounds: 5,
        }
    }
}

/// What one candidate size showed.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeEffect {
    /// The candidate S.
    pub size_bytes: u64,
    /// Boundaries timed.
    pub boundaries: u64,
    /// Median over the boundaries of the median straddling read, in nanoseconds.
    pub straddle_ns: u64,
    /// The same for the control reads.
    pub control_ns: u64,
    /// Median over the boundaries of (straddle − control), in nanoseconds.
    pub effect_ns: i64,
    /// Share of the boundaries whose straddling read was slower than its control.
    pub slower_fraction: f64,
    /// Slower consistently and by enough to count.
    pub clear: bool,
}

/// The result: a boundary or none, with what each size showed.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// The estimated erase block, `None` when there is no clear boundary.
    pub erase_block: Option<u64>,
    /// How sure (0–1); 0 without a boundary.
    pub confidence: f64,
    /// Why there is no boundary, or how it showed.
    pub summary: String,
    /// Per candidate, smallest first.
    pub sizes: Vec<SizeEffect>,
    /// Reads timed.
    pub reads: u64,
    /// Rounds done.
    pub rounds: u32,
    /// Sum of the timed reads.
    pub measured: Duration,
}

impl Estimate {
    /// The estimated erase block in bytes, when clear.
    #[must_use]
    pub fn erase_block_bytes(&self) -> Option<u64> {
        self.erase_block
    }

    /// `high`, `medium` or `low` (`none` without a boundary).
    #[must_use]
    pub fn confidence_label(&self) -> &'static str {
        match self.confidence {
            c if self.erase_block.is_none() || c <= 0.0 => "none",
            c if c >= 0.8 => "high",
            c if c >= 0.5 => "medium",
            _ => "low",
        }
    }
}

/// One timed place: a candidate size, its boundary `k·S`, and the two read offsets.
#[derive(Debug, Clone)]
struct Position {
    size_index: usize,
    straddle: u64,
    control: u64,
}

/// The samples of one position.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// Durations of the straddling read, in nanoseconds.
    pub straddle_ns: Vec<u64>,
    /// Durations of the control read, in nanoseconds.
    pub control_ns: Vec<u64>,
}

/// A deterministic shuffle (xorshift64*), so runs are repeatable.
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let j = usize::try_from(r % (i as u64 + 1)).unwrap_or(0);
        v.swap(i, j);
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Times the reads and estimates the erase block. Only reads; every offset and length is a
/// multiple of `block_bytes`.
pub fn estimate_erase_block(
    timer: &mut dyn ReadTimer,
    opts: &EstimateOptions,
) -> io::Result<Estimate> {
    let half = opts.block_bytes.max(512);
    let len = usize::try_from(half.saturating_mul(2)).unwrap_or(usize::MAX);
    let mut sizes = Vec::new();
    let mut s = opts.min_size.max(CONTROL_SHIFT * 2).next_power_of_two();
    while s <= opts.max_size {
        sizes.push(s);
        s = s.saturating_mul(2);
    }
    let mut positions = Vec::new();
    for (i, &s) in sizes.iter().enumerate() {
        for n in 0..opts.boundaries {
            let k = 2 * n + 1;
            // Both reads lie inside the device and start at or after 0 (checked: the block
            // size comes from sysfs).
            let fits = k.checked_mul(s).and_then(|b| {
                let straddle = b.checked_sub(half)?;
                let control = b.checked_add(CONTROL_SHIFT)?.checked_sub(half)?;
                let end = control.checked_add(half.checked_mul(2)?)?;
                (end <= opts.device_bytes).then_some((straddle, control))
            });
            let Some((straddle, control)) = fits else {
                break;
            };
            positions.push(Position {
                size_index: i,
                straddle,
                control,
            });
        }
    }
    let mut samples = vec![Samples::default(); positions.len()];
    let mut order: Vec<usize> = (0..positions.len()).collect();
    let mut measured = Duration::ZERO;
    let mut reads = 0u64;
    let mut rounds = 0u32;
    // One warm-up round that is not counted: the first touch of a place may differ.
    for round in 0..=opts.rounds {
        shuffle(&mut order, 0x9e37_79b9_7f4a_7c15 ^ u64::from(round));
        for &i in &order {
            let p = &positions[i];
            let (a, b) = if (i + round as usize) % 2 == 0 {
                (p.straddle, p.control)
            } else {
                (p.control, p.straddle)
            };
            let ta = timer.time_read(a, len)?;
            let tb = timer.time_read(b, len)?;
            reads += 2;
            if round == 0 {
                continue;
            }
            measured += ta + tb;
            let (ts, tc) = if a == p.straddle { (ta, tb) } else { (tb, ta) };
            samples[i].straddle_ns.push(nanos(ts));
            samples[i].control_ns.push(nanos(tc));
        }
        if round > 0 {
            rounds = round;
            if round >= opts.min_rounds && measured >= opts.budget {
                break;
            }
        }
    }
    let grouped: Vec<(u64, Vec<Samples>)> = sizes
        .iter()
        .enumerate()
        .map(|(si, &s)| {
            let v = positions
                .iter()
                .zip(&samples)
                .filter(|(p, _)| p.size_index == si)
                .map(|(_, x)| x.clone())
                .collect();
            (s, v)
        })
        .filter(|(_, v): &(u64, Vec<Samples>)| v.len() >= 2)
        .collect();
    let mut e = analyse(&grouped);
    e.reads = reads;
    e.rounds = rounds;
    e.measured = measured;
    Ok(e)
}

/// The median (the mean of the middle two, halved first so it cannot overflow); 0 when empty.
fn median<T>(v: &mut [T]) -> T
where
    T: Ord + Copy + Default + std::ops::Div<Output = T> + std::ops::Add<Output = T> + From<u8>,
{
    v.sort_unstable();
    let m = v.len() / 2;
    match (v.get(m), m.checked_sub(1).and_then(|k| v.get(k))) {
        (Some(&hi), _) if v.len() % 2 == 1 => hi,
        (Some(&hi), Some(&lo)) => lo / T::from(2) + hi / T::from(2),
        _ => T::default(),
    }
}

/// A size's effect counts when straddling reads are slower at ≥ 75 % of its boundaries and
/// by at least 10 % of a typical read.
const MIN_SLOWER_FRACTION: f64 = 0.75;
const MIN_RELATIVE_EFFECT: f64 = 0.10;

fn ratio(a: i64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// The analysis, a pure function of the samples: per candidate size (ascending) the samples
/// of each of its boundaries. The boundary E is the smallest size from which every larger size
/// is clearly slower when straddling, while every smaller size is not and shows at most half
/// of the smallest effect above.
#[must_use]
pub fn analyse(by_size: &[(u64, Vec<Samples>)]) -> Estimate {
    let mut all_control: Vec<u64> = Vec::new();
    let mut sizes: Vec<SizeEffect> = Vec::new();
    for (size, positions) in by_size {
        let mut straddles = Vec::new();
        let mut controls = Vec::new();
        let mut effects = Vec::new();
        for p in positions {
            let s = median(&mut p.straddle_ns.clone());
            let c = median(&mut p.control_ns.clone());
            straddles.push(s);
            controls.push(c);
            effects
                .push(i64::try_from(s).unwrap_or(i64::MAX) - i64::try_from(c).unwrap_or(i64::MAX));
        }
        all_control.extend(&controls);
        let slower = effects.iter().filter(|&&e| e > 0).count();
        let slower_fraction = if effects.is_empty() {
            0.0
        } else {
            slower as f64 / effects.len() as f64
        };
        sizes.push(SizeEffect {
            size_bytes: *size,
            boundaries: positions.len() as u64,
            straddle_ns: median(&mut straddles),
            control_ns: median(&mut controls),
            effect_ns: median(&mut effects),
            slower_fraction,
            clear: false,
        });
    }
    let typical = median(&mut all_control);
    for s in &mut sizes {
        s.clear = s.slower_fraction >= MIN_SLOWER_FRACTION
            && ratio(s.effect_ns, typical) >= MIN_RELATIVE_EFFECT;
    }
    let none = |summary: String, sizes: Vec<SizeEffect>| Estimate {
        erase_block: None,
        confidence: 0.0,
        summary,
        sizes,
        reads: 0,
        rounds: 0,
        measured: Duration::ZERO,
    };
    if sizes.len() < 2 {
        return none(
            "no clear boundary: the device is too small to time enough candidate sizes".into(),
            sizes,
        );
    }
    if sizes.iter().all(|s| s.clear) {
        return none(
            format!(
                "no clear boundary: straddling reads are slower at every size from {}, so any boundary is at most that small",
                blockwise_geometry::format_size(sizes[0].size_bytes)
            ),
            sizes,
        );
    }
    // The split: sizes[i..] all clear, sizes[..i] all not, and a real step between them.
    let split = (1..sizes.len()).find(|&i| {
        let (lower, upper) = sizes.split_at(i);
        let min_up = upper.iter().map(|s| s.effect_ns).min().unwrap_or(0);
        upper.iter().all(|s| s.clear)
            && lower
                .iter()
                .all(|s| !s.clear && s.effect_ns.saturating_mul(2) <= min_up)
    });
    let Some(i) = split else {
        return none(
            format!(
                "no clear boundary between {} and {}: reads that straddle a candidate boundary are not consistently slower",
                blockwise_geometry::format_size(sizes[0].size_bytes),
                blockwise_geometry::format_size(sizes[sizes.len() - 1].size_bytes)
            ),
            sizes,
        );
    };
    let (lower, upper) = sizes.split_at(i);
    let min_up = upper.iter().map(|s| s.effect_ns).min().unwrap_or(0);
    let max_low = lower.iter().map(|s| s.effect_ns.max(0)).max().unwrap_or(0);
    let consistency = upper
        .iter()
        .map(|s| s.slower_fraction)
        .fold(1.0_f64, f64::min);
    // A step of 20 % of a read or more counts fully; one size above the step is weaker
    // evidence than several.
    let step = (ratio(min_up - max_low, typical) / 0.2).clamp(0.0, 1.0);
    let support = if upper.len() >= 2 { 1.0 } else { 0.7 };
    let confidence = (consistency * step * support).clamp(0.0, 1.0);
    let e = upper[0].size_bytes;
    Estimate {
        erase_block: Some(e),
        confidence,
        summary: format!(
            "reads straddling {} boundaries take {:.0} % longer (at {:.0} % of them), smaller sizes show no such step",
            blockwise_geometry::format_size(e),
            ratio(upper[0].effect_ns, typical) * 100.0,
            upper[0].slower_fraction * 100.0
        ),
        sizes,
        reads: 0,
        rounds: 0,
        measured: Duration::ZERO,
    }
}

/// A block device (or file) opened read-only with O_DIRECT, whose reads are timed.
#[derive(Debug)]
pub struct DirectReader {
    file: File,
    buf: AlignedBuf,
}

impl DirectReader {
    /// Opens `path` read-only with O_DIRECT (never O_EXCL) and a buffer for reads of up to
    /// `max_len` bytes.
    pub fn open(path: &Path, max_len: usize) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags((OFlags::DIRECT | OFlags::CLOEXEC).bits() as i32)
            .open(path)?;
        let buf = AlignedBuf::new(max_len, 4096)
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "aligned buffer"))?;
        Ok(DirectReader { file, buf })
    }
}

impl ReadTimer for DirectReader {
    fn time_read(&mut self, offset: u64, len: usize) -> io::Result<Duration> {
        let buf = self.buf.get_mut(..len).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "read longer than the buffer")
        })?;
        let t = Instant::now();
        self.file.read_exact_at(buf, offset)?;
        Ok(t.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A simulated device: reads cost `base` ns, plus `penalty` when they straddle a multiple
    /// of `erase` (none when `erase` is 0), plus `page_penalty` when they straddle a 16 KiB
    /// page, times a deterministic noise factor within ±`noise` %, and now and then a slow
    /// outlier.
    struct Sim {
        erase: u64,
        base: u64,
        penalty: u64,
        page_penalty: u64,
        noise: u64,
        x: u64,
        reads: u64,
    }

    impl Sim {
        fn new(erase: u64) -> Self {
            Sim {
                erase,
                base: 200_000,
                penalty: 60_000,
                page_penalty: 0,
                noise: 10,
                x: 0x1234_5678_9abc_def1,
                reads: 0,
            }
        }
        fn next(&mut self) -> u64 {
            self.x ^= self.x >> 12;
            self.x ^= self.x << 25;
            self.x ^= self.x >> 27;
            self.x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    fn straddles(offset: u64, len: u64, unit: u64) -> bool {
        unit != 0 && offset / unit != (offset + len - 1) / unit
    }

    impl ReadTimer for Sim {
        fn time_read(&mut self, offset: u64, len: usize) -> io::Result<Duration> {
            self.reads += 1;
            let len = len as u64;
            assert_eq!(offset % 512, 0, "offsets are block multiples");
            let mut t = self.base;
            if straddles(offset, len, self.erase) {
                t += self.penalty;
            }
            if straddles(offset, len, 16 << 10) {
                t += self.page_penalty;
            }
            let r = self.next();
            let spread = 2 * self.noise + 1;
            let pct = 100 - self.noise + r % spread;
            let mut t = t * pct / 100;
            if r % 97 == 0 {
                t *= 5; // a stray slow read (another process, a cache miss)
            }
            Ok(Duration::from_nanos(t))
        }
    }

    fn run(sim: &mut Sim) -> Estimate {
        let opts = EstimateOptions::new(1 << 30, 512);
        estimate_erase_block(sim, &opts).unwrap()
    }

    #[test]
    fn recovers_128k_4m_and_8m() {
        for erase in [128 << 10, 4 << 20, 8 << 20] {
            let e = run(&mut Sim::new(erase));
            assert_eq!(e.erase_block, Some(erase), "{e:#?}");
            assert!(e.confidence >= 0.5, "{e:#?}");
            assert!(e.rounds >= 5);
        }
    }

    #[test]
    fn page_effects_cancel_out() {
        let mut sim = Sim::new(4 << 20);
        sim.page_penalty = 50_000;
        assert_eq!(run(&mut sim).erase_block, Some(4 << 20));
    }

    #[test]
    fn a_flat_device_has_no_clear_boundary() {
        for seed in 1..20u64 {
            let mut sim = Sim::new(0);
            sim.x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let e = run(&mut sim);
            assert_eq!(e.erase_block, None, "seed {seed}: {e:#?}");
            assert_eq!(e.confidence_label(), "none");
            assert!(e.summary.starts_with("no clear boundary"), "{}", e.summary);
        }
    }

    #[test]
    fn a_boundary_at_every_size_or_beyond_the_range_is_not_invented() {
        // 32 KiB units: every candidate straddles one — but so does the control, so flat.
        assert_eq!(run(&mut Sim::new(32 << 10)).erase_block, None);
        // 32 MiB: beyond the largest candidate.
        assert_eq!(run(&mut Sim::new(32 << 20)).erase_block, None);
    }

    #[test]
    fn the_budget_bounds_the_rounds_and_reads_stay_inside_the_device() {
        let mut sim = Sim::new(4 << 20);
        let mut opts = EstimateOptions::new(64 << 20, 4096);
        opts.budget = Duration::from_millis(1);
        let e = estimate_erase_block(&mut sim, &opts).unwrap();
        assert_eq!(e.rounds, opts.min_rounds);
        // 64 MiB holds boundaries up to 16 MiB (k = 1, 3) only for a few sizes.
        assert!(e.sizes.iter().all(|s| s.boundaries >= 2));
        assert_eq!(e.sizes.last().unwrap().size_bytes, 16 << 20);
        // A tiny device: too few sizes.
        let opts = EstimateOptions::new(256 << 10, 512);
        let e = estimate_erase_block(&mut Sim::new(0), &opts).unwrap();
        assert_eq!(e.erase_block, None);
        assert!(e.summary.contains("too small"), "{}", e.summary);
        // A nonsense block size (sysfs is trusted, but not blindly): no read, no panic.
        let opts = EstimateOptions::new(1 << 30, 1 << 40);
        let e = estimate_erase_block(&mut Sim::new(0), &opts).unwrap();
        assert_eq!((e.erase_block, e.reads), (None, 0));
    }
}
