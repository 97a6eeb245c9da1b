//! `blockwise bench TARGET --yes-destroy-data`: O_DIRECT write speed at aligned and shifted
//! offsets, through `blockwise_flash::run_bench`, with the same safety checks as `write`, a
//! progress bar, and a table, JSON or CSV.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use blockwise_flash::{
    memory_backed, run_bench, BenchEvent, BenchOptions, Device, DirectMode, RealClock, TargetInfo,
    TargetKind, DEFAULT_ERASE_BLOCK,
};
use blockwise_geometry::{format_size, parse_size};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

// Exit code 2 (refused or bad input, nothing written) and the target opening are `write`'s.
use super::write::{fail, inspect_and_check, open_target, EXIT_REFUSED};

/// Exit code: the device failed mid-way.
const EXIT_DEVICE: u8 = 3;

/// The region of a regular-file target when `--size` is not given.
const DEFAULT_FILE_REGION: u64 = 256 << 20;

/// Arguments of `blockwise bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// A block device (/dev/sdX, /dev/mmcblkN, /dev/loopN) or a regular file (created or
    /// extended to --size). Its contents are DESTROYED.
    pub target: PathBuf,
    /// Confirm that the target's data may be overwritten (required).
    #[arg(long)]
    pub yes_destroy_data: bool,
    /// Total time budget in seconds, shared evenly by the cases.
    #[arg(long, value_name = "N", default_value_t = 60.0)]
    pub seconds: f64,
    /// Erase block for the half-erase-block shift (default: sysfs preferred_erase_size, else
    /// 4MiB).
    #[arg(long, value_name = "SIZE")]
    pub erase_block: Option<String>,
    /// Bytes to write over, from offset 0 (default: the whole device; 256MiB for a file).
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Allow a partition (e.g. /dev/sdb1) as target.
    #[arg(long)]
    pub partition_ok: bool,
    /// Print the results as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the results as CSV (a header and one row per case).
    #[arg(long)]
    pub csv: bool,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
}

fn size_arg(flag: &str, text: &str) -> Result<u64, String> {
    match parse_size(text) {
        Ok(v) if v > 0 => Ok(v),
        Ok(_) => Err(format!("{flag} {text}: must not be zero")),
        Err(e) => Err(format!("{flag} {text}: {e}")),
    }
}

/// Runs `blockwise bench`.
pub fn run(a: &BenchArgs) -> anyhow::Result<ExitCode> {
    if !a.yes_destroy_data {
        return Ok(fail(
            EXIT_REFUSED,
            &format!(
                "bench writes test data over {} and destroys the data it holds: pass --yes-destroy-data to go on",
                a.target.display()
            ),
        ));
    }
    if !(a.seconds.is_finite() && a.seconds > 0.0 && a.seconds <= 86_400.0) {
        return Ok(fail(
            EXIT_REFUSED,
            &format!(
                "--seconds {}: must be more than 0 and at most 86400",
                a.seconds
            ),
        ));
    }
    let erase_flag = match a
        .erase_block
        .as_deref()
        .map(|t| size_arg("--erase-block", t))
    {
        Some(Ok(v)) if v % 8192 == 0 && v <= 1 << 30 => Some(v),
        Some(Ok(v)) => {
            return Ok(fail(
                EXIT_REFUSED,
                &format!("--erase-block {v}: must be a multiple of 8 KiB, at most 1 GiB"),
            ))
        }
        Some(Err(e)) => return Ok(fail(EXIT_REFUSED, &e)),
        None => None,
    };
    let size = match a.size.as_deref().map(|t| size_arg("--size", t)) {
        Some(Ok(v)) => Some(v),
        Some(Err(e)) => return Ok(fail(EXIT_REFUSED, &e)),
        None => None,
    };

    // The same checks as `write`: nothing is opened for writing on a refused target.
    let info = match inspect_and_check(&a.target, a.partition_ok) {
        Ok(i) => i,
        Err(code) => return Ok(code),
    };
    let mut target = match open_target(
        &a.target,
        DirectMode::Prefer,
        "; the results are labelled BUFFERED",
    ) {
        Ok(t) => t,
        Err(code) => return Ok(code),
    };
    let in_memory = target.kind() == TargetKind::File && memory_backed(&a.target);
    if in_memory && !a.quiet {
        eprintln!(
            "blockwise: warning: {} is on tmpfs/ramfs (memory): the numbers say nothing about a disk",
            blockwise_geometry::display_path(&a.target)
        );
    } else if target.kind() == TargetKind::File && !a.quiet {
        // The ratios below are read as flash behaviour (erase-block crossings, page size):
        // through a filesystem they are the filesystem's and the page cache's.
        eprintln!(
            "blockwise: warning: {} is a regular file: the numbers measure its filesystem and the page cache, not how a stick or card erases and programs; bench the device itself for that",
            blockwise_geometry::display_path(&a.target)
        );
    }
    let kind = match (target.kind(), &info) {
        (TargetKind::File, _) if in_memory => "file on tmpfs, in memory",
        (TargetKind::File, _) => "file",
        (TargetKind::Partition, _) => "partition",
        (TargetKind::Disk, Some(i)) if i.disk.starts_with("loop") => "loop device",
        (TargetKind::Disk, _) => "disk",
    };
    // The card's own erase block (SD/MMC `preferred_erase_size`), through probe's sysfs reading
    // and its rule for usable values; no read-timing estimate here (the bench itself writes).
    let sysfs = if info.is_some() {
        blockwise_flash::probe(&a.target)
            .ok()
            .map(|p| p.recommend(None))
            .filter(|r| matches!(r.erase_block_source, blockwise_flash::ValueSource::Sysfs(_)))
            .map(|r| r.erase_block_bytes)
    } else {
        None
    };
    let (erase_block, erase_source) = match (erase_flag, sysfs) {
        (Some(v), _) => (v, "--erase-block"),
        (None, Some(v)) => (v, "sysfs preferred_erase_size"),
        (None, None) => (DEFAULT_ERASE_BLOCK, "default"),
    };
    let region = match (target.kind(), size) {
        (TargetKind::File, s) => {
            let r = s.unwrap_or(DEFAULT_FILE_REGION);
            if let Err(e) = target.preallocate(r) {
                return Ok(fail(
                    EXIT_DEVICE,
                    &format!("{}: making it {}: {e}", a.target.display(), format_size(r)),
                ));
            }
            r
        }
        (_, s) => s.unwrap_or(u64::MAX).min(target.size().unwrap_or(0)),
    };
    let opts = BenchOptions {
        seconds: a.seconds,
        erase_block,
        region,
        ..BenchOptions::default()
    };
    let tinfo = TargetInfo {
        path: a.target.display().to_string(),
        kind: kind.to_string(),
        direct: target.is_direct(),
        erase_block_source: erase_source.to_string(),
    };
    let cancel = blockwise_flash::cancel_on_signals()
        .unwrap_or_else(|_| std::sync::Arc::new(AtomicBool::new(false)));
    let bar = bench_bar(!a.quiet && !a.json && !a.csv);
    let result = run_bench(
        &mut target,
        &RealClock::new(),
        &opts,
        tinfo,
        &cancel,
        &mut |e| match e {
            BenchEvent::Case { index, total, name } => {
                bar.set_length(total as u64);
                bar.set_position(index as u64);
                bar.set_message(name);
            }
        },
    );
    bar.finish_and_clear();
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            let code = if e.is_device_failure() {
                EXIT_DEVICE
            } else {
                EXIT_REFUSED
            };
            return Ok(fail(code, &e.to_string()));
        }
    };
    if a.json {
        super::emit(&format!("{:#}\n", report.json()));
    } else if a.csv {
        super::emit(&report.csv());
    } else {
        super::emit(&report.table());
    }
    if report.interrupted {
        eprintln!("blockwise: interrupted; the cases not run are marked skipped");
        return Ok(ExitCode::from(super::exit_interrupted()));
    }
    Ok(ExitCode::SUCCESS)
}

/// A bar over the cases on a terminal (the case's name beside it), hidden otherwise.
fn bench_bar(wanted: bool) -> ProgressBar {
    let target = if wanted && std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(None, target);
    bar.set_style(
        ProgressStyle::with_template("bench [{bar:30}] {pos}/{len} cases {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
