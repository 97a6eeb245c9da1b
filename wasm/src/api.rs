//! The plain-Rust half of the bindings: spec handling, planning, building from in-memory
//! files, verify options and output, and error categories. No JS types here, so all of it
//! is tested on the host.

use blockwise_geometry::{parse_size, Meta, NodeKind, Plan, SectorSize, SparseImage, Tree};
use blockwise_image::{apply_entries, plan_full, Fill, Spec, SpecError};
use blockwise_verify::{Options, Report};
use serde::{Deserialize, Serialize};

/// Largest image `build` makes in the page (1 GiB): the tab holds the written extents and
/// hands the browser a `Blob` of them with shared zero pages between.
pub const MAX_BUILD_BYTES: u64 = 1 << 30;
/// Most bytes `verify` reads from a blob before giving up (the verifier needs some KiB).
pub const MAX_READ_BYTES: u64 = 16 << 20;
/// Most separate reads `verify` makes.
pub const MAX_READS: u32 = 4096;
/// Size of the shared zero buffer the holes of a built image are made of.
pub const ZERO_CHUNK: u32 = 1 << 20;

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
}

impl Failure {
    /// A spec/options error about `key`.
    pub fn spec(key: impl core::fmt::Display, reason: impl core::fmt::Display) -> Self {
        Failure {
            category: Category::Spec,
            message: format!("{key}: {reason}"),
        }
    }

    /// Something this page does not do.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Failure {
            category: Category::Unsupported,
            message: message.into(),
        }
    }

    /// Reading the input failed.
    pub fn io(message: impl core::fmt::Display) -> Self {
        Failure {
            category: Category::Io,
            message: message.to_string(),
        }
    }

    /// A bug.
    pub fn internal(message: impl Into<String>) -> Self {
        Failure {
            category: Category::Internal,
            message: message.into(),
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
fn empty_trees(spec: &Spec, ts: i64) -> Result<Vec<Option<Tree>>, Failure> {
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

fn dir_meta(mtime: i64) -> Meta {
    Meta {
        mode: 0o755,
        mtime,
        ..Meta::default()
    }
}

/// Plans a spec as `blockwise plan` does for a spec whose partitions have no `contents`.
pub fn plan(spec: &Spec) -> Result<Plan, Failure> {
    let ts = timestamp(spec);
    let trees = empty_trees(spec, ts)?;
    Ok(plan_full(spec, &trees, ts)?)
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

/// A compression format recognised by its magic bytes, with the command that undoes it.
#[must_use]
pub fn compression(magic: &[u8]) -> Option<(&'static str, &'static str)> {
    let formats: [(&[u8], &str, &str); 4] = [
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz", "xz -dk"),
        (&[0x1f, 0x8b], "gzip", "gunzip -k"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd", "zstd -d"),
        (b"BZh", "bzip2", "bunzip2 -k"),
    ];
    formats
        .iter()
        .find(|(m, _, _)| magic.starts_with(m))
        .map(|&(_, name, cmd)| (name, cmd))
}

/// Refuses a compressed image with a message that says how to decompress it.
pub fn refuse_compressed(magic: &[u8], name: Option<&str>) -> Result<(), Failure> {
    match compression(magic) {
        None => Ok(()),
        Some((format, cmd)) => {
            let file = name.unwrap_or("image.img.xz");
            Err(Failure::unsupported(format!(
                "{file} is {format}-compressed: its partition table cannot be read without decompressing it; run `{cmd} {file}` and check the result (a compressed image is aligned exactly when the image inside is)"
            )))
        }
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
            message: format!(
                "the verifier wanted more than {} reads or {} MiB of metadata; the image is probably corrupt",
                MAX_READS,
                MAX_READ_BYTES >> 20
            ),
        });
    }
    Ok(())
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
    /// The one-line verdict of the CLI.
    pub verdict: String,
    /// The CLI's human output.
    pub human: String,
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
            verdict: report.verdict(),
            human: report.to_human(),
            exit_code: report.exit_code(),
            stats,
        }
    }
}

/// One file for `build`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileInput {
    /// Path with `/` separators, relative (`boot/config.txt`).
    pub path: String,
    /// Content.
    pub data: Vec<u8>,
    /// Modification time (seconds); default the spec's timestamp.
    pub mtime: Option<i64>,
}

/// An image built in memory.
#[derive(Debug)]
pub struct Built {
    /// The plan it follows.
    pub plan: Plan,
    /// The image.
    pub image: SparseImage,
    /// The writers' warnings.
    pub warnings: Vec<String>,
}

/// Which partition (spec index) each file goes to, and its path inside it.
fn route<'a>(spec: &Spec, path: &'a str) -> Option<(usize, &'a str)> {
    let path = path.trim_start_matches('/');
    let named = spec.partitions.iter().any(|p| p.contents.is_some());
    if named {
        spec.partitions.iter().enumerate().find_map(|(i, p)| {
            let c = p.contents.as_deref()?.trim_matches('/');
            let rest = path.strip_prefix(c)?.strip_prefix('/')?;
            Some((i, rest))
        })
    } else {
        let i = spec
            .partitions
            .iter()
            .position(|p| blockwise_image::takes_tree(p.fs))?;
        Some((i, path))
    }
}

/// Adds a file at `path` (creating its directories) to `tree`.
fn add_file(
    tree: &mut Tree,
    path: &str,
    size: u64,
    content: u64,
    mtime: i64,
    key: &str,
) -> Result<(), Failure> {
    let comps: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let Some((name, dirs)) = comps.split_last() else {
        return Err(Failure::spec(key, "is empty or a directory"));
    };
    let mut parent = 0;
    for d in dirs {
        if *d == "." || *d == ".." {
            return Err(Failure::spec(key, format!("{path:?} contains {d:?}")));
        }
        parent = match tree.child(parent, d) {
            Some(c) => c,
            None => tree
                .add(
                    parent,
                    d,
                    NodeKind::Dir {
                        children: Vec::new(),
                    },
                    dir_meta(mtime),
                )
                .ok_or_else(|| Failure::spec(key, format!("{d} in {path:?} is a file")))?,
        };
    }
    let file = NodeKind::File {
        size,
        content,
        data_ranges: None,
        link: None,
    };
    let meta = Meta {
        mode: 0o644,
        mtime,
        ..Meta::default()
    };
    tree.add(parent, name, file, meta)
        .map(|_| ())
        .ok_or_else(|| Failure::spec(key, format!("{path:?} is given twice")))
}

/// Builds `spec` with `files` into an in-memory image; refuses images above
/// [`MAX_BUILD_BYTES`].
pub fn build(spec: &Spec, files: Vec<FileInput>) -> Result<Built, Failure> {
    let ts = timestamp(spec);
    for (i, p) in spec.partitions.iter().enumerate() {
        if p.source.is_some() {
            return Err(Failure::unsupported(format!(
                "partition[{}].source: raw partitions from a file are not built in the page; use `blockwise build`",
                i + 1
            )));
        }
    }
    if !spec.raw.is_empty() {
        return Err(Failure::unsupported(
            "raw[1].source: raw writes from a file are not built in the page; use `blockwise build`".to_string(),
        ));
    }
    // Contents first, then the `[[partition.entry]]` overrides, as in the CLI.
    let mut trees: Vec<Option<Tree>> = spec
        .partitions
        .iter()
        .map(|p| blockwise_image::takes_tree(p.fs).then(|| Tree::new(dir_meta(ts))))
        .collect();
    let mut content: Vec<Vec<u8>> = Vec::with_capacity(files.len());
    for (i, f) in files.into_iter().enumerate() {
        let key = format!("files[{i}].path");
        let Some((si, inner)) = route(spec, &f.path) else {
            return Err(Failure::spec(
                key,
                format!(
                    "{:?} belongs to no partition: give a FAT, ext4, EROFS or squashfs partition (with contents = \"{}\" to route it)",
                    f.path,
                    f.path.split('/').next().unwrap_or_default()
                ),
            ));
        };
        let Some(Some(tree)) = trees.get_mut(si) else {
            return Err(Failure::spec(
                format!("partition[{}].contents", si + 1),
                "files can only go into a FAT, ext4, EROFS or squashfs partition",
            ));
        };
        let mtime = match (f.mtime, spec.image.timestamp) {
            (Some(m), Some(_)) => m.min(ts),
            (Some(m), None) => m,
            (None, _) => ts,
        };
        add_file(
            tree,
            inner,
            f.data.len() as u64,
            content.len() as u64,
            mtime,
            &key,
        )?;
        content.push(f.data);
    }
    for (i, (t, p)) in trees.iter_mut().zip(&spec.partitions).enumerate() {
        if let Some(t) = t {
            apply_entries(t, &p.entries, &format!("partition[{}]", i + 1), ts)?;
        }
    }
    let plan = plan_full(spec, &trees, ts)?;
    if plan.size_bytes > MAX_BUILD_BYTES {
        return Err(Failure::unsupported(format!(
            "image.size: a {} image is more than this page builds ({} at most, the tab holds it in memory); build it with `blockwise build`",
            blockwise_geometry::format_size(plan.size_bytes),
            blockwise_geometry::format_size(MAX_BUILD_BYTES)
        )));
    }
    let fills: Vec<Fill<'_>> = trees
        .iter()
        .map(|t| t.as_ref().map_or(Fill::Nothing, Fill::Tree))
        .collect();
    // dm-verity trees are computed over what was just written (their root hashes go into
    // the plan).
    let mut plan = plan;
    let (image, warnings) =
        blockwise_image::assemble_sparse_verity(spec, &mut plan, &fills, &content, ts)?;
    Ok(Built {
        plan,
        image,
        warnings,
    })
}

/// A piece of a built image in offset order.
#[derive(Debug, PartialEq, Eq)]
pub enum Part<'a> {
    /// Written bytes.
    Data(&'a [u8]),
    /// This many zero bytes.
    Zeros(u64),
}

/// The image as data and zero runs, covering it exactly.
#[must_use]
pub fn pieces(img: &SparseImage) -> Vec<Part<'_>> {
    let mut out = Vec::new();
    let mut pos = 0u64;
    for (off, bytes) in img.extents() {
        if off > pos {
            out.push(Part::Zeros(off - pos));
        }
        out.push(Part::Data(bytes));
        pos = off.saturating_add(bytes.len() as u64);
    }
    if img.size() > pos {
        out.push(Part::Zeros(img.size() - pos));
    }
    out
}

#[cfg(test)]
mod tests;
