//! The read-only filesystems on the host side: squashfs images compressed into a temp file
//! beside the output before planning (their size is then known, and memory stays with the
//! metadata), the `mksquashfs` and `mkfs.erofs` fallback backends, dm-verity hash trees
//! computed from the image as written, and the `OUT.roothash` files.
//!
//! A temp file is named `.blockwise-rofs-PID-START-N.img` (N: the partition's spec number),
//! registered in [`HostContent`] like a source file and referenced by the image map; the
//! `Scratch` guard in [`Built`](crate::Built) removes it once the image is written. A build
//! killed meanwhile leaves it, and the next build into that directory removes it (its owner
//! process is gone).

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use blockwise_erofs::ErofsBackend;
use blockwise_geometry::{BlockSink, ContentRef, FsKind, FsPlan, ImageMap, Plan, SubSink, Tree};
use blockwise_image::{Prebuilt, Spec, SpecError};
use blockwise_squashfs::SquashfsBackend;

use crate::content::HostContent;
use crate::spec_file::SpecFile;
use crate::tree::OwnOutputs;
use crate::Error;

const TEMP_PREFIX: &str = ".blockwise-rofs-";

/// Errors of the read-only filesystem backends.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RofsError {
    /// A tool is not installed.
    #[error("{tool} not found: {backend} needs it (install the Debian package {package}, or use backend = \"native\")")]
    Missing {
        /// `mksquashfs` or `mkfs.erofs`.
        tool: &'static str,
        /// The spec key and value asking for it.
        backend: &'static str,
        /// The Debian package.
        package: &'static str,
    },
    /// A tool ran and failed.
    #[error("{tool} failed ({status}): {stderr}")]
    Failed {
        /// Which tool.
        tool: &'static str,
        /// Exit status.
        status: String,
        /// What it printed (trimmed).
        stderr: String,
    },
    /// The tool's result is not the filesystem asked for.
    #[error("{tool} made an image blockwise cannot read back: {what}")]
    Unreadable {
        /// Which tool.
        tool: &'static str,
        /// What verify said.
        what: String,
    },
    /// The native squashfs writer failed.
    #[error(transparent)]
    Squashfs(blockwise_squashfs::Error),
    /// Temp file I/O failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl RofsError {
    /// True when a tool is missing (an unsupported setup rather than an I/O failure).
    #[must_use]
    pub fn is_missing_tool(&self) -> bool {
        matches!(self, RofsError::Missing { .. })
    }
}

/// Removes the temp files when dropped.
#[derive(Debug, Default)]
pub(crate) struct Scratch(pub(crate) Vec<PathBuf>);

impl Drop for Scratch {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

/// A [`BlockSink`] over a file (`pwrite`), growing it as needed.
struct FileSink<'a> {
    file: &'a File,
    len: u64,
}

impl BlockSink for FileSink<'_> {
    type Error = std::io::Error;
    fn len(&self) -> u64 {
        self.len
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.file.write_all_at(data, offset)
    }
}

/// A [`BlockSink`] that keeps nothing: for planning a squashfs image's size.
struct Discard;

impl BlockSink for Discard {
    type Error = std::io::Error;
    fn len(&self) -> u64 {
        u64::MAX
    }
    fn write_at(&mut self, _offset: u64, _data: &[u8]) -> Result<(), std::io::Error> {
        Ok(())
    }
}

/// A filesystem made before planning: the temp file (registered as content) to reference at
/// the partition's start.
#[derive(Debug)]
pub(crate) struct Made {
    /// Spec index.
    pub si: usize,
    /// Content id of the temp file.
    pub content: u64,
    /// Bytes to place (the file's length).
    pub len: u64,
}

/// Whether a partition is made before planning: squashfs always, EROFS with `mkfs.erofs`.
fn made_first(fs: FsKind, erofs: ErofsBackend) -> bool {
    fs == FsKind::Squashfs || (fs == FsKind::Erofs && erofs == ErofsBackend::MkfsErofs)
}

/// Whether the partition at `si` is filled by a tool reading the directory (no tree needed
/// to write it, but scanned all the same for the own-output rules and the times).
pub(crate) fn tool_backend(spec: &Spec, si: usize) -> bool {
    spec.partitions.get(si).is_some_and(|p| {
        (p.fs == FsKind::Squashfs && p.squashfs.backend == SquashfsBackend::Mksquashfs)
            || (p.fs == FsKind::Erofs && p.erofs.backend == ErofsBackend::MkfsErofs)
    })
}

/// Whether the host writes partition `si` itself (a [`Fill::External`](blockwise_image::Fill)).
pub(crate) fn external(spec: &Spec, si: usize) -> bool {
    spec.partitions
        .get(si)
        .is_some_and(|p| made_first(p.fs, p.erofs.backend))
}

fn run(
    tool: &'static str,
    cmd: &mut Command,
    backend: &'static str,
    package: &'static str,
) -> Result<(), RofsError> {
    let out = cmd.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            RofsError::Missing {
                tool,
                backend,
                package,
            }
        } else {
            RofsError::Failed {
                tool,
                status: e.to_string(),
                stderr: String::new(),
            }
        }
    })?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if text.is_empty() {
            text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
        // The first lines say what went wrong; a usage text after them does not.
        text = text.lines().take(3).collect::<Vec<_>>().join("; ");
        return Err(RofsError::Failed {
            tool,
            status: out.status.to_string(),
            stderr: text,
        });
    }
    Ok(())
}

/// The newest mtime in a tree (for `SOURCE_DATE_EPOCH` that clamps nothing).
fn newest(tree: Option<&Tree>) -> i64 {
    tree.map_or(0, |t| {
        t.nodes.iter().map(|n| n.meta.mtime).max().unwrap_or(0)
    })
}

/// Runs the tool of partition `si` into `img`.
fn run_tool(
    sf: &SpecFile,
    si: usize,
    dir: Option<&Path>,
    img: &Path,
    tree: Option<&Tree>,
    timestamp: i64,
    clamp: bool,
) -> Result<(), RofsError> {
    let Some(ps) = sf.spec.partitions.get(si) else {
        return Ok(());
    };
    // An empty directory stands in for absent contents.
    let empty = dir.is_none().then(|| img.with_extension("empty"));
    let dir = match (dir, &empty) {
        (Some(d), _) => d.to_path_buf(),
        (None, Some(e)) => {
            fs::create_dir_all(e).map_err(|source| RofsError::Io {
                path: e.clone(),
                source,
            })?;
            e.clone()
        }
        (None, None) => return Ok(()),
    };
    let ts = timestamp.max(0);
    let result = if ps.fs == FsKind::Squashfs {
        let o = &ps.squashfs;
        let mut cmd = Command::new("mksquashfs");
        cmd.arg(&dir)
            .arg(img)
            .args([
                "-noappend",
                "-no-progress",
                "-quiet",
                "-comp",
                o.compression.as_str(),
            ])
            .arg("-b")
            .arg(o.block_size.to_string())
            .arg("-mkfs-time")
            .arg(ts.to_string());
        if !o.fragments {
            cmd.arg("-no-fragments");
        }
        if let Some(l) = o.level {
            cmd.arg("-Xcompression-level").arg(l.to_string());
        }
        // squashfs-tools 4.5 can only set every time (-all-time), not clamp the newer ones:
        // the files keep their own mtimes, as the native writer does without a timestamp.
        cmd.env_remove("SOURCE_DATE_EPOCH");
        run(
            "mksquashfs",
            &mut cmd,
            "squashfs.backend = \"mksquashfs\"",
            "squashfs-tools",
        )
    } else {
        let o = &ps.erofs;
        let z = o.compressor().map(|c| match o.level {
            Some(l) => format!("-z{c},{l}"),
            None => format!("-z{c}"),
        });
        let uuid = blockwise_image::rofs::erofs_request(&sf.spec, si, None, 0, 0, timestamp)
            .map(|r| blockwise_erofs::uuid_string(&r.uuid()))
            .unwrap_or_default();
        let mut cmd = Command::new("mkfs.erofs");
        cmd.arg("--quiet").args(z).arg(format!("-U{uuid}"));
        if let Some(l) = &ps.label {
            // -L came with erofs-utils 1.6.
            let help = Command::new("mkfs.erofs")
                .arg("--help")
                .output()
                .map_err(|_| RofsError::Missing {
                    tool: "mkfs.erofs",
                    backend: "erofs.backend = \"mkfs.erofs\"",
                    package: "erofs-utils",
                })?;
            let text = String::from_utf8_lossy(&help.stdout).into_owned()
                + &String::from_utf8_lossy(&help.stderr);
            if !text.contains(" -L") {
                return Err(RofsError::Failed {
                    tool: "mkfs.erofs",
                    status: "no -L option".into(),
                    stderr: format!("this erofs-utils cannot set the volume label {l:?} (that needs erofs-utils 1.6 or later); leave label out, or use erofs.backend = \"native\""),
                });
            }
            cmd.arg(format!("-L{l}"));
        }
        // SOURCE_DATE_EPOCH: the build time, and the clamp of newer mtimes. Without a
        // timestamp asked for, one that clamps nothing keeps the files' times.
        let epoch = if clamp { ts } else { ts.max(newest(tree)) };
        cmd.arg(img)
            .arg(&dir)
            .env("SOURCE_DATE_EPOCH", epoch.to_string());
        run(
            "mkfs.erofs",
            &mut cmd,
            "erofs.backend = \"mkfs.erofs\"",
            "erofs-utils",
        )
    };
    if let Some(e) = empty {
        let _ = fs::remove_dir(e);
    }
    result
}

/// What verify reads from a bare filesystem image: its plan, or why it is not one.
fn read_back(path: &Path, tool: &'static str) -> Result<Option<FsPlan>, RofsError> {
    let src = crate::FileSource::open(path).map_err(|e| RofsError::Unreadable {
        tool,
        what: e.to_string(),
    })?;
    let opts = blockwise_verify::Options::new(path.display().to_string()).scan_gaps(false);
    let r = blockwise_verify::verify(&src, &opts).map_err(|e| RofsError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let fs = r.partitions.into_iter().next().and_then(|p| p.filesystem);
    match fs {
        Some(f @ (FsPlan::Squashfs(_) | FsPlan::Erofs(_))) => Ok(Some(f)),
        other => Err(RofsError::Unreadable {
            tool,
            what: format!("found {other:?}"),
        }),
    }
}

/// `contents` holding the output (or the work directory where the temp image goes) would put
/// the build's own files into the image: a tool reads the directory whole, so this is
/// refused naming the key.
fn refuse_own_output(sf: &SpecFile, dir: &Path, work_dir: &Path, si: usize) -> Result<(), Error> {
    let temp = work_dir.join(TEMP_PREFIX);
    let held = OwnOutputs::inside(&sf.outputs, dir)
        .or_else(|| OwnOutputs::inside(std::slice::from_ref(&temp), dir).map(|_| work_dir.into()));
    match held {
        Some(p) => Err(SpecError::new(
            format!("partition[{}].contents", si + 1),
            format!(
                "{} holds {}, where this build writes: the tool would copy the build's own files into the image; write the output outside the contents directory, or use backend = \"native\" (which leaves them out)",
                dir.display(),
                p.display()
            ),
        )
        .into()),
        None => Ok(()),
    }
}

fn err(si: usize, source: RofsError) -> Error {
    Error::Rofs {
        index: si + 1,
        source,
    }
}

/// Makes the squashfs partitions and the tool-backend ones before planning, filling in
/// `prebuilt` (length and geometry) for the planner. With `work_dir` (a build) the images go
/// to temp files there and are returned to be referenced; without (a plan) only those whose
/// size the plan needs are made, into nothing (squashfs) or a temp directory (tools).
pub(crate) fn make_first(
    sf: &mut SpecFile,
    trees: &[Option<Tree>],
    content: &mut HostContent,
    work_dir: Option<&Path>,
    timestamp: i64,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Made>, Scratch), Error> {
    let mut made = Vec::new();
    let mut scratch = Scratch::default();
    if let Some(w) = work_dir {
        crate::output::remove_stale_in(w, TEMP_PREFIX, ".img");
    }
    let clamp =
        sf.spec.image.timestamp.is_some() || std::env::var_os("SOURCE_DATE_EPOCH").is_some();
    let plan_dir = std::env::temp_dir();
    for si in 0..sf.spec.partitions.len() {
        let Some(ps) = sf.spec.partitions.get(si) else {
            continue;
        };
        if !made_first(ps.fs, ps.erofs.backend) {
            continue;
        }
        let needed_by_plan = ps.size == blockwise_geometry::SizeSpec::Source || ps.verity.is_some();
        if work_dir.is_none() && !needed_by_plan {
            continue;
        }
        let tree = trees.get(si).and_then(Option::as_ref);
        let dir = ps.contents.as_ref().map(|c| sf.resolve(c));
        let tool = tool_backend(&sf.spec, si);
        let (prebuilt, path) = if !tool && work_dir.is_none() {
            // Plan: compress into nothing, for the size.
            let req = blockwise_image::rofs::squashfs_request(&sf.spec, si, u64::MAX, timestamp)
                .ok_or_else(|| {
                    err(
                        si,
                        RofsError::Squashfs(blockwise_squashfs::Error::Tree("no request".into())),
                    )
                })?;
            let empty = Tree::default();
            let w = blockwise_squashfs::write(&mut Discard, &req, tree.unwrap_or(&empty), content)
                .map_err(|e| blockwise_image::rofs::squashfs_failure(si, e))?;
            warnings.extend(blockwise_image::rofs::dropped_xattrs_warning(
                si + 1,
                &w.dropped_xattrs,
            ));
            let fs = blockwise_squashfs::plan_of(&ps.squashfs, Some(w.bytes_used), Some(w.inodes));
            (
                Prebuilt {
                    len: w.padded_bytes,
                    fs: Some(FsPlan::Squashfs(fs)),
                },
                None,
            )
        } else {
            let wd = work_dir.unwrap_or(&plan_dir);
            // PID-START-TID-N: unique in this process, and a later build can tell a killed
            // build's leftover. Created exclusively, so it is never someone else's file.
            let path = wd.join(format!("{TEMP_PREFIX}{}.img", crate::output::unique_tag()));
            let file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            scratch.0.push(path.clone());
            if tool {
                if let Some(d) = &dir {
                    refuse_own_output(sf, d, wd, si)?;
                }
                drop(file);
                run_tool(sf, si, dir.as_deref(), &path, tree, timestamp, clamp)
                    .map_err(|e| err(si, e))?;
                let name = if ps.fs == FsKind::Squashfs {
                    "mksquashfs"
                } else {
                    "mkfs.erofs"
                };
                let fs = read_back(&path, name).map_err(|e| err(si, e))?;
                let len = fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len();
                (Prebuilt { len, fs }, Some(path))
            } else {
                let req =
                    blockwise_image::rofs::squashfs_request(&sf.spec, si, u64::MAX, timestamp)
                        .ok_or_else(|| {
                            err(
                                si,
                                RofsError::Squashfs(blockwise_squashfs::Error::Tree(
                                    "no request".into(),
                                )),
                            )
                        })?;
                let empty = Tree::default();
                let mut sink = FileSink {
                    file: &file,
                    len: u64::MAX,
                };
                let w = blockwise_squashfs::write(&mut sink, &req, tree.unwrap_or(&empty), content)
                    .map_err(|e| blockwise_image::rofs::squashfs_failure(si, e))?;
                warnings.extend(blockwise_image::rofs::dropped_xattrs_warning(
                    si + 1,
                    &w.dropped_xattrs,
                ));
                file.sync_data().map_err(|e| Error::io(&path, e))?;
                let fs =
                    blockwise_squashfs::plan_of(&ps.squashfs, Some(w.bytes_used), Some(w.inodes));
                (
                    Prebuilt {
                        len: w.padded_bytes,
                        fs: Some(FsPlan::Squashfs(fs)),
                    },
                    Some(path),
                )
            }
        };
        if let (Some(path), Some(_)) = (&path, work_dir) {
            let md = fs::metadata(path).map_err(|e| Error::io(path, e))?;
            let id = content.add(path.clone(), &md);
            made.push(Made {
                si,
                content: id,
                len: md.len(),
            });
        }
        if let Some(p) = sf.spec.partitions.get_mut(si) {
            p.prebuilt = Some(prebuilt);
        }
    }
    if work_dir.is_none() {
        // A plan keeps nothing.
        drop(scratch);
        scratch = Scratch::default();
    }
    Ok((made, scratch))
}

/// References the images made first at their partitions' starts.
pub(crate) fn place(
    image: &mut ImageMap,
    plan: &Plan,
    made: &[Made],
    content: &HostContent,
) -> Result<(), Error> {
    // Every copy of the partition (A/B slots hold the same image: squashfs has no ID of its
    // own, and the mkfs.erofs backend is refused with slots).
    for m in made {
        for p in plan.partitions.iter().filter(|p| p.spec_index == m.si) {
            place_one(image, p, m, content)?;
        }
    }
    Ok(())
}

fn place_one(
    image: &mut ImageMap,
    p: &blockwise_geometry::PartitionPlan,
    m: &Made,
    content: &HostContent,
) -> Result<(), Error> {
    {
        let mut sub = SubSink::new(image, p.start_bytes, p.size_bytes).map_err(|e| {
            Error::Image(blockwise_image::Error::Partition {
                index: m.si + 1,
                source: blockwise_image::PartitionError::Window(e),
            })
        })?;
        let r = ContentRef {
            content: m.content,
            offset: 0,
            len: m.len,
        };
        sub.write_content(0, r, content).map_err(|e| {
            Error::Image(blockwise_image::Error::Partition {
                index: m.si + 1,
                source: blockwise_image::PartitionError::Sink {
                    offset: 0,
                    source: Box::new(std::io::Error::other(e.to_string())),
                },
            })
        })?;
    }
    Ok(())
}

/// Computes the plan's hash trees from the image as written (metadata in memory, content read
/// from the files: one read of every covered partition), maps every covered byte, writes the
/// trees and records the root hashes in `plan`.
pub(crate) fn finish_verity(
    image: &mut ImageMap,
    plan: &mut Plan,
    content: &HostContent,
) -> Result<(), Error> {
    let regions = blockwise_image::verity_data_regions(plan);
    if regions.is_empty() {
        return Ok(());
    }
    let mapped = image.mapped_ranges();
    blockwise_image::fill_unmapped(image, &mapped, &regions)?;
    let trees = blockwise_image::verity_trees(plan, &image.reader(content))?;
    blockwise_image::write_verity(image, plan, &trees)?;
    Ok(())
}

/// The files `OUT.roothash` (one hash tree) or `OUT.NAME.roothash` (several) beside `out`,
/// with their contents: the root hash and a newline. `hashes` are
/// [`blockwise_image::root_hashes`].
#[must_use]
pub fn roothash_files(hashes: &[(String, String)], out: &Path) -> Vec<(PathBuf, String)> {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let at = |suffix: &str| out.with_file_name(format!("{name}{suffix}"));
    match hashes {
        [] => Vec::new(),
        [(_, h)] => vec![(at(".roothash"), format!("{h}\n"))],
        many => many
            .iter()
            .map(|(n, h)| {
                // A partition name may hold any character; the file name keeps the safe ones.
                let n: String = n
                    .chars()
                    .map(|c| {
                        if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                            c
                        } else {
                            '_'
                        }
                    })
                    .collect();
                (at(&format!(".{n}.roothash")), format!("{h}\n"))
            })
            .collect(),
    }
}

/// Writes [`roothash_files`].
pub(crate) fn write_roothash(hashes: &[(String, String)], out: &Path) -> Result<(), Error> {
    for (path, text) in roothash_files(hashes, out) {
        fs::write(&path, text).map_err(|e| Error::write(&path, e))?;
    }
    Ok(())
}
