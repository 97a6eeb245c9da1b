//! The plain-Rust half of the bindings: spec handling, planning, verify options and output
//! (with the safe-to-flash answer), and error categories. No JS types here, so all of it is
//! tested on the host. Building lives in [`crate::build`], the `.bmap` in [`crate::bmap`],
//! the Check rounds in [`crate::source`].

use blockwise_geometry::{
    format_size, parse_size, Meta, Plan, SectorSize, SizeSpec, Tree, ERASE_BLOCK_RANGE,
};
use blockwise_image::{apply_entries, plan_full, Spec, SpecError};
use blockwise_verify::{Finding, Options, Report, SafeToFlash, Severity};
use serde::{Deserialize, Serialize};

/// Most bytes `verify` reads from a blob before giving up (the verifier needs some KiB).
pub const MAX_READ_BYTES: u64 = 16 << 20;
/// Most separate reads `verify` makes.
pub const MAX_READS: u32 = 4096;
/// Smallest erase block the page offers (the spec accepts smaller ones down to 4 KiB).
pub const PAGE_MIN_ERASE_BLOCK: u64 = 128 << 10;

/// The category of a failure: the JS `Error.name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// The spec or the options ask for something impossible.
    Spec,
    /// Valid, but not done here (compressed images, images too large for a tab).
    Unsupported,
    /// The input bytes are wrong.
    CorruptImage,
    /// Reading the input failed.
    Io,
    /// A bug in the bindings.
    Internal,
}

impl Category {
    /// The JS error name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Category::Spec => "SpecError",
            Category::Unsupported => "UnsupportedError",
            Category::CorruptImage => "CorruptImageError",
            Category::Io => "IoError",
            Category::Internal => "InternalError",
        }
    }
}

/// A failure on its way to JS.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", category.name())]
pub struct Failure {
    /// The category.
    pub category: Category,
    /// The message; for spec errors it starts with the key (`partition[2].size: …`).
    pub message: String,
    /// For spec errors: the key alone (`partition[2].size`), so a form can mark the field.
    pub key: Option<String>,
}

impl Failure {
    /// A spec/options error about `key`.
    pub fn spec(key: impl core::fmt::Display, reason: impl core::fmt::Display) -> Self {
        Failure {
            category: Category::Spec,
            message: format!("{key}: {reason}"),
            key: Some(key.to_string()),
        }
    }

    /// Something this page does not do.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Failure {
            category: Category::Unsupported,
            message: message.into(),
            key: None,
        }
    }

    /// Reading the input failed.
    pub fn io(message: impl core::fmt::Display) -> Self {
        Failure {
            category: Category::Io,
            message: message.to_string(),
            key: None,
        }
    }

    /// A bug.
    pub fn internal(message: impl Into<String>) -> Self {
        Failure {
            category: Category::Internal,
            message: message.into(),
            key: None,
        }
    }
}

impl From<SpecError> for Failure {
    fn from(e: SpecError) -> Self {
        Failure::spec(e.key, e.reason)
    }
}

impl From<blockwise_image::Error> for Failure {
    fn from(e: blockwise_image::Error) -> Self {
        use blockwise_image::ErrorKind;
        let category = match (&e, e.kind()) {
            (blockwise_image::Error::Spec(s), _) => return Failure::spec(&s.key, &s.reason),
            (_, ErrorKind::Spec) => Category::Spec,
            (_, ErrorKind::Unsupported) => Category::Unsupported,
            (_, ErrorKind::Io) => Category::Io,
            _ => Category::Internal,
        };
        Failure {
            category,
            message: e.to_string(),
            key: None,
        }
    }
}

/// Parses a TOML spec.
pub fn spec_from_toml(text: &str) -> Result<Spec, Failure> {
    Spec::from_toml(text).map_err(Failure::from)
}

/// The file-creation time of a spec (its `timestamp`, else 0: a page has no
/// `SOURCE_DATE_EPOCH`).
#[must_use]
pub fn timestamp(spec: &Spec) -> i64 {
    spec.image
        .timestamp
        .and_then(|t| i64::try_from(t).ok())
        .unwrap_or(0)
}

/// The trees of a spec without files: an empty root plus the `[[partition.entry]]`
/// overrides for every FAT/ext4 partition, as the CLI makes them for partitions without
/// `contents`.
pub(crate) fn empty_trees(spec: &Spec, ts: i64) -> Result<Vec<Option<Tree>>, Failure> {
    let mut trees = Vec::new();
    for (i, p) in spec.partitions.iter().enumerate() {
        if !blockwise_image::takes_tree(p.fs) {
            trees.push(None);
            continue;
        }
        let mut tree = Tree::new(dir_meta(ts));
        apply_entries(&mut tree, &p.entries, &format!("partition[{}]", i + 1), ts)?;
        trees.push(Some(tree));
    }
    Ok(trees)
}

pub(crate) fn dir_meta(mtime: i64) -> Meta {
    Meta {
        mode: 0o755,
        mtime,
        ..Meta::default()
    }
}

/// Plans a spec as `blockwise plan` does for a spec whose partitions have no `contents`
/// (squashfs compressed from an empty tree).
pub fn plan(spec: &Spec) -> Result<Plan, Failure> {
    let ts = timestamp(spec);
    let trees = empty_trees(spec, ts)?;
    let mut seeded = spec.clone();
    resolve_seed(&mut seeded, &trees);
    // squashfs without a size or with an appended hash tree is compressed first, as
    // `blockwise plan` does, here from the empty tree; a build replans with the files.
    crate::build::make_squashfs(&mut seeded, &trees, &crate::build::Unread, ts, true)?;
    Ok(plan_full(&seeded, &trees, ts)?)
}

/// Sets `spec.image.seed` as the CLI does ([`blockwise_image::resolve_seed`]): the number
/// given, a fresh one for `"random"`, or one derived from the spec and `trees` (times clamped
/// to `image.timestamp` when it is set). Raw sources, which the page does not read, count
/// with no size.
pub(crate) fn resolve_seed(spec: &mut Spec, trees: &[Option<Tree>]) -> u64 {
    let clamp = spec.image.timestamp.and_then(|t| i64::try_from(t).ok());
    blockwise_image::resolve_seed(spec, trees, &[], clamp, random_seed)
}

#[cfg(target_arch = "wasm32")]
fn random_seed() -> u64 {
    // Math.random gives 52 random bits; two of them fill 64.
    let part = || (js_sys::Math::random() * 4_294_967_296.0) as u64;
    (part() << 32) ^ part()
}

#[cfg(not(target_arch = "wasm32"))]
fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now())
}

/// A size given as a number of bytes or as text (`"4MiB"`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    /// Bytes.
    Bytes(u64),
    /// Text such as `4MiB`.
    Text(String),
}

impl SizeValue {
    fn bytes(&self, key: &str) -> Result<u64, Failure> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(t) => parse_size(t).map_err(|e| Failure::spec(key, e)),
        }
    }
}

/// Options of `verify`, from JS.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifyOptions {
    /// Erase block to check against (default 4 MiB).
    pub erase_block: Option<SizeValue>,
    /// Erase-block misalignment is an error.
    pub strict: Option<bool>,
    /// Logical sector size (512 or 4096); default: detect.
    pub sector_size: Option<u64>,
    /// Source name for the report (default: the file's name).
    pub name: Option<String>,
}

impl VerifyOptions {
    /// The verifier's options.
    pub fn to_options(&self) -> Result<Options, Failure> {
        // No scan of the gaps outside the partitions: it reads up to 256 MiB, the page reads
        // a Blob in small fetch rounds (bootloader areas are the CLI's `verify`).
        let mut o =
            Options::new(self.name.clone().unwrap_or_else(|| "image".into())).scan_gaps(false);
        if let Some(e) = &self.erase_block {
            let e = e.bytes("options.eraseBlock")?;
            if e == 0 {
                return Err(Failure::spec("options.eraseBlock", "must not be 0"));
            }
            o = o.erase_block(e);
        }
        if let Some(s) = self.sector_size {
            let s = SectorSize::from_bytes(s).ok_or_else(|| {
                Failure::spec("options.sectorSize", format!("{s}: must be 512 or 4096"))
            })?;
            o = o.sector_size(Some(s));
        }
        Ok(o.strict(self.strict.unwrap_or(false)))
    }
}

/// What `verify` read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReadStats {
    /// Bytes read from the blob.
    pub bytes_read: u64,
    /// Number of `slice()` reads.
    pub reads: u32,
}

impl ReadStats {
    /// Counts one read of `n` bytes.
    pub fn add(&mut self, n: u64) {
        self.bytes_read = self.bytes_read.saturating_add(n);
        self.reads = self.reads.saturating_add(1);
    }
}

/// Refuses a read that would take `verify` past its budget (a bug or a hostile image).
pub fn check_budget(stats: &ReadStats, (start, end): (u64, u64)) -> Result<(), Failure> {
    let n = end.saturating_sub(start);
    if n == 0 {
        return Err(Failure::internal(format!(
            "the verifier asked for bytes at {start}, past the end of the source"
        )));
    }
    if stats.reads >= MAX_READS || stats.bytes_read.saturating_add(n) > MAX_READ_BYTES {
        return Err(Failure {
            category: Category::CorruptImage,
            key: None,
            message: format!(
                "the verifier wanted more than {} reads or {} MiB of metadata; the image is probably corrupt",
                MAX_READS,
                MAX_READ_BYTES >> 20
            ),
        });
    }
    Ok(())
}

/// How one partition row is drawn: its worst finding and whether it runs past the end of
/// the image. Partition `0` is a bare filesystem; findings about the whole disk are
/// `partition: None` and belong to no row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RowMark {
    /// Partition number (as in the report).
    pub index: u32,
    /// The worst severity among its findings, `None` when it has none.
    pub severity: Option<Severity>,
    /// It ends past the end of the source (`partition-past-end`): drawn cut off, not clipped.
    pub past_end: bool,
    /// The codes of its findings, worst first.
    pub codes: Vec<String>,
    /// Its findings in a few words (`Finding::summary`), worst first.
    pub notes: Vec<RowNote>,
}

/// One finding of a row, in a few words.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RowNote {
    /// Its severity.
    pub severity: Severity,
    /// Its code.
    pub code: String,
    /// What is wrong, up to the first consequence.
    pub text: String,
}

/// The marks of every partition of `partitions` from `findings`.
#[must_use]
pub fn row_marks(
    partitions: &[blockwise_geometry::PartitionPlan],
    findings: &[Finding],
) -> Vec<RowMark> {
    partitions
        .iter()
        .map(|p| {
            let mine: Vec<&Finding> = findings
                .iter()
                .filter(|f| f.partition == Some(p.index))
                .collect();
            RowMark {
                index: p.index,
                severity: mine.iter().map(|f| f.severity).min(),
                past_end: mine
                    .iter()
                    .any(|f| f.code == blockwise_verify::FindingCode::PartitionPastEnd),
                codes: {
                    let mut m = mine.clone();
                    m.sort_by_key(|f| f.severity);
                    m.iter().map(|f| f.code.as_str().to_string()).collect()
                },
                notes: {
                    let mut m = mine.clone();
                    m.sort_by_key(|f| f.severity);
                    m.iter()
                        .map(|f| RowNote {
                            severity: f.severity,
                            code: f.code.as_str().to_string(),
                            text: f.summary().to_string(),
                        })
                        .collect()
                },
            }
        })
        .collect()
}

/// What the input is, in words: the table, a bare filesystem, or unrecognised.
#[must_use]
pub fn describe(report: &Report) -> String {
    use blockwise_geometry::TableKind;
    if !report.recognised {
        return "unrecognised: neither a partition table nor a filesystem blockwise knows (not a disk image, or one in a container this page does not read)".into();
    }
    match report.table.kind {
        TableKind::Mbr => "MBR (DOS) partition table".into(),
        TableKind::Gpt => "GPT partition table".into(),
        TableKind::None => {
            let fs = report
                .partitions
                .first()
                .and_then(|p| p.filesystem.as_ref())
                .map_or_else(
                    || "unknown".to_string(),
                    blockwise_geometry::FsPlan::kind_name,
                );
            format!("no partition table: a bare {fs} filesystem")
        }
    }
}

/// What `verify` resolves to: the report of `blockwise verify --json` plus what a page
/// shows besides.
#[derive(Debug, Serialize)]
pub struct VerifyOutput<'a> {
    /// The report (JSON of `blockwise verify --json`).
    #[serde(flatten)]
    pub report: &'a Report,
    /// False when neither a table nor a filesystem was recognised.
    pub recognised: bool,
    /// Safe to flash? The answer, its first line and the findings behind it.
    pub safe: SafeToFlash,
    /// What the input is, in words.
    pub input: String,
    /// The container the image came in (`null`: a raw image; filled when the container
    /// decoders land).
    pub container: Option<String>,
    /// Each partition's worst finding, for its row and its drawing.
    pub rows: Vec<RowMark>,
    /// The one-line verdict of the CLI.
    pub verdict: String,
    /// The CLI's human output (`blockwise verify`).
    pub human: String,
    /// The CLI's JSON output (`blockwise verify --json`), text.
    pub json: String,
    /// 0 ok, 1 error findings, 2 unrecognised (the CLI's exit code).
    pub exit_code: u8,
    /// What was read from the blob.
    pub stats: ReadStats,
}

impl<'a> VerifyOutput<'a> {
    /// The output for `report`.
    #[must_use]
    pub fn new(report: &'a Report, stats: ReadStats) -> Self {
        VerifyOutput {
            report,
            recognised: report.recognised,
            safe: report.safe_to_flash(),
            input: describe(report),
            container: None,
            rows: row_marks(&report.partitions, &report.findings),
            verdict: report.verdict(),
            human: report.to_human(),
            json: serde_json::to_string_pretty(report).unwrap_or_default(),
            exit_code: report.exit_code(),
            stats,
        }
    }
}

/// What `plan` resolves to: the plan in the JSON shape of `blockwise plan --json`, the
/// alignment findings verify will give the build, and the marks of the rows.
#[derive(Debug, Serialize)]
pub struct PlanOutput<'a> {
    /// The plan.
    #[serde(flatten)]
    pub plan: &'a Plan,
    /// What verify will say of the built image (an explicit start off the erase block, …).
    pub findings: Vec<Finding>,
    /// Each partition's worst finding.
    pub rows: Vec<RowMark>,
}

impl<'a> PlanOutput<'a> {
    /// The output for `plan`.
    #[must_use]
    pub fn new(plan: &'a Plan) -> Self {
        let findings = blockwise_verify::plan_findings(plan);
        PlanOutput {
            rows: row_marks(&plan.partitions, &findings),
            plan,
            findings,
        }
    }
}

/// A size as the spec parser reads it, in bytes, binary and decimal units: what a card
/// labelled "8 GB" really holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SizeInfo {
    /// Bytes (the spec parser's reading).
    pub bytes: u64,
    /// In binary units (`7.45 GiB`).
    pub binary: String,
    /// In decimal units (`8 GB`).
    pub decimal: String,
}

/// `bytes` in decimal units (kB, MB, GB, TB: powers of 1000), at most two decimals.
#[must_use]
pub fn format_decimal(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TB", 1_000_000_000_000),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("kB", 1_000),
    ];
    for (name, unit) in UNITS {
        if bytes >= unit {
            if bytes % unit == 0 {
                return format!("{} {name}", bytes / unit);
            }
            // Hundredths, rounded half up, in integers (no float drift).
            let h = (u128::from(bytes) * 100 + u128::from(unit) / 2) / u128::from(unit);
            let (int, frac) = (h / 100, h % 100);
            return if frac == 0 {
                format!("{int} {name}")
            } else if frac % 10 == 0 {
                format!("{int}.{} {name}", frac / 10)
            } else {
                format!("{int}.{frac:02} {name}")
            };
        }
    }
    format!("{bytes} B")
}

/// Reads `text` with the spec's size parser. `key` names the field in the error.
pub fn size_info(text: &str, key: &str) -> Result<SizeInfo, Failure> {
    let bytes = parse_size(text).map_err(|e| Failure::spec(key, e))?;
    Ok(SizeInfo {
        bytes,
        binary: format_size(bytes),
        decimal: format_decimal(bytes),
    })
}

/// The erase blocks the page offers: every power of two from 128 KiB to the largest the
/// spec accepts (256 MiB), as `(bytes, "4 MiB")`.
#[must_use]
pub fn erase_block_choices() -> Vec<(u64, String)> {
    let (min, max) = ERASE_BLOCK_RANGE;
    let mut out = Vec::new();
    let mut e = PAGE_MIN_ERASE_BLOCK.max(min);
    while e <= max {
        out.push((e, format_size(e)));
        e <<= 1;
    }
    out
}

/// Where "Add partition" puts a new partition and how big, so the plan stays valid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Suggestion {
    /// 0-based position in the partition list: before a trailing `fill` partition (which
    /// must stay last), else at the end.
    pub position: usize,
    /// Its filesystem.
    pub fs: String,
    /// Its size, as spec text (`256MiB`).
    pub size: String,
}

/// The first new partition that keeps `spec` plannable: ext4 of 256 MiB down to 16 MiB,
/// then smaller FAT and unformatted ones, placed before a `fill` partition. When none fits,
/// a spec error on `image.size` says so.
pub fn suggest_partition(spec: &Spec) -> Result<Suggestion, Failure> {
    let position = spec
        .partitions
        .iter()
        .position(|p| p.size == SizeSpec::Fill)
        .unwrap_or(spec.partitions.len());
    let eb = spec.image.erase_block;
    let candidates: [(&str, u64); 8] = [
        ("ext4", 256 << 20),
        ("ext4", 128 << 20),
        ("ext4", 64 << 20),
        ("ext4", 32 << 20),
        ("ext4", 16 << 20),
        ("fat16", 8 << 20),
        ("fat12", 4 << 20),
        ("none", eb),
    ];
    for (fs, bytes) in candidates {
        let size = format_size(bytes).replace(' ', "");
        let Ok(one) = Spec::from_toml(&format!(
            "[[partition]]\nfs = \"{fs}\"\nsize = \"{size}\"\n"
        )) else {
            continue;
        };
        let Some(part) = one.partitions.into_iter().next() else {
            continue;
        };
        let mut s = spec.clone();
        s.partitions.insert(position.min(s.partitions.len()), part);
        if s.validate().is_ok() && plan(&s).is_ok() {
            return Ok(Suggestion {
                position,
                fs: fs.into(),
                size,
            });
        }
    }
    Err(Failure::spec(
        "image.size",
        "no room for another partition: raise the device size or shrink a partition",
    ))
}

#[cfg(test)]
mod tests;
