//! `blockwise probe DEVICE`: what the kernel says about a stick or card (sysfs), its
//! partitions and their alignment (the `verify` analysis, read-only), an erase-block estimate
//! from read timing when the kernel gives none, and the spec lines to use. Also the device
//! values behind `plan`/`build --device`.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use blockwise_flash::{
    estimate_erase_block, probe, DirectReader, Estimate, EstimateOptions, Probe, ProbeError,
    Recommendation, ValueSource,
};
use blockwise_geometry::{format_size, SectorSize};
use blockwise_host::FileSource;
use blockwise_verify::{verify, Options, Report};
use serde_json::{json, Value};

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

/// A probe with everything derived from it.
pub struct Probed {
    /// What sysfs says.
    pub probe: Probe,
    /// The read-timing estimate, when one was made.
    pub estimate: Option<Estimate>,
    /// Why no estimate was made, when none was.
    pub estimate_skipped: Option<String>,
    /// What to plan with.
    pub rec: Recommendation,
    /// Notes (unreadable device, …).
    pub notes: Vec<String>,
}

/// A probe error as the CLI's one line (exit code 2).
fn probe_error(e: ProbeError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Probes `device` and, when the kernel gives no erase block, estimates it from read timing
/// (`budget` of read time; none when `estimate` is false).
pub fn probe_device(device: &Path, estimate: bool, budget: Duration) -> anyhow::Result<Probed> {
    let probe = probe(device).map_err(probe_error)?;
    let mut notes = Vec::new();
    let known = probe
        .preferred_erase_bytes
        .is_some_and(|p| blockwise_geometry::check_erase_block(p).is_ok());
    let (est, skipped) = if known {
        (
            None,
            Some("the kernel gives the erase block (preferred_erase_size)".to_string()),
        )
    } else if !estimate {
        (None, Some("--no-estimate".to_string()))
    } else if probe.partition_start_bytes.is_some() {
        (
            None,
            Some(format!(
                "{} is a partition: probe the whole disk /dev/{} for an estimate",
                probe.path.display(),
                probe.disk
            )),
        )
    } else {
        let lbs = probe.logical_block_bytes;
        let len = usize::try_from(lbs.saturating_mul(2)).unwrap_or(8192);
        match DirectReader::open(device, len) {
            Ok(mut reader) => {
                if std::io::stderr().is_terminal() {
                    eprintln!(
                        "blockwise: timing reads on {} to estimate the erase block (about {:.0} s; reads only)…",
                        device.display(),
                        budget.as_secs_f64()
                    );
                }
                let mut opts = EstimateOptions::new(probe.size_bytes, lbs);
                opts.budget = budget;
                match estimate_erase_block(&mut reader, &opts) {
                    Ok(e) => (Some(e), None),
                    Err(e) => (None, Some(format!("reading {}: {e}", device.display()))),
                }
            }
            Err(e) => (
                None,
                Some(format!(
                    "cannot open {} with O_DIRECT for reading: {e}",
                    device.display()
                )),
            ),
        }
    };
    if probe.rotational && probe.transport != blockwise_flash::Transport::Loop {
        notes.push(
            "the device says it is rotational (a hard disk?): erase blocks are a flash notion"
                .into(),
        );
    }
    let rec = probe.recommend(est.as_ref());
    if rec.sector_bytes.is_none() {
        notes.push(rec.sector_reason.clone());
    }
    Ok(Probed {
        probe,
        estimate: est,
        estimate_skipped: skipped,
        rec,
        notes,
    })
}

/// Where a value came from, for the messages of `plan`/`build --device`.
pub fn erase_origin(p: &Probed) -> String {
    match &p.rec.erase_block_source {
        ValueSource::Sysfs(path) => format!("from {}", path.display()),
        ValueSource::Estimate { .. } => format!(
            "from the read-timing estimate on {} ({} confidence)",
            p.probe.path.display(),
            p.estimate
                .as_ref()
                .map_or("low", Estimate::confidence_label)
        ),
        ValueSource::Default => format!(
            "the default: {} gives no erase block ({})",
            p.probe.path.display(),
            p.estimate.as_ref().map_or_else(
                || "no preferred_erase_size".to_string(),
                |e| e.summary.clone()
            )
        ),
    }
}

/// The `verify` report of the device, read-only, checked against `erase` bytes.
fn layout(p: &Probe, erase: u64) -> anyhow::Result<Report> {
    let src = FileSource::open(&p.path)?;
    let name = p.path.display().to_string();
    let opts = Options::new(name.clone())
        .erase_block(erase)
        .sector_size(SectorSize::from_bytes(p.logical_block_bytes))
        .device(src.hints());
    verify(&src, &opts).with_context(|| format!("reading {name}"))
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

fn estimate_json(e: &Estimate) -> Value {
    json!({
        "erase_block_bytes": e.erase_block,
        "confidence": (e.confidence * 100.0).round() / 100.0,
        "confidence_label": e.confidence_label(),
        "summary": e.summary,
        "reads": e.reads,
        "rounds": e.rounds,
        "measured_seconds": e.measured.as_secs_f64(),
        "sizes": e.sizes.iter().map(|s| json!({
            "size_bytes": s.size_bytes,
            "boundaries": s.boundaries,
            "straddle_ns": s.straddle_ns,
            "control_ns": s.control_ns,
            "effect_ns": s.effect_ns,
            "slower_fraction": s.slower_fraction,
            "clear": s.clear,
        })).collect::<Vec<_>>(),
    })
}

fn to_json(
    p: &Probed,
    report: Option<&Report>,
    layout_note: Option<&str>,
) -> anyhow::Result<Value> {
    let d = &p.probe;
    let (source, from) = match &p.rec.erase_block_source {
        ValueSource::Sysfs(path) => ("sysfs", Some(path.display().to_string())),
        ValueSource::Estimate { .. } => ("estimate", None),
        ValueSource::Default => ("default", None),
    };
    let mut notes = d.notes.clone();
    notes.extend(p.notes.iter().cloned());
    Ok(json!({
        "device": d.path.display().to_string(),
        "name": d.name,
        "disk": d.disk,
        "dev": d.dev,
        "sysfs": d.sysfs.display().to_string(),
        "partition_start_bytes": d.partition_start_bytes,
        "size_bytes": d.size_bytes,
        "logical_block_bytes": d.logical_block_bytes,
        "physical_block_bytes": d.physical_block_bytes,
        "minimum_io_bytes": d.minimum_io_raw,
        "optimal_io_bytes": d.optimal_io_bytes,
        "optimal_io_raw": d.optimal_io_raw,
        "discard_granularity_bytes": d.discard_granularity_bytes,
        "discard_max_bytes": d.discard_max_bytes,
        "preferred_erase_bytes": d.preferred_erase_bytes,
        "alignment_offset_bytes": d.alignment_offset_bytes,
        "removable": d.removable,
        "rotational": d.rotational,
        "read_only": d.read_only,
        "vendor": d.vendor,
        "model": d.model,
        "serial": d.serial,
        "transport": d.transport.as_str(),
        "device_type": d.device_type,
        "kernel_partitions": d.partitions.iter().map(|k| json!({
            "name": k.name,
            "number": k.number,
            "start_bytes": k.start_bytes,
            "size_bytes": k.size_bytes,
        })).collect::<Vec<_>>(),
        "layout": match report {
            Some(r) => serde_json::to_value(r)?,
            None => Value::Null,
        },
        "layout_note": layout_note,
        "estimate": p.estimate.as_ref().map(estimate_json),
        "estimate_skipped": p.estimate_skipped,
        "recommendation": {
            "erase_block_bytes": p.rec.erase_block_bytes,
            "erase_block_source": source,
            "erase_block_from": from,
            "erase_block_reason": p.rec.erase_block_reason,
            "sector_bytes": p.rec.sector_bytes,
            "sector_reason": p.rec.sector_reason,
            "spec": p.rec.spec_lines(),
        },
        "notes": notes,
    }))
}

fn human(p: &Probed, report: Option<&Report>, layout_note: Option<&str>) -> String {
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
    if !(a.estimate_seconds.is_finite() && a.estimate_seconds >= 0.0 && a.estimate_seconds <= 600.0)
    {
        anyhow::bail!(
            "--estimate-seconds {}: must be between 0 and 600",
            a.estimate_seconds
        );
    }
    let p = probe_device(
        &a.device,
        !a.no_estimate,
        Duration::from_secs_f64(a.estimate_seconds),
    )?;
    let (report, note) = match layout(&p.probe, p.rec.erase_block_bytes) {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(format!("not analysed: {}", super::one_line(&e)))),
    };
    if a.json {
        let v = to_json(&p, report.as_ref(), note.as_deref())?;
        super::emit(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    } else {
        super::emit(&human(&p, report.as_ref(), note.as_deref()));
    }
    Ok(ExitCode::SUCCESS)
}
