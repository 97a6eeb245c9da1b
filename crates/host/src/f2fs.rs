//! The F2FS backend (`fs = "f2fs"`): `mkfs.f2fs` and `sload.f2fs` from f2fs-tools, without
//! root, into a temporary file of the partition's size next to the output.
//!
//! The geometry comes from the plan ([`F2fsPlan`]): segments per section (`-s`) and sections
//! per zone (`-z`) so that a section is the erase block, the label (`-l`) and the UUID
//! (`-U`, from the seed). Everything that would vary between two builds is pinned: the
//! creation time (`mkfs.f2fs -T`, and `sload.f2fs -T` when the spec or `SOURCE_DATE_EPOCH`
//! fixes the time; otherwise the files keep their own mtimes), the checkpoint version
//! (`mkfs.f2fs -r`: srand(0) instead of the clock), the root owner (`-R 0:0`), the directory
//! order (`LC_ALL=C`: sload.f2fs sorts with `alphasort`, i.e. the locale). mkfs.f2fs also
//! writes the building machine's kernel version (`uname`/`/proc/version`) into both
//! superblocks' `version` and `init_version`; no option changes that, so this backend
//! overwrites both fields with a fixed string (and the superblock CRC when the sb_checksum
//! feature is on; it is not by default). The kernel never reads these fields; fsck.f2fs only
//! prints them.
//!
//! `[[partition.entry]]` modes and owners are then set in the inodes (`f2fs_entries`).
//! After the tools ran, the superblock is read back with `blockwise-verify`'s parser and
//! compared with the plan: another f2fs-tools version that lays the volume out differently is
//! an error naming both values, never an image that contradicts `plan`. The image map then
//! references the temp file's non-zero 4 KiB runs, as the mke2fs backend does, so memory
//! follows metadata.

use std::fs::{self, File};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use blockwise_geometry::fsplan::f2fs::{mkfs_layout, F2fsRequest, F2FS_BLOCK, F2FS_SUPER_OFFSET};
use blockwise_geometry::{BlockSink, ContentRef, F2fsPlan, NodeKind, Tree};
use blockwise_verify::f2fs::raw::{INIT_VERSION_OFFSET, VERSION_LEN, VERSION_OFFSET};
use blockwise_verify::f2fs::{crc32, parse_superblock, CRC_OFFSET, FEATURE_SB_CHKSUM};

/// What this backend writes into the superblocks' `version` and `init_version`.
pub const VERSION_STRING: &str = "blockwise (mkfs.f2fs, sload.f2fs)";

/// `.blockwise-f2fs-PID-START-TID-N.img`: the temp filesystem of one partition.
const TEMP_PREFIX: &str = ".blockwise-f2fs-";

/// Errors of the F2FS backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum F2fsError {
    /// A tool of f2fs-tools is not installed.
    #[error("{tool} not found (looked in PATH, /usr/sbin and /sbin): fs = \"f2fs\" needs f2fs-tools (install the Debian/Ubuntu package f2fs-tools)")]
    Missing {
        /// `mkfs.f2fs` or `sload.f2fs`.
        tool: &'static str,
    },
    /// A tool ran and failed.
    #[error("{tool} failed ({status}): {stderr}")]
    Failed {
        /// Which tool.
        tool: &'static str,
        /// Exit status.
        status: String,
        /// What it printed (trimmed, last lines).
        stderr: String,
    },
    /// sload.f2fs ran out of free segments: the contents do not fit.
    #[error("the contents ({} in files) do not fit in this F2FS of {}: sload.f2fs ran out of free segments (F2FS keeps {reserved} of its {main} main-area segments of 2 MiB free for cleaning and 6 open for its logs, and sets aside more for overprovisioning); make the partition larger", blockwise_geometry::format_size(*.content_bytes), blockwise_geometry::format_size(*.size_bytes))]
    NoSpace {
        /// Bytes of file data in `contents`.
        content_bytes: u64,
        /// The partition size.
        size_bytes: u64,
        /// `segment_count_main`.
        main: u32,
        /// `rsvd_segment_count`.
        reserved: u32,
    },
    /// mkfs.f2fs laid the volume out differently from the plan.
    #[error("mkfs.f2fs{version} made {field} {found}, but the plan says {planned}: this f2fs-tools lays F2FS out differently from the one blockwise follows (1.15); the image is not written")]
    Layout {
        /// The superblock field.
        field: &'static str,
        /// What the plan says.
        planned: String,
        /// What mkfs.f2fs wrote.
        found: String,
        /// ` VERSION` of the tool, when known.
        version: String,
    },
    /// The result does not parse.
    #[error("the F2FS superblock mkfs.f2fs wrote does not parse: {0}")]
    Corrupt(String),
    /// A `[[partition.entry]]` cannot be applied (the path is not in `contents`, …).
    #[error("entry[{entry}].path: {reason}")]
    Entry {
        /// 1-based entry number.
        entry: usize,
        /// Why.
        reason: String,
    },
    /// Temporary file I/O failed.
    #[error("{}: {source}", blockwise_geometry::display_path(path))]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Placing the result in the image failed.
    #[error("writing the F2FS result into the image at byte {offset} failed: {message}")]
    Sink {
        /// Partition offset.
        offset: u64,
        /// The sink's error.
        message: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> F2fsError + '_ {
    move |source| F2fsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The temp filesystem; removed when dropped. [`Built`](crate::Built) keeps it until the
/// image is written: its data is referenced, not copied.
#[derive(Debug)]
pub(crate) struct TempImage(PathBuf);

impl Drop for TempImage {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// `tool` on `PATH`, else in `/usr/sbin` or `/sbin` (where Debian puts f2fs-tools, often
/// outside a normal user's `PATH`).
fn find_tool(tool: &'static str) -> Result<PathBuf, F2fsError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .ok_or(F2fsError::Missing { tool })
}

fn run(tool: &'static str, cmd: &mut Command) -> Result<Output, F2fsError> {
    run_classified(tool, cmd, |_| None)
}

/// What sload.f2fs prints when it finds no free block: `Not enough space` (the user block
/// count is reached) or `Can't find free block` and an assertion in `reserve_new_block` or
/// `move_one_curseg_info` (no free segment beyond the reserved ones).
fn out_of_space(text: &str) -> bool {
    text.contains("Not enough space")
        || text.contains("Can't find free block")
        || text.contains("move_one_curseg_info")
}

/// Runs `tool`; on failure, `classify` may turn its whole output into a specific error.
fn run_classified(
    tool: &'static str,
    cmd: &mut Command,
    classify: impl FnOnce(&str) -> Option<F2fsError>,
) -> Result<Output, F2fsError> {
    let out = cmd.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            F2fsError::Missing { tool }
        } else {
            F2fsError::Failed {
                tool,
                status: e.to_string(),
                stderr: String::new(),
            }
        }
    })?;
    if !out.status.success() {
        // Both tools report errors on stdout; keep the last lines of both.
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some(e) = classify(&text) {
            return Err(e);
        }
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let tail = lines.len().saturating_sub(4);
        return Err(F2fsError::Failed {
            tool,
            status: out.status.to_string(),
            stderr: blockwise_geometry::display_str(
                &lines.get(tail..).unwrap_or_default().join("; "),
            ),
        });
    }
    Ok(out)
}

/// The `mkfs.f2fs` version (`mkfs.f2fs 1.15.0 (2022-05-13)` → `1.15.0`), when it says.
fn version(mkfs: &Path) -> Option<String> {
    let out = Command::new(mkfs).arg("-V").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .skip_while(|w| *w != "mkfs.f2fs")
        .nth(1)
        .map(str::to_string)
}

/// The `mkfs.f2fs` arguments for this plan (without the device).
pub(crate) fn mkfs_args(req: &F2fsRequest, plan: &F2fsPlan, timestamp: i64) -> Vec<String> {
    let mut args = vec![
        "-q".to_string(),
        "-f".into(),
        // srand(0): a fixed checkpoint version instead of one from the clock.
        "-r".into(),
        // No discard: it is a file.
        "-t".into(),
        "0".into(),
        "-T".into(),
        timestamp.max(0).to_string(),
        "-R".into(),
        "0:0".into(),
        "-U".into(),
        req.uuid.clone(),
        "-s".into(),
        plan.segments_per_section.to_string(),
        "-z".into(),
        plan.sections_per_zone.to_string(),
    ];
    if let Some(l) = &req.label {
        args.push("-l".into());
        args.push(l.clone());
    }
    args
}

/// What sload.f2fs cannot store, as warnings: special files (left out) and extended
/// attributes (dropped).
pub(crate) fn tree_warnings(tree: &Tree, index: usize) -> Vec<String> {
    let mut special: Vec<String> = Vec::new();
    let mut special_count = 0usize;
    let mut xattr_first = None;
    let mut xattr_count = 0usize;
    for (id, n) in tree.nodes.iter().enumerate() {
        let is_special = !matches!(
            n.kind,
            NodeKind::Dir { .. } | NodeKind::File { .. } | NodeKind::Symlink { .. }
        );
        if is_special {
            special_count += 1;
            if special.is_empty() {
                special.push(tree.path(id));
            }
        }
        if !n.meta.xattrs.is_empty() {
            xattr_count += 1;
            xattr_first.get_or_insert_with(|| tree.path(id));
        }
    }
    let mut out = Vec::new();
    if let Some(first) = special.first() {
        out.push(format!(
            "partition[{index}]: sload.f2fs stores regular files, directories and symlinks only: {special_count} device node(s), fifo(s) or socket(s) left out (the first: {first}); use fs = \"ext4\" to keep them"
        ));
    }
    if let Some(first) = xattr_first {
        out.push(format!(
            "partition[{index}]: sload.f2fs does not copy extended attributes: those of {xattr_count} path(s) dropped (the first: {first}); use fs = \"ext4\" to keep them"
        ));
    }
    out
}

/// Overwrites `version` and `init_version` of both superblocks with [`VERSION_STRING`]
/// (and fixes the CRC when the volume has one).
fn pin_versions(f: &mut File, img: &Path) -> Result<(), F2fsError> {
    let mut fixed = [0u8; VERSION_LEN];
    if let Some(d) = fixed.get_mut(..VERSION_STRING.len()) {
        d.copy_from_slice(VERSION_STRING.as_bytes());
    }
    for block in 0..2u64 {
        let at = block * F2FS_BLOCK + F2FS_SUPER_OFFSET;
        let mut sb = vec![0u8; 3072];
        f.seek(SeekFrom::Start(at)).map_err(io_err(img))?;
        f.read_exact(&mut sb).map_err(io_err(img))?;
        for off in [VERSION_OFFSET, INIT_VERSION_OFFSET] {
            sb[off..off + VERSION_LEN].copy_from_slice(&fixed);
        }
        let feature = u32::from_le_bytes([sb[0x884], sb[0x885], sb[0x886], sb[0x887]]);
        if feature & FEATURE_SB_CHKSUM != 0 {
            let crc = crc32(&sb[..CRC_OFFSET]);
            sb[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
        }
        f.seek(SeekFrom::Start(at)).map_err(io_err(img))?;
        f.write_all(&sb).map_err(io_err(img))?;
    }
    f.flush().map_err(io_err(img))
}

/// Compares what mkfs.f2fs wrote with the plan.
fn check_layout(block0: &[u8], plan: &F2fsPlan, start: u64, mkfs: &Path) -> Result<(), F2fsError> {
    let sb = parse_superblock(block0).map_err(|e| F2fsError::Corrupt(e.to_string()))?;
    let found = sb.to_plan(start, 1);
    let pairs: [(&'static str, String, String); 9] = [
        ("blocks", plan.blocks.to_string(), found.blocks.to_string()),
        (
            "segments per section",
            plan.segments_per_section.to_string(),
            found.segments_per_section.to_string(),
        ),
        (
            "sections per zone",
            plan.sections_per_zone.to_string(),
            found.sections_per_zone.to_string(),
        ),
        (
            "segments",
            plan.segments.to_string(),
            found.segments.to_string(),
        ),
        (
            "main-area segments",
            plan.main_segments.to_string(),
            found.main_segments.to_string(),
        ),
        (
            "segment0 at byte",
            plan.segment0_start_bytes.to_string(),
            found.segment0_start_bytes.to_string(),
        ),
        (
            "the main area at byte",
            plan.main_start_bytes.to_string(),
            found.main_start_bytes.to_string(),
        ),
        (
            "label",
            format!("{:?}", plan.label),
            format!("{:?}", found.label),
        ),
        (
            "UUID",
            format!("{:?}", plan.uuid),
            format!("{:?}", found.uuid),
        ),
    ];
    for (field, planned, found) in pairs {
        if planned != found {
            return Err(F2fsError::Layout {
                field,
                planned,
                found,
                version: version(mkfs).map(|v| format!(" {v}")).unwrap_or_default(),
            });
        }
    }
    Ok(())
}

/// Places the non-zero 4 KiB runs of `img` (registered in `content`) into `sink` as
/// references, reading it once in 1 MiB chunks.
fn map_nonzero_runs<S: BlockSink + ?Sized>(
    sink: &mut S,
    content: &mut crate::HostContent,
    img: &Path,
) -> Result<(), F2fsError> {
    let mut f = File::open(img).map_err(io_err(img))?;
    let md = f.metadata().map_err(io_err(img))?;
    let id = content.add(img.to_path_buf(), &md);
    let mut place = |start: u64, end: u64| -> Result<(), F2fsError> {
        let r = ContentRef {
            content: id,
            offset: start,
            len: end - start,
        };
        sink.write_content(start, r, &*content)
            .map_err(|e| F2fsError::Sink {
                offset: start,
                message: e.to_string(),
            })
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    let mut run: Option<u64> = None;
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            let n = f.read(&mut buf[filled..]).map_err(io_err(img))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            break;
        }
        for (k, chunk) in buf[..filled].chunks(4096).enumerate() {
            let at = off + (k as u64) * 4096;
            match (chunk.iter().any(|&b| b != 0), run) {
                (true, None) => run = Some(at),
                (false, Some(start)) => {
                    place(start, at)?;
                    run = None;
                }
                _ => {}
            }
        }
        off += filled as u64;
    }
    if let Some(start) = run {
        place(start, off)?;
    }
    Ok(())
}

/// How to fill one F2FS partition.
pub(crate) struct F2fsJob<'a> {
    /// The request (from the spec).
    pub req: &'a F2fsRequest,
    /// The plan (from the request).
    pub plan: &'a F2fsPlan,
    /// `contents`, if any.
    pub contents: Option<&'a Path>,
    /// Creation time (the root directory; every file with `fixed_times`).
    pub timestamp: i64,
    /// Give every file `timestamp` (the spec or SOURCE_DATE_EPOCH fixes the time).
    pub fixed_times: bool,
    /// `sload.f2fs -P`.
    pub preserve_owners: bool,
    /// `[[partition.entry]]`: modes and owners of paths from `contents`.
    pub entries: &'a [blockwise_image::EntrySpec],
    /// Bytes of file data in `contents` (for the message when they do not fit).
    pub content_bytes: u64,
}

/// Builds the partition with mkfs.f2fs (+ sload.f2fs for `contents`) in a temp file under
/// `work_dir`, checks it against the plan and places its non-zero runs in `sink` (a window
/// onto the partition) by reference. Keep the returned guard until the image is written.
pub(crate) fn write_with_f2fs<S: BlockSink + ?Sized>(
    sink: &mut S,
    content: &mut crate::HostContent,
    job: &F2fsJob<'_>,
    work_dir: &Path,
) -> Result<TempImage, F2fsError> {
    let mkfs = find_tool("mkfs.f2fs")?;
    let sload = if job.contents.is_some() {
        Some(find_tool("sload.f2fs")?)
    } else {
        None
    };
    crate::output::remove_stale_in(work_dir, TEMP_PREFIX, ".img");
    let tag = crate::output::unique_tag();
    let img = work_dir.join(format!("{TEMP_PREFIX}{tag}.img"));
    // Created exclusively (never another build's file), and removed from then on.
    let f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&img)
        .map_err(io_err(&img))?;
    let guard = TempImage(img.clone());
    f.set_len(job.req.partition_size_bytes)
        .map_err(io_err(&img))?;
    drop(f);
    let mut cmd = Command::new(&mkfs);
    cmd.args(mkfs_args(job.req, job.plan, job.timestamp))
        .arg(&img)
        .env("LC_ALL", "C");
    run("mkfs.f2fs", &mut cmd)?;
    if let (Some(sload), Some(dir)) = (&sload, job.contents) {
        let mut cmd = Command::new(sload);
        cmd.arg("-f").arg(dir);
        if job.fixed_times {
            cmd.arg("-T").arg(job.timestamp.max(0).to_string());
        }
        if job.preserve_owners {
            cmd.arg("-P");
        }
        cmd.arg(&img).env("LC_ALL", "C");
        run_classified("sload.f2fs", &mut cmd, |text| {
            out_of_space(text).then(|| {
                let l = mkfs_layout(
                    job.req.partition_size_bytes,
                    job.plan.segments_per_section,
                    job.plan.sections_per_zone,
                );
                F2fsError::NoSpace {
                    content_bytes: job.content_bytes,
                    size_bytes: job.req.partition_size_bytes,
                    main: job.plan.main_segments,
                    reserved: l.map_or(0, |l| l.reserved_segments),
                }
            })
        })?;
    }
    if !job.entries.is_empty() {
        crate::f2fs_entries::apply(&img, job.entries).map_err(|e| F2fsError::Entry {
            entry: e.entry,
            reason: e.reason,
        })?;
    }
    {
        let mut f = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&img)
            .map_err(io_err(&img))?;
        pin_versions(&mut f, &img)?;
        let mut block0 = vec![0u8; 4096];
        f.seek(SeekFrom::Start(0)).map_err(io_err(&img))?;
        f.read_exact(&mut block0).map_err(io_err(&img))?;
        check_layout(&block0, job.plan, job.req.partition_start_bytes, &mkfs)?;
    }
    map_nonzero_runs(sink, content, &img)?;
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;
    use blockwise_geometry::fsplan::f2fs::{plan_f2fs, F2fsOptions};

    #[test]
    fn args_follow_the_plan() {
        let req = F2fsRequest {
            partition_start_bytes: 8 << 20,
            partition_size_bytes: 512 << 20,
            erase_block_bytes: 8 << 20,
            options: F2fsOptions::default(),
            label: Some("-root".into()),
            uuid: "01234567-89ab-cdef-0123-456789abcdef".into(),
        };
        let plan = plan_f2fs(&req).unwrap();
        let a = mkfs_args(&req, &plan, 1_700_000_000);
        let s = a.join(" ");
        assert!(s.contains("-s 4 -z 1"), "{s}");
        assert!(s.contains("-T 1700000000 -R 0:0 -U 01234567-"), "{s}");
        assert!(a.ends_with(&["-l".to_string(), "-root".to_string()]), "{s}");
    }

    #[test]
    fn out_of_space_is_recognised() {
        assert!(out_of_space(
            "[reserve_new_block:60] Can't find free block[ASSERT] (reserve_new_block:  61) 0"
        ));
        assert!(out_of_space("\tError: Not enough space\n"));
        assert!(out_of_space(
            "[ASSERT] (move_one_curseg_info:2840) ret == 0"
        ));
        assert!(!out_of_space("Error: Failed to open the device!"));
    }

    #[test]
    fn missing_tool_names_the_package() {
        let e = F2fsError::Missing { tool: "mkfs.f2fs" }.to_string();
        assert!(e.contains("f2fs-tools"), "{e}");
    }
}
