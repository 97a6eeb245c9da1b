//! `blockwise verify IMAGE|DEVICE`: alignment and consistency report. Never writes.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use blockwise_container::verify::{report_human, report_json, verify, VerifyError};
use blockwise_geometry::{check_erase_block, format_size, parse_size, SectorSize};
use blockwise_verify::Options;

use blockwise_host::FileSource;

/// Arguments of `blockwise verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Image file, container (.xz .gz .zst .bz2 .lz4 .zip, Android sparse) or block device
    /// (opened read-only, never written).
    pub source: PathBuf,
    /// Erase block to check against (power of two, e.g. 128KiB, 4MiB, 16MiB).
    #[arg(long, default_value = "4MiB")]
    pub erase_block: String,
    /// Treat erase-block misalignment as an error (exit code 1).
    #[arg(long)]
    pub strict: bool,
    /// Print the JSON report.
    #[arg(long)]
    pub json: bool,
    /// Logical sector size of the partition table: 512 or 4096 (default: detect).
    #[arg(long)]
    pub sector_size: Option<u64>,
}

/// Runs `verify`. Exit codes: 0 aligned/consistent, 1 error findings, 2 bad usage or
/// unreadable/unrecognised input.
pub fn run(args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    let erase = parse_size(&args.erase_block)
        .with_context(|| format!("--erase-block {:?}", args.erase_block))?;
    if let Err(why) = check_erase_block(erase) {
        anyhow::bail!("--erase-block {}: {why}", args.erase_block);
    }
    let sector = match args.sector_size {
        None => None,
        Some(n) => Some(SectorSize::from_bytes(n).ok_or_else(|| {
            anyhow::anyhow!("--sector-size {n}: only 512 and 4096 are supported")
        })?),
    };
    let src = FileSource::open(&args.source)?;
    let hints = src.hints();
    if let Some(start) = src.partition_start() {
        eprintln!(
            "note: {} is a partition starting at {} on its disk; offsets below are relative to the partition — verify the whole disk to check partition alignment",
            args.source.display(),
            format_size(start)
        );
    }
    let opts = Options::new(args.source.display().to_string())
        .erase_block(erase)
        .strict(args.strict)
        .sector_size(sector)
        .device(hints);
    let (report, container) = match verify(src, &opts) {
        Ok(r) => r,
        Err(VerifyError::Refused(r)) => {
            eprintln!(
                "blockwise: {}: {r}",
                blockwise_container::escape(&args.source.display().to_string())
            );
            return Ok(ExitCode::from(2));
        }
        Err(VerifyError::Decode(e)) => {
            return Err(anyhow::Error::new(e).context(format!("reading {}", args.source.display())))
        }
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    if args.json {
        let v = report_json(&report, container.as_ref())?;
        super::emit(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    } else {
        super::emit(&report_human(&report, container.as_ref()));
    }
    Ok(ExitCode::from(report.exit_code()))
}
