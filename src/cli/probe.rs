//! `blockwise probe DEVICE`: what the kernel says about a stick or card (sysfs), its
//! partitions and their alignment (the `verify` analysis, read-only), an erase-block estimate
//! from read timing when the kernel gives none, and the spec lines to use. Also the device
//! values behind `plan`/`build --device`. The probe, the layout and the JSON are
//! `blockwise_host`'s ([`ProbeReport`], `json::probe_json`), shared with Python; this module
//! has the arguments, the terminal notice and the human rendering.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use blockwise_flash::ValueSource;
use blockwise_geometry::format_size;
use blockwise_host::{estimate_budget, ProbeOptions, ProbeReport, Probed, MAX_ESTIMATE_SECONDS};

/// Arguments of `blockwise probe`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// A block device: /dev/sdX, /dev/mmcblkN, /dev/nvmeXnY, /dev/loopN, /dev/disk/by-id/...
    pub device: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Do not time reads to estimate the erase block.
    #[arg(long)]
    pub no_estimate: bool,
    /// Read time the estimate may spend, in seconds (it always does a few rounds).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub estimate_seconds: f64,
}

/// Says on a terminal that reads are being timed (they take `budget`).
fn announce_estimate(device: &Path, budget: Duration) {
    if std::io::stderr().is_terminal() {
        eprintln!(
            "blockwise: timing reads on {} to estimate the erase block (about {:.0} s; reads only)…",
            device.display(),
            budget.as_secs_f64()
        );
    }
}

/// Probes `device` as the CLI does (saying on a terminal when it times reads), with an
/// estimate of `budget` unless `estimate` is false; a probe error is one line (exit code 2).
pub fn probe_device(device: &Path, estimate: bool, budget: Duration) -> anyhow::Result<Probed> {
    let opts = ProbeOptions::default()
        .estimate(estimate)
        .budget(budget)
        .on_estimate(announce_estimate);
    blockwise_host::probe_device(device, &opts).map_err(|e| anyhow::anyhow!("{e}"))
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn bytes_or(v: Option<u64>, none: &str) -> String {
    v.map_or_else(|| none.to_string(), |b| format!("{b} ({})", format_size(b)))
}

fn human(r: &ProbeReport) -> String {
    let p = &r.probed;
    let (report, layout_note) = (r.layout.as_ref(), r.layout_note.as_deref());
    let d = &p.probe;
    let mut s = String::new();
    let what = if d.partition_start_bytes.is_some() {
        format!("partition of /dev/{}", d.disk)
    } else {
        "disk".to_string()
    };
    let _ = writeln!(
        s,
        "{}: {} ({}, {} {}), {}, {} bytes",
        d.path.display(),
        d.name,
        d.dev,
        d.transport.as_str(),
        what,
        format_size(d.size_bytes),
        d.size_bytes
    );
    let dash = |t: &str| {
        if t.is_empty() {
            "-".to_string()
        } else {
            t.to_string()
        }
    };
    let _ = writeln!(
        s,
        "  vendor / model / serial   {} / {} / {}",
        dash(&d.vendor),
        dash(&d.model),
        dash(&d.serial)
    );
    if !d.device_type.is_empty() {
        let _ = writeln!(s, "  device type               {}", d.device_type);
    }
    let _ = writeln!(
        s,
        "  logical block             {} bytes",
        d.logical_block_bytes
    );
    let _ = writeln!(
        s,
        "  physical block            {} bytes",
        d.physical_block_bytes
    );
    let _ = writeln!(s, "  minimum I/O               {} bytes", d.minimum_io_raw);
    let _ = writeln!(
        s,
        "  optimal I/O               {}",
        match d.optimal_io_bytes {
            Some(v) => format!("{v} bytes ({})", format_size(v)),
            None => format!("not given (optimal_io_size {})", d.optimal_io_raw),
        }
    );
    let _ = writeln!(
        s,
        "  discard granularity       {}",
        if d.discard_granularity_bytes == 0 {
            "no discard".to_string()
        } else {
            format!("{} bytes", d.discard_granularity_bytes)
        }
    );
    let _ = writeln!(
        s,
        "  preferred erase size      {}",
        bytes_or(
            d.preferred_erase_bytes,
            "not given (no device/preferred_erase_size)"
        )
    );
    let _ = writeln!(
        s,
        "  removable / rotational / read-only   {} / {} / {}",
        yes_no(d.removable),
        yes_no(d.rotational),
        yes_no(d.read_only)
    );
    if let Some(start) = d.partition_start_bytes {
        let _ = writeln!(
            s,
            "  starts at                 {start} bytes ({}) on /dev/{}",
            format_size(start),
            d.disk
        );
    }
    for n in d.notes.iter().chain(&p.notes) {
        let _ = writeln!(s, "  note: {n}");
    }
    if !d.partitions.is_empty() {
        let _ = writeln!(s, "\nKernel partitions (sysfs):");
        for k in &d.partitions {
            let _ = writeln!(
                s,
                "  {:<12} #{:<3} start {:>14} ({}), size {}",
                k.name,
                k.number,
                k.start_bytes,
                format_size(k.start_bytes),
                format_size(k.size_bytes)
            );
        }
    }
    let _ = writeln!(
        s,
        "\nLayout on the device (the `blockwise verify` analysis, checked against {}):",
        format_size(p.rec.erase_block_bytes)
    );
    match (report, layout_note) {
        (Some(r), _) if r.recognised => {
            for line in r.to_human().lines() {
                let _ = writeln!(s, "  {line}");
            }
        }
        (Some(_), _) => {
            let _ = writeln!(s, "  no partition table or filesystem recognised");
        }
        (None, Some(n)) => {
            let _ = writeln!(s, "  {n}");
        }
        (None, None) => {}
    }
    let _ = writeln!(s, "\nErase-block estimate (read timing):");
    match (&p.estimate, &p.estimate_skipped) {
        (Some(e), _) => {
            match e.erase_block {
                Some(b) => {
                    let _ = writeln!(
                        s,
                        "  estimate: {} ({} confidence, {:.2}) — {}",
                        format_size(b),
                        e.confidence_label(),
                        e.confidence,
                        e.summary
                    );
                }
                None => {
                    let _ = writeln!(s, "  {}", e.summary);
                }
            }
            let _ = writeln!(
                s,
                "  {} reads in {} rounds, {:.2} s of reads",
                e.reads,
                e.rounds,
                e.measured.as_secs_f64()
            );
            let _ = writeln!(
                s,
                "  {:>9} {:>10} {:>12} {:>12} {:>10} {:>7}",
                "size", "boundaries", "straddle µs", "control µs", "effect µs", "slower"
            );
            for z in &e.sizes {
                let us = |ns: f64| ns / 1000.0;
                let (st, co, ef) = (
                    z.straddle_ns as f64,
                    z.control_ns as f64,
                    z.effect_ns as f64,
                );
                let _ = writeln!(
                    s,
                    "  {:>9} {:>10} {:>12.1} {:>12.1} {:>10.1} {:>6.0}%{}",
                    format_size(z.size_bytes),
                    z.boundaries,
                    us(st),
                    us(co),
                    us(ef),
                    z.slower_fraction * 100.0,
                    if z.clear { " *" } else { "" }
                );
            }
        }
        (None, Some(why)) => {
            let _ = writeln!(s, "  not made: {why}");
        }
        (None, None) => {}
    }
    let _ = writeln!(s, "\nUse in the spec ([image]):");
    for line in p.rec.spec_lines().lines() {
        let _ = writeln!(s, "  {line}");
    }
    let _ = writeln!(s, "  # erase block: {}", p.rec.erase_block_reason);
    if let ValueSource::Sysfs(path) = &p.rec.erase_block_source {
        let _ = writeln!(s, "  #   (read from {})", path.display());
    }
    let _ = writeln!(s, "  # sector size: {}", p.rec.sector_reason);
    s
}

/// Runs `blockwise probe`. Exit codes: 0 probed, 2 not a block device or unreadable.
pub fn run(a: &ProbeArgs) -> anyhow::Result<ExitCode> {
    let Some(budget) = estimate_budget(a.estimate_seconds) else {
        anyhow::bail!(
            "--estimate-seconds {}: must be between 0 and {MAX_ESTIMATE_SECONDS}",
            a.estimate_seconds
        );
    };
    let r = ProbeReport::new(probe_device(&a.device, !a.no_estimate, budget)?);
    if a.json {
        let v = blockwise_host::json::probe_json(&r)?;
        super::emit(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    } else {
        super::emit(&human(&r));
    }
    Ok(ExitCode::SUCCESS)
}
