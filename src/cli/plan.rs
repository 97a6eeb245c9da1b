//! `blockwise plan` and `blockwise build`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use blockwise_geometry::{
    format_size, FsKind, FsPlan, ImageSpec, Plan, SectorSize, SizeSpec, TableKind,
};
use blockwise_host::{
    build_with_progress, check_output_path, plan_file_with_progress, DeviceValues, OutputFormat,
    OutputOptions, SpecFile, Taken,
};
use blockwise_image::{PartitionSpec, Spec, SpecError};

/// Arguments of `blockwise plan`.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Spec file (TOML). Alternatively describe the layout with the flags below.
    pub spec: Option<PathBuf>,
    #[command(flatten)]
    pub flags: LayoutFlags,
    /// Take the erase block and sector size from a probe of this device (where the spec says
    /// "auto" or nothing; see `blockwise probe`).
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<PathBuf>,
    /// Print JSON (the same fields as `verify --json`).
    #[arg(long)]
    pub json: bool,
}

/// The flag form of a spec.
#[derive(Debug, Clone, clap::Args, Default)]
pub struct LayoutFlags {
    /// Image size, e.g. 8GiB (needed with a `fill` partition).
    #[arg(long)]
    pub size: Option<String>,
    /// Erase block, e.g. 4MiB (default 4MiB).
    #[arg(long)]
    pub erase_block: Option<String>,
    /// Logical sector size: 512 or 4096.
    #[arg(long)]
    pub sector_size: Option<String>,
    /// Partition table: mbr, gpt or none.
    #[arg(long)]
    pub table: Option<String>,
    /// Start of the first partition (multiple of the erase block).
    #[arg(long)]
    pub first_partition: Option<String>,
    /// Seed for disk IDs and UUIDs.
    #[arg(long)]
    pub seed: Option<u64>,
    /// A partition as FS:SIZE, e.g. fat32:256MiB or ext4:fill; repeat in disk order.
    #[arg(long = "partition", value_name = "FS:SIZE")]
    pub partitions: Vec<String>,
}

impl LayoutFlags {
    fn any(&self) -> bool {
        self.size.is_some()
            || self.erase_block.is_some()
            || self.sector_size.is_some()
            || self.table.is_some()
            || self.first_partition.is_some()
            || self.seed.is_some()
            || !self.partitions.is_empty()
    }

    /// Builds a spec from the flags; errors name the flag.
    fn to_spec(&self) -> Result<Spec, SpecError> {
        let size = |flag: &str, v: &Option<String>| -> Result<Option<u64>, SpecError> {
            v.as_deref()
                .map(|t| {
                    blockwise_geometry::parse_size(t)
                        .map_err(|e| SpecError::new(flag, e.to_string()))
                })
                .transpose()
        };
        let d = ImageSpec::default();
        let sector_size = match size("--sector-size", &self.sector_size)? {
            None => d.sector_size,
            Some(n) => SectorSize::from_bytes(n).ok_or_else(|| {
                SpecError::new("--sector-size", format!("{n}: must be 512 or 4096"))
            })?,
        };
        let table = match self.table.as_deref() {
            None => d.table,
            Some(t) => TableKind::parse(t).map_err(|reason| SpecError::new("--table", reason))?,
        };
        let image = ImageSpec {
            size: size("--size", &self.size)?,
            erase_block: size("--erase-block", &self.erase_block)?.unwrap_or(d.erase_block),
            sector_size,
            table,
            first_partition: size("--first-partition", &self.first_partition)?,
            seed: self.seed.unwrap_or(d.seed),
            ..d
        };
        let mut partitions = Vec::new();
        for (i, p) in self.partitions.iter().enumerate() {
            let key = format!("--partition #{} ({p:?})", i + 1);
            let (fs, sz) = p.split_once(':').ok_or_else(|| {
                SpecError::new(&key, "expected FS:SIZE, e.g. fat32:256MiB or ext4:fill")
            })?;
            let fs = FsKind::parse(fs).ok_or_else(|| {
                SpecError::new(&key, format!("{fs:?}: must be one of {}", FsKind::CHOICES))
            })?;
            if fs == FsKind::Raw {
                return Err(SpecError::new(
                    &key,
                    "raw partitions need a source file; use a spec file",
                ));
            }
            let size = if sz.eq_ignore_ascii_case("fill") {
                SizeSpec::Fill
            } else if sz.get(..4).is_some_and(|h| h.eq_ignore_ascii_case("auto")) {
                SizeSpec::Auto(
                    blockwise_geometry::AutoSize::parse(sz).map_err(|e| SpecError::new(&key, e))?,
                )
            } else {
                SizeSpec::Bytes(
                    blockwise_geometry::parse_size(sz)
                        .map_err(|e| SpecError::new(&key, e.to_string()))?,
                )
            };
            partitions.push(PartitionSpec::new(fs, size));
        }
        let spec = Spec {
            image,
            partitions,
            ..Spec::default()
        };
        spec.validate().map_err(|e| {
            // Keys of the flag form read better as flags.
            let key = e
                .key
                .replace("image.", "--")
                .replace("partition[", "--partition #")
                .replace("].", " ")
                .replace(']', "");
            SpecError::new(key, e.reason)
        })?;
        Ok(spec)
    }
}

fn is_auto(v: Option<&str>) -> bool {
    v.is_some_and(|v| v.eq_ignore_ascii_case("auto"))
}

/// Loads the spec (file or flags); with `device`, the erase block and sector size the spec
/// leaves out or sets to "auto" come from a probe of it, and each value's origin is said on
/// stderr (unless `quiet`).
fn load(
    spec: Option<&Path>,
    flags: &LayoutFlags,
    device: Option<&Path>,
    quiet: bool,
) -> anyhow::Result<SpecFile> {
    if let Some(dev) = device {
        return load_for_device(spec, flags, dev, quiet, false);
    }
    for (flag, v) in [
        ("--erase-block", &flags.erase_block),
        ("--sector-size", &flags.sector_size),
    ] {
        if is_auto(v.as_deref()) {
            bail!("{flag} auto: takes the value from a probe of a device: give --device DEVICE");
        }
    }
    match (spec, flags.any()) {
        (Some(_), true) => bail!("give either a spec file or layout flags, not both"),
        (Some(p), false) => {
            if !p.exists() {
                bail!("{}: no such spec file", p.display());
            }
            super::import::load_spec(p, quiet)
        }
        (None, true) => Ok(SpecFile::new(flags.to_spec()?, PathBuf::from("."))),
        (None, false) => bail!("give a spec file, or flags like --size 8GiB --partition fat32:256MiB --partition ext4:fill"),
    }
}

/// The spec file at `spec` planned for the block device `dev` it is written to (`write SPEC
/// DEVICE`): as with `--device`, and a left-out `image.size` is the device's size.
pub(super) fn load_for(spec: &Path, dev: &Path, quiet: bool) -> anyhow::Result<SpecFile> {
    load_for_device(Some(spec), &LayoutFlags::default(), dev, quiet, true)
}

fn load_for_device(
    spec: Option<&Path>,
    flags: &LayoutFlags,
    dev: &Path,
    quiet: bool,
    whole_device: bool,
) -> anyhow::Result<SpecFile> {
    if spec.is_some() && flags.any() {
        bail!("give either a spec file or layout flags, not both");
    }
    if let Some(p) = spec.filter(|p| !p.exists()) {
        bail!("{}: no such spec file", p.display());
    }
    if spec.is_none() && !flags.any() {
        bail!("give a spec file, or flags like --size 8GiB --partition fat32:256MiB --partition ext4:fill");
    }
    let probed = super::probe::probe_device(dev, true, std::time::Duration::from_secs(2))
        .with_context(|| format!("--device {}", dev.display()))?;
    let rec = &probed.rec;
    let values = DeviceValues {
        erase_block_bytes: rec.erase_block_bytes,
        sector_bytes: rec.sector_bytes,
        size_bytes: whole_device.then_some(probed.probe.size_bytes),
    };
    let (sf, taken) = match spec {
        Some(p) => SpecFile::load_for_device(p, &values)?,
        None => {
            let mut f = flags.clone();
            let mut taken = Taken::default();
            if f.erase_block.is_none() || is_auto(f.erase_block.as_deref()) {
                f.erase_block = Some(rec.erase_block_bytes.to_string());
                taken.erase_block = true;
            }
            if f.sector_size.is_none() || is_auto(f.sector_size.as_deref()) {
                if let Some(b) = rec.sector_bytes {
                    f.sector_size = Some(b.to_string());
                    taken.sector_size = true;
                } else if f.sector_size.is_some() {
                    bail!("--sector-size auto: {}", rec.sector_reason);
                }
            }
            (SpecFile::new(f.to_spec()?, PathBuf::from(".")), taken)
        }
    };
    let prefix = if spec.is_some() { "image." } else { "--" };
    let notes = probed.device_notes(&sf.spec.image, taken, prefix);
    if !quiet {
        for n in &notes.notes {
            eprintln!("blockwise: {n}");
        }
        for w in &notes.warnings {
            eprintln!("blockwise: warning: {}", blockwise_geometry::display_str(w));
        }
    }
    Ok(sf)
}

/// JSON of a plan, in the shape of the verify report.
fn plan_json(plan: &Plan, source: &str) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(
        &blockwise_host::json::plan_json(plan, source, None)?,
    )?)
}

/// The human table.
pub fn human_plan(plan: &Plan) -> String {
    let sb = plan.sector_bytes.bytes_u64();
    let mut s = String::new();
    let table = match (plan.table.kind, plan.table.disk_id) {
        (TableKind::None, _) => "no partition table (bare filesystem)".to_string(),
        (k, Some(blockwise_geometry::DiskId::Mbr(id))) => {
            format!("{} table, disk id 0x{id:08x}", k.as_str().to_uppercase())
        }
        (k, Some(blockwise_geometry::DiskId::Gpt(g))) => {
            format!("{} table, disk GUID {g}", k.as_str().to_uppercase())
        }
        (k, None) => format!("{} table", k.as_str().to_uppercase()),
    };
    let _ = writeln!(
        s,
        "Disk: {} ({} sectors of {} B), {table}, erase block {}",
        blockwise_geometry::units::format_size_both(plan.size_bytes),
        plan.size_bytes / sb,
        sb,
        format_size(plan.erase_block_bytes)
    );
    let _ = writeln!(
        s,
        "Seed: \"{:#018x}\" (disk ID, GUIDs and UUIDs derive from it; without image.seed it derives from the spec and its inputs, so rebuilding the same gives the same bytes; seed = \"{:#018x}\" pins it, seed = \"random\" gives a fresh one per build)",
        plan.seed, plan.seed
    );
    if let Some(b) = &plan.table.boot_code {
        let _ = writeln!(
            s,
            "Boot code: {} in sector 0, from image.boot-code (blockwise writes zeros there otherwise)",
            b.describe()
        );
    }
    if let Some(g) = &plan.gpt {
        let _ = writeln!(
            s,
            "GPT: usable LBAs {}..{}, backup entries at LBA {}, backup header at LBA {} (last LBA)",
            g.first_usable_lba, g.last_usable_lba, g.backup_entries_lba, g.backup_header_lba
        );
        let mirrored: Vec<String> = plan
            .partitions
            .iter()
            .filter_map(|p| p.mbr_type.map(|t| format!("{} as 0x{t:02x}", p.index)))
            .collect();
        if !mirrored.is_empty() {
            let (start, count) = blockwise_geometry::hybrid::protective_entry(g.first_usable_lba);
            let _ = writeln!(
                s,
                "Hybrid MBR: partitions {} (mbr-type), then 0xEE over LBA {}..{} (the primary GPT)",
                mirrored.join(", "),
                start,
                start + count.saturating_sub(1)
            );
        }
    }
    if let Some(e) = &plan.extended {
        let _ = writeln!(
            s,
            "Extended partition: start sector {} ({}), {}; each logical partition's EBR sits one erase block before it (or the sector before an explicit start with no room for that)",
            e.start_bytes / sb,
            format_size(e.start_bytes),
            format_size(e.size_bytes)
        );
    }
    let _ = writeln!(s);
    let type_name = |p: &blockwise_geometry::PartitionPlan| {
        let ty = match p.type_ {
            blockwise_geometry::PartType::Gpt(g) => {
                match blockwise_geometry::types::gpt_type_name(g) {
                    Some(n) => format!("{g} ({n})"),
                    None => g.to_string(),
                }
            }
            t => t.to_string(),
        };
        format!("{ty}{}", if p.bootable { " *" } else { "" })
    };
    let tw = plan
        .partitions
        .iter()
        .map(|p| type_name(p).len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        s,
        "{:>3} {:>12} {:>12} {:>12} {:>12}  {:<tw$} {:<7} {:>9}  ok",
        "#", "start sector", "sectors", "start", "size", "type", "content", "alignment"
    );
    for p in &plan.partitions {
        let align = if p.start_bytes == 0 {
            "-".to_string()
        } else {
            format_size(p.alignment_bytes)
        };
        let _ = writeln!(
            s,
            "{:>3} {:>12} {:>12} {:>12} {:>12}  {:<tw$} {:<7} {:>9}  {}",
            if p.in_table {
                p.index.to_string()
            } else {
                "-".to_string()
            },
            p.start_bytes / sb,
            p.size_bytes / sb,
            format_size(p.start_bytes),
            format_size(p.size_bytes),
            type_name(p),
            p.content.as_str(),
            align,
            match (p.checked, p.aligned) {
                (false, _) => "not checked",
                (true, true) => "yes",
                (true, false) => "NO",
            }
        );
    }
    if !plan.raw.is_empty() {
        let _ = writeln!(s, "\nbootloader area: raw writes outside the partitions");
        for r in &plan.raw {
            let _ = writeln!(
                s,
                "  sector {:>8} ({:>10}) {:>10} bytes  {}",
                r.offset_bytes / sb,
                format_size(r.offset_bytes),
                r.size_bytes,
                blockwise_geometry::display_str(&r.source)
            );
        }
    }
    if plan.partitions.iter().any(|p| !p.in_table) {
        let _ = writeln!(
            s,
            "(rows numbered - are written but left out of the partition table: in-partition-table = false)"
        );
    }
    for p in &plan.partitions {
        match &p.filesystem {
            Some(FsPlan::Fat(f)) => {
                let _ = writeln!(
                    s,
                    "\npartition {} {}: {} B sectors, {} clusters of {}, {} reserved sectors, {} FAT(s) of {} sectors; FAT at {} ({}), data at {} ({})",
                    p.index, f.kind, f.sector_bytes, f.cluster_count, format_size(u64::from(f.cluster_bytes)),
                    f.reserved_sectors, f.fat_count, f.fat_sectors,
                    f.fat_start_bytes, format_size(f.fat_start_bytes), f.data_start_bytes, format_size(f.data_start_bytes)
                );
                for n in &f.notes {
                    let _ = writeln!(s, "  - {n}");
                }
            }
            Some(FsPlan::Ext4(x)) => {
                let _ = writeln!(
                    s,
                    "\npartition {} {}: {} blocks of {} B, {} inodes, stride {}, stripe width {}{}{}",
                    p.index, x.kind, x.blocks, x.block_bytes, x.inodes, x.stride, x.stripe_width,
                    x.journal_start_bytes.map(|j| format!(", journal at {} ({})", j, format_size(j))).unwrap_or_default(),
                    x.inode_table_start_bytes.map(|j| format!(", first inode table at {} ({})", j, format_size(j))).unwrap_or_default(),
                );
                if !x.features.is_empty() {
                    let _ = writeln!(s, "  features: {}", x.features.join(" "));
                }
                for n in &x.notes {
                    let _ = writeln!(s, "  - {n}");
                }
            }
            Some(FsPlan::F2fs(f)) => {
                let _ = writeln!(
                    s,
                    "\npartition {} f2fs: {} blocks, sections of {} ({} × 2 MiB segments), zones of {}, segment0 at {} ({}), main area at {} ({}), {} main segments",
                    p.index, f.blocks, format_size(f.section_bytes), f.segments_per_section,
                    format_size(f.zone_bytes), f.segment0_start_bytes, format_size(f.segment0_start_bytes),
                    f.main_start_bytes, format_size(f.main_start_bytes), f.main_segments
                );
                for n in &f.notes {
                    let _ = writeln!(s, "  - {n}");
                }
            }
            Some(FsPlan::Exfat(x)) => {
                let _ = writeln!(
                    s,
                    "\npartition {} exfat: {} B sectors, {} clusters of {}, FAT of {} sectors at {} ({}), cluster heap at {} ({})",
                    p.index, x.sector_bytes, x.cluster_count, format_size(u64::from(x.cluster_bytes)),
                    x.fat_sectors, x.fat_start_bytes, format_size(x.fat_start_bytes),
                    x.heap_start_bytes, format_size(x.heap_start_bytes)
                );
                for n in &x.notes {
                    let _ = writeln!(s, "  - {n}");
                }
            }
            _ => {}
        }
        if !p.attributes.is_empty() {
            let _ = writeln!(
                s,
                "partition {} GPT attributes: {} (0x{:016x}{})",
                p.index,
                p.attributes.names().join(", "),
                p.attributes.bits() | if p.bootable { 4 } else { 0 },
                if p.bootable {
                    " with legacy-bios-bootable"
                } else {
                    ""
                }
            );
        }
    }
    for g in &plan.slots {
        let members: Vec<String> = g
            .partitions
            .iter()
            .map(|m| {
                format!(
                    "{} = partition {} at {}",
                    m.slot,
                    m.index,
                    format_size(m.start_bytes)
                )
            })
            .collect();
        let _ = writeln!(s, "\nslots of {}: {}", g.name, members.join(", "));
    }
    if !plan.notes.is_empty() {
        let _ = writeln!(s);
        for n in &plan.notes {
            let _ = writeln!(s, "warning: {n}");
        }
    }
    // What `verify` will say about the built image (the JSON's `findings`), in its format.
    let findings = blockwise_verify::plan_findings(plan);
    if !findings.is_empty() {
        let _ = writeln!(s);
        for f in &findings {
            let _ = writeln!(s, "{:<7} {}: {}", f.severity.as_str(), f.code, f.message);
        }
    }
    let unchecked: Vec<String> = plan
        .partitions
        .iter()
        .filter(|p| !p.checked)
        .map(|p| {
            format!(
                "{} ({})",
                p.index,
                p.filesystem
                    .as_ref()
                    .map_or_else(|| "contents".to_string(), FsPlan::kind_name)
            )
        })
        .collect();
    let misaligned = plan.partitions.iter().any(|p| p.checked && !p.aligned);
    let _ = writeln!(
        s,
        "\n{}",
        match (misaligned, unchecked.is_empty()) {
            (false, true) => format!(
                "aligned: every partition and filesystem region starts on a {} boundary",
                format_size(plan.erase_block_bytes)
            ),
            (false, false) => format!(
                "aligned where checked: verify cannot check inside partition {} (only the start), so the image is not called aligned",
                unchecked.join(", ")
            ),
            (true, _) => "NOT aligned: see the rows marked NO".to_string(),
        }
    );
    s
}

/// `blockwise plan`.
pub fn run_plan(a: &PlanArgs) -> anyhow::Result<ExitCode> {
    let mut sf = load(a.spec.as_deref(), &a.flags, a.device.as_deref(), false)?;
    // The scan of a large tree stops at the first SIGINT/SIGTERM/SIGHUP (exit 128 + it).
    let mut progress = super::progress::Bar::new(!a.json);
    let plan = match plan_file_with_progress(&mut sf, &mut progress) {
        Ok(p) => p,
        Err(blockwise_host::Error::Cancelled) if progress.signal().is_some() => {
            progress.println(&format!(
                "blockwise: interrupted by signal {} {}: nothing planned",
                progress.signal().unwrap_or(0),
                progress.reached()
            ));
            return Ok(ExitCode::from(super::exit_interrupted()));
        }
        Err(e) => return Err(e.into()),
    };
    drop(progress);
    let source = a
        .spec
        .as_ref()
        .map_or_else(|| "(flags)".to_string(), |p| p.display().to_string());
    if a.json {
        super::emit(&format!("{}\n", plan_json(&plan, &source)?));
    } else {
        super::emit(&human_plan(&plan));
    }
    Ok(ExitCode::SUCCESS)
}

/// Arguments of `blockwise build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// Spec file (TOML).
    pub spec: PathBuf,
    /// Output image (written to a temp file next to it, then renamed). The name picks the
    /// format: .simg or .sparse (Android sparse), .zst (seekable zstd), .xz (xz), anything
    /// else raw.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format whatever the name says: raw, simg, zst or xz.
    #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
    pub format: Option<OutputFormat>,
    /// Compression level of a .zst (1-22, default 3) or .xz (0-9, default 6) output.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub level: Option<i32>,
    /// Also write a bmaptool block map (of the raw image, whatever the output format).
    #[arg(long, value_name = "FILE")]
    pub bmap: Option<PathBuf>,
    /// Take the erase block and sector size from a probe of this device (where the spec says
    /// "auto" or nothing; see `blockwise probe`).
    #[arg(long, value_name = "DEVICE")]
    pub device: Option<PathBuf>,
    /// Print the plan of the built image as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no plan: nothing on stdout unless --json (warnings and errors still
    /// go to stderr).
    #[arg(short, long)]
    pub quiet: bool,
}

fn parse_format(s: &str) -> Result<OutputFormat, String> {
    OutputFormat::parse(s).ok_or_else(|| format!("{s:?}: must be one of {}", OutputFormat::CHOICES))
}

/// A build that failed: interrupted by a signal (exit 128 + the signal, temp files already
/// removed), or an error (with `context` when it happened while writing `output`).
fn stopped(
    progress: &super::progress::Bar,
    e: blockwise_host::Error,
    output: &Path,
    context: Option<String>,
) -> anyhow::Result<ExitCode> {
    if let (blockwise_host::Error::Cancelled, Some(sig)) = (&e, progress.signal()) {
        progress.println(&format!(
            "blockwise: interrupted by signal {sig} {}: stopped, temp files removed, {} untouched",
            progress.reached(),
            blockwise_geometry::display_path(output)
        ));
        return Ok(ExitCode::from(super::exit_interrupted()));
    }
    match context {
        // The refusal names the output already.
        Some(_) if matches!(e, blockwise_host::Error::OutputIsInput { .. }) => Err(e.into()),
        Some(c) => Err(anyhow::Error::new(e).context(c)),
        None => Err(e.into()),
    }
}

/// `blockwise build`.
pub fn run_build(a: &BuildArgs) -> anyhow::Result<ExitCode> {
    if !a.spec.exists() {
        bail!("{}: no such spec file", a.spec.display());
    }
    // Refuse a device or other non-file output, or a name promising a container blockwise
    // does not write, before any work (see `blockwise write`).
    check_output_path(&a.output)?;
    let format = OutputFormat::resolve(&a.output, a.format)?;
    let out_options = OutputOptions {
        format: Some(format),
        level: a.level,
    };
    if let Some(b) = &a.bmap {
        check_output_path(b)?;
    }
    let mut sf = match &a.device {
        Some(dev) => load(
            Some(a.spec.as_path()),
            &LayoutFlags::default(),
            Some(dev.as_path()),
            a.quiet,
        )?,
        None => super::import::load_spec(&a.spec, a.quiet)?,
    };
    sf.outputs = std::iter::once(a.output.clone())
        .chain(a.bmap.clone())
        .collect();
    let work_dir = a
        .output
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let mut progress = super::progress::Bar::new(!a.quiet && !a.json);
    let built = match build_with_progress(&mut sf, &work_dir, &mut progress) {
        Ok(b) => b,
        Err(e) => return stopped(&progress, e, &a.output, None),
    };
    for w in &built.warnings {
        progress.println(&format!(
            "blockwise: warning: {}",
            blockwise_geometry::display_str(w)
        ));
    }
    let written = match built.write_as(&a.output, a.bmap.as_deref(), &out_options, &mut progress) {
        Ok(s) => s,
        Err(e) => {
            let what = match &a.bmap {
                Some(b) => format!("writing {} and {}", a.output.display(), b.display()),
                None => format!("writing {}", a.output.display()),
            };
            return stopped(&progress, e, &a.output, Some(what));
        }
    };
    drop(progress);
    if a.json {
        let v = blockwise_host::json::build_output_json(
            &built,
            &written,
            &a.spec.display().to_string(),
            &a.output.display().to_string(),
        )?;
        let text = serde_json::to_string_pretty(&v)?;
        super::emit(&format!("{text}\n"));
    } else if !a.quiet {
        let what = match (&written.summary, written.format) {
            (Some(s), OutputFormat::AndroidSparse) => format!(
                "Android sparse, {} chunks, {} file for a {} image with {} of data; {} don't care",
                s.units,
                format_size(written.output_bytes),
                format_size(built.plan.size_bytes),
                format_size(built.image.data_bytes()),
                format_size(s.dont_care_bytes)
            ),
            (Some(s), f) => format!(
                "{}, {} frames ({} all zero), {} file for a {} image with {} of data",
                if f == OutputFormat::Xz {
                    "xz"
                } else {
                    "seekable zstd"
                },
                s.units,
                format_size(s.fill_bytes),
                format_size(written.output_bytes),
                format_size(built.plan.size_bytes),
                format_size(built.image.data_bytes())
            ),
            _ => format!(
                "{}, {} of data",
                format_size(built.plan.size_bytes),
                format_size(built.image.data_bytes())
            ),
        };
        super::emit(&format!(
            "{}wrote {} ({what})\n",
            human_plan(&built.plan),
            blockwise_geometry::display_path(&a.output),
        ));
    }
    Ok(ExitCode::SUCCESS)
}
