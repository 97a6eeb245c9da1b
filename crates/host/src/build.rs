//! Building: a spec file's inputs resolved and scanned, planned, assembled into an image.

use std::fs;
use std::path::{Path, PathBuf};

use blockwise_ext4::Ext4Backend;
use blockwise_geometry::{FsKind, ImageMap, Meta, Plan, SizeSpec, Tree};
use blockwise_image::{
    apply_entries, assemble_with_raw, ext4_request, plan_full, Fill, RawFill, SpecError,
};

use crate::content::HostContent;
use crate::output::{write_image_file, WriteStats};
use crate::progress::{Phase, Progress};
use crate::spec_file::{resolve_timestamp, SpecFile};
use crate::tree::{scan_dir, OwnOutputs};
use crate::Error;

/// Result of [`build`].
#[derive(Debug)]
pub struct Built {
    /// The plan the image follows (with filesystem geometry).
    pub plan: Plan,
    /// The image: metadata bytes plus references into `content`.
    pub image: ImageMap,
    /// The files the image's content references point at.
    pub content: HostContent,
    /// Things the writers skipped or worried about.
    pub warnings: Vec<String>,
    /// Temporary files `content` refers to (the mke2fs backend's results), removed on drop.
    #[cfg(feature = "mke2fs")]
    _scratch: Vec<crate::mke2fs::TempFiles>,
    /// The squashfs and tool-backend images `content` refers to, removed on drop.
    _rofs: crate::rofs::Scratch,
    /// The syslinux installer's results `content` refers to, removed on drop.
    _syslinux: Vec<crate::syslinux::TempImage>,
    /// Root hashes of the dm-verity trees: `(data partition name, hex)`, written beside the
    /// image by [`Built::write`].
    pub root_hashes: Vec<(String, String)>,
    /// The F2FS backend's temp filesystems `content` refers to, removed on drop.
    #[cfg(feature = "f2fs")]
    _f2fs_scratch: Vec<crate::f2fs::TempImage>,
}

impl Built {
    /// Writes the image to `path` (and its block map to `bmap`) atomically; see
    /// [`write_image_file`].
    pub fn write(
        &self,
        path: &Path,
        bmap: Option<&Path>,
        progress: &mut dyn Progress,
    ) -> Result<WriteStats, Error> {
        let stats = write_image_file(&self.image, &self.content, path, bmap, progress)?;
        crate::rofs::write_roothash(&self.root_hashes, path)?;
        Ok(stats)
    }

    /// Every input of the build (the spec file, content files, raw sources) with its
    /// identity: a target written with this image must be none of them
    /// ([`blockwise_flash::refuse_input_as_target`]).
    #[must_use]
    pub fn inputs(&self) -> Vec<(std::path::PathBuf, blockwise_flash::DataId)> {
        self.content.inputs()
    }

    /// Writes the image to `path` in the format `options` asks for or `path`'s name says
    /// (raw, Android sparse, seekable zstd, xz), and its block map to `bmap`, atomically;
    /// see [`write_output`](crate::write_output).
    pub fn write_as(
        &self,
        path: &Path,
        bmap: Option<&Path>,
        options: &crate::OutputOptions,
        progress: &mut dyn Progress,
    ) -> Result<crate::Written, Error> {
        let written = crate::write_output(
            &self.image,
            &self.content,
            self.plan.erase_block_bytes,
            self.plan.sector_bytes.bytes_u64(),
            path,
            bmap,
            options,
            progress,
        )?;
        crate::rofs::write_roothash(&self.root_hashes, path)?;
        Ok(written)
    }
}

/// Fills in sizes of raw partitions without one (the length of `source`) and checks that
/// every `contents` and `source` exists.
pub fn resolve_inputs(sf: &mut SpecFile) -> Result<(), Error> {
    let base = sf.base_dir.clone();
    if let Some(code) = &sf.spec.image.boot_code {
        let path = base.join(code);
        sf.spec.image.boot_code_bytes = Some(read_boot_code(code, &path)?);
    }
    for (i, p) in sf.spec.partitions.iter_mut().enumerate() {
        let key = |k: &str| format!("partition[{}].{k}", i + 1);
        if let Some(src) = &p.source {
            let path = base.join(src);
            let md = fs::metadata(&path).map_err(|e| {
                SpecError::new(
                    key("source"),
                    format!("{src:?} cannot be read ({}): {e}", path.display()),
                )
            })?;
            if !md.is_file() {
                return Err(SpecError::new(
                    key("source"),
                    format!("{src:?} is not a regular file"),
                )
                .into());
            }
            if p.size == SizeSpec::Source {
                p.size = SizeSpec::Bytes(md.len().max(1));
            }
        }
        if let Some(c) = &p.contents {
            let path = base.join(c);
            // An unreadable directory says why (permission denied), not "is not a directory".
            let md = fs::metadata(&path).map_err(|e| {
                SpecError::new(
                    key("contents"),
                    format!("{c:?} cannot be read ({}): {e}", path.display()),
                )
            })?;
            if !md.is_dir() {
                return Err(SpecError::new(
                    key("contents"),
                    format!("{c:?} is not a directory ({})", path.display()),
                )
                .into());
            }
        }
    }
    for (i, r) in sf.spec.raw.iter_mut().enumerate() {
        let src = &r.source;
        let path = base.join(src);
        let key = format!("raw[{}].source", i + 1);
        let md = fs::metadata(&path).map_err(|e| {
            SpecError::new(
                key.clone(),
                format!("{src:?} cannot be read ({}): {e}", path.display()),
            )
        })?;
        if !md.is_file() {
            return Err(SpecError::new(key, format!("{src:?} is not a regular file")).into());
        }
        r.source_len = Some(md.len());
    }
    Ok(())
}

/// Reads `image.boot-code` (at most 513 bytes, enough for the size rules of
/// [`blockwise_geometry::boot_code_bytes`], which the planner applies); errors name the key and
/// the file as the spec gives it.
fn read_boot_code(code: &str, path: &Path) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let key = "image.boot-code";
    let shown = blockwise_geometry::display_str(code);
    let at = blockwise_geometry::display_path(path);
    let f = fs::File::open(path)
        .map_err(|e| SpecError::new(key, format!("{shown:?} cannot be read ({at}): {e}")))?;
    let md = f
        .metadata()
        .map_err(|e| SpecError::new(key, format!("{shown:?} cannot be read ({at}): {e}")))?;
    if !md.is_file() {
        return Err(SpecError::new(key, format!("{shown:?} is not a regular file ({at})")).into());
    }
    let mut bytes = Vec::new();
    f.take(513)
        .read_to_end(&mut bytes)
        .map_err(|e| SpecError::new(key, format!("{shown:?} cannot be read ({at}): {e}")))?;
    if let Err(why) = blockwise_geometry::boot_code_bytes(&bytes) {
        let why = if bytes.len() > 512 {
            format!(
                "is {} bytes: the boot code area of an MBR is 440 bytes",
                md.len()
            )
        } else {
            why
        };
        return Err(SpecError::new(key, format!("{shown:?} {why}")).into());
    }
    Ok(bytes)
}

/// The time file times are clamped to: `timestamp` when the spec or `SOURCE_DATE_EPOCH` sets
/// it (reproducible builds), else none (times as on the host).
fn clamp_times(spec: &blockwise_image::Spec, timestamp: i64) -> Option<i64> {
    let clamp = spec.image.timestamp.is_some() || std::env::var_os("SOURCE_DATE_EPOCH").is_some();
    clamp.then_some(timestamp)
}

/// Sets `sf.spec.image.seed` for what `image.seed` says: the number given, a fresh one for
/// `"random"`, or (no `seed`) one derived from the spec, its trees as they will be written
/// and the sizes of its raw sources ([`blockwise_image::derived_seed`]), so `plan` and
/// `build` of the same spec and inputs use the same seed and different images different
/// ones.
fn resolve_seed(sf: &mut SpecFile, trees: &[Option<Tree>], timestamp: i64) -> Result<u64, Error> {
    let mut sizes = Vec::new();
    let sources = sf
        .spec
        .partitions
        .iter()
        .filter_map(|p| p.source.as_ref())
        .chain(sf.spec.raw.iter().map(|r| &r.source));
    for src in sources {
        let path = sf.resolve(src);
        sizes.push(fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len());
    }
    let clamp = clamp_times(&sf.spec, timestamp);
    Ok(blockwise_image::resolve_seed(
        &mut sf.spec,
        trees,
        &sizes,
        clamp,
        random_seed,
    ))
}

/// A fresh seed for `seed = "random"`: std's randomly keyed hasher over the time and the
/// process id (no other source of randomness needed).
fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((now, std::process::id()))
}

/// Reads every FAT/ext4 partition's `contents` (plus its `[[partition.entry]]` overrides)
/// into a [`Tree`], in spec order (`None` for other partitions), leaving out the build's
/// own outputs (`sf.outputs`) with a warning each in `warnings`.
fn load_trees(
    sf: &SpecFile,
    timestamp: i64,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Option<Tree>>, HostContent), Error> {
    let own = OwnOutputs::new(&sf.outputs);
    progress.phase(Phase::Scanning);
    let spec = &sf.spec;
    let clamp = clamp_times(spec, timestamp);
    let mut content = HostContent::default();
    let mut trees: Vec<Option<Tree>> = Vec::new();
    for p in &spec.partitions {
        // F2FS: sload.f2fs reads the directory itself; the scan checks it is readable and
        // finds what sload.f2fs cannot store (special files, xattrs) for the warnings.
        let wants_tree = blockwise_image::takes_tree(p.fs) || matches!(p.fs, FsKind::F2fs);
        if !wants_tree {
            trees.push(None);
            continue;
        }
        let mut tree = match &p.contents {
            Some(c) => scan_dir(
                &sf.resolve(c),
                clamp,
                &mut content,
                &own,
                warnings,
                progress,
            )?,
            None => Tree::new(Meta {
                mode: 0o755,
                mtime: timestamp,
                ..Meta::default()
            }),
        };
        if p.contents.is_none() {
            tree.nodes.iter_mut().for_each(|n| n.meta.mtime = timestamp);
        }
        Error::check(progress)?;
        trees.push(Some(tree));
    }
    // Mount points and exclude cut the scanned trees; the entries then name paths inside
    // each partition's own tree.
    blockwise_image::split_mounts(spec, &mut trees)?;
    for (i, (p, tree)) in spec.partitions.iter().zip(trees.iter_mut()).enumerate() {
        if let Some(tree) = tree {
            add_files(
                sf,
                i,
                tree,
                clamp,
                timestamp,
                &mut content,
                &own,
                warnings,
                progress,
            )?;
            apply_entries(
                tree,
                &p.entries,
                &format!("partition[{}]", i + 1),
                timestamp,
            )?;
        }
    }
    Ok((trees, content))
}

/// Grafts partition `i`'s `files` into its tree (see `blockwise_image::files`): each
/// source scanned as `contents` is (a file through its directory, keeping only it; a
/// symlink named there is followed), put at its `dest`. Errors name `partition[N].files[K]`.
#[expect(
    clippy::too_many_arguments,
    reason = "the scan's context, as load_trees has it"
)]
fn add_files(
    sf: &SpecFile,
    i: usize,
    tree: &mut Tree,
    clamp: Option<i64>,
    timestamp: i64,
    content: &mut HostContent,
    own: &OwnOutputs,
    warnings: &mut Vec<String>,
    progress: &mut dyn Progress,
) -> Result<(), Error> {
    let Some(p) = sf.spec.partitions.get(i) else {
        return Ok(());
    };
    if p.files.is_empty() {
        return Ok(());
    }
    if let Some(why) = blockwise_image::files_unsupported(p) {
        return Err(SpecError::new(format!("partition[{}].files", i + 1), why).into());
    }
    let dir_meta = Meta {
        mode: 0o755,
        mtime: timestamp,
        ..Meta::default()
    };
    for (k, f) in p.files.iter().enumerate() {
        let key = format!("partition[{}].files[{}]", i + 1, k + 1);
        let dest = f
            .dest_components()
            .map_err(|r| SpecError::new(key.clone(), r))?;
        let path = sf.resolve(&f.source);
        let shown = blockwise_geometry::display_str(&f.source);
        let md = fs::metadata(&path).map_err(|e| {
            SpecError::new(
                key.clone(),
                format!("{shown:?} cannot be read ({}): {e}", path.display()),
            )
        })?;
        let (sub, from) = if md.is_dir() {
            (scan_dir(&path, clamp, content, own, warnings, progress)?, 0)
        } else if md.is_file() {
            let real = fs::canonicalize(&path).map_err(|e| Error::io(&path, e))?;
            let (Some(parent), Some(name)) = (real.parent(), real.file_name()) else {
                return Err(SpecError::new(key, format!("{shown:?} names no file")).into());
            };
            let sub = crate::tree::scan_dir_only(
                parent,
                Some(name.as_encoded_bytes()),
                clamp,
                content,
                own,
                warnings,
                progress,
            )?;
            let from = sub.child(0, name.as_encoded_bytes()).ok_or_else(|| {
                SpecError::new(
                    key.clone(),
                    format!("{shown:?} was left out of the scan (it is this build's output)"),
                )
            })?;
            (sub, from)
        } else {
            return Err(SpecError::new(
                key,
                format!("{shown:?} is neither a regular file nor a directory"),
            )
            .into());
        };
        blockwise_image::graft(tree, &dest, &sub, from, &dir_meta)
            .map_err(|r| SpecError::new(key.clone(), r))?;
    }
    Ok(())
}

/// `mke2fs -d` copies a directory whole: when `contents` holds the output (or the work
/// directory where its temp filesystem goes), the image would hold the build's own files,
/// so this is refused naming the key.
#[cfg(feature = "mke2fs")]
fn refuse_own_output_for_mke2fs(
    sf: &SpecFile,
    dir: &Path,
    contents: &str,
    work_dir: &Path,
    index: usize,
) -> Result<(), Error> {
    let temp = work_dir.join(".blockwise-mke2fs");
    let held = OwnOutputs::inside(&sf.outputs, dir)
        .or_else(|| OwnOutputs::inside(std::slice::from_ref(&temp), dir).map(|_| work_dir.into()));
    match held {
        Some(p) => Err(SpecError::new(
            format!("partition[{index}].contents"),
            format!(
                "{contents:?} holds {}, where this build writes: mke2fs -d would copy the build's own files into the image; write the output outside the contents directory, or use ext4.backend = \"native\" (which leaves them out)",
                p.display()
            ),
        )
        .into()),
        None => Ok(()),
    }
}

/// Plans a spec file: layout and filesystem geometry. Contents are scanned (metadata, and
/// sparse files for their holes)
/// so that the plan is the one `build` will follow, e.g. the ext4 inode count.
pub fn plan_file(sf: &mut SpecFile) -> Result<Plan, Error> {
    plan_file_with_progress(sf, &mut ())
}

/// [`plan_file`], reporting the scan to `progress`, which can stop it (Ctrl-C during the
/// scan of a large tree): [`Error::Cancelled`].
pub fn plan_file_with_progress(
    sf: &mut SpecFile,
    progress: &mut dyn Progress,
) -> Result<Plan, Error> {
    resolve_inputs(sf)?;
    let timestamp = resolve_timestamp(&sf.spec);
    let (trees, mut content) = load_trees(sf, timestamp, progress, &mut Vec::new())?;
    // The seed first: the read-only images made now take their UUIDs from it.
    resolve_seed(sf, &trees, timestamp)?;
    crate::rofs::make_first(sf, &trees, &mut content, None, timestamp, &mut Vec::new())?;
    progress.phase(Phase::Planning);
    Error::check(progress)?;
    let mut plan = plan_full(&sf.spec, &trees, timestamp)?;
    predict_mke2fs(&sf.spec, &mut plan, timestamp)?;
    Ok(plan)
}

/// The mke2fs backend lays out inode tables (and, when the requested blocks are taken, the
/// journal) itself: each such partition's plan is what a dry run of mke2fs with the build's
/// arguments lays out ([`crate::mke2fs::predict_layout`], in the system's temp directory), so
/// that `plan` says what `verify` will read. Without the backend compiled in, nothing.
fn predict_mke2fs(
    spec: &blockwise_image::Spec,
    plan: &mut Plan,
    timestamp: i64,
) -> Result<(), Error> {
    #[cfg(feature = "mke2fs")]
    {
        let mut found = Vec::new();
        for (i, part) in plan.partitions.iter().enumerate() {
            let Some(ps) = spec.partitions.get(part.spec_index) else {
                continue;
            };
            if !ps.fs.is_ext() || ps.ext4.backend != Ext4Backend::Mke2fs {
                continue;
            }
            let (Some(blockwise_geometry::FsPlan::Ext4(xp)), Some(req)) =
                (&part.filesystem, ext4_request(spec, plan, i, timestamp))
            else {
                continue;
            };
            let x = crate::mke2fs::predict_layout(&req, xp, &std::env::temp_dir()).map_err(
                |source| Error::Mke2fs {
                    index: part.spec_index + 1,
                    source,
                },
            )?;
            found.push((i, x));
        }
        set_ext4_plans(plan, found);
    }
    #[cfg(not(feature = "mke2fs"))]
    let _ = (spec, plan, timestamp);
    Ok(())
}

/// Replaces the ext4 plans of partitions `(i, plan)` and recomputes the alignment flags.
#[cfg(feature = "mke2fs")]
fn set_ext4_plans(plan: &mut Plan, found: Vec<(usize, blockwise_geometry::Ext4Plan)>) {
    for (i, x) in found {
        if let Some(p) = plan.partitions.get_mut(i) {
            p.filesystem = Some(blockwise_geometry::FsPlan::Ext4(x));
        }
    }
    plan.refresh_aligned();
}

/// Builds the image of a spec file: metadata in memory, file content by reference (nothing
/// is read until [`Built::write`]). `work_dir` holds temporary files of the mke2fs backend
/// (use the output file's directory).
pub fn build(sf: &mut SpecFile, work_dir: &Path) -> Result<Built, Error> {
    build_with_progress(sf, work_dir, &mut ())
}

/// [`build`], reporting its phases to `progress`.
pub fn build_with_progress(
    sf: &mut SpecFile,
    work_dir: &Path,
    progress: &mut dyn Progress,
) -> Result<Built, Error> {
    resolve_inputs(sf)?;
    let timestamp = resolve_timestamp(&sf.spec);
    let mut scan_warnings = Vec::new();
    let (trees, mut content) = load_trees(sf, timestamp, progress, &mut scan_warnings)?;
    resolve_seed(sf, &trees, timestamp)?;
    // The spec file is an input too: no output may be it.
    if let Some(p) = &sf.path {
        let md = fs::metadata(p).map_err(|e| Error::io(p, e))?;
        content.add_input(p.clone(), &md);
    }
    // Known outputs are checked now, before the mke2fs backend writes its temp filesystem;
    // the writer checks its outputs again.
    let outputs: Vec<&Path> = sf.outputs.iter().map(PathBuf::as_path).collect();
    crate::output::check_outputs(&outputs, &content)?;
    let (made, rofs_scratch) = crate::rofs::make_first(
        sf,
        &trees,
        &mut content,
        Some(work_dir),
        timestamp,
        &mut scan_warnings,
    )?;
    let spec = &sf.spec;
    progress.phase(Phase::Planning);
    Error::check(progress)?;
    #[cfg_attr(not(feature = "mke2fs"), allow(unused_mut))]
    let mut plan = plan_full(spec, &trees, timestamp)?;
    progress.phase(Phase::Assembling);
    Error::check(progress)?;
    let mut fills: Vec<Fill<'_>> = Vec::new();
    for (si, (p, tree)) in spec.partitions.iter().zip(&trees).enumerate() {
        fills.push(match (p.fs, tree, &p.source) {
            _ if crate::rofs::external(spec, si) => Fill::External,
            (FsKind::Raw, _, Some(src)) => {
                let path = sf.resolve(src);
                let md = fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
                Fill::Raw {
                    size: md.len(),
                    content: content.add(path, &md),
                }
            }
            (FsKind::Ext4 | FsKind::Ext2 | FsKind::Ext3, _, _)
                if p.ext4.backend == Ext4Backend::Mke2fs =>
            {
                Fill::External
            }
            (FsKind::F2fs, _, _) => Fill::External,
            (_, Some(t), _) => Fill::Tree(t),
            _ => Fill::Nothing,
        });
    }
    let mut raw = Vec::with_capacity(spec.raw.len());
    for r in &spec.raw {
        let path = sf.resolve(&r.source);
        let md = fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        raw.push(RawFill {
            size: md.len(),
            content: content.add(path, &md),
        });
    }
    let mut image = crate::spill::image_map(plan.size_bytes, work_dir);
    let mut warnings = scan_warnings;
    warnings.extend(assemble_with_raw(
        &mut image, spec, &plan, &fills, &raw, &content, timestamp,
    )?);
    #[cfg(feature = "mke2fs")]
    let mut scratch = Vec::new();
    #[cfg(feature = "mke2fs")]
    let mut laid_out = Vec::new();
    // The mke2fs fallback writes its partitions through a real file.
    for (i, part) in plan.partitions.iter().enumerate() {
        let Some(ps) = spec.partitions.get(part.spec_index) else {
            continue;
        };
        if !ps.fs.is_ext() || ps.ext4.backend != Ext4Backend::Mke2fs {
            continue;
        }
        let index = part.spec_index + 1;
        #[cfg(feature = "mke2fs")]
        {
            let Some(blockwise_geometry::FsPlan::Ext4(xp)) = &part.filesystem else {
                continue;
            };
            let Some(req) = ext4_request(spec, &plan, i, timestamp) else {
                continue;
            };
            let mut sub =
                blockwise_geometry::SubSink::new(&mut image, part.start_bytes, part.size_bytes)
                    .map_err(|e| {
                        Error::Image(blockwise_image::Error::Partition {
                            index,
                            source: blockwise_image::PartitionError::Window(e),
                        })
                    })?;
            let dir = ps.contents.as_ref().map(|c| sf.resolve(c));
            if let (Some(d), Some(c)) = (&dir, &ps.contents) {
                refuse_own_output_for_mke2fs(sf, d, c, work_dir, index)?;
            }
            let kept = crate::mke2fs::write_with_mke2fs(
                &mut sub,
                &mut content,
                &req,
                xp,
                dir.as_deref(),
                &ps.entries,
                work_dir,
                clamp_times(spec, timestamp),
            )
            .map_err(|source| Error::Mke2fs { index, source })?;
            scratch.push(kept.0);
            laid_out.push((i, kept.1));
        }
        #[cfg(not(feature = "mke2fs"))]
        {
            let _ = (i, work_dir);
            return Err(SpecError::new(
                format!("partition[{index}].ext4.backend"),
                "this blockwise was built without the mke2fs backend; use backend = \"native\"",
            )
            .into());
        }
    }
    crate::rofs::place(&mut image, &plan, &made, &content)?;
    let syslinux_scratch =
        install_bootloaders(&plan, &mut image, &mut content, work_dir, timestamp)?;
    // The built image's plan says where mke2fs put things (what `verify` reads).
    #[cfg(feature = "mke2fs")]
    set_ext4_plans(&mut plan, laid_out);
    #[cfg(feature = "f2fs")]
    let f2fs_scratch = build_f2fs(
        sf,
        &plan,
        &trees,
        &mut image,
        &mut content,
        &mut warnings,
        work_dir,
        timestamp,
    )?;
    #[cfg(not(feature = "f2fs"))]
    if let Some(i) = spec.partitions.iter().position(|p| p.fs == FsKind::F2fs) {
        return Err(SpecError::new(
            format!("partition[{}].fs", i + 1),
            "this blockwise was built without the F2FS backend (feature f2fs)",
        )
        .into());
    }
    // dm-verity trees last: they hash what every partition above holds.
    crate::rofs::finish_verity(&mut image, &mut plan, &content)?;
    let root_hashes = blockwise_image::root_hashes(&plan, spec);
    Ok(Built {
        plan,
        image,
        content,
        warnings,
        #[cfg(feature = "mke2fs")]
        _scratch: scratch,
        _rofs: rofs_scratch,
        _syslinux: syslinux_scratch,
        root_hashes,
        #[cfg(feature = "f2fs")]
        _f2fs_scratch: f2fs_scratch,
    })
}

/// Installs the bootloader of every FAT partition whose plan names one (`fat.bootloader`),
/// after the partition is assembled: [`crate::syslinux::install`].
fn install_bootloaders(
    plan: &Plan,
    image: &mut ImageMap,
    content: &mut HostContent,
    work_dir: &Path,
    timestamp: i64,
) -> Result<Vec<crate::syslinux::TempImage>, Error> {
    let mut kept = Vec::new();
    for p in &plan.partitions {
        let Some(blockwise_geometry::FsPlan::Fat(f)) = &p.filesystem else {
            continue;
        };
        if f.bootloader.is_none() {
            continue;
        }
        let fat32 = f.kind == blockwise_geometry::FatType::Fat32;
        kept.push(
            crate::syslinux::install(
                image,
                content,
                p.start_bytes,
                p.size_bytes,
                fat32,
                work_dir,
                timestamp,
            )
            .map_err(|source| Error::Syslinux {
                index: p.spec_index + 1,
                source,
            })?,
        );
    }
    Ok(kept)
}

/// Builds every F2FS partition of `plan` with mkfs.f2fs and sload.f2fs (each slot on its
/// own), placing the results into `image` by reference.
#[cfg(feature = "f2fs")]
#[expect(
    clippy::too_many_arguments,
    reason = "the build's state, passed along once"
)]
fn build_f2fs(
    sf: &SpecFile,
    plan: &Plan,
    trees: &[Option<Tree>],
    image: &mut ImageMap,
    content: &mut HostContent,
    warnings: &mut Vec<String>,
    work_dir: &Path,
    timestamp: i64,
) -> Result<Vec<crate::f2fs::TempImage>, Error> {
    let spec = &sf.spec;
    let fixed_times =
        spec.image.timestamp.is_some() || std::env::var_os("SOURCE_DATE_EPOCH").is_some();
    let mut kept = Vec::new();
    let mut warned = Vec::new();
    for (i, part) in plan.partitions.iter().enumerate() {
        let Some(ps) = spec.partitions.get(part.spec_index) else {
            continue;
        };
        let Some(blockwise_geometry::FsPlan::F2fs(fp)) = &part.filesystem else {
            continue;
        };
        let index = part.spec_index + 1;
        let Some(req) = blockwise_image::f2fs_request(spec, plan, i) else {
            continue;
        };
        let dir = ps.contents.as_ref().map(|c| sf.resolve(c));
        if let (Some(d), Some(c)) = (&dir, &ps.contents) {
            refuse_own_output(
                sf,
                d,
                c,
                work_dir,
                index,
                "sload.f2fs -f",
                ".blockwise-f2fs",
            )?;
        }
        // One set of warnings per spec partition, not per slot.
        if !warned.contains(&part.spec_index) {
            if let Some(Some(tree)) = trees.get(part.spec_index) {
                warnings.extend(crate::f2fs::tree_warnings(tree, index));
            }
            warned.push(part.spec_index);
        }
        let mut sub = blockwise_geometry::SubSink::new(image, part.start_bytes, part.size_bytes)
            .map_err(|e| {
                Error::Image(blockwise_image::Error::Partition {
                    index,
                    source: blockwise_image::PartitionError::Window(e),
                })
            })?;
        let job = crate::f2fs::F2fsJob {
            req: &req,
            plan: fp,
            contents: dir.as_deref(),
            timestamp,
            fixed_times,
            preserve_owners: ps.f2fs.preserve_owners,
            entries: &ps.entries,
            content_bytes: trees
                .get(part.spec_index)
                .and_then(Option::as_ref)
                .map_or(0, Tree::content_bytes),
        };
        kept.push(
            crate::f2fs::write_with_f2fs(&mut sub, content, &job, work_dir).map_err(|source| {
                match source {
                    crate::f2fs::F2fsError::Entry { entry, reason } => {
                        SpecError::new(format!("partition[{index}].entry[{entry}].path"), reason)
                            .into()
                    }
                    source @ crate::f2fs::F2fsError::NoSpace { .. } => {
                        SpecError::new(format!("partition[{index}].size"), source.to_string())
                            .into()
                    }
                    source => Error::F2fs { index, source },
                }
            })?,
        );
    }
    Ok(kept)
}

/// A tool that copies a directory whole (`mke2fs -d`, `sload.f2fs -f`) would put the
/// build's own files into the image when `contents` holds the output (or the work directory
/// where its temp filesystem goes): refused, naming the key.
#[cfg(feature = "f2fs")]
fn refuse_own_output(
    sf: &SpecFile,
    dir: &Path,
    contents: &str,
    work_dir: &Path,
    index: usize,
    tool: &str,
    temp: &str,
) -> Result<(), Error> {
    let temp = work_dir.join(temp);
    let held = OwnOutputs::inside(&sf.outputs, dir)
        .or_else(|| OwnOutputs::inside(std::slice::from_ref(&temp), dir).map(|_| work_dir.into()));
    match held {
        Some(p) => Err(SpecError::new(
            format!("partition[{index}].contents"),
            format!(
                "{contents:?} holds {}, where this build writes: {tool} would copy the build's own files into the image; write the output outside the contents directory",
                blockwise_geometry::display_path(&p)
            ),
        )
        .into()),
        None => Ok(()),
    }
}
